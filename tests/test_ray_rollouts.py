"""``strands-art migrate --ray`` on a real 3-node Ray cluster on this machine.

A head node (no sandbox resource: the driver's node) and two worker nodes, each its own ``ray
start`` process with one CPU and one unit of ``strands_art_sandbox`` (:mod:`support.ray_cluster`), so
two rollouts in flight land on two raylets and every result crosses the object store.

- the bundled default tasks through Ray give the same records (rewards, evaluation, turns, rows,
  sampled tokens) and the same stored rows (sampled token IDs and logprobs, loss masks, rewards;
  the context equal up to the workspace path the prompt names, a fresh temp name in every run) as
  in-process, with the scripted reference policy (real Qwen3 tokenizer, real sandboxed Maven
  evaluation builds);
- SIGKILL of a worker node's Ray processes mid-rollout: the rollout runs again on the other node,
  each rollout is in results.jsonl, trajectories.jsonl and the Parquet parts once, and the dead
  attempt's sandboxed background job and scratch directory are gone.

Select them with ``-m ray``; they skip without Ray (``pip install -e '.[ray]'``).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from support.migrate_kill_driver import ORPHAN_MARK, ShellWithBackgroundJob
from support.migrate_script import PatchThenAnswer, patched_files, pomless_tasks
from support.ray_cluster import LocalCluster, cmdline

from strands_art.backends.scripted import ScriptedBackend
from strands_art.cli import build_parser
from strands_art.envs.migrationbench.run.ray_runner import SANDBOX_RESOURCE
from strands_art.envs.migrationbench.run.reaper import descendants, processes
from strands_art.envs.migrationbench.run.runner import run_migration
from strands_art.envs.migrationbench.run.runner_args import DEFAULT_TASKS
from strands_art.envs.migrationbench.tasks.tasks import load_tasks
from strands_art.store import TrajectoryStore

ray = pytest.importorskip("ray")
from ray._private.authentication_test_utils import reset_auth_token_state  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")]


@pytest.fixture(scope="module")
def cluster():
    tmp = Path(tempfile.mkdtemp(prefix="sa-ray-"))  # short: Ray's socket paths must fit 107 bytes
    # the nodes' attempt directories: below a directory the sandbox uids may pass through
    scratch = Path(tempfile.mkdtemp(prefix="strands-art-ray-test-"))
    scratch.chmod(0o711)
    c = LocalCluster(tmp, scratch)
    saved = {k: os.environ.get(k) for k in c.auth_env()}
    try:
        c.wait_started(c.start_head(num_cpus=1))
        c.wait_started(c.add_node("a", {SANDBOX_RESOURCE: 1}))
        c.wait_started(c.add_node("b", {SANDBOX_RESOURCE: 1}))
        os.environ.update(c.auth_env())  # this driver speaks with the cluster's own token
        reset_auth_token_state()  # Ray reads the variables once per process
        ray.init(address=c.address, logging_level="WARNING")
        c.wait_for_nodes(3)
        yield c
    finally:
        ray.shutdown()
        c.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        reset_auth_token_state()
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)


def _args(run_dir: Path, *extra: str) -> Any:
    argv = ["migrate", "--model", "qwen3-scripted", "--run-dir", str(run_dir), "--seed", "7"]
    argv += ["--concurrency", "2", "--max-turns", "8", "--max-new-tokens", "4096", "--no-plot"]
    argv += ["--ray-memory-gb", "0.25", *extra]
    return build_parser().parse_args(argv)


def _rows(run_dir: Path) -> dict[tuple[str, int], dict[str, Any]]:
    table = TrajectoryStore(run_dir / "trajectories").read_rows_table().to_pylist()
    return {(r["rollout_id"], r["row_index"]): r for r in table}


def _sampled(row: dict[str, Any]) -> list[list[tuple[int, float]]]:
    """The sampled spans of a stored row (loss mask 1), each as (token id, logprob) pairs."""
    spans: list[list[tuple[int, float]]] = []
    prev = 0
    for t, m, lp in zip(row["input_ids"], row["loss_mask"], row["logprobs"], strict=True):
        if m:
            if not prev:
                spans.append([])
            spans[-1].append((t, lp))
        prev = m
    return spans


def _context_text(tok: Any, row: dict[str, Any]) -> str:
    """The row decoded, with the workspace path of the first user turn replaced by ``<REPO>``."""
    text = tok.decode(row["input_ids"])
    path = re.search(r"Please help migrate this repo: (\S+)\. There are", text)
    assert path, text[:2000]
    return text.replace(path.group(1), "<REPO>")


COMPARED = ("reward", "build_success", "java17_bytecode", "tests_run", "tests_required", "tests_equivalent")
COMPARED += ("stop_reason", "error", "turns", "seed", "rows", "sampled_tokens", "forks")


@pytest.mark.maven
async def test_ray_run_of_default_tasks_matches_in_process(
    cluster: LocalCluster, tmp_path: Path, qwen3
) -> None:
    tasks = load_tasks(None, list(DEFAULT_TASKS))
    player = PatchThenAnswer(qwen3, {t.name: (t, patched_files(t, tmp_path / "patched")) for t in tasks})
    results = {}
    for mode in ("local", "ray"):
        run_dir = tmp_path / mode
        args = _args(run_dir, *(["--ray", cluster.address] if mode == "ray" else []))
        results[mode] = await run_migration(
            args,
            Console(file=io.StringIO(), width=200),
            backend_factory=lambda a: (ScriptedBackend(qwen3, player), qwen3),
        )
    local, remote = results["local"], results["ray"]
    assert [r["rollout_id"] for r in local] == [f"{n}-r0" for n in DEFAULT_TASKS]
    assert [r["rollout_id"] for r in remote] == [r["rollout_id"] for r in local]
    assert all(r["reward"] == 1.0 for r in local), local
    for a, b in zip(local, remote, strict=True):
        assert {k: a.get(k) for k in COMPARED} == {k: b.get(k) for k in COMPARED}
        assert a["tool_stats"]["calls"] == b["tool_stats"]["calls"]
    # both worker nodes ran rollouts (one slot each, two in flight); the driver's node none
    node_ids = {n["NodeID"][:16]: n for n in ray.nodes()}
    used = {r["ray_node"] for r in remote}
    assert len(used) == 2 and all(node_ids[u]["Resources"].get(SANDBOX_RESOURCE) for u in used)
    assert "ray_node" not in local[0]
    # the same stored rows: every sampled token, logprob, mask and reward; the context tokens
    # differ only by the workspace path the prompt names (a fresh temp name in every run)
    rows_local, rows_ray = _rows(tmp_path / "local"), _rows(tmp_path / "ray")
    assert rows_local.keys() == rows_ray.keys() and len(rows_local) == 3
    for key, row in rows_local.items():
        other = rows_ray[key]
        for col in ("turns", "reward", "group_id"):
            assert row[col] == other[col], (key, col)
        assert _sampled(row) == _sampled(other), key
        assert _context_text(qwen3, row) == _context_text(qwen3, other), key
    evals = sorted(p.name for p in (tmp_path / "ray" / "logs").iterdir())
    assert evals == sorted(f"{n}-r0.eval.json" for n in DEFAULT_TASKS)
    assert json.loads((tmp_path / "ray" / "logs" / "junit-mix-r0.eval.json").read_text())["reward"] == 1.0
    assert [p for p in cluster.scratch.iterdir()] == []


def _orphans() -> list[int]:
    return [pid for pid in processes() if cmdline(pid)[:2] == ["sleep", ORPHAN_MARK]]


async def test_sigkill_of_a_worker_node_mid_rollout_records_each_rollout_once(
    cluster: LocalCluster, tmp_path: Path, qwen3
) -> None:
    """Runs last in this module: it kills node ``a``."""
    assert not _orphans(), "leftover processes from an earlier test"
    names = ["alpha", "beta", "gamma", "delta"]
    run_dir = tmp_path / "run"
    args = _args(run_dir, "--ray", cluster.address, "--tasks-dir", str(pomless_tasks(tmp_path / "t", names)))
    args.rollouts_per_task = 2
    node_a = next(n for n in cluster.nodes if n.name == "a")
    killed: list[int] = []
    caught: list[int] = []

    def kill_when_a_rollout_runs_on_a() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            table = processes()
            below_a = {p.pid for p in descendants(node_a.proc.pid, table)}
            hits = [pid for pid in _orphans() if pid in below_a]
            if hits:
                caught.extend(hits)
                killed.extend(node_a.kill_ray_processes())
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=kill_when_a_rollout_runs_on_a, daemon=True)
    watcher.start()
    tok = qwen3
    results = await run_migration(
        args,
        Console(file=io.StringIO(), width=200),
        backend_factory=lambda a: (ScriptedBackend(tok, ShellWithBackgroundJob(tok), delay=0.2), tok),
    )
    watcher.join(timeout=5)
    assert caught and killed, "node a was never caught running a rollout"

    expected = sorted(f"{n}-r{k}" for n in names for k in range(2))
    assert sorted(r["rollout_id"] for r in results) == expected
    assert not [r for r in results if r.get("failed")], results
    lines = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted(r["rollout_id"] for r in lines) == expected, Counter(r["rollout_id"] for r in lines)
    store = TrajectoryStore(run_dir / "trajectories")
    assert sorted(t.rollout_id for t in store) == expected
    assert sorted(store.read_rows_table().column("rollout_id").to_pylist()) == expected
    assert sorted(p.name for p in (store.root / "rows").iterdir()) == [f"part-{r}.parquet" for r in expected]
    assert all(t.metadata["stop_reason"] == "completed" and len(t.turns) == 2 for t in store)
    # the rollout that died with node a ran again, on node b: the only live worker node
    alive = {n["NodeID"][:16] for n in ray.nodes() if n.get("Alive") and n["Resources"].get(SANDBOX_RESOURCE)}
    assert len(alive) == 1 and alive <= {r["ray_node"] for r in lines}
    # the killed attempt's sandboxed background job ends (reaper, bwrap --die-with-parent) ...
    deadline = time.monotonic() + 15
    while _orphans() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _orphans() == []
    assert all(not os.path.exists(f"/proc/{pid}") for pid in caught)
    # ... and its scratch directory was swept by the live node
    assert [p for p in cluster.scratch.iterdir()] == []
