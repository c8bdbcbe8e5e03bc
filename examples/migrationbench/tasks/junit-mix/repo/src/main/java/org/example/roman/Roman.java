package org.example.roman;

/** Converts between integers 1..3999 and Roman numerals. */
public final class Roman {

    private static final int[] VALUES = {1000, 900, 500, 400, 100, 90, 50, 40, 10, 9, 5, 4, 1};
    private static final String[] SYMBOLS = {"M", "CM", "D", "CD", "C", "XC", "L", "XL", "X", "IX", "V", "IV", "I"};

    private Roman() {
    }

    public static String toRoman(int n) {
        if (n < 1 || n > 3999) {
            throw new IllegalArgumentException("out of range: " + n);
        }
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < VALUES.length; i++) {
            while (n >= VALUES[i]) {
                sb.append(SYMBOLS[i]);
                n -= VALUES[i];
            }
        }
        return sb.toString();
    }

    /** Parses a canonical numeral; rejects non-canonical forms such as "IIII" or "IC". */
    public static int fromRoman(String s) {
        int n = 0;
        int pos = 0;
        for (int i = 0; i < VALUES.length && pos < s.length(); i++) {
            while (s.startsWith(SYMBOLS[i], pos)) {
                n += VALUES[i];
                pos += SYMBOLS[i].length();
            }
        }
        if (pos != s.length() || n == 0 || !toRoman(n).equals(s)) {
            throw new IllegalArgumentException("not a canonical roman numeral: " + s);
        }
        return n;
    }
}
