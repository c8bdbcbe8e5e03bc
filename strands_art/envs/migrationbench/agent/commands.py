"""Run one shell command for the agent: sandboxed, time-limited, with bounded output.

The command runs as ``bash -c COMMAND`` inside the workspace's
:class:`~strands_art.envs.sandbox.Sandbox` (bubblewrap: unprivileged uid, no network, read-only
system, only the workspace writable, allow-listed environment, resource limits), in its own
session, with stdin closed and stdout+stderr merged. On timeout, and after it ends, the whole
process group gets SIGKILL, and with it the sandbox's PID namespace (every process the command
started). Output is kept as head + tail around a marker that says how many bytes were dropped.

Also here: :func:`write_mvn_wrapper`, a ``mvn`` script for a bin directory put first on PATH,
so every Maven call the model makes runs batch-mode, colourless, with the offline settings.
(Maven 3.8 ignores ``MAVEN_ARGS``; a wrapper works with every version.)
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from strands_art.envs.migrationbench.config import RolloutConfig
from strands_art.envs.migrationbench.controlseq import strip_control_sequences
from strands_art.envs.sandbox import Sandbox, run_async
from strands_art.envs.sandbox.bwrap import DEFAULT_PATH

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S: float = RolloutConfig.command_timeout
"""Seconds per shell command unless given (:class:`.config.RolloutConfig`, the single home)."""
DEFAULT_MAX_OUTPUT_BYTES: int = RolloutConfig.max_output_bytes
"""Shell output kept per command unless given, bytes (:class:`.config.RolloutConfig`)."""


# Non-interactive defaults: nothing may wait for a terminal or a pager.
_QUIET_ENV = {"PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0", "TERM": "dumb", "NO_COLOR": "1"}


class OutputBuffer:
    """Keeps the first ``head`` and last ``tail`` bytes of a stream, counting the rest.

    With ``limit`` bytes allowed, ``head = limit // 2`` and ``tail = limit - head``. If the
    stream fits in ``limit`` nothing is dropped and :meth:`text` returns it whole.
    """

    def __init__(self, limit: int) -> None:
        if limit < 2:
            raise ValueError(f"max output size must be at least 2 bytes, got {limit}")
        self.limit = limit
        self._head_cap = limit // 2
        self._tail_cap = limit - self._head_cap
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            if len(self._tail) > 2 * self._tail_cap:  # trim now and then, not on every chunk
                del self._tail[: len(self._tail) - self._tail_cap]

    @property
    def dropped(self) -> int:
        """Bytes left out of :meth:`text` (0 when everything fits)."""
        return max(0, self.total - self.limit)

    def text(self) -> str:
        """The kept output as UTF-8 text (invalid bytes replaced), with a marker if truncated."""
        if self.total <= self.limit:
            return (bytes(self._head) + bytes(self._tail)).decode("utf-8", errors="replace")
        tail = bytes(self._tail[-self._tail_cap :])
        marker = f"\n[... {self.dropped} bytes of output truncated ...]\n"
        return self._head.decode("utf-8", errors="replace") + marker + tail.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class CommandResult:
    """Outcome of :func:`run_command`.

    Attributes:
        command: the shell text run.
        exit_code: the shell's exit status; None when the command timed out.
        output: merged stdout+stderr, truncated (see :class:`OutputBuffer`), terminal control
            sequences removed (:func:`.controlseq.strip_control_sequences`).
        timed_out: the time limit was hit and the process group was killed.
        duration_s: wall seconds from start to the end of output collection.
        total_bytes / dropped_bytes: output produced / left out.
    """

    command: str
    exit_code: int | None
    output: str
    timed_out: bool
    duration_s: float
    total_bytes: int
    dropped_bytes: int


def sandbox_env(
    env: Mapping[str, str] | None = None, extra_path: Sequence[str | os.PathLike[str]] = ()
) -> dict[str, str]:
    """The environment a command is given: non-interactive defaults, ``env``, and PATH = the
    ``extra_path`` directories, then the system's. Nothing of this process's environment is
    passed on (the sandbox further keeps only allow-listed names, see
    :data:`strands_art.envs.sandbox.bwrap.ENV_ALLOWED`)."""
    out = dict(_QUIET_ENV)
    if env:
        out.update(env)
    out["PATH"] = os.pathsep.join([*(os.fspath(p) for p in extra_path), DEFAULT_PATH])
    return out


async def run_command(
    command: str,
    *,
    cwd: str | os.PathLike[str],
    sandbox: Sandbox | None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    env: Mapping[str, str] | None = None,
    extra_path: Sequence[str | os.PathLike[str]] = (),
) -> CommandResult:
    """Run ``command`` with ``bash -c`` in ``cwd`` and collect its bounded output.

    Args:
        command: shell text.
        cwd: working directory (the workspace root; a path the sandbox binds).
        sandbox: the workspace's sandbox; None only for the explicit ``--unsafe-no-sandbox``
            opt-out (the command then runs unconfined, with the allow-listed environment).
        timeout_s: seconds before the process group is killed (must be > 0).
        max_output_bytes: output bytes kept (head + tail).
        env: variables for the command (e.g. ``MVN_LOCAL_REPO``), filtered by the allow-list.
        extra_path: directories put first on PATH (e.g. the ``mvn`` wrapper's bin dir).

    Returns:
        A :class:`CommandResult`; a non-zero exit is a result, not an exception.

    Raises:
        ValueError: ``timeout_s`` <= 0 or ``max_output_bytes`` < 2.
        SandboxError / OSError: the sandbox or ``bash`` could not be started.
    """
    if not timeout_s > 0:
        raise ValueError(f"timeout must be positive, got {timeout_s}")
    buf = OutputBuffer(max_output_bytes)
    start = time.monotonic()
    exit_code, timed_out = await run_async(
        sandbox,
        ["bash", "-c", command],
        cwd=cwd,
        env=sandbox_env(env, extra_path),
        timeout_s=timeout_s,
        on_output=buf.feed,
    )
    return CommandResult(
        command=command,
        exit_code=exit_code,
        # terminal control sequences removed (Debian's Maven prints colour codes even with
        # -Dstyle.color=never when piped; hostile output may hold any ECMA-48 sequence)
        output=strip_control_sequences(buf.text()),
        timed_out=timed_out,
        duration_s=time.monotonic() - start,
        total_bytes=buf.total,
        dropped_bytes=buf.dropped,
    )


def write_mvn_wrapper(
    bin_dir: str | os.PathLike[str],
    *,
    settings: str | os.PathLike[str] | None = None,
    extra_args: Sequence[str] = (),
    real_mvn: str | None = None,
    prelude: str = "",
) -> Path:
    """Write ``<bin_dir>/mvn``: runs the real Maven with ``-B -Dstyle.color=never [-s settings]``.

    Args:
        bin_dir: directory to put first on PATH (created if missing).
        settings: a ``settings.xml`` (e.g. the offline one), passed with ``-s``.
        extra_args: more fixed arguments (e.g. ``-Dmaven.repo.local=...``).
        real_mvn: the Maven executable; default ``mvn`` found on PATH outside ``bin_dir``.
        prelude: shell lines run before Maven (e.g. re-seeding the offline repository).

    Returns:
        The wrapper's path.

    Raises:
        FileNotFoundError: no Maven found.
    """
    bin_path = Path(bin_dir)
    bin_path.mkdir(parents=True, exist_ok=True)
    if real_mvn is None:
        search = os.pathsep.join(
            p
            for p in os.environ.get("PATH", "").split(os.pathsep)
            if p and Path(p).resolve() != bin_path.resolve()
        )
        real_mvn = shutil.which("mvn", path=search)
        if real_mvn is None:
            raise FileNotFoundError("mvn not found on PATH; install Maven (see docs/migrationbench.md)")
    args = ["-B", "-Dstyle.color=never"]
    if settings is not None:
        args += ["-s", os.fspath(settings)]
    args += list(extra_args)
    script = (
        f'#!/bin/sh\n{prelude}exec {shlex.quote(real_mvn)} {" ".join(shlex.quote(a) for a in args)} "$@"\n'
    )
    wrapper = bin_path / "mvn"
    wrapper.write_text(script)
    wrapper.chmod(0o755)
    return wrapper
