package org.example.inventory;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotEquals;

import java.math.BigDecimal;
import org.junit.Test;

public class ItemTest {

    @Test
    public void itemsAreEqualBySku() {
        assertEquals(new Item("A", BigDecimal.ONE), new Item("A", BigDecimal.TEN));
        assertNotEquals(new Item("A", BigDecimal.ONE), new Item("B", BigDecimal.ONE));
    }

    @Test(expected = IllegalArgumentException.class)
    public void rejectsNegativePrice() {
        new Item("A", new BigDecimal("-1"));
    }
}
