"""A ``strands-art train`` run directory: what a run writes there, its lock, the checks before a
run starts in it, and the undoing of a start that failed.

A fresh run that stops before it trains (a refused setting, a model that does not load) leaves
the directory as it found it, so the corrected command runs into the same ``--run-dir``: the
run's own files go (:func:`forget_start`), and what the command made before the run began (the
environment's ``env/``, the directory itself) goes too when the command created it
(:func:`undo_start`). Nothing a previous run wrote is ever removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


class RunDirError(ValueError):
    """The run directory holds a run and ``--resume`` was not given, or ``--resume`` found none,
    or another process is training it."""


LOCK_FILE = ".lock"
RUN_FILES = ("train.json", "command.txt", "code.jsonl", "metrics.jsonl", "checkpoints", "rows", "trajectories",
             "tensorboard", "env", "adapters", "vllm-server.log", LOCK_FILE)  # fmt: skip
"""What a run writes in its directory (a symlink in their place is refused: :func:`prepare_run_dir`)."""
RUN_DIRS = frozenset({"checkpoints", "rows", "trajectories", "tensorboard", "env", "adapters"})
"""The entries of :data:`RUN_FILES` that are directories; the others are regular files."""


def _wrong_type(path: Path, name: str) -> str | None:
    """Why ``path`` (an existing entry named ``name`` of :data:`RUN_FILES`, not a symlink) is not
    what a run writes there, or None."""
    want_dir = name in RUN_DIRS
    if path.is_dir() == want_dir and (want_dir or path.is_file()):
        return None
    if path.is_dir():
        return "is a directory, not a regular file"
    if path.is_file():
        return "is a regular file, not a directory"
    return f"is not a {'directory' if want_dir else 'regular file'} (a FIFO, socket or device)"


@contextlib.contextmanager
def hold_run_dir(run_dir: Path) -> Iterator[None]:
    """Hold the run directory's lock (``fcntl.flock`` on ``RUN_DIR/.lock``, which holds the
    holder's pid) for the block, as ``strands-art migrate`` does: a second ``train`` on the same
    directory — a second ``--resume`` of a run still training — stops before it reads anything.
    The kernel releases the lock when the process ends, however it ends.

    Raises:
        RunDirError: another live process holds the lock (its pid named).
        OSError: the lock file cannot be created (``.lock`` a symlink, no permission).
    """
    fd = os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip() or "?"
        os.close(fd)
        raise RunDirError(
            f"{run_dir} is being trained by another process (pid {holder}): wait for it to end or stop it "
            "before resuming"
        ) from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def check_run_entries(run_dir: Path) -> None:
    """Refuse a run directory where one of :data:`RUN_FILES` is a symlink (it would read or write
    elsewhere) or not of its type (a directory where a file belongs, a file, FIFO or socket where a
    directory does). The command checks this before the environment makes ``env/`` (a symlinked
    ``env`` was written through), :func:`prepare_run_dir` again.

    Raises:
        RunDirError: naming the entry and what it is; ``run_dir`` itself not a directory.
    """
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(
            f"--run-dir {run_dir}: not a directory (a file is there); give a new or existing directory"
        )
    for name in RUN_FILES:  # a run's own files are in it: none may lead elsewhere
        path = run_dir / name
        if path.is_symlink():
            raise RunDirError(f"{path} is a symlink: a run directory's files must be inside it")
        why = _wrong_type(path, name) if path.exists() else None
        if why:  # e.g. a .lock directory, a rows file: what the run writes there would fail mid-run
            raise RunDirError(f"{path} {why}: move it out of the run directory")


def check_run_dir(run_dir: Path, resume: bool) -> None:
    """Refuse to overwrite a run (lose nothing); refuse ``resume`` where there is no run; refuse
    a run directory where one of :data:`RUN_FILES` is a symlink (it would read or write elsewhere)
    or not of its type (a directory where a file belongs, a file or FIFO where a directory does).
    Creates nothing: the command runs it before the environment writes ``env/``.

    Raises:
        RunDirError: see the class.
    """
    check_run_entries(run_dir)
    has_run = (run_dir / "train.json").exists() or (run_dir / "metrics.jsonl").exists()
    if resume and not (run_dir / "train.json").exists():
        raise RunDirError(f"--resume: {run_dir} holds no run (no train.json)")
    if not resume and has_run:
        raise RunDirError(
            f"{run_dir} already holds a run: pass --resume to continue it, or another --run-dir"
        )


def prepare_run_dir(run_dir: Path, resume: bool) -> None:
    """:func:`check_run_dir`, then make the directory.

    Raises:
        RunDirError: see the class.
    """
    check_run_dir(run_dir, resume)
    run_dir.mkdir(parents=True, exist_ok=True)


def forget_start(run_dir: Path) -> None:
    """Remove what a fresh run wrote before its model, sampler or gateway failed to start
    or a setting was refused (``train.json``, ``command.txt``, ``code.jsonl``, ``.lock``, ``tensorboard/``, the empty
    ``trajectories/``), so the same command runs again once the cause is fixed. The environment's
    ``env/`` stays here; the command removes it when it made it (:func:`undo_start`).

    Raises:
        OSError: a file that exists but cannot be removed (``tensorboard/`` errors are ignored).
    """
    for name in ("train.json", "command.txt", "code.jsonl", LOCK_FILE):
        (run_dir / name).unlink(missing_ok=True)
    for name in ("tensorboard", "trajectories"):  # the store: empty, nothing has sampled yet
        shutil.rmtree(run_dir / name, ignore_errors=True)


@dataclass(frozen=True)
class Before:
    """What was in place before a command started a run: whether the run directory and its
    ``env/`` existed (:func:`undo_start` removes only what was not)."""

    run_dir: bool
    env: bool


def before(run_dir: Path) -> Before:
    """The :class:`Before` of ``run_dir`` now (a symlink counts as existing: never removed)."""
    return Before(
        run_dir=run_dir.exists() or run_dir.is_symlink(),
        env=(run_dir / "env").exists() or (run_dir / "env").is_symlink(),
    )


def undo_start(run_dir: Path, was: Before) -> None:
    """After a fresh run stopped before it trained: remove the environment's ``env/`` when it was
    not there before (``was``), then ``run_dir`` when the command created it and it is left
    empty. Nothing is removed while a run stands in the directory or another process holds it
    (``train.json``, ``metrics.jsonl`` or ``.lock``: a run that began training, or another's; a
    start that failed has removed its own, :func:`forget_start`)."""
    if any((run_dir / name).exists() for name in ("train.json", "metrics.jsonl", LOCK_FILE)):
        return
    env = run_dir / "env"
    if not was.env and env.is_dir() and not env.is_symlink():
        shutil.rmtree(env, ignore_errors=True)
    if not was.run_dir and run_dir.is_dir() and not run_dir.is_symlink() and not any(run_dir.iterdir()):
        run_dir.rmdir()
