"""What a sandboxed process may use: its identity (an unprivileged uid), resource limits, and the
host paths it sees.

The sandbox never runs a command as the caller's root. When this process is root, every
workspace gets its own *unprivileged outside uid* (:func:`allocate_identity`, a random uid from a
range no account uses); ``setpriv`` switches to it before ``bwrap`` starts, so inside the user
namespace the command is that uid on the host too: root-owned files (``/etc/shadow``, another
rollout's workspace, the run directory) are closed to it by ordinary permissions, and
``RLIMIT_NPROC`` (counted per real uid) is a per-rollout process limit. When this process is not
root, the sandbox runs as the caller's own uid (it cannot switch).

Sources: ``setpriv(1)``, ``prlimit(1)``, ``setrlimit(2)`` (RLIMIT_NPROC counts the real uid's
processes and threads; RLIMIT_AS / RLIMIT_FSIZE / RLIMIT_CPU are per process).
"""

from __future__ import annotations

import os
import secrets
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from strands_art.validation import is_int

#: Outside uids handed to sandboxes: [UID_BASE, UID_BASE + UID_SPAN). No account or subuid
#: range of a Debian system uses them (``/etc/subuid`` ranges start at 100000, 65536 wide each).
UID_BASE = 1_500_000_000
UID_SPAN = 1 << 24

#: Host paths bound read-only into every sandbox (those that exist). ``/etc`` is NOT bound whole:
#: only what the dynamic linker, the JDK (``/etc/java-17-openjdk``, via ``/etc/alternatives``),
#: Maven (``/etc/maven``) and TLS need.
SYSTEM_RO_PATHS: tuple[str, ...] = (
    "/usr",
    "/etc/alternatives",
    "/etc/java-17-openjdk",
    "/etc/maven",
    "/etc/ssl/certs",
    "/etc/ca-certificates",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/mime.types",
)
#: Merged-/usr symlinks recreated inside (Debian 12: /bin -> usr/bin, ...).
USR_SYMLINKS: tuple[tuple[str, str], ...] = (
    ("usr/bin", "/bin"),
    ("usr/sbin", "/sbin"),
    ("usr/lib", "/lib"),
    ("usr/lib64", "/lib64"),
)


@dataclass(frozen=True)
class Limits:
    """Per-command resource limits (``prlimit``), applied to the command and all its children.

    Attributes:
        processes: RLIMIT_NPROC, processes + threads of the sandbox uid (a JVM counts its threads).
        data_bytes: RLIMIT_DATA, bytes of private writable memory per process (heap, anonymous
            mappings). Chosen over RLIMIT_AS because a JVM *reserves* far more address space than
            it uses (heap, class space, code cache) and would not start under a tight AS limit.
        file_bytes: RLIMIT_FSIZE, the largest file a process may write (SIGXFSZ beyond).
        open_files: RLIMIT_NOFILE.
        cpu_s: RLIMIT_CPU seconds per process (SIGXCPU/SIGKILL beyond); the wall-clock limit is
            the caller's timeout.
        tmp_bytes: size of the private ``/tmp`` and ``/dev/shm`` tmpfs, each.
        memory_bytes: memory of the whole command (every process, private and shared memory,
            tmpfs, page cache), enforced by a cgroup where one is available (:mod:`.memcg`);
            beyond it the kernel kills the largest process.
    """

    processes: int = 1024
    data_bytes: int = 4 << 30
    file_bytes: int = 1 << 30
    open_files: int = 4096
    cpu_s: int = 3600
    tmp_bytes: int = 1 << 30
    memory_bytes: int = 4 << 30

    def __post_init__(self) -> None:
        for name in (
            "processes",
            "data_bytes",
            "file_bytes",
            "open_files",
            "cpu_s",
            "tmp_bytes",
            "memory_bytes",
        ):
            value = getattr(self, name)
            if not is_int(value) or value < 1:
                raise ValueError(f"sandbox limit {name} must be a positive int, got {value!r}")

    def prlimit_args(self) -> list[str]:
        """``prlimit`` options setting each limit as both soft and hard (cannot be raised)."""
        pairs = {
            "nproc": self.processes,
            "data": self.data_bytes,
            "fsize": self.file_bytes,
            "nofile": self.open_files,
            "cpu": self.cpu_s,
            "core": 0,
        }
        return [f"--{k}={v}:{v}" for k, v in pairs.items()]


@dataclass(frozen=True)
class Identity:
    """The outside uid/gid a sandbox runs as; ``drop`` False when this process is not root."""

    uid: int
    gid: int
    drop: bool


_in_use: set[int] = set()
_in_use_lock = threading.Lock()


def allocate_identity() -> Identity:
    """A fresh unprivileged identity: a random unused uid from the sandbox range when root,
    else the caller's own uid/gid (no switch possible)."""
    if os.geteuid() != 0:
        return Identity(os.getuid(), os.getgid(), drop=False)
    with _in_use_lock:
        while True:
            uid = UID_BASE + secrets.randbelow(UID_SPAN)
            if uid not in _in_use:
                _in_use.add(uid)
                return Identity(uid, uid, drop=True)


def is_sandbox_uid(uid: int) -> bool:
    """True if ``uid`` lies in the range :func:`allocate_identity` draws from (a sandbox's owner)."""
    return UID_BASE <= uid < UID_BASE + UID_SPAN


def release_identity(identity: Identity) -> None:
    """Return ``identity``'s uid to the pool (its files should be gone by then)."""
    with _in_use_lock:
        _in_use.discard(identity.uid)


def chown_tree(root: str | os.PathLike[str], identity: Identity) -> None:
    """Give ``root`` and everything under it to ``identity`` (symlinks themselves, never their
    targets). A no-op when ``identity.drop`` is False."""
    if not identity.drop:
        return
    root = os.fspath(root)
    os.lchown(root, identity.uid, identity.gid)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            os.lchown(os.path.join(dirpath, name), identity.uid, identity.gid)


def untraversable_ancestor(path: str | os.PathLike[str]) -> Path | None:
    """The first existing ancestor of ``path`` that a non-owner cannot enter (no ``o+x``), or None.

    ``bwrap`` runs as the sandbox uid and must walk to each directory it binds.
    """
    p = Path(os.path.abspath(path))
    for parent in reversed(p.parents):
        try:
            mode = os.stat(parent).st_mode
        except FileNotFoundError:
            return None  # what does not exist yet is created by us (mode 0755 or 0711)
        except OSError:
            return parent
        if not mode & stat.S_IXOTH:
            return parent
    return None
