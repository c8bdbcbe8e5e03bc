"""Crash-safe trajectory store: finished rollouts appended to JSONL and Parquet.

Layout of a store directory::

    trajectories.jsonl      one JSON trajectory per line, appended and fsync'ed (turns keep their
                            chat messages and tools, compactly: ``Trajectory.to_dict(messages=True)``)
    rows/part-<id>.parquet  one Parquet file per rollout (written to a temp name, then renamed)

A killed process loses at most the rollout being written: a torn last JSONL line is skipped
(with a warning) on read, and a Parquet part appears only once complete (atomic rename).
:meth:`TrajectoryStore.retain` (called by a resuming run) keeps each rollout once and removes
the lines and parts of rollouts that did not finish.
Read the rows of a whole run with :meth:`TrajectoryStore.read_rows_table` (a pyarrow Table
over ``rows/``).
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import logging
import os
import re
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from strands_art.trajectory import Trajectory

logger = logging.getLogger(__name__)

ROW_SCHEMA = pa.schema(
    [
        ("rollout_id", pa.string()),
        ("group_id", pa.string()),
        ("row_index", pa.int32()),
        ("input_ids", pa.list_(pa.int32())),
        ("loss_mask", pa.list_(pa.int8())),
        ("logprobs", pa.list_(pa.float32())),
        ("turns", pa.list_(pa.int32())),
        ("reward", pa.float64()),
        ("metadata", pa.string()),
    ]
)


class TrajectoryStore:
    """Append-only store of finished trajectories under ``root`` (created if missing).

    Layout: ``root/trajectories.jsonl`` (one :meth:`Trajectory.to_dict` line per rollout, with
    messages) and ``root/rows/*.parquet`` (one row per training sequence: ``input_ids``,
    ``loss_mask``, ``logprobs`` as lists of equal length, ``reward``). Writes are fsynced; ``OSError``
    from the filesystem propagates.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        (self.root / "rows").mkdir(parents=True, exist_ok=True)
        self.jsonl = self.root / "trajectories.jsonl"
        self._lock = threading.Lock()

    def encode(self, trajectory: Trajectory) -> tuple[str, pa.Table]:
        """The JSONL line and the Parquet table :meth:`append` writes, without writing them: a
        trajectory this raises on (a value out of a column's range) can be refused before its
        rollout is given up. Lone surrogates (a non-UTF-8 file name read with
        ``surrogateescape``, e.g. in the evaluation's details) are stored as U+FFFD.

        Raises:
            ValueError: a pyarrow conversion error (ArrowInvalid, ArrowTypeError/OverflowError are
                re-raised as ValueError naming the rollout).
        """
        line = _valid_utf8(json.dumps(trajectory.to_dict(messages=True), ensure_ascii=False)) + "\n"
        try:
            return line, self._rows_table(trajectory)
        except (pa.ArrowException, OverflowError, TypeError) as exc:
            raise ValueError(f"rollout {trajectory.rollout_id!r} cannot be stored: {exc}") from exc

    def append(self, trajectory: Trajectory) -> None:
        """Persist one finished rollout (JSONL line + Parquet part), durably.

        Both are serialized (:meth:`encode`) before anything is written, and a failed JSONL append
        removes the part again, so a failure leaves no orphan.

        Raises:
            ValueError: from :meth:`encode` (nothing written).
            OSError: writing failed (nothing of this rollout is left in the store).
        """
        line, table = self.encode(trajectory)
        final = self.part_path(trajectory.rollout_id)
        try:
            self._write_parquet(trajectory, table)
            with self._lock, open(self.jsonl, "a+b") as f:
                if f.tell() > 0:  # a torn line from a killed writer must not swallow this one
                    f.seek(-1, os.SEEK_END)
                    if f.read(1) != b"\n":
                        line = "\n" + line
                f.write(line.encode("utf-8"))
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            final.with_suffix(".parquet.tmp").unlink(missing_ok=True)
            final.unlink(missing_ok=True)
            raise

    def _write_parquet(self, t: Trajectory, table: pa.Table | None = None) -> None:
        """Write the rows of ``t`` (or ``table``) to its part: a temp name, fsync, rename."""
        final = self.part_path(t.rollout_id)
        tmp = final.with_suffix(".parquet.tmp")
        pq.write_table(self._rows_table(t) if table is None else table, tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, final)

    @staticmethod
    def _rows_table(t: Trajectory) -> pa.Table:
        return pa.Table.from_pylist(
            [
                {
                    "rollout_id": _valid_utf8(t.rollout_id),
                    "group_id": _valid_utf8(t.group_id),
                    "row_index": i,
                    "input_ids": r.input_ids,
                    "loss_mask": r.loss_mask,
                    "logprobs": r.logprobs,
                    "turns": r.turns,
                    "reward": r.reward,
                    "metadata": _valid_utf8(json.dumps(r.metadata, ensure_ascii=False)),
                }
                for i, r in enumerate(t.rows)
            ],
            schema=ROW_SCHEMA,
        )

    def __iter__(self) -> Iterator[Trajectory]:
        """Trajectories in append order; a torn final line (crash mid-write) is skipped."""
        if not self.jsonl.exists():
            return
        with io.TextIOWrapper(open_regular(self.jsonl), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.endswith("\n"):
                    logger.warning("%s:%d: skipping an incomplete line (interrupted write)", self.jsonl, n)
                    continue
                try:
                    yield Trajectory.from_dict(json.loads(line))
                except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                    logger.warning("%s:%d: skipping an unreadable line (%s)", self.jsonl, n, exc)

    def rollout_ids(self) -> set[str]:
        """Ids of the rollouts already stored (for resuming a run)."""
        return {t.rollout_id for t in self}

    def part_path(self, rollout_id: str) -> Path:
        """Where the Parquet rows of ``rollout_id`` are stored: ``rows/`` + :func:`part_name`."""
        return self.root / "rows" / part_name(rollout_id)

    def _lines(self) -> tuple[list[tuple[str | None, str]], str]:
        """``([(rollout id or None if unreadable, line)], torn tail)`` of the JSONL file."""
        if not self.jsonl.exists():
            return [], ""
        with open_regular(self.jsonl) as f:
            text = f.read().decode("utf-8", errors="surrogateescape")
        body, _, tail = text.rpartition("\n")
        out = []
        for line in body.split("\n") if body else []:
            try:
                rid: str | None = Trajectory.from_dict(json.loads(line)).rollout_id
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
                rid = None
            out.append((rid if isinstance(rid, str) else None, line))
        return out, tail

    def complete_ids(self) -> set[str]:
        """Ids with a complete, readable JSONL line *and* their Parquet part."""
        lines, _ = self._lines()
        return {rid for rid, _ in lines if rid is not None and self.part_path(rid).is_file()}

    def retain(self, keep: set[str]) -> tuple[list[str], int]:
        """Keep exactly one trajectory (the last one stored) of each id in ``keep``; drop the rest.

        Unreadable lines and a torn tail go to ``trajectories.jsonl.torn``; lines of other ids and
        repeated lines are removed; so are Parquet parts of ids not kept and ``*.tmp`` leftovers.
        The JSONL file is replaced atomically.

        Returns:
            (ids of the dropped lines, in file order; number of Parquet files removed).
        """
        lines, tail = self._lines()
        last = {rid: i for i, (rid, _) in enumerate(lines) if rid in keep}
        kept = [line for i, (rid, line) in enumerate(lines) if rid is not None and last.get(rid) == i]
        dropped = [rid for i, (rid, _) in enumerate(lines) if rid is not None and last.get(rid) != i]
        unreadable = [line for rid, line in lines if rid is None] + ([tail] if tail else [])
        with self._lock:
            if unreadable:
                torn = self.jsonl.with_name(self.jsonl.name + ".torn")
                with open_append(torn) as f:
                    f.write(
                        "".join(line + "\n" for line in unreadable).encode("utf-8", errors="surrogateescape")
                    )
            if len(kept) != len(lines) or tail:
                tmp = self.jsonl.with_name(self.jsonl.name + ".tmp")
                with open_new(tmp) as f:  # a leftover, or a symlink planted there: never written through
                    f.write("".join(line + "\n" for line in kept).encode("utf-8", errors="surrogateescape"))
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self.jsonl)
            wanted = {self.part_path(rid).name for rid in last}
            removed = 0
            for part in (self.root / "rows").iterdir():
                if part.name not in wanted:
                    part.unlink(missing_ok=True)
                    removed += 1
        return dropped, removed

    def scan(self, start: int = 0) -> tuple[list[StoredLine], int, int]:
        """Index the JSONL file from byte ``start`` without parsing whole trajectories.

        Returns ``(lines, next_start, torn)``: one :class:`StoredLine` per complete line
        (``rollout_id`` read from the line's head, None when unreadable), the offset just after
        the last complete line (pass it back to continue, e.g. while a run is still writing),
        and the size in bytes of a torn tail (a last line without its newline; 0 if none).
        Reads in 1 MiB blocks: memory stays bounded whatever the file size.
        """
        if not self.jsonl.exists():
            return [], 0, 0
        with open_regular(self.jsonl) as f:
            return scan_lines(f, start)

    def read_at(self, line: StoredLine) -> Trajectory:
        """The trajectory of one indexed line (:meth:`scan`).

        Raises:
            ValueError: the line is not a readable trajectory (with the reason).
        """
        with open_regular(self.jsonl) as f:
            return read_line(f, line, str(self.jsonl))

    def read_part(self, rollout_id: str, columns: list[str] | None = None) -> pa.Table:
        """The Parquet rows of one rollout (``columns`` of :data:`ROW_SCHEMA`, default all).

        Raises:
            FileNotFoundError: the part is missing (a run killed before it was written).
        """
        return pq.read_table(self.part_path(rollout_id), columns=columns, schema=ROW_SCHEMA)

    def read_rows_table(self) -> pa.Table:
        """All stored rows as one pyarrow Table with :data:`ROW_SCHEMA`."""
        parts = sorted((self.root / "rows").glob("part-*.parquet"))
        if not parts:
            return ROW_SCHEMA.empty_table()
        return pa.concat_tables([pq.read_table(p, schema=ROW_SCHEMA) for p in parts])


def open_regular(path: Path) -> BinaryIO:
    """``path`` open for binary reading, if it is a regular file: opened without blocking, so a
    FIFO in its place is refused at once instead of waiting for a writer forever.

    Raises:
        FileNotFoundError: no such file.
        OSError: a FIFO, socket, device or directory (EINVAL), or what the kernel says.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, socket, device or directory)", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_append(path: Path) -> BinaryIO:
    """``path`` open for binary appending (created if missing), never through a symlink (ELOOP)
    and never a FIFO (ENXIO without a reader, EINVAL with one): what a copied run directory holds
    at the name is never written through.

    Raises:
        OSError: a symlink, FIFO, socket, device or directory, or what the kernel says.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(path, flags, 0o644)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "ab")
    except BaseException:
        os.close(fd)
        raise


def open_new(path: Path) -> BinaryIO:
    """A new regular file at ``path``, open for binary writing: whatever is there (a leftover of
    a killed write, or a symlink a hostile run directory planted) is removed first, and the file
    is created ``O_EXCL | O_NOFOLLOW``, so nothing outside the directory is ever written through
    it. For the temporary name of an atomic write (write, then ``os.replace``).

    Raises:
        OSError: the file cannot be created.
    """
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    return os.fdopen(fd, "wb")


def part_name(rollout_id: str) -> str:
    """The file name of ``rollout_id``'s Parquet part: ``part-<id>.parquet`` for an id of at most
    100 characters from ``[A-Za-z0-9._-]`` (every id the project makes), else
    ``part-<first 60 such characters>-<16 hex of its SHA-256>.parquet`` — so ``a/b`` and ``a_b``
    never share a part, and a 500-character id still makes a valid file name."""
    safe = _safe(rollout_id)
    if safe != rollout_id or len(safe) > 100:
        digest = hashlib.sha256(rollout_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        safe = f"{safe[:60]}-{digest}"
    return f"part-{safe}.parquet"


def scan_lines(f: BinaryIO, start: int = 0) -> tuple[list[StoredLine], int, int]:
    """Index an open ``trajectories.jsonl`` from byte ``start`` (:meth:`TrajectoryStore.scan`,
    for a reader that opened the file itself, e.g. the viewer's :mod:`strands_art.view.files`).

    Returns ``(lines, next_start, torn)`` as :meth:`TrajectoryStore.scan`. Reads in 1 MiB blocks.
    """
    lines: list[StoredLine] = []
    pos = start
    head, size = b"", 0  # the current line: its first bytes, its length so far
    f.seek(start)
    while block := f.read(1 << 20):
        at = 0
        while (nl := block.find(b"\n", at)) >= 0:
            if len(head) < 4200:
                head += block[at : at + 4200 - len(head)]
            length = size + nl - at
            lines.append(StoredLine(_head_id(head), pos, length))
            pos += length + 1
            head, size, at = b"", 0, nl + 1
        if len(head) < 4200:
            head += block[at : at + 4200 - len(head)]
        size += len(block) - at
    return lines, pos, size


def read_line(f: BinaryIO, line: StoredLine, name: str = "trajectories.jsonl") -> Trajectory:
    """The trajectory of one indexed line of an open ``trajectories.jsonl`` (``name`` for the
    error message).

    Raises:
        ValueError: the line is not a readable trajectory (with the reason).
    """
    f.seek(line.offset)
    data = f.read(line.length)
    try:
        return Trajectory.from_dict(json.loads(data))
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise ValueError(f"{name} at byte {line.offset}: unreadable trajectory ({exc})") from None


@dataclass(frozen=True)
class StoredLine:
    """Where one trajectory line sits in ``trajectories.jsonl`` (bytes, newline excluded)."""

    rollout_id: str | None
    offset: int
    length: int


_HEAD = re.compile(rb'^\{"rollout_id": ("(?:[^"\\]|\\.){0,1000}")')


def _head_id(line: bytes) -> str | None:
    """The rollout id at the head of a stored line (``to_dict`` writes it first); None if the
    line does not start like a stored trajectory."""
    m = _HEAD.match(line[:4200])
    if m is None:
        return None
    try:
        rid = json.loads(m.group(1))
    except ValueError:
        return None
    return rid if isinstance(rid, str) else None


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _valid_utf8(text: str | None) -> str | None:
    """``text`` with lone surrogates replaced by U+FFFD (encodable as UTF-8); None stays None
    (a trajectory without a group)."""
    return None if text is None else _SURROGATE.sub("\ufffd", text)
