package org.example.ledger.report;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.time.LocalDate;
import org.example.ledger.core.Ledger;
import org.junit.Test;

public class BalanceReportTest {

    @Test
    public void rendersOneLinePerAccountAndATotal() {
        Ledger ledger = new Ledger();
        ledger.post(LocalDate.of(2021, 3, 1), "cash", "10.25");
        ledger.post(LocalDate.of(2021, 3, 2), "bank", "4.75");
        String[] lines = BalanceReport.render(ledger, LocalDate.of(2021, 3, 31)).split("\\R");
        assertEquals("Balances as of 2021-03-31", lines[0]);
        assertEquals("bank          4.75", lines[1]);
        assertEquals("cash         10.25", lines[2]);
        assertEquals("TOTAL        15.00", lines[3]);
    }

    @Test
    public void emptyLedgerHasZeroTotal() {
        String report = BalanceReport.render(new Ledger(), LocalDate.of(2021, 1, 1));
        assertTrue(report.endsWith("TOTAL            0\n") || report.endsWith("TOTAL            0\r\n"));
    }
}
