"""The vLLM server's leash (strands_art/backends/vllm_leash.py): the process group a
``VLLMServer`` starts dies with the process that started it, SIGKILL included, and a server that
exits by itself is still reported with its exit status. Real processes (``sleep`` stands in for the
server and the engine processes it spawns); no vLLM needed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from strands_art.backends.vllm_leash import main as leash_main
from strands_art.backends.vllm_server import LEASH, VLLMServer, VLLMServerError


def members(pgid: int) -> list[int]:
    """The live (non-zombie) processes of process group ``pgid``."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(entry))
    return out


def group_alive(pgid: int) -> bool:
    return bool(members(pgid))


def wait_until(cond, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


# a parent that starts the leash over a "server" that spawns a grandchild (as the API server
# spawns the engine core and its worker), prints the group id, then waits to be killed
PARENT = textwrap.dedent(
    """
    import subprocess, sys, time
    server = "import subprocess, time; subprocess.Popen(['sleep', '600']); time.sleep(600)"
    p = subprocess.Popen([sys.executable, sys.argv[1], "--", sys.executable, "-c", server],
                         stdin=subprocess.PIPE, start_new_session=True)
    print(p.pid, flush=True)
    time.sleep(600)
    """
)


def test_sigkill_of_the_parent_takes_the_whole_group_down():
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(LEASH)], stdout=subprocess.PIPE, text=True)
    pgid = int(parent.stdout.readline())
    # the server and its grandchild are up in the group (leash + server + sleep)
    assert wait_until(lambda: len(members(pgid)) >= 3)
    assert group_alive(pgid)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert wait_until(lambda: not group_alive(pgid)), f"group {pgid} outlived its parent: {members(pgid)}"


def test_the_leash_passes_the_exit_status_through_and_refuses_a_bad_command_line(capsys):
    p = subprocess.Popen([sys.executable, str(LEASH), "--", sys.executable, "-c", "raise SystemExit(7)"],
                         stdin=subprocess.PIPE, start_new_session=True)  # fmt: skip
    assert p.wait(timeout=60) == 7  # the pipe still open: the child's own exit
    p.stdin.close()
    assert leash_main(["sleep", "1"]) == 2
    assert "usage: vllm_leash.py -- CMD" in capsys.readouterr().err


def test_a_server_that_exits_while_starting_is_reported_and_leaves_nothing(tmp_path):
    # .venv's Python has no vllm: the server exits at once; the error names the exit and the log
    server = VLLMServer(tmp_path, "m", python=sys.executable, startup_timeout_s=60, log_path=tmp_path / "log")
    with pytest.raises(VLLMServerError, match="exited with code 1 while starting") as err:
        server.start()
    assert "No module named 'vllm'" in str(err.value)
    assert not group_alive(server.process.pid)
    assert server.process.stdin.closed


def test_sigterm_gives_the_command_its_grace_and_a_missing_command_is_one_line():
    # CMD takes 1 s to shut down on SIGTERM; the leash must outlive it and report its status
    slow = "import signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *_: (time.sleep(1), sys.exit(5)))\ntime.sleep(60)"
    p = subprocess.Popen([sys.executable, str(LEASH), "--", sys.executable, "-c", slow],
                         stdin=subprocess.PIPE, start_new_session=True)  # fmt: skip
    assert wait_until(lambda: len(members(p.pid)) >= 2)
    time.sleep(0.5)  # the child's handler is installed
    t0 = time.monotonic()
    os.killpg(p.pid, signal.SIGTERM)
    assert p.wait(timeout=30) == 5 and time.monotonic() - t0 >= 0.9
    p.stdin.close()
    q = subprocess.run([sys.executable, str(LEASH), "--", "/nonexistent/cmd"], stdin=subprocess.PIPE,
                       capture_output=True, text=True, start_new_session=True, timeout=60)  # fmt: skip
    assert q.returncode == 127 and q.stderr.startswith("vllm_leash.py: cannot run '/nonexistent/cmd'")
