package org.example.tokens;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;

import org.junit.Test;

public class TokenCodecTest {

    @Test
    public void encodesLikeHttpBasic() {
        assertEquals("QWxhZGRpbjpvcGVuIHNlc2FtZQ==", TokenCodec.encode("Aladdin", "open sesame"));
    }

    @Test
    public void roundTripsSecretsWithColons() {
        assertArrayEquals(new String[] {"bob", "a:b:c"}, TokenCodec.decode(TokenCodec.encode("bob", "a:b:c")));
    }

    @Test(expected = IllegalArgumentException.class)
    public void rejectsColonInUser() {
        TokenCodec.encode("a:b", "x");
    }
}
