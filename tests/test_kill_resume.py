"""SIGKILL ``strands-art migrate`` at random points, ``--resume`` after each: every rollout ends up
exactly once in results.jsonl, trajectories.jsonl and the Parquet parts, and no workspace or
process of the killed runs is left.

The runner is the real CLI entry point in a subprocess (tests/support/migrate_kill_driver.py: scripted
Qwen3 policy, real tools, real gateway and store). Tasks have no ``pom.xml``, so evaluation runs no
Maven build; about two minutes on two busy cores. The agent's commands run in the bubblewrap
sandbox (as the workspace's uid, with no run token in their environment) wherever it works.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from support.migrate_kill_driver import ORPHAN_MARK
from support.migrate_script import pomless_tasks

from strands_art.envs.migrationbench.run.reaper import TOKEN_ENV, processes
from strands_art.store import TrajectoryStore

pytestmark = [
    pytest.mark.slow,
    pytest.mark.alone,  # _leftovers() reads every process's environment: another test's run would count
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc"),
]
ROOT = Path(__file__).resolve().parents[1]
TASKS = ("alpha", "beta", "gamma", "delta")
PER_TASK = 3
KILLS = 10


def _tasks(root: Path) -> Path:
    return pomless_tasks(root, TASKS)


def _leftovers() -> list[int]:
    """Processes of any killed run: the commands' background jobs, or anything carrying a run token."""
    found = []
    for pid in processes():
        try:
            cmd = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
            env = (Path("/proc") / str(pid) / "environ").read_bytes()
        except OSError:
            continue
        if cmd[:2] == [b"sleep", ORPHAN_MARK.encode()] or (
            f"{TOKEN_ENV}=".encode() in env and pid != os.getpid()
        ):
            found.append(pid)
    return found


def _start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "STRANDS_ART_MAVEN_OFFLINE": "0", "COLUMNS": "200"}
    env.pop(TOKEN_ENV, None)
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.support.migrate_kill_driver", *argv],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], timeout_s: float = 120) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    raise AssertionError(f"no {text!r} in {log}: {log.read_text(errors='replace')[-2000:]}")


def test_sigkill_and_resume_leave_each_rollout_exactly_once(tmp_path: Path) -> None:
    if subprocess.run(["which", "mvn"], capture_output=True).returncode != 0:
        pytest.skip("the agent's tool env needs Maven")
    assert not _leftovers(), "leftover processes from an earlier run"
    run_dir = tmp_path / "run"
    first = ["--tasks-dir", str(_tasks(tmp_path / "tasks")), "--rollouts-per-task", str(PER_TASK)]
    first += ["--run-dir", str(run_dir), "--concurrency", "2", "--max-turns", "4", "--no-plot"]
    resume = ["--resume", str(run_dir)]
    rng = random.Random(20261130)
    kills, attempt = 0, 0
    linked: set[Path] = set()  # temp-dir directories the workspaces dir linked to (see workspace.py)
    while kills < KILLS:
        attempt += 1
        assert attempt <= 3 * KILLS, f"only {kills} kills landed in {attempt - 1} runs"
        log = tmp_path / f"run{attempt}.log"
        proc = _start(first if attempt == 1 else resume, log)
        if not _wait_for(log, "already done", proc):
            continue
        time.sleep(rng.uniform(0.0, 3.0))
        if proc.poll() is not None:  # it finished before the kill: nothing to learn
            assert proc.returncode == 0, log.read_text()
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        if (run_dir / "workspaces").is_symlink():
            linked.add(Path(os.path.realpath(run_dir / "workspaces")))
        deadline = time.monotonic() + 10  # the reaper needs a moment
        while _leftovers() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _leftovers() == [], f"orphans after kill {kills}"
    log = tmp_path / "final.log"
    proc = _start(resume, log)
    assert proc.wait(timeout=300) == 0, log.read_text()
    assert kills >= KILLS or "already done" in log.read_text()

    expected = sorted(f"{t}-r{k}" for t in TASKS for k in range(PER_TASK))
    records = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    done = [r["rollout_id"] for r in records if not r.get("failed")]
    assert sorted(done) == expected, Counter(done)
    store = TrajectoryStore(run_dir / "trajectories")
    trajs = list(store)
    assert sorted(t.rollout_id for t in trajs) == expected
    assert all(t.metadata["stop_reason"] == "completed" and len(t.turns) == 2 for t in trajs)
    rows = store.read_rows_table()
    assert sorted(rows.column("rollout_id").to_pylist()) == expected  # one row per rollout
    assert sorted(p.name for p in (store.root / "rows").iterdir()) == sorted(
        f"part-{rid}.parquet" for rid in expected
    )
    assert not os.path.lexists(run_dir / "workspaces")  # emptied at the end, then removed
    assert [p for p in linked if p.exists()] == []  # no killed run's workspaces left anywhere
    assert _leftovers() == []
