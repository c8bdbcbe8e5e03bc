"""The evaluator's copy of the evaluated repository: measured before a byte is written, and
bounded in time by the build's own timeout.

The repository is hostile: 200,000 empty files took 417 s to copy for a build limited to 30 s,
and sparse files (``truncate -s 1000M``) were written out as zeros until the copy's byte cap
refused the tree. :func:`copy_for_build` first walks the tree with ``lstat`` only
(:func:`measure_tree`: entries, depth, apparent bytes of regular files, the same bounds as
:func:`~strands_art.envs.sandbox.files.copy_tree`), so a tree over a bound is refused before
anything is copied; then copies it with a deadline (the build timeout), so a tree that is
merely slow to copy is refused too. Both raise
:class:`~strands_art.envs.sandbox.files.UnsafeFile`: the rollout scores 0.0 with
``evaluation_error.reason`` ``unsafe_tree``.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from strands_art.envs.migrationbench.workspace import maven_build_outputs
from strands_art.envs.sandbox import Identity
from strands_art.envs.sandbox.files import (
    MAX_COPY_DEPTH,
    MAX_COPY_ENTRIES,
    UnsafeFile,
    copy_tree,
    display_path,
)

#: Bytes of regular files (apparent size: a sparse file counts whole) a build copy may hold.
MAX_COPY_BYTES = 2 << 30


@dataclass(frozen=True)
class TreeSize:
    """What :func:`measure_tree` counted: ``entries`` listed, ``bytes`` of regular files
    (apparent size), ``allocated`` bytes of them on disk (``st_blocks * 512``), deepest level."""

    entries: int
    bytes: int
    allocated: int
    depth: int


def measure_tree(
    root: Path,
    *,
    max_entries: int = MAX_COPY_ENTRIES,
    max_bytes: int = MAX_COPY_BYTES,
    max_depth: int = MAX_COPY_DEPTH,
    deadline: float | None = None,
) -> TreeSize:
    """Walk ``root`` (iteratively, never following a symlink, leaving out what the build copy
    leaves out: :func:`.workspace.maven_build_outputs`) and count it.

    Raises:
        UnsafeFile: more than ``max_entries`` entries, ``max_bytes`` bytes of regular files
            (apparent size, so a sparse file counts whole), ``max_depth`` directory levels, or
            still walking at ``deadline`` (``time.monotonic()``).
    """
    entries = total = allocated = deepest = 0
    stack: list[tuple[Path, str, int]] = [(Path(root), "", 0)]
    while stack:
        here, rel, depth = stack.pop()
        deepest = max(deepest, depth)
        try:
            with os.scandir(here) as it:
                listed = []
                for entry in it:
                    entries += 1
                    if entries > max_entries:
                        raise UnsafeFile(f"{root}: more than {max_entries} files and directories")
                    listed.append(entry)
        except FileNotFoundError:
            continue
        if deadline is not None and time.monotonic() > deadline:
            raise UnsafeFile(f"{root}: measuring it took longer than its time bound")
        drop = maven_build_outputs(rel, [e.name for e in listed])
        for entry in listed:
            if entry.name in drop:
                continue
            st = entry.stat(follow_symlinks=False)
            child = f"{rel}/{entry.name}" if rel else entry.name
            if stat.S_ISDIR(st.st_mode):
                if depth + 1 > max_depth:
                    raise UnsafeFile(
                        f"{root}: directories nested deeper than {max_depth} levels "
                        f"({display_path(child)[:200]}...)"
                    )
                stack.append((Path(entry.path), child, depth + 1))
            elif stat.S_ISREG(st.st_mode):
                total += st.st_size
                allocated += st.st_blocks * 512
                if total > max_bytes:
                    raise UnsafeFile(f"{root}: more than {max_bytes} bytes of files")
    return TreeSize(entries, total, allocated, deepest)


def copy_for_build(
    repo: Path, build: Path, identity: Identity | None, timeout_s: float | None = None
) -> list[str]:
    """Copy ``repo`` to the new directory ``build`` (owned by ``identity``; None: the caller)
    without Maven outputs
    (every ``target/`` next to a ``pom.xml``), after :func:`measure_tree` accepted it, within
    ``timeout_s`` seconds for both (None: no time bound). Returns what was left out
    (:func:`~strands_art.envs.sandbox.files.copy_tree`).

    Raises:
        UnsafeFile: the tree is over a bound, or the measure and copy took over ``timeout_s``.
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    measure_tree(repo, deadline=deadline)
    return copy_tree(
        repo,
        build,
        identity=identity,
        skip_dir=maven_build_outputs,
        max_total_bytes=MAX_COPY_BYTES,
        deadline=deadline,
    )
