package org.example.roman;

import static org.junit.Assert.assertEquals;

import java.util.Arrays;
import java.util.Collection;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.junit.runners.Parameterized;
import org.junit.runners.Parameterized.Parameters;

/** JUnit 4 parameterized test: one test method, one run per row. */
@RunWith(Parameterized.class)
public class RomanLegacyTest {

    @Parameters(name = "{0} = {1}")
    public static Collection<Object[]> data() {
        return Arrays.asList(new Object[][] {{1, "I"}, {4, "IV"}, {1994, "MCMXCIV"}});
    }

    private final int number;
    private final String numeral;

    public RomanLegacyTest(int number, String numeral) {
        this.number = number;
        this.numeral = numeral;
    }

    @Test
    public void convertsToRoman() {
        assertEquals(numeral, Roman.toRoman(number));
    }
}
