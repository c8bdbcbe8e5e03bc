"""Class-file versions and surefire report sums (no Maven needed)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from strands_art.envs.migrationbench.evaluate.buildoutputs import (
    check_bytecode,
    class_major_version,
    expects_classes,
)
from strands_art.envs.migrationbench.evaluate.testreports import case_key, read_test_reports


def _class(path: Path, major: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\xca\xfe\xba\xbe\x00\x00" + major.to_bytes(2, "big") + b"\x00" * 16)


def _module(root: Path, name: str, majors: list[int], sources: bool = True) -> None:
    mod = root / name
    mod.mkdir(parents=True, exist_ok=True)
    (mod / "pom.xml").write_text("<project/>")
    if sources:
        (mod / "src/main/java/p").mkdir(parents=True)
        (mod / "src/main/java/p/A.java").write_text("package p; class A {}")
    for i, major in enumerate(majors):
        _class(mod / "target/classes/p" / f"C{i}.class", major)


def test_class_major_version(tmp_path: Path) -> None:
    _class(tmp_path / "A.class", 61)
    assert class_major_version(tmp_path / "A.class") == 61
    (tmp_path / "B.class").write_bytes(b"not a class")
    with pytest.raises(ValueError, match="not a class file"):
        class_major_version(tmp_path / "B.class")


def test_bytecode_all_modules(tmp_path: Path) -> None:
    (tmp_path / "pom.xml").write_text("<project/>")  # aggregator, no sources
    _module(tmp_path, "api", [61, 61])
    _module(tmp_path, "impl", [61])
    ok = check_bytecode(tmp_path)
    assert ok.ok and ok.total == 3 and ok.by_major == {61: 3}
    _class(tmp_path / "impl/target/classes/p/Old.class", 52)
    bad = check_bytecode(tmp_path)
    assert not bad.ok and bad.wrong == [("impl/target/classes/p/Old.class", 52)] and bad.wrong_count == 1


def test_module_with_sources_but_no_classes_fails(tmp_path: Path) -> None:
    _module(tmp_path, "api", [61])
    _module(tmp_path, "dropped", [])
    report = check_bytecode(tmp_path)
    assert report.modules_without_classes == ["dropped"] and not report.ok
    assert not check_bytecode(tmp_path / "dropped").ok  # no class files at all


REPORT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="{cls}" tests="{tests}" failures="{failures}" errors="0" skipped="{skipped}">
  <testcase name="ok" classname="{cls}" time="0.01"/>
  {extra}
</testsuite>
"""


def test_read_reports_sums_every_module(tmp_path: Path) -> None:
    a = tmp_path / "a/target/surefire-reports"
    b = tmp_path / "b/c/target/surefire-reports"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    (a / "TEST-p.ATest.xml").write_text(
        REPORT.format(
            cls="p.ATest", tests=3, failures=0, skipped=1,
            extra='<testcase name="p(int)[1]" classname="p.ATest"/><testcase name="off" classname="p.ATest"><skipped/></testcase>',
        )
    )  # fmt: skip
    (b / "TEST-p.B$Inner.xml").write_text(
        REPORT.format(
            cls="p.B$Inner",
            tests=2,
            failures=1,
            skipped=0,
            extra='<testcase name="bad" classname="p.B$Inner"><failure/></testcase>',
        )
    )
    (b / "TEST-broken.xml").write_text("<testsuite")
    for module in ("a", "b/c"):  # a module is a directory with a pom.xml
        (tmp_path / module / "pom.xml").write_text("<project/>")
    # a report anywhere else is never read: committed under src/target, or a module's sources
    stray = tmp_path / "a/src/target/surefire-reports"
    stray.mkdir(parents=True)
    (stray / "TEST-p.CTest.xml").write_text(
        REPORT.format(cls="p.CTest", tests=1, failures=0, skipped=0, extra="")
    )
    report = read_test_reports(tmp_path)
    assert (report.tests, report.failures, report.skipped, report.passed) == (5, 1, 1, 3)
    assert report.modules == ["a", "b/c"]
    assert report.skipped_keys == ["p.ATest#off"]
    assert report.unreadable == ["b/c/target/surefire-reports/TEST-broken.xml"]
    # each method folded from its runs; p.B.Inner#bad failed, p.ATest#off was skipped
    assert report.passed_methods() == {"p.ATest#ok", "p.ATest#p", "p.B.Inner#ok"}
    assert report.not_passed_keys == {"p.ATest#off", "p.B.Inner#bad"}


def test_reports_count_test_cases_once_never_summary_attributes(tmp_path: Path) -> None:
    """``tests="1000"`` with one ``<testcase>`` counts one run; a second report about the same
    class (``TEST-C-x.xml``, or the failsafe report of a class surefire reported) counts nothing."""
    (tmp_path / "pom.xml").write_text("<project/>")
    sure = tmp_path / "target/surefire-reports"
    safe = tmp_path / "target/failsafe-reports"
    sure.mkdir(parents=True)
    safe.mkdir(parents=True)
    case = '<testcase name="ok" classname="p.ATest"/>'
    (sure / "TEST-p.ATest.xml").write_text(f'<testsuite name="p.ATest" tests="1000">{case}</testsuite>')
    (sure / "TEST-p.ATest-again.xml").write_text(f'<testsuite name="p.ATest" tests="1">{case}</testsuite>')
    (safe / "TEST-p.ATest.xml").write_text(f'<testsuite name="p.ATest" tests="1">{case}</testsuite>')
    (safe / "TEST-p.BIT.xml").write_text(
        '<testsuite name="p.BIT"><testcase name="x" classname="p.BIT"/></testsuite>'
    )
    report = read_test_reports(tmp_path, {"p.ATest", "p.BIT"})
    assert (report.files, report.tests, report.passed) == (2, 2, 2)
    assert report.duplicates == [
        "target/surefire-reports/TEST-p.ATest-again.xml",
        "target/failsafe-reports/TEST-p.ATest.xml",
    ]
    assert report.passed_methods() == {"p.ATest#ok", "p.BIT#x"}
    assert report.classes == {"p.ATest", "p.BIT"}


def test_case_key_normalizes_nested_and_parameterized() -> None:
    assert case_key("p.Outer$Inner", "param(int)[2]") == "p.Outer.Inner#param"
    assert case_key("p.T", "plain") == "p.T#plain"
    assert case_key("p.T", "roundTrips{int}[3]") == "p.T#roundTrips"  # surefire's JUnit 5 form
    assert case_key("p.T", "convertsToRoman[1 = I]") == "p.T#convertsToRoman"  # JUnit 4 Parameterized


def _pom(module: Path, packaging: str | None = None) -> None:
    module.mkdir(parents=True, exist_ok=True)
    tag = f"<packaging>{packaging}</packaging>" if packaging else ""
    (module / "pom.xml").write_text(f'<project xmlns="http://maven.apache.org/POM/4.0.0">{tag}</project>')


def _source(module: Path, rel: str, text: str) -> None:
    path = module / "src/main/java" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


PACKAGE_INFO = "/** Documentation of the ledger. */\npackage org.example.ledger.docs;\n"


@pytest.mark.parametrize(
    ("name", "packaging", "sources", "resources"),
    [
        ("ledger-docs", None, {"org/example/ledger/docs/package-info.java": PACKAGE_INFO}, False),
        ("bom", "pom", {"p/Ignored.java": "package p; class Ignored {}"}, False),
        ("assets", "jar", {}, True),
        ("comments", None, {"p/Notes.java": "// class Notes {}\n/* enum E {} */ package p;\n"}, False),
    ],
)
def test_module_that_legitimately_produces_no_classes_is_not_uncompiled(
    tmp_path: Path, name: str, packaging: str | None, sources: dict[str, str], resources: bool
) -> None:
    # issue 14 item 6: packaging pom, only resources, only package-info (or comments): no classes
    _module(tmp_path, "core", [61])
    mod = tmp_path / name
    _pom(mod, packaging)
    for rel, text in sources.items():
        _source(mod, rel, text)
    if resources:
        (mod / "src/main/resources").mkdir(parents=True)
        (mod / "src/main/resources/app.properties").write_text("a=1\n")
    report = check_bytecode(tmp_path)
    assert report.modules_without_classes == [] and report.ok and report.total == 1


@pytest.mark.parametrize(
    "text",
    [
        "package p; interface I {}",
        "package p; enum E { A }",
        "package p; record R(int x) {}",
        "package p; @interface Marker {}",
        "/** docs */ package p; // only a comment\nclass A {}",
        "module m { exports p; }",
    ],
)
def test_module_whose_sources_declare_a_type_still_needs_classes(tmp_path: Path, text: str) -> None:
    mod = tmp_path / "m"
    _pom(mod)
    _source(mod, "p/package-info.java", "package p;")
    _source(mod, "p/X.java", text)
    assert check_bytecode(tmp_path).modules_without_classes == ["m"]


@pytest.mark.skipif(shutil.which("javac") is None, reason="javac not installed (scripts/setup-system.sh)")
def test_javac_writes_no_class_for_package_info_and_the_check_agrees(tmp_path: Path) -> None:
    """The fact the rule rests on, from the real compiler: javac -d target/classes over a module
    with only a package-info.java writes no class file."""
    mod = tmp_path / "docs"
    _pom(mod)
    _source(mod, "d/package-info.java", PACKAGE_INFO.replace("org.example.ledger.docs", "d"))
    out = mod / "target/classes"
    out.mkdir(parents=True)
    src = mod / "src/main/java/d/package-info.java"
    subprocess.run(["javac", "--release", "17", "-d", str(out), str(src)], check=True, capture_output=True)
    assert list(out.rglob("*")) == []
    _module(tmp_path, "core", [61])
    assert check_bytecode(tmp_path).ok


def test_what_the_build_swapped_in_cannot_excuse_a_module(tmp_path: Path) -> None:
    """The tree was written by the sandboxed build: a POM that links to a host file saying
    ``<packaging>pom</packaging>`` is not read through the link, and a source replaced by a FIFO
    neither hangs the check nor counts as a module without types."""
    host = tmp_path / "host-pom.xml"
    host.write_text("<project><packaging>pom</packaging></project>")
    project = tmp_path / "build"
    linked = project / "linked"
    linked.mkdir(parents=True)
    (linked / "pom.xml").symlink_to(host)
    _source(linked, "p/A.java", "package p; class A {}")
    fifo = project / "fifo"
    _pom(fifo)
    (fifo / "src/main/java/p").mkdir(parents=True)
    os.mkfifo(fifo / "src/main/java/p/A.java")  # opened blocking, this would hang the check
    # linked/pom.xml is not read through the link (packaging stays jar), fifo's source counts as a type
    assert check_bytecode(project).modules_without_classes == ["fifo", "linked"]
    assert expects_classes(linked, project) and expects_classes(fifo, project)


def test_every_source_must_leave_its_class_files(tmp_path: Path) -> None:
    """A class file per top-level type of every main and test source of a compiling module
    (read as javac reads it); a pom-packaged module and a package-info expect none."""
    from strands_art.envs.migrationbench.evaluate.buildoutputs import expected_class_files, uncompiled_sources

    _pom(tmp_path)
    _source(tmp_path, "a/B.java", "package a; public class B {} interface \\u0043 {}")
    _source(tmp_path, "a/package-info.java", "package a;")
    (tmp_path / "src/test/java/a").mkdir(parents=True)
    (tmp_path / "src/test/java/a/BTest.java").write_text("package a; class BTest {}")
    _pom(tmp_path / "parent", "pom")
    _source(tmp_path / "parent", "x/Y.java", "package x; class Y {}")
    expected = expected_class_files(tmp_path)
    assert expected == {
        "src/main/java/a/B.java": ["target/classes/a/B.class", "target/classes/a/C.class"],
        "src/main/java/a/package-info.java": [],
        "src/test/java/a/BTest.java": ["target/test-classes/a/BTest.class"],
    }
    _class(tmp_path / "target/classes/a/B.class", 61)
    _class(tmp_path / "target/test-classes/a/BTest.class", 61)
    assert uncompiled_sources(tmp_path, expected) == ["src/main/java/a/B.java (target/classes/a/C.class)"]
    _class(tmp_path / "target/classes/a/C.class", 61)
    assert uncompiled_sources(tmp_path, expected) == []
