"""The Java parser reads what javac reads: Unicode escapes first, every Java 17 literal form.

Literals are generated from the JLS 17 §3.10 grammar (hypothesis), each placed in a test method
between two others: the parser must see all three methods without a syntax error. A fixed-seed
corpus of the same generator is compiled by ``javac --release 17`` once, so the generator only
writes what javac accepts (skipped without a JDK).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strands_art.envs.migrationbench.tasks.javasource import decode_unicode_escapes, javac_view
from strands_art.envs.migrationbench.tasks.javatests import collect_tests, parse_test_methods

# ---------------------------------------------------------------- literal grammar (JLS §3.10)


def _digits(draw, alphabet: str, max_len: int = 6, first: str | None = None) -> str:
    """Digits from ``alphabet`` with underscores only between digits (JLS §3.10.1)."""
    n = draw(st.integers(1, max_len))
    out = [draw(st.sampled_from(first or alphabet))]
    for _ in range(n - 1):
        out.append("_" * draw(st.integers(0, 2)) + draw(st.sampled_from(alphabet)))
    return "".join(out)


@st.composite
def int_literals(draw) -> str:
    kind = draw(st.sampled_from(["dec", "hex", "oct", "bin"]))
    long_ = draw(st.booleans())
    suffix = draw(st.sampled_from("lL")) if long_ else ""
    width = 15 if long_ else 7  # stays in range: javac refuses an int literal over 2^31
    if kind == "dec":
        body = "0" if draw(st.booleans()) else _digits(draw, "0123456789", width // 2 + 2, "123456789")
    elif kind == "hex":
        body = draw(st.sampled_from(["0x", "0X"])) + _digits(draw, "0123456789abcdefABCDEF", width)
    elif kind == "oct":
        body = "0" + "_" * draw(st.integers(0, 2)) + _digits(draw, "01234567", width, "1234567")
    else:
        body = draw(st.sampled_from(["0b", "0B"])) + _digits(draw, "01", 20)
    return body + suffix


@st.composite
def float_literals(draw) -> str:
    suffix = draw(st.sampled_from(["", "f", "F", "d", "D"]))
    if draw(st.booleans()):  # decimal: leading zeros are fine here (0999f is a float)
        exp = ""
        if draw(st.booleans()):
            exp = (
                draw(st.sampled_from("eE"))
                + draw(st.sampled_from(["", "+", "-"]))
                + str(draw(st.integers(0, 20)))
            )
        whole = _digits(draw, "0123456789", 4)
        frac = _digits(draw, "0123456789", 4)
        form = draw(st.sampled_from(["w.f", "w.", ".f", "w"]))
        if form == "w" and not (exp or suffix):
            suffix = "f"  # digits alone would be an integer (or a bad octal such as 0999)
        text = {"w.f": f"{whole}.{frac}", "w.": f"{whole}.", ".f": f".{frac}", "w": whole}[form]
        return text + exp + suffix
    hexd = "0123456789abcdefABCDEF"
    mant = draw(st.sampled_from([f"{_digits(draw, hexd, 3)}", f"{_digits(draw, hexd, 3)}.", f".{_digits(draw, hexd, 3)}",
                                  f"{_digits(draw, hexd, 3)}.{_digits(draw, hexd, 3)}"]))  # fmt: skip
    sign = draw(st.sampled_from(["", "+", "-"]))
    return f"{draw(st.sampled_from(['0x', '0X']))}{mant}{draw(st.sampled_from('pP'))}{sign}{draw(st.integers(0, 20))}{suffix}"


_ESCAPES = ["\\b", "\\t", "\\n", "\\f", "\\r", "\\s", '\\"', "\\'", "\\\\", "\\0", "\\7", "\\12", "\\377",
            "\\u0041", "\\uuu00e9", "\\u005c\\u005c"]  # fmt: skip
_PLAIN = "abc XYZ09_$é€@/*//"


@st.composite
def char_literals(draw) -> str:
    return "'" + draw(st.sampled_from(_ESCAPES[:-1] + list(_PLAIN) + ['"'])) + "'"


@st.composite
def string_literals(draw) -> str:
    parts = draw(st.lists(st.sampled_from(_ESCAPES + list(_PLAIN) + ["'", "}", "{"]), max_size=8))
    return '"' + "".join(parts) + '"'


@st.composite
def text_blocks(draw) -> str:
    parts = st.sampled_from(_ESCAPES + list(_PLAIN) + ["'", "}", '\\"\\"\\"'])
    lines = draw(st.lists(st.lists(parts, max_size=6), min_size=1, max_size=3))
    return '"""\n' + "\n".join("        " + "".join(line) for line in lines) + '\n        """'


#: ``(Java type, literal)``
LITERALS = st.one_of(
    int_literals().map(lambda t: ("long", t)),
    float_literals().map(lambda t: ("double", t)),
    char_literals().map(lambda t: ("char", t)),
    string_literals().map(lambda t: ("String", t)),
    text_blocks().map(lambda t: ("String", t)),
)


def _unit(literals: list[tuple[str, str]]) -> str:
    methods = "\n".join(
        f"    @Test public void m{i}() {{ {kind} v = {lit}; }}" for i, (kind, lit) in enumerate(literals)
    )
    return (
        "package p;\nimport org.junit.Test;\n"
        f"public class LitTest {{\n    @Test public void first() {{}}\n{methods}\n    @Test public void last() {{}}\n}}\n"
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(LITERALS, min_size=1, max_size=4))
def test_every_literal_form_parses_and_hides_no_method(literals: list[tuple[str, str]]) -> None:
    methods, had_error = parse_test_methods(_unit(literals))
    assert not had_error, literals
    assert [m.method for m in methods] == ["first", *(f"m{i}" for i in range(len(literals))), "last"]


@pytest.mark.skipif(shutil.which("javac") is None, reason="no JDK")
@settings(max_examples=3, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(LITERALS, min_size=100, max_size=100))
def test_the_literal_grammar_is_java_17_as_javac_reads_it(literals: list[tuple[str, str]]) -> None:
    """Three corpora of 100 literals (fixed seed) compile with ``javac --release 17`` (a stub
    ``org.junit.Test``), and the parser finds every method of each."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src/test/java"  # where collect_tests reads
        (src / "p").mkdir(parents=True)
        (src / "org/junit").mkdir(parents=True)
        (src / "org/junit/Test.java").write_text("package org.junit; public @interface Test {}")
        (src / "p/LitTest.java").write_text(_unit(literals), encoding="utf-8")
        done = subprocess.run(
            ["javac", "--release", "17", "-encoding", "UTF-8", "-d", str(Path(tmp) / "out"),
             str(src / "org/junit/Test.java"), str(src / "p/LitTest.java")],
            capture_output=True, text=True,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        inventory = collect_tests(tmp)
    assert len(inventory.methods) == 102 and not inventory.parse_errors


# ---------------------------------------------------------------- Unicode escapes (JLS §3.3)


def test_unicode_escapes_are_decoded_as_javac_does() -> None:
    assert decode_unicode_escapes(r"\u0041\uuu0042") == "AB"
    assert decode_unicode_escapes(r"\\u0041") == r"\\u0041"  # an even run of backslashes: no escape
    assert decode_unicode_escapes(r"\\\u0041") == "\\\\A"
    assert decode_unicode_escapes(r"\u005cu0041") == r"\u0041"  # a decoded backslash starts none
    assert decode_unicode_escapes(r"\ud83d\ude00") == "\U0001f600"
    assert decode_unicode_escapes(r"\u00zz") == r"\u00zz"


@given(
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20), st.integers(1, 3)
)
def test_any_text_written_as_escapes_decodes_to_itself(text: str, us: int) -> None:
    escaped = "".join("".join(f"\\{'u' * us}{unit:04x}" for unit in _utf16_units(ch)) for ch in text)
    assert decode_unicode_escapes(escaped) == text


def _utf16_units(ch: str) -> list[int]:
    data = ch.encode("utf-16-be")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def test_comments_ended_or_opened_by_escapes_are_what_javac_sees() -> None:
    """``// \\u000a`` ends the comment: what follows is code (javac compiles it), and
    ``// \\u000a /*`` opens a block comment that hides the methods up to ``// \\u000a */``."""
    src = (
        "package p; import org.junit.Test; class ATest {\n"
        "  // \\u000a @Test public void added() {}\n"
        "  // \\u000a /*\n"
        "  @Test public void hidden() {}\n"
        "  // \\u000a */\n"
        "  @Test public void kept() { String s = \"// not a comment /* nor this\"; char c = '\\''; }\n"
        "}\n"
    )
    assert [m.method for m in parse_test_methods(src)[0]] == ["added", "kept"]
    assert "hidden" not in javac_view(src)


@pytest.mark.parametrize(
    "literal",
    ["0999f", "0_7", "1__2", "0x1.8p1", "0X.8P+3d", "0b1010_1010L", "0777", "1e-5F", ".5", "5.", "'\\377'",
     "'\\s'", '"\\uuuu0041"', '"""\n  a\\s \\\n  b\n  """', "0xFFFF_FFFFL", "0.0e-0_1"],
)  # fmt: skip
def test_the_forms_tree_sitter_alone_refuses_parse(literal: str) -> None:
    """``0999f``, ``0_7``, ``1__2`` and ``\\uuuu`` escapes made tree-sitter report a syntax error."""
    methods, had_error = parse_test_methods(_unit([("Object", literal)]))
    assert not had_error and [m.method for m in methods] == ["first", "m0", "last"]
