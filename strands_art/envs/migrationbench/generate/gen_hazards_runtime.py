"""Removed-API hazards that compile on 17 and fail when the tests run (see :mod:`.gen_hazards`).

* ``nashorn``: a ``javax.script`` JavaScript engine (Nashorn left in 15); fix: a small
  recursive-descent parser in place of the engine.
* ``reflective-access``: ``setAccessible`` on private fields of ``java.lang.String`` or
  ``java.util.ArrayList`` (denied by strong encapsulation); fix: the public API, helper deleted.

Over 450 lines because most of it is the Java sources the two hazards write (templates), not
logic.
"""

from __future__ import annotations

import random

from strands_art.envs.migrationbench.generate.gen_java import (
    TOKENS,
    Component,
    Hazard,
    TestCase,
    fill,
    jdouble,
    jstr,
    pick_tests,
)

# --------------------------------------------------------------------------- Nashorn

_NASHORN = """package $pkg;

import java.util.Map;
import javax.script.Bindings;
import javax.script.ScriptEngine;
import javax.script.ScriptEngineManager;
import javax.script.ScriptException;

/**
 * Evaluates $what formulas over named variables, e.g. {@code $example}, with JavaScript
 * semantics: every number is a double, so {@code 7 / 2} is 3.5.
 */
public class $cls {

    private final ScriptEngine engine;

    public $cls() {
        engine = new ScriptEngineManager().getEngineByName("$engine");
        if (engine == null) {
            throw new IllegalStateException("no JavaScript engine available");
        }
    }

    public double evaluate(String formula, Map<String, Double> variables) {
        Bindings bindings = engine.createBindings();
        bindings.putAll(variables);
        try {
            Object result = engine.eval(formula, bindings);
            if (!(result instanceof Number)) {
                throw new IllegalArgumentException("not numeric: " + formula);
            }
            return ((Number) result).doubleValue();
        } catch (ScriptException e) {
            throw new IllegalArgumentException("bad formula: " + formula, e);
        }
    }
}
"""

_PARSER = """package $pkg;

import java.util.Map;

/**
 * Evaluates $what formulas over named variables, e.g. {@code $example}, with JavaScript
 * semantics: every number is a double, so {@code 7 / 2} is 3.5.
 *
 * <p>Supports {@code + - * /}, unary minus and plus, parentheses, decimal literals and
 * variables (a recursive-descent parser; the Nashorn engine was removed in Java 15).
 */
public class $cls {

    public double evaluate(String formula, Map<String, Double> variables) {
        return new Parser(formula, variables).parse();
    }

    private static final class Parser {
        private final String src;
        private final Map<String, Double> vars;
        private int pos;

        Parser(String src, Map<String, Double> vars) {
            this.src = src;
            this.vars = vars;
        }

        double parse() {
            double value = expression();
            skipSpaces();
            if (pos != src.length()) {
                throw error("unexpected '" + src.charAt(pos) + "'");
            }
            return value;
        }

        private double expression() {
            double value = term();
            while (true) {
                if (eat('+')) {
                    value += term();
                } else if (eat('-')) {
                    value -= term();
                } else {
                    return value;
                }
            }
        }

        private double term() {
            double value = unary();
            while (true) {
                if (eat('*')) {
                    value *= unary();
                } else if (eat('/')) {
                    value /= unary();
                } else {
                    return value;
                }
            }
        }

        private double unary() {
            if (eat('-')) {
                return -unary();
            }
            if (eat('+')) {
                return unary();
            }
            return primary();
        }

        private double primary() {
            skipSpaces();
            if (eat('(')) {
                double value = expression();
                if (!eat(')')) {
                    throw error("missing ')'");
                }
                return value;
            }
            int start = pos;
            if (pos < src.length() && (Character.isDigit(src.charAt(pos)) || src.charAt(pos) == '.')) {
                while (pos < src.length() && (Character.isDigit(src.charAt(pos)) || src.charAt(pos) == '.')) {
                    pos++;
                }
                try {
                    return Double.parseDouble(src.substring(start, pos));
                } catch (NumberFormatException e) {
                    throw error("bad number");
                }
            }
            if (pos < src.length() && Character.isJavaIdentifierStart(src.charAt(pos))) {
                while (pos < src.length() && Character.isJavaIdentifierPart(src.charAt(pos))) {
                    pos++;
                }
                String name = src.substring(start, pos);
                Double value = vars.get(name);
                if (value == null) {
                    throw error(name + " is not defined");
                }
                return value;
            }
            throw error(pos < src.length() ? "unexpected '" + src.charAt(pos) + "'" : "unexpected end");
        }

        private boolean eat(char c) {
            skipSpaces();
            if (pos < src.length() && src.charAt(pos) == c) {
                pos++;
                return true;
            }
            return false;
        }

        private void skipSpaces() {
            while (pos < src.length() && Character.isWhitespace(src.charAt(pos))) {
                pos++;
            }
        }

        private IllegalArgumentException error(String what) {
            return new IllegalArgumentException("bad formula: " + src + " (" + what + " at " + pos + ")");
        }
    }
}
"""

_VARS = {
    "pricing": ["price", "qty", "discount"],
    "scoring": ["hits", "misses", "bonus"],
    "payroll": ["hours", "rate", "overtime"],
    "shipping": ["weight", "distance", "surcharge"],
}


def nashorn(rng: random.Random, pkg: str, artifact: str) -> Hazard:
    what = rng.choice(sorted(_VARS))
    names = _VARS[what]
    cls = rng.choice(["RuleEngine", "FormulaEvaluator", "ScriptedRules", "Expressions"])
    engine = rng.choice(["nashorn", "JavaScript", "js"])
    values = {n: float(rng.randint(1, 40)) + rng.choice([0.0, 0.5, 0.25]) for n in names}
    a, b, c = names
    example = f"{a} * {b} - {c}"
    formulas = [
        (f"{a} * {b}", values[a] * values[b]),
        (f"{a} * ({b} + {c})", values[a] * (values[b] + values[c])),
        (f"{a} - {b} * {c}", values[a] - values[b] * values[c]),
        (f"({a} + {b}) / {c}", (values[a] + values[b]) / values[c]),
        (f"-{a} + {c} / 4", -values[a] + values[c] / 4),
    ]
    put = ["Map<String, Double> vars = new HashMap<>();"] + [
        f'vars.put("{n}", {jdouble(v)});' for n, v in values.items()
    ]
    f1, f2 = rng.sample(formulas, 2)
    x, y = rng.randint(1, 9), rng.randint(1, 9)
    ev = f"new {cls}().evaluate"
    makers = [
        lambda: TestCase(
            "bindsVariables", [*put, f"assertEquals({jdouble(f1[1])}, {ev}({jstr(f1[0])}, vars), 1e-9);"]
        ),
        lambda: TestCase(
            "respectsPrecedence", [*put, f"assertEquals({jdouble(f2[1])}, {ev}({jstr(f2[0])}, vars), 1e-9);"]
        ),
        lambda: TestCase(
            "divisionIsFloatingPoint",
            [f'assertEquals({jdouble(x / 2)}, {ev}("{x} / 2", new HashMap<>()), 1e-9);'],
        ),
        lambda: TestCase(
            "unaryMinus", [f'assertEquals({jdouble(-(x + y))}, {ev}("-({x} + {y})", new HashMap<>()), 1e-9);']
        ),
        lambda: TestCase(
            "unknownVariableIsRejected",
            ["Map<String, Double> vars = new HashMap<>();"],
            ("IllegalArgumentException", f'{ev}("{a} * 2", vars)'),
        ),
    ]
    comp = Component(
        cls,
        {cls: fill(_NASHORN, pkg=pkg, cls=cls, what=what, example=example, engine=engine)},
        pick_tests(rng, makers),
        test_imports=["java.util.HashMap", "java.util.Map"],
    )
    return Hazard(comp, {cls: fill(_PARSER, pkg=pkg, cls=cls, what=what, example=example)})


# --------------------------------------------------------------------------- reflective access

_CHARS_HELPER = """package $pkg;

import java.lang.reflect.Field;

/**
 * Zero-copy access to a String's characters: reads the private {@code String.value} array
 * instead of copying it with {@code toCharArray()}. Callers must not modify the array.
 */
final class $helper {

    private static final Field VALUE;

    static {
        try {
            VALUE = String.class.getDeclaredField("value");
            VALUE.setAccessible(true);
        } catch (NoSuchFieldException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private $helper() {
    }

    static char[] of(String s) {
        try {
            return (char[]) VALUE.get(s);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }
}
"""

_TEXT_STATS = """package $pkg;

/** Character statistics of $what. */
public final class $cls {

    private $cls() {
    }

    public static int vowels(String text) {
        int n = 0;
        for (char c : $chars) {
            if ("aeiouAEIOU".indexOf(c) >= 0) {
                n++;
            }
        }
        return n;
    }

    public static int fields(String line, char separator) {
        int n = 1;
        for (char c : $chars2) {
            if (c == separator) {
                n++;
            }
        }
        return n;
    }

    public static boolean isPalindrome(String text) {
        char[] cs = $chars3;
        for (int i = 0, j = cs.length - 1; i < j; i++, j--) {
            if (cs[i] != cs[j]) {
                return false;
            }
        }
        return true;
    }
}
"""

_ELEMENTS_HELPER = """package $pkg;

import java.lang.reflect.Field;
import java.util.ArrayList;

/** Reads an ArrayList's backing array without copying it (callers read, never write). */
final class $helper {

    private static final Field ELEMENT_DATA;

    static {
        try {
            ELEMENT_DATA = ArrayList.class.getDeclaredField("elementData");
            ELEMENT_DATA.setAccessible(true);
        } catch (NoSuchFieldException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private $helper() {
    }

    static Object[] backing(ArrayList<?> list) {
        try {
            return (Object[]) ELEMENT_DATA.get(list);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }
}
"""

_SERIES = """package $pkg;

import java.util.ArrayList;

/** Summary statistics of a series of $what. */
public final class $cls {

    private final ArrayList<Integer> values = new ArrayList<>();

    public $cls add(int value) {
        values.add(value);
        return this;
    }

    public long sum() {
        Object[] data = $data;
        long total = 0;
        for (int i = 0; i < values.size(); i++) {
            total += (Integer) data[i];
        }
        return total;
    }

    public int max() {
        if (values.isEmpty()) {
            throw new IllegalStateException("empty series");
        }
        Object[] data = $data;
        int best = (Integer) data[0];
        for (int i = 1; i < values.size(); i++) {
            best = Math.max(best, (Integer) data[i]);
        }
        return best;
    }
}
"""


def reflective_access(rng: random.Random, pkg: str, artifact: str) -> Hazard:
    if rng.random() < 0.5:
        cls = rng.choice(["TextStats", "CharCounts", "LineStats"])
        helper = rng.choice(["UnsafeChars", "FastChars", "StringInternals"])
        what = rng.choice(["log lines", "user input", "CSV rows"])
        before = fill(
            _TEXT_STATS,
            pkg=pkg,
            cls=cls,
            what=what,
            chars=f"{helper}.of(text)",
            chars2=f"{helper}.of(line)",
            chars3=f"{helper}.of(text)",
        )
        after = fill(
            _TEXT_STATS,
            pkg=pkg,
            cls=cls,
            what=what,
            chars="text.toCharArray()",
            chars2="line.toCharArray()",
            chars3="text.toCharArray()",
        )
        w, line, pal = (
            rng.choice(TOKENS),
            ",".join(rng.sample(["a", "b", "", "cd", "x y"], rng.randint(2, 5))),
            rng.choice(["level", "rotor", "abca", "noon", "java"]),
        )
        sep = ","
        makers = [
            lambda: TestCase(
                "countsVowels",
                [f"assertEquals({sum(ch in 'aeiouAEIOU' for ch in w)}, {cls}.vowels({jstr(w)}));"],
            ),
            lambda: TestCase(
                "countsFields", [f"assertEquals({line.count(sep) + 1}, {cls}.fields({jstr(line)}, '{sep}'));"]
            ),
            lambda: TestCase(
                "palindrome",
                [f"assert{'True' if pal == pal[::-1] else 'False'}({cls}.isPalindrome({jstr(pal)}));"],
            ),
            lambda: TestCase("emptyTextHasNoVowels", [f'assertEquals(0, {cls}.vowels(""));']),
        ]
        sources = {cls: before, helper: fill(_CHARS_HELPER, pkg=pkg, helper=helper)}
    else:
        cls = rng.choice(["Series", "SampleStats", "Readings"])
        helper = rng.choice(["ListInternals", "Backing", "ZeroCopy"])
        what = rng.choice(["readings", "scores", "latencies"])
        before = fill(_SERIES, pkg=pkg, cls=cls, what=what, data=f"{helper}.backing(values)")
        after = fill(_SERIES, pkg=pkg, cls=cls, what=what, data="values.toArray()")
        vals = [rng.randint(-100, 1000) for _ in range(rng.randint(1, 8))]
        chain = f"new {cls}()" + "".join(f".add({v})" for v in vals)
        makers = [
            lambda: TestCase("sumsValues", [f"assertEquals({sum(vals)}, {chain}.sum());"]),
            lambda: TestCase("findsMax", [f"assertEquals({max(vals)}, {chain}.max());"]),
            lambda: TestCase("emptySumIsZero", [f"assertEquals(0, new {cls}().sum());"]),
            lambda: TestCase("emptyMaxFails", [], ("IllegalStateException", f"new {cls}().max()")),
        ]
        sources = {cls: before, helper: fill(_ELEMENTS_HELPER, pkg=pkg, helper=helper)}
    return Hazard(Component(cls, sources, pick_tests(rng, makers)), {cls: after, helper: None})
