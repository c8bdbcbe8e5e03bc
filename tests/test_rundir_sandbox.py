"""A dead run's sandboxed leftovers: processes found by the uid owning their workspace (a sandboxed
command has a cleared environment, so it carries no run token), on ``--resume`` and by the live
reaper; and a workspaces dir that links into the temp dir is removed with its target."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from support.proc_helpers import sleeping

from strands_art.envs.migrationbench.agent.toolenv import workspace_sandbox
from strands_art.envs.migrationbench.run.reaper import sandbox_owners, uids_of
from strands_art.envs.migrationbench.run.rundir import open_run_dir
from strands_art.envs.migrationbench.workspace import LINKED_BASE_PREFIX, Workspace, remove_base
from strands_art.envs.sandbox import SandboxUnavailable, require_sandbox
from strands_art.envs.sandbox.policy import is_sandbox_uid
from strands_art.envs.sandbox.process import prepared

try:
    require_sandbox()
    SANDBOX_OK = True
except SandboxUnavailable:
    SANDBOX_OK = False

ROOT = Path(__file__).resolve().parents[1]
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="sandbox uids need root")


def _source(tmp: Path) -> Path:
    src = tmp / "src"
    src.mkdir(exist_ok=True)
    (src / "pom.xml").write_text("<project/>")
    return src


def _dead_run(run: Path) -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / ".lock").write_text(json.dumps({"pid": 999999, "token": "deadbeef00112233"}) + "\n")


def _gone(arg: str, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while sleeping(arg) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not sleeping(arg)


def _start_sandboxed(ws: Workspace, seconds: str) -> subprocess.Popen[bytes]:
    """``sleep SECONDS`` in ``ws``'s real sandbox, started the way the shell tool starts a command."""
    with prepared(workspace_sandbox(ws), ["sleep", seconds], cwd=ws.root, env={"HOME": str(ws.aux_dir)}) as (
        argv,
        fds,
        env,
        cwd,
    ):
        proc = subprocess.Popen(argv, cwd=cwd, env=env, pass_fds=fds, start_new_session=True)
    deadline = time.monotonic() + 10
    while not sleeping(seconds) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sleeping(seconds), "the sandboxed command did not start"
    return proc


def test_sandbox_owners_reads_two_levels_and_only_sandbox_uids(tmp_path: Path) -> None:
    base = tmp_path / "workspaces"
    (base / "strands-art-build-x" / "repo" / "deep").mkdir(parents=True)
    (base / "strands-art-ws-y").mkdir()
    (base / "link").symlink_to("/usr", target_is_directory=True)
    if os.geteuid() == 0:
        os.chown(base / "strands-art-build-x" / "repo", 1_500_000_001, 1_500_000_001)
        os.chown(base / "strands-art-build-x" / "repo" / "deep", 1_500_000_002, 1_500_000_002)  # too deep
        os.chown(base / "strands-art-ws-y", 1_500_000_003, 1_500_000_003)
        assert sandbox_owners(base) == {1_500_000_001, 1_500_000_003}
        linked = tmp_path / "linked"
        linked.symlink_to(base, target_is_directory=True)
        assert sandbox_owners(linked) == {1_500_000_001, 1_500_000_003}
    else:
        assert sandbox_owners(base) == frozenset()  # our own uid is never one
    assert sandbox_owners(tmp_path / "missing") == frozenset() and sandbox_owners(None) == frozenset()
    assert not is_sandbox_uid(0) and not is_sandbox_uid(os.getuid() if os.getuid() else 1000)


def test_linked_workspaces_dir_goes_with_its_temp_dir_target(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    target = Path(tempfile.mkdtemp(prefix=LINKED_BASE_PREFIX))
    (target / "strands-art-ws-a" / "repo").mkdir(parents=True)
    (run / "workspaces").symlink_to(target, target_is_directory=True)
    foreign = tmp_path / "not-ours"
    (foreign / "keep").mkdir(parents=True)
    try:
        rd = open_run_dir(run)
        rd.close()
        assert rd.removed_workspaces == 1
        assert not (run / "workspaces").is_symlink() and not target.exists()
        # a link to a directory that is not one of ours: only the link goes
        (run / "workspaces").symlink_to(foreign, target_is_directory=True)
        rd = open_run_dir(run)
        rd.close()
        assert rd.removed_workspaces == 0 and not (run / "workspaces").is_symlink()
        assert (foreign / "keep").is_dir()
    finally:
        subprocess.run(["rm", "-rf", str(target)], check=False)


@needs_root
@pytest.mark.skipif(not SANDBOX_OK, reason="bubblewrap sandbox unavailable")
def test_resume_kills_sandboxed_commands_by_their_workspace_owner(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _dead_run(run)
    ws = Workspace.copy_of(_source(tmp_path), base_dir=run / "workspaces")
    other = Workspace.copy_of(_source(tmp_path), base_dir=tmp_path / "other-run" / "workspaces")
    orphan = _start_sandboxed(ws, "308.1")
    bystander = _start_sandboxed(other, "308.2")
    try:
        assert ws.identity.uid in uids_of(orphan.pid)  # bwrap runs as the workspace's uid ...
        assert b"STRANDS_ART_RUN_TOKEN" not in (Path("/proc") / str(orphan.pid) / "environ").read_bytes()
        rd = open_run_dir(run)
        rd.close()
        assert rd.killed >= 2  # bwrap and the sleep inside its namespaces
        assert orphan.wait(timeout=5) == -signal.SIGKILL
        assert _gone("308.1")
        assert bystander.poll() is None and sleeping("308.2")  # another run's sandbox stays
        assert rd.removed_workspaces == 1 and not (run / "workspaces").exists()
    finally:
        for proc in (orphan, bystander):
            proc.kill()
            proc.wait()
        ws.cleanup()
        other.cleanup()
        remove_base(run / "workspaces")
        remove_base(tmp_path / "other-run" / "workspaces")


RUNNER = textwrap.dedent(
    """
    import subprocess, sys, time
    from pathlib import Path
    from strands_art.envs.migrationbench.run.rundir import open_run_dir, run_token
    from strands_art.envs.migrationbench.workspace import Workspace
    rd = open_run_dir(sys.argv[1])
    ws = Workspace.copy_of(sys.argv[2], base_dir=rd.workspaces)
    # as the workspace's uid, no environment, out of the process tree before the reaper starts:
    # neither the token nor the tree finds it, only its uid
    subprocess.run(
        ["setsid", "bash", "-c", "sleep 309.5 </dev/null >/dev/null 2>&1 & exit 0"],
        user=ws.identity.uid, group=ws.identity.gid, extra_groups=[], env={}, cwd="/", check=True,
    )
    with run_token(rd.token, rd.workspaces):
        time.sleep(1.0)
        print("ready", flush=True)
        time.sleep(600)
    """
)


@needs_root
def test_reaper_kills_what_runs_as_a_workspace_owner_after_a_sigkill(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(tmp_path / "run"), str(_source(tmp_path))],
        stdout=subprocess.PIPE,
        env=env,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        assert sleeping("309.5")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert _gone("309.5")
    finally:
        proc.kill()
        proc.wait()
        for pid in sleeping("309.5"):
            os.kill(pid, signal.SIGKILL)
        remove_base(tmp_path / "run" / "workspaces")
