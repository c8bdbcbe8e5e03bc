"""Check every bundled MigrationBench task with real Maven builds: untouched 0.0, reference 1.0.

For each task directory under ``examples/migrationbench/tasks/`` (one with a ``task.json``):

1. copy ``repo/`` to a temporary directory and score it with
   :func:`strands_art.envs.migrationbench.evaluate.evaluator.evaluate`: the reward must be 0.0, and for
   the bundled tasks whose untouched behaviour is known (:data:`UNTOUCHED_BUILDS`), the
   evaluator's compile build must succeed (classes stay at major 52) or fail to compile as
   documented in the task's README;
2. copy ``repo/`` again, ``git apply reference.patch`` inside it, and score it: the reward must be
   1.0 (build ok, every main class major 61, tests run >= ``num_test_cases``, same test methods).

Usage (needs JDK 17 + Maven; offline it resolves from Debian's repository, see
docs/migrationbench-evaluator.md)::

    python examples/migrationbench/verify_tasks.py                 # all tasks
    python examples/migrationbench/verify_tasks.py junit-mix sun-base64 --fork-count 0

Exit status 0 when every task behaves, 1 otherwise. Per task: the untouched project's compile build
(the test build never runs: its classes are 52 or it does not compile), the reference's compile
build and test build; about 5-30 s each here.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
from pathlib import Path

from strands_art.envs.migrationbench.evaluate import verify
from strands_art.envs.migrationbench.evaluate.verify import TaskCheck

logger = logging.getLogger(__name__)

TASKS_DIR = Path(__file__).resolve().parent / "tasks"

# Does the evaluator's compile build (``mvn clean verify -DskipTests=true``) exit 0 on the
# untouched project? True: it builds to major 52 (the test build then never runs: the bytecode
# check failed). False: it fails to compile, see each README. (nashorn-eval, reflective-access
# and legacy-plugins compile; their tests fail under JDK 17, which a full ``mvn clean verify``
# shows, see their READMEs.)
UNTOUCHED_BUILDS: dict[str, bool] = {
    "compiler-props": True,
    "legacy-plugins": True,
    "multi-module": True,
    "junit-mix": True,
    "jaxb-datatype": False,
    "javax-annotation": False,
    "sun-base64": False,
    "nashorn-eval": True,
    "reflective-access": True,
}
# Untouched outcomes that differ when tests run inside Maven's JVM (-DforkCount=0).
UNTOUCHED_BUILDS_IN_PROCESS: dict[str, bool] = {"legacy-plugins": True}


def check_task(
    task_dir: Path, work: Path, *, fork_count: int | None, timeout_s: float, keep: bool
) -> TaskCheck:
    """:func:`strands_art.envs.migrationbench.evaluate.verify.check_task` with this task's known untouched outcome."""
    expected = UNTOUCHED_BUILDS.get(task_dir.name)
    if fork_count == 0:
        expected = UNTOUCHED_BUILDS_IN_PROCESS.get(task_dir.name, expected)
    return verify.check_task(
        task_dir, work, fork_count=fork_count, timeout_s=timeout_s, untouched_builds=expected, keep=keep
    )


def find_tasks(names: list[str]) -> list[Path]:
    """Task directories under :data:`TASKS_DIR`, all or the named ones. Raises on an unknown name."""
    all_tasks = sorted(p.parent for p in TASKS_DIR.glob("*/task.json"))
    if not names:
        return all_tasks
    by_name = {p.name: p for p in all_tasks}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise SystemExit(f"unknown task(s) {unknown}; known: {sorted(by_name)}")
    return [by_name[n] for n in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="*", help="task names (default: all)")
    parser.add_argument(
        "--fork-count", type=int, default=None, help="surefire forkCount (default: surefire's)"
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="per-build timeout, seconds")
    parser.add_argument("--keep", action="store_true", help="keep the build copies and print where")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    work = Path(tempfile.mkdtemp(prefix="verify-tasks-"))
    failed = 0
    try:
        for task_dir in find_tasks(args.tasks):
            res = check_task(
                task_dir, work, fork_count=args.fork_count, timeout_s=args.timeout, keep=args.keep
            )
            logger.info("%s", res.line())
            failed += not res.ok
    finally:
        if args.keep:
            logger.info("build copies kept in %s", work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
