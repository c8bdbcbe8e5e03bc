"""Memory accounting that counts everything: a cgroup memory limit per sandboxed command.

``RLIMIT_DATA`` (:class:`.policy.Limits`) counts a process's *private* writable memory only. What
it leaves open, measured (docs/migrationbench-agent.md, "Sandbox"): an anonymous ``MAP_SHARED`` mapping
(5 GiB with every page touched succeeds under the 4 GiB limit), ``memfd_create`` files, the
private ``/tmp`` and ``/dev/shm`` tmpfs (each up to ``tmp_bytes``), and any number of processes
each with its own 4 GiB. A memory cgroup counts all of these (anonymous, shared memory, tmpfs
pages, page cache) for the whole process tree, and the kernel's OOM killer ends the tree's
largest process when the tree goes over the limit.

Every sandboxed command runs in its own child cgroup of this process's memory cgroup, named
``strands-art-<pid>-<n>``, with ``memory.max`` (cgroup v2) or ``memory.limit_in_bytes`` and
``memory.memsw.limit_in_bytes`` (v1; swap counted too) set to ``Limits.memory_bytes``.
The command enters it before anything else runs: the host argv starts with
``/bin/sh -c 'echo $$ > CGROUP/cgroup.procs && exec "$@"'`` (as the caller, before ``setpriv``
drops privileges), so the write failing stops the command (fail closed) and every descendant
inherits the cgroup. The directory is removed when the command has ended.

Where no memory controller is delegated to us (not root, no systemd delegation, v2 with processes
in our own cgroup and no ``memory`` in its ``cgroup.subtree_control``), :func:`memory_cgroups`
says why and commands run with the process limits only: the gap above stays open, and
``strands-art`` logs it once per process (``probe_sandbox`` reports ``MEMCG=none``).

Source: ``cgroups(7)``, Documentation/admin-guide/cgroup-v2.rst ("memory.max"),
Documentation/admin-guide/cgroup-v1/memory.rst ("memory.limit_in_bytes", "memory.memsw").
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

PREFIX = "strands-art-"
_ENTER = 'echo $$ > "$0/cgroup.procs" && exec "$@"'


@dataclass(frozen=True)
class CgroupSupport:
    """Where per-command memory cgroups are made: ``base`` (our own memory cgroup) and the
    hierarchy ``version`` (1 or 2); ``base`` None with ``why`` when there are none here."""

    base: Path | None
    version: int
    why: str = ""


def _mounts() -> list[tuple[str, str, str, str]]:
    """``(mount point, root, fstype, super options)`` of each cgroup mount (``/proc/self/mountinfo``)."""
    out = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rfields = left.split(), right.split()
            if len(fields) >= 5 and len(rfields) >= 3 and rfields[0] in ("cgroup", "cgroup2"):
                out.append((fields[4], fields[3], rfields[0], rfields[2]))
    return out


def _own_path(hierarchy: str) -> str | None:
    """Our cgroup path in the v1 hierarchy with controller ``hierarchy``, or ("") the v2 one."""
    with open("/proc/self/cgroup", encoding="utf-8") as f:
        for line in f:
            num, controllers, path = line.rstrip("\n").split(":", 2)
            if (hierarchy == "" and num == "0" and controllers == "") or hierarchy in controllers.split(","):
                return path
    return None


def _under(mount: str, root: str, path: str) -> Path:
    rel = os.path.relpath(path, root) if root != "/" else path.lstrip("/")
    return Path(mount) / ("" if rel == "." else rel)


def detect() -> CgroupSupport:
    """Find a memory cgroup we can make children in (v2 first, then v1); never raises."""
    try:
        mounts = _mounts()
        whys = []
        for mount, root, _, _ in (m for m in mounts if m[2] == "cgroup2"):
            path = _own_path("")
            if path is None:
                continue
            base = _under(mount, root, path)
            controllers = (base / "cgroup.controllers").read_text().split()
            if "memory" not in controllers:
                whys.append(f"cgroup v2 at {mount}: no memory controller in {base}")
                continue
            subtree = base / "cgroup.subtree_control"
            if "memory" not in subtree.read_text().split():
                try:
                    subtree.write_text("+memory")
                except OSError as exc:  # EBUSY: processes in our own cgroup (no internal processes)
                    whys.append(f"cannot enable the memory controller below {base} ({exc.strerror})")
                    continue
            if os.access(base, os.W_OK):
                return CgroupSupport(base, 2)
            whys.append(f"{base} is not writable by us")
        for mount, root, _, opts in (m for m in mounts if m[2] == "cgroup"):
            if "memory" not in opts.split(","):
                continue
            path = _own_path("memory")
            if path is None:
                continue
            base = _under(mount, root, path)
            if (base / "memory.limit_in_bytes").exists() and os.access(base, os.W_OK):
                return CgroupSupport(base, 1)
            whys.append(f"cgroup v1 memory hierarchy: {base} is not writable by us")
        return CgroupSupport(None, 0, "; ".join(whys) or "no cgroup memory controller is mounted")
    except OSError as exc:
        return CgroupSupport(None, 0, f"cannot read the cgroup setup ({exc})")


_support: CgroupSupport | None = None
_lock = threading.Lock()
_counter = itertools.count()


def memory_cgroups() -> CgroupSupport:
    """:func:`detect`, once per process; logs the gap when there is no memory cgroup, and removes
    empty per-command cgroups a killed process of ours left behind."""
    global _support
    with _lock:
        if _support is None:
            _support = detect()
            if _support.base is None:
                logger.warning(
                    "no memory cgroup for sandboxed commands (%s): only per-process limits apply, and "
                    "shared memory (MAP_SHARED, memfd, tmpfs) is not counted; see docs/migrationbench-agent.md",
                    _support.why,
                )
            else:
                for leftover in _support.base.glob(PREFIX + "*"):
                    if _owner_alive(leftover.name):
                        continue  # another live process's (made, not entered yet): not ours
                    with contextlib.suppress(OSError):
                        leftover.rmdir()  # only an empty cgroup can be removed
        return _support


def _owner_alive(name: str) -> bool:
    """Whether the process that made the cgroup ``strands-art-<pid>-<n>`` still runs (another
    run on this machine, or this one); a name of another shape counts as not alive."""
    try:
        pid = int(name[len(PREFIX) :].split("-", 1)[0])
    except ValueError:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class CommandCgroup:
    """One command's cgroup; :meth:`wrap` its host argv so that it starts inside."""

    path: Path
    version: int

    def wrap(self, argv: Sequence[str]) -> list[str]:
        return ["/bin/sh", "-c", _ENTER, str(self.path), *argv]

    def oom_kills(self) -> int:
        """Processes the kernel killed for this cgroup's limit (0 if unknown)."""
        try:
            if self.version == 2:
                text = (self.path / "memory.events").read_text()
            else:
                text = (self.path / "memory.oom_control").read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0


@contextlib.contextmanager
def command_cgroup(memory_bytes: int) -> Iterator[CommandCgroup | None]:
    """A fresh cgroup limited to ``memory_bytes`` (None where there are none, see the module doc).

    Raises:
        OSError: the cgroup could not be made or limited (nothing is run then: fail closed).
    """
    support = memory_cgroups()
    if support.base is None:
        yield None
        return
    while True:  # a busy leftover of an earlier process with our pid keeps its name
        path = support.base / f"{PREFIX}{os.getpid()}-{next(_counter)}"
        try:
            path.mkdir()
            break
        except FileExistsError:
            continue
    try:
        if support.version == 2:
            (path / "memory.max").write_text(str(memory_bytes))
            with contextlib.suppress(FileNotFoundError):  # no swap accounting: nothing to limit
                (path / "memory.swap.max").write_text("0")
        else:
            (path / "memory.limit_in_bytes").write_text(str(memory_bytes))
            with contextlib.suppress(FileNotFoundError):
                (path / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
        cgroup = CommandCgroup(path, support.version)
        yield cgroup
        if cgroup.oom_kills():
            logger.info("%s: the memory limit (%d bytes) killed a process", path.name, memory_bytes)
    finally:
        _remove(path)


def _remove(path: Path) -> None:
    """Remove the cgroup; while its killed processes are still exiting (EBUSY), a daemon thread
    retries for up to :data:`REMOVE_WAIT_S` (the caller, maybe an event loop, does not wait)."""
    try:
        path.rmdir()
    except FileNotFoundError:
        pass
    except OSError:
        threading.Thread(target=_remove_later, args=(path,), daemon=True).start()


REMOVE_WAIT_S = 30.0


def _remove_later(path: Path) -> None:
    deadline = time.monotonic() + REMOVE_WAIT_S
    while True:
        time.sleep(0.05)
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if time.monotonic() > deadline:
                logger.warning("could not remove the cgroup %s: %s", path, exc)
                return
