"""The terminal-control filter on tool output removes every ECMA-48 control sequence (issue 22,
item 3): a generated corpus of CSI, OSC (BEL- and ST-terminated), DCS, SOS, PM, APC and other
escape sequences, in 7-bit and 8-bit C1 forms, between runs of printable text."""

from __future__ import annotations

import asyncio

from hypothesis import example, given, settings
from hypothesis import strategies as st

from strands_art.envs.migrationbench.agent.commands import run_command
from strands_art.envs.migrationbench.controlseq import strip_control_sequences
from strands_art.envs.migrationbench.maven.mavenlog import strip_ansi

ESC = "\x1b"
ST_FORMS = (ESC + "\\", "\x9c")

#: printable text: no C0 control but TAB/LF/CR, no DEL, no C1
PRINTABLE = st.text(
    st.characters(
        blacklist_categories=("Cs",),
        blacklist_characters=[chr(c) for c in (*range(0, 32), *range(127, 160)) if chr(c) not in "\t\n\r"],
    ),
    max_size=30,
)


def _intro(seven_bit: str, c1: int) -> st.SearchStrategy[str]:
    return st.sampled_from([ESC + seven_bit, chr(c1)])


@st.composite
def csi(draw: st.DrawFn) -> str:
    params = draw(st.text(st.characters(min_codepoint=0x30, max_codepoint=0x3F), max_size=12))
    inter = draw(st.text(st.characters(min_codepoint=0x20, max_codepoint=0x2F), max_size=3))
    final = draw(st.characters(min_codepoint=0x40, max_codepoint=0x7E))
    return draw(_intro("[", 0x9B)) + params + inter + final


#: a command string's content (ECMA-48 8.3.27): 0x08-0x0D and 0x20-0x7E
COMMAND_STRING = st.text(
    st.one_of(
        st.characters(min_codepoint=0x08, max_codepoint=0x0D),
        st.characters(min_codepoint=0x20, max_codepoint=0x7E),
    ),
    max_size=40,
)
#: a character string's content (SOS): anything but SOS and ST; printable text and controls here
CHARACTER_STRING = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters=[ESC, "\x98", "\x9c"]), max_size=40
)


@st.composite
def osc(draw: st.DrawFn) -> str:
    body = draw(COMMAND_STRING.filter(lambda s: "\x07" not in s))
    return draw(_intro("]", 0x9D)) + body + draw(st.sampled_from([*ST_FORMS, "\x07"]))


@st.composite
def string(draw: st.DrawFn) -> str:
    seven, c1, content = draw(
        st.sampled_from(
            [
                ("P", 0x90, COMMAND_STRING),
                ("^", 0x9E, COMMAND_STRING),
                ("_", 0x9F, COMMAND_STRING),
                ("X", 0x98, CHARACTER_STRING),
            ]
        )
    )
    return draw(_intro(seven, c1)) + draw(content) + draw(st.sampled_from(ST_FORMS))


@st.composite
def escape(draw: st.DrawFn) -> str:
    """Other escape sequences: ESC, intermediates, a final byte (not one that opens CSI or a string)."""
    inter = draw(st.text(st.characters(min_codepoint=0x20, max_codepoint=0x2F), max_size=2))
    final = draw(
        st.characters(min_codepoint=0x30, max_codepoint=0x7E).filter(lambda c: inter or c not in "[]PX^_")
    )
    return ESC + inter + final


#: single C1 controls (not the introducers of CSI and strings: what follows them is their content)
LONE_C1 = st.sampled_from(
    [chr(c) for c in range(0x80, 0xA0) if c not in (0x90, 0x98, 0x9B, 0x9D, 0x9E, 0x9F)]
)
SEQUENCE = st.one_of(csi(), osc(), string(), escape(), LONE_C1)


@settings(max_examples=500)
@given(st.lists(st.tuples(PRINTABLE, SEQUENCE), max_size=8), PRINTABLE)
@example([("a", ESC + "P1$r0m" + ESC + "\\"), ("b", ESC + "]0;title" + ESC + "\\")], "c")
@example([("x", "\x9d8;;http://evil\x9c"), ("y", "\x90q\x9c")], "z")
def test_every_generated_sequence_is_removed_and_the_text_kept(
    pieces: list[tuple[str, str]], last: str
) -> None:
    text = "".join(t + s for t, s in pieces) + last
    expected = "".join(t for t, _ in pieces) + last
    assert strip_control_sequences(text) == expected
    assert strip_ansi(text) == expected


@settings(max_examples=300)
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_no_control_character_survives_any_text(text: str) -> None:
    """Whatever the input, the output holds no ESC, no C1 and no C0 but TAB/LF/CR."""
    out = strip_control_sequences(text)
    assert not any(ord(c) < 32 and c not in "\t\n\r" or 127 <= ord(c) < 160 for c in out)


def test_unterminated_string_runs_to_the_end_and_plain_text_is_untouched() -> None:
    assert strip_control_sequences("ok " + ESC + "Psecret payload\nmore") == "ok "
    plain = "[INFO] BUILD SUCCESS\tétapes ✓ 日本\r\n"
    assert strip_control_sequences(plain) == plain


def test_the_shell_tool_output_is_filtered(tmp_path) -> None:
    """Through the real command runner (unsandboxed here: the filter is what is tested)."""
    cmd = r"printf 'a\033P1$r0m\033\\b\033]0;t\033\\c\302\235x\302\234d\033[1;31me\n'"
    result = asyncio.run(run_command(cmd, cwd=tmp_path, sandbox=None, timeout_s=30))
    assert result.output == "abcde\n"
