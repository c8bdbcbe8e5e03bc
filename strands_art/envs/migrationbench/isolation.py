"""Command isolation for the agent's shell tool: which Linux namespaces are usable here.

The shell tool runs each command through ``unshare`` when the OS allows it:

- a **network namespace** (``--net``): no interface but a private loopback, so a command can
  neither reach the internet nor a server listening on the host's 127.0.0.1;
- a **PID namespace** (``--pid --fork --kill-child --mount-proc``): when the command's shell
  exits or is killed, the kernel kills every process it left behind, even ones that called
  ``setsid``;
- a **read-only root** (mount namespace): ``/`` is re-mounted read-only except the workspace,
  its aux directory and ``/tmp``, so a command cannot damage the host outside them.

As root ``unshare`` needs no user namespace; otherwise ``--map-root-user`` is added. The first
combination whose probe passes (run once per process and cached) is used; if none does, commands
run without isolation and :attr:`Isolation.description` says why. Source of the technique:
``unshare(1)``, ``network_namespaces(7)``, ``pid_namespaces(7)``, ``mount_namespaces(7)``.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

logger = logging.getLogger(__name__)

# Inside the namespaces, before the command: loopback up, writable bind mounts, read-only root.
# $1 = command, $2 = "1" to try the read-only root, $3.. = directories that stay writable.
_SETUP = r"""
cmd="$1"; ro="$2"; shift 2
ip link set lo up >/dev/null 2>&1 || true
if [ "$ro" = 1 ]; then
  ok=1
  for d in "$@"; do mount --bind "$d" "$d" >/dev/null 2>&1 || { ok=0; break; }; done
  [ "$ok" = 1 ] && mount -o bind,remount,ro / >/dev/null 2>&1
  cd -- "$PWD" || exit 125  # re-enter the cwd through the new (writable) mount
fi
exec bash -c "$cmd"
"""

_PROBE = (
    "import socket, sys\n"
    "names = sorted(n for _, n in socket.if_nameindex())\n"
    "ro = False\n"
    "try:\n"
    "    open('/.strands-art-ro-probe', 'w')\n"
    "except OSError:\n"
    "    ro = True\n"
    "print('IFACES=' + ','.join(names)); print('RO=' + str(int(ro)))\n"
)


@dataclass(frozen=True)
class Isolation:
    """How shell commands are isolated.

    Attributes:
        kind: "netns" (network namespace active) or "none".
        prefix: argv placed before ``bash -c`` (empty for "none").
        pid_namespace: leftover processes die with the command.
        readonly_root: ``/`` is read-only except the writable directories.
        reason: why isolation is off or reduced ("" when fully active).
    """

    kind: str
    prefix: tuple[str, ...] = ()
    pid_namespace: bool = False
    readonly_root: bool = False
    reason: str = ""

    @property
    def description(self) -> str:
        """One line for the model and the logs, e.g. ``netns (no network; ...)`` or ``none (why)``."""
        if self.kind == "none":
            return f"none ({self.reason or 'disabled'})"
        parts = ["no network access, private loopback only"]
        if self.pid_namespace:
            parts.append("background processes end with the command")
        if self.readonly_root:
            parts.append("filesystem read-only outside the workspace and /tmp")
        elif self.reason:
            parts.append(self.reason)
        return f"netns ({'; '.join(parts)})"

    def argv(self, command: str, writable: Sequence[str] = ()) -> list[str]:
        """The argv that runs ``command`` with ``bash -c`` under this isolation.

        Args:
            command: shell text, passed as one argument (no quoting needed).
            writable: directories that stay writable when the root is read-only.
        """
        if self.kind == "none":
            return ["bash", "-c", command]
        # Never without a private mount namespace: the remount would hit the host's root.
        ro = "1" if self.readonly_root and writable and _has_mount_ns(self.prefix) else "0"
        return [*self.prefix, "bash", "-c", _SETUP, "strands-art-sandbox", command, ro, *writable]


_CANDIDATES: tuple[tuple[str, ...], ...] = (
    ("--net", "--pid", "--fork", "--kill-child", "--mount-proc"),
    ("--net", "--mount"),
    ("--net",),
)


def _has_mount_ns(prefix: Sequence[str]) -> bool:
    return "--mount" in prefix or "--mount-proc" in prefix


def _probe(prefix: tuple[str, ...], timeout_s: float) -> tuple[bool, bool, str]:
    """Run the probe under ``prefix``; returns (netns works, read-only root works, detail)."""
    iso = Isolation("netns", prefix=prefix, readonly_root=_has_mount_ns(prefix))
    probe_dir = "/tmp"
    argv = iso.argv(f"{sys.executable} -c {_shell_quote(_PROBE)}", writable=[probe_dir])
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, False, f"{type(e).__name__}: {e}"
    out = done.stdout
    if done.returncode != 0 or "IFACES=" not in out:
        return False, False, (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
    ifaces = out.split("IFACES=", 1)[1].splitlines()[0].split(",")
    if ifaces != ["lo"]:
        return False, False, f"interfaces visible inside: {ifaces}"
    ro = "RO=1" in out
    if not ro:
        try:
            os.unlink("/.strands-art-ro-probe")
        except OSError:
            pass
    return True, ro and _has_mount_ns(prefix), ""


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


@functools.lru_cache(maxsize=4)
def detect_isolation(mode: str = "auto", probe_timeout_s: float = 20.0) -> Isolation:
    """Find the strongest isolation this machine allows (probed once per ``mode``, cached).

    Args:
        mode: "auto" (best available, else none), "netns" (raise if unavailable) or "none".
            The environment variable ``STRANDS_ART_ISOLATION`` overrides "auto".
        probe_timeout_s: seconds allowed for one probe.

    Returns:
        The chosen :class:`Isolation`.

    Raises:
        ValueError: unknown mode.
        RuntimeError: mode "netns" but no network namespace could be created.
    """
    if mode == "auto":
        mode = os.environ.get("STRANDS_ART_ISOLATION", "auto")
    if mode not in ("auto", "netns", "none"):
        raise ValueError(f"isolation mode must be 'auto', 'netns' or 'none', got {mode!r}")
    if mode == "none":
        return Isolation("none", reason="disabled by configuration")
    unshare = shutil.which("unshare")
    if unshare is None or not sys.platform.startswith("linux"):
        why = "unshare(1) not found" if sys.platform.startswith("linux") else f"platform {sys.platform}"
        return _fallback(mode, why)
    user = () if os.geteuid() == 0 else ("--map-root-user",)
    failures: list[str] = []
    for flags in _CANDIDATES:
        prefix = (unshare, *user, *flags, "--")
        ok, ro, detail = _probe(prefix, probe_timeout_s)
        if ok:
            iso = Isolation(
                "netns",
                prefix=prefix,
                pid_namespace="--pid" in flags,
                readonly_root=ro,
                reason="" if ro else "filesystem not read-only: mount namespace unavailable",
            )
            logger.info("command isolation: %s", iso.description)
            return iso
        failures.append(f"{' '.join(flags)}: {detail}")
    return _fallback(mode, "unshare failed (" + "; ".join(failures) + ")")


def _fallback(mode: str, why: str) -> Isolation:
    if mode == "netns":
        raise RuntimeError(f"network isolation requested but unavailable: {why}")
    logger.warning("command isolation unavailable, commands run with network access: %s", why)
    return Isolation("none", reason=why)
