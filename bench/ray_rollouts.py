"""Rollouts per hour of ``strands-art migrate`` in-process vs through Ray (``--ray``), side by side.

Both modes run the same rollouts with the same ``--concurrency`` on this machine: the bundled
default tasks (compiler-props, junit-mix, multi-module), played by the scripted reference policy
(real Qwen3 tokenizer through ARTModel and the gateway; ``cat pom.xml``, the patched files, a final
answer) and scored by real sandboxed Maven builds under JDK 17. Runs alternate (local, ray, ray,
local, ...) so that the load of a shared machine hits both alike. The Ray mode is the ``--ray``
path a user gets without an address: a local cluster started once in this process (its start-up
is timed and reported, not counted per run), each rollout a Ray task in a locked scratch directory
with its own reaper, the trajectory and results committed by this driver.

    python bench/ray_rollouts.py [--rounds 2] [--concurrency 2]

Prints the rollouts/hour of each mode, the per-rollout split (sampling, agent tools, evaluation
build, Ray overhead), the driver's commit cost, a table of what N machines would give, and ends
with ``RESULT ray_overhead=<fraction> ...`` (ray wall / in-process wall - 1 over all runs).
The scripted policy samples in ~0 s; a real model adds its sampling time per rollout (the table
uses the llama.cpp split recorded in bench/results/migrate-2026-11-30.txt).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
# the Ray workers unpickle the scripted policy from support.migrate_script (tests/support/)
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH")) if p
)

from rich.console import Console  # noqa: E402
from support.migrate_script import PatchThenAnswer, patched_files  # noqa: E402

from strands_art.backends.scripted import ScriptedBackend  # noqa: E402
from strands_art.cli import build_parser  # noqa: E402
from strands_art.envs.migrationbench.run.runner import run_migration  # noqa: E402
from strands_art.envs.migrationbench.run.runner_args import DEFAULT_TASKS  # noqa: E402
from strands_art.envs.migrationbench.tasks.tasks import load_tasks  # noqa: E402
from strands_art.registry import load_tokenizer  # noqa: E402
from strands_art.store import TrajectoryStore  # noqa: E402

LLAMACPP_SAMPLING_S = (380.0, 398.0, 50.0)
"""Sampling seconds per rollout of the three default tasks with Qwen2.5-Coder-1.5B on llama.cpp,
2 busy cores (bench/results/migrate-2026-11-30.txt); used only for the N-machine table."""


def run_once(mode: str, work: Path, tok, player, concurrency: int) -> tuple[float, list[dict]]:
    run_dir = work / f"{mode}-{time.monotonic_ns()}"
    argv = ["migrate", "--model", "qwen3-scripted", "--run-dir", str(run_dir), "--seed", "7"]
    argv += ["--concurrency", str(concurrency), "--max-turns", "8", "--max-new-tokens", "4096", "--no-plot"]
    if mode == "ray":
        argv += ["--ray"]
    args = build_parser().parse_args(argv)
    t0 = time.monotonic()
    results = asyncio.run(
        run_migration(
            args,
            Console(file=io.StringIO(), width=200),
            backend_factory=lambda a: (ScriptedBackend(tok, player), tok),
        )
    )
    wall = time.monotonic() - t0
    assert [r["reward"] for r in results] == [1.0] * len(DEFAULT_TASKS), results
    assert not any(r.get("failed") for r in results)
    return wall, results


def commit_cost_ms(work: Path, run_dirs: list[Path], repeats: int = 20) -> float:
    """Median milliseconds the driver spends committing one rollout (trajectory append: Parquet
    part + JSONL line, fsynced), measured on the trajectories these runs stored."""
    trajs = [t for d in run_dirs for t in TrajectoryStore(d / "trajectories")]
    store = TrajectoryStore(work / "commit-probe")
    times = []
    for i in range(repeats):
        t = trajs[i % len(trajs)]
        t.rollout_id = f"probe-{i}"
        t0 = time.perf_counter()
        store.append(t)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2, help="runs of each mode (default 2)")
    p.add_argument("--concurrency", type=int, default=2, help="rollouts in flight, both modes (default 2)")
    a = p.parse_args()
    tok = load_tokenizer("qwen3")
    work = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    tasks = load_tasks(None, list(DEFAULT_TASKS))
    player = PatchThenAnswer(tok, {t.name: (t, patched_files(t, work / "patched")) for t in tasks})

    import ray

    from strands_art.envs.migrationbench.run.ray_runner import connect

    t0 = time.monotonic()
    connect("local", slots=a.concurrency)
    start_s = time.monotonic() - t0
    print(
        f"local Ray cluster started in {start_s:.1f} s (ray {ray.__version__}); {len(DEFAULT_TASKS)} rollouts a run"
    )

    walls: dict[str, list[float]] = {"local": [], "ray": []}
    records: dict[str, list[dict]] = {"local": [], "ray": []}
    order = []
    for r in range(a.rounds):
        order += ["local", "ray"] if r % 2 == 0 else ["ray", "local"]
    for mode in order:
        wall, results = run_once(mode, work, tok, player, a.concurrency)
        walls[mode].append(wall)
        records[mode].extend(results)
        mean_wall = statistics.mean(x["times"]["wall_s"] for x in results)
        print(f"  {mode:5s}: {wall:6.1f} s for {len(results)} rollouts (rollout wall mean {mean_wall:.1f} s)")

    n = {m: len(records[m]) for m in walls}
    rate = {m: n[m] / sum(walls[m]) * 3600 for m in walls}
    overhead = sum(walls["ray"]) / sum(walls["local"]) - 1
    print(
        f"rollouts/hour: in-process {rate['local']:.0f}, ray {rate['ray']:.0f} (concurrency {a.concurrency})"
    )

    def mean(mode: str, key: str) -> float:
        return statistics.mean(x["times"].get(key, 0.0) for x in records[mode])

    build_s, tools_s, sample_s = (
        mean("local", "evaluation_s"),
        mean("local", "tools_s"),
        mean("local", "sampling_s"),
    )
    other_s = mean("local", "wall_s") - build_s - tools_s - sample_s
    # what Ray adds to one rollout's slot time: the extra run wall x slots / rollouts
    ray_s = (sum(walls["ray"]) - sum(walls["local"])) * a.concurrency / n["ray"]
    in_worker = mean("ray", "wall_s") - mean("local", "wall_s")
    run_dirs = [d for d in work.iterdir() if d.name.startswith("ray-")]
    commit_ms = commit_cost_ms(work, run_dirs)
    print(
        f"per rollout (s): sampling {sample_s:.2f} (scripted), agent tools {tools_s:.2f}, evaluation build "
        f"{build_s:.1f}, gateway/agent/other {other_s:.2f}; Ray adds {ray_s:.2f} per rollout slot "
        f"({in_worker:+.2f} inside the worker's rollout wall); driver commit {commit_ms:.1f} ms"
    )

    slot_s = tools_s + build_s + other_s
    llama = statistics.mean(LLAMACPP_SAMPLING_S)
    driver_cap = 3600 / (commit_ms / 1000)
    print(
        "\nN machines like this one (2 cores, 2 rollout slots each), rollouts/hour; per-rollout cost "
        "= sampling + tools + build + other + Ray overhead; the driver commits serially "
        f"(cap {driver_cap:.0f}/h at {commit_ms:.1f} ms a rollout)"
    )
    print(f"{'N':>5} | {'scripted (0 s sampling)':>24} | {f'llama.cpp 1.5B ({llama:.0f} s sampling)':>32}")
    for machines in (1, 4, 16, 64, 256):
        cells = []
        for sampling in (sample_s, llama):
            per = slot_s + sampling + max(ray_s, 0.0)
            cells.append(min(machines * a.concurrency * 3600 / per, driver_cap))
        print(f"{machines:>5} | {cells[0]:>24.0f} | {cells[1]:>32.0f}")
    shutil.rmtree(work, ignore_errors=True)
    print(
        f"RESULT ray_overhead={overhead:.3f} rollouts_per_hour_local={rate['local']:.1f} "
        f"rollouts_per_hour_ray={rate['ray']:.1f} ray_start_s={start_s:.1f} ray_s_per_rollout={ray_s:.2f} "
        f"build_s={build_s:.1f} commit_ms={commit_ms:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
