"""What a rollout changed in its workspace: the files that differ from the task's ``repo/``.

An audit, not a reward: it is recorded beside the evaluation (``results.jsonl``, field
``edited_files``) so a training run's successful rollouts can be checked for *what* they changed
(a pom.xml, a test file, a build script). The workspace is hostile input: the walk never follows
a symlink (a link is compared by its target string), never opens anything but a regular file
(a FIFO would block), skips ``.git`` (the agent may rewrite it) and the Maven build outputs the
copy skips (``target/`` next to a ``pom.xml``), and stops after ``max_entries`` entries
(``truncated``).
"""

from __future__ import annotations

import filecmp
import os
import stat
from pathlib import Path
from typing import Any

from strands_art.envs.sandbox.files import MAX_COPY_DEPTH

MAX_ENTRIES = 20_000
"""Entries (files, links, directories) walked per tree before the audit stops (``truncated``)."""

MAX_DEPTH = MAX_COPY_DEPTH
"""Directory levels walked per tree; deeper directories are left out (``truncated``): the
evaluator's copy refuses such a tree too."""


def _tree(root: Path, max_entries: int, max_depth: int) -> tuple[dict[str, os.stat_result], bool]:
    """Relative path -> lstat of every non-directory under ``root`` (``.git`` and ``target/``
    build outputs left out), and whether the walk stopped (``max_entries`` entries) or left a
    directory out (nested deeper than ``max_depth`` levels, or unreadable).

    Iterative (an explicit stack, not ``os.walk``'s recursion): a hostile tree thousands of
    levels deep must cut the walk, never overflow Python's stack."""
    out: dict[str, os.stat_result] = {}
    seen, cut = 0, False
    stack: list[tuple[str, int]] = [(os.fspath(root), 0)]
    while stack:
        dirpath, depth = stack.pop()
        try:
            with os.scandir(dirpath) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            if depth == 0:
                raise  # the tree itself cannot be read
            cut = True  # a directory the agent made unreadable, a path too long: not audited
            continue
        names = {e.name for e in entries}
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                if e.name == ".git" or (e.name == "target" and "pom.xml" in names):
                    continue
                seen += 1
                if depth + 1 > max_depth:
                    cut = True
                    continue
                stack.append((e.path, depth + 1))
                continue
            seen += 1  # a file, a link (to a directory too: never walked into), a FIFO ...
            if seen > max_entries:
                return out, True
            try:
                out[os.path.relpath(e.path, root)] = e.stat(follow_symlinks=False)
            except OSError:
                cut = True
        if seen > max_entries:
            return out, True
    return out, cut


def _same(a: Path, sa: os.stat_result, b: Path, sb: os.stat_result) -> bool:
    if stat.S_ISLNK(sa.st_mode) or stat.S_ISLNK(sb.st_mode):
        return stat.S_ISLNK(sa.st_mode) and stat.S_ISLNK(sb.st_mode) and os.readlink(a) == os.readlink(b)
    if not (stat.S_ISREG(sa.st_mode) and stat.S_ISREG(sb.st_mode)):
        return False  # a FIFO, socket ... in place of a file: changed, and never opened
    return sa.st_size == sb.st_size and filecmp.cmp(a, b, shallow=False)


def edited_files(original: str | os.PathLike[str], workspace: str | os.PathLike[str],
                 max_entries: int = MAX_ENTRIES, max_depth: int = MAX_DEPTH) -> dict[str, Any]:  # fmt: skip
    """The files of ``workspace`` that differ from ``original`` (the task's ``repo/``).

    Args:
        original: the untouched repository (trusted).
        workspace: the rollout's copy after the agent ran (hostile: see the module doc).
        max_entries: entries walked per tree before stopping.
        max_depth: directory levels walked per tree; deeper ones are not (``truncated``).

    Returns:
        ``{"modified": [...], "added": [...], "deleted": [...], "truncated": bool}``: sorted
        POSIX paths relative to the repository root; a file whose type changed (file -> link,
        file -> FIFO) is ``modified``. When a walk was cut (``truncated``), ``added`` is only
        listed if the original's walk was complete, ``deleted`` only if the workspace's was.

    Raises:
        OSError: a tree cannot be walked (the caller records the error instead).
    """
    a_root, b_root = Path(original), Path(workspace)
    a, a_cut = _tree(a_root, max_entries, max_depth)
    b, b_cut = _tree(b_root, max_entries, max_depth)
    modified = [p for p in a if p in b and not _same(a_root / p, a[p], b_root / p, b[p])]
    return {
        "modified": sorted(Path(p).as_posix() for p in modified),
        "added": [] if a_cut else sorted(Path(p).as_posix() for p in b if p not in a),
        "deleted": [] if b_cut else sorted(Path(p).as_posix() for p in a if p not in b),
        "truncated": a_cut or b_cut,
    }
