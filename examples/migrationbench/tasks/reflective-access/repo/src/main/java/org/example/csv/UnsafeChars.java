package org.example.csv;

import java.lang.reflect.Field;

/**
 * Zero-copy access to a String's characters: reads the private {@code String.value} array
 * instead of copying it with {@code toCharArray()}. Callers must not modify the array.
 */
final class UnsafeChars {

    private static final Field VALUE;

    static {
        try {
            VALUE = String.class.getDeclaredField("value");
            VALUE.setAccessible(true);
        } catch (NoSuchFieldException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private UnsafeChars() {
    }

    static char[] of(String s) {
        try {
            return (char[]) VALUE.get(s);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }
}
