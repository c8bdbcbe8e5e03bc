package org.example.tokens;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import javax.xml.bind.DatatypeConverter;

/** SHA-256 fingerprints of API keys, printed as upper-case hex. */
public final class Fingerprints {

    private Fingerprints() {
    }

    public static String sha256Hex(String text) {
        try {
            MessageDigest md = MessageDigest.getInstance("SHA-256");
            return DatatypeConverter.printHexBinary(md.digest(text.getBytes(StandardCharsets.UTF_8)));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is always available", e);
        }
    }

    /** The first {@code n} hex digits, for display ("key a1b2c3..."). */
    public static String shortId(String text, int n) {
        return sha256Hex(text).substring(0, n).toLowerCase();
    }

    public static byte[] fromHex(String hex) {
        return DatatypeConverter.parseHexBinary(hex);
    }
}
