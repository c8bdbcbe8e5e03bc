"""Optimizer steps and padding rows: fixed-row vs fixed-step batching across row expansions.

A GRPO outer batch of ``--prompts`` tasks x ``--rollouts`` rollouts is expanded so that each
rollout leaves on average 1, 2 or 3 rows (tree forks / linear resets; 1x = one row each). Both
modes run through ``strands_art.training.batching.build_batch`` (the code the trainers use):

- ``fixed_rows``: mini-batches of ``ppo_mini_batch x rollouts`` rows (verl's
  ``ppo_mini_batch_size * rollout.n``), so more rows = more optimizer steps;
- ``fixed_steps``: ``prompt_batch / ppo_mini_batch`` mini-batches whatever the rows.

Also times a forward+backward pass of a tiny random GPT-2 over the length-sorted micro-batches of
one fixed-step mini-batch (``--throughput``), reporting tokens/s and the padded-token fraction.

Usage: ``python bench/batching.py [--prompts 32 --rollouts 16 --mini-batches 1 4 --dp 8]``.
Ends with a ``RESULT`` line.
"""

from __future__ import annotations

import argparse
import random
import time

from strands_art.training.batching import BatchingConfig, BatchRow, build_batch, micro_batches
from strands_art.trajectory import Row

# rows per rollout for each expansion: 1x always 1; 2x uniform on 1..3; 3x uniform on 1..5
EXPANSIONS = {1: (1, 1), 2: (1, 3), 3: (1, 5)}


def synthetic_rows(prompts: int, rollouts: int, expansion: int, rng: random.Random) -> list[BatchRow]:
    lo, hi = EXPANSIONS[expansion]
    out = []
    for p in range(prompts):
        for k in range(rollouts):
            n_rows = rng.randint(lo, hi)
            context = rng.randint(200, 2000)
            for j in range(n_rows):
                sampled = rng.randint(20, 400)
                length = context + sampled
                ids = [1 + (i % 1000) for i in range(length)]
                mask = [0] * context + [1] * sampled
                lps = [0.0] * context + [-0.5] * sampled
                out.append(
                    BatchRow(Row(ids, mask, lps, rollout_id=f"{p}-{k}", group_id=str(p)), advantage=0.1)
                )
                context = length + rng.randint(50, 300) if j % 2 == 0 else rng.randint(200, 2000)
    return out


def throughput(rows: list[BatchRow], budget: int) -> tuple[float, float]:
    """Tokens/s of forward+backward over the micro-batches of ``rows``, and padded fraction."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from strands_art.training.collate import collate

    torch.manual_seed(0)
    model = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=1024, n_positions=4096, n_embd=64, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0
        )
    )
    real = fed = 0
    start = time.perf_counter()
    for micro in micro_batches(rows, budget):
        t = collate(micro)
        out = model(input_ids=t["input_ids"], attention_mask=t["attention_mask"])
        (out.logits.float().mean()).backward()
        real += int(t["attention_mask"].sum())
        fed += t["input_ids"].numel()
    elapsed = time.perf_counter() - start
    return real / elapsed, 1 - real / fed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--rollouts", type=int, default=16)
    ap.add_argument("--mini-batches", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--dp", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--throughput", action="store_true", help="also time micro-batched forward+backward")
    ap.add_argument("--token-budget", type=int, default=16384)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    header = "| mini-batches | expansion | rows | fixed_rows steps | fixed_rows padding | fixed_steps steps | fixed_steps padding | token balance (max/min) |"
    print(header)
    print("|---|---|---|---|---|---|---|---|")
    summary = []
    for nmb in args.mini_batches:
        m = args.prompts // nmb
        steps_cfg = BatchingConfig(
            args.prompts, m, args.epochs, args.dp, micro_batch_max_tokens=args.token_budget
        )
        rows_cfg = BatchingConfig(
            args.prompts, m, args.epochs, args.dp, mode="fixed_rows", rows_per_mini_batch=m * args.rollouts
        )
        for expansion in EXPANSIONS:
            rows = synthetic_rows(args.prompts, args.rollouts, expansion, rng)
            fr = build_batch(rows, rows_cfg)
            fs = build_batch(rows, steps_cfg)
            balance = fs.metrics["max_mini_batch_tokens"] / max(1, fs.metrics["min_mini_batch_tokens"])
            print(
                f"| {nmb} | {expansion}x | {len(rows)} | {fr.plan.optimizer_steps} | {fr.plan.padding_rows} | "
                f"{fs.plan.optimizer_steps} | {fs.plan.padding_rows} | {balance:.3f} |"
            )
            summary.append(
                (nmb, expansion, fr.plan.optimizer_steps, fs.plan.optimizer_steps, fs.plan.padding_rows)
            )
    tput = ""
    if args.throughput:
        rows = synthetic_rows(4, 4, 3, rng)
        tok_s, padded = throughput(rows, args.token_budget)
        sorted_rows = build_batch(rows, BatchingConfig(1, 1, micro_batch_max_tokens=args.token_budget))
        print(
            f"\nthroughput: {tok_s:.0f} tokens/s (tiny GPT-2, CPU), padded-token fraction {padded:.3f} "
            f"(batch metric {sorted_rows.metrics['padded_token_fraction']:.3f})"
        )
        tput = f" tokens_per_s={tok_s:.0f} padded_fraction={padded:.3f}"
    fr_steps = ",".join(str(s[2]) for s in summary)
    fs_steps = ",".join(str(s[3]) for s in summary)
    max_pad = max(s[4] for s in summary)
    print(
        f"RESULT fixed_rows_steps={fr_steps} fixed_steps_steps={fs_steps} fixed_steps_max_padding_rows={max_pad}{tput}"
    )


if __name__ == "__main__":
    main()
