"""``strands-art train --env lookup`` on several seeds, through the command, with one seed killed
(SIGKILL, at a random point after its first checkpoint) and resumed with ``--resume``.

What it shows (issue "Training as a tool"): the command with the environment's recorded settings
(``strands_art.envs.lookup.TRAIN_DEFAULTS``, the settings of ``bench/learning_tool.py``) learns:
held-out success (a held-out rollout whose reward is 1.0: one call, then the code) before vs after
training, on every seed; its TensorBoard event files hold every metrics record (read back with
``tensorboard``'s own reader); the killed-and-resumed seed ends with the records an uninterrupted
run gives. With ``--compare FILE`` (a recorded ``bench/learning_tool.py`` output) it also checks the
per-batch training reward of each seed against that run: both go through the same loop, seeds and
sampler, so they must be equal.

Each seed is one ``strands-art train`` process (which starts its own vLLM server with
``--backend vllm``): the seeds run one after the other. A seed whose run directory already holds a
finished run (its final evaluation written) is not run again, so the summary can be redone with
the same command.

    python bench/train_lookup.py --run-root $RUN_ROOT --seeds 0,1,2 --kill-seed 1 \\
        --compare bench/results/learning-tool-2026-11-30.txt --plot bench/results/train-lookup-DATE.png

Needs: ``.venv-vllm`` (scripts/bootstrap-vllm.sh) for ``--backend vllm``; ``pip install tensorboard``
for the event-file check (without it the check is skipped, and said so). About 35 min per seed
on 2 cores. Prints a table and ends with ``RESULT ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run-root", required=True, help="one run directory per seed goes here (seedN)")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    p.add_argument("--kill-seed", type=int, default=None, help="the seed to SIGKILL once and resume")
    p.add_argument(
        "--kill-window", type=float, default=600.0, help="kill within this many seconds after the first checkpoint"
    )
    p.add_argument("--backend", default="vllm", choices=("vllm", "transformers"))
    p.add_argument("--threads", type=int, default=2, help="--threads of each train command")
    p.add_argument("--max-staleness", type=int, default=0, help="0: the recorded (synchronous) loop")
    p.add_argument("--compare", default=None, help="a recorded bench/learning_tool.py output to check against")
    p.add_argument("--plot", default=None, help="figure: training reward and held-out success per seed")
    p.add_argument("--extra", default="", help="more train flags, e.g. '--outer-batches 2' (changes the run)")
    return p.parse_args(argv)


def train_command(args: argparse.Namespace, run_dir: Path, seed: int) -> list[str]:
    """The ``strands-art train`` command line of one seed."""
    return [
        "strands-art", "train", "--env", "lookup", "--backend", args.backend,
        "--max-staleness", str(args.max_staleness), "--threads", str(args.threads),
        "--seed", str(seed), "--no-progress", "--run-dir", str(run_dir), *args.extra.split(),
    ]  # fmt: skip


def read_records(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "metrics.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def finished(run_dir: Path) -> bool:
    """A run whose settings say N outer batches and whose log has the evaluation after N."""
    cfg = run_dir / "train.json"
    if not cfg.exists():
        return False
    n = json.loads(cfg.read_text())["outer_batches"]
    return any(r.get("kind") == "eval" and r["outer_batch"] == n for r in read_records(run_dir))


def _run(cmd: list[str], log: Path) -> int:
    exe = shutil.which(cmd[0]) or str(Path(sys.executable).parent / cmd[0])
    with log.open("a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        return subprocess.run([exe, *cmd[1:]], stdout=out, stderr=subprocess.STDOUT, cwd=REPO).returncode


def run_killed_then_resumed(args: argparse.Namespace, run_dir: Path, seed: int, log: Path) -> dict[str, Any]:
    """Start the seed's run, SIGKILL its whole process group (trainer and vLLM server) at a random
    point after its first checkpoint, then ``--resume`` it to the end. Returns when/where it died."""
    cmd = train_command(args, run_dir, seed)
    exe = shutil.which(cmd[0]) or str(Path(sys.executable).parent / cmd[0])
    delay = random.Random(seed).uniform(0.0, args.kill_window)
    with log.open("a") as out:
        out.write(f"$ {' '.join(cmd)}   # killed {delay:.0f}s after the first checkpoint\n")
        out.flush()
        proc = subprocess.Popen(
            [exe, *cmd[1:]], stdout=out, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True
        )
        t0 = time.monotonic()
        while not (run_dir / "checkpoints").exists() or not any((run_dir / "checkpoints").glob("ob-*")):
            if proc.poll() is not None:
                raise RuntimeError(f"seed {seed}: the run ended (exit {proc.returncode}) before its first checkpoint")
            time.sleep(2)
        time.sleep(delay)
        if proc.poll() is not None:
            raise RuntimeError(f"seed {seed}: the run ended before the kill; raise --kill-window's bound")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        killed_at = time.monotonic() - t0
    records = read_records(run_dir)
    kill = {
        "after_s": round(killed_at),
        "train_records": sum(1 for r in records if r.get("kind") == "train"),
        "checkpoints": sorted(p.name for p in (run_dir / "checkpoints").glob("ob-*")),
    }
    rc = _run(["strands-art", "train", "--resume", "--no-progress", "--run-dir", str(run_dir)], log)
    if rc != 0:
        raise RuntimeError(f"seed {seed}: --resume exited {rc} (see {log})")
    return kill


def recorded_rewards(path: Path) -> dict[int, list[str]]:
    """Per-seed batch rewards of a bench/learning_tool.py output (its first run of each seed), as
    printed there (3 decimals)."""
    out: dict[int, list[str]] = {}
    for m in re.finditer(r"^\[seed (\d+)\] batch (\d+): reward ([0-9.]+)", path.read_text(), re.M):
        seed, batch = int(m[1]), int(m[2])
        got = out.setdefault(seed, [])
        if batch == len(got):
            got.append(m[3])
    return out


def tensorboard_check(run_dir: Path, records: list[dict[str, Any]]) -> str:
    """Each train record's ``reward_mean`` and each eval's ``val_reward`` appear exactly once in the
    run's event files (read with tensorboard's EventAccumulator)."""
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        return "skipped (pip install tensorboard)"
    acc = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    train = [(r["outer_batch"] + 1, r["reward_mean"]) for r in records if r.get("kind") == "train"]
    evals = [(r["outer_batch"], r["val_reward"]) for r in records if r.get("kind") == "eval"]
    got_train = [(e.step, e.value) for e in acc.Scalars("train/reward_mean")]
    got_eval = [(e.step, e.value) for e in acc.Scalars("eval/val_reward")]

    def same(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> bool:
        return len(a) == len(b) and all(s == t and abs(x - y) < 1e-6 for (s, x), (t, y) in zip(a, b))

    ok = same(got_train, train) and same(got_eval, evals)
    return f"{'ok' if ok else 'MISMATCH'} ({len(tags)} scalar tags, {len(got_train)} train + {len(got_eval)} eval points)"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    root = Path(args.run_root)
    root.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    kills: dict[int, dict[str, Any]] = {}
    for seed in seeds:
        run_dir, log = root / f"seed{seed}", root / f"seed{seed}.log"
        print(f"$ {' '.join(train_command(args, run_dir, seed))}", flush=True)
        if finished(run_dir):
            print(f"[seed {seed}] finished run found in {run_dir}: not run again", flush=True)
            continue
        if run_dir.exists():
            raise SystemExit(f"{run_dir} holds an unfinished run: resume it or remove it")
        if seed == args.kill_seed:
            kills[seed] = run_killed_then_resumed(args, run_dir, seed, log)
            print(f"[seed {seed}] killed and resumed: {kills[seed]}", flush=True)
        elif _run(train_command(args, run_dir, seed), log) != 0:
            raise SystemExit(f"seed {seed}: strands-art train failed (see {log})")

    from strands_art.training.metrics import plot_seeds, seed_summary

    runs = {seed: read_records(root / f"seed{seed}") for seed in seeds}
    recorded = recorded_rewards(Path(args.compare)) if args.compare else {}
    print(f"\nseed  success before -> after   reward before -> after   batch rewards{'  (= recorded?)' if recorded else ''}")
    matches = []
    for seed in seeds:
        ev = [r for r in runs[seed] if r["kind"] == "eval"]
        train = [r for r in runs[seed] if r["kind"] == "train"]
        rewards = [f"{r['reward_mean']:.3f}" for r in train]
        line = (
            f"{seed:>4}  {ev[0]['val_success']:.3f} -> {ev[-1]['val_success']:.3f}            "
            f"{ev[0]['val_reward']:.3f} -> {ev[-1]['val_reward']:.3f}             {rewards}"
        )
        if seed in recorded:
            same = recorded[seed] == rewards
            matches.append(same)
            line += f"  {'yes' if same else 'NO: ' + str(recorded[seed])}"
        print(line)
        s_per_update = statistics.fmean(r["rollout_s"] + r["train_s"] for r in train)
        print(
            f"      {len(train)} updates, {train[-1]['step']} optimizer steps, "
            f"rollouts {statistics.fmean(r['rollout_s'] for r in train):.0f}s + train "
            f"{statistics.fmean(r['train_s'] for r in train):.0f}s = {s_per_update:.0f}s per update; "
            f"TensorBoard {tensorboard_check(root / f'seed{seed}', runs[seed])}"
        )
    for seed, k in kills.items():
        print(f"seed {seed}: SIGKILL {k['after_s']}s after start ({k['train_records']} updates logged, checkpoints "
              f"{k['checkpoints']}), resumed to the end")  # fmt: skip
    succ = seed_summary(runs, key="val_success")
    rew = seed_summary(runs)
    if args.plot:
        plot_seeds(runs, args.plot, eval_key="val_success")
        print(f"plot {args.plot}")
    print(f"wall {time.perf_counter() - t_start:.0f}s (this invocation)")
    print(
        f"RESULT success_start={succ['reward_start']:.3f} success_end={succ['reward_end']:.3f} "
        f"gain_mean={succ['gain_mean']:.3f} gain_std={succ['gain_std']:.3f} "
        f"improved_seeds={succ['improved']}/{succ['n']} reward_start={rew['reward_start']:.3f} "
        f"reward_end={rew['reward_end']:.3f} killed_seed={','.join(map(str, kills)) or 'none'} "
        f"same_as_recorded={sum(matches)}/{len(matches)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
