package org.example.inventory;

import java.math.BigDecimal;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;

/** Quantities on hand per item. */
public class Inventory {

    private final Map<Item, Integer> stock = new LinkedHashMap<>();

    public void receive(Item item, int quantity) {
        if (quantity <= 0) {
            throw new IllegalArgumentException("quantity must be positive: " + quantity);
        }
        stock.merge(item, quantity, Integer::sum);
    }

    /** Removes stock; fails without changing anything when there is not enough. */
    public void ship(Item item, int quantity) {
        int onHand = quantityOf(item);
        if (quantity > onHand) {
            throw new IllegalStateException("only " + onHand + " of " + item.getSku() + " on hand");
        }
        if (quantity == onHand) {
            stock.remove(item);
        } else {
            stock.put(item, onHand - quantity);
        }
    }

    public int quantityOf(Item item) {
        return Optional.ofNullable(stock.get(item)).orElse(0);
    }

    public BigDecimal totalValue() {
        return stock.entrySet().stream()
                .map(e -> e.getKey().getUnitPrice().multiply(BigDecimal.valueOf(e.getValue())))
                .reduce(BigDecimal.ZERO, BigDecimal::add);
    }
}
