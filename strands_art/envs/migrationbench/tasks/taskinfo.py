"""Compute a task's MigrationBench record fields from its project directory.

``python -m strands_art.envs.migrationbench.tasks.taskinfo TASK_DIR... [--write]`` prints (or merges
into ``TASK_DIR/task.json``) the fields ``repo, base_commit, num_java_files, num_loc,
num_pom_xml, num_src_test_java_files, num_test_cases, license`` for ``TASK_DIR/repo``.

Definitions (bundled tasks; the published records come from the upstream dataset as they are):

* ``num_java_files``: ``*.java`` files outside ``target/``; ``num_loc``: their non-blank lines.
* ``num_pom_xml``: ``pom.xml`` files outside ``target/``.
* ``num_src_test_java_files``: ``*.java`` under every module's ``src/test/java``.
* ``num_test_cases``: test methods that are not disabled (static count from the sources via
  :mod:`.javatests`). Upstream counts tests from a run; for these small tasks (no parameterized
  expansion in the original) the two agree, and the evaluator requires ``tests run >=`` it.
* ``base_commit``: the git *tree* id of ``repo/`` (what ``git rev-parse HEAD:<path>/repo`` prints
  once committed), computed in Python so it does not depend on the index.
* ``repo`` and ``license``: kept from an existing task.json; defaults ``strands-art/<task name>``
  and ``Apache-2.0`` (the tasks are written for this project).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from strands_art.envs.migrationbench.tasks.javatests import collect_tests, find_test_source_dirs


def git_tree_id(path: Path, gitlinks: Mapping[str, str] | None = None, _prefix: str = "") -> str:
    """The git tree object id (SHA-1) of directory ``path``, as ``git write-tree`` would give.

    Empty directories are omitted (git does not store them); symlinks hash their target text.
    ``gitlinks`` maps a relative POSIX path to a submodule's commit id (40 hex digits): a
    directory there that is *empty* (how ``git checkout`` leaves a submodule it does not
    fetch) hashes as that gitlink (mode 160000); one holding anything hashes as a directory,
    so the result differs from the commit's tree.
    """
    gitlinks = gitlinks or {}
    entries = []
    for child in path.iterdir():
        if child.name == ".git":
            continue
        rel = _prefix + child.name
        st = child.lstat()
        if stat.S_ISLNK(st.st_mode):
            mode, sha = b"120000", _git_hash(b"blob", os.readlink(child).encode())
        elif stat.S_ISDIR(st.st_mode) and rel in gitlinks and not any(child.iterdir()):
            mode, sha = b"160000", bytes.fromhex(gitlinks[rel])
        elif stat.S_ISDIR(st.st_mode):
            holds_link = any(link.startswith(rel + "/") for link in gitlinks)
            if not holds_link and not any(p.is_file() or p.is_symlink() for p in child.rglob("*")):
                continue
            mode, sha = b"40000", bytes.fromhex(git_tree_id(child, gitlinks, rel + "/"))
        else:
            mode = b"100755" if st.st_mode & stat.S_IXUSR else b"100644"
            sha = _git_hash(b"blob", child.read_bytes())
        sort_key = child.name.encode() + (b"/" if mode == b"40000" else b"")
        entries.append((sort_key, mode + b" " + child.name.encode() + b"\0" + sha))
    body = b"".join(entry for _, entry in sorted(entries))
    return _git_hash(b"tree", body).hex()


def _git_hash(kind: bytes, data: bytes) -> bytes:
    return hashlib.sha1(kind + b" " + str(len(data)).encode() + b"\0" + data).digest()


def _files(root: Path, pattern: str) -> list[Path]:
    return [p for p in root.rglob(pattern) if "target" not in p.relative_to(root).parts and p.is_file()]


def compute_fields(
    project_dir: Path | str, existing: dict[str, Any] | None = None, name: str | None = None
) -> dict[str, Any]:
    """The record fields for ``project_dir`` (see module doc). Raises FileNotFoundError if absent."""
    root = Path(project_dir)
    if not (root / "pom.xml").is_file():
        raise FileNotFoundError(f"no pom.xml in {root}")
    existing = existing or {}
    java = _files(root, "*.java")
    loc = sum(
        1
        for f in java
        for line in f.read_text(encoding="utf-8", errors="replace").splitlines()
        if line.strip()
    )
    test_files = sum(1 for d in find_test_source_dirs(root) for p in d.rglob("*.java") if p.is_file())
    inventory = collect_tests(root)
    if inventory.parse_errors:
        raise ValueError(f"syntax errors in test sources: {inventory.parse_errors}")
    return {
        "repo": existing.get("repo") or f"strands-art/{name or root.resolve().parent.name}",
        "base_commit": git_tree_id(root),
        "num_java_files": len(java),
        "num_loc": loc,
        "num_pom_xml": len(_files(root, "pom.xml")),
        "num_src_test_java_files": test_files,
        "num_test_cases": sum(1 for m in inventory.methods if not m.disabled),
        "license": existing.get("license") or "Apache-2.0",
    }


def update_task(task_dir: Path | str, write: bool = False) -> dict[str, Any]:
    """Compute the fields for ``task_dir/repo``, merged over ``task_dir/task.json`` (other keys kept)."""
    task_dir = Path(task_dir)
    meta_path = task_dir / "task.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.exists() else {}
    merged = {**meta, **compute_fields(task_dir / "repo", meta, name=task_dir.name)}
    if write:
        meta_path.write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Compute MigrationBench task.json fields for task dirs.")
    parser.add_argument("task_dirs", nargs="+", type=Path)
    parser.add_argument("--write", action="store_true", help="merge the fields into TASK_DIR/task.json")
    args = parser.parse_args(argv)
    out = {str(d): update_task(d, write=args.write) for d in args.task_dirs}
    sys.stdout.write(json.dumps(out if len(out) > 1 else next(iter(out.values())), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
