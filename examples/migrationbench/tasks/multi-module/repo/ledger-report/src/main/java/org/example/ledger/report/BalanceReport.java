package org.example.ledger.report;

import java.math.BigDecimal;
import java.time.LocalDate;
import java.util.Map;
import org.example.ledger.core.Ledger;

/** Plain-text balance sheet. */
public final class BalanceReport {

    private BalanceReport() {
    }

    /** One "account: amount" line per account, then a total line. */
    public static String render(Ledger ledger, LocalDate asOf) {
        StringBuilder sb = new StringBuilder("Balances as of ").append(asOf).append('\n');
        BigDecimal total = BigDecimal.ZERO;
        for (Map.Entry<String, BigDecimal> e : ledger.balances(asOf).entrySet()) {
            sb.append(String.format("%-8s%10s%n", e.getKey(), e.getValue().toPlainString()));
            total = total.add(e.getValue());
        }
        return sb.append(String.format("%-8s%10s%n", "TOTAL", total.toPlainString())).toString();
    }
}
