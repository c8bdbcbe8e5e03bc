"""Which code trained a run: ``RUN_DIR/code.jsonl``, one line per process that trained it.

``train.json`` holds a run's settings, not the code that ran them, and a resumed run may
continue under other code (a checkout moved on, a package upgraded). So every process that
trains a run (a fresh start or a ``--resume``, once it has its first rollouts or record: one
refused before that, a damaged checkpoint say, leaves the run as it was) appends one JSON line::

    {"at": "2026-12-05T07:13:16Z", "resume": true, "from_batch": 2, "strands_art": "0.1.0",
     "commit": "adcf6e1...", "dirty": false, "python": "3.11.7", "torch": "2.13.0"}

``from_batch``: the outer batch the process starts training at (0 for a fresh run; a run whose
first line starts later trained its earlier batches before it recorded its code). ``commit`` /
``dirty``: the git commit of the checkout strands-art was imported from and whether its tracked
files differ from it (``git --no-optional-locks status --porcelain --untracked-files=no``), read
when the process starts the run, before its model loads; both None for an installed package (no
``.git`` beside it) or when git is missing, refuses the checkout or is slow (:data:`GIT_TIMEOUT_S`),
and ``dirty`` alone None when only the status failed (unknown, not clean). A bench that reads
runs back (``bench/seed_experiments.py``) reports the commits, so runs of different code never
join one table unmarked.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

CODE_FILE = "code.jsonl"
GIT_TIMEOUT_S = 10.0
#: the checkout strands-art is imported from, when it is one (``strands_art/..``)
SOURCE_ROOT = Path(__file__).resolve().parents[2]


def _git(root: Path, *args: str) -> str | None:
    """``git -C root ARGS``'s output (stripped), or None when it fails, is missing or times out.
    Takes no optional lock (a ``git commit`` beside it never finds ``index.lock`` taken) and
    ignores ``GIT_DIR`` / ``GIT_WORK_TREE`` of the caller's environment (they would name another
    repository)."""
    env = {k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
    try:
        out = subprocess.run(
            ["git", "--no-optional-locks", "-C", str(root), *args],
            capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=True, env=env,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def code_provenance(root: Path = SOURCE_ROOT) -> dict[str, Any]:
    """The code this process runs: strands-art's version, the git commit of ``root`` and whether
    its tracked files differ from it (None / None when ``root`` has no ``.git``), and the Python
    and torch versions (None when torch is not installed)."""
    commit = dirty = None
    if (root / ".git").exists():
        commit = _git(root, "rev-parse", "HEAD")
        status = _git(root, "status", "--porcelain", "--untracked-files=no") if commit else None
        dirty = None if status is None else bool(status)
    return {
        "strands_art": _version("strands-art"),
        "commit": commit,
        "dirty": dirty,
        "python": platform.python_version(),
        "torch": _version("torch"),
    }


def start_line(resume: bool, from_batch: int, root: Path = SOURCE_ROOT) -> dict[str, Any]:
    """This process's line of ``code.jsonl`` (see the module), read now: call it when the process
    starts a run, before its model loads (a checkout can move on meanwhile)."""
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"at": now, "resume": resume, "from_batch": from_batch, **code_provenance(root)}


def record_start(run_dir: Path, line: dict[str, Any]) -> None:
    """Append ``line`` (:func:`start_line`) to ``run_dir/code.jsonl``.

    Raises:
        OSError: the file cannot be written.
    """
    with open(run_dir / CODE_FILE, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


def parse_code(data: bytes) -> list[dict[str, Any]]:
    """The lines of a ``code.jsonl`` (its bytes) that parse as JSON objects, in order; a line that
    does not (a write cut short, not UTF-8, not an object) is skipped."""
    out = []
    for text in data.decode("utf-8", errors="replace").splitlines():
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def read_code(run_dir: Path) -> list[dict[str, Any]]:
    """:func:`parse_code` of ``run_dir/code.jsonl`` ([] when there is no such file: a run started
    before strands-art recorded its code)."""
    path = run_dir / CODE_FILE
    if not path.is_file():
        return []
    return parse_code(path.read_bytes())
