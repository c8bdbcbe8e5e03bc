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

Before building, every ``target/`` next to a ``pom.xml`` is deleted, so stale classes of a
module dropped from the reactor cannot pass the bytecode check.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
import subprocess
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
from strands_art.validation import check_float

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
        UTF-8 JSON holding an object, ``num_test_cases`` is not an integer >= 0 (``true`` is not
        one), or ``base_commit`` is needed (no ``repo/``) and is not a hex commit id.
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
        if isinstance(num, bool) or not isinstance(num, int) or num < 0:
            raise ValueError(f"{path}: num_test_cases must be an integer >= 0, got {num!r}")
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


def _original_tests(repo_dir: Path, task: EvalTask, scratch_dir: Path | None = None) -> TestInventory:
    if task.original_dir is not None:
        return collect_tests(task.original_dir)
    if not task.base_commit:
        raise ValueError(f"task {task.name}: neither original_dir nor base_commit is given")
    with tempfile.TemporaryDirectory(prefix="strands-art-orig-", dir=scratch_dir) as tmp:
        archive = Path(tmp) / "orig.tar"
        commit = check_commit_id(task.base_commit, f"task {task.name}: base_commit")
        proc = subprocess.run(
            ["git", "-C", str(repo_dir), "archive", "-o", str(archive), "--end-of-options", commit],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise ValueError(f"git archive of base_commit {commit} failed: {proc.stderr.strip()[-300:]}")
        with tarfile.open(archive) as tar:
            tar.extractall(Path(tmp) / "src", filter="data")
        return collect_tests(Path(tmp) / "src")


def check_commit_id(value: object, what: str) -> str:
    """``value`` if it is a git object id (4 to 64 hex digits); else ValueError naming ``what``.

    A commit id from a task file is passed to git; anything else (``--output=PATH``) could be
    read as an option."""
    if not isinstance(value, str) or not _COMMIT_ID.fullmatch(value):
        raise ValueError(f"{what} must be a hex git commit id, got {str(value)[:80]!r}")
    return value


_COMMIT_ID = re.compile(r"[0-9a-fA-F]{4,64}")


def _remove_target_dirs(repo_dir: Path) -> list[str]:
    removed = []
    for pom in repo_dir.rglob("pom.xml"):
        target = pom.parent / "target"
        if target.is_dir() and not target.is_symlink() and ".git" not in pom.parts:
            shutil.rmtree(target)
            removed.append(target.relative_to(repo_dir).as_posix())
    return sorted(removed)


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
) -> EvalResult:
    """Build and score a migrated project in place (its ``target/`` dirs are rebuilt).

    Args:
        repo_dir: the migrated project (root ``pom.xml``).
        task: required test count and original sources (:meth:`EvalTask.from_dir`).
        timeout_s: limit for the Maven build; a timeout scores 0.
        offline / fork_count / log_path: passed to :func:`.maven.run_maven`.
        scratch_dir: where temporary directories go (default: the system's temp directory).

    Raises FileNotFoundError when ``repo_dir`` has no ``pom.xml`` (an agent that deletes it
    should get 0: callers of an agent workspace use :func:`evaluate_command`, which maps it).
    """
    repo = Path(repo_dir).resolve()
    t0 = time.monotonic()
    original = _original_tests(repo, task, scratch_dir)
    removed = _remove_target_dirs(repo)
    mvn = run_maven(
        repo,
        ["clean", "verify"],
        timeout_s,
        offline=offline,
        fork_count=fork_count,
        log_path=log_path,
        scratch_dir=scratch_dir,
    )
    bytecode = check_bytecode(repo)
    build_success = mvn.ok and bytecode.ok
    details: dict[str, Any] = {
        "task": task.name,
        "maven_exit_code": mvn.exit_code,
        "timed_out": mvn.timed_out,
        "maven_offline": mvn.offline,
        "maven_duration_s": round(mvn.duration_s, 2),
        "removed_target_dirs": removed,
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
        current = collect_tests(repo)
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
    details["evaluate_duration_s"] = round(time.monotonic() - t0, 2)
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
    repo_dir: Path | str, task_dir: Path | str, timeout_s: float = 300.0, scratch_dir: Path | None = None
) -> dict[str, Any]:
    """``strands-art evaluate REPO_DIR --task TASK_DIR``: the result as a JSON-ready dict.

    A repository without a root ``pom.xml`` scores 0 (``details.error`` says why) rather than
    raising; a bad task directory raises (FileNotFoundError / ValueError).
    """
    task = EvalTask.from_dir(task_dir)
    repo = Path(repo_dir)
    if not (repo / "pom.xml").is_file():
        return EvalResult(
            False, False, 0, task.num_test_cases, False, 0.0, {"error": f"no pom.xml in {repo}"}
        ).to_json()
    return evaluate(repo, task, timeout_s=timeout_s, scratch_dir=scratch_dir).to_json()


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
