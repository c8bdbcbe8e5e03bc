# ruff: noqa: F811 - the run_dir fixture is imported from test_view_api
"""The viewer holds (issue 48 part 2): no host file served through a symlink swapped in at any
component (also driven by a real agent from its live workspace during a real ``migrate`` run),
no answer to another origin (DNS rebinding), no hang on a FIFO, no slowloris, no re-parse of a
huge run-level file. Through the real server (:func:`strands_art.view.server.start_server`, the
one ``strands-art view`` runs) and the real ``strands-art view`` command."""

from __future__ import annotations

import asyncio
import errno
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strands_art.view.files import NotRegular, Refused, RunFiles, TooLarge, split_rel
from strands_art.view.reader import RUN_FILE_LIMIT, RunView
from strands_art.view.server import HostCheck, start_server
from tests.test_view_api import run_dir  # noqa: F401 - the fixture: a copy of the recorded run

SECRET = "ROOT-ONLY-SECRET-7f3a"


class Viewer:
    """The real server (:func:`start_server`) on a free loopback port, in its own thread."""

    def __init__(self, root: Path, **kw: Any) -> None:
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def main() -> None:
            self.runner = await start_server(RunView(root), "127.0.0.1", 0, **kw)
            self.port = self.runner.addresses[0][1]
            self.stop = asyncio.Event()
            ready.set()
            await self.stop.wait()
            await self.runner.cleanup()

        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(main(),), daemon=True)
        self.thread.start()
        assert ready.wait(30)

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict]:
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            c.request("GET", path, headers=headers or {})
            r = c.getresponse()
            return r.status, json.loads(r.read())
        finally:
            c.close()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(30)


@pytest.fixture
def viewer(run_dir: Path):
    v = Viewer(run_dir)
    yield v
    v.close()


def _secret_dir(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    os.chmod(outside / "secret.txt", 0o600)
    return outside


# ---------------------------------------------------------------------------------------- walk
def test_a_symlink_at_any_component_is_refused(tmp_path: Path) -> None:
    """A symlink as the file, as a directory on the way, or pointing inside the run: Refused
    (403), never followed; ``..`` and absolute paths too; a FIFO, a socket, a directory:
    NotRegular (404); a NUL byte or a path over PATH_MAX: ValueError (400)."""
    root = tmp_path / "run"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.txt").write_text("inside\n")
    outside = _secret_dir(tmp_path)
    (root / "a" / "up").symlink_to(outside)
    (root / "a" / "in").symlink_to(root / "a" / "b")  # even a link that stays inside
    (root / "link.txt").symlink_to(outside / "secret.txt")
    os.mkfifo(root / "fifo")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(root / "sock"))
        files = RunFiles(root)
        assert files.read("a/b/f.txt", 100) == b"inside\n"
        assert files.read("./a//b/./f.txt", 100) == b"inside\n"
        for rel in ("a/up/secret.txt", "a/in/f.txt", "link.txt", "a/up"):
            with pytest.raises(Refused, match="symbolic link"):
                files.open(rel)
        for rel in ("../outside/secret.txt", "a/../../outside/secret.txt", "/etc/passwd", "", "."):
            with pytest.raises(Refused, match="outside the run directory"):
                files.open(rel)
        for rel, kind in (
            ("fifo", "a FIFO"),
            ("sock", "a socket"),
            ("a", "a directory"),
            ("nope", "no such"),
        ):
            with pytest.raises(NotRegular, match=kind):
                files.open(rel)
        with pytest.raises(NotRegular, match="'f.txt' is a regular file, not a directory"):
            files.open("a/b/f.txt/x")
        for rel in ("a\x00b", "a/" * 2100):
            with pytest.raises(ValueError, match="not a usable path"):
                files.open(rel)
        assert files.size("link.txt") == -1 and files.size("fifo") == -1 and files.size("a/b/f.txt") == 7
        assert (
            files.exists("link.txt") and not files.is_file("link.txt") and not files.exists("a/up/secret.txt")
        )


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["a", "..", ".", "", "up", "b", "f.txt", "/"]), min_size=1, max_size=6))
def test_no_path_reads_outside(tmp_path_factory: pytest.TempPathFactory, parts: list[str]) -> None:
    """Property: whatever path is asked, either a file under the run directory is read (never
    the secret) or one of the documented errors is raised."""
    base = tmp_path_factory.mktemp("walk")
    root = base / "run"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.txt").write_text("inside\n")
    (root / "a" / "up").symlink_to(_secret_dir(base))
    (root / "up").symlink_to(base / "outside")
    files = RunFiles(root)
    for rel in ("/".join(parts), "a/" + "/".join(parts), "a/b/" + "/".join(parts)):
        try:
            data = files.read(rel, 1000)
        except (Refused, NotRegular, ValueError):
            continue
        assert SECRET.encode() not in data and data == b"inside\n"


def test_cached_parses_once_per_change_and_refuses_huge_files_without_reading(tmp_path: Path) -> None:
    root = tmp_path / "run"
    root.mkdir()
    (root / "config.json").write_text('{"model": "a"}')
    files, calls = RunFiles(root), []

    def parse(data: bytes) -> Any:
        calls.append(len(data))
        return json.loads(data)

    assert [files.cached("config.json", 100, parse) for _ in range(3)] == [{"model": "a"}] * 3
    assert calls == [14]  # parsed once
    (root / "config.json").write_text('{"model": "bb"}')
    assert files.cached("config.json", 100, parse) == {"model": "bb"} and calls == [14, 15]
    (root / "config.json").write_bytes(b" " * 5000)
    for _ in range(3):
        with pytest.raises(TooLarge, match="5000 bytes, over the limit of 100 bytes"):
            files.cached("config.json", 100, parse)
    assert calls == [14, 15]  # a file over the limit is never read, let alone parsed


# ------------------------------------------------------------------------------- the server
def test_a_directory_swapped_for_a_symlink_serves_no_host_file(
    viewer: Viewer, run_dir: Path, tmp_path: Path
) -> None:
    """A thread swaps ``logs/d`` between a directory and a symlink to a root-only directory
    outside while the server is asked for ``logs/d/secret.txt`` 400 times: the inside file is
    served, the swapped state is 403 or 404, the host file never (before: the path was checked,
    then opened by name: served in about half of the requests)."""
    outside = _secret_dir(tmp_path)
    logs = run_dir / "logs"
    (logs / "real").mkdir()
    (logs / "real" / "secret.txt").write_text("decoy\n")
    (logs / "lnk").symlink_to(outside)
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            os.rename(logs / "real", logs / "d")
            os.rename(logs / "d", logs / "real")
            os.rename(logs / "lnk", logs / "d")
            os.rename(logs / "d", logs / "lnk")

    t = threading.Thread(target=swap)
    t.start()
    try:
        answers = [viewer.get("/api/file?path=logs/d/secret.txt") for _ in range(400)]
    finally:
        stop.set()
        t.join()
    texts = [body.get("text") for status, body in answers if status == 200]
    assert SECRET not in json.dumps(answers)
    assert set(texts) <= {"decoy\n"}
    assert {status for status, _ in answers} <= {200, 403, 404}
    (logs / "d").symlink_to(outside)  # the link state on its own: refused with its reason
    status, body = viewer.get("/api/file?path=logs/d/secret.txt")
    assert status == 403 and "'d' is a symbolic link" in body["error"]


def test_another_origin_gets_nothing(viewer: Viewer) -> None:
    """DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1 sends
    ``Host: evil.example:PORT``; a cross-origin page sends its ``Origin``: both 403 with
    nothing of the run. Loopback names and literals pass."""
    port = viewer.port
    for headers in (
        {"Host": f"evil.example:{port}"},
        {"Host": "evil.example"},
        {"Host": f"127.0.0.1.evil.example:{port}"},
        {"Host": f"127.0.0.1:{port}", "Origin": f"http://evil.example:{port}"},
        {"Host": f"127.0.0.1:{port}", "Origin": "null"},
    ):
        for path in ("/api/run", "/api/file?path=config.json", "/"):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("GET", path, headers=headers)
            r = c.getresponse()
            body = r.read().decode()
            c.close()
            assert r.status == 403, (headers, path)
            assert "not this viewer" in body or "not an address of this viewer" in body
            assert "qwen3" not in body and "rollouts" not in body
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "127.0.0.2", "LOCALHOST."):
        status, body = viewer.get("/api/run", {"Host": host, "Origin": f"http://{host}"})
        assert status == 200 and body["rollouts"] == 4


def test_host_check_rules() -> None:
    wild = HostCheck("0.0.0.0")
    assert wild.allows("192.168.1.20") and not wild.allows("evil.example")
    lan = HostCheck("192.168.1.20", frozenset({"box.lan"}))
    assert lan.allows("192.168.1.20") and lan.allows("box.lan") and lan.allows("::1")
    assert not lan.allows("192.168.1.21") and not lan.allows("evil.example")
    assert lan.problem("box.lan:8765", "http://box.lan:8765") is None
    assert "Origin" in (lan.problem("box.lan:8765", "http://evil.example") or "")


def test_slow_and_surplus_connections_are_closed(run_dir: Path) -> None:
    """60 connections that send half a request head and then wait (slowloris): those above the
    limit (20) are closed at once, the rest once the header timeout (0.5 s) passes; a normal
    request is answered afterwards (before: 300 such connections stayed open 60 s)."""
    v = Viewer(run_dir, header_timeout=0.5, max_connections=20)
    try:
        socks = []
        for _ in range(60):
            s = socket.create_connection(("127.0.0.1", v.port))
            s.sendall(b"GET /api/run HTTP/1.1\r\nHost: 127.0.0.1\r\nX-a: ")
            socks.append(s)
        for s in socks:
            s.settimeout(20)  # a bound for a hang, far above the 0.5 s the server waits
            try:
                assert s.recv(100) == b""  # closed by the server, nothing answered
            except ConnectionResetError:
                pass
            s.close()
        status, body = v.get("/api/run")
        assert status == 200 and body["rollouts"] == 4
    finally:
        v.close()


def test_fifos_and_huge_run_files_never_block(run_dir: Path, tmp_path: Path) -> None:
    """FIFOs in place of config.json, live.json, metrics.jsonl, results.jsonl and
    trajectories.jsonl: ``strands-art view`` starts (before: blocked on config.json) and every
    request answers, naming the files; a config.json over the limit is named, not parsed."""
    traj = run_dir / "trajectories" / "trajectories.jsonl"
    for rel in ("config.json", "live.json", "metrics.jsonl", "results.jsonl"):
        (run_dir / rel).unlink(missing_ok=True)
        os.mkfifo(run_dir / rel)
    traj.unlink()
    os.mkfifo(traj)
    proc = subprocess.Popen(
        [sys.executable, "-m", "strands_art.cli", "view", str(run_dir), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]  # before: never printed
        assert "strands-art view: 0 rollouts of" in line, (
            proc.stderr.read() if proc.poll() is not None else line
        )
        port = int(line.rsplit(":", 1)[1].split("/")[0])
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        got = {}
        for path in ("/api/metrics", "/api/run", "/api/live", "/api/rollouts"):
            c.request("GET", path)
            r = c.getresponse()
            assert r.status == 200, path
            got[path] = json.loads(r.read())
        c.close()
    finally:
        proc.terminate()
        proc.wait(30)
    problems = got["/api/run"]["problems"]
    assert got["/api/run"]["config"] is None and got["/api/live"]["inflight"] == []
    assert problems["unreadable_results_file"] == "a FIFO, not a regular file"
    assert problems["unreadable_trajectories_file"] == "a FIFO, not a regular file"
    assert got["/api/metrics"]["records"] == []
    assert got["/api/live"]["problems"]["unreadable_files"] == {
        "config.json": "a FIFO, not a regular file",
        "live.json": "a FIFO, not a regular file",
        "metrics.jsonl": "a FIFO, not a regular file",
    }
    # a config.json over the limit: named with its size, never parsed (RunFiles.cached)
    (run_dir / "config.json").unlink()
    with open(run_dir / "config.json", "wb") as f:
        f.write(b'{"pad": "')
        f.truncate(RUN_FILE_LIMIT + 10)
    view = RunView(run_dir)
    for _ in range(2):
        assert view.config() is None
        assert "over the limit of 4194304 bytes" in view.problems["unreadable_files"]["config.json"]


# --------------------------------------------------------------- through a real migrate run
SWAP = r"""
python3 - <<'EOF'
import os, time
os.mkdir("real"); open("real/secret.txt", "w").write("decoy\n")
os.symlink("OUTSIDE", "lnk")
open("SWAPPING", "w").close()
end = time.time() + 8
while time.time() < end:
    os.rename("real", "d"); os.rename("d", "real")
    os.rename("lnk", "d"); os.rename("d", "lnk")
os.remove("SWAPPING")
EOF
"""


@pytest.mark.skipif(shutil.which("mvn") is None, reason="the agent's tool env needs Maven")
def test_the_agent_swapping_its_workspace_under_a_watching_viewer(
    tmp_path: Path, qwen3, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """A real ``migrate`` run whose (scripted) agent swaps a directory of its live workspace
    with a symlink to a root-only host directory, in its sandbox, while ``strands-art view``
    serves the run and is asked for the file under that directory: the decoy is served, the
    host file never (before: served 80 times in a run)."""
    from support.migrate_script import tool_call_text

    from strands_art.backends.scripted import ScriptedBackend
    from strands_art.cli import build_parser
    from strands_art.envs.migrationbench.run.runner import main_from_args
    from strands_art.envs.migrationbench.tasks.tasks import RECORD_FIELDS

    monkeypatch.setenv("STRANDS_ART_MAVEN_OFFLINE", "0")
    outside = _secret_dir(tmp_path)
    task = tmp_path / "tasks" / "swap"
    (task / "repo").mkdir(parents=True)
    (task / "repo" / "ATTACK.sh").write_text(SWAP.replace("OUTSIDE", str(outside)))
    record: dict[str, Any] = dict.fromkeys(RECORD_FIELDS, 0)
    record.update(repo="tests/swap", base_commit="0" * 40, num_test_cases=1, license="Apache-2.0")
    (task / "task.json").write_text(json.dumps(record))

    def script(prompt_ids: list[int], params: Any, index: int) -> dict[str, Any]:
        if "<tool_response>" not in qwen3.decode(prompt_ids):
            return {"text": tool_call_text("shell", {"command": "bash ATTACK.sh; echo swapped"})}
        return {"text": "Done.<|im_end|>"}

    # workspaces live in the run directory only when the sandbox uid can reach it (pytest's
    # tmp_path is below a 0700 directory: there `workspaces` would be a symlink, refused whole)
    top = Path(tempfile.mkdtemp(prefix="strands-art-view-swap-"))
    os.chmod(top, 0o711)
    request.addfinalizer(lambda: shutil.rmtree(top, ignore_errors=True))
    run = top / "run"
    run.mkdir()
    viewer = Viewer(run)
    stop, answers = threading.Event(), []

    def watch() -> None:
        while not stop.is_set():
            swapping = (
                list((run / "workspaces").glob("*/repo/SWAPPING")) if (run / "workspaces").is_dir() else []
            )
            if not swapping:
                time.sleep(0.05)
                continue
            rel = swapping[0].parent.relative_to(run) / "d" / "secret.txt"
            answers.append(viewer.get(f"/api/file?path={rel}"))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        args = build_parser().parse_args(
            ["migrate", "--no-plot", "--max-turns", "3", "--tasks-dir", str(tmp_path / "tasks"),
             "--tasks", "swap", "--run-dir", str(run), "--concurrency", "1"]
        )  # fmt: skip
        backend = ScriptedBackend(qwen3, script)
        assert main_from_args(args, backend_factory=lambda a: (backend, qwen3)) == 0
    finally:
        stop.set()
        watcher.join()
        viewer.close()
    [rec] = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert rec["stop_reason"] == "completed" and rec["tool_stats"]["calls"] == {"shell": 1}
    texts = [body.get("text") for status, body in answers if status == 200]
    assert SECRET not in json.dumps(answers)
    assert len(answers) > 20 and "decoy\n" in texts  # the viewer did read inside the live workspace
    assert {status for status, _ in answers} <= {200, 403, 404}
    assert any(status == 403 and "symbolic link" in body["error"] for status, body in answers)


def test_split_rel_refuses_what_leaves() -> None:
    assert split_rel("a/./b//c") == ["a", "b", "c"]
    for rel in ("", "/", "/a", "a/../b", ".."):
        with pytest.raises(Refused) as e:
            split_rel(rel)
        assert e.value.errno == errno.EACCES
