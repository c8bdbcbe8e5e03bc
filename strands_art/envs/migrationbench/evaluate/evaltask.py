"""What the evaluator needs from a task (:class:`EvalTask`), and the two ways an evaluation is
refused before anything is built: a malformed task (:class:`BadTask`) or a repository that cannot
be evaluated at all (:class:`BadRepository`).

A leaf of the evaluator: :mod:`.verdict` scores against an :class:`EvalTask` and
:mod:`.evaluator` builds one, so it lives below both (it imports only the task-directory checks
of ``strands_art.envs.migrationbench.tasks``). :mod:`.evaluator` re-exports every name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from strands_art.envs.migrationbench.tasks.offline_env import OfflineEnv, load_offline_env
from strands_art.envs.migrationbench.tasks.taskdir import (
    MAX_TEST_CASES,
    check_commit_id,
    check_task_tree,
    read_task_json,
    task_name,
)
from strands_art.validation import is_int


class BadTask(ValueError):
    """The task directory is malformed (``task.json`` missing, not JSON, a field out of range):
    nothing the evaluated repository did. ``strands-art evaluate`` exits 2."""


class BadRepository(ValueError):
    """The evaluated repository cannot be evaluated at all (not a directory; a tree the build copy
    or the test-source reader refuses). Something the agent's work did: a runner scores it 0.
    ``strands-art evaluate`` exits 3. (A repository that can be built but fails is not this: it
    is scored, with its ``details["reasons"]``.)"""


@dataclass(frozen=True)
class EvalTask:
    """What the evaluator needs from a task: the required test count and the original sources.

    ``original_dir`` is the unmigrated project (a task's ``repo/``); ``base_commit`` is used with
    ``git archive`` on the evaluated repository when ``original_dir`` is None. ``offline_env``:
    the task's declared offline Maven environment (:mod:`.offline_env`), seeded into both builds.
    """

    name: str
    num_test_cases: int
    original_dir: Path | None = None
    base_commit: str | None = None
    offline_env: OfflineEnv | None = None

    @classmethod
    def from_dir(cls, task_dir: Path | str) -> EvalTask:
        """Load ``task_dir/task.json`` (needs ``num_test_cases``); original = ``task_dir/repo``.

        Raises BadTask (a ValueError) when ``task.json`` is missing, not a regular file or not
        valid UTF-8 JSON holding an object (:mod:`.taskdir`), the task's name is not a string of
        1-150 file-name characters, ``repo/`` is deeper or larger than the build copy accepts,
        ``offline/`` differs from its declaration (:mod:`.offline_env`), ``num_test_cases`` is not an integer in [0, :data:`MAX_TEST_CASES`]
        (``true`` is not one), or ``base_commit`` is needed (no ``repo/``) and is not a full hex
        commit id (40 or 64 digits: an abbreviated one could name an object the agent made, see
        :mod:`.gitorigin`).
        """
        task_dir = Path(task_dir)
        path = task_dir / "task.json"
        try:
            meta = read_task_json(path)  # a FIFO, a huge file, not an object: refused
            name = task_name(task_dir, meta)  # becomes part of file names: a str, bounded
            offline_env = load_offline_env(task_dir, meta)
            if (task_dir / "repo").is_dir():
                check_task_tree(task_dir / "repo")  # one the build copy would refuse is a bad task
        except ValueError as exc:  # TaskDirError, OfflineEnvError
            raise BadTask(str(exc)) from None
        num = meta.get("num_test_cases")
        if not is_int(num) or not 0 <= num <= MAX_TEST_CASES:
            raise BadTask(
                f"{path}: num_test_cases must be an integer from 0 to {MAX_TEST_CASES:,}, got {repr(num)[:40]}"
            )
        repo = task_dir / "repo"
        base_commit = meta.get("base_commit")
        if not repo.is_dir():
            try:
                base_commit = check_commit_id(base_commit, f"{path}: base_commit")
            except ValueError as exc:
                raise BadTask(str(exc)) from None
            if len(base_commit) not in (40, 64):
                raise BadTask(
                    f"{path}: a task without repo/ needs the full base_commit id (40 or 64 hex "
                    f"digits), got {base_commit!r}"
                )
        return cls(
            name=name,
            num_test_cases=num,
            original_dir=repo if repo.is_dir() else None,
            base_commit=base_commit,
            offline_env=offline_env,
        )
