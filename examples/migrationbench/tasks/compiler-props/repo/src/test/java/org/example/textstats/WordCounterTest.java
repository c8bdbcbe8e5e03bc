package org.example.textstats;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;

import java.util.Map;
import org.junit.Test;

public class WordCounterTest {

    @Test
    public void splitsOnPunctuationAndLowercases() {
        assertArrayEquals(new String[] {"the", "cat", "sat"}, WordCounter.words("The cat, sat!"));
    }

    @Test
    public void emptyTextHasNoWords() {
        assertEquals(0, WordCounter.words("   ").length);
        assertEquals(0, WordCounter.words(null).length);
    }

    @Test
    public void countsFrequencies() {
        Map<String, Long> f = WordCounter.frequencies("a b a c a b");
        assertEquals(Long.valueOf(3), f.get("a"));
        assertEquals(Long.valueOf(2), f.get("b"));
        assertEquals(Long.valueOf(1), f.get("c"));
        assertEquals("[a, b, c]", f.keySet().toString());
    }

    @Test
    public void mostFrequentBreaksTiesAlphabetically() {
        assertEquals("b", WordCounter.mostFrequent("c b c b a"));
        assertNull(WordCounter.mostFrequent(""));
    }
}
