"""The bubblewrap command line for one sandboxed process.

:class:`Sandbox` turns ``argv`` into ``prlimit LIMITS -- setpriv --reuid U ... -- bwrap OPTIONS
-- argv``: resource limits first (inherited by everything), then the switch to an unprivileged
outside uid (:mod:`.policy`), then ``bwrap`` (Debian package ``bubblewrap``) with

- new user, mount, PID, network, IPC and UTS namespaces (``--unshare-all``, no ``--share-net``),
  nested user namespaces disabled (``--disable-userns``), every capability dropped;
- a root that is an empty tmpfs holding only read-only binds of :data:`.policy.SYSTEM_RO_PATHS`
  (``/usr``, a subset of ``/etc``), the read-only paths given (e.g. the JDK, Debian's Maven
  repository) and, read-write, the writable paths given (the workspace and its Maven local
  repository), each at its host path; a synthetic ``/etc/passwd`` and ``/etc/group``;
- a private size-limited ``/tmp`` and ``/dev/shm``, a minimal ``/dev`` (null, zero, random, tty,
  ...), a fresh ``/proc`` of the sandbox's own PID namespace, no ``/sys``;
- ``--clearenv`` and only the variables given (see :func:`allowed_env`);
- ``--new-session`` (no TIOCSTI into the caller's terminal), ``--die-with-parent`` (the sandbox's
  PID namespace dies with ``bwrap``) and ``setpriv --pdeathsig=KILL`` (``bwrap`` dies with the
  runner): a SIGKILLed runner leaves no process behind.

Source: ``bwrap(1)`` (bubblewrap 0.8), ``user_namespaces(7)``, ``pid_namespaces(7)``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .policy import SYSTEM_RO_PATHS, USR_SYMLINKS, Identity, Limits

#: Variables a sandboxed command may receive; everything else (API keys, tokens, proxies, the
#: caller's PATH) is dropped. ``PYTHON*`` and ``LD_*`` are not allowed.
ENV_ALLOWED: frozenset[str] = frozenset(
    {
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "TZ",
        "TERM",
        "JAVA_HOME",
        "MAVEN_OPTS",
        "MAVEN_CONFIG",
        "MVN_LOCAL_REPO",
        "PAGER",
        "GIT_PAGER",
        "GIT_TERMINAL_PROMPT",
        "NO_COLOR",
        "MALLOC_ARENA_MAX",
        "USER",
        "LOGNAME",
        "TMPDIR",
    }
)
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"


class SandboxError(RuntimeError):
    """The sandbox cannot be used: what is missing, and how to install or fix it."""


def allowed_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` restricted to :data:`ENV_ALLOWED`; ``PATH`` defaults to the system one, ``LANG`` to C.UTF-8.

    Raises:
        ValueError: a value holds a NUL byte.
    """
    out = {"PATH": DEFAULT_PATH, "LANG": "C.UTF-8"}
    for key, value in env.items():
        if key in ENV_ALLOWED:
            if "\x00" in value:
                raise ValueError(f"environment variable {key} holds a NUL byte")
            out[key] = value
    return out


def find_tool(name: str) -> str | None:
    """``name`` on PATH, else in /usr/bin or /usr/sbin (util-linux puts setpriv there)."""
    return shutil.which(name) or shutil.which(name, path="/usr/bin:/usr/sbin:/bin:/sbin")


@dataclass(frozen=True)
class Sandbox:
    """How one workspace's processes are confined.

    Attributes:
        identity: the outside uid/gid (see :func:`.policy.allocate_identity`).
        writable: host directories bound read-write at the same path (must exist and be
            owned by ``identity`` when it drops privileges).
        readonly: more host paths bound read-only at the same path (missing ones are skipped).
        limits: per-process resource limits.
        hostname: the UTS hostname inside.
    """

    identity: Identity
    writable: tuple[Path, ...] = ()
    readonly: tuple[Path, ...] = ()
    limits: Limits = field(default_factory=Limits)
    hostname: str = "sandbox"

    def _passwd(self, home: str) -> tuple[bytes, bytes]:
        uid, gid = self.identity.uid, self.identity.gid
        passwd = f"root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:{uid}:{gid}:sandbox:{home}:/bin/bash\n"
        passwd += "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        group = f"root:x:0:\nsandbox:x:{gid}:\nnogroup:x:65534:\n"
        return passwd.encode(), group.encode()

    @contextlib.contextmanager
    def launch(
        self, argv: Sequence[str], *, cwd: str | os.PathLike[str], env: Mapping[str, str]
    ) -> Iterator[tuple[list[str], tuple[int, ...]]]:
        """The host argv and the fds to pass to it (``pass_fds``); the fds close on exit.

        Args:
            argv: the command to run inside (``argv[0]`` looked up on the sandbox's PATH).
            cwd: the working directory inside (a host path under a writable or read-only bind).
            env: the command's environment; filtered by :func:`allowed_env`.

        Raises:
            SandboxError: ``bwrap``, ``setpriv`` or ``prlimit`` is missing.
            ValueError: an empty ``argv``.
        """
        if not argv:
            raise ValueError("empty command")
        tools = {name: find_tool(name) for name in ("bwrap", "setpriv", "prlimit")}
        missing = [n for n, p in tools.items() if p is None]
        if missing:
            raise SandboxError(
                f"{', '.join(missing)} not found: install the Debian packages bubblewrap and util-linux "
                "(scripts/setup-system.sh does)"
            )
        clean = allowed_env(env)
        home = clean.get("HOME", "/tmp")
        passwd, group = self._passwd(home)
        fds: list[int] = []
        try:
            for data in (passwd, group):
                fd = os.memfd_create("strands-art-sandbox", 0)
                os.write(fd, data)
                os.lseek(fd, 0, os.SEEK_SET)
                fds.append(fd)
            yield (
                self.argv(argv, cwd=cwd, env=clean, passwd_fd=fds[0], group_fd=fds[1], tools=tools),
                tuple(fds),
            )
        finally:
            for fd in fds:
                os.close(fd)

    def argv(
        self,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str],
        env: Mapping[str, str],
        passwd_fd: int,
        group_fd: int,
        tools: Mapping[str, str | None],
    ) -> list[str]:
        """The full host argv (see the module doc); ``env`` must already be filtered."""
        out: list[str] = [str(tools["prlimit"]), *self.limits.prlimit_args(), "--"]
        # bwrap's --die-with-parent covers the sandbox's own processes when bwrap dies; bwrap
        # itself gets the parent-death signal here, so a SIGKILLed runner takes it along too.
        out += [str(tools["setpriv"]), "--pdeathsig=KILL", "--no-new-privs"]
        if self.identity.drop:
            out += [
                f"--reuid={self.identity.uid}",
                f"--regid={self.identity.gid}",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
            ]
        out.append("--")
        out += [
            str(tools["bwrap"]),
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
        ]
        out += ["--cap-drop", "ALL", "--hostname", self.hostname]
        for path in SYSTEM_RO_PATHS:
            out += ["--ro-bind-try", path, path]
        for target, link in USR_SYMLINKS:
            if os.path.lexists(link):
                out += ["--symlink", target, link]
        out += [
            "--ro-bind-data",
            str(passwd_fd),
            "/etc/passwd",
            "--ro-bind-data",
            str(group_fd),
            "/etc/group",
        ]
        out += ["--proc", "/proc", "--dev", "/dev"]
        size = str(self.limits.tmp_bytes)
        out += ["--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", "/dev/shm"]
        # after the /tmp tmpfs, so that paths under /tmp stay visible
        for path in self.readonly:
            out += ["--ro-bind-try", os.fspath(path), os.fspath(path)]
        for path in self.writable:
            out += ["--bind", os.fspath(path), os.fspath(path)]
        # Read-only remount of the root tmpfs last: nothing can be created beside the binds.
        out += ["--remount-ro", "/", "--chdir", os.fspath(cwd), "--clearenv"]
        for key, value in env.items():
            out += ["--setenv", key, value]
        out += ["--", *argv]
        return out
