package org.example.roman;

import static org.junit.Assert.assertEquals;

import org.junit.Test;

public class RomanRangeTest {

    @Test(expected = IllegalArgumentException.class)
    public void zeroIsRejected() {
        Roman.toRoman(0);
    }

    @Test
    public void largestValue() {
        assertEquals("MMMCMXCIX", Roman.toRoman(3999));
    }
}
