"""Plain Java 8 components for generated projects: small classes that run unchanged on 17, and their tests.

Each maker draws a class name and test data from ``rng`` and returns a
:class:`~.gen_java.Component`; expected values are computed here in Python with Java's arithmetic
(IEEE doubles, ASCII strings). Here: counters, intervals, sliding windows and unit conversion;
the components that handle text are in :mod:`.gen_domain_text`. :func:`domain_components` picks
distinct ones of both for a project.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable

from strands_art.envs.migrationbench.generate.gen_domain_text import checks, money, roman, slugs
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
