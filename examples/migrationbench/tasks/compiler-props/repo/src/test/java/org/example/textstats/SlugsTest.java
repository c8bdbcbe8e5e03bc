package org.example.textstats;

import static org.junit.Assert.assertEquals;

import org.junit.Test;

public class SlugsTest {

    @Test
    public void stripsAccentsAndPunctuation() {
        assertEquals("hello-world", Slugs.slugify("Héllo, World!"));
    }

    @Test
    public void collapsesSeparators() {
        assertEquals("java-8-17", Slugs.slugify("  Java 8 -> 17  "));
    }
}
