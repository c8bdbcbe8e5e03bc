package org.example.tokens;

import java.nio.charset.StandardCharsets;
import javax.xml.bind.DatatypeConverter;

/** Encodes "user:secret" pairs as Base64 tokens (HTTP Basic style) and back. */
public final class TokenCodec {

    private TokenCodec() {
    }

    public static String encode(String user, String secret) {
        if (user.indexOf(':') >= 0) {
            throw new IllegalArgumentException("user must not contain ':'");
        }
        String raw = user + ":" + secret;
        return DatatypeConverter.printBase64Binary(raw.getBytes(StandardCharsets.UTF_8));
    }

    /** Returns {user, secret}. */
    public static String[] decode(String token) {
        String raw = new String(DatatypeConverter.parseBase64Binary(token), StandardCharsets.UTF_8);
        int colon = raw.indexOf(':');
        if (colon < 0) {
            throw new IllegalArgumentException("not a user:secret token");
        }
        return new String[] {raw.substring(0, colon), raw.substring(colon + 1)};
    }
}
