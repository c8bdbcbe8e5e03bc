package org.example.textstats;

import java.text.Normalizer;
import java.util.Locale;

/** Turns titles into URL slugs. */
public final class Slugs {

    private Slugs() {
    }

    /** "Héllo, World!" becomes "hello-world". */
    public static String slugify(String title) {
        String ascii = Normalizer.normalize(title, Normalizer.Form.NFD).replaceAll("\\p{M}", "");
        String slug = ascii.toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9]+", "-");
        return slug.replaceAll("^-+|-+$", "");
    }
}
