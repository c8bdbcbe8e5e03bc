"""Learning check: GRPO + LoRA on SmolLM2-135M-Instruct (CPU) visibly improves a verifiable task.

Task (:mod:`strands_art.training.tasks_toy`): "What is the capital of X? Answer with one word
only.", reward ``1 / words`` when the reply contains the capital and ends before the token
limit (1.0 for "Paris", 1/6 for "The capital of France is Paris.", 0 for a wrong city or a
reply cut off). The base model answers with a sentence, so its reward is low but not zero.

The run is the embedded trainer end to end: rollouts through the ``RolloutGateway`` on the
``transformers`` backend, which shares the peft model the trainer updates (the next batch
samples from the new adapter); step-stable batching; PPO-clipped GRPO loss; metrics JSONL,
checkpoints and a plot in ``--run-dir``. The held-out countries (never trained on) are
evaluated greedily before and after training.

Usage: ``python bench/learning.py [--outer-batches 10 --lr 2e-3 --run-dir runs/learning]``.
Ends with ``RESULT reward_start=X reward_end=Y updates=N``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shutil
import time
from pathlib import Path

import torch

from strands_art.backends.base import SamplingParams
from strands_art.gateway import RolloutGateway
from strands_art.registry import load_causal_lm, load_tokenizer
from strands_art.training import loop
from strands_art.training.grpo import GRPOConfig
from strands_art.training.local import LocalTrainer
from strands_art.training.metrics import plot_training
from strands_art.training.rollouts import chat_rollout
from strands_art.training.tasks_toy import capital_tasks
from strands_art.training.trainer_config import TrainerConfig


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--outer-batches", type=int, default=10)
    p.add_argument("--prompt-batch", type=int, default=2, help="tasks per outer batch")
    p.add_argument("--rollouts", type=int, default=6, help="rollouts per task (GRPO group)")
    p.add_argument("--mini-batch", type=int, default=1, help="tasks per PPO mini-batch")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--max-new-tokens", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 is fastest on a busy box)")
    p.add_argument("--run-dir", default="runs/learning")
    p.add_argument(
        "--keep", action="store_true", help="resume an existing --run-dir instead of starting over"
    )
    return p.parse_args()


def show(record: dict) -> None:
    if record["kind"] == "eval":
        texts = " | ".join(repr(t) for t in record["val_texts"][:4])
        print(
            f"eval  after {record['outer_batch']:2d} batches: held-out reward {record['val_reward']:.3f}  {texts}"
        )
    else:
        r = record
        print(
            f"batch {r['outer_batch']:2d}: reward {r['reward_mean']:.3f}±{r['reward_std']:.3f} "
            f"steps {r['optimizer_steps']} (total {r['step']}) rows/rollout {r['rows_per_rollout']:.1f} "
            f"tokens {r['tokens']} padded {r['padded_token_fraction']:.3f} kl {r['approx_kl']:.4f} "
            f"clip {r['clip_fraction']:.3f} gap {r['logprob_abs_gap']:.1e} "
            f"zero-adv groups {r['zero_advantage_groups']} | rollouts {r['rollout_s']:.0f}s train {r['train_s']:.0f}s",
            flush=True,
        )


async def main() -> None:
    args = parse_args()
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    run_dir = Path(args.run_dir)
    if run_dir.exists() and not args.keep:
        shutil.rmtree(run_dir)
    cfg = TrainerConfig(
        prompt_batch_size=args.prompt_batch,
        rollouts_per_prompt=args.rollouts,
        ppo_mini_batch_size=args.mini_batch,
        ppo_epochs=args.epochs,
        learning_rate=args.lr,
        grpo=GRPOConfig(scale_by_std=True),
        sampling=SamplingParams(temperature=args.temperature, max_new_tokens=args.max_new_tokens),
        eval_sampling=SamplingParams(temperature=0.0, max_new_tokens=args.max_new_tokens),
        seed=args.seed,
        checkpoint_every=4,
    )
    t0 = time.perf_counter()
    tok = load_tokenizer("smollm2")
    trainer = LocalTrainer(load_causal_lm("smollm2", device="cpu"), tok, cfg)
    gateway = RolloutGateway(tok, trainer.backend)
    n_lora = sum(p.numel() for p in trainer.params)
    print(
        f"SmolLM2-135M-Instruct + LoRA r={cfg.lora_rank} ({n_lora / 1e6:.2f}M trainable), "
        f"{cfg.prompt_batch_size} tasks x {cfg.rollouts_per_prompt} rollouts per batch, "
        f"{cfg.batching().num_mini_batches * cfg.ppo_epochs} optimizer steps per batch, lr {cfg.learning_rate}, "
        f"T={args.temperature}, {args.threads} torch thread(s)"
    )
    records = await loop.train(
        trainer, gateway, capital_tasks("train"), chat_rollout, args.outer_batches, run_dir,
        eval_tasks=capital_tasks("heldout"), progress=False, on_batch=show,
    )  # fmt: skip
    evals = [r for r in records if r["kind"] == "eval"]
    plot = plot_training(records, run_dir / "learning.png")
    del plot
    start, end = evals[0]["val_reward"], evals[-1]["val_reward"]
    print(f"held-out replies before: {evals[0]['val_texts']}")
    print(f"held-out replies after:  {evals[-1]['val_texts']}")
    print(
        f"metrics {run_dir / 'metrics.jsonl'}, plot {run_dir / 'learning.png'}, wall {time.perf_counter() - t0:.0f}s"
    )
    print(f"RESULT reward_start={start:.3f} reward_end={end:.3f} updates={trainer.step}")


if __name__ == "__main__":
    asyncio.run(main())
