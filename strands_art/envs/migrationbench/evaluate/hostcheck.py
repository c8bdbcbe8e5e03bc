"""Tell a scoring build that failed because the host could not fork from one the evaluated code broke.

A build whose processes cannot be created (``fork``/``pthread_create`` failing with ``EAGAIN`` or
``ENOMEM``: a host out of processes or memory) fails for a reason that is not the repository's,
and by the rule of :mod:`.evalguard` such a failure is retried and, if it persists, not scored.
But the evaluated code can also exhaust its own sandbox's limits (a test that starts threads
until the uid's process limit), and a test can print the same messages. So the evaluator
(:func:`.evaluator.evaluate`) treats a build whose output shows a fork failure
(:func:`fork_failed`) like this: it runs that build once more; if the second run shows one too,
it asks the host whether it can start processes *now* (:func:`host_can_fork`: a fresh sandbox
starting :data:`PROBE_PROCESSES` processes). If the host cannot, the evaluation raises
:class:`HostForkFailure` (an ``OSError`` with ``EAGAIN``: retried once, then not scored); if it
can, the failure was the build's own and is scored like any failed build.
"""

from __future__ import annotations

import errno
import logging
import re
from pathlib import Path

from strands_art.envs.migrationbench.maven.maven import MavenResult
from strands_art.envs.sandbox import Identity, Sandbox, SandboxError, run_sync

logger = logging.getLogger(__name__)

#: What the JVM, the shell and bubblewrap print when a process or thread cannot be created.
FORK_FAILURE = re.compile(
    r"unable to create (?:new )?native thread"
    r"|pthread_create failed \((?:EAGAIN|ENOMEM)\)"
    r"|fork: (?:retry: )?(?:Resource temporarily unavailable|Cannot allocate memory)"
    r"|: Cannot fork\b"
    r"|Cannot run program [^\n]{0,300}error=(?:11|12),"
    r"|There is insufficient memory for the Java Runtime Environment"
    r"|bwrap: [^\n]{0,200}(?:Resource temporarily unavailable|Cannot allocate memory)"
)
#: Processes the probe starts at once (a host that cannot start these cannot run a build).
PROBE_PROCESSES = 16


class HostForkFailure(OSError):
    """The host could not start the scoring build's processes, twice, and cannot start a probe's
    now: not the repository's doing (``errno`` EAGAIN: :func:`.evalguard.is_host_failure`)."""


def fork_failed(result: MavenResult) -> bool:
    """Whether a failed build's output (its tail and ``[ERROR]`` lines) shows a process or thread
    that could not be created. A build that passed or timed out is not one."""
    if result.ok or result.timed_out:
        return False
    return bool(
        FORK_FAILURE.search(result.output_tail) or any(FORK_FAILURE.search(x) for x in result.error_lines)
    )


def host_can_fork(identity: Identity, cwd: Path, unsafe: bool = False, timeout_s: float = 30.0) -> bool:
    """Start :data:`PROBE_PROCESSES` processes at once in a fresh sandbox for ``identity`` (or
    unconfined with ``unsafe``), in ``cwd``; True when all ran and the probe exited 0."""
    script = f"i=0; while [ $i -lt {PROBE_PROCESSES} ]; do /bin/true & i=$((i+1)); done; wait"
    try:
        sandbox = None if unsafe else Sandbox(identity, writable=(cwd,))
        code, timed_out = run_sync(sandbox, ["/bin/sh", "-c", script], cwd=cwd, env={}, timeout_s=timeout_s)
    except (OSError, SandboxError) as exc:
        logger.warning("fork probe could not start: %s", exc)
        return False
    return code == 0 and not timed_out


def host_failure(what: str) -> HostForkFailure:
    """The error raised for ``what`` (a build name) when the host cannot fork."""
    return HostForkFailure(
        errno.EAGAIN,
        f"the {what} could not start its processes twice and the host cannot start {PROBE_PROCESSES} "
        "now (a host failure: retried, not scored)",
    )
