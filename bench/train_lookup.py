"""``strands-art train --env lookup`` on several seeds, through the command: the recorded learning
reproduced, a killed run resumed, and synchronous vs asynchronous rollouts (``--max-staleness``).

What it shows (issue "Training as a tool"):

- **Learning through the command.** With the environment's recorded settings
  (``strands_art.envs.lookup.TRAIN_DEFAULTS``, the settings of ``bench/learning_tool.py``), held-out
  success (a held-out rollout whose reward is 1.0: one call, then the code) before vs after
  training, per seed; with ``--compare FILE`` (a recorded ``bench/learning_tool.py`` output) each
  seed's per-batch training reward is checked against that run (same loop, seeds and sampler: with
  ``--max-staleness 0`` they must be equal).
- **TensorBoard.** Each run's event files are read back with tensorboard's own reader
  (``EventAccumulator``) and must hold every metrics record once.
- **Kill and resume** (``--kill-seed S --reference DIR``): seed S is SIGKILLed (trainer and vLLM
  server) at a random point after its first checkpoint and finished with ``--resume``; its final
  adapter is compared byte for byte with the one of an uninterrupted run of the same command
  (``--reference``: that run's directory), and its metrics records (clock timings aside) too.
- **Asynchronous rollouts** (``--modes 0,1``): each seed runs once per ``--max-staleness`` value,
  back to back, the order alternating from seed to seed. With ``--pin`` the trainer process is
  pinned to ``--trainer-cores`` with one torch thread and the vLLM server's compute threads to
  ``--sampler-cores`` (``VLLM_CPU_OMP_THREADS_BIND``), so sampling and training do not compete for
  a core, as on a machine where the vLLM server has its own GPU. Wall time per update: from the
  moment the initial evaluation's record is written to the moment the last update's record is
  (the driver polls ``metrics.jsonl`` every second), divided by the updates; the ratio is
  synchronous over asynchronous, mean over seeds. ``--launch-after-step J`` runs the asynchronous
  modes with that flag (the next batch launched after the update's step J: less lag).

Each run is one ``strands-art train`` process (which starts its own vLLM server with
``--backend vllm``): runs go one after the other. A run directory that already holds a finished run
is not run again (its timing then comes from the file ``timing.json`` written beside it), so the
summary can be redone with the same command.

    python bench/train_lookup.py --run-root $RUN_ROOT --seeds 0,1,2 --modes 0,1 --pin \\
        --compare bench/results/learning-tool-2026-11-30.txt --plot bench/results/train-lookup-DATE.png

Needs ``.venv-vllm`` (scripts/bootstrap-vllm.sh) for ``--backend vllm``, ``taskset`` for ``--pin``,
``pip install tensorboard`` for the event-file check (without it the check is skipped, and said
so). About 15 min per run on 2 idle cores. Prints tables and ends with ``RESULT ...``; with
``--modes 0,K`` also the ratio per seed over the whole run and after the first update (which cannot
overlap: nothing was collected ahead of it), beside the bound ``(R + T) / max(R, T)`` of the
synchronous run's rollout and training seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from strands_art.training.metrics import read_metrics

REPO = Path(__file__).resolve().parent.parent
TIMING = "timing.json"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run-root", required=True, help="one run directory per (mode, seed) goes here: kK-seedS")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    p.add_argument(
        "--modes", default="0", help="comma-separated --max-staleness values (0: the recorded loop)"
    )
    p.add_argument(
        "--kill-seed", type=int, default=None, help="with --reference: the seed to SIGKILL and resume"
    )
    p.add_argument(
        "--reference", default=None, help="an uninterrupted run directory of the killed seed's command"
    )
    p.add_argument(
        "--kill-window",
        type=float,
        default=300.0,
        help="kill within this many seconds after the first checkpoint",
    )
    p.add_argument("--backend", default="vllm", choices=("vllm", "transformers"))
    p.add_argument("--threads", type=int, default=2, help="--threads of each train command (1 with --pin)")
    p.add_argument("--pin", action="store_true", help="trainer and vLLM compute on different cores")
    p.add_argument("--trainer-cores", default="0", help="with --pin: the trainer process's cores (taskset)")
    p.add_argument(
        "--sampler-cores", default="1", help="with --pin: vLLM's compute threads (VLLM_CPU_OMP_THREADS_BIND)"
    )
    p.add_argument(
        "--compare", default=None, help="a recorded bench/learning_tool.py output to check against"
    )
    p.add_argument("--plot", default=None, help="figure: training reward and held-out success per seed")
    p.add_argument(
        "--launch-after-step",
        type=int,
        default=0,
        help="the asynchronous modes' --launch-after-step J (run directories kK-jJ-seedS)",
    )
    p.add_argument("--extra", default="", help="more train flags, e.g. '--outer-batches 2' (changes the run)")
    args = p.parse_args(argv)
    if (args.kill_seed is None) != (args.reference is None):
        p.error("--kill-seed and --reference go together")
    if args.reference and not any(Path(args.reference, "checkpoints").glob("ob-*")):
        p.error(f"--reference {args.reference}: no checkpoints/ob-* there (a finished run directory)")
    return args


def run_name(args: argparse.Namespace, k: int, seed: int) -> str:
    """The run directory's name of one (mode, seed): ``kK-seedS``, ``kK-jJ-seedS`` with ``--launch-after-step J``."""
    late = f"-j{args.launch_after_step}" if k and args.launch_after_step else ""
    return f"k{k}{late}-seed{seed}"


def train_command(args: argparse.Namespace, run_dir: Path, seed: int, k: int) -> list[str]:
    """The command line of one run (with ``--pin``: under taskset, one torch thread)."""
    late = ["--launch-after-step", str(args.launch_after_step)] if k and args.launch_after_step else []
    cmd = [
        "strands-art", "train", "--env", "lookup", "--backend", args.backend, "--max-staleness", str(k),
        *late, "--threads", str(1 if args.pin else args.threads), "--seed", str(seed), "--no-progress",
        "--run-dir", str(run_dir), *args.extra.split(),
    ]  # fmt: skip
    return ["taskset", "-c", args.trainer_cores, *cmd] if args.pin else cmd


def run_env(args: argparse.Namespace) -> dict[str, str]:
    env = dict(os.environ)
    if args.pin:
        env["VLLM_CPU_OMP_THREADS_BIND"] = args.sampler_cores
    return env


def _exe(cmd: list[str]) -> list[str]:
    """``strands-art`` of this interpreter's environment when it is not on PATH."""
    i = cmd.index("strands-art")
    local = Path(sys.executable).parent / "strands-art"
    return [*cmd[:i], str(local) if local.exists() else "strands-art", *cmd[i + 1 :]]


def read_records(run_dir: Path) -> list[dict[str, Any]]:
    """The run's metrics records (none yet -> []; a line still being written is skipped)."""
    return read_metrics(run_dir / "metrics.jsonl")


def finished(run_dir: Path) -> bool:
    """A run whose settings say N outer batches and whose log has the evaluation after N."""
    cfg = run_dir / "train.json"
    if not cfg.exists():
        return False
    n = json.loads(cfg.read_text())["outer_batches"]
    return any(r.get("kind") == "eval" and r["outer_batch"] == n for r in read_records(run_dir))


def run_watched(
    args: argparse.Namespace, cmd: list[str], run_dir: Path, log: Path, kill_after: float | None = None
) -> dict[str, Any]:
    """Run ``cmd``, noting when each metrics record appears (polled every second). With
    ``kill_after``: SIGKILL its process group that many seconds after the first checkpoint.
    Returns ``{"appeared": [seconds since start per record], "rc", "killed_at"}``."""
    appeared: list[float] = []
    killed_at = None
    with log.open("a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        proc = subprocess.Popen(
            _exe(cmd),
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env=run_env(args),
            start_new_session=True,
        )
        t0, first_ckpt = time.monotonic(), None
        while True:
            done = proc.poll() is not None
            n = len(read_records(run_dir))
            appeared += [round(time.monotonic() - t0, 1)] * (n - len(appeared))
            if kill_after is not None and killed_at is None:
                if first_ckpt is None and any((run_dir / "checkpoints").glob("ob-*")):
                    first_ckpt = time.monotonic()
                if first_ckpt is not None and time.monotonic() - first_ckpt >= kill_after and not done:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    killed_at = round(time.monotonic() - t0)
                    break
            if done:
                break
            time.sleep(1.0)
    return {"appeared": appeared, "rc": proc.returncode, "killed_at": killed_at}


def per_update_s(records: list[dict[str, Any]], appeared: list[float], after_first: bool = False) -> float:
    """Wall seconds per update: first eval record to last train record, over the updates; with
    ``after_first``, first to last train record over the updates after the first (once the pipeline is
    full: the first update cannot overlap, nothing was collected ahead of it). Evaluations in between
    (``--eval-every``) are not training time: their ``eval_s`` is taken out. NaN when there are no
    such updates or no recorded arrival times."""
    trains = [i for i, r in enumerate(records) if r["kind"] == "train"]
    if after_first:
        start, n = (trains[0] if trains else 0), len(trains) - 1
    else:
        start, n = next(i for i, r in enumerate(records) if r["kind"] == "eval"), len(trains)
    if n < 1 or len(appeared) <= trains[-1]:
        return float("nan")
    evals = sum(r.get("eval_s", 0.0) for r in records[start + 1 : trains[-1]] if r["kind"] == "eval")
    return (appeared[trains[-1]] - appeared[start] - evals) / n


def overlap_bound(records: list[dict[str, Any]]) -> float:
    """The most overlap can buy for a synchronous run's updates after the first: mean over them of
    (rollout_s + train_s) / max(rollout_s, train_s) (both sides kept their synchronous speed)."""
    train = [r for r in records if r["kind"] == "train"][1:]
    if not train:
        return float("nan")
    return statistics.fmean(
        (r["rollout_s"] + r["train_s"]) / max(r["rollout_s"], r["train_s"]) for r in train
    )


def run_one(args: argparse.Namespace, root: Path, seed: int, k: int) -> dict[str, Any]:
    """One (mode, seed) run, or the finished one found; returns its timing record."""
    run_dir, log = root / run_name(args, k, seed), root / f"{run_name(args, k, seed)}.log"
    cmd = train_command(args, run_dir, seed, k)
    print(f"$ {' '.join(cmd)}", flush=True)
    if finished(run_dir):
        print(f"  finished run found in {run_dir}: not run again", flush=True)
        return json.loads((run_dir / TIMING).read_text()) if (run_dir / TIMING).exists() else {}
    if run_dir.exists():
        raise SystemExit(f"{run_dir} holds an unfinished run: resume it or remove it")
    got = run_watched(args, cmd, run_dir, log)
    if got["rc"] != 0:
        raise SystemExit(f"{run_dir}: strands-art train exited {got['rc']} (see {log})")
    timing = {"s_per_update": per_update_s(read_records(run_dir), got["appeared"]), "appeared": got["appeared"],
              "pinned": args.pin, "load_after": os.getloadavg()[0]}  # fmt: skip
    (run_dir / TIMING).write_text(json.dumps(timing))
    return timing


def kill_and_resume(args: argparse.Namespace, root: Path, seed: int) -> dict[str, Any]:
    """Seed ``seed`` with ``--max-staleness 0`` killed at a random point after its first checkpoint,
    resumed to the end, then compared with the uninterrupted ``--reference`` run."""
    from strands_art.training.metrics import TIMING_KEYS

    run_dir, log = root / f"killed-seed{seed}", root / f"killed-seed{seed}.log"
    delay = random.Random(seed).uniform(0.0, args.kill_window)
    if not finished(run_dir):
        if run_dir.exists():
            raise SystemExit(f"{run_dir} holds an unfinished run: remove it")
        got = run_watched(args, train_command(args, run_dir, seed, 0), run_dir, log, kill_after=delay)
        if got["killed_at"] is None:
            raise SystemExit(
                f"{run_dir}: the run ended (exit {got['rc']}) before the kill; lower --kill-window"
            )
        kill = {"killed_at_s": got["killed_at"], "records_at_kill": len(got["appeared"]),
                "checkpoints_at_kill": sorted(p.name for p in (run_dir / "checkpoints").glob("ob-*"))}  # fmt: skip
        resumed = run_watched(
            args,
            ["strands-art", "train", "--resume", "--no-progress", "--run-dir", str(run_dir)],
            run_dir,
            log,
        )
        if resumed["rc"] != 0:
            raise SystemExit(f"{run_dir}: --resume exited {resumed['rc']} (see {log})")
        (run_dir / "kill.json").write_text(json.dumps(kill))
    kill = json.loads((run_dir / "kill.json").read_text())
    ref = Path(args.reference)

    def final_adapter(d: Path) -> bytes:
        last = sorted((d / "checkpoints").glob("ob-*"))[-1]
        return (last / "adapter_model.safetensors").read_bytes()

    def clockless(d: Path) -> list[dict[str, Any]]:
        return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in read_records(d)]

    rows = lambda d: {p.name: p.read_text() for p in sorted((d / "rows").glob("*.jsonl"))}  # noqa: E731
    kill.update(
        adapter_identical=final_adapter(run_dir) == final_adapter(ref),
        records_identical=clockless(run_dir) == clockless(ref),
        rows_identical=rows(run_dir) == rows(ref),
        kill_delay_s=round(delay),
    )
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
    if not (run_dir / "tensorboard").is_dir():
        return "MISSING (no tensorboard/ directory)"
    acc = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    train = [(r["outer_batch"] + 1, r["reward_mean"]) for r in records if r.get("kind") == "train"]
    evals = [(r["outer_batch"], r["val_reward"]) for r in records if r.get("kind") == "eval"]
    got_train = [(e.step, e.value) for e in acc.Scalars("train/reward_mean")]
    got_eval = [(e.step, e.value) for e in acc.Scalars("eval/val_reward")]

    def same(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> bool:
        return len(a) == len(b) and all(
            s == t and abs(x - y) < 1e-6 for (s, x), (t, y) in zip(a, b, strict=True)
        )

    ok = same(got_train, train) and same(got_eval, evals)
    return f"{'ok' if ok else 'MISMATCH'} ({len(tags)} scalar tags, {len(got_train)} train + {len(got_eval)} eval points)"


def mean_std(xs: list[float]) -> tuple[float, float]:
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    modes = [int(k) for k in args.modes.split(",")]
    root = Path(args.run_root)
    root.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    timing: dict[tuple[int, int], dict[str, Any]] = {}
    for i, seed in enumerate(seeds):
        for k in modes if i % 2 == 0 else modes[::-1]:
            timing[k, seed] = run_one(args, root, seed, k)
            if timing[k, seed].get("appeared"):  # from the arrival times, with this file's rule
                records = read_records(root / run_name(args, k, seed))
                timing[k, seed]["s_per_update"] = per_update_s(records, timing[k, seed]["appeared"])
    kill = kill_and_resume(args, root, args.kill_seed) if args.kill_seed is not None else None

    from strands_art.training.metrics import plot_seeds, seed_summary

    recorded = recorded_rewards(Path(args.compare)) if args.compare else {}
    matches: list[bool] = []
    summary: dict[int, dict[str, Any]] = {}
    for k in modes:
        runs = {seed: read_records(root / run_name(args, k, seed)) for seed in seeds}
        late = f" --launch-after-step {args.launch_after_step}" if k and args.launch_after_step else ""
        print(
            f"\n--max-staleness {k}{late}{' (pinned: trainer cores ' + args.trainer_cores + ', vLLM cores ' + args.sampler_cores + ')' if args.pin else ''}"
        )
        print(
            f"seed  success before -> after   reward before -> after   s/update  dropped  batch rewards{'  (= recorded?)' if recorded and k == 0 else ''}"
        )
        dropped = total = 0
        for seed in seeds:
            ev = [r for r in runs[seed] if r["kind"] == "eval"]
            train = [r for r in runs[seed] if r["kind"] == "train"]
            rewards = [f"{r['reward_mean']:.3f}" for r in train]
            dropped += sum(int(r.get("stale_dropped", 0)) for r in train)
            total += sum(int(r["rollouts"]) for r in train)
            line = (
                f"{seed:>4}  {ev[0]['val_success']:.3f} -> {ev[-1]['val_success']:.3f}            "
                f"{ev[0]['val_reward']:.3f} -> {ev[-1]['val_reward']:.3f}          "
                f"{timing[k, seed].get('s_per_update', float('nan')):>6.0f}  "
                f"{sum(int(r.get('stale_dropped', 0)) for r in train):>7}  {rewards}"
            )
            if recorded and k == 0 and seed in recorded:
                same = recorded[seed] == rewards
                matches.append(same)
                line += f"  {'yes' if same else 'NO: ' + str(recorded[seed])}"
            print(line)
            print(
                f"      {len(train)} updates, {train[-1]['step']} optimizer steps {[r['optimizer_steps'] for r in train]}, "
                f"per update: rollouts {statistics.fmean(r['rollout_s'] for r in train):.0f}s, train "
                f"{statistics.fmean(r['train_s'] for r in train):.0f}s, waited "
                f"{statistics.fmean(r.get('rollout_wait_s', r['rollout_s']) for r in train):.0f}s; "
                f"policy lag max {max(r.get('policy_lag_max', 0) for r in train)}; "
                f"TensorBoard {tensorboard_check(root / run_name(args, k, seed), runs[seed])}"
            )
            if len(ev) > 2:  # --eval-every: every evaluation, after how many updates
                print(
                    "      held-out success "
                    + ", ".join(f"{r['outer_batch']}: {r['val_success']:.3f}" for r in ev)
                )
        succ = seed_summary(runs, key="val_success")
        summary[k] = {
            "succ": succ,
            "rew": seed_summary(runs),
            "end": mean_std([s["end"] for s in succ["seeds"]]),
            "s_per_update": mean_std(
                [timing[k, seed]["s_per_update"] for seed in seeds if "s_per_update" in timing[k, seed]]
            ),
            "dropped": dropped / total if total else 0.0,
            "steady": {
                seed: per_update_s(runs[seed], timing[k, seed].get("appeared", []), after_first=True)
                for seed in seeds
            },
        }
        print(
            f"held-out success {succ['reward_start']:.3f} -> {succ['reward_end']:.3f} (gain {succ['gain_mean']:.3f} "
            f"± {succ['gain_std']:.3f}, improved on {succ['improved']}/{succ['n']} seeds); "
            f"{summary[k]['s_per_update'][0]:.0f} ± {summary[k]['s_per_update'][1]:.0f} s per update"
        )
        if args.plot:
            path = (
                args.plot
                if len(modes) == 1
                else str(
                    Path(args.plot).with_stem(
                        f"{Path(args.plot).stem}-{run_name(args, k, 0).removesuffix('-seed0')}"
                    )
                )
            )
            plot_seeds(runs, path, eval_key="val_success")
            print(f"plot {path}")
    if kill is not None:
        print(
            f"\nkill and resume, seed {args.kill_seed} (--max-staleness 0): SIGKILL {kill['killed_at_s']}s after start "
            f"({kill['kill_delay_s']}s after the first checkpoint; {kill['records_at_kill']} records and checkpoints "
            f"{kill['checkpoints_at_kill']} on disk), then --resume to the end; against the uninterrupted run "
            f"{args.reference}: final adapter {'identical' if kill['adapter_identical'] else 'DIFFERENT'}, "
            f"metrics records (clock timings aside) {'identical' if kill['records_identical'] else 'DIFFERENT'}, "
            f"rows {'identical' if kill['rows_identical'] else 'DIFFERENT'}"
        )
    async_k = max(modes) if 0 in summary and len(modes) > 1 else None
    if async_k is not None:
        nan = float("nan")
        steady_ratio = {seed: summary[0]["steady"][seed] / summary[async_k]["steady"][seed] for seed in seeds}
        bound = {seed: overlap_bound(read_records(root / f"k0-seed{seed}")) for seed in seeds}
        print(
            f"\nsynchronous / asynchronous (--max-staleness {async_k}{' --launch-after-step ' + str(args.launch_after_step) if args.launch_after_step else ''}) seconds per update, per seed (same invocation)"
        )
        print("seed   whole run   after the first update   bound (R + T) / max(R, T) of the synchronous run")
        for seed in seeds:
            whole = timing[0, seed].get("s_per_update", nan) / timing[async_k, seed].get("s_per_update", nan)
            print(f"{seed:>4}   {whole:9.2f}   {steady_ratio[seed]:22.2f}   {bound[seed]:.2f}")
    print(f"wall {time.perf_counter() - t_start:.0f}s (this invocation)")
    base = summary[modes[0]]
    out = (
        f"RESULT success_start={base['succ']['reward_start']:.3f} success_end={base['succ']['reward_end']:.3f} "
        f"gain_mean={base['succ']['gain_mean']:.3f} gain_std={base['succ']['gain_std']:.3f} "
        f"improved_seeds={base['succ']['improved']}/{base['succ']['n']} reward_start={base['rew']['reward_start']:.3f} "
        f"reward_end={base['rew']['reward_end']:.3f} same_as_recorded={sum(matches)}/{len(matches)}"
    )
    if kill is not None:
        out += f" resume_adapter_identical={kill['adapter_identical']} resume_records_identical={kill['records_identical']}"
    if async_k is not None:
        k = async_k
        sync, asyn = summary[0], summary[k]
        out += (
            f" updates_per_hour_ratio={sync['s_per_update'][0] / asyn['s_per_update'][0]:.2f} "
            f"success_sync={sync['end'][0]:.3f} success_async={asyn['end'][0]:.3f} "
            f"dropped_fraction={asyn['dropped']:.3f} success_sync_std={sync['end'][1]:.3f} "
            f"success_async_std={asyn['end'][1]:.3f} s_per_update_sync={sync['s_per_update'][0]:.0f} "
            f"s_per_update_async={asyn['s_per_update'][0]:.0f} async_k={k} launch_after_step={args.launch_after_step}"
        )
        steady = mean_std(list(steady_ratio.values()))
        out += (
            f" updates_per_hour_ratio_steady={steady[0]:.2f} updates_per_hour_ratio_steady_std={steady[1]:.2f}"
            f" overlap_bound={statistics.fmean(bound.values()):.2f}"
        )
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
