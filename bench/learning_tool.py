"""Learning check on a multi-turn tool task: GRPO + LoRA on Qwen2.5-Coder-0.5B-Instruct (CPU).

Task (:mod:`strands_art.envs.lookup`): a Strands agent with one tool, ``lookup(key)``, must look a
4-digit code up with ONE call and then report it. Reward 1.0 for one call then the code in the
answer, 0.5 for the code after repeated calls, 0 otherwise (no call, no answer, wrong answer).
The base model emits a well-formed first call but often repeats it instead of answering.

Each seed runs the embedded trainer end to end in its own process: rollouts through
``ARTModel`` → ``RolloutGateway`` (``history_mode="linear"``: one row per rollout, tool results
masked 0) on the ``transformers`` backend sharing the peft model the trainer updates;
step-stable batching; PPO-clipped GRPO loss. Held-out keys (never trained on) are evaluated
greedily before and after training. The model is de-quantized from the Q4_K_M GGUF once and
cached (:func:`strands_art.registry.gguf_model_dir`).

Reports, per seed: held-out success (reward 1.0) and mean reward before/after, tool calls per
held-out rollout, training reward per outer batch, rows per rollout, and the cost of one update
(rollout seconds, train seconds), plus how many updates fit in an hour at that cost. Writes a
plot (training reward per batch, held-out success before/after, per seed) to ``--plot``.

Usage: ``python bench/learning_tool.py [--seeds 0,1 --jobs 2 --outer-batches 6]``. Ends with
``RESULT success_start=… success_end=… improved_seeds=K/N rows_per_rollout=… s_per_update=…``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import multiprocessing
import shutil
import statistics
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

MODEL = "qwen2.5-coder-0.5b"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="0,1", help="comma-separated seeds, one training run each")
    p.add_argument("--jobs", type=int, default=2, help="seeds trained at once (one process each)")
    p.add_argument("--outer-batches", type=int, default=6, help="GRPO updates per seed")
    p.add_argument("--prompt-batch", type=int, default=1, help="tasks per outer batch")
    p.add_argument("--rollouts", type=int, default=4, help="rollouts per task (GRPO group)")
    p.add_argument("--mini-batch", type=int, default=1, help="tasks per PPO mini-batch")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--max-new-tokens", type=int, default=40, help="tokens per model turn")
    p.add_argument("--max-turns", type=int, default=2, help="model calls per rollout")
    p.add_argument("--heldout", type=int, default=8, help="held-out keys evaluated (at most 8)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads per seed process")
    p.add_argument("--run-dir", default="runs/learning-tool")
    p.add_argument("--plot", default=None, help="plot path (default: RUN_DIR/learning-tool.png)")
    return p.parse_args(argv)


def _summary(trajs: list[Any]) -> dict[str, Any]:
    """Held-out numbers from evaluation trajectories (failed rollouts count as failures)."""
    ok = [bool(t.metadata.get("success")) and not t.metadata.get("failed") for t in trajs]
    rewards = [0.0 if t.metadata.get("failed") or t.reward is None else float(t.reward) for t in trajs]
    return {
        "success": statistics.fmean(ok),
        "reward": statistics.fmean(rewards),
        "calls": [t.metadata.get("calls") for t in trajs],
        "texts": [t.metadata.get("text", "") for t in trajs],
        "rows": [len(t.rows) for t in trajs],
        "failed": sum(1 for t in trajs if t.metadata.get("failed")),
    }


def run_seed(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    """Train one seed (in a worker process); returns its before/after numbers and records."""
    return asyncio.run(_run_seed(args, seed))


async def _run_seed(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    import torch

    from strands_art.backends.base import SamplingParams
    from strands_art.envs.lookup import lookup_rollout, lookup_tasks
    from strands_art.gateway import RolloutGateway
    from strands_art.registry import load_causal_lm, load_tokenizer
    from strands_art.training import loop
    from strands_art.training.grpo import GRPOConfig
    from strands_art.training.local import LocalTrainer
    from strands_art.training.trainer_config import TrainerConfig

    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(args.threads)
    torch.manual_seed(seed)
    run_dir = Path(args.run_dir) / f"seed{seed}"
    shutil.rmtree(run_dir, ignore_errors=True)
    cfg = TrainerConfig(
        prompt_batch_size=args.prompt_batch,
        rollouts_per_prompt=args.rollouts,
        ppo_mini_batch_size=args.mini_batch,
        learning_rate=args.lr,
        grpo=GRPOConfig(scale_by_std=True),
        sampling=SamplingParams(temperature=args.temperature, max_new_tokens=args.max_new_tokens),
        eval_sampling=SamplingParams(temperature=0.0, max_new_tokens=args.max_new_tokens),
        seed=seed,
        checkpoint_every=0,
    )
    tok = load_tokenizer(MODEL)
    trainer = LocalTrainer(load_causal_lm(MODEL, device="cpu"), tok, cfg)
    gateway = RolloutGateway(tok, trainer.backend, history_mode="linear")
    rollout = lookup_rollout(max_turns=args.max_turns)
    heldout = lookup_tasks("heldout")[: args.heldout]
    tag = f"[seed {seed}]"

    async def evaluate(when: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        trajs = await loop.collect_rollouts(
            gateway, heldout, rollout, cfg.eval_sampling, 1, seed=seed, outer_batch=when,
            prefix="eval-", progress=False,
        )  # fmt: skip
        res = {**_summary(trajs), "eval_s": time.perf_counter() - t0}
        print(
            f"{tag} held-out after {when} updates: success {res['success']:.3f} reward {res['reward']:.3f} "
            f"calls {res['calls']} rows {res['rows']} ({res['eval_s']:.0f}s) answers {res['texts']}",
            flush=True,
        )
        return res

    def show(r: dict[str, Any]) -> None:
        print(
            f"{tag} batch {r['outer_batch']}: reward {r['reward_mean']:.3f}±{r['reward_std']:.3f} "
            f"rows/rollout {r['rows_per_rollout']:.2f} tokens {r['tokens']} kl {r['approx_kl']:.4f} "
            f"gap {r['logprob_abs_gap']:.1e} zero-adv groups {r['zero_advantage_groups']} "
            f"| rollouts {r['rollout_s']:.0f}s train {r['train_s']:.0f}s",
            flush=True,
        )

    before = await evaluate(0)
    records = await loop.train(
        trainer, gateway, lookup_tasks("train"), rollout, args.outer_batches, run_dir,
        progress=False, on_batch=show,
    )  # fmt: skip
    after = await evaluate(args.outer_batches)
    return {
        "seed": seed,
        "before": before,
        "after": after,
        "train": [r for r in records if r["kind"] == "train"],
    }


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """Training reward per outer batch (left) and held-out success before/after (right), per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    for r in results:
        xs = [t["outer_batch"] + 1 for t in r["train"]]
        (line,) = left.plot(xs, [t["reward_mean"] for t in r["train"]], marker="o", label=f"seed {r['seed']}")
        right.plot(
            [0, 1], [r["before"]["success"], r["after"]["success"]], marker="o", color=line.get_color()
        )
    left.set(xlabel="outer batch (update)", ylabel="training reward (group mean)", ylim=(-0.05, 1.05))
    left.legend(fontsize=8)
    right.set(ylabel="held-out success (greedy)", ylim=(-0.05, 1.05), xlim=(-0.3, 1.3))
    right.set_xticks([0, 1], ["before", "after"])
    fig.suptitle("lookup tool task, Qwen2.5-Coder-0.5B + LoRA, GRPO on CPU", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main() -> None:
    args = parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    t0 = time.perf_counter()
    print(
        f"{MODEL} (Q4_K_M de-quantized to float32) + LoRA r=16; {len(seeds)} seed(s), {args.jobs} at once, "
        f"{args.threads} torch thread(s) each; {args.outer_batches} updates of {args.prompt_batch} task(s) x "
        f"{args.rollouts} rollouts, lr {args.lr}, T={args.temperature}, {args.max_turns} turns x "
        f"{args.max_new_tokens} tokens per rollout; {args.heldout} held-out keys, greedy",
        flush=True,
    )
    ctx = multiprocessing.get_context("spawn")
    results = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs), mp_context=ctx) as pool:
        futures = [pool.submit(run_seed, args, s) for s in seeds]
        results = sorted((f.result() for f in as_completed(futures)), key=lambda r: r["seed"])

    print("\nseed  success before -> after   reward before -> after   s/update (rollouts + train)")
    updates = []
    for r in results:
        b, a, tr = r["before"], r["after"], r["train"]
        per = [t["rollout_s"] + t["train_s"] for t in tr]
        updates += [(t["rollout_s"], t["train_s"]) for t in tr]
        print(
            f"{r['seed']:4d}  {b['success']:.3f} -> {a['success']:.3f}            "
            f"{b['reward']:.3f} -> {a['reward']:.3f}            {statistics.fmean(per):.0f}"
        )
    start = statistics.fmean(r["before"]["success"] for r in results)
    end = statistics.fmean(r["after"]["success"] for r in results)
    improved = sum(1 for r in results if r["after"]["success"] > r["before"]["success"])
    rows = [t["rows_per_rollout"] for r in results for t in r["train"]]
    rows += [n for r in results for n in r["before"]["rows"] + r["after"]["rows"]]
    rollout_s = statistics.fmean(u[0] for u in updates)
    train_s = statistics.fmean(u[1] for u in updates)
    per_update = rollout_s + train_s
    eval_s = statistics.fmean(r[k]["eval_s"] for r in results for k in ("before", "after"))
    fit = int((3600 - 2 * eval_s) // per_update) if per_update > 0 else 0
    print(
        f"\ncost per update: rollouts {rollout_s:.0f}s + train {train_s:.0f}s = {per_update:.0f}s "
        f"({args.prompt_batch * args.rollouts} rollouts); held-out evaluation {eval_s:.0f}s; "
        f"one seed process fits {fit} updates (+ 2 evaluations) in an hour at this cost"
    )
    path = Path(args.plot) if args.plot else Path(args.run_dir) / "learning-tool.png"
    plot(results, path)
    print(f"plot {path}, wall {time.perf_counter() - t0:.0f}s")
    print(
        f"RESULT success_start={start:.3f} success_end={end:.3f} improved_seeds={improved}/{len(results)} "
        f"rows_per_rollout={statistics.fmean(rows):.2f} s_per_update={per_update:.0f} "
        f"rollout_s={rollout_s:.0f} train_s={train_s:.0f} updates_per_hour={fit}"
    )


if __name__ == "__main__":
    main()
