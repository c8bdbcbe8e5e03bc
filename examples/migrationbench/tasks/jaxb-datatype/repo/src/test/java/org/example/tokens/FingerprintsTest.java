package org.example.tokens;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;

import org.junit.Test;

public class FingerprintsTest {

    @Test
    public void sha256OfAbc() {
        assertEquals("BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
                Fingerprints.sha256Hex("abc"));
    }

    @Test
    public void shortIdIsLowerCasePrefix() {
        assertEquals("ba7816bf", Fingerprints.shortId("abc", 8));
    }

    @Test
    public void parsesHex() {
        assertArrayEquals(new byte[] {0x00, 0x7f, (byte) 0xff}, Fingerprints.fromHex("007FFF"));
    }
}
