package org.example.pricing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

class RuleEngineTest {

    private final RuleEngine engine = new RuleEngine();

    private static Map<String, Double> vars(double price, double qty) {
        Map<String, Double> m = new HashMap<>();
        m.put("price", price);
        m.put("qty", qty);
        return m;
    }

    @Test
    void arithmeticWithPrecedenceAndParentheses() {
        assertEquals(14.0, engine.evaluate("2 * (3 + 4)", Collections.emptyMap()), 1e-12);
        assertEquals(10.0, engine.evaluate("2 + 2 * 4", Collections.emptyMap()), 1e-12);
        assertEquals(-3.0, engine.evaluate("-(1 + 2)", Collections.emptyMap()), 1e-12);
    }

    @Test
    void divisionIsFloatingPoint() {
        assertEquals(3.5, engine.evaluate("7 / 2", Collections.emptyMap()), 1e-12);
        assertEquals(Double.POSITIVE_INFINITY, engine.evaluate("1 / 0", Collections.emptyMap()));
    }

    @Test
    void variablesAreBound() {
        assertEquals(37.5, engine.evaluate("price * qty", vars(12.5, 3)), 1e-12);
        assertEquals(11.25, engine.evaluate("price * 0.9", vars(12.5, 1)), 1e-12);
    }

    @Test
    void malformedRulesAreRejected() {
        assertThrows(IllegalArgumentException.class, () -> engine.evaluate("2 *", Collections.emptyMap()));
        assertThrows(IllegalArgumentException.class, () -> engine.evaluate("price * unknownVar", vars(1, 1)));
    }
}
