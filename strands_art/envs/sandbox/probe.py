"""Fail closed: prove the sandbox works here before any command runs in it.

:func:`require_sandbox` runs a probe inside a fresh :class:`~.bwrap.Sandbox` and checks what it
promises: an unprivileged uid outside (when we are root), no capabilities, only a loopback
interface, a read-only root, a writable bind, a clean environment, and the limits; it reports
whether commands get a memory cgroup (``MEMCG=v1|v2|none``, :mod:`.memcg`). Any failure
raises :class:`SandboxUnavailable` naming what is missing and how to install it. A success is
remembered for the process; a failure never is, so the next call probes again (a transient fork
failure cannot switch isolation off for the rest of a run).
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

from .bwrap import Sandbox, SandboxError, find_tool
from .memcg import memory_cgroups
from .policy import allocate_identity, chown_tree, release_identity
from .process import run_sync

logger = logging.getLogger(__name__)

INSTALL_HINT = (
    "install bubblewrap and util-linux (Debian: `apt-get install bubblewrap util-linux`, or run "
    "scripts/setup-system.sh); the kernel must allow user namespaces "
    "(sysctl user.max_user_namespaces > 0, kernel.unprivileged_userns_clone=1 where it exists). "
    "To run without a sandbox anyway, pass --unsafe-no-sandbox (agent commands and builds then "
    "run with your privileges)"
)

_PROBE = r"""
set -u
echo "UID=$(id -u)"
grep '^CapEff' /proc/self/status | tr -d '\t'
echo "IFACES=$(cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' ' | tr '\n' ,)"
if touch /probe-root 2>/dev/null; then echo ROOT=rw; else echo ROOT=ro; fi
if echo ok > "$1/probe-bind" 2>/dev/null; then echo BIND=rw; else echo BIND=ro; fi
echo "ENV=$(env | cut -d= -f1 | sort | tr '\n' ,)"
"""

_verified: set[int] = set()  # effective uids for which a probe passed
_lock = threading.Lock()


class SandboxUnavailable(SandboxError):
    """The sandbox cannot be set up here; the message says why and how to fix it."""


def _fail(what: str) -> SandboxUnavailable:
    return SandboxUnavailable(f"the command sandbox is not available: {what}. Fix: {INSTALL_HINT}")


def probe_sandbox(timeout_s: float = 30.0) -> dict[str, str]:
    """Run the probe once (never cached) and return what it saw, keyed as printed.

    Raises:
        SandboxUnavailable: a tool is missing, the sandbox does not start, or a promise fails.
    """
    if not sys.platform.startswith("linux"):
        raise _fail(f"platform {sys.platform} (bubblewrap needs Linux)")
    for tool in ("bwrap", "setpriv", "prlimit"):
        if find_tool(tool) is None:
            raise _fail(f"`{tool}` not found")
    identity = allocate_identity()
    tmp = Path(tempfile.mkdtemp(prefix="strands-art-probe-"))
    try:
        chown_tree(tmp, identity)
        sandbox = Sandbox(identity, writable=(tmp,))
        log = tmp.parent / f"{tmp.name}.log"
        with open(log, "w+b") as out:
            try:
                code, timed_out = run_sync(
                    sandbox,
                    ["/bin/sh", "-c", _PROBE, "probe", str(tmp)],
                    cwd=tmp,
                    env={"HOME": str(tmp), "SECRET_PROBE": "x"},
                    timeout_s=timeout_s,
                    stdout=out,
                )
            except (OSError, SandboxError) as exc:
                raise _fail(f"cannot start bwrap ({exc})") from exc
            out.seek(0)
            text = out.read().decode("utf-8", errors="replace")
        log.unlink(missing_ok=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        release_identity(identity)
    if timed_out or code != 0:
        last = text.strip().splitlines()[-1:] or [f"exit code {code}"]
        raise _fail(f"bwrap failed: {last[0]}")
    seen = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    checks = {
        "unprivileged uid": seen.get("UID") not in (None, "0") or not identity.drop,
        "no capabilities": "CapEff:0000000000000000" in text,
        "loopback only": seen.get("IFACES") == "lo,",
        "read-only root": seen.get("ROOT") == "ro",
        "writable workspace": seen.get("BIND") == "rw",
        "clean environment": "SECRET_PROBE" not in seen.get("ENV", "?"),
    }
    broken = [name for name, ok in checks.items() if not ok]
    if broken:
        raise _fail(f"the probe saw {', '.join(broken)} fail ({text.strip()!r})")
    cgroups = memory_cgroups()  # the probe ran in one when there are (memcg: the gap otherwise)
    seen["MEMCG"] = f"v{cgroups.version}" if cgroups.base is not None else "none"
    return seen


def require_sandbox(timeout_s: float = 30.0) -> None:
    """Probe the sandbox unless a probe already passed in this process (as this uid).

    Raises:
        SandboxUnavailable: see :func:`probe_sandbox`. Not remembered: the next call probes again.
    """
    key = os.geteuid()
    with _lock:
        if key in _verified:
            return
    probe_sandbox(timeout_s)
    with _lock:
        _verified.add(key)
    logger.info("command sandbox verified (bubblewrap)")
