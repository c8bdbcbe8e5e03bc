"""A fork failure inside the scoring build (issue 48, part 4): built once more, then scored when
the host can start processes (the build's own doing), or not scored when it cannot (a host
failure, by the rule of ``evalguard``). Real Maven builds under a process limit too small for
the JVM; the host that cannot fork is a probe run under that limit too."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import pytest
from support import reward_attacks as attacks

from strands_art.envs.migrationbench.evaluate import evalguard, evaluator, hostcheck
from strands_art.envs.migrationbench.maven import maven
from strands_art.envs.migrationbench.maven.maven import MavenResult
from strands_art.envs.sandbox import Limits, Sandbox

NEEDS_MVN = pytest.mark.skipif(shutil.which("mvn") is None, reason="mvn not installed")


def _result(tail: str, exit_code: int | None = 1, errors: tuple[str, ...] = ()) -> MavenResult:
    return MavenResult(("mvn",), exit_code, exit_code is None, 1.0, tail, True, error_lines=errors)


@pytest.mark.parametrize(
    "tail",
    [
        '[0.01s][warning][os,thread] Failed to start thread "GC Thread#0" - pthread_create failed (EAGAIN)',
        "# There is insufficient memory for the Java Runtime Environment to continue.",
        "/usr/bin/mvn: 141: Cannot fork",
        "bash: fork: retry: Resource temporarily unavailable",
        'java.io.IOException: Cannot run program "/bin/sh": error=11, Resource temporarily unavailable',
        "java.lang.OutOfMemoryError: unable to create native thread: possibly out of memory",
    ],
)
def test_fork_failures_are_recognized(tail: str) -> None:
    assert hostcheck.fork_failed(_result(tail))
    assert hostcheck.fork_failed(_result("", errors=(tail,)))
    assert not hostcheck.fork_failed(_result(tail, exit_code=0))  # a passing build is not one
    assert not hostcheck.fork_failed(_result(tail, exit_code=None))  # nor a timed-out one


def test_other_failures_are_not_fork_failures() -> None:
    assert not hostcheck.fork_failed(_result("[ERROR] COMPILATION ERROR : cannot find symbol"))
    assert not hostcheck.fork_failed(_result("Tests run: 6, Failures: 2, Errors: 0, Skipped: 0"))


@pytest.fixture
def tiny_process_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every scoring build runs under 6 processes + threads: the JVM cannot start."""
    monkeypatch.setattr(maven, "Limits", functools.partial(Limits, processes=6))


@pytest.mark.maven
@NEEDS_MVN
def test_a_build_that_cannot_fork_while_the_host_can_is_scored(tmp_path: Path, tiny_process_limit) -> None:
    repo = attacks.copy_task_repo(tmp_path / "repo", migrated=True)
    result = evaluator.evaluate(repo, evaluator.EvalTask.from_dir(attacks.TASK), timeout_s=120, offline=True)
    details = result.details
    assert details["builds_retried_after_fork_failure"] == ["compile build"]
    assert "pthread_create failed (EAGAIN)" in details["log_tail"] or "Cannot fork" in details["log_tail"]
    assert details["reasons"] == [
        evaluator.REASON_BUILD_FAILED,
        evaluator.REASON_NOT_JAVA17,
        evaluator.REASON_MODULE_WITHOUT_CLASSES,
    ]
    assert result.reward == 0.0


@pytest.mark.maven
@NEEDS_MVN
def test_a_host_that_cannot_fork_is_a_host_failure_not_a_zero(
    tmp_path: Path, tiny_process_limit, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hostcheck, "Sandbox", functools.partial(Sandbox, limits=Limits(processes=2)))
    repo = attacks.copy_task_repo(tmp_path / "repo", migrated=True)
    task = evaluator.EvalTask.from_dir(attacks.TASK)
    outcome, scored = evalguard.guarded_evaluation(
        lambda: evaluator.evaluate(repo, task, timeout_s=120, offline=True).to_json(),
        tests_required=task.num_test_cases,
        retry_delay_s=0,
    )
    assert scored is False  # retried once, then left unscored (--resume runs it again)
    assert outcome["evaluation_error"]["reason"] == "host_failure"
    assert "could not start its processes twice" in outcome["evaluation_error"]["message"]
