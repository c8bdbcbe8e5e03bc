"""Plain Java 8 components for generated projects: small classes that run unchanged on 17, and their tests.

Each maker draws a class name and test data from ``rng`` and returns a
:class:`~.gen_java.Component`; expected values are computed here in Python with Java's arithmetic
(IEEE doubles, ASCII strings). :func:`domain_components` picks distinct ones for a project.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable

from strands_art.envs.migrationbench.generate.gen_java import (
    Component,
    TestCase,
    fill,
    jdouble,
    jstr,
    pick_tests,
)


def words(rng: random.Random, n: int, pool: list[str]) -> list[str]:
    return [rng.choice(pool) for _ in range(n)]


_WORDS = [
    "alpha",
    "beta",
    "delta",
    "echo",
    "kilo",
    "lima",
    "nova",
    "omega",
    "pixel",
    "quartz",
    "sigma",
    "tango",
]

# --------------------------------------------------------------------------- domain components

_TALLY = """package $pkg;

import java.util.Map;
import java.util.TreeMap;

/** Counts how often each $noun occurs. */
public class $cls {

    private final Map<String, Integer> counts = new TreeMap<>();
    private int total;

    public void add(String key) {
        if (key == null || key.isEmpty()) {
            throw new IllegalArgumentException("empty key");
        }
        counts.merge(key, 1, Integer::sum);
        total++;
    }

    public int count(String key) {
        return counts.getOrDefault(key, 0);
    }

    public int distinct() {
        return counts.size();
    }

    public int total() {
        return total;
    }

    /** The most frequent key; a tie goes to the alphabetically first; null when empty. */
    public String mostCommon() {
        String best = null;
        int bestCount = 0;
        for (Map.Entry<String, Integer> e : counts.entrySet()) {
            if (e.getValue() > bestCount) {
                best = e.getKey();
                bestCount = e.getValue();
            }
        }
        return best;
    }
}
"""


def tally(rng: random.Random, pkg: str) -> Component:
    cls = rng.choice(["WordTally", "TagCounter", "TermFrequency", "HitCounter", "KeywordTally", "LabelCount"])
    noun = {"WordTally": "word", "TagCounter": "tag", "TermFrequency": "term"}.get(cls, "key")
    ws = words(rng, rng.randint(4, 9), rng.sample(_WORDS, 4))

    def adds() -> list[str]:
        return [f"{cls} t = new {cls}();"] + [f"t.add({jstr(w)});" for w in ws]

    def counts() -> TestCase:
        w = rng.choice(ws)
        return TestCase(
            rng.choice(["countsEachKey", "countsRepeats", "countsOccurrences"]),
            [*adds(), f"assertEquals({ws.count(w)}, t.count({jstr(w)}));"],
        )

    def totals() -> TestCase:
        return TestCase(
            "distinctAndTotal",
            [*adds(), f"assertEquals({len(set(ws))}, t.distinct());", f"assertEquals({len(ws)}, t.total());"],
        )

    def most() -> TestCase:
        best = min(set(ws), key=lambda w: (-ws.count(w), w))
        return TestCase(
            rng.choice(["mostCommonWins", "findsMostCommon"]),
            [*adds(), f"assertEquals({jstr(best)}, t.mostCommon());"],
        )

    def missing() -> TestCase:
        return TestCase("unknownKeyCountsZero", [*adds(), 'assertEquals(0, t.count("zulu"));'])

    def empty() -> TestCase:
        return TestCase("emptyHasNoMostCommon", [f"assertNull(new {cls}().mostCommon());"])

    def rejects() -> TestCase:
        return TestCase(
            "rejectsEmptyKey", [f"{cls} t = new {cls}();"], ("IllegalArgumentException", 't.add("")')
        )

    tests = pick_tests(rng, [counts, totals, most, missing, empty, rejects])
    return Component(cls, {cls: fill(_TALLY, pkg=pkg, cls=cls, noun=noun)}, tests)


_INTERVAL = """package $pkg;

/** A half-open range [start, end) of $unit. */
public final class $cls {

    private final int start;
    private final int end;

    public $cls(int start, int end) {
        if (end < start) {
            throw new IllegalArgumentException("end " + end + " before start " + start);
        }
        this.start = start;
        this.end = end;
    }

    public int length() {
        return end - start;
    }

    public boolean contains(int x) {
        return x >= start && x < end;
    }

    public boolean overlaps($cls other) {
        return start < other.end && other.start < end;
    }

    /** The common part, or null when the two do not overlap. */
    public $cls intersect($cls other) {
        if (!overlaps(other)) {
            return null;
        }
        return new $cls(Math.max(start, other.start), Math.min(end, other.end));
    }

    @Override
    public String toString() {
        return "[" + start + ", " + end + ")";
    }
}
"""


def interval(rng: random.Random, pkg: str) -> Component:
    cls = rng.choice(["Interval", "Span", "SlotRange", "TimeWindow", "PageRange", "Segment"])
    unit = rng.choice(["minutes", "pages", "seconds", "rows", "days"])
    a = rng.randint(0, 40)
    b = a + rng.randint(1, 30)
    c = rng.randint(a, b + 10)
    d = c + rng.randint(1, 20)
    mk = f"{cls} x = new {cls}({a}, {b});"

    def length() -> TestCase:
        return TestCase("lengthIsEndMinusStart", [mk, f"assertEquals({b - a}, x.length());"])

    def contains() -> TestCase:
        inside, outside = rng.randint(a, b - 1), b + rng.randint(0, 5)
        return TestCase(
            rng.choice(["containsIsHalfOpen", "containsInside"]),
            [mk, f"assertTrue(x.contains({inside}));", f"assertFalse(x.contains({outside}));"],
        )

    def overlaps() -> TestCase:
        ok = c < b and a < d
        return TestCase(
            "overlapsOther", [mk, f"assert{'True' if ok else 'False'}(x.overlaps(new {cls}({c}, {d})));"]
        )

    def intersect() -> TestCase:
        if c < b and a < d:
            want = f'assertEquals("[{max(a, c)}, {min(b, d)})", x.intersect(new {cls}({c}, {d})).toString());'
        else:
            want = f"assertNull(x.intersect(new {cls}({c}, {d})));"
        return TestCase("intersection", [mk, want])

    def text() -> TestCase:
        return TestCase("printsHalfOpen", [mk, f'assertEquals("[{a}, {b})", x.toString());'])

    def rejects() -> TestCase:
        return TestCase("rejectsReversed", [], ("IllegalArgumentException", f"new {cls}({b}, {a})"))

    tests = pick_tests(rng, [length, contains, overlaps, intersect, text, rejects])
    return Component(cls, {cls: fill(_INTERVAL, pkg=pkg, cls=cls, unit=unit)}, tests)


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


_WINDOW = """package $pkg;

/** The last {@code capacity} $unit values, oldest overwritten first. */
public final class $cls {

    private final int[] values;
    private int next;
    private int size;

    public $cls(int capacity) {
        if (capacity <= 0) {
            throw new IllegalArgumentException("capacity must be positive: " + capacity);
        }
        values = new int[capacity];
    }

    public void push(int value) {
        values[next] = value;
        next = (next + 1) % values.length;
        if (size < values.length) {
            size++;
        }
    }

    public int size() {
        return size;
    }

    public long sum() {
        long total = 0;
        for (int i = 0; i < size; i++) {
            total += values[i];
        }
        return total;
    }

    public int oldest() {
        if (size == 0) {
            throw new IllegalStateException("empty");
        }
        return size < values.length ? values[0] : values[next];
    }

    public double average() {
        return size == 0 ? 0.0 : (double) sum() / size;
    }
}
"""


def window(rng: random.Random, pkg: str) -> Component:
    cls = rng.choice(["RingBuffer", "MovingWindow", "RecentValues", "SampleWindow", "LatencyWindow"])
    cap = rng.randint(2, 6)
    vals = [rng.randint(-50, 500) for _ in range(rng.randint(1, 10))]
    last = deque(vals, maxlen=cap)
    setup = [f"{cls} w = new {cls}({cap});"] + [f"w.push({v});" for v in vals]

    def size() -> TestCase:
        return TestCase("sizeIsCapped", [*setup, f"assertEquals({len(last)}, w.size());"])

    def total() -> TestCase:
        return TestCase(
            rng.choice(["sumsRecentValues", "sumOfWindow"]), [*setup, f"assertEquals({sum(last)}, w.sum());"]
        )

    def oldest() -> TestCase:
        return TestCase("oldestSurvivor", [*setup, f"assertEquals({last[0]}, w.oldest());"])

    def average() -> TestCase:
        return TestCase(
            "averageOfWindow", [*setup, f"assertEquals({jdouble(sum(last) / len(last))}, w.average(), 1e-9);"]
        )

    def zero() -> TestCase:
        return TestCase("rejectsZeroCapacity", [], ("IllegalArgumentException", f"new {cls}(0)"))

    def empty() -> TestCase:
        return TestCase(
            "emptyHasNoOldest", [f"{cls} w = new {cls}({cap});"], ("IllegalStateException", "w.oldest()")
        )

    tests = pick_tests(rng, [size, total, oldest, average, zero, empty])
    unit = rng.choice(["sample", "latency", "reading"])
    return Component(cls, {cls: fill(_WINDOW, pkg=pkg, cls=cls, unit=unit)}, tests)


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


_UNITS = """package $pkg;

/** Unit conversions for $what. */
public final class $cls {

    private $cls() {
    }

    public static double celsiusToFahrenheit(double c) {
        return c * 9 / 5 + 32;
    }

    public static double fahrenheitToCelsius(double f) {
        return (f - 32) * 5 / 9;
    }

    public static double kilometresToMiles(double km) {
        return km * 0.621371;
    }
}
"""


def units(rng: random.Random, pkg: str) -> Component:
    cls = rng.choice(["Units", "Conversions", "UnitConverter", "Measures"])
    what = rng.choice(["weather reports", "trip logs", "sensor data"])
    c, f, km = (
        rng.randint(-40, 45) + rng.choice([0.0, 0.5]),
        rng.randint(-40, 110) + 0.0,
        rng.randint(1, 500) + 0.0,
    )

    def c2f() -> TestCase:
        return TestCase(
            "celsiusToFahrenheit",
            [f"assertEquals({jdouble(c * 9 / 5 + 32)}, {cls}.celsiusToFahrenheit({jdouble(c)}), 1e-9);"],
        )

    def f2c() -> TestCase:
        return TestCase(
            "fahrenheitToCelsius",
            [f"assertEquals({jdouble((f - 32) * 5 / 9)}, {cls}.fahrenheitToCelsius({jdouble(f)}), 1e-9);"],
        )

    def miles() -> TestCase:
        return TestCase(
            "kilometresToMiles",
            [f"assertEquals({jdouble(km * 0.621371)}, {cls}.kilometresToMiles({jdouble(km)}), 1e-9);"],
        )

    def same() -> TestCase:
        return TestCase(
            "minusFortyIsTheSame", [f"assertEquals(-40.0, {cls}.celsiusToFahrenheit(-40.0), 1e-9);"]
        )

    tests = pick_tests(rng, [c2f, f2c, miles, same])
    return Component(cls, {cls: fill(_UNITS, pkg=pkg, cls=cls, what=what)}, tests)


#: The plain components a generated project draws its ordinary classes from.
DOMAIN: tuple[Callable[[random.Random, str], Component], ...] = (
    tally,
    interval,
    slugs,
    money,
    window,
    checks,
    roman,
    units,
)


def domain_components(rng: random.Random, pkg: str, n: int, taken: set[str]) -> list[Component]:
    """``n`` components of distinct kinds whose class names are not in ``taken`` (updated)."""
    out: list[Component] = []
    for make in rng.sample(DOMAIN, len(DOMAIN)):
        if len(out) == n:
            break
        comp = make(rng, pkg)
        if comp.class_name in taken:
            continue
        taken.add(comp.class_name)
        out.append(comp)
    return out
