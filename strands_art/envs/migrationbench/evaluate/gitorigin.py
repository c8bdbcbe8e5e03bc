"""The original test methods of a task given without ``repo/``, from git objects checked by hash.

A task without ``repo/`` (a bare MigrationBench record) names its original only by
``base_commit``; the one copy of that commit at hand is the evaluated repository's own ``.git``,
which the agent controls: it can commit other tests and ``git replace`` the base commit, rewrite
an object file, point ``objects/info/alternates`` elsewhere, or add ``export-ignore``
attributes. So the original is never taken from what git *says*: every object is read raw with
``git --no-replace-objects cat-file --batch`` (no replace refs, no attributes, no filters, in
the sandbox with the repository read-only) and hashed here — the commit against the task's full
``base_commit`` id, each tree and blob against the id its parent tree gives. A mismatch, a
missing object or an abbreviated id raises :class:`GitObjectError`. Only ``*.java`` files on a
``src/test/java`` path (what :func:`.javatests.collect_tests` parses) and the files that may be
POMs (:func:`original_from_git`: how the original selects tests) are read; forging one
would take a SHA-1 (or SHA-256) second preimage.

Source: git's object format (``gitformat-*``: ``<type> <size>\\0<content>`` hashed; tree entries
``<mode> <name>\\0<raw id>``), ``git-cat-file(1)`` ``--batch`` output.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from strands_art.envs.migrationbench.evaluate.testselection import RUNTIME_SELECTION_FILES
from strands_art.envs.migrationbench.tasks.javatests import TestInventory, collect_tests
from strands_art.envs.sandbox import Identity, Sandbox, chown_tree, run_sync

#: git object ids by length: SHA-1 (40 hex digits) and SHA-256 (64) repositories.
HASHES = {40: "sha1", 64: "sha256"}
MAX_TREES = 200_000
MAX_BATCH_OUTPUT = 256 << 20
_BATCH = 5000


class GitObjectError(ValueError):
    """The repository's git objects do not give the original (missing, or not what their id says)."""


def _hash(algo: str, kind: bytes, body: bytes) -> str:
    return hashlib.new(algo, kind + b" " + str(len(body)).encode() + b"\0" + body).hexdigest()


class _Reader:
    """Runs ``git cat-file --batch`` on ``repo`` (sandboxed unless ``unsafe``) in ``tmp``."""

    def __init__(self, repo: Path, identity: Identity, unsafe: bool, tmp: Path, algo: str) -> None:
        self.repo, self.algo, self.tmp = repo, algo, tmp
        self.out = tmp / "out"
        self.out.mkdir()
        chown_tree(self.out, identity)
        self.sandbox = None if unsafe else Sandbox(identity, writable=(self.out,), readonly=(repo,))

    def fetch(self, ids: list[str], kind: bytes) -> dict[str, bytes]:
        """The bodies of ``ids``, each of type ``kind`` and hashing to its id."""
        found: dict[str, bytes] = {}
        for start in range(0, len(ids), _BATCH):
            chunk = ids[start : start + _BATCH]
            (self.out / "ids").write_text("".join(f"{i}\n" for i in chunk), encoding="ascii")
            git = 'git --no-replace-objects -c safe.directory=* -C "$1" cat-file --batch < "$2"'
            with open(self.tmp / "batch.out", "w+b") as out:
                code, timed_out = run_sync(
                    self.sandbox,
                    ["sh", "-c", f"exec {git}", "sh", str(self.repo), str(self.out / "ids")],
                    cwd=self.out,
                    env={"HOME": str(self.out)},
                    timeout_s=120,
                    stdout=out,
                )
                if code != 0 or timed_out:
                    out.seek(0)
                    said = out.read(300).decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
                    raise GitObjectError(f"git cat-file failed (exit {code}): {said[0]}")
                if out.seek(0, os.SEEK_END) > MAX_BATCH_OUTPUT:
                    raise GitObjectError("git cat-file wrote more than 256 MiB")
                out.seek(0)
                data = out.read()
            found.update(self._parse(data, chunk, kind))
        return found

    def _parse(self, data: bytes, ids: list[str], kind: bytes) -> dict[str, bytes]:
        found, pos = {}, 0
        for oid in ids:
            end = data.find(b"\n", pos)
            header = data[pos:end].split() if end >= 0 else []
            if len(header) != 3 or header[0].decode("ascii", "replace") != oid or not header[2].isdigit():
                said = b" ".join(header[:2]).decode("ascii", "replace")
                raise GitObjectError(f"object {oid} is missing or unreadable ({said!r})")
            size = int(header[2])
            body = data[end + 1 : end + 1 + size]
            pos = end + 1 + size + 1
            if header[1] != kind or len(body) != size or _hash(self.algo, kind, body) != oid:
                raise GitObjectError(f"object {oid} is not the {kind.decode()} its id names")
            found[oid] = body
        return found


def _tree_entries(body: bytes, id_len: int) -> list[tuple[bytes, str, str]]:
    """``(mode, name, hex id)`` of a raw tree object."""
    entries, pos = [], 0
    while pos < len(body):
        space = body.index(b" ", pos)
        nul = body.index(b"\0", space)
        mode, name = body[pos:space], os.fsdecode(body[space + 1 : nul])
        entries.append((mode, name, body[nul + 1 : nul + 1 + id_len].hex()))
        pos = nul + 1 + id_len
    return entries


def _wanted(path: str) -> bool:
    parts = path.split("/")
    return (
        (
            path.endswith(".java")
            and any(parts[i : i + 3] == ["src", "test", "java"] for i in range(len(parts)))
        )
        or _pom_candidate(path)
        or _runtime_selection(path)
    )


def _runtime_selection(path: str) -> bool:
    """A file that selects tests at run time (:data:`.testselection.RUNTIME_SELECTION_FILES`)."""
    parts = path.split("/")
    return parts[-1] in RUNTIME_SELECTION_FILES and "target" not in parts[:-1]


def _pom_candidate(path: str) -> bool:
    """A file that may be a POM: ``pom.xml``, or any ``*.xml`` outside ``src/`` and ``target/``."""
    parts = path.split("/")
    return parts[-1] == "pom.xml" or (
        path.endswith(".xml") and "src" not in parts[:-1] and "target" not in parts[:-1]
    )


def original_tests_from_git(
    repo: Path, commit: str, identity: Identity, unsafe: bool, scratch_dir: Path | None = None
) -> TestInventory:
    """The test methods of ``commit`` in the repository ``repo`` (a build copy owned by
    ``identity``), every object verified (see the module doc).

    Raises:
        GitObjectError: ``commit`` is not a full id, or an object is missing or forged.
    """
    return original_from_git(repo, commit, identity, unsafe, scratch_dir)[0]


def original_from_git(
    repo: Path, commit: str, identity: Identity, unsafe: bool, scratch_dir: Path | None = None
) -> tuple[TestInventory, dict[str, bytes]]:
    """:func:`original_tests_from_git`, and the commit's POM candidates (``pom.xml``, and
    ``*.xml`` outside ``src/`` and ``target/``) and the files that select tests at run time
    (:data:`.testselection.RUNTIME_SELECTION_FILES`) by path, hash-checked the same way.

    Raises:
        GitObjectError: as :func:`original_tests_from_git`.
    """
    algo = HASHES.get(len(commit))
    if algo is None or any(c not in "0123456789abcdef" for c in commit.lower()):
        raise GitObjectError(f"base_commit {commit[:80]!r} is not a full commit id (40 or 64 hex digits)")
    commit, id_len = commit.lower(), len(commit) // 2
    with tempfile.TemporaryDirectory(prefix="strands-art-orig-", dir=scratch_dir) as tmp:
        os.chmod(tmp, 0o711)
        reader = _Reader(repo, identity, unsafe, Path(tmp), algo)
        body = reader.fetch([commit], b"commit")[commit]
        first = body.split(b"\n", 1)[0].split()
        if len(first) != 2 or first[0] != b"tree":
            raise GitObjectError(f"commit {commit} names no tree")
        level: dict[str, list[str]] = {first[1].decode("ascii", "replace"): [""]}
        blobs: dict[str, list[str]] = {}
        seen = 0
        while level:
            seen += sum(len(p) for p in level.values())
            if seen > MAX_TREES:
                raise GitObjectError(f"commit {commit} has more than {MAX_TREES} trees")
            trees = reader.fetch(sorted(level), b"tree")
            nxt: dict[str, list[str]] = {}
            for oid, prefixes in level.items():
                for mode, name, child in _tree_entries(trees[oid], id_len):
                    if not name or name in (".", "..") or "/" in name:
                        continue
                    for prefix in prefixes:
                        path = f"{prefix}{name}"
                        if mode == b"40000":
                            nxt.setdefault(child, []).append(f"{path}/")
                        elif mode.startswith(b"100") and _wanted(path):
                            blobs.setdefault(child, []).append(path)
            level = nxt
        src = Path(tmp) / "src"
        src.mkdir()
        poms: dict[str, bytes] = {}
        for oid, content in reader.fetch(sorted(blobs), b"blob").items():
            for path in blobs[oid]:
                if _pom_candidate(path) or _runtime_selection(path):
                    poms[path] = content
                    continue
                target = src / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
        return collect_tests(src), poms
