"""Prefix sharing in the embedded trainer: training time per outer batch with and without it.

``TrainerConfig.share_prefix`` (:mod:`strands_art.training.shared_prefix`) runs the longest
common token prefix of a group's rows once and the rows' continuations on its KV cache. This
script measures one outer batch (1 task x G rollouts, one mini-batch, one PPO epoch) of the
embedded trainer on Qwen2.5-Coder-0.5B-Instruct (float32, de-quantized from the Q4_K_M GGUF,
LoRA r=16 on all linear layers), unshared then shared, at G = 4 and 8, on real rows:

- **MigrationBench**: the trajectories of a real ``strands-art migrate`` run (``--migrate-run``
  RUN_DIR, e.g. ``strands-art migrate --model qwen2.5-coder-0.5b --tasks junit-mix
  --rollouts-per-task 8 --history-mode linear ...``): the first G rollouts of its first group.
- **lookup**: real rollouts of the lookup tool task (:mod:`strands_art.envs.lookup`; 2 turns x
  64 tokens, T=1, linear capture, as bench/learning_tool.py) sampled by llama.cpp with the same
  model; stored under ``--lookup-run`` on first use and read from there afterwards.

Both passes run on the same weights (the optimizer's step is disabled; ``lora_B`` is set to
small seeded random values, as after some training, so every LoRA parameter has a gradient).
Per source and G it prints the rows' tokens, the shared prefix, the tokens each pass runs, the
train seconds of each (``update()``'s ``train_s``) and their ratio, and checks that the loss and
the gradient of every LoRA parameter agree (``--tol``, default 1e-5: the script exits 1 beyond).

Usage: ``python bench/shared_prefix.py --migrate-run RUN_DIR [--lookup-run DIR] [--groups 4,8]
[--sources migrationbench,lookup]`` (on a busy 2-core machine one update of G = 4 MigrationBench
rows of ~1.4K tokens takes ~20 minutes unshared; a G or source left out prints ``nan``).
Ends with ``RESULT speedup_g4=… speedup_g8=… max_grad_diff=… lookup_speedup_g4=…
lookup_speedup_g8=… token_ratio_g4=… token_ratio_g8=…`` (speed-ups and token ratios on the
MigrationBench rows; ``max_grad_diff`` over every case).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import torch

MODEL = "qwen2.5-coder-0.5b"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument(
        "--migrate-run", type=Path, required=True, help="run dir of a real `strands-art migrate` run"
    )
    p.add_argument(
        "--lookup-run", type=Path, help="where the lookup rollouts are stored (sampled on first use)"
    )
    p.add_argument("--groups", default="4,8", help="group sizes G")
    p.add_argument("--sources", default="migrationbench,lookup", help="row sources, in order")
    p.add_argument(
        "--threads", type=int, default=1, help="torch threads (1 is fastest on a busy 2-core machine)"
    )
    p.add_argument("--micro-batch-tokens", type=int, default=2048, help="micro_batch_max_tokens")
    p.add_argument("--kl-coef", type=float, default=0.0, help="KL penalty (adds the reference passes)")
    p.add_argument("--tol", type=float, default=1e-5, help="largest |loss diff| and |grad diff| accepted")
    return p.parse_args(argv)


def migrate_rollouts(run_dir: Path) -> tuple[list[Any], Any]:
    """The real run's trajectories (first group, rollout order) and its sampling settings."""
    from strands_art.backends.base import SamplingParams
    from strands_art.store import TrajectoryStore

    trajs = sorted(TrajectoryStore(run_dir / "trajectories"), key=lambda t: t.rollout_id)
    if not trajs:
        sys.exit(f"no trajectories under {run_dir}/trajectories: run `strands-art migrate` first")
    group = [t for t in trajs if t.group_id == trajs[0].group_id and t.rows and not t.metadata.get("failed")]
    cfg = json.loads((run_dir / "config.json").read_text())
    return group, SamplingParams(
        temperature=cfg["temperature"], top_p=cfg["top_p"], max_new_tokens=cfg["max_new_tokens"]
    )


def lookup_rollouts(store_dir: Path, n: int) -> tuple[list[Any], Any]:
    """``n`` real lookup rollouts of one training task (sampled by llama.cpp once, then stored)."""
    from strands_art.backends import make_backend
    from strands_art.backends.base import SamplingParams
    from strands_art.envs.lookup import lookup_rollout, lookup_tasks
    from strands_art.gateway import RolloutGateway
    from strands_art.registry import load_tokenizer
    from strands_art.store import TrajectoryStore
    from strands_art.training import loop

    sampling = SamplingParams(temperature=1.0, max_new_tokens=64)
    store = TrajectoryStore(store_dir)
    trajs = sorted(store, key=lambda t: t.rollout_id)
    if len(trajs) < n:
        print(f"sampling {n} lookup rollouts with llama.cpp into {store_dir} ...", flush=True)
        backend = make_backend("llamacpp", model=MODEL, threads=1)
        gateway = RolloutGateway(load_tokenizer(MODEL), backend, history_mode="linear")
        task = lookup_tasks("train")[:1]
        trajs = asyncio.run(
            loop.collect_rollouts(
                gateway, task, lookup_rollout(max_turns=2), sampling, n, seed=0, outer_batch=0,
                concurrency=2, progress=False,
            )
        )  # fmt: skip
        for t in trajs:
            store.append(t)
        trajs = sorted(trajs, key=lambda t: t.rollout_id)
    return [t for t in trajs if t.rows and not t.metadata.get("failed")], sampling


def grads(trainer: Any) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}


def measure(
    model: Any, tok: Any, trajs: list[Any], sampling: Any, args: argparse.Namespace
) -> dict[str, float]:
    """One outer batch, unshared then shared, on the same weights; times, tokens and differences."""
    from strands_art.training.batching import BatchRow
    from strands_art.training.local import LocalTrainer
    from strands_art.training.loss import LossConfig
    from strands_art.training.shared_prefix import prefix_units
    from strands_art.training.trainer_config import TrainerConfig

    g = len(trajs)
    if len({t.reward for t in trajs}) < 2:  # GRPO advantage 0 for every row: the trainer skips them all
        sys.exit(
            f"G={g}: every rollout of the group has reward {trajs[0].reward}, so the trainer would skip every "
            "row and time nothing; use a run whose first group's rewards differ"
        )
    out: dict[str, Any] = {}
    for share in (False, True):
        cfg = TrainerConfig(
            prompt_batch_size=1, ppo_mini_batch_size=1, rollouts_per_prompt=g, ppo_epochs=1,
            lora_rank=16, lora_alpha=32, max_grad_norm=None, sampling=sampling,
            micro_batch_max_tokens=args.micro_batch_tokens, loss=LossConfig(kl_coef=args.kl_coef),
            share_prefix=share, checkpoint_every=0,
        )  # fmt: skip
        trainer = LocalTrainer(model, tok, cfg)
        trainer.optimizer.step = lambda *a, **k: None  # both passes see the same weights
        m = trainer.update(trajs)
        out[share] = (m, grads(trainer))
    (m0, g0), (m1, g1) = out[False], out[True]
    rows = [BatchRow(r, 1.0) for t in trajs for r in t.rows]
    units, plain = prefix_units(rows)
    run_shared = sum(u.prefix_len + sum(br.num_tokens - u.prefix_len for br in u.rows) for u in units)
    run_shared += sum(br.num_tokens for br in plain)
    tokens = sum(br.num_tokens for br in rows)
    return {
        "G": g,
        "rows": len(rows),
        "tokens": tokens,
        "prefix": [u.prefix_len for u in units],
        "tokens_shared": run_shared,
        "token_ratio": tokens / run_shared,
        "skipped": m0["zero_advantage_rows_skipped"],
        "train_s_unshared": m0["train_s"],
        "train_s_shared": m1["train_s"],
        "speedup": m0["train_s"] / m1["train_s"],
        "loss_unshared": m0["loss"],
        "loss_diff": abs(m1["loss"] - m0["loss"]),
        "max_grad": max(float(x.abs().max()) for x in g0.values()),
        "max_grad_diff": max(float((g1[n] - g0[n]).abs().max()) for n in g0),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(args.threads)
    from strands_art.registry import load_causal_lm, load_tokenizer
    from strands_art.training.lora import lora_model
    from strands_art.training.trainer_config import TrainerConfig

    sizes = [int(x) for x in args.groups.split(",")]
    mb, mb_sampling = migrate_rollouts(args.migrate_run)
    if len(mb) < max(sizes):
        sys.exit(f"{args.migrate_run} has {len(mb)} usable rollouts in its first group; need {max(sizes)}")
    sources = args.sources.split(",")
    lk, lk_sampling = [], None
    if "lookup" in sources:
        lk, lk_sampling = lookup_rollouts(
            args.lookup_run or args.migrate_run.parent / "lookup-rollouts", max(sizes)
        )
    tok = load_tokenizer(MODEL)
    t0 = time.perf_counter()
    model = lora_model(
        load_causal_lm(MODEL, device="cpu", dtype=torch.float32), TrainerConfig(lora_rank=16, lora_alpha=32)
    )
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():  # lora_B as after some training: lora_A gets gradients too
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.01)
    print(
        f"model {MODEL} float32 + LoRA r=16 loaded in {time.perf_counter() - t0:.0f}s; torch threads {args.threads}"
    )
    print(
        f"micro_batch_max_tokens {args.micro_batch_tokens}, kl_coef {args.kl_coef}, one mini-batch, one epoch\n"
    )
    results: dict[tuple[str, int], dict[str, Any]] = {}
    data = {"migrationbench": (mb, mb_sampling), "lookup": (lk, lk_sampling)}
    for name in sources:
        trajs, sampling = data[name]
        print(
            f"{name}: rewards {[t.reward for t in trajs]}, sampling T={sampling.temperature} top_p={sampling.top_p}"
        )
        for g in sizes:
            r = measure(model, tok, trajs[:g], sampling, args)
            results[(name, g)] = r
            print(
                f"  G={g}: {r['rows']} rows, {r['tokens']} tokens, shared prefix {r['prefix']}, tokens run "
                f"{r['tokens']} -> {r['tokens_shared']} ({r['token_ratio']:.2f}x fewer) | train s/outer batch "
                f"unshared {r['train_s_unshared']:.1f} shared {r['train_s_shared']:.1f} -> {r['speedup']:.2f}x | "
                f"loss {r['loss_unshared']:.6f} |diff| {r['loss_diff']:.2e} | max |grad| {r['max_grad']:.3e} "
                f"max |grad diff| {r['max_grad_diff']:.2e} | rows skipped {r['skipped']}",
                flush=True,
            )
    worst = max(r["max_grad_diff"] for r in results.values())
    worst_loss = max(r["loss_diff"] for r in results.values())
    ok = worst <= args.tol and worst_loss <= args.tol
    print(
        f"\nequal loss and gradients within {args.tol:g}: {'yes' if ok else 'NO'} (loss {worst_loss:.2e}, grad {worst:.2e})"
    )
    nan = {"speedup": float("nan"), "token_ratio": float("nan")}  # a source or G not run
    keys = {f"speedup_g{g}": results.get(("migrationbench", g), nan)["speedup"] for g in (4, 8)}
    keys["max_grad_diff"] = worst
    keys.update({f"lookup_speedup_g{g}": results.get(("lookup", g), nan)["speedup"] for g in (4, 8)})
    keys.update({f"token_ratio_g{g}": results.get(("migrationbench", g), nan)["token_ratio"] for g in (4, 8)})
    print("RESULT " + " ".join(f"{k}={v:.3g}" for k, v in keys.items()))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
