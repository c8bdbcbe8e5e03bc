package org.example.pricing;

import java.util.HashMap;
import java.util.Map;

/** Applies a named pricing rule to an order line. */
public class PriceCalculator {

    private final RuleEngine engine = new RuleEngine();
    private final Map<String, String> rules = new HashMap<>();

    public void define(String name, String rule) {
        rules.put(name, rule);
    }

    /** Line total in cents, rounded half-up. */
    public long lineTotalCents(String ruleName, double price, int qty, double discount) {
        String rule = rules.get(ruleName);
        if (rule == null) {
            throw new IllegalArgumentException("unknown rule: " + ruleName);
        }
        Map<String, Double> vars = new HashMap<>();
        vars.put("price", price);
        vars.put("qty", (double) qty);
        vars.put("discount", discount);
        return Math.round(engine.evaluate(rule, vars) * 100);
    }
}
