"""Checks on a task directory before anything uses it: a bad task is refused as a bad task.

A task directory (``task.json``, ``repo/``, optional ``offline/``) is trusted input, but a
malformed one must fail loudly at load time, naming the task, and never later as a score against
the agent or as an error that repeats on every ``--resume``:

* :func:`read_task_json`: ``task.json`` must be a regular file of at most
  :data:`MAX_TASK_JSON_BYTES` holding a UTF-8 JSON object. It is opened ``O_NONBLOCK`` and checked
  with ``fstat`` before reading, so a FIFO named ``task.json`` is refused instead of blocking the
  reader forever.
* :func:`check_task_name`: a task's name (``task.json["name"]`` or the directory's name) is a
  string of 1 to :data:`MAX_TASK_NAME` characters from ``[A-Za-z0-9_.+-]``, not starting with a
  dot. Names become parts of file names (``logs/<name>-r<k>.eval.json``, rollout ids in
  training runs): a 250-character name made every rollout fail with ``File name too long``.
* :func:`check_task_tree`: ``repo/`` is walked without following symlinks and must stay within
  the build copy's bounds (:data:`~strands_art.envs.sandbox.files.MAX_COPY_DEPTH` levels,
  :data:`~strands_art.envs.sandbox.files.MAX_COPY_ENTRIES` entries): a task tree the evaluator
  would refuse to copy was scored 0.0 against the agent.

* :data:`MAX_TEST_CASES` and :func:`check_commit_id`: the record fields the evaluator and the
  task loader both check (``num_test_cases`` in range; ``base_commit`` hex, as it is passed to git).

Every check raises :class:`TaskDirError` or a plain ``ValueError`` (:func:`check_commit_id`);
callers map it to their own error (``BadTask`` in the evaluator, ``TaskError`` in the task loader).
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from strands_art.envs.sandbox.files import MAX_COPY_DEPTH, MAX_COPY_ENTRIES

MAX_TASK_JSON_BYTES = 1 << 20
"""The largest ``task.json`` read (1 MiB; a real one is under 10 KiB)."""

#: the most test cases a task may require: far above any repository's count (a number such as
#: 10**30 is a malformed task, refused before anything is built)
MAX_TEST_CASES = 10_000_000

MAX_TASK_NAME = 150
"""The longest task name: GitHub's ``owner__name`` fits (39 + 2 + 100), and a rollout id built
from it (``b<k>-<name>-r<k>``) plus ``.eval.json`` stays far below the 255-byte file-name limit."""

_NAME = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9_.+-]*")


class TaskDirError(ValueError):
    """A task directory is malformed; the message names the file and what is wrong."""


def read_task_json(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The JSON object in ``path`` (a task's ``task.json``).

    Raises:
        TaskDirError: missing, not a regular file (a FIFO, a device, a directory), larger than
            :data:`MAX_TASK_JSON_BYTES`, not UTF-8 JSON, nested too deeply, or not an object.
    """
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise TaskDirError(f"{p}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TaskDirError(f"{p} is not a regular file (a FIFO, device or directory): not a task")
        if st.st_size > MAX_TASK_JSON_BYTES:
            raise TaskDirError(f"{p}: {st.st_size:,} bytes, more than {MAX_TASK_JSON_BYTES:,}")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_TASK_JSON_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_TASK_JSON_BYTES:
        raise TaskDirError(f"{p}: more than {MAX_TASK_JSON_BYTES:,} bytes")
    try:
        meta = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise TaskDirError(f"{p}: JSON nested too deeply") from None
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise TaskDirError(f"{p}: invalid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise TaskDirError(f"{p} must hold a JSON object, got {type(meta).__name__}")
    return meta


def check_task_name(name: object, where: str) -> str:
    """``name`` if it is a usable task name (see the module doc), else :class:`TaskDirError`."""
    if not isinstance(name, str):
        raise TaskDirError(
            f"{where}: the task name must be a string, got {type(name).__name__} {str(name)[:60]}"
        )
    if not 1 <= len(name) <= MAX_TASK_NAME:
        raise TaskDirError(
            f"{where}: the task name has {len(name)} characters; 1 to {MAX_TASK_NAME} allowed "
            f"(it becomes part of file names): {name[:40]!r}..."
        )
    if not _NAME.fullmatch(name):
        raise TaskDirError(
            f"{where}: task name {name[:80]!r} may hold only A-Z a-z 0-9 _ . + - and not start with a dot"
        )
    return name


def task_name(task_dir: Path, meta: dict[str, Any]) -> str:
    """The task's name: ``meta["name"]`` when present, else the directory's name; checked."""
    where = str(task_dir / "task.json")
    if "name" in meta:
        return check_task_name(meta["name"], where)
    return check_task_name(task_dir.name or task_dir.resolve().name, f"{where} (the task directory's name)")


def check_task_tree(
    root: str | os.PathLike[str], *, max_depth: int = MAX_COPY_DEPTH, max_entries: int = MAX_COPY_ENTRIES
) -> int:
    """Walk ``root`` (a task's ``repo/``) without following symlinks; return its entry count.

    Iterative (any depth is walked without recursion) and bounded: it stops at the first
    directory deeper than ``max_depth`` levels or past ``max_entries`` entries.

    Raises:
        TaskDirError: the tree is deeper or larger than the evaluator's build copy accepts, or a
            directory cannot be read.
    """
    base = Path(root)
    stack: list[tuple[str, int]] = [(str(base), 0)]
    count = 0
    while stack:
        path, depth = stack.pop()
        try:
            with os.scandir(path) as it:
                for entry in it:
                    count += 1
                    if count > max_entries:
                        raise TaskDirError(
                            f"{base}: more than {max_entries:,} entries: not a task the evaluator can copy"
                        )
                    if entry.is_dir(follow_symlinks=False):
                        if depth + 1 >= max_depth:
                            raise TaskDirError(
                                f"{base}: directories nested more than {max_depth} levels deep "
                                f"(at {os.path.relpath(entry.path, base)[:120]}...): not a task the evaluator can copy"
                            )
                        stack.append((entry.path, depth + 1))
        except OSError as exc:
            raise TaskDirError(f"{base}: cannot read {path[:200]}: {exc.strerror or exc}") from None
    return count


def check_commit_id(value: object, what: str) -> str:
    """``value`` if it is a git object id (4 to 64 hex digits); else ValueError naming ``what``.

    A commit id from a task file is passed to git; anything else (``--output=PATH``) could be
    read as an option."""
    if not isinstance(value, str) or not _COMMIT_ID.fullmatch(value):
        raise ValueError(f"{what} must be a hex git commit id, got {str(value)[:80]!r}")
    return value


_COMMIT_ID = re.compile(r"[0-9a-fA-F]{4,64}")
