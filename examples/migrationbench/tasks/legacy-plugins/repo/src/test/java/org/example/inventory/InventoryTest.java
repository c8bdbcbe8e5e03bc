package org.example.inventory;

import static org.junit.Assert.assertEquals;

import java.math.BigDecimal;
import org.junit.Before;
import org.junit.Test;

public class InventoryTest {

    private Inventory inventory;
    private Item bolt;
    private Item nut;

    @Before
    public void setUp() {
        inventory = new Inventory();
        bolt = new Item("BOLT-M6", new BigDecimal("0.25"));
        nut = new Item("NUT-M6", new BigDecimal("0.10"));
    }

    @Test
    public void receivingAddsUp() {
        inventory.receive(bolt, 10);
        inventory.receive(bolt, 5);
        assertEquals(15, inventory.quantityOf(bolt));
    }

    @Test
    public void shippingRemovesStock() {
        inventory.receive(nut, 4);
        inventory.ship(nut, 3);
        assertEquals(1, inventory.quantityOf(nut));
        inventory.ship(nut, 1);
        assertEquals(0, inventory.quantityOf(nut));
    }

    @Test(expected = IllegalStateException.class)
    public void cannotShipMoreThanOnHand() {
        inventory.receive(nut, 2);
        inventory.ship(nut, 3);
    }

    @Test
    public void totalValueIsExact() {
        inventory.receive(bolt, 3);
        inventory.receive(nut, 7);
        assertEquals(new BigDecimal("1.45"), inventory.totalValue());
    }
}
