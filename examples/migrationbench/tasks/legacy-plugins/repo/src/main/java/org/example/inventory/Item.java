package org.example.inventory;

import java.math.BigDecimal;
import java.util.Objects;

/** A stock-keeping unit with a unit price. */
public final class Item {

    private final String sku;
    private final BigDecimal unitPrice;

    public Item(String sku, BigDecimal unitPrice) {
        if (sku == null || sku.isEmpty()) {
            throw new IllegalArgumentException("sku must not be empty");
        }
        if (unitPrice.signum() < 0) {
            throw new IllegalArgumentException("price must not be negative: " + unitPrice);
        }
        this.sku = sku;
        this.unitPrice = unitPrice;
    }

    public String getSku() {
        return sku;
    }

    public BigDecimal getUnitPrice() {
        return unitPrice;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Item && ((Item) o).sku.equals(sku);
    }

    @Override
    public int hashCode() {
        return Objects.hash(sku);
    }
}
