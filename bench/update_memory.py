"""Peak memory and time of one embedded-trainer update on a recorded outer batch's rows, with and
without prefix sharing and activation checkpointing (docs/training-update.md, "Memory").

Replays ``RUN_DIR/rows/ob-NNNNNN.jsonl`` (the rows a ``strands-art train`` run trained on) with the
run's settings (``RUN_DIR/train.json``), a fresh LoRA adapter (seed 0) and one variant per process
(peak resident memory is per process): ``shared`` (``share_prefix``), ``plain`` (neither),
``checkpointed`` (``gradient_checkpointing``). Each prints its loss, gradient norm, seconds and peak
RSS; the loss and gradient norm must agree across variants (the same update computed three ways).

    python bench/update_memory.py --run-dir $RUN_DIR --outer-batch 1 --threads 2
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def one(run_dir: str, outer_batch: int, variant: str, threads: int) -> None:
    import torch

    from strands_art.registry import load_causal_lm, load_tokenizer
    from strands_art.training.local import LocalTrainer
    from strands_art.training.settings import TrainSettings
    from strands_art.trajectory import Row, Trajectory

    saved = TrainSettings.load(run_dir).to_dict()
    saved.update(share_prefix=variant == "shared", gradient_checkpointing=variant == "checkpointed")
    settings = TrainSettings.from_dict(saved)
    torch.set_num_threads(threads)
    tok = load_tokenizer(settings.model)
    model = load_causal_lm(settings.model)
    torch.manual_seed(0)
    trainer = LocalTrainer(model, tok, settings.trainer_config())
    trajs = []
    with open(f"{run_dir}/rows/ob-{outer_batch:06d}.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            rows = [Row.from_dict(r) for r in d["rows"]]
            trajs.append(Trajectory(d["rollout_id"], d["group_id"], rows=rows, reward=d["reward"]))
    tokens = sum(len(r) for t in trajs for r in t.rows)
    longest = max(len(r) for t in trajs for r in t.rows)
    t0 = time.perf_counter()
    m = trainer.update(trajs)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(
        f"{variant:12s} rows {sum(len(t.rows) for t in trajs)} tokens {tokens} longest {longest} | "
        f"loss {m['loss']:.6f} grad_norm {m['grad_norm']:.6f} | update {time.perf_counter() - t0:.0f} s | "
        f"peak RSS {peak:.2f} GiB",
        flush=True,
    )
    print("MEASURED " + json.dumps({"variant": variant, "loss": m["loss"], "grad_norm": m["grad_norm"],
                                    "s": time.perf_counter() - t0, "peak_gib": peak}), flush=True)  # fmt: skip


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
    got = {}
    for variant in args.variants.split(","):
        cmd = [sys.executable, __file__, "--run-dir", args.run_dir, "--outer-batch", str(args.outer_batch),
               "--threads", str(args.threads), "--one", variant]  # fmt: skip
        out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        for line in out.stdout.splitlines():
            if line.startswith("MEASURED "):
                got[variant] = json.loads(line[len("MEASURED ") :])
            else:
                print(line)
        if out.returncode:
            print(
                f"{variant:12s} exit {out.returncode} (negative: killed by that signal, e.g. -9 by the OOM killer)"
            )
    same = len({(round(g["loss"], 6), round(g["grad_norm"], 6)) for g in got.values()}) == 1
    print("RESULT " + " ".join(
        [f"peak_gib_{v}={g['peak_gib']:.2f}" for v, g in got.items()] + [f"s_{v}={g['s']:.0f}" for v, g in got.items()]
        + [f"same_loss={'yes' if same else 'no'}"]
    ))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
