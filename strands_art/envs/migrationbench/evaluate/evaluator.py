"""MigrationBench's minimal-migration check, re-implemented: build under JDK 17, then test equivalence.

Rules (``docs/migrationbench-evaluator.md``, sections "Rules" and "Threat model of the reward"):

* **Build success** (reward 0.5): the *compile build* ``mvn clean verify -DskipTests`` exits 0
  under JDK 17 within the timeout, and every main class of every module
  (``<module>/target/classes/**/*.class``) has class-file major version 61; a module with main
  sources but no classes fails it. The versions are read when that build's sandbox is gone and
  before any test has run, and read again after the test build: a class file whose version
  changed meanwhile fails the check (:data:`REASON_CLASSES_REWRITTEN`). Every main and test
  source must have left a class file per top-level type (:data:`REASON_SOURCES_NOT_COMPILED`).
* **Test equivalence** (+0.5, checked only if the build passed): the *test build* ``mvn
  verify`` (same copy, failures made fatal whatever the project says: :mod:`.buildpolicy`)
  exits 0; the surefire/failsafe reports (read from each module's ``target/`` only, their
  directories removed before the test build: written by it) are well-formed, name test classes
  of the sources, and agree with that exit status and with the skips surefire printed; **every
  original test method that runs has a passing ``<testcase>``** (:data:`REASON_TESTS_NOT_PASSED`,
  :meth:`.javatests.TestInventory.required_keys`); passing runs (one per ``<testcase>``, a
  second report about a class not counted) ``>= num_test_cases``; the POMs select the tests
  the original's did (:mod:`.testselection`; JUnit Platform services and
  ``junit-platform.properties`` that are not the original's are removed from the copy);
  no test newly skipped (a skipped test case, or a class printed with skips, that was not
  disabled in the original) or newly disabled (``@Ignore`` / ``@Disabled``, or declared where
  no engine runs it: :attr:`.javatests.TestMethod.never_runs`); and the multiset of test methods (``pkg.Class#method``, all
  modules' test sources, via :mod:`.javatests`) equals the original's (the task's ``repo/``,
  or for a task without one the git objects of ``base_commit``, hash-checked:
  :mod:`.gitorigin`).

Every reason a fact failed is listed in ``details["reasons"]`` (the ``REASON_*`` codes of
:mod:`.verdict`, re-exported here with :class:`EvalResult`).

The evaluated repository is hostile (an agent wrote it, and its tests run during the build), so
it is never built in place: it is copied (regular files, directories, and symlinks that stay
inside it; FIFOs, sockets, devices and escaping symlinks are left out) into a fresh build
directory owned by a fresh sandbox uid (measured first and within the build timeout:
:mod:`.buildcopy`), without any ``target/`` next to a ``pom.xml`` (stale
classes of a module dropped from the reactor cannot pass the bytecode check), and the switches
that hide test failures are removed from that copy. The test methods are read from that copy
*before* the builds (a test cannot rewrite what is compared), both builds run in the sandbox
with no network (:mod:`.maven`), and the build outputs are read back without following
symlinks, regular files only (:mod:`strands_art.envs.sandbox.files`). A build that could not
start its processes runs once more and, if the host cannot fork either, is a host failure
(:mod:`.hostcheck`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from strands_art.envs.migrationbench.evaluate.buildcopy import copy_for_build
from strands_art.envs.migrationbench.evaluate.buildoutputs import (
    JAVA17_MAJOR,
    check_bytecode,
    class_versions,
    expected_class_files,
    uncompiled_sources,
)
from strands_art.envs.migrationbench.evaluate.buildpolicy import forced_args, harden_build
from strands_art.envs.migrationbench.evaluate.evaltask import (  # noqa: F401 (re-exported: the evaluator's task)
    BadRepository,
    BadTask,
    EvalTask,
)
from strands_art.envs.migrationbench.evaluate.gitorigin import GitObjectError, original_from_git
from strands_art.envs.migrationbench.evaluate.hostcheck import fork_failed, host_can_fork, host_failure
from strands_art.envs.migrationbench.evaluate.testreports import report_dirs
from strands_art.envs.migrationbench.evaluate.testselection import (
    RUNTIME_SELECTION_FILES,
    default_selection,
    original_poms,
    restore_runtime_selection,
    runtime_selection_files,
    selection_changes,
)
from strands_art.envs.migrationbench.evaluate.verdict import (  # noqa: F401 (re-exported: the reward's public names)
    BUILD_REWARD,
    REASON_BUILD_FAILED,
    REASON_BUILD_TIMEOUT,
    REASON_CLASSES_REWRITTEN,
    REASON_MODULE_WITHOUT_CLASSES,
    REASON_NEWLY_DISABLED,
    REASON_NEWLY_SKIPPED,
    REASON_NO_POM,
    REASON_NOT_JAVA17,
    REASON_ORIGINAL_UNAVAILABLE,
    REASON_OUTPUTS_UNREADABLE,
    REASON_REPORT_MALFORMED,
    REASON_REPORT_UNREADABLE,
    REASON_REPORTS_CONTRADICT_MAVEN,
    REASON_SOURCES_NOT_COMPILED,
    REASON_TEST_SELECTION_CHANGED,
    REASON_TESTS_ADDED,
    REASON_TESTS_FAILED,
    REASON_TESTS_MISSING,
    REASON_TESTS_NOT_PASSED,
    REASON_TESTS_TIMEOUT,
    REASON_TOO_FEW_TESTS,
    TEST_REWARD,
    EvalResult,
)
from strands_art.envs.migrationbench.evaluate.verdict import score as _score
from strands_art.envs.migrationbench.maven.maven import MavenResult, run_maven
from strands_art.envs.migrationbench.tasks.javatests import TestInventory, collect_tests
from strands_art.envs.migrationbench.tasks.taskdir import (  # noqa: F401 (re-exported: the task-field checks)
    MAX_TEST_CASES,
    check_commit_id,
)
from strands_art.envs.sandbox import (
    Identity,
    allocate_identity,
    release_identity,
    require_sandbox,
)
from strands_art.envs.sandbox.removal import remove_tree
from strands_art.validation import check_float

#: The evaluator's rules version: bumped whenever a verdict for the same repository and task may
#: change (a cache of verdicts keys on it).
EVALUATOR_VERSION = 6

logger = logging.getLogger(__name__)

MAX_BUILD_TIMEOUT_S = 86400.0


def _original_tests(
    repo_dir: Path, task: EvalTask, identity: Identity, unsafe: bool, scratch_dir: Path | None = None
) -> tuple[TestInventory, dict[str, bytes]]:
    """The original's test methods, and its POM candidates (:func:`.testselection.original_poms`)
    and files that select tests at run time (:func:`.testselection.runtime_selection_files`) by path:
    from ``task.original_dir`` (the task's pristine ``repo/``,
    which no rollout writes), else from the git objects of ``task.base_commit`` in ``repo_dir``
    (the build copy, owned by ``identity``), each checked against its id, read in the sandbox
    (:func:`.gitorigin.original_tests_from_git`; its scratch directory goes under
    ``scratch_dir``, which the sandbox uid must be able to enter).

    Raises:
        ValueError: no original given, or ``base_commit`` is not hex (checked before git runs).
        GitObjectError: the commit's objects are missing, forged, or the id is abbreviated.
    """
    if task.original_dir is not None:
        files = original_poms(task.original_dir) | runtime_selection_files(task.original_dir)
        return collect_tests(task.original_dir), files
    if not task.base_commit:
        raise ValueError(f"task {task.name}: neither original_dir nor base_commit is given")
    # git reads the repository's own config: run it sandboxed, repository read-only, on a
    # hex-checked commit (never an option), and believe nothing it says without the hash.
    commit = check_commit_id(task.base_commit, f"task {task.name}: base_commit")
    return original_from_git(repo_dir, commit, identity, unsafe, scratch_dir)


def _copy_for_build(repo: Path, build: Path, identity: Identity, timeout_s: float | None = None) -> list[str]:
    """Copy ``repo`` to ``build`` without Maven outputs (see the module doc), measured first and
    within ``timeout_s`` (:func:`.buildcopy.copy_for_build`); returns what was left out."""
    return copy_for_build(repo, build, identity, timeout_s)


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
            ``fork_count=0`` runs the tests inside Maven's JVM, where a test can end the build with
            status 0 (``Runtime.halt(0)``): for trusted projects only (``verify_tasks.py``); the
            evaluated project itself cannot ask for it (:mod:`.buildpolicy`).
        scratch_dir: where the evaluation's directory (build copy, the original's test sources
            from git, Maven's local repository and settings) is made, removed afterwards;
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
        try:
            left_out = _copy_for_build(repo, build, identity, timeout_s)
            hardened = harden_build(build)
            current = collect_tests(build)  # before the builds: what the tests are, not what they did
            expected = expected_class_files(build)  # what javac must compile, as the sources say
        except (OSError, ValueError, RecursionError) as exc:
            raise BadRepository(f"cannot prepare {repo} for the build: {type(exc).__name__}: {exc}") from exc
        original: TestInventory | str
        poms: dict[str, bytes] | None = None
        try:
            original, poms = _original_tests(build, task, identity, unsafe_no_sandbox, scratch_dir=top)
        except GitObjectError as exc:  # the agent's .git lost or forged the base commit
            original = str(exc)
        runtime = {
            rel: data
            for rel, data in (poms or {}).items()
            if rel.rsplit("/", 1)[-1] in RUNTIME_SELECTION_FILES
        }
        # a launcher filter, listener or Platform parameter the migration added: gone before any build
        hardened += restore_runtime_selection(build, runtime)
        # which tests run is the original's to say (a class left out could get a forged report)
        selection = [] if poms is None else selection_changes(build, poms)
        defaults = (True, False) if poms is None else default_selection(poms)
        run = {
            "offline": offline,
            "fork_count": fork_count,
            "identity": identity,
            "scratch_dir": top,
            "unsafe_no_sandbox": unsafe_no_sandbox,
            "offline_env": task.offline_env,
        }
        retried: list[str] = []  # builds run twice: their processes could not be created
        compile_log = log_path.with_name(f"{log_path.stem}.compile{log_path.suffix}") if log_path else None
        # 1. compile build: no test runs; its sandbox (every process in it) is gone when it returns
        built = _run_build(
            "compile build",
            build,
            ["clean", "verify", "-DskipTests=true", *forced_args()],
            lambda: max(timeout_s - (time.monotonic() - t0), 1.0),
            compile_log,
            run,
            retried=retried,
        )
        tested, result = None, None
        try:  # the build wrote this tree: a walk that fails scores, it does not raise
            versions = class_versions(build)  # the bytecode evidence: written before any test ran
            bytecode = check_bytecode(build, versions=versions)
            uncompiled = uncompiled_sources(build, expected) if built.ok else []  # (else: said)
        except (OSError, RecursionError) as exc:
            result = _unreadable_outputs(repo, task, built, None, exc)
        if result is None:
            if built.ok and bytecode.ok and not uncompiled:
                # 2. test build on the same copy: failures fatal, whatever the project says. Code
                # the compile build ran (an annotation processor of the reactor) may have put an
                # excuse back: harden again, now that nothing of the agent's is running.
                again = harden_build(build)
                hardened += [f"after the compile build: {entry}" for entry in again]
                if poms is not None:
                    changed = selection_changes(build, poms)
                    selection += [f"after the compile build: {c}" for c in changed if c not in selection]
                hardened += [f"after the compile build: {e}" for e in _fresh_test_outputs(build, runtime)]
                tested = _run_build(
                    "test build",
                    build,
                    ["verify", *forced_args()],
                    lambda: max(timeout_s - (time.monotonic() - t0), 1.0),
                    log_path,
                    run,
                    before_retry=lambda: _fresh_test_outputs(build, runtime),
                    retried=retried,
                )
            try:
                rewritten: list[str] = []
                if tested is not None:
                    after = class_versions(build)
                    # a version changed, a class gone, or a new one that is not 61: not javac's work
                    rewritten = sorted(p for p, v in after.items() if versions.get(p, JAVA17_MAJOR) != v)
                    rewritten += sorted(p for p in versions if p not in after)
                result = _score(
                    build,
                    task,
                    original,
                    current,
                    built,
                    tested,
                    bytecode,
                    rewritten,
                    left_out,
                    selection,
                    uncompiled,
                    defaults,
                )
            except (OSError, RecursionError) as exc:
                result = _unreadable_outputs(repo, task, built, tested, exc)
        result.details["hardened"] = hardened
        result.details["builds_retried_after_fork_failure"] = retried
    finally:
        try:
            remove_tree(top)  # what the build wrote may be any depth (no recursion limit here)
        except OSError as exc:
            logger.warning("could not remove the build directory %s: %s", top, exc)
        release_identity(identity)
    result.details["evaluate_duration_s"] = round(time.monotonic() - t0, 2)
    return result


def _run_build(
    what: str,
    build: Path,
    args: list[str],
    time_left: Callable[[], float],
    log_path: Path | None,
    run: dict[str, Any],
    before_retry: Callable[[], object] | None = None,
    retried: list[str] | None = None,
) -> MavenResult:
    """One scoring build (:func:`.maven.run_maven` in ``build`` with ``run``'s options), within
    ``time_left()`` seconds. A build whose output shows that a process could not be created
    (:func:`.hostcheck.fork_failed`) runs once more (after ``before_retry()``); if it shows one
    again and the host cannot start processes now (:func:`.hostcheck.host_can_fork`), raises
    :class:`.hostcheck.HostForkFailure` (a host failure: retried, not scored); ``retried``
    receives ``what`` for a build run twice."""
    result = run_maven(build, args, time_left(), log_path=log_path, **run)
    if not fork_failed(result):
        return result
    logger.warning("the %s could not start its processes; running it once more", what)
    if retried is not None:
        retried.append(what)
    if before_retry is not None:
        before_retry()
    result = run_maven(build, args, time_left(), log_path=log_path, **run)
    if fork_failed(result) and not host_can_fork(run["identity"], build, run["unsafe_no_sandbox"]):
        raise host_failure(what)
    return result


def _fresh_test_outputs(build: Path, runtime: dict[str, bytes]) -> list[str]:
    """Before the test build (nothing of the agent's is running): every report directory the
    scoring build writes (:func:`.testreports.report_dirs`) removed, so each report read after
    it was written by that build; and every file that selects tests at run time that is not one
    of the original's (``runtime``) removed, in the sources (same path and bytes) and in each
    module's ``target/`` (same name and bytes), where the compile build may have put one.
    Returns what was removed."""
    # code the compile build ran (an annotation processor of the reactor) may have written one
    removed = restore_runtime_selection(build, runtime)
    for where in report_dirs(build):
        target = where.parent  # <module>/target, as the compile build left it: never followed
        if target.is_symlink():
            target.unlink()  # Maven makes a directory here; a link could lead out of the copy
            removed.append(f"{target.relative_to(build).as_posix()}: removed (a symlink)")
            continue
        if not target.is_dir():
            continue
        if where.is_symlink() or where.exists():
            if where.is_symlink() or not where.is_dir():
                where.unlink()
            else:
                remove_tree(where)
            removed.append(f"{where.relative_to(build).as_posix()}: removed (written before the test build)")
        if where.name == "surefire-reports":
            removed += restore_runtime_selection(build, runtime, where=target.relative_to(build).as_posix())
    return removed


def _unreadable_outputs(
    repo: Path, task: EvalTask, built: MavenResult, tested: MavenResult | None, exc: BaseException
) -> EvalResult:
    """0.0 with :data:`REASON_OUTPUTS_UNREADABLE`: a build left a tree too deep or too large to walk."""
    logger.warning("build outputs of %s unreadable: %s", repo, exc)
    details = {
        "task": task.name,
        "maven_exit_code": built.exit_code,
        "test_maven_exit_code": tested.exit_code if tested else None,
        "error": f"{type(exc).__name__}: {str(exc)[:300]}",
        "reasons": [REASON_OUTPUTS_UNREADABLE],
    }
    return EvalResult(False, False, 0, task.num_test_cases, False, 0.0, details)


def evaluate_command(
    repo_dir: Path | str,
    task_dir: Path | str,
    timeout_s: float = 300.0,
    *,
    scratch_dir: Path | None = None,
    unsafe_no_sandbox: bool = False,
) -> dict[str, Any]:
    """``strands-art evaluate REPO_DIR --task TASK_DIR``: the result as a JSON-ready dict.

    A repository without a root ``pom.xml`` scores 0 (``details.error`` says why, reason
    :data:`REASON_NO_POM`) rather than raising. ``scratch_dir`` and ``unsafe_no_sandbox``: see
    :func:`evaluate`.

    Raises:
        BadTask: the task directory is malformed (the repository was not looked at).
        BadRepository: ``repo_dir`` is not a directory, or its tree cannot be copied or read.
        SandboxError / MavenNotFound: the machine cannot run the evaluation.
    """
    task = EvalTask.from_dir(task_dir)
    repo = Path(repo_dir)
    if not repo.is_dir():
        raise BadRepository(f"{repo} is not a directory")
    if not (repo / "pom.xml").is_file():
        return EvalResult(
            False,
            False,
            0,
            task.num_test_cases,
            False,
            0.0,
            {"error": f"no pom.xml in {repo}", "reasons": [REASON_NO_POM]},
        ).to_json()
    return evaluate(
        repo, task, timeout_s=timeout_s, scratch_dir=scratch_dir, unsafe_no_sandbox=unsafe_no_sandbox
    ).to_json()


def main(argv: list[str] | None = None) -> int:
    """``python -m strands_art.envs.migrationbench.evaluate.evaluator REPO --task TASK [--timeout S]``."""
    parser = argparse.ArgumentParser(description="Score a Java 8 -> 17 migration (MigrationBench rules).")
    parser.add_argument("repo", type=Path)
    parser.add_argument("--task", type=Path, required=True, help="task dir with task.json and repo/")
    parser.add_argument("--timeout", type=float, default=300.0, help="Maven build timeout, seconds")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        check_float("--timeout", args.timeout, 0.0, MAX_BUILD_TIMEOUT_S, lo_open=True)
        result = evaluate_command(args.repo, args.task, args.timeout)
    except BadRepository as exc:
        sys.stderr.write(f"evaluator: bad repository {args.repo}: {exc}\n")
        return 3
    except (FileNotFoundError, ValueError) as exc:
        sys.stderr.write(f"evaluator: {exc}\n")
        return 2
    sys.stdout.write(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
