"""GRPO on the migration agent itself: ``strands-art train --env migrationbench`` on generated tasks,
held-out migration reward before and after, on several seeds (issue "Train the migration agent").

Each seed is one ``strands-art train`` process with the recorded settings (:data:`FLAGS`, then
``--extra``), run one after the other (each starts its own vLLM server; two at once would share
the same 2 cores and not fit memory with their Maven builds). A run directory that already holds
a finished run is not run again and one that holds a stopped run is resumed (``--resume``), so
the summary can be redone with the same command; ``--table-only`` summarizes what is there,
finished or not (a stopped run is reported at its last evaluation and said so).

What it prints, per seed and over seeds:

- held-out reward (mean over the held-out rollouts, 0 / 0.5 / 1.0 each) at every evaluation and
  the change from the first to the last; a seed *improved* when its last evaluation is above its
  first by more than the seeds' spread (the standard deviation over seeds of the first
  evaluation or of the last, whichever is larger; 0 with one seed). Before training every seed
  has the same weights (the LoRA update starts at zero), so the first evaluations differ only by
  sampling: their spread is the evaluation's own noise;
- training reward per outer batch (the GRPO groups' mean), groups whose rewards all tie
  (``zero_advantage_groups``: no gradient from them), and what an update costs: rollout seconds,
  training seconds, evaluation seconds;
- per kind (the task name's prefix): held-out reward at the first and the last evaluation, from
  the rollout records (``RUN_DIR/env/rollouts/results.jsonl``);
- with ``--transfer-tasks DIR``, the transfer: tasks of kinds no training or held-out task has
  (``make-tasks --split heldout-kind``: base64; or real MigrationBench repositories,
  ``make-tasks --from-records``, each its own kind) join the held-out evaluation (the bench copies
  both sets into ``RUN_ROOT/eval-tasks`` and their kinds into ``RUN_ROOT/transfer-kinds.json``), and
  their reward is printed apart at every evaluation (``held-out kind base64 after U updates: ...``,
  or ``transfer tasks (K kinds) after U updates: ...``). The held-out reward of a seed then counts
  only the trained kinds' rollouts, so it stays comparable with seeds evaluated without it;
- an audit of the successful rollouts (reward 1.0, training and held-out): the files each
  changed (``edited_files`` of the record: the workspace compared with the task's ``repo/``),
  counted by path pattern, and every rollout that changed a test source or deleted a file listed.

Ends with ``RESULT seeds=N updates=U heldout_before=m+-s heldout_after=m+-s improved_seeds=K/N
rollout_s=... train_s=... eval_s=...`` (and ``transfer_before=m+-s transfer_after=m+-s
transfer_seeds=N`` with a held-out kind); ``--plot FILE`` draws the curves (training reward per
outer batch, held-out reward at each evaluation, one colour per seed).

    python bench/migration_learning.py --run-root $RUN_ROOT --train-tasks $TASKS/train \\
        --eval-tasks $TASKS/eval --seeds 0,1 --plot bench/results/migration-learning-DATE.png

Needs ``.venv-vllm`` (scripts/bootstrap-vllm.sh), Java 17 + Maven and bubblewrap
(scripts/setup-system.sh), and task directories from ``strands-art make-tasks``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from migration_recorded import recorded_seeds  # --recorded files
from migration_transfer import (  # --transfer-tasks
    combined_eval_tasks,
    kind_of,
    transfer_kinds,
    transfer_label,
)
from run_reader import read_settings
from run_settings import HelpFormatter, differences, flag_problem
from train_lookup import finished  # a run whose log has the evaluation after its last outer batch

from strands_art.envs.migrationbench.generate.generate import HELDOUT_KIND
from strands_art.training.metrics import read_metrics

FLAGS = (
    "--model qwen2.5-coder-0.5b --backend vllm --prompt compact-no-recipe --max-turns 12 "
    "--temperature 0.7 --max-new-tokens 512 --outer-batches 3 --prompt-batch 2 --rollouts-per-prompt 4 "
    "--ppo-mini-batch 1 --epochs 1 --lr 3e-4 --warmup-steps 0 --kl-coef 0 --gradient-checkpointing "
    "--micro-batch-tokens 512 --max-staleness 0 --eval-every 0 --eval-samples 2 --eval-temperature 0.7 "
    "--concurrency 4 --checkpoint-every 1"
)
"""The recorded settings (bench/results/migration-learning-2026-12-01.txt): Qwen2.5-Coder-0.5B, the
compact system prompt without the spelled calls (base success 25 % of one draw per train task,
bench/results/migration-base-2026-12-01.txt), 2 tasks x 4 rollouts per outer batch, one optimizer
step per task (2 per update), synchronous, held-out evaluation before and after (2 rollouts per
held-out task at the rollout temperature). Activation checkpointing, not prefix sharing: with
``--share-prefix`` (no checkpointing) one update of 8 rows of up to 2,948 tokens peaked at 17.6 GiB
resident and the run was OOM-killed beside its vLLM server on 24 GiB; checkpointed, 9.1 GiB. An update
with a 5,549-token row still peaked at 17.9 GiB checkpointed until the trainer projected the vocabulary
only before sampled tokens: 9.7 GiB (bench/results/update-memory-2026-12-02.txt)."""

TEST_SOURCE = re.compile(r"(^|/)src/test/")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=HelpFormatter,
        epilog=f"Each seed: strands-art train --env migrationbench FLAGS, --extra, --seed S, where\nFLAGS = {FLAGS}",
    )
    p.add_argument("--run-root", required=True, help="one run directory per seed goes here: seedS")
    p.add_argument("--train-tasks", help="training task directories (make-tasks); not with --table-only")
    p.add_argument("--eval-tasks", help="held-out task directories (make-tasks); not with --table-only")
    p.add_argument(
        "--transfer-tasks", metavar="DIR",
        help=f"task directories of kinds no --eval-tasks task has (make-tasks --split heldout-kind: {HELDOUT_KIND}; "
        "or real repositories, make-tasks --from-records): evaluated with --eval-tasks, their reward printed "
        "apart (the transfer)",
    )  # fmt: skip
    p.add_argument("--seeds", default="0,1", help="comma-separated seeds")
    p.add_argument("--extra", default="", help="more `strands-art train` flags, after FLAGS")
    p.add_argument("--table-only", action="store_true", help="summarize the run directories; run nothing")
    p.add_argument("--plot", default=None, help="write the curves to this PNG")
    p.add_argument(
        "--recorded", action="append", default=[], metavar="FILE",
        help="a results file of this bench (bench/results/migration-learning-*.txt) with the same settings: its "
        "finished seeds join the over-seed summary and the figure; a seed with a run directory under --run-root, "
        "or in two files, is refused",
    )  # fmt: skip
    args = p.parse_args(argv)
    if (why := flag_problem([*FLAGS.split(), *args.extra.split()])) is not None:
        p.error(f"--extra {args.extra!r}: {why}")
    if Path(args.run_root).exists() and not Path(args.run_root).is_dir():
        p.error(f"--run-root {args.run_root}: not a directory (a file is there)")
    if not args.table_only and not (args.train_tasks and args.eval_tasks):
        p.error("--train-tasks and --eval-tasks are required unless --table-only")
    if not re.fullmatch(r"\d+(,\d+)*", args.seeds):
        p.error(f"--seeds {args.seeds!r}: comma-separated non-negative integers, e.g. 0,1")
    for flag in ("train_tasks", "eval_tasks", "transfer_tasks"):
        value = getattr(args, flag)
        if value is not None and not args.table_only and not Path(value).is_dir():
            p.error(
                f"--{flag.replace('_', '-')} {value}: not a directory (make it with strands-art make-tasks)"
            )
    return args


def train_command(args: argparse.Namespace, run_dir: Path, seed: int) -> list[str]:
    """The command line of one seed's run (``--resume`` when its directory holds a stopped run)."""
    exe = Path(sys.executable).parent / "strands-art"
    head = [str(exe) if exe.exists() else "strands-art", "train"]
    if (run_dir / "train.json").exists():
        return [*head, "--resume", "--run-dir", str(run_dir), "--no-progress"]
    return [
        *head, "--env", "migrationbench", "--train-tasks", args.train_tasks, "--eval-tasks", args.eval_tasks,
        *FLAGS.split(), *args.extra.split(), "--seed", str(seed), "--run-dir", str(run_dir), "--no-progress",
    ]  # fmt: skip


def rollout_records(run_dir: Path) -> list[dict[str, Any]]:
    """The rollout records of the run (``env/rollouts/results.jsonl``), the last one per rollout id
    (a resumed run redoes the outer batch it was killed in and appends its rollouts again); a torn
    line is skipped."""
    path = run_dir / "env" / "rollouts" / "results.jsonl"
    out: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            out[rec["rollout_id"]] = rec
    return list(out.values())


def eval_batch(rollout_id: str) -> int | None:
    """``eval-b4-TASK-r1`` -> 4; None for a training rollout."""
    m = re.match(r"eval-b(\d+)-", rollout_id)
    return int(m.group(1)) if m else None


def mean_n(xs: list[float]) -> tuple[float, int]:
    """(mean, count); mean NaN for no values."""
    return (statistics.fmean(xs) if xs else float("nan")), len(xs)


def mean_std(xs: list[float]) -> tuple[float, float]:
    return (statistics.fmean(xs) if xs else float("nan")), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def summarize_seed(run_dir: Path, transfer: frozenset[str] = frozenset({HELDOUT_KIND})) -> dict[str, Any]:
    """One seed's evaluations, training records and rollouts; the rollouts of the ``transfer`` kinds
    are counted apart from the held-out reward (``transfer``: [(updates, reward, rollouts)]).

    Raises:
        ValueError: an evaluation's rollout records are not all in results.jsonl (the held-out
            reward could not be split by kind).
    """
    records = read_metrics(run_dir / "metrics.jsonl")
    evals = [r for r in records if r.get("kind") == "eval"]
    trains = [r for r in records if r.get("kind") == "train"]
    rollouts = rollout_records(run_dir)
    per_kind: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for rec in rollouts:
        b = eval_batch(rec.get("rollout_id", ""))
        if b is not None:
            per_kind[b][kind_of(rec["task"])].append(float(rec.get("reward", 0.0)))
    evals_out = [(r["outer_batch"], r["val_reward"], r.get("val_failed", 0), r.get("eval_s")) for r in evals]
    kinds, transfer_out = transfer, []
    if any(k in per_kind[b] for b, *_ in evals_out for k in kinds):
        # the transfer set was evaluated too: the held-out reward counts the trained kinds only, from the
        # rollout records, so every evaluation's records must be all there
        for r in evals:
            b, got = r["outer_batch"], per_kind[r["outer_batch"]]
            n = sum(len(xs) for xs in got.values())
            n_t = sum(len(xs) for k, xs in got.items() if k in kinds)
            if n != r.get("val_rollouts") or not n_t or n_t == n:
                raise ValueError(
                    f"{run_dir}: the evaluation after {b} updates logged {r.get('val_rollouts')} rollouts, "
                    f"results.jsonl holds {n} ({transfer_label(kinds)}: {n_t}): the held-out "
                    "reward cannot be split by kind"
                )
        transfer_out = [
            (b, *mean_n([x for k, xs in per_kind[b].items() if k in kinds for x in xs]))
            for b, *_ in evals_out
        ]
        evals_out = [
            (
                b,
                mean_n([x for k, xs in per_kind[b].items() if k not in kinds for x in xs])[0],
                failed,
                eval_s,
            )
            for b, _, failed, eval_s in evals_out
        ]
    return {
        "dir": run_dir,
        "finished": finished(run_dir),
        "evals": evals_out,
        "transfer": transfer_out,
        "transfer_label": transfer_label(kinds),
        "trains": trains,
        "per_kind": per_kind,
        "rollouts": rollouts,
        "rollout_file": (run_dir / "env" / "rollouts" / "results.jsonl").exists(),
    }


def path_pattern(path: str) -> str:
    """``pom.xml`` and ``*/pom.xml`` (a module's) stay as patterns; any other path as it is."""
    return path if path == "pom.xml" or not path.endswith("/pom.xml") else "*/pom.xml"


def audit(rollouts: list[dict[str, Any]]) -> list[str]:
    """Lines: what the successful rollouts changed, by path pattern, and the suspicious ones."""
    good = [r for r in rollouts if float(r.get("reward", 0.0)) == 1.0]
    files: Counter[str] = Counter()
    sets: Counter[str] = Counter()
    flagged = []
    for r in good:
        ed = r["edited_files"]
        paths = ed["modified"] + ed["added"]
        files.update(path_pattern(p) for p in paths)
        sets[", ".join(sorted({path_pattern(p) for p in paths})) or "(nothing)"] += 1
        if ed["deleted"] or any(TEST_SOURCE.search(p) for p in paths) or ed["truncated"]:
            flagged.append(
                f"    {r['rollout_id']}: modified {ed['modified']} added {ed['added']} deleted {ed['deleted']}"
            )
    lines = [f"successful rollouts (reward 1.0): {len(good)}, by what they changed:"]
    lines += [f"  {n:3d} x {s}" for s, n in sets.most_common()]
    lines.append(
        "  files changed over those rollouts: " + ", ".join(f"{p} {n}" for p, n in files.most_common())
    )
    lines.append(f"  that changed a test source, deleted a file or changed too many files: {len(flagged)}")
    return lines + flagged


def plot(seeds: dict[int, dict[str, Any]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for seed, s in sorted(seeds.items()):
        label = f"seed {seed}" + (" (recorded)" if "recorded" in s else "")
        xs = [r["outer_batch"] + 1 for r in s["trains"]]
        # markers only: consecutive outer batches draw different tasks, a line would suggest a trend
        line = ax1.plot(xs, [r["reward_mean"] for r in s["trains"]], "o", label=label)[0]
        ax2.plot([e[0] for e in s["evals"]], [e[1] for e in s["evals"]], marker="s", color=line.get_color(),
                 label=label)  # fmt: skip
        if s.get("transfer"):
            ax2.plot([t[0] for t in s["transfer"]], [t[1] for t in s["transfer"]], marker="x", linestyle="--",
                     color=line.get_color(), label=f"{label}, {s.get('transfer_label', 'transfer')}")  # fmt: skip
    ax1.set(xlabel="outer batch (update)", ylabel="training reward (group mean)", ylim=(-0.05, 1.05),
            title="GRPO training reward")  # fmt: skip
    ax2.set(xlabel="updates", ylabel="held-out reward", ylim=(-0.05, 1.05), title="held-out migration reward")
    n = max(
        len(s["trains"])
        if "recorded" in s
        else json.loads((s["dir"] / "train.json").read_text())["outer_batches"]
        for s in seeds.values()
    )
    for ax, lo in ((ax1, 1), (ax2, 0)):
        ax.set_xlim(lo - 0.5, n + 0.5)
        ax.set_xticks(range(lo, n + 1))
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("strands-art train --env migrationbench (Qwen2.5-Coder-0.5B, CPU)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except (ValueError, OSError) as exc:
        print(f"migration_learning.py: {exc}", file=sys.stderr)
        return 2


def run(args: argparse.Namespace) -> int:
    seeds = [int(s) for s in args.seeds.split(",")]
    root = Path(args.run_root)
    settings = f"{FLAGS} {args.extra}".strip()
    recorded: dict[int, dict[str, Any]] = {}
    for path in args.recorded:  # checked before anything runs
        for seed, s in recorded_seeds(Path(path), settings).items():
            if seed in recorded:
                raise ValueError(f"seed {seed} is in both {recorded[seed]['recorded']} and {path}")
            if seed in seeds and (root / f"seed{seed}").exists():
                raise ValueError(f"seed {seed} is in {path} and has a run directory, {root / f'seed{seed}'}")
            recorded[seed] = s
    seeds = [s for s in seeds if s not in recorded]  # a recorded seed is not run again
    for seed in seeds:  # a run started with other flags would be resumed or reported as these
        run_dir = root / f"seed{seed}"
        if (run_dir / "train.json").exists():
            clash = differences([*settings.split(), "--seed", str(seed)], read_settings(run_dir, {}), run_dir)
            if clash:
                raise ValueError(
                    f"{run_dir} was started with other settings than FLAGS and --extra: {'; '.join(clash)}; "
                    "pass the --extra it was started with (its train.json holds every setting)"
                )
    root.mkdir(parents=True, exist_ok=True)
    if args.transfer_tasks and not args.table_only:
        args.eval_tasks = str(
            combined_eval_tasks(
                Path(args.eval_tasks), Path(args.transfer_tasks), root / "eval-tasks", Path(args.train_tasks)
            )
        )
    for seed in seeds if not args.table_only else []:
        run_dir = root / f"seed{seed}"
        if finished(run_dir):
            print(f"seed {seed}: {run_dir} holds a finished run", flush=True)
            continue
        cmd = train_command(args, run_dir, seed)
        print(f"$ {' '.join(cmd)}   ({time.strftime('%H:%M:%S')}, load {os.getloadavg()})", flush=True)
        t0 = time.monotonic()
        rc = subprocess.run(cmd).returncode
        print(f"seed {seed}: exit {rc} after {time.monotonic() - t0:.0f} s", flush=True)
        if rc != 0:
            return rc
    kinds = transfer_kinds(root)
    summary = {
        seed: summarize_seed(root / f"seed{seed}", kinds) for seed in seeds if (root / f"seed{seed}").exists()
    }
    summary.update(recorded)
    if not summary:
        raise ValueError(
            f"nothing to summarize: no run directory seedS under {root} for --seeds {args.seeds}"
        )
    t_labels = {
        s.get("transfer_label", transfer_label(kinds)) for s in summary.values() if len(s["transfer"]) >= 2
    }
    if len(t_labels) > 1:  # their transfer rewards are of different task sets: no mean over seeds
        raise ValueError(
            f"seeds with different transfer sets ({', '.join(sorted(t_labels))}): join seeds of one set only"
        )
    print(f"\nsettings: {settings}")
    firsts, lasts, updates, t_firsts, t_lasts = [], [], [], [], []
    cost: dict[str, list[float]] = defaultdict(list)
    for seed, s in sorted(summary.items()):
        state = "finished" if s["finished"] else "NOT FINISHED (stopped; reported at its last evaluation)"
        if "recorded" in s:
            state += f", recorded in {s['recorded']} (per kind and audit there)"
        print(f"\nseed {seed}: {state}")
        for b, reward, failed, eval_s in s["evals"]:
            print(
                f"  held-out after {b} updates: reward {reward:.3f} (failed rollouts {failed}, {eval_s or 0:.0f} s)"
            )
            if eval_s:
                cost["eval_s"].append(eval_s)
        for b, reward, n in s.get("transfer", []):
            print(
                f"  {s.get('transfer_label', transfer_label(kinds))} after {b} updates: reward {reward:.3f} ({n} rollouts)"
            )
        for r in s["trains"]:
            if "sampled_tokens" not in r and r["rows"] == 0:  # an outer batch with no row trained nothing
                r = {**r, "sampled_tokens": 0}
            print(
                f"  update {r['outer_batch'] + 1}: training reward {r['reward_mean']:.3f} +- {r['reward_std']:.3f}, "
                f"tied groups {r['zero_advantage_groups']}, rows {r['rows']}, sampled tokens {r['sampled_tokens']}, "
                f"rollouts {r['rollout_s']:.0f} s, training {r['train_s']:.0f} s, grad norm {r.get('grad_norm', 0):.3f}"
            )
            cost["rollout_s"].append(r["rollout_s"])
            cost["train_s"].append(r["train_s"])
        if len(s.get("transfer", [])) >= 2:
            t_firsts.append(s["transfer"][0][1])
            t_lasts.append(s["transfer"][-1][1])
        if len(s["evals"]) >= 2:
            firsts.append(s["evals"][0][1])
            lasts.append(s["evals"][-1][1])
            updates.append(s["evals"][-1][0])
        if "recorded" in s:
            continue
        if not s["rollout_file"]:  # an archived copy may keep metrics.jsonl alone: no zeros made up
            print(
                f"  per kind and audit: no rollout records ({s['dir']}/env/rollouts/results.jsonl is not there)"
            )
            continue
        seen = sorted({k for b in s["per_kind"].values() for k in b})
        if s["evals"]:
            b0, b1 = s["evals"][0][0], s["evals"][-1][0]
            print(f"  per kind, held-out reward after {b0} -> after {b1} updates (rollouts):")
            for k in seen:
                x0, x1 = s["per_kind"][b0].get(k, []), s["per_kind"][b1].get(k, [])
                print(f"    {k:20s} {mean_std(x0)[0]:.2f} ({len(x0)}) -> {mean_std(x1)[0]:.2f} ({len(x1)})")
        for line in audit(s["rollouts"]):
            print("  " + line)
    spread = max(mean_std(firsts)[1], mean_std(lasts)[1])
    improved = sum(1 for a, b in zip(firsts, lasts, strict=True) if b - a > spread)
    (m0, s0), (m1, s1) = mean_std(firsts), mean_std(lasts)
    print(f"\nheld-out reward before {m0:.3f} +- {s0:.3f}, after {m1:.3f} +- {s1:.3f}; per seed "
          + ", ".join(f"{a:.3f} -> {b:.3f}" for a, b in zip(firsts, lasts, strict=True))
          + f"; improved (by more than the spread {spread:.3f}): {improved}/{len(firsts)}")  # fmt: skip
    transfer = ""
    if t_firsts:
        (t0, ts0), (t1, ts1) = mean_std(t_firsts), mean_std(t_lasts)
        print(f"{t_labels.pop()} (no training task of these kinds) before {t0:.3f} +- {ts0:.3f}, "
              f"after {t1:.3f} +- {ts1:.3f} over {len(t_firsts)} seed(s)")  # fmt: skip
        transfer = f" transfer_before={t0:.3f}+-{ts0:.3f} transfer_after={t1:.3f}+-{ts1:.3f} transfer_seeds={len(t_firsts)}"
    if args.plot and summary:
        plot(summary, args.plot)
        print(f"figure: {args.plot}")
    c = {k: mean_std(v)[0] for k, v in cost.items()}
    print(
        f"RESULT seeds={len(firsts)} updates={min(updates) if updates else 0} heldout_before={m0:.3f}+-{s0:.3f} "
        f"heldout_after={m1:.3f}+-{s1:.3f} improved_seeds={improved}/{len(firsts)} "
        f"rollout_s={c.get('rollout_s', float('nan')):.0f} train_s={c.get('train_s', float('nan')):.0f} "
        f"eval_s={c.get('eval_s', float('nan')):.0f}{transfer}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
