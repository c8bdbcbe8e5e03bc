package org.example.textstats;

import java.util.Arrays;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Function;
import java.util.stream.Collectors;

/** Counts words in a text, case-insensitively. */
public final class WordCounter {

    private WordCounter() {
    }

    /** Splits on anything that is not a letter or digit; empty input gives no words. */
    public static String[] words(String text) {
        if (text == null || text.trim().isEmpty()) {
            return new String[0];
        }
        return Arrays.stream(text.toLowerCase(Locale.ROOT).split("[^\\p{L}\\p{Nd}]+"))
                .filter(w -> !w.isEmpty())
                .toArray(String[]::new);
    }

    /** Word frequencies, sorted by word. */
    public static Map<String, Long> frequencies(String text) {
        return Arrays.stream(words(text))
                .collect(Collectors.groupingBy(Function.identity(), TreeMap::new, Collectors.counting()));
    }

    /** The most frequent word; ties go to the alphabetically first word. Null for empty text. */
    public static String mostFrequent(String text) {
        String best = null;
        long bestCount = 0;
        for (Map.Entry<String, Long> e : frequencies(text).entrySet()) {
            if (e.getValue() > bestCount) {
                best = e.getKey();
                bestCount = e.getValue();
            }
        }
        return best;
    }
}
