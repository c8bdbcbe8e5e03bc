"""Learning benchmark: GRPO + LoRA on SmolLM2-135M-Instruct (CPU), over several seeds.

Task (:mod:`strands_art.training.tasks_toy`): "What is the capital of X? Answer with one word
only.", reward ``1 / words`` when the reply contains the capital and ends before the token
limit (1.0 for "Paris", 1/6 for "The capital of France is Paris.", 0 for a wrong city or a
reply cut off). The base model answers with a sentence, so its reward is low but not zero.

Each seed is the embedded trainer end to end (:func:`strands_art.training.loop.train`):
rollouts through the ``RolloutGateway`` on the ``transformers`` backend, which shares the peft
model the trainer updates; step-stable batching; PPO-clipped GRPO loss; metrics JSONL in
``--run-dir/seed-<k>``. The seed sets the LoRA initialization, the training tasks drawn and
the rollouts' sampling seeds. Every seed evaluates the SAME held-out countries (never trained
on) before and after training (and every ``--eval-every`` batches), so the per-seed gains are
comparable. The measure is the mean reward of ``--eval-samples`` replies per country sampled at
the rollout temperature (the policy's expected reward, what GRPO optimizes); the greedy reply
per country is evaluated before and after as well and reported beside it. Seeds run in
``--jobs`` parallel processes (one torch thread each by default; see :func:`own_session`).

Reported: per-seed held-out reward before/after, gain, held-out replies naming their capital (a
collapse such as echoing the country shows as 0/32), mean and sample standard deviation of the
gain over seeds, how many seeds improved, greedy before/after, and one figure of training and
held-out reward per seed (``--plot``); every record in ``--run-dir/records.json``. Defaults are
the settings chosen by measurement (docs/training-tasks.md, "Choosing the defaults").

Usage: ``python bench/learning.py [--seeds 5 --jobs 5 --plot learning.png]``. Ends with
``RESULT reward_start=… reward_end=… gain_mean=… gain_std=… improved_seeds=K/N greedy_start=…
greedy_end=…``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import multiprocessing
import os
import shutil
import signal
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

DEFAULTS = {  # the trainer settings this benchmark measures (see docs/training.md)
    "outer_batches": 10,
    "prompt_batch": 2,
    "rollouts": 6,
    "mini_batch": 1,
    "epochs": 1,
    "lr": 7e-4,
    "temperature": 1.0,
    "max_new_tokens": 10,
    "clip": 0.2,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--seeds", type=int, default=5, help="number of seeds (runs)")
    p.add_argument("--first-seed", type=int, default=0, help="seeds are first-seed .. first-seed + seeds - 1")
    p.add_argument("--jobs", type=int, default=1, help="seeds run in parallel processes")
    p.add_argument("--outer-batches", type=int, default=DEFAULTS["outer_batches"])
    p.add_argument("--prompt-batch", type=int, default=DEFAULTS["prompt_batch"], help="tasks per outer batch")
    p.add_argument(
        "--rollouts", type=int, default=DEFAULTS["rollouts"], help="rollouts per task (GRPO group)"
    )
    p.add_argument("--mini-batch", type=int, default=DEFAULTS["mini_batch"], help="tasks per PPO mini-batch")
    p.add_argument("--epochs", type=int, default=DEFAULTS["epochs"], help="PPO epochs per outer batch")
    p.add_argument("--lr", type=float, default=DEFAULTS["lr"], help="AdamW learning rate (LoRA)")
    p.add_argument("--temperature", type=float, default=DEFAULTS["temperature"], help="rollout sampling")
    p.add_argument("--max-new-tokens", type=int, default=DEFAULTS["max_new_tokens"])
    p.add_argument("--clip", type=float, default=DEFAULTS["clip"], help="PPO clip range (low and high)")
    p.add_argument(
        "--dr-grpo",
        action="store_true",
        help="advantage r - mean(r) (Dr.GRPO) instead of dividing by the std",
    )
    p.add_argument(
        "--eval-every", type=int, default=0, help="held-out evaluation cadence (0: before/after only)"
    )
    p.add_argument(
        "--eval-samples", type=int, default=4, help="sampled replies per held-out country (the measure)"
    )
    p.add_argument(
        "--eval-temperature",
        type=float,
        default=None,
        help="held-out sampling temperature (default: --temperature)",
    )
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads per seed")
    p.add_argument("--run-dir", default="runs/learning", help="metrics of seed k go to RUN_DIR/seed-k")
    p.add_argument("--plot", default=None, help="figure path (default RUN_DIR/learning-seeds.png)")
    args = p.parse_args(argv)
    if args.seeds < 1 or args.jobs < 1:
        p.error("--seeds and --jobs must be >= 1")
    return args


def trainer_config(args: argparse.Namespace, seed: int) -> Any:
    """The :class:`TrainerConfig` of one seed's run: ``strands-art train``'s settings
    (:meth:`TrainSettings.trainer_config`, values checked as the command checks them) with this
    benchmark's PPO clip range and advantage (std-scaled GRPO or Dr.GRPO)."""
    import dataclasses

    from strands_art.training.grpo import GRPOConfig
    from strands_art.training.settings import TrainSettings

    settings = TrainSettings.resolve(
        "capitals",
        args.run_dir,
        {
            "prompt_batch": args.prompt_batch,
            "rollouts_per_prompt": args.rollouts,
            "ppo_mini_batch": args.mini_batch,
            "epochs": args.epochs,
            "lr": args.lr,
            "temperature": args.temperature,
            "max_new_tokens": args.max_new_tokens,
            "eval_temperature": args.temperature if args.eval_temperature is None else args.eval_temperature,
            "eval_samples": args.eval_samples,
            "eval_every": args.eval_every,
            "checkpoint_every": 0,
            "seed": seed,
            "max_staleness": 0,  # this loop is synchronous: old logprobs = the recorded ones
        },
    )
    cfg = settings.trainer_config()
    loss = dataclasses.replace(cfg.loss, clip_ratio_low=args.clip, clip_ratio_high=args.clip)
    return cfg.replace(loss=loss, grpo=GRPOConfig(scale_by_std=not args.dr_grpo))


def named_correctly(texts: list[str], samples: int = 1) -> str:
    """``"k/n"``: how many of the n held-out replies contain their capital (``samples`` replies per
    country, in task order, as :func:`loop.evaluate` returns them); ``"?/n"`` when some evaluation
    rollouts failed (they store no reply, so replies and tasks cannot be paired)."""
    from strands_art.training.tasks_toy import capital_reward, capital_tasks

    tasks = [task for task in capital_tasks("heldout") for _ in range(samples)]
    if len(texts) != len(tasks):
        return f"?/{len(tasks)}"
    return f"{sum(1 for t, task in zip(texts, tasks, strict=True) if capital_reward(t, task.capital) > 0)}/{len(tasks)}"


def own_session() -> None:
    """Worker initializer: start a new session, so that Linux's autogroup scheduling
    (``/proc/sys/kernel/sched_autogroup_enabled``) gives each seed's process its own CPU share.
    Otherwise the scheduler divides one session's share among all the workers, and on a shared
    machine ``--jobs 5`` runs each seed at a fifth of the speed of ``--jobs 1``. A worker in its
    own session no longer gets the terminal's Ctrl-C, so it asks the kernel to send it SIGTERM
    when the benchmark process dies (``prctl(PR_SET_PDEATHSIG)``, Linux)."""
    if not hasattr(os, "setsid"):
        return
    try:
        os.setsid()
    except PermissionError:  # already a session or process-group leader
        return
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
        if os.getppid() == 1:  # the parent died before prctl took effect
            os._exit(1)


def run_seed(args: argparse.Namespace, seed: int) -> list[dict[str, Any]]:
    """One seed's training run (in its own process); returns its metrics records."""
    import torch
    import transformers

    from strands_art.backends.base import SamplingParams
    from strands_art.gateway import RolloutGateway
    from strands_art.registry import load_causal_lm, load_tokenizer
    from strands_art.training import loop
    from strands_art.training.local import LocalTrainer
    from strands_art.training.rollouts import chat_rollout
    from strands_art.training.tasks_toy import capital_tasks

    logging.basicConfig(level=logging.WARNING)
    warnings.filterwarnings("ignore", category=FutureWarning)  # transformers deprecation notices
    transformers.utils.logging.disable_progress_bar()  # five interleaved "Loading weights" bars
    torch.set_num_threads(args.threads)
    torch.manual_seed(seed)  # the LoRA initialization
    run_dir = Path(args.run_dir) / f"seed-{seed}"
    shutil.rmtree(run_dir, ignore_errors=True)
    t0 = time.perf_counter()
    tok = load_tokenizer("smollm2")
    trainer = LocalTrainer(load_causal_lm("smollm2", device="cpu"), tok, trainer_config(args, seed))
    gateway = RolloutGateway(tok, trainer.backend)

    def show(r: dict[str, Any]) -> None:
        if r["kind"] == "eval":
            line = (
                f"eval after {r['outer_batch']:2d} batches: held-out reward {r['val_reward']:.3f} "
                f"({named_correctly(r['val_texts'], args.eval_samples)} named) {r['val_texts'][:3]}"
            )
        else:
            line = (
                f"batch {r['outer_batch']:2d}: reward {r['reward_mean']:.3f}±{r['reward_std']:.3f} "
                f"kl {r['approx_kl']:.4f} clip {r['clip_fraction']:.3f} grad {r['grad_norm']:.2f} "
                f"zero-adv {r['zero_advantage_groups']} | rollouts {r['rollout_s']:.0f}s train {r['train_s']:.0f}s"
            )
        print(f"[seed {seed}] {line}", flush=True)

    greedy = SamplingParams(temperature=0.0, max_new_tokens=args.max_new_tokens)

    async def greedy_eval(when: str) -> dict[str, Any]:
        res = await loop.evaluate(
            gateway, capital_tasks("heldout"), chat_rollout, greedy, 1, seed=seed, progress=False
        )
        print(
            f"[seed {seed}] greedy {when}: held-out reward {res['val_reward']:.3f} "
            f"({named_correctly(res['val_texts'])} named) {res['val_texts'][:3]}",
            flush=True,
        )
        return {"kind": "greedy", "when": when, **res}

    async def run() -> list[dict[str, Any]]:
        before = await greedy_eval("before")
        records = await loop.train(
            trainer, gateway, capital_tasks("train"), chat_rollout, args.outer_batches, run_dir,
            eval_tasks=capital_tasks("heldout"), progress=False, on_batch=show,
        )  # fmt: skip
        return [before, *records, await greedy_eval("after")]

    records = asyncio.run(run())
    print(
        f"[seed {seed}] done: {trainer.step} optimizer steps, wall {time.perf_counter() - t0:.0f}s",
        flush=True,
    )
    return records


def report(runs: dict[int, list[dict[str, Any]]], wall: float, samples: int) -> dict[str, Any]:
    """Print the per-seed table and the mean line; return :func:`metrics.seed_summary` of ``runs``
    (the sampled held-out reward) with ``greedy_start`` / ``greedy_end`` (means over seeds) added."""
    import statistics

    from strands_art.training.metrics import seed_summary

    summary = seed_summary(runs)
    greedy = {s: {r["when"]: r for r in runs[s] if r.get("kind") == "greedy"} for s in runs}
    print(
        f"\nheld-out reward: sampled ({samples} replies per country, the measure) and greedy; "
        "named = replies containing the capital"
    )
    print(
        "seed  sampled before  after    gain   named before -> after   greedy before  after  named   greedy reply after"
    )
    for s in summary["seeds"]:
        evals = [r for r in runs[s["seed"]] if r["kind"] == "eval"]
        g0, g1 = greedy[s["seed"]].get("before"), greedy[s["seed"]].get("after")
        g_cols = (
            f"{g0['val_reward']:13.3f} {g1['val_reward']:6.3f}  {named_correctly(g1['val_texts']):>5s}   "
            f"{g1['val_texts'][0] if g1['val_texts'] else None!r}"
            if g0 and g1
            else "    (no greedy evaluation)"
        )
        print(
            f"{s['seed']:4d}  {s['start']:14.3f} {s['end']:6.3f} {s['gain']:+7.3f}   "
            f"{named_correctly(evals[0]['val_texts'], samples):>7s} -> {named_correctly(evals[-1]['val_texts'], samples):<7s}"
            f"      {g_cols}"
        )
    pairs = [(g["before"]["val_reward"], g["after"]["val_reward"]) for g in greedy.values() if len(g) == 2]
    if pairs:
        summary["greedy_start"] = statistics.fmean(p[0] for p in pairs)
        summary["greedy_end"] = statistics.fmean(p[1] for p in pairs)
    print(
        f"mean  {summary['reward_start']:14.3f} {summary['reward_end']:6.3f} {summary['gain_mean']:+7.3f}   "
        f"gain std over seeds {summary['gain_std']:.3f}, min gain {summary['gain_min']:+.3f}, "
        f"improved {summary['improved']}/{summary['n']}; greedy {summary.get('greedy_start', float('nan')):.3f} -> "
        f"{summary.get('greedy_end', float('nan')):.3f}; wall {wall:.0f}s"
    )
    return summary


def result_line(summary: dict[str, Any]) -> str:
    """The closing ``RESULT ...`` line of a :func:`report` summary."""
    return (
        f"RESULT reward_start={summary['reward_start']:.3f} reward_end={summary['reward_end']:.3f} "
        f"gain_mean={summary['gain_mean']:.3f} gain_std={summary['gain_std']:.3f} "
        f"improved_seeds={summary['improved']}/{summary['n']} "
        f"greedy_start={summary.get('greedy_start', float('nan')):.3f} "
        f"greedy_end={summary.get('greedy_end', float('nan')):.3f}"
    )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from strands_art.training.metrics import plot_seeds
    from strands_art.training.trainer_config import TrainerConfig

    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    cfg: TrainerConfig = trainer_config(args, seeds[0])
    print(
        f"SmolLM2-135M-Instruct + LoRA r={cfg.lora_rank}: {len(seeds)} seeds {seeds}, {args.jobs} job(s) x "
        f"{args.threads} torch thread(s); {args.outer_batches} outer batches of {cfg.prompt_batch_size} tasks x "
        f"{cfg.rollouts_per_prompt} rollouts, {cfg.batching().num_mini_batches * cfg.ppo_epochs} optimizer "
        f"steps each; lr {cfg.learning_rate}, T={cfg.sampling.temperature}, max_new_tokens "
        f"{cfg.sampling.max_new_tokens}, clip {args.clip}, {'Dr.GRPO' if args.dr_grpo else 'GRPO (std-scaled)'}; held-out: {cfg.eval_samples} sampled replies per "
        f"country at T={cfg.eval_sampling.temperature}, and greedy",
        flush=True,
    )
    t0 = time.perf_counter()
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(args.jobs, mp_context=spawn, initializer=own_session) as pool:
        futures = {seed: pool.submit(run_seed, args, seed) for seed in seeds}
        runs = {seed: f.result() for seed, f in futures.items()}
    wall = time.perf_counter() - t0
    records_path = Path(args.run_dir) / "records.json"  # every seed's records, greedy evaluations included
    records_path.write_text(json.dumps({str(k): v for k, v in runs.items()}), encoding="utf-8")
    summary = report(runs, wall, args.eval_samples)
    plot = Path(args.plot) if args.plot else Path(args.run_dir) / "learning-seeds.png"
    plot.parent.mkdir(parents=True, exist_ok=True)
    plot_seeds(runs, plot)
    print(f"plot {plot}")
    print(result_line(summary))


if __name__ == "__main__":
    main()
