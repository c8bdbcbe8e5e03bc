"""Test-method inventory from Java sources (tree-sitter), including modern syntax."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from strands_art.envs.migrationbench.tasks.javatests import collect_tests, parse_test_methods

MODERN = '''
package com.acme.shapes;

import org.junit.jupiter.api.*;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class ShapeTest {
    sealed interface Shape permits Circle, Square {}
    record Circle(double r) implements Shape {}
    record Square(double s) implements Shape {}

    static double area(Shape s) {
        return switch (s) {
            case Circle c -> Math.PI * c.r() * c.r();
            case Square q -> { yield q.s() * q.s(); }
        };
    }

    @Test
    void textBlock() {
        String json = """
            {"a": 1, "b": "@Test not a method"}
            """;
        Object o = json;
        if (o instanceof String str && !str.isEmpty()) {
            Assertions.assertTrue(str.contains("a"));
        }
        Runnable r = new Runnable() {
            @Test public void insideAnonymous() {}   // not a test: anonymous class
            public void run() {}
        };
    }

    @ParameterizedTest
    @ValueSource(ints = {1, 2})
    void param(int x) {}

    @RepeatedTest(3) void repeated() {}

    @TestFactory java.util.stream.Stream<DynamicTest> factory() { return java.util.stream.Stream.empty(); }

    @Disabled("flaky") @Test void off() {}

    // @Test void commentedOut() {}

    @Nested
    class Inner {
        @org.junit.jupiter.api.Test void nestedFq() {}

        @Nested @Disabled class Deeper { @Test void deep() {} }
    }

    record Helper(int x) {
        @Test void inRecord() {}
    }
}
'''

JUNIT4 = """
package legacy;

import org.junit.Ignore;
import org.junit.Test;

@Ignore("whole class")
public class OldTest {
    @Test(expected = IllegalStateException.class) public void throwsIt() { throw new IllegalStateException(); }
    @Test public void plain() {}
    public void notATest() {}
}

class Second {
    @org.junit.Test public void a() {}
    @Test public void a(int overload) {}
}

enum Mode { A, B; @Test void inEnum() {} }
"""


def test_modern_syntax_parses_without_errors_and_lists_tests() -> None:
    methods, had_error = parse_test_methods(MODERN, module="core", file="ShapeTest.java")
    assert not had_error
    keys = sorted(m.key for m in methods)
    assert keys == [
        "com.acme.shapes.ShapeTest#factory",
        "com.acme.shapes.ShapeTest#off",
        "com.acme.shapes.ShapeTest#param",
        "com.acme.shapes.ShapeTest#repeated",
        "com.acme.shapes.ShapeTest#textBlock",
        "com.acme.shapes.ShapeTest.Helper#inRecord",
        "com.acme.shapes.ShapeTest.Inner#nestedFq",
        "com.acme.shapes.ShapeTest.Inner.Deeper#deep",
    ]
    by_key = {m.key: m for m in methods}
    assert by_key["com.acme.shapes.ShapeTest#off"].disabled
    assert by_key["com.acme.shapes.ShapeTest.Inner.Deeper#deep"].disabled  # class-level @Disabled
    assert not by_key["com.acme.shapes.ShapeTest.Inner#nestedFq"].disabled
    assert by_key["com.acme.shapes.ShapeTest#param"].annotation == "ParameterizedTest"
    assert {m.module for m in methods} == {"core"}


def test_junit4_class_ignore_overloads_and_enum() -> None:
    methods, had_error = parse_test_methods(JUNIT4)
    assert not had_error
    assert Counter(m.key for m in methods) == Counter(
        {
            "legacy.OldTest#throwsIt": 1,
            "legacy.OldTest#plain": 1,
            "legacy.Second#a": 2,
            "legacy.Mode#inEnum": 1,
        }
    )
    assert [m.disabled for m in methods if m.class_name == "legacy.OldTest"] == [True, True]
    assert not any(m.disabled for m in methods if m.class_name != "legacy.OldTest")


def test_syntax_error_is_reported() -> None:
    _, had_error = parse_test_methods("class Broken { @Test void a() { int x = ; } ")
    assert had_error


def test_collect_across_modules_skips_target(tmp_path: Path) -> None:
    for module, cls in (("", "RootTest"), ("api", "ApiTest"), ("impl/sub", "SubTest")):
        d = tmp_path / module / "src" / "test" / "java" / "p"
        d.mkdir(parents=True)
        (d / f"{cls}.java").write_text(
            f"package p; class {cls} {{ @Test void t() {{}} @Test void u() {{}} }}"
        )
    stale = tmp_path / "api" / "target" / "src" / "test" / "java"
    stale.mkdir(parents=True)
    (stale / "Stale.java").write_text("class Stale { @Test void t() {} }")
    (tmp_path / "api" / "src" / "test" / "java" / "p" / "Bad.java").write_text("class Bad { @Test void t( }")
    inv = collect_tests(tmp_path)
    assert inv.files == 4
    assert inv.modules == ["", "api", "impl/sub"]
    assert sum(inv.keys().values()) == 6  # 3 classes x 2; tree-sitter drops the broken method
    assert "p.ApiTest#u" in inv.keys()
    assert not any("Stale" in k for k in inv.keys())
    assert inv.parse_errors == ["api/src/test/java/p/Bad.java"]


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_test_annotations_are_resolved_through_imports_and_composed_annotations(tmp_path: Path) -> None:
    """``@Test`` means the type its imports name: a composed annotation (meta-annotated with a
    JUnit 5 test annotation, declared in another file or in the main sources) makes a test; an
    annotation of the project's own named ``Test`` does not; JUnit 4's ``@Test`` is no meta-annotation."""
    _write(
        tmp_path,
        "src/main/java/q/Fast.java",
        "package q; import org.junit.jupiter.api.Test; @Test public @interface Fast {}",
    )
    _write(tmp_path, "src/test/java/q/Slow.java", "package q; @Fast public @interface Slow {}")
    _write(tmp_path, "src/test/java/q/Legacy.java", "package q; @org.junit.Test public @interface Legacy {}")
    _write(tmp_path, "src/test/java/own/Test.java", "package own; public @interface Test {}")
    _write(tmp_path, "src/test/java/p/ATest.java", """package p;
import org.junit.jupiter.api.*;
import q.Fast;
import q.*;
class ATest {
    @Test void star() {}
    @Fast void composed() {}
    @Slow void composedTwice() {}
    @Legacy void notJupiter() {}
    @Disabled @Fast void off() {}
}""")  # fmt: skip
    _write(
        tmp_path,
        "src/test/java/p/BTest.java",
        "package p; import own.Test; class BTest { @Test void fake() {} @org.junit.Test void real() {} }",
    )
    _write(
        tmp_path, "src/test/java/own/CTest.java", "package own; class CTest { @Test void samePackage() {} }"
    )
    inv = collect_tests(tmp_path)
    by_key = {m.key: m for m in inv.methods}
    assert sorted(by_key) == [
        "p.ATest#composed",
        "p.ATest#composedTwice",
        "p.ATest#off",
        "p.ATest#star",
        "p.BTest#real",
    ]
    assert by_key["p.ATest#off"].disabled and not by_key["p.ATest#composed"].disabled


def test_required_methods_are_the_ones_that_run(tmp_path: Path) -> None:
    _write(tmp_path, "src/test/java/p/ATest.java", """package p; import org.junit.jupiter.api.*;
class ATest {
    @Test void a() {}
    @Disabled @Test void off() {}
    @Nested class Inner { @Test void nested() {} }
    static class Plain { @Test void plain() {} }
}""")  # fmt: skip
    _write(tmp_path, "src/test/java/p/Checks.java", "package p; class Checks { @org.junit.Test void c() {} }")
    _write(tmp_path, "src/test/java/p/FooIT.java", "package p; class FooIT { @org.junit.Test void it() {} }")
    inv = collect_tests(tmp_path)
    assert inv.required_keys(True, False, set()) == ["p.ATest#a", "p.ATest.Inner#nested"]
    assert inv.required_keys(True, True, set()) == ["p.ATest#a", "p.ATest.Inner#nested", "p.FooIT#it"]
    # a class that ran (a report names it) must have run all its methods, whatever selected it
    assert inv.required_keys(False, False, {"p.Checks", "p.ATest.Plain"}) == [
        "p.ATest.Plain#plain",
        "p.Checks#c",
    ]
