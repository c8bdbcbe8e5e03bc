"""Check a task with real, sandboxed Maven builds: untouched 0.0, reference patch 1.0.

Used by ``examples/migrationbench/verify_tasks.py`` (the bundled tasks) and ``strands-art
make-tasks`` (each generated task when it is made). :func:`check_task` copies ``repo/`` twice
under a scratch directory and scores each copy with
:func:`strands_art.envs.migrationbench.evaluate.evaluator.evaluate` (sandboxed ``mvn clean verify``):

1. the untouched copy must score 0.0; when the caller knows whether its Maven build should
   succeed (``untouched_builds``), it must (classes stay at major 52) or must not;
2. the copy with ``git apply reference.patch`` must score 1.0 (build ok, every main class
   major 61, tests run >= ``num_test_cases``, same test methods).

Two builds per task, about 10-30 s each on an idle 2-core machine. ``make-tasks`` writes each
outcome into the task's ``task.json`` (:func:`record_check`, under ``generated.check``), and
training refuses a task whose check failed (:func:`failed_checks`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from strands_art.envs.migrationbench.evaluate.evaluator import EvalResult, EvalTask, evaluate

CHECK_KEY = "check"
"""Where :func:`record_check` puts the outcome: ``task.json["generated"]["check"]``."""


@dataclass
class TaskCheck:
    """Outcome of one task: the two scores and what went wrong (empty when all is well)."""

    name: str
    untouched: EvalResult | None = None
    reference: EvalResult | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def line(self) -> str:
        """One line for a log: both rewards, Maven exit codes, majors, tests, OK or FAIL: why."""
        u, r = self.untouched, self.reference
        if u is None or r is None:
            return f"{self.name:<28} FAIL: " + "; ".join(self.problems)
        return (
            f"{self.name:<28} untouched {u.reward:.1f} (maven exit {u.details.get('maven_exit_code')}, "
            f"majors {u.details.get('class_major_versions')})  reference {r.reward:.1f} (tests "
            f"{r.tests_run}/{r.tests_required}, majors {r.details.get('class_major_versions')})  "
            + ("OK" if self.ok else "FAIL: " + "; ".join(self.problems))
        )


def record_check(task_dir: Path, check: TaskCheck | None, problem: str | None = None) -> None:
    """Write a check's outcome into ``task_dir/task.json`` as ``generated.check``: ``ok`` (bool),
    ``untouched_reward`` / ``reference_reward`` (float, None when that build did not run) and
    ``problems`` (list[str]). ``check`` None with ``problem``: the check could not run (e.g. the
    patch did not apply). The file is replaced atomically (a killed writer leaves the old one).

    Raises:
        OSError / ValueError: ``task.json`` cannot be read, parsed or written.
    """
    meta = task_dir / "task.json"
    record = json.loads(meta.read_text(encoding="utf-8"))
    problems = list(check.problems) if check is not None else [problem or "the check did not run"]
    record.setdefault("generated", {})[CHECK_KEY] = {
        "ok": not problems,
        "untouched_reward": check.untouched.reward if check and check.untouched else None,
        "reference_reward": check.reference.reward if check and check.reference else None,
        "problems": problems,
    }
    tmp = meta.with_name("task.json.tmp")
    tmp.write_bytes((json.dumps(record, indent=2) + "\n").encode("utf-8"))
    os.replace(tmp, meta)


def failed_checks(records: Iterable[tuple[str, dict]]) -> tuple[list[str], list[str]]:
    """``(failed, unchecked)`` task names among ``(name, task.json record)`` pairs: ``failed``, the
    generated tasks whose recorded check (:func:`record_check`) failed; ``unchecked``, the generated
    tasks with no recorded check (``make-tasks --no-verify``, or one stopped before it reached
    them). Tasks that were not generated (the bundled ones, real MigrationBench records) are in
    neither."""
    failed, unchecked = [], []
    for name, record in records:
        generated = record.get("generated")
        if not isinstance(generated, dict):
            continue
        check = generated.get(CHECK_KEY)
        if not isinstance(check, dict):
            unchecked.append(name)
        elif check.get("ok") is not True:
            failed.append(name)
    return failed, unchecked


def apply_patch(repo: Path, patch: Path) -> None:
    """``git apply PATCH`` inside ``repo`` (need not be a git repository). Raises on failure."""
    proc = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", str(patch)], cwd=repo, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git apply {patch} failed in {repo}: {proc.stderr.strip()}")


def check_task(
    task_dir: Path,
    work: Path,
    *,
    fork_count: int | None = None,
    timeout_s: float = 300.0,
    untouched_builds: bool | None = None,
    keep: bool = False,
) -> TaskCheck:
    """Score the untouched and the reference-patched project of ``task_dir`` in copies under ``work``.

    Args:
        task_dir: a task directory (``task.json``, ``repo/``, ``reference.patch``).
        work: an existing scratch directory; the copies ``<name>-untouched`` and
            ``<name>-reference`` are made in it (the caller removes it).
        fork_count: surefire's ``forkCount`` (None: surefire's default, a forked JVM).
        timeout_s: per-build limit, seconds.
        untouched_builds: whether the compile build (tests skipped) must exit 0 on the untouched project
            (None: not checked).
        keep: leave the two copies in ``work`` (default: removed once scored).

    Raises:
        FileNotFoundError / ValueError: a malformed task directory (:meth:`EvalTask.from_dir`).
        RuntimeError: the reference patch does not apply.
        SandboxError: the sandbox cannot start.
    """
    task = EvalTask.from_dir(task_dir)
    out = TaskCheck(task_dir.name)
    untouched_dir = work / f"{task_dir.name}-untouched"
    shutil.copytree(task_dir / "repo", untouched_dir, symlinks=True)
    out.untouched = evaluate(untouched_dir, task, timeout_s=timeout_s, fork_count=fork_count)
    if out.untouched.reward != 0.0:
        out.problems.append(f"untouched reward {out.untouched.reward} != 0.0")
    maven_ok = out.untouched.details.get("maven_exit_code") == 0
    if untouched_builds is not None and maven_ok != untouched_builds:
        out.problems.append(f"untouched Maven {'succeeded' if maven_ok else 'failed'}, expected the opposite")
    if maven_ok and out.untouched.java17_bytecode:
        out.problems.append("untouched project already has Java 17 bytecode")

    patched_dir = work / f"{task_dir.name}-reference"
    shutil.copytree(task_dir / "repo", patched_dir, symlinks=True)
    apply_patch(patched_dir, task_dir / "reference.patch")
    out.reference = evaluate(patched_dir, task, timeout_s=timeout_s, fork_count=fork_count)
    if out.reference.reward != 1.0:
        d = out.reference.details
        out.problems.append(
            f"reference reward {out.reference.reward} != 1.0 (maven exit {d.get('maven_exit_code')}, "
            f"majors {d.get('class_major_versions')}, tests {out.reference.tests_run}/"
            f"{out.reference.tests_required}, missing {d.get('missing_tests')}, errors {d.get('maven_errors')})"
        )
    if not keep:
        shutil.rmtree(untouched_dir, ignore_errors=True)
        shutil.rmtree(patched_dir, ignore_errors=True)
    return out
