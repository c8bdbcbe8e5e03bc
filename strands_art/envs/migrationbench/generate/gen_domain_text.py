"""Plain Java 8 components that handle text, for generated projects (see :mod:`.gen_domain`):
titles made into URL slugs, amounts of money parsed and printed, Luhn check digits of digit
strings, Roman numerals. Each maker draws a class name and test data from ``rng`` and returns a
:class:`~.gen_java.Component` whose expected values are computed here in Python.
"""

from __future__ import annotations

import math
import random

from strands_art.envs.migrationbench.generate.gen_java import Component, TestCase, fill, jstr, pick_tests

_SLUGS = """package $pkg;

import java.util.Locale;

/** Turns titles into URL slugs and initials. */
public final class $cls {

    private $cls() {
    }

    public static String slugify(String text) {
        StringBuilder out = new StringBuilder();
        boolean gap = false;
        for (char c : text.toLowerCase(Locale.ROOT).toCharArray()) {
            if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
                if (gap && out.length() > 0) {
                    out.append('-');
                }
                out.append(c);
                gap = false;
            } else {
                gap = true;
            }
        }
        return out.toString();
    }

    public static String initials(String text) {
        StringBuilder out = new StringBuilder();
        for (String word : text.trim().split("\\\\s+")) {
            if (!word.isEmpty()) {
                out.append(Character.toUpperCase(word.charAt(0)));
            }
        }
        return out.toString();
    }
}
"""

_TITLE_WORDS = [
    "Hello",
    "World",
    "quick",
    "Brown",
    "fox",
    "Release",
    "notes",
    "v2",
    "API",
    "guide",
    "2019",
    "Q3",
]


def _title(rng: random.Random) -> str:
    seps = [" ", "  ", ", ", " - ", "! ", " & ", ": "]
    parts = rng.sample(_TITLE_WORDS, rng.randint(2, 4))
    return (
        rng.choice(["", " ", "# "])
        + "".join(p + rng.choice(seps) for p in parts[:-1])
        + parts[-1]
        + rng.choice(["", "!", " ", "?"])
    )


def _slug(text: str) -> str:
    out, gap = "", False
    for ch in text.lower():
        if ch.isascii() and ch.isalnum():
            out += ("-" if gap and out else "") + ch
            gap = False
        else:
            gap = True
    return out


def slugs(rng: random.Random, pkg: str) -> Component:
    cls = rng.choice(["Slugs", "TitleText", "UrlNames", "Headlines", "SlugMaker"])
    makers = []
    for i in range(rng.randint(2, 3)):
        title = _title(rng)
        makers.append(
            lambda i=i, title=title: TestCase(
                f"slugify{i + 1}", [f"assertEquals({jstr(_slug(title))}, {cls}.slugify({jstr(title)}));"]
            )
        )
    title = _title(rng)
    makers.append(
        lambda: TestCase(
            "initialsOfWords",
            [
                f"assertEquals({jstr(''.join(w[0].upper() for w in title.split()))}, {cls}.initials({jstr(title)}));"
            ],
        )
    )
    makers.append(lambda: TestCase("emptyTitleHasEmptySlug", [f'assertEquals("", {cls}.slugify(" - "));']))
    tests = pick_tests(rng, makers)
    return Component(cls, {cls: fill(_SLUGS, pkg=pkg, cls=cls)}, tests)


_MONEY = """package $pkg;

/** A non-negative amount of money in cents. */
public final class $cls {

    private final long cents;

    private $cls(long cents) {
        if (cents < 0) {
            throw new IllegalArgumentException("negative amount: " + cents);
        }
        this.cents = cents;
    }

    public static $cls ofCents(long cents) {
        return new $cls(cents);
    }

    /** Parses "12", "12.5" or "12.34". */
    public static $cls parse(String text) {
        int dot = text.indexOf('.');
        if (dot < 0) {
            return ofCents(Long.parseLong(text) * 100);
        }
        String fraction = (text.substring(dot + 1) + "00").substring(0, 2);
        return ofCents(Long.parseLong(text.substring(0, dot)) * 100 + Long.parseLong(fraction));
    }

    public $cls plus($cls other) {
        return new $cls(cents + other.cents);
    }

    public $cls times(int n) {
        return new $cls(cents * n);
    }

    /** This amount's {@code pct} percent, rounded half up to a cent. */
    public $cls percent(int pct) {
        return new $cls(Math.round(cents * pct / 100.0));
    }

    public long cents() {
        return cents;
    }

    public String format() {
        long rest = cents % 100;
        return (cents / 100) + "." + (rest < 10 ? "0" : "") + rest;
    }
}
"""


def _money_text(cents: int, rng: random.Random) -> str:
    if cents % 100 == 0 and rng.random() < 0.5:
        return str(cents // 100)
    if cents % 10 == 0 and rng.random() < 0.5:
        return f"{cents // 100}.{(cents % 100) // 10}"
    return f"{cents // 100}.{cents % 100:02d}"


def money(rng: random.Random, pkg: str) -> Component:
    cls = rng.choice(["Money", "Amount", "Price", "Cents", "Balance"])
    x, y = rng.randint(0, 99999), rng.randint(0, 9999)
    tx = _money_text(x, rng)
    fmt = lambda c: f"{c // 100}.{c % 100:02d}"  # noqa: E731

    def parse() -> TestCase:
        return TestCase(
            rng.choice(["parsesText", "parsesAmount"]),
            [f"assertEquals({x}, {cls}.parse({jstr(tx)}).cents());"],
        )

    def plus() -> TestCase:
        return TestCase(
            "addsAmounts",
            [f'assertEquals("{fmt(x + y)}", {cls}.ofCents({x}).plus({cls}.ofCents({y})).format());'],
        )

    def times() -> TestCase:
        n = rng.randint(2, 12)
        return TestCase(
            "multiplies", [f'assertEquals("{fmt(x * n)}", {cls}.ofCents({x}).times({n}).format());']
        )

    def percent() -> TestCase:
        pct = rng.randint(1, 99)
        want = math.floor(x * pct / 100.0 + 0.5)
        return TestCase("takesPercent", [f"assertEquals({want}, {cls}.ofCents({x}).percent({pct}).cents());"])

    def rejects() -> TestCase:
        return TestCase(
            "rejectsNegative", [], ("IllegalArgumentException", f"{cls}.ofCents(-{rng.randint(1, 500)})")
        )

    tests = pick_tests(rng, [parse, plus, times, percent, rejects])
    return Component(cls, {cls: fill(_MONEY, pkg=pkg, cls=cls)}, tests)


_CHECKS = """package $pkg;

/** Check digits for $what numbers. */
public final class $cls {

    private $cls() {
    }

    public static boolean luhnValid(String digits) {
        int sum = 0;
        boolean doubled = false;
        for (int i = digits.length() - 1; i >= 0; i--) {
            int d = digit(digits.charAt(i));
            if (doubled) {
                d *= 2;
                if (d > 9) {
                    d -= 9;
                }
            }
            sum += d;
            doubled = !doubled;
        }
        return digits.length() > 0 && sum % 10 == 0;
    }

    public static int mod97(String digits) {
        int rest = 0;
        for (int i = 0; i < digits.length(); i++) {
            rest = (rest * 10 + digit(digits.charAt(i))) % 97;
        }
        return rest;
    }

    public static int digitSum(long n) {
        long m = Math.abs(n);
        int sum = 0;
        while (m > 0) {
            sum += (int) (m % 10);
            m /= 10;
        }
        return sum;
    }

    private static int digit(char c) {
        if (c < '0' || c > '9') {
            throw new IllegalArgumentException("not a digit: " + c);
        }
        return c - '0';
    }
}
"""


def _luhn_sum(digits: str) -> int:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total


def checks(rng: random.Random, pkg: str) -> Component:
    cls = rng.choice(["CheckDigits", "Luhn", "AccountNumbers", "CardChecks", "Checksums"])
    what = rng.choice(["card", "account", "member", "invoice"])
    body = "".join(str(rng.randint(0, 9)) for _ in range(rng.randint(6, 15)))
    check = next(str(d) for d in range(10) if _luhn_sum(body + str(d)) % 10 == 0)
    good, bad = body + check, body + str((int(check) + rng.randint(1, 9)) % 10)
    n = rng.randint(-(10**12), 10**12)

    def valid() -> TestCase:
        return TestCase("acceptsValidNumber", [f"assertTrue({cls}.luhnValid({jstr(good)}));"])

    def invalid() -> TestCase:
        return TestCase("rejectsWrongCheckDigit", [f"assertFalse({cls}.luhnValid({jstr(bad)}));"])

    def mod97() -> TestCase:
        return TestCase("remainderMod97", [f"assertEquals({int(good) % 97}, {cls}.mod97({jstr(good)}));"])

    def dsum() -> TestCase:
        return TestCase("sumsDigits", [f"assertEquals({sum(map(int, str(abs(n))))}, {cls}.digitSum({n}L));"])

    def letters() -> TestCase:
        return TestCase(
            "rejectsLetters", [], ("IllegalArgumentException", f'{cls}.luhnValid("{body[:3]}x{body[3:]}")')
        )

    tests = pick_tests(rng, [valid, invalid, mod97, dsum, letters])
    return Component(cls, {cls: fill(_CHECKS, pkg=pkg, cls=cls, what=what)}, tests)


_ROMAN = """package $pkg;

/** Roman numerals from 1 to 3999. */
public final class $cls {

    private static final int[] VALUES = {1000, 900, 500, 400, 100, 90, 50, 40, 10, 9, 5, 4, 1};
    private static final String[] SYMBOLS = {"M", "CM", "D", "CD", "C", "XC", "L", "XL", "X", "IX", "V", "IV", "I"};

    private $cls() {
    }

    public static String toRoman(int n) {
        if (n < 1 || n > 3999) {
            throw new IllegalArgumentException("out of range: " + n);
        }
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < VALUES.length; i++) {
            while (n >= VALUES[i]) {
                out.append(SYMBOLS[i]);
                n -= VALUES[i];
            }
        }
        return out.toString();
    }

    public static int fromRoman(String text) {
        int total = 0;
        int pos = 0;
        for (int i = 0; i < VALUES.length; i++) {
            while (text.startsWith(SYMBOLS[i], pos)) {
                total += VALUES[i];
                pos += SYMBOLS[i].length();
            }
        }
        if (pos != text.length() || total == 0) {
            throw new IllegalArgumentException("not a numeral: " + text);
        }
        return total;
    }
}
"""

_ROMAN_TABLE = [
    (1000, "M"),
    (900, "CM"),
    (500, "D"),
    (400, "CD"),
    (100, "C"),
    (90, "XC"),
    (50, "L"),
    (40, "XL"),
    (10, "X"),
    (9, "IX"),
    (5, "V"),
    (4, "IV"),
    (1, "I"),
]


def _roman(n: int) -> str:
    out = ""
    for v, s in _ROMAN_TABLE:
        while n >= v:
            out, n = out + s, n - v
    return out


def roman(rng: random.Random, pkg: str) -> Component:
    cls = rng.choice(["Roman", "RomanNumerals", "Numerals", "ChapterNumbers"])
    makers = []
    for i in range(rng.randint(2, 3)):
        n = rng.randint(1, 3999)
        makers.append(
            lambda i=i, n=n: TestCase(
                f"toRoman{i + 1}", [f'assertEquals("{_roman(n)}", {cls}.toRoman({n}));']
            )
        )
    m = rng.randint(1, 3999)
    makers.append(lambda: TestCase("parsesNumeral", [f'assertEquals({m}, {cls}.fromRoman("{_roman(m)}"));']))
    makers.append(lambda: TestCase("rejectsZero", [], ("IllegalArgumentException", f"{cls}.toRoman(0)")))
    makers.append(
        lambda: TestCase("rejectsGarbage", [], ("IllegalArgumentException", f'{cls}.fromRoman("MXQ")'))
    )
    return Component(cls, {cls: fill(_ROMAN, pkg=pkg, cls=cls)}, pick_tests(rng, makers))
