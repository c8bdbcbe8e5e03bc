"""Shell and file-editor tools: confinement, timeouts, truncation, sandbox, editor commands.

Covers strands_art/envs/migrationbench/{tools,commands,editor}.py (the escape attempts against
the sandbox itself are in tests/test_sandbox_attacks.py).
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from strands_art.envs.migrationbench.agent.commands import OutputBuffer, run_command, write_mvn_wrapper
from strands_art.envs.migrationbench.agent.toolenv import workspace_sandbox
from strands_art.envs.migrationbench.agent.tools import ToolStats, describe_sandbox, invokes_maven, make_tools
from strands_art.envs.migrationbench.workspace import Workspace
from strands_art.envs.sandbox import SandboxUnavailable, require_sandbox

try:
    require_sandbox()
    SANDBOX_OK = True
except SandboxUnavailable:
    SANDBOX_OK = False
needs_sandbox = pytest.mark.skipif(not SANDBOX_OK, reason="bubblewrap sandbox unavailable here")

POM = "<project>\n  <properties>\n    <maven.compiler.source>1.8</maven.compiler.source>\n  </properties>\n</project>\n"


@pytest.fixture
def ws(tmp_path: Path):
    repo = tmp_path / "task" / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "pom.xml").write_text(POM)
    (repo / ".hidden").write_text("h")
    (repo / "src" / "A.java").write_text("class A {\n  int x = 1;\n  int y = 1;\n}\n")
    w = Workspace.for_task(tmp_path / "task")
    yield w
    w.cleanup()


def _text(result: dict) -> str:
    return result["content"][0]["text"]


def _pids_with(marker: str) -> list[int]:
    """PIDs (host view) whose command line contains ``marker``."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker in (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    found.append(int(d.name))
            except OSError:
                pass
    return found


# ---------------------------------------------------------------- output truncation
def test_output_buffer_keeps_exact_head_and_tail() -> None:
    data = bytes(range(256)) * 4  # 1024 bytes
    buf = OutputBuffer(100)
    for i in range(0, len(data), 7):  # odd chunk sizes
        buf.feed(data[i : i + 7])
    assert buf.total == 1024 and buf.dropped == 924
    text = buf.text()
    head, rest = text.split("\n[... 924 bytes of output truncated ...]\n")
    assert head == data[:50].decode("utf-8", errors="replace")
    assert rest == data[-50:].decode("utf-8", errors="replace")


def test_output_buffer_exact_fit_is_untouched() -> None:
    buf = OutputBuffer(10)
    buf.feed(b"0123456789")
    assert buf.text() == "0123456789" and buf.dropped == 0
    buf.feed(b"A")
    assert buf.dropped == 1
    assert buf.text() == "01234\n[... 1 bytes of output truncated ...]\n6789A"


async def test_command_output_truncated_to_configured_size(tmp_path: Path) -> None:
    res = await run_command("seq 1 5000", cwd=tmp_path, max_output_bytes=200, sandbox=None)
    full = "".join(f"{i}\n" for i in range(1, 5001))
    assert res.total_bytes == len(full) and res.dropped_bytes == len(full) - 200
    assert (
        res.output == full[:100] + f"\n[... {len(full) - 200} bytes of output truncated ...]\n" + full[-100:]
    )


async def test_stdout_and_stderr_are_merged(tmp_path: Path) -> None:
    res = await run_command("echo out; echo err >&2; exit 3", cwd=tmp_path, sandbox=None)
    assert res.exit_code == 3 and "out\n" in res.output and "err\n" in res.output


# ---------------------------------------------------------------- timeouts
@pytest.mark.parametrize("sandboxed", [False, pytest.param(True, marks=needs_sandbox)], ids=["none", "bwrap"])
async def test_timeout_kills_the_whole_process_group(ws: Workspace, sandboxed: bool) -> None:
    marker = f"30.{os.getpid()}{int(time.time() * 1000) % 100000}"
    start = time.monotonic()
    sandbox = workspace_sandbox(ws) if sandboxed else None
    res = await run_command(
        f"echo started; sleep {marker} & sleep {marker}", cwd=ws.root, timeout_s=1, sandbox=sandbox
    )
    elapsed = time.monotonic() - start
    assert res.timed_out and res.exit_code is None
    assert elapsed < 5
    assert "started" in res.output
    await asyncio.sleep(0.2)
    assert _pids_with(f"sleep {marker}") == []  # the background child is gone too


async def test_background_leftovers_are_killed_when_command_ends(tmp_path: Path) -> None:
    marker = f"40.{os.getpid()}1"
    res = await run_command(f"(sleep {marker} >/dev/null 2>&1 &); echo done", cwd=tmp_path, sandbox=None)
    assert res.exit_code == 0 and res.output == "done\n"
    await asyncio.sleep(0.2)
    assert _pids_with(f"sleep {marker}") == []


@needs_sandbox
async def test_pid_namespace_kills_setsid_escapees(ws: Workspace) -> None:
    marker = f"50.{os.getpid()}2"
    res = await run_command(
        f"setsid sleep {marker} >/dev/null 2>&1 & echo ok", cwd=ws.root, sandbox=workspace_sandbox(ws)
    )
    assert res.output == "ok\n"
    await asyncio.sleep(0.3)
    assert _pids_with(f"sleep {marker}") == []


async def test_shell_tool_timeout_is_an_error_result(ws: Workspace) -> None:
    stats = ToolStats()
    shell, _ = make_tools(ws, command_timeout_s=1, stats=stats)
    start = time.monotonic()
    result = await shell(command="sleep 30")
    assert time.monotonic() - start < 5
    assert result["status"] == "error"
    assert "timed out after 1 s" in _text(result)
    assert stats.timeouts == 1 and stats.errors["shell"] == 1


async def test_shell_timeout_capped_by_rollout_time_left(ws: Workspace) -> None:
    shell, _ = make_tools(ws, command_timeout_s=300, time_left=lambda: 0.5)
    start = time.monotonic()
    result = await shell(command="sleep 10")
    assert time.monotonic() - start < 4 and "timed out after 0.5 s" in _text(result)
    shell2, _ = make_tools(ws, time_left=lambda: 0.0)
    assert "time limit" in _text(await shell2(command="echo hi"))


# ---------------------------------------------------------------- sandbox
@needs_sandbox
def test_sandbox_is_reported_in_the_tool_description(ws: Workspace) -> None:
    shell, _ = make_tools(ws)
    desc = shell.tool_spec["description"]
    assert f"Sandbox: {describe_sandbox(workspace_sandbox(ws))}." in desc and "no network" in desc
    unsafe, _ = make_tools(ws, unsafe_no_sandbox=True)
    assert "Sandbox: NONE (--unsafe-no-sandbox" in unsafe.tool_spec["description"]


def test_make_tools_fails_closed_without_bwrap(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    from strands_art.envs.sandbox import probe

    monkeypatch.setattr(probe, "_verified", set())
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(probe, "find_tool", lambda name: None if name == "bwrap" else f"/usr/bin/{name}")
    with pytest.raises(
        SandboxUnavailable, match=r"`bwrap` not found.*apt-get install bubblewrap.*--unsafe-no-sandbox"
    ):
        make_tools(ws)
    with pytest.raises(SandboxUnavailable):  # a failed probe is not remembered as "no sandbox"
        make_tools(ws)
    monkeypatch.undo()
    if SANDBOX_OK:
        make_tools(ws)  # and once bwrap is back, the next call probes again and passes


@needs_sandbox
async def test_sandbox_cannot_reach_host_loopback(ws: Workspace) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    accepted: list[object] = []
    threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
    probe = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('CONNECTED')\""
    try:
        inside = await run_command(probe, cwd=ws.root, sandbox=workspace_sandbox(ws), timeout_s=20)
        assert "CONNECTED" not in inside.output and inside.exit_code != 0
        assert "ConnectionRefused" in inside.output
        assert accepted == []  # the host's listener saw nothing
        outside = await run_command(probe, cwd=ws.root, sandbox=None, timeout_s=20)
        assert "CONNECTED" in outside.output  # control: the same probe works without the sandbox
    finally:
        server.close()


@needs_sandbox
async def test_sandbox_has_only_loopback(ws: Workspace) -> None:
    res = await run_command(
        'python3 -c "import socket; print(sorted(n for _, n in socket.if_nameindex()))"',
        cwd=ws.root,
        sandbox=workspace_sandbox(ws),
    )
    assert res.output.strip() == "['lo']"


@needs_sandbox
async def test_readonly_root_outside_workspace(ws: Workspace) -> None:
    shell, _ = make_tools(ws)
    outside = Path.home() / f".strands-art-ro-probe-{os.getpid()}"
    try:
        result = await shell(
            command=f"touch /usr/x-{os.getpid()}; touch {outside}; echo made > inside.txt; cat inside.txt"
        )
        assert "Read-only file system" in _text(result)
        assert not outside.exists() and not Path(f"/usr/x-{os.getpid()}").exists()
    finally:
        outside.unlink(missing_ok=True)
    assert (ws.root / "inside.txt").read_text() == "made\n"


async def test_env_and_extra_path_reach_the_command(ws: Workspace, tmp_path: Path) -> None:
    fake = tmp_path / "fakebin"
    real = fake / "real-mvn"
    fake.mkdir()
    real.write_text('#!/bin/sh\necho "ARGS: $*"\n')
    real.chmod(0o755)
    wrapper = write_mvn_wrapper(ws.aux_dir / "bin", settings=tmp_path / "s.xml", real_mvn=str(real))
    stats = ToolStats()
    shell, _ = make_tools(
        ws,
        env={"MVN_LOCAL_REPO": "/x/repo"},
        extra_path=[str(wrapper.parent)],
        stats=stats,
        unsafe_no_sandbox=True,
    )
    result = await shell(command="mvn -q clean verify; echo $MVN_LOCAL_REPO; pwd")
    assert result["status"] == "success"
    lines = _text(result).splitlines()
    assert lines[0] == f"ARGS: -B -Dstyle.color=never -s {tmp_path / 's.xml'} -q clean verify"
    assert lines[1:3] == ["/x/repo", str(ws.root)]
    assert _text(result).endswith("[exit code: 0]")
    assert stats.maven_calls == 1 and 0 < stats.maven_s <= stats.tools_s


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("mvn -q clean verify", True),
        ("cd sub && ./mvnw test", True),
        ("/usr/bin/mvn -v", True),
        ("echo mvnx; ls mvn-notes", False),
        ("grep -rn 'maven' pom.xml", False),
    ],
)
def test_invokes_maven(command: str, expected: bool) -> None:
    assert invokes_maven(command) is expected


# ---------------------------------------------------------------- file editor
async def test_editor_view_file_with_numbers_and_range(ws: Workspace) -> None:
    _, ed = make_tools(ws)
    out = _text(await ed(command="view", path="src/A.java"))
    assert "     1\tclass A {\n     2\t  int x = 1;" in out
    out = _text(await ed(command="view", path="src/A.java", view_range=[2, 3]))
    assert "     2\t  int x = 1;\n     3\t  int y = 1;\n" in out and "class A" not in out
    bad = await ed(command="view", path="src/A.java", view_range=[9, 12])
    assert bad["status"] == "error" and "[1, 5]" in _text(bad)


async def test_editor_view_directory_lists_two_levels_without_hidden(ws: Workspace) -> None:
    _, ed = make_tools(ws)
    out = _text(await ed(command="view", path="."))
    assert out.splitlines()[1:] == ["pom.xml", "src/", "src/A.java"]


async def test_editor_confinement(ws: Workspace) -> None:
    _, ed = make_tools(ws)
    for bad in ("../../etc/passwd", "/etc/passwd"):
        r = await ed(command="view", path=bad)
        assert r["status"] == "error" and "outside the workspace" in _text(r)
    os.symlink("/etc", ws.root / "etc")
    r = await ed(command="create", path="etc/evil.conf", file_text="x")
    assert r["status"] == "error" and "symbolic link" in _text(r)
    assert not Path("/etc/evil.conf").exists()


async def test_editor_create_overwrite_and_undo(ws: Workspace) -> None:
    _, ed = make_tools(ws)
    r = await ed(command="create", path="src/B.java", file_text="class B {}\n")
    assert r["status"] == "success" and "created" in _text(r)
    assert (ws.root / "src/B.java").read_text() == "class B {}\n"
    r = await ed(command="create", path="src/B.java", file_text="class B { int z; }\n")
    assert "overwritten" in _text(r)
    await ed(command="undo_edit", path="src/B.java")
    assert (ws.root / "src/B.java").read_text() == "class B {}\n"
    r = await ed(command="undo_edit", path="src/B.java")
    assert "removed" in _text(r) and not (ws.root / "src/B.java").exists()
    r = await ed(command="undo_edit", path="src/B.java")
    assert r["status"] == "error" and "nothing to undo" in _text(r)


async def test_editor_create_makes_parent_dirs_and_requires_text(ws: Workspace) -> None:
    _, ed = make_tools(ws)
    await ed(command="create", path="src/test/java/p/T.java", file_text="x")
    assert (ws.root / "src/test/java/p/T.java").read_text() == "x"
    r = await ed(command="create", path="C.java")
    assert r["status"] == "error" and "`file_text` is required" in _text(r)


async def test_editor_str_replace_exactly_once(ws: Workspace) -> None:
    _, ed = make_tools(ws)
    r = await ed(
        command="str_replace",
        path="pom.xml",
        old_str="<maven.compiler.source>1.8",
        new_str="<maven.compiler.source>17",
    )
    assert r["status"] == "success" and "17</maven.compiler.source>" in _text(r)
    assert (ws.root / "pom.xml").read_text() == POM.replace("1.8", "17")
    r = await ed(command="str_replace", path="src/A.java", old_str=" = 1;", new_str=" = 2;")
    assert r["status"] == "error" and "occurs 2 times" in _text(r) and "[2, 3]" in _text(r)
    r = await ed(command="str_replace", path="src/A.java", old_str="int q", new_str="int r")
    assert r["status"] == "error" and "did not appear verbatim" in _text(r)
    assert (ws.root / "src/A.java").read_text() == "class A {\n  int x = 1;\n  int y = 1;\n}\n"  # untouched
    r = await ed(command="str_replace", path="src/A.java", old_str="  int y = 1;\n")  # no new_str: delete
    assert (ws.root / "src/A.java").read_text() == "class A {\n  int x = 1;\n}\n"
    await ed(command="undo_edit", path="src/A.java")
    assert (ws.root / "src/A.java").read_text() == "class A {\n  int x = 1;\n  int y = 1;\n}\n"


async def test_editor_insert(ws: Workspace) -> None:
    _, ed = make_tools(ws)
    await ed(command="insert", path="src/A.java", insert_line=0, new_str="// top")
    await ed(command="insert", path="src/A.java", insert_line=2, new_str="  int w = 0;")
    assert (
        ws.root / "src/A.java"
    ).read_text() == "// top\nclass A {\n  int w = 0;\n  int x = 1;\n  int y = 1;\n}\n"
    r = await ed(command="insert", path="src/A.java", insert_line=99, new_str="x")
    assert r["status"] == "error" and "[0, 7]" in _text(r)
    r = await ed(command="insert", path="src/A.java", new_str="x")
    assert r["status"] == "error" and "`insert_line` and `new_str` are required" in _text(r)


async def test_editor_keeps_crlf_and_refuses_binary_and_dirs(ws: Workspace) -> None:
    _, ed = make_tools(ws)
    (ws.root / "w.txt").write_bytes(b"a\r\nb\r\n")
    await ed(command="str_replace", path="w.txt", old_str="b", new_str="c")
    assert (ws.root / "w.txt").read_bytes() == b"a\r\nc\r\n"
    (ws.root / "lib.jar").write_bytes(b"PK\x03\x04\x00\x00binary")
    r = await ed(command="view", path="lib.jar")
    assert r["status"] == "error" and "binary" in _text(r)
    r = await ed(command="str_replace", path="src", old_str="a", new_str="b")
    assert r["status"] == "error" and "directory" in _text(r)
    r = await ed(command="view", path="missing.txt")
    assert r["status"] == "error" and "does not exist" in _text(r)


# ---------------------------------------------------------------- through Strands' tool machinery
def test_tool_specs_expose_the_schema(ws: Workspace) -> None:
    shell, ed = make_tools(ws)
    assert shell.tool_name == "shell" and ed.tool_name == "file_editor"
    schema = ed.tool_spec["inputSchema"]["json"]
    assert schema["required"] == ["command", "path"]
    assert schema["properties"]["command"]["enum"] == ["view", "create", "str_replace", "insert", "undo_edit"]
    assert schema["properties"]["insert_line"]["type"] == "integer"
    assert schema["properties"]["view_range"]["items"] == {"type": "integer"}
    assert shell.tool_spec["inputSchema"]["json"]["required"] == ["command"]


async def _stream_result(tool, tool_input: dict) -> dict:
    last = None
    async for event in tool.stream({"toolUseId": "t-1", "name": tool.tool_name, "input": tool_input}, {}):
        last = event
    return last.tool_result


async def test_errors_come_back_as_tool_results_through_strands(ws: Workspace) -> None:
    shell, ed = make_tools(ws)
    r = await _stream_result(ed, {"command": "view", "path": "../../etc/passwd"})
    assert r["toolUseId"] == "t-1" and r["status"] == "error" and "outside the workspace" in _text(r)
    r = await _stream_result(ed, {"command": "delete", "path": "pom.xml"})  # not in the enum
    assert r["status"] == "error"
    r = await _stream_result(ed, {"path": "pom.xml"})  # missing required argument
    assert r["status"] == "error"
    r = await _stream_result(shell, {"command": "echo hi"})
    assert r["status"] == "success" and _text(r) == "hi\n\n[exit code: 0]"


async def test_ansi_colour_codes_are_removed(tmp_path: Path) -> None:
    res = await run_command(r"printf '\033[1mBUILD\033[m \033[0;32mOK\033[0m\n'", cwd=tmp_path, sandbox=None)
    assert res.output == "BUILD OK\n"


# ---------------------------------------------------------------- real Maven through the tool
TASKS = Path(__file__).resolve().parents[1] / "examples" / "migrationbench" / "tasks"


@pytest.mark.maven
@pytest.mark.skipif(not (TASKS / "compiler-props").is_dir(), reason="bundled task compiler-props missing")
async def test_mvn_wrapper_builds_a_task_offline_inside_the_sandbox() -> None:
    from strands_art.envs.migrationbench.agent.toolenv import prepare_tool_env

    with Workspace.for_task(TASKS / "compiler-props") as w:
        tenv = prepare_tool_env(w, offline=True)
        stats = ToolStats()
        shell, _ = make_tools(w, env=tenv.env, extra_path=tenv.extra_path, stats=stats)
        result = await shell(command="mvn -q clean verify -DforkCount=0 && echo $HOME")
        text = _text(result)
        assert text.endswith("[exit code: 0]"), text
        assert tenv.env["HOME"] in text and "\x1b[" not in text
        classes = list((w.root / "target" / "classes").rglob("*.class"))
        assert classes and stats.maven_calls == 1
        # untouched task: Java 8 bytecode (major version 52) from a real javac run
        assert {int.from_bytes(c.read_bytes()[6:8], "big") for c in classes} == {52}
