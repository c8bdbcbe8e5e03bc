"""Start a process inside a :class:`~.bwrap.Sandbox` (or, opted out, without one) and end it.

A sandboxed process starts in its own memory cgroup (:mod:`.memcg`, where the machine allows
it). Every process starts in its own session (process group); on timeout, and again after it ends,
the whole group gets SIGKILL. Inside a sandbox ``bwrap --die-with-parent`` plus the PID namespace
finish the job: when ``bwrap`` dies, the kernel kills every process of the sandbox, including
ones that called ``setsid`` or double-forked. Without a sandbox (``sandbox=None``, the explicit
opt-out) the environment is still cut to the allow-list and the group is still killed, but
nothing else is confined.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO

from .bwrap import Sandbox, allowed_env
from .memcg import CommandCgroup, command_cgroup


def kill_group(pid: int) -> None:
    """SIGKILL the process group ``pid`` leads; gone already is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


@contextlib.contextmanager
def prepared(
    sandbox: Sandbox | None, argv: Sequence[str], *, cwd: str | os.PathLike[str], env: Mapping[str, str]
) -> Iterator[tuple[list[str], tuple[int, ...], dict[str, str], str]]:
    """``(host argv, pass_fds, host env, host cwd)`` for running ``argv`` in ``sandbox``.

    Raises:
        SandboxError: the sandbox's tools are missing.
    """
    if sandbox is None:
        yield list(argv), (), allowed_env(env), os.fspath(cwd)
        return
    with sandbox.launch(argv, cwd=cwd, env=env) as (host_argv, fds):
        # bwrap itself gets only a PATH; the command's variables travel as --setenv.
        yield host_argv, fds, {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin"}, "/"


async def run_async(
    sandbox: Sandbox | None,
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str],
    env: Mapping[str, str],
    timeout_s: float,
    on_output: Callable[[bytes], None],
    pipe_grace_s: float = 2.0,
) -> tuple[int | None, bool]:
    """Run ``argv`` with stdin closed and stdout+stderr merged into ``on_output`` chunks.

    Returns:
        ``(exit code or None on timeout, timed_out)``.

    Raises:
        ValueError: ``timeout_s`` <= 0.
        SandboxError / OSError: the process could not be started.
    """
    if not timeout_s > 0:
        raise ValueError(f"timeout must be positive, got {timeout_s}")
    with _cgroup(sandbox) as cgroup:
        with prepared(sandbox, argv, cwd=cwd, env=env) as (host_argv, fds, host_env, host_cwd):
            proc = await asyncio.create_subprocess_exec(
                *(cgroup.wrap(host_argv) if cgroup else host_argv),
                cwd=host_cwd,
                env=host_env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
                pass_fds=fds,
            )
        assert proc.stdout is not None
        stdout = proc.stdout

        async def pump() -> None:
            while chunk := await stdout.read(65536):
                on_output(chunk)

        reader = asyncio.create_task(pump())
        timed_out = False
        try:
            await asyncio.wait_for(proc.wait(), timeout=timeout_s)
        except TimeoutError:
            timed_out = True
        finally:
            kill_group(proc.pid)  # leftovers die with the command, finished or not (also on cancel)
            if proc.returncode is None:
                await proc.wait()
        try:
            await asyncio.wait_for(reader, timeout=pipe_grace_s)
        except TimeoutError:
            pass  # a process that escaped the group still holds the pipe: do not wait for it
        return (None if timed_out else proc.returncode), timed_out


def run_sync(
    sandbox: Sandbox | None,
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str],
    env: Mapping[str, str],
    timeout_s: float,
    stdout: IO[bytes] | int = subprocess.DEVNULL,
    grace_s: float = 5.0,
) -> tuple[int | None, bool]:
    """Blocking :func:`run_async`: output goes to ``stdout`` (a file or DEVNULL).

    On timeout the group gets SIGTERM, then SIGKILL after ``grace_s``.

    Returns:
        ``(exit code or None on timeout, timed_out)``.
    """
    if not timeout_s > 0:
        raise ValueError(f"timeout must be positive, got {timeout_s}")
    with _cgroup(sandbox) as cgroup:
        with prepared(sandbox, argv, cwd=cwd, env=env) as (host_argv, fds, host_env, host_cwd):
            proc = subprocess.Popen(
                cgroup.wrap(host_argv) if cgroup else host_argv,
                cwd=host_cwd,
                env=host_env,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=fds,
            )
        try:
            return proc.wait(timeout=timeout_s), False
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
            return None, True
        finally:
            kill_group(proc.pid)
            if proc.returncode is None:
                proc.wait()


def _cgroup(sandbox: Sandbox | None) -> contextlib.AbstractContextManager[CommandCgroup | None]:
    """The command's memory cgroup (:mod:`.memcg`); none without a sandbox (the opt-out)."""
    return contextlib.nullcontext() if sandbox is None else command_cgroup(sandbox.limits.memory_bytes)
