"""A ``strands-art migrate`` run directory: one owner at a time, each rollout exactly once.

The runner commits a rollout in this order: its trajectory (Parquet part, then the
``trajectories.jsonl`` line), then its ``results.jsonl`` line. The results line is the commit
record. When a run starts on an existing directory (``--resume``, or ``--run-dir`` again),
:func:`open_run_dir`

1. takes the **run-directory lock** (``fcntl.flock`` on ``.lock``, held until the process
   ends): a second process on the same directory stops with :class:`RunDirBusy`;
2. **kills the leftovers** of the dead run that held the lock before (:func:`.reaper.kill_marked`
   with the token it wrote into ``.lock``, and every process running as the sandbox uid of one of
   its workspaces, :func:`.reaper.sandbox_owners`) and **removes its workspaces**
   (``workspaces/``, and the temp-dir directory it links to, :func:`.workspace.remove_base`);
3. **reconciles** the files (:func:`reconcile`): a torn or unreadable results line is moved to
   ``results.jsonl.torn``; a results line whose trajectory is missing or torn is moved to
   ``results.jsonl.rerun`` (the rollout runs again); a stored trajectory without a results line
   (a kill between the two writes) and every Parquet part without a kept trajectory are removed.

Afterwards ``results.jsonl``, ``trajectories.jsonl`` and ``rows/part-*.parquet`` name the same
rollouts, each once, whatever the point at which the previous run was killed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from strands_art.envs.migrationbench.run.reaper import TOKEN_ENV, Reaper, kill_marked, sandbox_owners
from strands_art.envs.migrationbench.workspace import remove_base
from strands_art.store import TrajectoryStore, open_append, open_new, open_regular
from strands_art.validation import UsageError

logger = logging.getLogger(__name__)

LOCK_FILE = ".lock"
RESULTS_FILE = "results.jsonl"
TRAJECTORIES_DIR = "trajectories"
WORKSPACES_DIR = "workspaces"
LIVE_FILE = "live.json"
"""The rollouts in flight (:class:`.progress.LiveBoard`), read by ``strands-art view``."""
"""Rollout workspaces and evaluation build copies live in ``<run_dir>/workspaces/`` (made by
:meth:`.workspace.Workspace.copy_of`: mode 0711 as root so that each sandbox uid reaches only its
own 0700 directory, or a symlink to the temp dir; see :mod:`.workspace`); a resume removes them."""


class RunDirBusy(RuntimeError):
    """Another live process holds the run directory's lock."""


@dataclass
class ReconcileReport:
    """What :func:`reconcile` changed; every list holds rollout ids."""

    done: dict[str, dict[str, Any]] = field(default_factory=dict)
    torn_results: int = 0
    rerun: list[str] = field(default_factory=list)
    dropped_trajectories: list[str] = field(default_factory=list)
    removed_parts: int = 0


@dataclass
class RunDir:
    """An opened run directory; keep it open for the whole run (it holds the lock)."""

    path: Path
    token: str
    killed: int
    removed_workspaces: int
    report: ReconcileReport
    _fd: int

    @property
    def workspaces(self) -> Path:
        return self.path / WORKSPACES_DIR

    def close(self) -> None:
        """Release the lock (also released by the kernel when the process dies)."""
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1


def check_free(run_dir: str | os.PathLike[str]) -> None:
    """Raise :class:`RunDirBusy` at once when another process holds ``run_dir``'s lock (a cheap
    check before slow start-up work such as joining a Ray cluster; :func:`open_run_dir` takes the
    lock itself later). Creates nothing.

    Raises:
        RunDirBusy: another process holds the lock (its pid is in the message).
    """
    try:
        fd = os.open(Path(run_dir) / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:  # no lock file (a new run), or one we cannot open: open_run_dir decides
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _read_lock(fd).get("pid", "unknown")
        raise RunDirBusy(
            f"run directory {run_dir} is in use by another strands-art process (pid {holder}); "
            "wait for it to finish, or use another --run-dir"
        ) from None
    finally:
        os.close(fd)


def open_run_dir(run_dir: str | os.PathLike[str]) -> RunDir:
    """Lock ``run_dir`` (created if missing), clean up after a dead run and reconcile its files.

    Raises:
        RunDirBusy: another process holds the lock (its pid is in the message).
        OSError: the directory cannot be created or locked.
    """
    path = Path(run_dir)
    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _read_lock(fd).get("pid", "unknown")
        os.close(fd)
        raise RunDirBusy(
            f"run directory {path} is in use by another strands-art process (pid {holder}); "
            "wait for it to finish, or use another --run-dir"
        ) from None
    try:
        previous = _read_lock(fd)
        token = secrets.token_hex(8)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "token": token}).encode() + b"\n", 0)
        os.fsync(fd)
        killed = 0
        token_before = previous.get("token") if isinstance(previous.get("token"), str) else None
        owners = sandbox_owners(path / WORKSPACES_DIR)  # sandboxed commands carry no token
        if token_before is not None or owners:
            killed = kill_marked(token_before, spare=frozenset({os.getpid()}), uids=owners)
            if killed:
                logger.warning("killed %d leftover process(es) of the previous run in %s", killed, path)
        removed = remove_base(path / WORKSPACES_DIR)
        if removed:
            logger.warning("removed %d workspace(s) left by a previous run in %s", removed, path)
        report = reconcile(path)
    except BaseException:
        os.close(fd)  # releases the lock
        raise
    return RunDir(path, token, killed, removed, report, fd)


@contextlib.contextmanager
def run_token(token: str, workspaces: str | os.PathLike[str] | None = None) -> Iterator[None]:
    """Mark every process started inside the block with ``token`` and watch them with a
    :class:`~.reaper.Reaper`, so they die when this process dies (even by SIGKILL); sandboxed
    processes, which carry no token, are found by the uids owning ``workspaces``."""
    old = os.environ.get(TOKEN_ENV)
    os.environ[TOKEN_ENV] = token  # inherited by each command and build started from here on
    reaper = Reaper.start(token, workspaces)
    try:
        yield
    finally:
        reaper.stop()
        if old is None:
            os.environ.pop(TOKEN_ENV, None)
        else:
            os.environ[TOKEN_ENV] = old


def read_config(path: Path) -> dict[str, Any]:
    """A run's saved ``config.json`` as a dict; :class:`UsageError` if it is not one."""
    try:
        with open_regular(path) as f:  # a FIFO is refused, never waited on
            data = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise UsageError(f"--resume: cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"--resume: {path} must hold a JSON object, got {type(data).__name__}")
    return data


def _read_lock(fd: int) -> dict[str, Any]:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def parse_record(line: str) -> dict[str, Any] | None:
    """One results.jsonl line as a record with a string ``rollout_id``; None if it is not one."""
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("rollout_id"), str):
        return None
    return rec


def scan_results(path: Path, start: int = 0) -> tuple[list[dict[str, Any]], int, int, int]:
    """Read ``results.jsonl`` from byte ``start``, for a reader following a live run.

    Returns ``(records, next_start, unreadable, torn)``: the records of complete lines
    (:func:`parse_record`), the offset after the last complete line (pass it back to continue),
    how many complete lines were unreadable, and the size in bytes of a torn last line (written
    without its newline; 0 if none). A missing file reads as empty.
    """
    try:
        with open_regular(path) as f:  # a FIFO is refused (OSError), never waited on
            return scan_results_in(f, start)
    except FileNotFoundError:
        return [], 0, 0, 0


def scan_results_in(f: BinaryIO, start: int = 0) -> tuple[list[dict[str, Any]], int, int, int]:
    """:func:`scan_results` of an open ``results.jsonl`` (for a reader that opened it itself,
    e.g. the viewer through :mod:`strands_art.view.files`)."""
    f.seek(start)
    data = f.read()
    body_end = data.rfind(b"\n") + 1
    records, unreadable = [], 0
    for line in data[:body_end].decode("utf-8", errors="replace").splitlines():
        if line.strip():
            rec = parse_record(line)
            if rec is None:
                unreadable += 1
            else:
                records.append(rec)
    return records, start + body_end, unreadable, len(data) - body_end


def reconcile(run_dir: Path) -> ReconcileReport:
    """Make results.jsonl and the trajectory store agree (see the module docstring).

    Returns the report; ``report.done`` maps each finished rollout id to its latest record (a
    rollout whose latest line says ``failed`` is not done).
    """
    report = ReconcileReport()
    results = run_dir / RESULTS_FILE
    store = TrajectoryStore(run_dir / TRAJECTORIES_DIR)
    stored = store.complete_ids()
    lines: list[tuple[str, dict[str, Any]]] = []
    torn: list[str] = []
    try:
        with open_regular(results) as f:  # a FIFO is refused (OSError), never waited on
            text = f.read().decode("utf-8", errors="surrogateescape")
    except FileNotFoundError:
        text = ""
    for line in text.splitlines():
        if line.strip():
            rec = parse_record(line)
            if rec is None:
                torn.append(line)
            else:
                lines.append((line, rec))
    done: dict[str, dict[str, Any]] = {}
    for _, rec in lines:
        if rec.get("failed"):
            done.pop(rec["rollout_id"], None)
        else:
            done[rec["rollout_id"]] = rec
    rerun = sorted(rid for rid, rec in done.items() if rec.get("token_capture") and rid not in stored)
    keep = [line for line, rec in lines if rec["rollout_id"] not in rerun]
    if torn or rerun or (text and not text.endswith("\n")):
        _append_lines(results.with_name(RESULTS_FILE + ".torn"), torn)
        _append_lines(
            results.with_name(RESULTS_FILE + ".rerun"), [ln for ln, r in lines if r["rollout_id"] in rerun]
        )
        write_atomic(results, "".join(line + "\n" for line in keep))
    for rid in rerun:
        logger.warning("%s: %s has no stored trajectory (torn or lost); it runs again", results, rid)
        del done[rid]
    report.done, report.torn_results, report.rerun = done, len(torn), rerun
    captured = {rid for rid, rec in done.items() if rec.get("token_capture")}
    report.dropped_trajectories, report.removed_parts = store.retain(captured)
    if report.dropped_trajectories:
        logger.warning(
            "%s: dropped %d trajectory line(s) of unfinished or repeated rollouts",
            store.jsonl,
            len(report.dropped_trajectories),
        )
    return report


def _append_lines(path: Path, lines: list[str]) -> None:
    """Append ``lines`` to ``path``, never through a symlink (ELOOP) nor into a FIFO (ENXIO)."""
    if lines:
        with open_append(path) as f:
            f.write("".join(line + "\n" for line in lines).encode("utf-8", errors="surrogateescape"))
            f.flush()
            os.fsync(f.fileno())


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so that a kill leaves the old or the new file, never half;
    the temporary file is created anew (:func:`~strands_art.store.open_new`), never written
    through a symlink a copied run directory holds at its name."""
    tmp = path.with_name(path.name + ".tmp")
    with open_new(tmp) as f:
        f.write(text.encode("utf-8", errors="surrogateescape"))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
