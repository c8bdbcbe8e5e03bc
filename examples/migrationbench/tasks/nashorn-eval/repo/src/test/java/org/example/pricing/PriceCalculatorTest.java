package org.example.pricing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

class PriceCalculatorTest {

    @Test
    void appliesDiscountRule() {
        PriceCalculator calc = new PriceCalculator();
        calc.define("discounted", "price * qty * (1 - discount)");
        assertEquals(2700L, calc.lineTotalCents("discounted", 10.0, 3, 0.1));
    }

    @Test
    void bulkRuleWithFlatFee() {
        PriceCalculator calc = new PriceCalculator();
        calc.define("bulk", "price * qty - 5 + 2.5");
        assertEquals(9750L, calc.lineTotalCents("bulk", 1.0, 100, 0.0));
    }

    @Test
    void unknownRuleFails() {
        assertThrows(IllegalArgumentException.class, () -> new PriceCalculator().lineTotalCents("x", 1, 1, 0));
    }
}
