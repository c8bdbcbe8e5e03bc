package org.example.roman;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class RomanParseTest {

    @Test
    void parsesCanonicalNumerals() {
        assertEquals(2024, Roman.fromRoman("MMXXIV"));
    }

    @ParameterizedTest
    @ValueSource(strings = {"IIII", "IC", "", "ABC"})
    void rejectsNonCanonical(String bad) {
        assertThrows(IllegalArgumentException.class, () -> Roman.fromRoman(bad));
    }

    @ParameterizedTest
    @ValueSource(ints = {1, 9, 14, 40, 3999})
    void roundTrips(int n) {
        assertEquals(n, Roman.fromRoman(Roman.toRoman(n)));
    }
}
