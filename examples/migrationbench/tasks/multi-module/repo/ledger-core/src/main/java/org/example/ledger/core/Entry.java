package org.example.ledger.core;

import java.math.BigDecimal;
import java.time.LocalDate;

/** One ledger line: a dated, signed amount on an account. */
public final class Entry {

    private final LocalDate date;
    private final String account;
    private final BigDecimal amount;

    public Entry(LocalDate date, String account, BigDecimal amount) {
        this.date = date;
        this.account = account;
        this.amount = amount;
    }

    public LocalDate getDate() {
        return date;
    }

    public String getAccount() {
        return account;
    }

    public BigDecimal getAmount() {
        return amount;
    }
}
