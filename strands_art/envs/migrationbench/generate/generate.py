"""Generate MigrationBench tasks: deterministic Java 8 Maven projects, each with its reference migration.

``strands-art make-tasks OUT_DIR --kinds KIND,... --n N --seed S [--split train|eval|heldout-kind]``
writes ``N`` task directories in the bundled tasks' format (docs/migrationbench-tasks.md,
"Generated tasks"):

* ``repo/``: the Java 8 project, a git repository with one commit (fixed author and date drawn
  from the seed, so the commit id is the same on every machine with the same git);
* ``task.json``: the MigrationBench record fields (:mod:`.taskinfo`; ``base_commit`` is that
  commit's id) plus ``generated``: kind, seed, split, where the Java level is set, JUnit flavours,
  and whether the untouched ``mvn clean verify`` succeeds under JDK 17;
* ``reference.patch``: a minimal migration (``git diff`` made in a scratch repository, so the
  migrated files never enter ``repo/.git``).

Task ``i`` gets kind ``kinds[i % len(kinds)]`` and seed ``S + i`` (offset by the split's base,
:data:`SPLITS`); everything in it is drawn from ``random.Random(sha256(f"{kind}/{seed}"))``, so
the same arguments give byte-identical files (``repo/.git/index`` aside: it records file stat
data) and the same commit ids. The generated code only uses what Debian's offline Maven
repository can build. Each task is then checked with two sandboxed builds (:mod:`.verify`):
untouched 0.0, reference 1.0; each outcome is written into the task's ``task.json``
(``generated.check``), and ``train`` refuses a task whose check failed. ``--no-verify`` skips the
checks (``train`` then warns that the tasks are unchecked). The command's flags and what runs
them: :mod:`.command`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strands_art.envs.migrationbench.generate.gen_project import Project, build_project

logger = logging.getLogger(__name__)

GENERATOR_VERSION = 1


@dataclass(frozen=True)
class Kind:
    """A task kind: what the Java 8 project gets wrong for 17, and whether the evaluator's compile
    build (``mvn clean verify -DskipTests=true``, docs/migrationbench.md) still succeeds on it
    untouched: the kinds that fail only when their tests run (argLine flags, Nashorn, reflective
    access) compile, and score 0.0 on the bytecode check."""

    name: str
    doc: str
    untouched_builds: bool


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            "java-level-props",
            "maven.compiler.source/target 1.8, or a java.version property feeding them",
            True,
        ),
        Kind(
            "compiler-plugin", "the compiler plugin's <source>/<target> 1.8 (literal or via a property)", True
        ),
        Kind("release-flag", "maven.compiler.release or <release> 8 (javac 17 honours it: major 52)", True),
        Kind(
            "parent-pom", "the level set in a parent POM (relativePath, or a module of an aggregator)", True
        ),
        Kind(
            "profile", "the level set in a profile active by default or activated by <jdk>[1.8,)</jdk>", True
        ),
        Kind(
            "multi-module",
            "2-3 modules; level in the root (properties or pluginManagement), maybe a module override",
            True,
        ),
        Kind(
            "old-plugins",
            "compiler 3.1-3.3 with <source>/<target>, surefire 2.12.4-2.18.1 and other 2013-era pins",
            True,
        ),
        Kind(
            "surefire-argline", "surefire argLine (plugin or property) with JVM flags Java 17 refuses", True
        ),
        Kind("javax-annotation", "@PostConstruct/@PreDestroy/@Generated (left the JDK in 11)", False),
        Kind("jaxb", "javax.xml.bind.DatatypeConverter (left the JDK in 11)", False),
        Kind("nashorn", "a javax.script JavaScript engine (Nashorn left in 15): tests fail", True),
        Kind(
            "reflective-access",
            "setAccessible into String/ArrayList internals (denied on 17): tests error",
            True,
        ),
        Kind("base64", "sun.misc.BASE64Encoder/Decoder (removed in 9)", False),
    )
}

#: Seed ranges of the splits: ``--seed S`` is an offset inside the range (task seeds never overlap).
SPLITS: dict[str, tuple[int, int]] = {
    "train": (0, 1_000_000),
    "eval": (1_000_000, 2_000_000),
    "heldout-kind": (2_000_000, 3_000_000),
}
#: The kind kept out of ``train`` and ``eval``: only ``--split heldout-kind`` makes it.
HELDOUT_KIND = "base64"

_MAX_SEED = 1 << 40
MAX_TASKS = 10_000
"""The most tasks one ``make-tasks`` makes (each is a git repository and two Maven builds)."""


class GenerateError(ValueError):
    """Bad generator arguments (unknown kind, seed out of its split's range, OUT_DIR not empty)."""


def task_rng(kind: str, seed: int) -> random.Random:
    """The random generator of task ``(kind, seed)``: independent of Python's hash seed and platform."""
    return random.Random(hashlib.sha256(f"{kind}/{seed}".encode()).digest())


def task_name(kind: str, seed: int) -> str:
    return f"{kind}-{seed:07d}"


def plan(kinds: list[str] | None, n: int, seed: int, split: str | None) -> list[tuple[str, int]]:
    """The ``(kind, task seed)`` of each task, in order (see the module doc). Raises GenerateError."""
    if not 1 <= n <= MAX_TASKS:
        raise GenerateError(f"--n must be in [1, {MAX_TASKS}], got {n}")
    if seed < 0 or seed + n > _MAX_SEED:
        raise GenerateError(f"--seed must be in [0, {_MAX_SEED} - --n], got {seed} with --n {n}")
    unknown = [k for k in kinds or [] if k not in KINDS]
    if unknown:
        raise GenerateError(f"unknown kind(s) {unknown}; known: {', '.join(KINDS)}")
    if kinds is not None and len(set(kinds)) != len(kinds):
        raise GenerateError(f"--kinds names a kind twice: {kinds}")
    base = 0
    if split is not None:
        if split not in SPLITS:
            raise GenerateError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
        lo, hi = SPLITS[split]
        if seed + n > hi - lo:
            raise GenerateError(f"--seed {seed} + --n {n} exceeds split {split}'s {hi - lo} seeds")
        base = lo
        if split == "heldout-kind":
            if kinds not in (None, [HELDOUT_KIND]):
                raise GenerateError(f"--split heldout-kind makes only the held-out kind {HELDOUT_KIND}")
            kinds = [HELDOUT_KIND]
        elif kinds is not None and HELDOUT_KIND in kinds:
            raise GenerateError(
                f"{HELDOUT_KIND} is the held-out kind: it is made only by --split heldout-kind"
            )
    if kinds is None:
        kinds = [k for k in KINDS if split is None or k != HELDOUT_KIND]
    return [(kinds[i % len(kinds)], base + seed + i) for i in range(n)]


# --------------------------------------------------------------------------- git


def _git_env(home: Path, project: Project) -> dict[str, str]:
    n = project.names
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LC_ALL": "C",
        "TZ": "UTC",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": n.author,
        "GIT_AUTHOR_EMAIL": n.email,
        "GIT_AUTHOR_DATE": n.date,
        "GIT_COMMITTER_NAME": n.author,
        "GIT_COMMITTER_EMAIL": n.email,
        "GIT_COMMITTER_DATE": n.date,
    }


def _git(repo: Path, env: dict[str, str], *args: str) -> str:
    proc = subprocess.run(
        ["git", "-c", "core.autocrlf=false", "-c", "commit.gpgsign=false", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {repo}: {proc.stderr.strip()}")
    return proc.stdout


def _write(root: Path, files: dict[str, str | None]) -> None:
    for rel, text in files.items():
        path = root / rel
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))


def _commit(repo: Path, project: Project, home: Path) -> str:
    """``git init`` + one commit of everything in ``repo``; returns the commit id."""
    env = _git_env(home, project)
    _git(repo, env, "init", "-q", "--template=", "--initial-branch=main")
    _git(repo, env, "add", "-A")
    message = f"Import {project.names.title} ({project.names.version})"
    _git(repo, env, "commit", "-q", "--no-verify", "-m", message)
    return _git(repo, env, "rev-parse", "HEAD").strip()


def reference_patch(project: Project) -> str:
    """``git diff`` of the Java 8 files against the migrated ones, made in a scratch repository."""
    with tempfile.TemporaryDirectory(prefix="strands-art-gen-") as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        _write(repo, project.before)
        _commit(repo, project, Path(tmp))
        _write(repo, project.after)
        env = _git_env(Path(tmp), project)
        _git(repo, env, "add", "-A")
        return _git(
            repo,
            env,
            "diff",
            "--cached",
            "--no-color",
            "--no-ext-diff",
            "--no-renames",
            "--src-prefix=a/",
            "--dst-prefix=b/",
        )


# --------------------------------------------------------------------------- tasks


def generate_task(kind: str, seed: int, out_dir: Path, split: str | None = None) -> Path:
    """Write task ``(kind, seed)`` to ``out_dir/<kind>-<seed>``; returns the task directory.

    Raises:
        GenerateError: unknown kind, or the task directory exists already.
        RuntimeError: git failed.
    """
    # the task fields parse Java with tree-sitter: imported here, not when the CLI registers make-tasks
    from strands_art.envs.migrationbench.tasks.taskinfo import compute_fields

    if kind not in KINDS:
        raise GenerateError(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")
    project = build_project(kind, task_rng(kind, seed))
    name = task_name(kind, seed)
    task_dir = Path(out_dir) / name
    if task_dir.exists():
        raise GenerateError(f"{task_dir} exists already")
    repo = task_dir / "repo"
    repo.mkdir(parents=True)
    try:
        _write(repo, project.before)
        with tempfile.TemporaryDirectory(prefix="strands-art-gen-home-") as home:
            commit = _commit(repo, project, Path(home))
        patch = reference_patch(project)
        if not patch.strip():
            raise RuntimeError(f"task {name}: the reference migration changes nothing")
        (task_dir / "reference.patch").write_bytes(patch.encode("utf-8"))
        fields = compute_fields(repo, {"repo": f"strands-art/gen-{name}"}, name=name)
    except BaseException:
        shutil.rmtree(task_dir, ignore_errors=True)
        raise
    record: dict[str, Any] = {
        **fields,
        "base_commit": commit,
        "generated": {
            "generator_version": GENERATOR_VERSION,
            "kind": kind,
            "seed": seed,
            "split": split,
            "untouched_builds": KINDS[kind].untouched_builds,
            **project.meta,
        },
    }
    (task_dir / "task.json").write_bytes((json.dumps(record, indent=2) + "\n").encode("utf-8"))
    return task_dir


def make_tasks(
    out_dir: str | os.PathLike[str],
    kinds: list[str] | None,
    n: int,
    seed: int,
    split: str | None = None,
) -> list[Path]:
    """Generate the tasks of :func:`plan` into ``out_dir`` (created; must be empty) plus
    ``manifest.json`` (arguments and the task list). Returns the task directories.

    Raises:
        GenerateError: bad arguments, or ``out_dir`` is not an empty directory.
    """
    if not str(out_dir).strip():
        raise GenerateError("OUT_DIR is empty (an unset variable?): give a new directory")
    out = Path(out_dir)
    todo = plan(kinds, n, seed, split)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise GenerateError(f"{out} is not an empty directory: give a new one (nothing is overwritten)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # e.g. a parent that is a file
        raise GenerateError(f"cannot make {out}: {exc.strerror or exc}") from exc
    dirs = [generate_task(kind, s, out, split) for kind, s in todo]
    manifest = {
        "generator_version": GENERATOR_VERSION,
        "split": split,
        "seed": seed,
        "n": n,
        "kinds": sorted({k for k, _ in todo}, key=list(KINDS).index),
        "tasks": [{"name": d.name, "kind": k, "seed": s} for d, (k, s) in zip(dirs, todo, strict=True)],
    }
    (out / "manifest.json").write_bytes((json.dumps(manifest, indent=2) + "\n").encode("utf-8"))
    return dirs


# --------------------------------------------------------------------------- CLI
