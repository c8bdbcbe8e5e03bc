"""Read a Maven build's raw output in bounded memory: its tail, its ``[ERROR]`` lines, a capped copy.

The output of a scoring build is written by the agent's code (a test, a plugin, or
``.mvn/jvm.config`` with ``-Xlog:all=trace:stdout`` prints hundreds of MB per minute), so it is
hostile input: only the sandbox's per-file limit (1 GiB) bounds it. Reading it whole, decoding it
to one ``str`` (4 bytes per character once a single non-BMP character appears) and splitting it
into lines costs the runner several times that in memory per build. :func:`digest_log` reads it
in blocks of :data:`BLOCK_BYTES` and keeps only what is reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from strands_art.envs.migrationbench.controlseq import strip_control_sequences

#: Bytes read at once.
BLOCK_BYTES = 1 << 20
#: A line longer than this is cut into pieces (only a piece that starts a line can be an error line).
PIECE_BYTES = 64 << 10
#: Default bound on the copy written to ``log_path`` (a normal build log is well under 1 MB).
MAX_LOG_BYTES = 16 << 20
#: Longest ``[ERROR]`` line kept, in characters.
MAX_ERROR_LINE_CHARS = 2000
#: Test classes kept in :attr:`LogDigest.skipped_by_class` (more: ``skip_lines_overflow``).
MAX_SKIP_CLASSES = 10_000

#: surefire/failsafe's count line, per test class (``... - in pkg.Class``; ``--`` in 3.x) and in
#: the run's summary (no class). Matched on the raw bytes.
SUREFIRE_COUNTS = re.compile(
    rb"Tests run: ([0-9]{1,9}), Failures: ([0-9]{1,9}), Errors: ([0-9]{1,9}), Skipped: ([0-9]{1,9})"
    rb"(?:, Time elapsed: [^\n]{0,80}? -{1,2} in ([A-Za-z0-9_.$]{1,500}))?"
)


def strip_ansi(text: str) -> str:
    """Remove terminal control sequences (colour, cursor, OSC/DCS/... strings, C1 forms) and
    control characters but TAB/LF/CR from ``text`` (:func:`.controlseq.strip_control_sequences`)."""
    return strip_control_sequences(text)


def is_error_line(line: str) -> bool:
    """A Maven ``[ERROR]`` line worth reporting (not a bare ``[ERROR]``, not a stack frame)."""
    return (
        line.startswith("[ERROR]") and not line[7:].lstrip().startswith("at ") and line.strip() != "[ERROR]"
    )


#: Longest possible :data:`SUREFIRE_COUNTS` match, bytes (the overlap scanned between blocks).
_COUNT_LINE_BYTES = 1024


@dataclass
class _SkipCounts:
    """The skips of every :data:`SUREFIRE_COUNTS` line scanned so far (see :class:`LogDigest`)."""

    max_skipped: int = 0
    by_class: dict[str, int] = field(default_factory=dict)
    overflow: bool = False

    def scan(self, data: bytes) -> None:
        for match in SUREFIRE_COUNTS.finditer(data):
            skipped, cls = int(match.group(4)), match.group(5)
            self.max_skipped = max(self.max_skipped, skipped)
            if skipped and cls:
                name = cls.decode("ascii")
                if name in self.by_class or len(self.by_class) < MAX_SKIP_CLASSES:
                    self.by_class[name] = max(skipped, self.by_class.get(name, 0))
                else:
                    self.overflow = True


@dataclass(frozen=True)
class LogDigest:
    """What is kept of one build's output.

    Attributes:
        tail: the last ``tail_chars`` characters, ANSI codes stripped.
        error_lines: the first ``error_limit`` :func:`is_error_line` lines (each cut to
            :data:`MAX_ERROR_LINE_CHARS`, line ends removed).
        total_bytes: raw bytes of output read.
        log_bytes_left_out: raw output bytes not copied to ``log_path`` (0 when it all fit).
        max_skipped: the largest ``Skipped: N`` of any :data:`SUREFIRE_COUNTS` line (0 if none).
        skipped_by_class: for each class named by such a line with ``Skipped`` > 0, the largest
            count (at most :data:`MAX_SKIP_CLASSES` classes; ``skip_lines_overflow`` says more
            were seen). Test code can print such lines too, so they can only *add* skips: Maven's
            own lines are in the output whatever a test prints.
    """

    tail: str
    error_lines: tuple[str, ...]
    total_bytes: int
    log_bytes_left_out: int
    max_skipped: int = 0
    skipped_by_class: dict[str, int] = field(default_factory=dict)
    skip_lines_overflow: bool = False


def digest_log(
    raw: BinaryIO,
    *,
    tail_chars: int = 8000,
    error_limit: int = 30,
    log_path: Path | None = None,
    max_log_bytes: int = MAX_LOG_BYTES,
) -> LogDigest:
    """Digest the build output in ``raw`` (read from its current position to its end).

    Memory is O(``tail_chars`` + :data:`BLOCK_BYTES`) whatever the output's size, and output past
    the copy's cap is only scanned (for ``[ERROR]``) in C, not decoded. Output is decoded as UTF-8
    (invalid bytes replaced). With ``log_path``, the ANSI-stripped output is written there up to
    ``max_log_bytes``; beyond, one line says how many bytes of raw output were left out and the last
    ``tail_chars`` characters follow. Approximations on hostile output only: a line longer than
    :data:`PIECE_BYTES` is cut into pieces (an escape sequence or character split there is not
    stripped or is replaced), and the tail is decoded from its last ``4 * tail_chars + 64 KiB`` bytes.

    Raises:
        ValueError: ``tail_chars``, ``error_limit`` or ``max_log_bytes`` negative.
        OSError: reading ``raw`` or writing ``log_path`` failed.
    """
    if tail_chars < 0 or error_limit < 0 or max_log_bytes < 0:
        raise ValueError("tail_chars, error_limit and max_log_bytes must be >= 0")
    window = 4 * tail_chars + (64 << 10)
    tail_raw = b""
    errors: list[str] = []
    total = written = left_out = 0
    carry = b""  # the unfinished last line (at most PIECE_BYTES)
    carry_starts_line = True
    skips = _SkipCounts()
    out = open(log_path, "w", encoding="utf-8") if log_path is not None else None  # noqa: SIM115

    def chunk_done(chunk: bytes, starts_line: bool) -> None:
        """``chunk``: whole lines (or a cut piece of a long one), in order."""
        nonlocal tail_raw, written, left_out
        if len(errors) < error_limit and b"[ERROR]" in chunk:
            lines = chunk.split(b"\n")
            for k, line in enumerate(lines[:-1] if chunk.endswith(b"\n") else lines):
                if k == 0 and not starts_line:
                    continue
                text = strip_ansi(line[: 4 * MAX_ERROR_LINE_CHARS].decode("utf-8", errors="replace"))
                if is_error_line(text.rstrip("\r")):
                    errors.append(text.rstrip("\r")[:MAX_ERROR_LINE_CHARS])
                    if len(errors) == error_limit:
                        break
        tail_raw = (tail_raw + chunk)[-window:] if tail_chars else b""
        if out is not None:
            if left_out == 0 and written + len(chunk) <= max_log_bytes:
                text = strip_ansi(chunk.decode("utf-8", errors="replace"))
                size = len(text.encode("utf-8", errors="surrogatepass"))
                out.write(text)
                written += size
            else:
                left_out += len(chunk)

    try:
        seam = b""  # the last bytes scanned: a count line cut between two blocks is still found
        while block := raw.read(BLOCK_BYTES):
            total += len(block)
            if b"Skipped: " in seam + block[:_COUNT_LINE_BYTES] or b"Skipped: " in block:
                skips.scan(seam + block)
            seam = (seam + block[-_COUNT_LINE_BYTES:])[-_COUNT_LINE_BYTES:]
            data = carry + block
            cut = data.rfind(b"\n") + 1
            if cut:
                chunk_done(data[:cut], carry_starts_line)
                carry, carry_starts_line = data[cut:], True
            else:
                carry = data
            while len(carry) > PIECE_BYTES:
                chunk_done(carry[:PIECE_BYTES], carry_starts_line)
                carry, carry_starts_line = carry[PIECE_BYTES:], False
        if carry:
            chunk_done(carry, carry_starts_line)
        tail = strip_ansi(tail_raw.decode("utf-8", errors="replace"))[-tail_chars:] if tail_chars else ""
        if out is not None and left_out:
            out.write(
                f"\n[strands-art: {left_out} bytes of output left out here (the copy is capped at "
                f"{max_log_bytes} bytes); the last {len(tail)} characters follow]\n"
            )
            out.write(tail)
    finally:
        if out is not None:
            out.close()
    return LogDigest(
        tail=tail,
        error_lines=tuple(errors),
        total_bytes=total,
        log_bytes_left_out=left_out,
        max_skipped=skips.max_skipped,
        skipped_by_class=skips.by_class,
        skip_lines_overflow=skips.overflow,
    )
