"""A scoring build's output is hostile: digesting it takes bounded memory and keeps what is reported."""

from __future__ import annotations

import io
import tracemalloc
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from strands_art.envs.migrationbench.maven.mavenlog import digest_log, is_error_line, strip_ansi


def _reference(raw: bytes, tail_chars: int, limit: int = 30) -> tuple[str, tuple[str, ...]]:
    """What reading the whole output at once gives (the behaviour kept for small logs)."""
    text = strip_ansi(raw.decode("utf-8", errors="replace"))
    errors = [line for line in text.splitlines() if is_error_line(line)][:limit]
    return (text[-tail_chars:] if tail_chars else ""), tuple(errors)


_LINE = st.lists(
    st.sampled_from(
        ["[ERROR]", "[INFO]", " at x.Y", "\x1b[1;31m", "\x1b[0m", "é", "\U0001f600", "word", " ", "[ERROR] "]
    ),
    max_size=8,
).map("".join)


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(_LINE, max_size=40), tail_chars=st.integers(0, 60), end=st.sampled_from(["", "\n"]))
def test_small_logs_digest_exactly_as_the_whole_text(lines: list[str], tail_chars: int, end: str) -> None:
    raw = ("\n".join(lines) + end).encode()
    d = digest_log(io.BytesIO(raw), tail_chars=tail_chars)
    assert (d.tail, d.error_lines) == _reference(raw, tail_chars)
    assert d.total_bytes == len(raw) and d.log_bytes_left_out == 0


def test_log_copy_is_complete_when_it_fits(tmp_path: Path) -> None:
    raw = b"\x1b[1m[INFO]\x1b[m ok\n[ERROR] bad \xff thing\n"
    d = digest_log(io.BytesIO(raw), log_path=tmp_path / "log.txt")
    assert (tmp_path / "log.txt").read_text() == "[INFO] ok\n[ERROR] bad \ufffd thing\n"
    assert d.error_lines == ("[ERROR] bad \ufffd thing",)


def test_a_huge_hostile_log_is_digested_in_bounded_memory(tmp_path: Path) -> None:
    # What -Xlog:all=trace:stdout in .mvn/jvm.config makes a build print (~430 MB in 40 s
    # here), with one non-BMP character: read whole, that is 4 bytes per character.
    raw_path = tmp_path / "maven.log"
    big = 48 << 20
    with open(raw_path, "wb") as f:
        f.write("\U0001f600 start\n[ERROR] first \x1b[31mfailure\x1b[0m\n".encode())
        for _ in range(big >> 20):
            f.write(b"x" * (1 << 20))  # one 48 MiB line
        f.write(b"\n[ERROR]    at some.Frame(Frame.java:1)\n[ERROR] second failure\nEND-OF-LOG\n")
    size = raw_path.stat().st_size
    tracemalloc.start()
    try:
        with open(raw_path, "rb") as f:
            d = digest_log(f, tail_chars=8000, log_path=tmp_path / "log.txt", max_log_bytes=1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"peak {peak} bytes for a {size}-byte log"
    assert d.total_bytes == size
    assert d.error_lines == ("[ERROR] first failure", "[ERROR] second failure")
    expected_tail = "\n[ERROR]    at some.Frame(Frame.java:1)\n[ERROR] second failure\nEND-OF-LOG\n"
    assert d.tail == ("x" * 8000 + expected_tail)[-8000:]
    copy = (tmp_path / "log.txt").read_text()
    head = "\U0001f600 start\n[ERROR] first failure\n"
    assert copy.startswith(head + "x" * 1000)
    # the copy stops at the cap (whole pieces); one line says how much was left out, then the tail
    marker = f"\n[strands-art: {d.log_bytes_left_out} bytes of output left out here"
    assert copy.count(marker) == 1 and copy.endswith(d.tail)
    written = len(copy[: copy.index(marker)].encode())
    assert (1 << 20) - (1 << 20) // 2 < written <= 1 << 20
    ansi = len(b"\x1b[31m") + len(b"\x1b[0m")  # stripped from the copied head
    assert d.log_bytes_left_out == size - written - ansi
    assert len(copy.encode()) < (1 << 20) + 8000 + 200
