"""What the bench scripts read from ``strands-art train`` run directories, read strictly.

``bench/seed_tables.py`` (``bench/seed_experiments.py``) and ``bench/update_cost.py`` turn a run's
``train.json``, ``metrics.jsonl`` and ``env/rollouts/results.jsonl`` into tables and decide from
them whether a run is finished or is run again, so a line they cannot read is never skipped
quietly (a skipped evaluation record reads as an unfinished run, and an unfinished run is trained
again over what it had):

- the **last** line of a JSONL file without its newline is a write a killed process did not finish
  (:class:`strands_art.training.metrics.MetricsLog` appends a record and its newline in one write,
  and ``strands-art train --resume`` drops such a line too): it is skipped, with a warning on
  stderr naming the file and line (:func:`read_jsonl`);
- any other line that is not a JSON object, and a record without a key the bench reads (or with a
  value of the wrong type there), is a :class:`RunFileError` naming the file and line.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NEEDS_TYPES = {
    "int": "an integer",
    "number": "a number",
    "str": "a string",
}
"""The value kinds :func:`require` checks (a JSON ``true`` is neither an integer nor a number);
a kind with ``?`` after it (``"number?"``) is checked only where the key is present."""

_warned: set[tuple[str, int]] = set()


class RunFileError(ValueError):
    """A run file the bench cannot read as ``strands-art train`` writes it; the message names the
    file and, for a JSONL file, the line (``PATH:LINE: ...``)."""


@dataclass
class JsonLines:
    """A JSONL file read by :func:`read_jsonl`.

    Attributes:
        path: the file.
        records: ``(line number, record)`` per complete line (1-based), in file order.
        torn: the number of the last line when it had no newline (skipped), else None.
    """

    path: Path
    records: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    torn: int | None = None


def read_jsonl(path: str | Path) -> JsonLines:
    """Every line of the JSONL file ``path`` as a JSON object; a missing file has none.

    A last line without its newline (a write cut short) is skipped and said on stderr, once per
    file and line in a process.

    Raises:
        RunFileError: a complete line that is empty, not UTF-8, not JSON, or JSON that is not an
            object.
        OSError: the file cannot be read.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return JsonLines(path)
    out = JsonLines(path)
    lines = data.split(b"\n")
    if lines[-1] != b"":
        out.torn = len(lines)
        if (str(path), out.torn) not in _warned:
            _warned.add((str(path), out.torn))
            print(
                f"warning: {path}:{out.torn}: the last line has no newline (a write the process did not finish): "
                "skipped",
                file=sys.stderr,
            )
    for n, line in enumerate(lines[:-1], 1):
        try:
            record = json.loads(line.decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            what = "an empty line" if not line.strip() else f"not a JSON line ({str(exc)[:120]})"
            raise RunFileError(f"{path}:{n}: {what}; only the last line may be cut short") from None
        if not isinstance(record, dict):
            raise RunFileError(f"{path}:{n}: a JSON {type(record).__name__}, not a record (a JSON object)")
        out.records.append((n, record))
    return out


def require(where: str, record: Mapping[str, Any], needs: Mapping[str, str]) -> None:
    """Check that ``record`` has each key of ``needs`` with a value of its kind (:data:`NEEDS_TYPES`).

    Args:
        where: the file (and line) the record is from, for the message.

    Raises:
        RunFileError: the first key missing or of another kind.
    """
    for key, kind in needs.items():
        if kind.endswith("?"):
            if key not in record:
                continue
            kind = kind[:-1]
        value = record.get(key)
        if kind == "str":
            ok = isinstance(value, str)
        else:
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            ok = ok and (kind == "number" or isinstance(value, int))
        if not ok:
            got = "no such key" if key not in record else f"{value!r}"[:80]
            raise RunFileError(f"{where}: {key!r} must be {NEEDS_TYPES[kind]} ({got})")


def read_settings(run_dir: str | Path, needs: Mapping[str, str]) -> dict[str, Any]:
    """A run's ``train.json``: a JSON object with the keys of ``needs`` (:func:`require`).

    Raises:
        FileNotFoundError: no ``train.json``.
        RunFileError: not UTF-8 JSON, not an object, or a key of ``needs`` missing or of another kind.
    """
    path = Path(run_dir) / "train.json"
    data = path.read_bytes()
    try:
        settings = json.loads(data.decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise RunFileError(f"{path}:{exc.lineno}: not JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:
        raise RunFileError(f"{path}: not JSON ({str(exc)[:120]})") from None
    if not isinstance(settings, dict):
        raise RunFileError(f"{path}: a JSON {type(settings).__name__}, not an object of settings")
    require(str(path), settings, needs)
    return settings


@dataclass
class Metrics:
    """A run's ``metrics.jsonl`` read by :func:`read_metrics`: its ``train`` and ``eval`` records
    in file order, and the line number of a skipped torn last line (or None)."""

    trains: list[dict[str, Any]] = field(default_factory=list)
    evals: list[dict[str, Any]] = field(default_factory=list)
    torn: int | None = None


def read_metrics(path: str | Path, train: Mapping[str, str], evaluation: Mapping[str, str]) -> Metrics:
    """The records of a ``metrics.jsonl`` (:func:`read_jsonl`): each needs a string ``kind``; a
    ``train`` record the keys of ``train`` and an ``eval`` record those of ``evaluation`` (both
    an integer ``outer_batch`` >= 0 too). Other kinds are left out.

    Raises:
        RunFileError: see :func:`read_jsonl` and :func:`require`.
        OSError: the file cannot be read.
    """
    lines = read_jsonl(path)
    out = Metrics(torn=lines.torn)
    for n, record in lines.records:
        where = f"{lines.path}:{n}"
        require(where, record, {"kind": "str"})
        kind = record["kind"]
        if kind in ("train", "eval"):
            require(
                where + f" ({kind} record)",
                record,
                {"outer_batch": "int", **(train if kind == "train" else evaluation)},
            )
            if record["outer_batch"] < 0:
                raise RunFileError(f"{where}: 'outer_batch' must be >= 0 ({record['outer_batch']})")
            (out.trains if kind == "train" else out.evals).append(record)
    return out
