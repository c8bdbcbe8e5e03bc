"""Run directory: the lock, reconciling after a kill at each write, dead workspaces, the reaper."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support.proc_helpers import sleeping

from strands_art.cli import main
from strands_art.envs.migrationbench.run.reaper import TOKEN_ENV
from strands_art.envs.migrationbench.run.rundir import (
    RunDirBusy,
    open_run_dir,
    read_config,
    reconcile,
    scan_results,
)
from strands_art.store import TrajectoryStore
from strands_art.trajectory import Row, Trajectory
from strands_art.validation import UsageError


def _traj(rid: str, reward: float = 1.0) -> Trajectory:
    t = Trajectory(rollout_id=rid, group_id="g", rows=[Row([1, 2, 3], [0, 1, 1], [0.0, -0.1, -0.2], rid)])
    t.set_reward(reward)
    return t


def _result(rid: str, **extra: object) -> str:
    return json.dumps({"rollout_id": rid, "reward": 1.0, "token_capture": True, **extra}) + "\n"


HOLDER = textwrap.dedent(
    """
    import sys, time
    from strands_art.envs.migrationbench.run.rundir import open_run_dir
    open_run_dir(sys.argv[1])
    print("locked", flush=True)
    time.sleep(600)
    """
)


def _python(code: str, *argv: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.Popen([sys.executable, "-c", code, *argv], stdout=subprocess.PIPE, env=env)


def test_second_process_on_a_run_dir_is_refused(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    holder = _python(HOLDER, str(run))
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"locked\n"
        with pytest.raises(RunDirBusy, match=rf"in use by another strands-art process \(pid {holder.pid}\)"):
            open_run_dir(run)
        (run / "config.json").write_text(json.dumps({"tasks": ["sun-base64"]}))
        before = sorted((p.name, p.stat().st_mtime_ns) for p in run.iterdir())
        assert main(["migrate", "--resume", str(run)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"is in use by another strands-art process (pid {holder.pid})" in err
        assert sorted((p.name, p.stat().st_mtime_ns) for p in run.iterdir()) == before  # nothing written
    finally:
        holder.kill()
        holder.wait()
    open_run_dir(run).close()  # the lock died with its holder: the resume can go on


def test_reconcile_keeps_each_finished_rollout_exactly_once(tmp_path: Path) -> None:
    run = tmp_path / "run"
    store = TrajectoryStore(run / "trajectories")
    for rid in ("a", "b", "a", "c"):  # a twice (an old duplicate); b never got its results line
        store.append(_traj(rid))
    with open(store.jsonl, "a") as f:  # d: killed in the middle of its JSONL line
        f.write('{"rollout_id": "d", "tur')
    store.part_path("d").write_bytes(b"PAR1")  # its Parquet part was complete
    (store.root / "rows" / "part-e.parquet.tmp").write_bytes(b"half")  # e: killed writing Parquet
    store.part_path("c").unlink()  # c: results line, JSONL line, but no Parquet part
    results = run / "results.jsonl"
    results.write_text(
        _result("a") + _result("c") + _result("d") + _result("f", failed=True) + '{"rollout_id": "g", "re'
    )

    report = reconcile(run)

    assert sorted(report.done) == ["a"]
    assert report.rerun == ["c", "d"] and report.torn_results == 1
    assert sorted(report.dropped_trajectories) == ["a", "b", "c"]  # the older a, b, c
    assert [t.rollout_id for t in store] == ["a"]
    assert sorted(p.name for p in (store.root / "rows").iterdir()) == ["part-a.parquet"]
    assert store.read_rows_table().column("rollout_id").to_pylist() == ["a"]
    assert [json.loads(x)["rollout_id"] for x in results.read_text().splitlines()] == ["a", "f"]
    assert results.with_name("results.jsonl.torn").read_text() == '{"rollout_id": "g", "re\n'
    rerun = [
        json.loads(x)["rollout_id"] for x in results.with_name("results.jsonl.rerun").read_text().splitlines()
    ]
    assert rerun == ["c", "d"]
    assert store.jsonl.with_name("trajectories.jsonl.torn").read_text() == '{"rollout_id": "d", "tur\n'
    # idempotent: a second reconcile changes nothing
    again = reconcile(run)
    assert sorted(again.done) == ["a"] and again.rerun == [] and again.dropped_trajectories == []
    assert again.removed_parts == 0 and again.torn_results == 0


def test_results_line_without_newline_is_completed(tmp_path: Path) -> None:
    run = tmp_path / "run"
    TrajectoryStore(run / "trajectories").append(_traj("a"))
    (run / "results.jsonl").write_text(_result("a").rstrip("\n"))
    assert sorted(reconcile(run).done) == ["a"]
    assert (run / "results.jsonl").read_text() == _result("a")


def test_dead_runs_workspaces_are_removed(tmp_path: Path) -> None:
    ws = tmp_path / "run" / "workspaces"
    (ws / "strands-art-ws-x" / "repo").mkdir(parents=True)
    (ws / "strands-art-aux-y").mkdir()
    (ws / "strands-art-ws-x" / "repo" / "pom.xml").write_text("<project/>")
    rd = open_run_dir(tmp_path / "run")
    rd.close()
    assert rd.removed_workspaces == 2 and not ws.exists()  # the next workspace makes it again


RUNNER = textwrap.dedent(
    """
    import subprocess, sys, time
    from strands_art.envs.migrationbench.run.rundir import open_run_dir, run_token
    rd = open_run_dir(sys.argv[1])
    with run_token(rd.token):
        # a command's process group with a background job, and one that left the group
        subprocess.Popen(["bash", "-c", "sleep 301 & sleep 302"], start_new_session=True)
        subprocess.Popen(["bash", "-c", "setsid sleep 303 & sleep 304"], start_new_session=True)
        subprocess.Popen(["sleep", "307"])  # in the runner's own group, which is pytest's: killed by pid
        time.sleep(1.5)  # the reaper polls every 0.5 s
        print("ready", flush=True)
        time.sleep(600)
    """
)


def _sleepers() -> set[int]:
    return sleeping("301", "302", "303", "304", "307")


def test_killing_the_runner_kills_its_command_process_groups(tmp_path: Path) -> None:
    proc = _python(RUNNER, str(tmp_path / "run"))
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        assert len(_sleepers()) == 5
        assert os.getpgid(proc.pid) == os.getpgid(0)  # so the reaper must not kill that group
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while _sleepers() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _sleepers() == set()
    finally:
        proc.kill()
        for pid in _sleepers():
            os.kill(pid, signal.SIGKILL)


def test_resume_kills_what_still_carries_the_dead_runs_token(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").write_text(json.dumps({"pid": 999999, "token": "deadbeef00112233"}) + "\n")
    env = {**os.environ, TOKEN_ENV: "deadbeef00112233"}
    other = {**os.environ, TOKEN_ENV: "0123456789abcdef"}  # another run's process: left alone
    orphan = subprocess.Popen(["sleep", "305"], env=env, start_new_session=True)
    bystander = subprocess.Popen(["sleep", "306"], env=other, start_new_session=True)
    try:
        time.sleep(0.2)
        rd = open_run_dir(run)
        rd.close()
        assert rd.killed == 1
        assert orphan.wait(timeout=5) == -signal.SIGKILL
        assert bystander.poll() is None
        assert json.loads((run / ".lock").read_text())["token"] == rd.token != "deadbeef00112233"
    finally:
        orphan.kill()
        bystander.kill()
        orphan.wait()
        bystander.wait()


def test_reconcile_never_writes_through_planted_symlinks(tmp_path: Path) -> None:
    """A (copied) run directory with symlinks to outside files at results.jsonl.tmp and
    results.jsonl.torn: reconcile() rewrote the first one's target with the kept results (and
    left results.jsonl a symlink to it) and appended the torn line to the second one's. Now the
    .tmp is a new file of the run's own, and a .torn symlink is refused (ELOOP)."""
    import errno

    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_text(json.dumps({"rollout_id": "a", "reward": 1.0}) + "\n{torn\n")
    victims = {}
    for name in ("results.jsonl.tmp", "results.jsonl.torn"):
        victims[name] = tmp_path / f"victim-{name}"
        victims[name].write_text("PRECIOUS\n")
        (run / name).symlink_to(victims[name])
    with pytest.raises(OSError) as exc:
        reconcile(run)
    assert exc.value.errno == errno.ELOOP
    (run / "results.jsonl.torn").unlink()
    report = reconcile(run)
    assert list(report.done) == ["a"] and report.torn_results == 1
    assert [v.read_text() for v in victims.values()] == ["PRECIOUS\n", "PRECIOUS\n"]
    assert not (run / "results.jsonl").is_symlink()
    assert (run / "results.jsonl").read_text() == json.dumps({"rollout_id": "a", "reward": 1.0}) + "\n"
    assert (run / "results.jsonl.torn").read_text() == "{torn\n"


def test_a_fifo_in_a_run_directory_is_refused_at_once(tmp_path: Path) -> None:
    """A (copied, hostile) run directory with FIFOs at results.jsonl or config.json: reading them
    waited forever for a writer. Now each is refused at once, never opened blocking."""
    import errno

    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / "results.jsonl")
    with pytest.raises(OSError) as exc:
        reconcile(run)
    assert exc.value.errno == errno.EINVAL and "not a regular file" in str(exc.value)
    with pytest.raises(OSError, match="not a regular file"):
        scan_results(run / "results.jsonl")
    os.mkfifo(run / "config.json")
    with pytest.raises(UsageError, match="cannot read .*config.json.*not a regular file"):
        read_config(run / "config.json")
