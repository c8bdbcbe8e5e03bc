"""Peak memory and time of one embedded-trainer update on a recorded outer batch's rows, with and
without prefix sharing and activation checkpointing (docs/training-update.md, "Memory").

Replays ``RUN_DIR/rows/ob-NNNNNN.jsonl`` (the rows a ``strands-art train`` run trained on) with the
run's settings (``RUN_DIR/train.json``), a fresh LoRA adapter (seed 0) and one variant per process
(peak resident memory is per process): ``shared`` (``share_prefix``), ``plain`` (neither),
``checkpointed`` (``gradient_checkpointing``), each optionally with ``-bf16`` (``--autocast bf16``:
the passes in bfloat16 autocast, strands_art.training.precision). Each prints its loss, gradient
norm, seconds, trained tokens per second, the mean |trainer - rollout| logprob on the first
step's sampled tokens and peak RSS; the float32 variants' loss and gradient norm must agree (the
same update computed three ways), a ``-bf16`` variant's is the same update up to bfloat16 rounding.
A variant may be listed more than once: the runs alternate in the order given (ABAB), and the
RESULT line gives each variant's median seconds and the median ratio to the first variant.

    python bench/update_memory.py --run-dir $RUN_DIR --outer-batch 1 --threads 2
    python bench/update_memory.py --run-dir $RUN_DIR --variants checkpointed,checkpointed-bf16,checkpointed,checkpointed-bf16
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from actor_time import load_trajectories  # a sibling bench: the rows of a run's outer batch


def one(run_dir: str, outer_batch: int, variant: str, threads: int) -> None:
    import torch

    from strands_art.registry import load_causal_lm, load_tokenizer
    from strands_art.training.local import LocalTrainer
    from strands_art.training.settings import TrainSettings

    saved = TrainSettings.load(run_dir).to_dict()
    kind, _, bf16 = variant.partition("-")
    saved.update(
        share_prefix=kind == "shared", gradient_checkpointing=kind == "checkpointed", autocast=bf16 or "off"
    )
    settings = TrainSettings.from_dict(saved)
    torch.set_num_threads(threads)
    tok = load_tokenizer(settings.model)
    model = load_causal_lm(settings.model)
    torch.manual_seed(0)
    trainer = LocalTrainer(model, tok, settings.trainer_config())
    trajs = load_trajectories(Path(run_dir), outer_batch)
    tokens = sum(len(r) for t in trajs for r in t.rows)
    longest = max(len(r) for t in trajs for r in t.rows)
    t0 = time.perf_counter()
    m = trainer.update(trajs)
    s = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(
        f"{variant:17s} rows {sum(len(t.rows) for t in trajs)} tokens {tokens} longest {longest} | "
        f"loss {m['loss']:.6f} grad_norm {m['grad_norm']:.6f} | update {s:.0f} s, "
        f"{m['processed_tokens'] / s:.1f} tokens/s | |lp - rollout| {m['logprob_abs_gap']:.4f} | "
        f"peak RSS {peak:.2f} GiB | load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    print("MEASURED " + json.dumps({"variant": variant, "loss": m["loss"], "grad_norm": m["grad_norm"], "s": s,
                                    "gap": m["logprob_abs_gap"], "peak_gib": peak}), flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run-dir", required=True, help="a `strands-art train` run directory (train.json, rows/)")
    p.add_argument("--outer-batch", type=int, default=0, help="which outer batch's rows to replay")
    p.add_argument("--variants", default="shared,plain,checkpointed")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)  # a child process: one variant
    args = p.parse_args(argv)
    if args.one:
        one(args.run_dir, args.outer_batch, args.one, args.threads)
        return 0
    got: dict[str, list[dict]] = {}
    for variant in args.variants.split(","):
        cmd = [sys.executable, __file__, "--run-dir", args.run_dir, "--outer-batch", str(args.outer_batch),
               "--threads", str(args.threads), "--one", variant]  # fmt: skip
        out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        for line in out.stdout.splitlines():
            if line.startswith("MEASURED "):
                got.setdefault(variant, []).append(json.loads(line[len("MEASURED ") :]))
            else:
                print(line)
        if out.returncode:
            print(
                f"{variant:12s} exit {out.returncode} (negative: killed by that signal, e.g. -9 by the OOM killer)"
            )
    fp32 = [g for v, runs in got.items() if not v.endswith("-bf16") for g in runs]
    same = len({(round(g["loss"], 6), round(g["grad_norm"], 6)) for g in fp32}) <= 1
    s = {v: statistics.median(g["s"] for g in runs) for v, runs in got.items()}
    first = next(iter(s), None)
    print("RESULT " + " ".join(
        [f"peak_gib_{v}={max(g['peak_gib'] for g in runs):.2f}" for v, runs in got.items()]
        + [f"s_{v}={t:.0f}" for v, t in s.items()]
        + [f"speedup_{v}={s[first] / t:.2f}" for v, t in s.items() if v != first]
        + [f"gap_{v}={statistics.median(g['gap'] for g in runs):.4f}" for v, runs in got.items()]
        + [f"same_loss_fp32={'yes' if same else 'no'}"]
    ))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
