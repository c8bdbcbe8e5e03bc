"""MigrationBench's minimal-migration check, re-implemented: build under JDK 17, then test equivalence.

Rules (``docs/migrationbench.md``, section "Evaluator"):

* **Build success** (reward 0.5): ``mvn clean verify`` exits 0 under JDK 17 within the timeout,
  and every main class of every module (``<module>/target/classes/**/*.class``) has class-file
  major version 61; a module with main sources but no classes fails it.
* **Test equivalence** (+0.5, checked only if the build passed): tests executed and passed
  across all modules' surefire/failsafe reports ``>= num_test_cases``; no test newly skipped
  (a skipped test case that was not disabled in the original) or newly disabled (``@Ignore`` /
  ``@Disabled``); and the multiset of test methods (``pkg.Class#method``, all modules' test
  sources, via :mod:`.javatests`) equals the original's.

The evaluated repository is hostile (an agent wrote it, and its tests run during the build), so
it is never built in place: it is copied (regular files, directories, and symlinks that stay
inside it; FIFOs, sockets, devices and escaping symlinks are left out) into a fresh build
directory owned by a fresh sandbox uid, without any ``target/`` next to a ``pom.xml`` (stale
classes of a module dropped from the reactor cannot pass the bytecode check). The test methods
are read from that copy *before* the build (a test cannot rewrite what is compared), ``mvn clean
verify`` runs in the sandbox with no network (:mod:`.maven`), and the build outputs are read back
without following symlinks, regular files only (:mod:`strands_art.envs.sandbox.files`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import sys
import tarfile
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from strands_art.envs.migrationbench.buildoutputs import check_bytecode, read_test_reports
from strands_art.envs.migrationbench.javatests import TestInventory, collect_tests
from strands_art.envs.migrationbench.maven import run_maven
from strands_art.envs.migrationbench.workspace import maven_build_outputs
from strands_art.envs.sandbox import (
    Identity,
    Sandbox,
    allocate_identity,
    chown_tree,
    release_identity,
    require_sandbox,
    run_sync,
)
from strands_art.envs.sandbox.files import copy_tree
from strands_art.validation import check_float

#: the most test cases a task may require: far above any repository's count (a number such as
#: 10**30 is a malformed task, refused before anything is built)
MAX_TEST_CASES = 10_000_000

logger = logging.getLogger(__name__)

MAX_BUILD_TIMEOUT_S = 86400.0
BUILD_REWARD = 0.5
TEST_REWARD = 0.5


@dataclass(frozen=True)
class EvalTask:
    """What the evaluator needs from a task: the required test count and the original sources.

    ``original_dir`` is the unmigrated project (a task's ``repo/``); ``base_commit`` is used with
    ``git archive`` on the evaluated repository when ``original_dir`` is None.
    """

    name: str
    num_test_cases: int
    original_dir: Path | None = None
    base_commit: str | None = None

    @classmethod
    def from_dir(cls, task_dir: Path | str) -> EvalTask:
        """Load ``task_dir/task.json`` (needs ``num_test_cases``); original = ``task_dir/repo``.

        Raises FileNotFoundError for a missing file; ValueError when ``task.json`` is not valid
        UTF-8 JSON holding an object, ``num_test_cases`` is not an integer in
        [0, :data:`MAX_TEST_CASES`] (``true`` is not one), or ``base_commit`` is needed (no ``repo/``) and is not a hex commit id.
        """
        task_dir = Path(task_dir)
        path = task_dir / "task.json"
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except RecursionError:
            raise ValueError(f"{path}: JSON nested too deeply") from None
        if not isinstance(meta, dict):
            raise ValueError(f"{path} must hold a JSON object, got {type(meta).__name__}")
        num = meta.get("num_test_cases")
        if isinstance(num, bool) or not isinstance(num, int) or not 0 <= num <= MAX_TEST_CASES:
            raise ValueError(
                f"{path}: num_test_cases must be an integer from 0 to {MAX_TEST_CASES:,}, got {repr(num)[:40]}"
            )
        repo = task_dir / "repo"
        base_commit = meta.get("base_commit")
        if not repo.is_dir():
            base_commit = check_commit_id(base_commit, f"{path}: base_commit")
        name = meta.get("name")
        return cls(
            name=name if isinstance(name, str) and name else task_dir.name,
            num_test_cases=num,
            original_dir=repo if repo.is_dir() else None,
            base_commit=base_commit,
        )


@dataclass
class EvalResult:
    """The evaluator's verdict; :meth:`to_json` gives the documented JSON object."""

    build_success: bool
    java17_bytecode: bool
    tests_run: int
    tests_required: int
    tests_equivalent: bool
    reward: float
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _original_tests(
    repo_dir: Path, task: EvalTask, identity: Identity, unsafe: bool, scratch_dir: Path | None = None
) -> TestInventory:
    """The original's test methods: from ``task.original_dir``, else ``git archive base_commit`` of
    ``repo_dir`` (the build copy, owned by ``identity``), run in the sandbox; the archive is made
    in a directory under ``scratch_dir`` (default the system's temp directory; the sandbox uid
    must be able to enter it)."""
    if task.original_dir is not None:
        return collect_tests(task.original_dir)
    if not task.base_commit:
        raise ValueError(f"task {task.name}: neither original_dir nor base_commit is given")
    # git reads the repository's own config (filters, fsmonitor: commands): run it sandboxed,
    # with the repository read-only and a hex-checked commit after `--end-of-options`.
    commit = check_commit_id(task.base_commit, f"task {task.name}: base_commit")
    with tempfile.TemporaryDirectory(prefix="strands-art-orig-", dir=scratch_dir) as tmp:
        os.chmod(tmp, 0o711)
        out_dir = Path(tmp) / "out"
        out_dir.mkdir()
        chown_tree(out_dir, identity)
        archive = out_dir / "orig.tar"
        sandbox = None if unsafe else Sandbox(identity, writable=(out_dir,), readonly=(repo_dir,))
        with open(Path(tmp) / "git.log", "w+b") as log:
            code, timed_out = run_sync(
                sandbox,
                [
                    "git",
                    "-c",
                    "safe.directory=*",
                    "-C",
                    str(repo_dir),
                    "archive",
                    "-o",
                    str(archive),
                    "--end-of-options",
                    commit,
                ],
                cwd=out_dir,
                env={"HOME": str(out_dir)},
                timeout_s=120,
                stdout=log,
            )
            log.seek(0)
            said = log.read().decode("utf-8", errors="replace").strip().splitlines()[-1:] or [""]
        if code != 0 or timed_out or archive.is_symlink() or not archive.is_file():
            raise ValueError(f"task {task.name}: git archive {commit!r} failed (exit {code}): {said[0]}")
        with tarfile.open(archive) as tar:
            tar.extractall(Path(tmp) / "src", filter="data")
        return collect_tests(Path(tmp) / "src")


def _copy_for_build(repo: Path, build: Path, identity: Identity) -> list[str]:
    """Copy ``repo`` to ``build`` without Maven outputs (see the module doc); returns what was left out."""
    return copy_tree(repo, build, identity=identity, skip_dir=maven_build_outputs)


def check_commit_id(value: object, what: str) -> str:
    """``value`` if it is a git object id (4 to 64 hex digits); else ValueError naming ``what``.

    A commit id from a task file is passed to git; anything else (``--output=PATH``) could be
    read as an option."""
    if not isinstance(value, str) or not _COMMIT_ID.fullmatch(value):
        raise ValueError(f"{what} must be a hex git commit id, got {str(value)[:80]!r}")
    return value


_COMMIT_ID = re.compile(r"[0-9a-fA-F]{4,64}")


def _diff(a: Counter[str], b: Counter[str], limit: int = 50) -> list[str]:
    return sorted((a - b).elements())[:limit]


def evaluate(
    repo_dir: Path | str,
    task: EvalTask,
    *,
    timeout_s: float = 300.0,
    offline: bool | None = None,
    fork_count: int | None = None,
    log_path: Path | None = None,
    scratch_dir: Path | None = None,
    unsafe_no_sandbox: bool = False,
) -> EvalResult:
    """Build and score a migrated project; ``repo_dir`` itself is only read (see the module doc).

    Args:
        repo_dir: the migrated project (root ``pom.xml``).
        task: required test count and original sources (:meth:`EvalTask.from_dir`).
        timeout_s: limit for the Maven build; a timeout scores 0.
        offline / fork_count / log_path: passed to :func:`.maven.run_maven`.
        scratch_dir: where the evaluation's directory (build copy, ``git archive`` of the
            original, Maven's local repository and settings) is made, removed afterwards;
            default the system's temp directory. The sandbox uid must be able to enter it
            (``migrate`` passes ``<run_dir>/workspaces``, so a killed run's build scratch goes
            with its workspaces).
        unsafe_no_sandbox: build unconfined (the explicit opt-out; never the default).

    Raises FileNotFoundError when ``repo_dir`` has no ``pom.xml`` (an agent that deletes it
    should get 0: callers of an agent workspace use :func:`evaluate_command`, which maps it);
    SandboxError when the sandbox cannot start.
    """
    repo = Path(repo_dir).resolve()
    if not (repo / "pom.xml").is_file():
        raise FileNotFoundError(f"no pom.xml in {repo}")
    t0 = time.monotonic()
    if not unsafe_no_sandbox:
        require_sandbox()  # fail closed: a broken sandbox must not score as a failed build
    identity = allocate_identity()
    top = Path(os.path.realpath(tempfile.mkdtemp(prefix="strands-art-build-", dir=scratch_dir)))
    try:
        os.chmod(top, 0o711)
        build = top / "repo"
        left_out = _copy_for_build(repo, build, identity)
        original = _original_tests(build, task, identity, unsafe_no_sandbox, scratch_dir=top)
        current = collect_tests(build)  # before the build: what the tests are, not what they did
        mvn = run_maven(
            build,
            ["clean", "verify"],
            timeout_s,
            offline=offline,
            fork_count=fork_count,
            log_path=log_path,
            identity=identity,
            scratch_dir=top,
            unsafe_no_sandbox=unsafe_no_sandbox,
        )
        result = _score(build, task, original, current, mvn, left_out)
    finally:
        shutil.rmtree(top, ignore_errors=True)
        release_identity(identity)
    result.details["evaluate_duration_s"] = round(time.monotonic() - t0, 2)
    return result


def _score(
    build: Path,
    task: EvalTask,
    original: TestInventory,
    current: TestInventory,
    mvn: Any,
    left_out: list[str],
) -> EvalResult:
    """The verdict from a finished build in ``build`` (see the rules in the module doc)."""
    repo = build
    bytecode = check_bytecode(repo)
    build_success = mvn.ok and bytecode.ok
    details: dict[str, Any] = {
        "task": task.name,
        "maven_exit_code": mvn.exit_code,
        "timed_out": mvn.timed_out,
        "maven_offline": mvn.offline,
        "maven_duration_s": round(mvn.duration_s, 2),
        "left_out_of_build": left_out[:50],
        "class_files": bytecode.total,
        "class_major_versions": {str(k): v for k, v in bytecode.by_major.items()},
        "wrong_major_version_count": bytecode.wrong_count,
        "wrong_major_version": [f"{path} ({major})" for path, major in bytecode.wrong[:5]],
        "modules_without_classes": bytecode.modules_without_classes,
        "maven_errors": list(mvn.error_lines),
        "log_tail": mvn.output_tail[-4000:],
    }
    tests_run = 0
    tests_equivalent = False
    if build_success:
        reports = read_test_reports(repo)
        tests_run = reports.passed
        orig_keys, cur_keys = original.keys(), current.keys()
        newly_disabled = _diff(current.disabled_keys(), original.disabled_keys())
        orig_disabled = set(original.disabled_keys())
        newly_skipped = sorted({k for k in reports.skipped_keys if k not in orig_disabled})
        missing, added = _diff(orig_keys, cur_keys), _diff(cur_keys, orig_keys)
        tests_equivalent = (
            tests_run >= task.num_test_cases
            and not newly_disabled
            and not newly_skipped
            and not missing
            and not added
            and not reports.unreadable
        )
        details.update(
            {
                "test_reports": reports.files,
                "test_modules": reports.modules,
                "tests_total": reports.tests,
                "tests_failed": reports.failures,
                "tests_errors": reports.errors,
                "tests_skipped": reports.skipped,
                "unreadable_reports": reports.unreadable,
                "test_methods_original": sum(orig_keys.values()),
                "test_methods_now": sum(cur_keys.values()),
                "missing_tests": missing,
                "added_tests": added,
                "newly_disabled": newly_disabled,
                "newly_skipped": newly_skipped,
                "test_parse_errors": current.parse_errors,
            }
        )
    reward = BUILD_REWARD * build_success + TEST_REWARD * (build_success and tests_equivalent)
    return EvalResult(
        build_success=build_success,
        java17_bytecode=bytecode.ok,
        tests_run=tests_run,
        tests_required=task.num_test_cases,
        tests_equivalent=tests_equivalent,
        reward=float(reward),
        details=details,
    )


def evaluate_command(
    repo_dir: Path | str,
    task_dir: Path | str,
    timeout_s: float = 300.0,
    *,
    scratch_dir: Path | None = None,
    unsafe_no_sandbox: bool = False,
) -> dict[str, Any]:
    """``strands-art evaluate REPO_DIR --task TASK_DIR``: the result as a JSON-ready dict.

    A repository without a root ``pom.xml`` scores 0 (``details.error`` says why) rather than
    raising; a bad task directory raises (FileNotFoundError / ValueError). ``scratch_dir`` and
    ``unsafe_no_sandbox``: see :func:`evaluate`.
    """
    task = EvalTask.from_dir(task_dir)
    repo = Path(repo_dir)
    if not (repo / "pom.xml").is_file():
        return EvalResult(
            False, False, 0, task.num_test_cases, False, 0.0, {"error": f"no pom.xml in {repo}"}
        ).to_json()
    return evaluate(
        repo, task, timeout_s=timeout_s, scratch_dir=scratch_dir, unsafe_no_sandbox=unsafe_no_sandbox
    ).to_json()


def main(argv: list[str] | None = None) -> int:
    """``python -m strands_art.envs.migrationbench.evaluator REPO --task TASK [--timeout S]``."""
    parser = argparse.ArgumentParser(description="Score a Java 8 -> 17 migration (MigrationBench rules).")
    parser.add_argument("repo", type=Path)
    parser.add_argument("--task", type=Path, required=True, help="task dir with task.json and repo/")
    parser.add_argument("--timeout", type=float, default=300.0, help="Maven build timeout, seconds")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        check_float("--timeout", args.timeout, 0.0, MAX_BUILD_TIMEOUT_S, lo_open=True)
        result = evaluate_command(args.repo, args.task, args.timeout)
    except (FileNotFoundError, ValueError) as exc:
        sys.stderr.write(f"evaluator: {exc}\n")
        return 2
    sys.stdout.write(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
