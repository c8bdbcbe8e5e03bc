package org.example.csv;

import java.util.ArrayList;
import java.util.List;

/** Splits one CSV line (RFC 4180 quoting: fields in double quotes, "" for a literal quote). */
public final class CsvLine {

    private CsvLine() {
    }

    public static List<String> split(String line) {
        char[] cs = UnsafeChars.of(line);
        List<String> fields = new ArrayList<>();
        StringBuilder field = new StringBuilder();
        boolean quoted = false;
        for (int i = 0; i < cs.length; i++) {
            char c = cs[i];
            if (quoted) {
                if (c == '"' && i + 1 < cs.length && cs[i + 1] == '"') {
                    field.append('"');
                    i++;
                } else if (c == '"') {
                    quoted = false;
                } else {
                    field.append(c);
                }
            } else if (c == '"') {
                quoted = true;
            } else if (c == ',') {
                fields.add(field.toString());
                field.setLength(0);
            } else {
                field.append(c);
            }
        }
        if (quoted) {
            throw new IllegalArgumentException("unterminated quote in: " + line);
        }
        fields.add(field.toString());
        return fields;
    }

    /** Number of fields without building them. */
    public static int countFields(String line) {
        int n = 1;
        boolean quoted = false;
        for (char c : UnsafeChars.of(line)) {
            if (c == '"') {
                quoted = !quoted;
            } else if (c == ',' && !quoted) {
                n++;
            }
        }
        return n;
    }
}
