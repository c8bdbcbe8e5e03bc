"""Kill what a runner started when the runner dies, even by SIGKILL.

The agent's commands and the evaluator's Maven builds run in process groups of their own
(``start_new_session``), so they survive their runner's death unless something kills them. A
runner starts a **reaper**: a small watchdog process (``python -m
strands_art.envs.migrationbench.run.reaper PARENT_PID TOKEN``) that holds the read end of a pipe whose
write end only the runner has. When the runner exits or is killed, the pipe reaches EOF and the
reaper SIGKILLs

- every process that was seen, while the runner lived, as one of its descendants (checked again
  by pid *and* start time, so a reused pid is never hit), and the process groups they led;
- every process whose initial environment holds ``STRANDS_ART_RUN_TOKEN=TOKEN`` (a command that
  escaped the tree with ``setsid`` and a double fork still inherits it), and its process group;
- every process running as the sandbox uid that owns one of the run's workspaces or evaluation
  build copies (:func:`sandbox_owners` of ``<run_dir>/workspaces``): sandboxed commands start
  with a cleared environment, so they carry no token, but each workspace has its own uid
  (:mod:`strands_art.envs.sandbox.policy`) and nothing else runs as it.

After the runner's death it keeps sweeping for ``LINGER_S`` seconds: a command the runner was
starting at that moment becomes a sandbox-uid process only when it execs ``setpriv``. It polls
the runner's process tree every ``POLL_S`` seconds. A process that both escapes the
tree *and* clears its environment within one poll, without a sandbox uid, is out of its reach
(only possible with ``--unsafe-no-sandbox``); inside the sandbox, bubblewrap's PID namespace
(``--die-with-parent``) and ``setpriv --pdeathsig`` end the command with the runner as well.
``--resume`` calls :func:`kill_marked` with the dead run's token and its workspaces' owners too,
for a reaper that was killed as well. Linux only (``/proc``); sources: ``proc(5)`` (``stat``
fields 3, 4, 5 and 22; ``status`` ``Uid:``), ``kill(2)``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from strands_art.envs.sandbox.policy import is_sandbox_uid

logger = logging.getLogger(__name__)

TOKEN_ENV = "STRANDS_ART_RUN_TOKEN"
POLL_S = 0.5
KILL_PASSES = 10  # sweeps while matching processes remain (a sandboxed fork loop races the first)
STOP = b"stop\n"  # what Reaper.stop writes before closing the pipe: the runner ends cleanly
LINGER_S = 2.0  # the reaper sweeps this long after the runner's death: a command it was starting
# at that moment is still a forked copy of the runner (no token, root) until it execs into
# `setpriv --reuid`/bwrap, whose parent-death signal then never fires (the parent is gone)
_PROC = Path("/proc")


@dataclass(frozen=True)
class ProcInfo:
    """One process: ``pid``, parent ``ppid``, process group ``pgid``, ``start`` (clock ticks
    after boot, ``/proc/PID/stat`` field 22; with ``pid`` it names a process uniquely) and
    ``state`` (field 3: ``R``, ``S``, ``Z`` for a zombie, ...)."""

    pid: int
    ppid: int
    pgid: int
    start: int
    state: str = "?"


def _stat(pid: int) -> ProcInfo | None:
    try:
        raw = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses; split after the last ')'
    fields = raw[raw.rindex(b")") + 2 :].split()
    return ProcInfo(
        pid=pid, ppid=int(fields[1]), pgid=int(fields[2]), start=int(fields[19]), state=fields[0].decode()
    )


def processes() -> dict[int, ProcInfo]:
    """Every process visible in ``/proc`` (a process that exits meanwhile is left out)."""
    out: dict[int, ProcInfo] = {}
    for entry in os.scandir(_PROC):
        if entry.name.isdigit() and (info := _stat(int(entry.name))) is not None:
            out[info.pid] = info
    return out


def descendants(root: int, table: dict[int, ProcInfo] | None = None) -> list[ProcInfo]:
    """Processes below ``root`` in the parent tree (not ``root`` itself)."""
    table = processes() if table is None else table
    children: dict[int, list[ProcInfo]] = {}
    for p in table.values():
        children.setdefault(p.ppid, []).append(p)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child.pid)
    return found


def has_token(pid: int, token: str) -> bool:
    """True if the initial environment of ``pid`` holds ``TOKEN_ENV=token``."""
    try:
        env = (_PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return False
    return f"{TOKEN_ENV}={token}".encode() in env.split(b"\0")


def uids_of(pid: int) -> tuple[int, ...]:
    """The real, effective, saved and filesystem uids of ``pid`` (``/proc/PID/status``), as seen
    from this user namespace; ``()`` when it is gone."""
    try:
        text = (_PROC / str(pid) / "status").read_text()
    except OSError:
        return ()
    for line in text.splitlines():
        if line.startswith("Uid:"):
            return tuple(int(x) for x in line.split()[1:])
    return ()


def sandbox_owners(workspaces: str | os.PathLike[str] | None) -> frozenset[int]:
    """The sandbox uids owning ``workspaces`` entries and their children (``strands-art-ws-*``
    and its ``repo``/``aux``; ``strands-art-build-*/repo`` of an evaluation), never following a
    symlink below ``workspaces`` itself (which may be one, see :mod:`.workspace`).

    A sandbox cannot give a file to another uid (no ``CAP_CHOWN``), so what it plants there can
    only name its own uid; uids outside the sandbox range (root, the caller) are never returned.
    """
    if workspaces is None:
        return frozenset()
    found: set[int] = set()
    todo = [(Path(os.path.realpath(workspaces)), 0)]
    while todo:
        directory, depth = todo.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if is_sandbox_uid(st.st_uid):
                found.add(st.st_uid)
            if depth < 1 and entry.is_dir(follow_symlinks=False):
                todo.append((Path(entry.path), depth + 1))
    return frozenset(found)


def _kill(pid: int, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)


def kill_marked(
    token: str | None,
    seen: dict[tuple[int, int], int] | None = None,
    spare: frozenset[int] = frozenset(),
    spare_groups: frozenset[int] = frozenset(),
    uids: frozenset[int] = frozenset(),
    linger_s: float = 0.0,
) -> int:
    """SIGKILL the processes of a dead run and their process groups; returns how many were hit.

    Sweeps again every 50 ms while a matching live process remains (up to :data:`KILL_PASSES`
    sweeps), and in any case for ``linger_s`` seconds, so a process forked or exec'd during a
    sweep is caught by a later one.

    Args:
        token: the run's ``STRANDS_ART_RUN_TOKEN`` (None: match no token).
        seen: ``{(pid, start): pgid}`` of processes observed as the runner's descendants.
        spare: pids never to kill (the caller, the reaper itself).
        spare_groups: process groups never killed as a whole: the runner's own group, which
            may be its parent script's (a process in it is still killed by pid). The caller's
            group and those of ``spare`` are added.
        uids: sandbox uids of the run (:func:`sandbox_owners`): every process with one of them
            as its real, effective, saved or filesystem uid is killed. Uids outside the sandbox
            range are ignored.
    """
    seen = seen or {}
    uids = frozenset(u for u in uids if is_sandbox_uid(u))
    hit: set[int] = set()
    groups: set[int] = set()
    table = processes()
    own = {os.getpgid(0), *spare_groups} | {table[pid].pgid for pid in spare if pid in table}
    deadline = time.monotonic() + linger_s
    for sweep in range(1 << 30):
        if sweep:
            time.sleep(0.05)
            table = processes()
        found = [
            p
            for p in table.values()
            if p.pid not in spare
            and p.pid != 1
            and p.state != "Z"  # exited already, waiting for its parent
            and (
                (p.pid, p.start) in seen
                or (token is not None and has_token(p.pid, token))
                or (uids and not uids.isdisjoint(uids_of(p.pid)))
            )
        ]
        for p in found:
            _kill(p.pid, group=False)
            groups.add(p.pgid)
            hit.add(p.pid)
        if time.monotonic() >= deadline and (not found or sweep + 1 >= KILL_PASSES):
            break
    for pgid in groups - own - {0, 1}:
        _kill(pgid, group=True)
    return len(hit)


def watch(
    parent: int,
    token: str,
    pipe_fd: int = 0,
    poll_s: float = POLL_S,
    workspaces: str | os.PathLike[str] | None = None,
) -> int:
    """The reaper's loop: record ``parent``'s descendants until ``pipe_fd`` reaches EOF, then kill
    them, what carries ``token``, and what runs as an owner of ``workspaces`` (:func:`sandbox_owners`).

    Writes ``ready`` to stdout once it knows which children ``parent`` had before (those are
    never killed)."""
    me = os.getpid()
    table = processes()
    parent_group = frozenset({table[parent].pgid} if parent in table else ())
    before = {(p.pid, p.start) for p in descendants(parent, table)}  # children the runner had already
    seen: dict[tuple[int, int], int] = {}
    os.write(1, b"ready\n")
    said = b""
    while True:
        ready, _, _ = select.select([pipe_fd], [], [], poll_s)
        if ready:
            data = os.read(pipe_fd, 4096)
            if not data:
                break
            said += data[:64]
        for p in descendants(parent):
            if p.pid != me and (p.pid, p.start) not in before:
                seen[(p.pid, p.start)] = p.pgid
    return kill_marked(
        token,
        seen,
        spare=frozenset({me, parent}),
        spare_groups=parent_group,
        uids=sandbox_owners(workspaces),
        linger_s=0.0 if said.startswith(STOP) else LINGER_S,  # a clean stop starts nothing more
    )


class Reaper:
    """Handle on a running reaper process (see the module docstring).

    :meth:`start` launches it for the current process, ``token`` and the run's ``workspaces``
    directory; :meth:`stop` closes the pipe (the reaper sweeps, then exits) and waits for it.
    """

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc

    @classmethod
    def start(cls, token: str, workspaces: str | os.PathLike[str] | None = None) -> Reaper:
        argv = [sys.executable, "-m", __name__, str(os.getpid()), token]
        if workspaces is not None:
            argv.append(os.path.abspath(workspaces))
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C to the terminal's group does not reach it first
            env={k: v for k, v in os.environ.items() if k != TOKEN_ENV},
        )
        assert proc.stdout is not None
        if proc.stdout.readline() != b"ready\n":  # it has taken its snapshot of our children
            proc.kill()
            raise RuntimeError("the process reaper did not start")
        return cls(proc)

    def stop(self, timeout_s: float = 10.0) -> None:
        assert self._proc.stdin is not None
        with contextlib.suppress(OSError):
            self._proc.stdin.write(STOP)
            self._proc.stdin.flush()
        with contextlib.suppress(OSError):
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3) or not argv[0].isdigit():
        sys.stderr.write(
            "usage: python -m strands_art.envs.migrationbench.run.reaper PARENT_PID TOKEN [WORKSPACES_DIR]\n"
        )
        return 2
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # only the pipe's EOF ends the watch
    watch(int(argv[0]), argv[1], workspaces=argv[2] if len(argv) == 3 else None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
