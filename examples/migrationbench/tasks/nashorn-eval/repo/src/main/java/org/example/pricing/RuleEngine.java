package org.example.pricing;

import java.util.Map;
import javax.script.Bindings;
import javax.script.ScriptEngine;
import javax.script.ScriptEngineManager;
import javax.script.ScriptException;

/**
 * Evaluates pricing rules written as arithmetic expressions over named variables, e.g.
 * {@code price * qty * (1 - discount)}. Rules are evaluated with JavaScript semantics:
 * every number is a double, so {@code 7 / 2} is 3.5 and {@code 1 / 0} is Infinity.
 */
public class RuleEngine {

    private final ScriptEngine engine;

    public RuleEngine() {
        engine = new ScriptEngineManager().getEngineByName("nashorn");
        if (engine == null) {
            throw new IllegalStateException("no JavaScript engine available");
        }
    }

    public double evaluate(String rule, Map<String, Double> variables) {
        Bindings bindings = engine.createBindings();
        bindings.putAll(variables);
        try {
            Object result = engine.eval(rule, bindings);
            if (!(result instanceof Number)) {
                throw new IllegalArgumentException("rule is not numeric: " + rule);
            }
            return ((Number) result).doubleValue();
        } catch (ScriptException e) {
            throw new IllegalArgumentException("bad rule: " + rule, e);
        }
    }
}
