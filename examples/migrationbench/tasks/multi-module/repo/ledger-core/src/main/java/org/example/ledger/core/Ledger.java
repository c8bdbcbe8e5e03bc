package org.example.ledger.core;

import java.math.BigDecimal;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/** An append-only list of entries with per-account balances. */
public class Ledger {

    private final List<Entry> entries = new ArrayList<>();

    public void post(LocalDate date, String account, String amount) {
        entries.add(new Entry(date, account, new BigDecimal(amount)));
    }

    public List<Entry> entries() {
        return Collections.unmodifiableList(entries);
    }

    /** Balance per account of every entry on or before {@code asOf}, sorted by account. */
    public Map<String, BigDecimal> balances(LocalDate asOf) {
        Map<String, BigDecimal> out = new TreeMap<>();
        for (Entry e : entries) {
            if (!e.getDate().isAfter(asOf)) {
                out.merge(e.getAccount(), e.getAmount(), BigDecimal::add);
            }
        }
        return out;
    }
}
