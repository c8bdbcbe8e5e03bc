package org.example.ledger.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigDecimal;
import java.time.LocalDate;
import java.util.Map;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class LedgerTest {

    private Ledger ledger;

    @BeforeEach
    void setUp() {
        ledger = new Ledger();
        ledger.post(LocalDate.of(2020, 1, 1), "cash", "100.00");
        ledger.post(LocalDate.of(2020, 1, 5), "cash", "-30.50");
        ledger.post(LocalDate.of(2020, 2, 1), "bank", "250.00");
    }

    @Test
    void balancesSumPerAccount() {
        Map<String, BigDecimal> b = ledger.balances(LocalDate.of(2020, 12, 31));
        assertEquals(new BigDecimal("69.50"), b.get("cash"));
        assertEquals(new BigDecimal("250.00"), b.get("bank"));
    }

    @Test
    void balancesRespectTheDate() {
        Map<String, BigDecimal> b = ledger.balances(LocalDate.of(2020, 1, 31));
        assertEquals(new BigDecimal("69.50"), b.get("cash"));
        assertTrue(!b.containsKey("bank"));
    }

    @Test
    void entriesAreReadOnly() {
        assertThrows(UnsupportedOperationException.class, () -> ledger.entries().clear());
        assertEquals(3, ledger.entries().size());
    }
}
