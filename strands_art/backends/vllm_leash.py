"""Run a command and take its whole process group down when the parent that started it dies.

``python vllm_leash.py -- CMD ARGS...`` (run by :class:`~strands_art.backends.vllm_server.VLLMServer`
with the caller's own Python, as the leader of a new process group): starts ``CMD`` in this
process group, then reads its own stdin, a pipe whose write end only the parent holds. The read
returns at end of file, which happens when the parent closes the pipe or dies in any way, SIGKILL
included (the kernel closes a dead process's descriptors). Then every process of the group is
killed (SIGKILL): the vLLM API server and the engine core and worker processes it spawned, which
otherwise outlive a killed ``strands-art train`` (measured: a SIGKILLed api_server leaves its
``VLLM::EngineCore`` and ``VLLM::Worker``, ~7 GiB, running) and would be started a second time by
``--resume``.

Exits with ``CMD``'s exit status when ``CMD`` exits by itself (a signal's death as 128 + signal;
127 when it cannot be started). Started outside a new session it makes one first, so the kill
never reaches its caller's group. A SIGTERM to the group reaches ``CMD``; the leash waits for it.
Not covered: processes ``CMD`` leaves behind when it exits by itself (``VLLMServer.stop`` kills them).
Standard library only, run as a script: it imports nothing of strands_art.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading


def _kill_group_at_eof() -> None:
    try:
        while os.read(0, 65536):  # nothing is ever written; EOF = the parent is gone
            pass
    except OSError:
        pass
    os.killpg(0, signal.SIGKILL)


def main(argv: list[str]) -> int:
    """Run ``argv`` after ``--``; returns its exit status (never returns once stdin closes)."""
    if not argv or argv[0] != "--" or len(argv) < 2:
        print("usage: vllm_leash.py -- CMD [ARGS...]", file=sys.stderr)
        return 2
    if os.getpgrp() != os.getpid():
        os.setsid()  # lead a group of our own: the kill at EOF must not reach the caller's group
    try:
        child = subprocess.Popen(argv[1:], stdin=subprocess.DEVNULL)
    except OSError as exc:
        print(f"vllm_leash.py: cannot run {argv[1]!r}: {exc}", file=sys.stderr)
        return 127
    # a SIGTERM to the group (VLLMServer.stop) is for CMD: the leash outlives it until CMD has
    # shut down, so the caller's wait gives CMD its grace period (a handler, not SIG_IGN, which
    # an exec'd child would inherit; set after the child started)
    signal.signal(signal.SIGTERM, lambda *_: None)
    threading.Thread(target=_kill_group_at_eof, daemon=True).start()
    rc = child.wait()
    return rc if rc >= 0 else 128 - rc


if __name__ == "__main__":
    status = main(sys.argv[1:])
    sys.stderr.flush()
    os._exit(status)  # not sys.exit: the watcher thread is blocked in read(0)
