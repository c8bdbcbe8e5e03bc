package org.example.auth;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import sun.misc.BASE64Decoder;
import sun.misc.BASE64Encoder;

/** Builds and parses HTTP Basic {@code Authorization} header values (RFC 7617). */
public final class BasicAuth {

    private static final String PREFIX = "Basic ";

    private BasicAuth() {
    }

    public static String header(String user, String password) {
        if (user.indexOf(':') >= 0) {
            throw new IllegalArgumentException("user id must not contain ':'");
        }
        byte[] raw = (user + ":" + password).getBytes(StandardCharsets.UTF_8);
        return PREFIX + new BASE64Encoder().encode(raw);
    }

    /** Returns the credentials in a header value; fails on anything but a Basic header. */
    public static Credentials parse(String headerValue) {
        if (headerValue == null || !headerValue.startsWith(PREFIX)) {
            throw new IllegalArgumentException("not a Basic authorization header");
        }
        String raw;
        try {
            byte[] bytes = new BASE64Decoder().decodeBuffer(headerValue.substring(PREFIX.length()).trim());
            raw = new String(bytes, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new IllegalArgumentException("bad base64 in header", e);
        }
        int colon = raw.indexOf(':');
        if (colon < 0) {
            throw new IllegalArgumentException("missing ':' in credentials");
        }
        return new Credentials(raw.substring(0, colon), raw.substring(colon + 1));
    }
}
