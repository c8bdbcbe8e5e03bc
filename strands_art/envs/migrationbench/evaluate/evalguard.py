"""Evaluation that never raises into the runner: any failure becomes a reason code.

The evaluated repository is hostile: copying it, building it, reading its reports or archiving
it can fail in ways no list of checks foresees (a non-UTF-8 file name, 1,200 nested directories,
a 3 GiB sparse file, ``.git`` deleted, a report with ``tests="abc"``). One such rollout must not
end the run, nor every ``--resume`` after it. :func:`guarded_evaluation` calls the evaluator and
turns any exception into a verdict:

* a failure caused by the repository scores the rollout **0.0** with
  ``evaluation_error = {"reason": CODE, "message": ONE LINE}`` (see :data:`REASONS`);
* a failure of the host (a fork or memory failure: ``EAGAIN``/``ENOMEM``/``EMFILE``/``ENFILE``,
  or the sandbox itself failing) is retried once after :data:`RETRY_DELAY_S`; if it
  fails again the rollout is **not scored** (``host_failure``: the runner records it as failed,
  like a sampling-backend failure, and ``--resume`` runs it again). A reward of 0 for a broken
  machine would be a wrong training signal. A scoring build that could not start its processes
  is one too when the host cannot fork either (:mod:`.hostcheck`: the evaluator raises
  :class:`~.hostcheck.HostForkFailure`, an ``EAGAIN`` ``OSError``). A full disk (``ENOSPC``) is *scored* (``disk_full``):
  the agent's workspace is what fills a disk, and a policy must not be able to turn a rollout it
  is losing into an unscored one by filling it.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from strands_art.envs.migrationbench.evaluate.evaluator import EvalTask, check_commit_id
from strands_art.envs.sandbox import SandboxError
from strands_art.envs.sandbox.files import UnsafeFile

logger = logging.getLogger(__name__)

RETRY_DELAY_S = 2.0
MAX_MESSAGE_CHARS = 500

#: Reason codes of ``evaluation_error`` (results.jsonl), most specific first: ``(code, exception
#: types, what it means)``.
REASONS: tuple[tuple[str, tuple[type[BaseException], ...], str], ...] = (
    (
        "unsafe_tree",
        (UnsafeFile,),
        "the repository is over a copy bound (bytes, depth, entries) or holds a refused file",
    ),
    ("too_deep", (RecursionError,), "nesting too deep to process"),
    ("bad_file_name", (UnicodeError,), "a file name or content that cannot be encoded"),
    (
        "bad_repository",
        (ValueError, LookupError),
        "unreadable build output or repository (reports, git archive)",
    ),
    ("os_error", (OSError,), "a file operation on the repository failed (disk_full: ENOSPC)"),
)
#: errno values of a host failure (retried once, then not scored).
HOST_ERRNOS = frozenset({errno.EAGAIN, errno.ENOMEM, errno.EMFILE, errno.ENFILE})


def one_line(exc: BaseException) -> str:
    """``Type: message`` on one line, at most :data:`MAX_MESSAGE_CHARS`, valid UTF-8."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    text = text.encode("utf-8", errors="backslashreplace").decode("utf-8")
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 3] + "..."


def is_host_failure(exc: BaseException) -> bool:
    """A failure of the machine, not of the repository: fork/memory/fd/disk exhaustion, or the
    sandbox not starting (:class:`~strands_art.envs.sandbox.SandboxError`)."""
    if isinstance(exc, SandboxError):
        return True
    return isinstance(exc, OSError) and not isinstance(exc, UnsafeFile) and exc.errno in HOST_ERRNOS


def reason_of(exc: BaseException) -> str:
    """The reason code of an evaluation failure (``internal_error`` when no rule matches)."""
    if is_host_failure(exc):
        return "host_failure"
    chain = _cause_chain(exc)  # the evaluator wraps causes (BadRepository from UnsafeFile ...)
    if any(isinstance(e, OSError) and e.errno == errno.ENOSPC for e in chain):
        return "disk_full"
    for code, types, _ in REASONS:
        if any(isinstance(e, types) for e in chain):
            return code
    return "internal_error"


def _cause_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its explicit causes (``raise ... from``), outermost first, at most 8."""
    chain = [exc]
    while chain[-1].__cause__ is not None and len(chain) < 8:
        chain.append(chain[-1].__cause__)
    return chain


def failed_evaluation(exc: BaseException, tests_required: int) -> dict[str, Any]:
    """The evaluator's result shape for a rollout whose evaluation raised ``exc``: reward 0.0,
    nothing passed, ``evaluation_error`` (also under ``details``)."""
    error = {"reason": reason_of(exc), "message": one_line(exc)}
    return {
        "build_success": False,
        "java17_bytecode": False,
        "tests_run": 0,
        "tests_required": tests_required,
        "tests_equivalent": False,
        "reward": 0.0,
        "details": {"evaluation_error": error},
        "evaluation_error": error,
    }


def check_task(task_dir: str | os.PathLike[str]) -> EvalTask:
    """Load and check a task directory before its evaluation, so that a bad task is told apart
    from a bad repository: ``task.json`` readable, and the original's tests reachable (``repo/``,
    or a hex ``base_commit``).

    Raises:
        FileNotFoundError / ValueError: the task directory is missing or malformed.
    """
    task = EvalTask.from_dir(task_dir)
    if task.original_dir is None:
        if not task.base_commit:
            raise ValueError(f"task {task.name}: neither repo/ nor base_commit is given")
        check_commit_id(task.base_commit, f"task {task.name}: base_commit")
    return task


def guarded_evaluation(
    evaluate: Callable[[], dict[str, Any]], *, tests_required: int, retry_delay_s: float | None = None
) -> tuple[dict[str, Any], bool]:
    """Run ``evaluate()`` (the evaluator on one workspace); never raises an ``Exception``.

    Returns:
        ``(evaluation, scored)``: the evaluator's dict, or :func:`failed_evaluation` for a
        failure; ``scored`` is False only for a host failure that happened twice (the rollout
        is then not scored and runs again on ``--resume``).
    """
    for attempt in (1, 2):
        try:
            return evaluate(), True
        except Exception as exc:  # noqa: BLE001 - every failure becomes a verdict, by design
            if is_host_failure(exc) and attempt == 1:
                logger.warning("evaluation failed on the host (%s); retrying once", one_line(exc))
                time.sleep(RETRY_DELAY_S if retry_delay_s is None else retry_delay_s)
                continue
            logger.warning(
                "evaluation failed: %s", one_line(exc), exc_info=reason_of(exc) == "internal_error"
            )
            return failed_evaluation(exc, tests_required), not is_host_failure(exc)
    raise AssertionError("unreachable")
