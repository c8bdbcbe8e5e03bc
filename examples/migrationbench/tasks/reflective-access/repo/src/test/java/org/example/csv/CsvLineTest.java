package org.example.csv;

import static org.junit.Assert.assertEquals;

import java.util.Arrays;
import org.junit.Test;

public class CsvLineTest {

    @Test
    public void splitsPlainFields() {
        assertEquals(Arrays.asList("a", "b", "", "c"), CsvLine.split("a,b,,c"));
    }

    @Test
    public void handlesQuotesAndEscapedQuotes() {
        assertEquals(Arrays.asList("x,y", "say \"hi\"", "z"), CsvLine.split("\"x,y\",\"say \"\"hi\"\"\",z"));
    }

    @Test
    public void nonAsciiSurvives() {
        assertEquals(Arrays.asList("caf\u00e9", "\u00fcber"), CsvLine.split("caf\u00e9,\u00fcber"));
    }

    @Test(expected = IllegalArgumentException.class)
    public void unterminatedQuoteFails() {
        CsvLine.split("\"open,field");
    }

    @Test
    public void countsFieldsIgnoringQuotedCommas() {
        assertEquals(3, CsvLine.countFields("a,\"b,c\",d"));
        assertEquals(1, CsvLine.countFields(""));
    }
}
