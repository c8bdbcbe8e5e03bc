"""Synchronous vs asynchronous rollouts (``max_staleness`` 0 vs K) on the lookup tool task, CPU.

Each (mode, seed) trains Qwen2.5-Coder-0.5B-Instruct + LoRA with the embedded loop
(:func:`strands_art.training.loop.train`) on the multi-turn lookup task
(:mod:`strands_art.envs.lookup`) for the same number of updates. In both modes the sampler is a
second in-process copy of the model (:class:`~strands_art.training.local_sync.CopySync`) whose
generation thread is pinned to one core (``--sampler-cores``) and the trainer's update runs on a
thread pinned to another (``--trainer-cores``), with one torch thread: the two never compete for a
core, as on a machine where a vLLM server and the trainer have their own GPUs. Synchronous
(``K = 0``): collect batch b, then update on it. Asynchronous (``K`` = ``--max-staleness``): the
rollouts of batch b + 1 run on the sampler core while the trainer updates on batch b.

Measured per (mode, seed): wall time per update (from the end of the initial held-out evaluation
to the last update), rollouts dropped as stale (fraction of all rollouts), and the final held-out
success (reward 1.0: one call, then the code) of ``--eval-samples`` sampled rollouts per
held-out key. The modes of one seed run back to back in this process, so the ratio compares
them on the same machine state.

Usage: ``python bench/async.py [--seeds 0,1,2 --updates 5]``. Ends with
``RESULT updates_per_hour_ratio=… success_sync=… success_async=… dropped_fraction=…``
(``updates_per_hour_ratio`` = synchronous seconds per update / asynchronous seconds per update,
means over seeds; successes are means over seeds, their standard deviations follow).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import asyncio  # noqa: E402
import logging  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

MODEL = "qwen2.5-coder-0.5b"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    p.add_argument("--updates", type=int, default=5, help="updates (outer batches) per run")
    p.add_argument("--max-staleness", type=int, default=1, help="K of the asynchronous mode")
    p.add_argument("--prompt-batch", type=int, default=2, help="tasks per outer batch")
    p.add_argument("--rollouts", type=int, default=8, help="rollouts per task (GRPO group)")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--warmup-steps", type=int, default=4)
    p.add_argument("--kl-coef", type=float, default=0.05)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--max-turns", type=int, default=2)
    p.add_argument("--heldout", type=int, default=8, help="held-out keys evaluated (at most 8)")
    p.add_argument("--eval-samples", type=int, default=4, help="sampled rollouts per held-out key")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--sampler-cores", default="1", help="cores of the sampler thread")
    p.add_argument("--trainer-cores", default="0", help="cores of the trainer thread")
    p.add_argument("--run-dir", default="runs/async-bench")
    return p.parse_args(argv)


def _cores(text: str) -> set[int]:
    return {int(c) for c in text.split(",") if c.strip()}


async def run_one(args: argparse.Namespace, seed: int, k: int) -> dict[str, Any]:
    """One training run (mode ``k``, ``seed``); returns its timing, drops and held-out success."""
    import torch

    from strands_art.envs.lookup import train_environment
    from strands_art.registry import load_causal_lm, load_tokenizer
    from strands_art.training import loop
    from strands_art.training.environment import EnvOptions
    from strands_art.training.local import LocalTrainer
    from strands_art.training.local_sync import CopySync
    from strands_art.training.lora import lora_model
    from strands_art.training.settings import TrainSettings

    torch.set_num_threads(1)
    run_dir = Path(args.run_dir) / f"k{k}-seed{seed}"
    shutil.rmtree(run_dir, ignore_errors=True)
    settings = TrainSettings.resolve(
        "lookup", str(run_dir),
        {"model": MODEL, "prompt_batch": args.prompt_batch, "rollouts_per_prompt": args.rollouts,
         "ppo_mini_batch": 1, "lr": args.lr, "warmup_steps": args.warmup_steps, "kl_coef": args.kl_coef,
         "micro_batch_tokens": 512, "lora_rank": 16, "temperature": 1.0, "max_new_tokens": args.max_new_tokens,
         "eval_temperature": 1.0, "seed": seed, "concurrency": args.concurrency, "checkpoint_every": 0,
         "max_staleness": k},  # old logprobs as the command takes them for this K
    )  # fmt: skip
    cfg = settings.trainer_config()
    sampling = cfg.sampling
    tok = load_tokenizer(MODEL)
    model = lora_model(load_causal_lm(MODEL, device="cpu"), cfg)
    sync = CopySync(model, tok, cores=_cores(args.sampler_cores))
    trainer = LocalTrainer(model, tok, cfg, weight_sync=sync)
    env = train_environment(EnvOptions(max_turns=args.max_turns))
    gateway = env.gateway(tok, trainer.backend)
    heldout = list(env.eval_tasks)[: args.heldout]
    pinned = ThreadPoolExecutor(1, initializer=os.sched_setaffinity, initargs=(0, _cores(args.trainer_cores)))
    marks: list[float] = []
    tag = f"[K={k} seed {seed}]"

    def show(r: dict[str, Any]) -> None:
        marks.append(time.perf_counter())
        if r["kind"] == "train":
            print(
                f"{tag} update {r['outer_batch']}: reward {r['reward_mean']:.3f} rollouts {r['rollout_s']:.0f}s "
                f"train {r['train_s']:.0f}s waited {r.get('rollout_wait_s', r['rollout_s']):.0f}s "
                f"dropped {r.get('stale_dropped', 0)} lag max {r['policy_lag_max']:.0f}",
                flush=True,
            )

    records = await loop.train(
        trainer, gateway, env.train_tasks, env.rollout, args.updates, run_dir, eval_tasks=heldout[:1],
        progress=False, on_batch=show, max_staleness=k, train_executor=pinned,
    )  # fmt: skip
    # marks[0]: the initial evaluation (one key, to start the clock after warm-up); marks[-2]: the
    # last update (marks[-1] is the final one-key evaluation)
    per_update = (marks[-2] - marks[0]) / args.updates
    sync.publish()
    final = await loop.collect_rollouts(
        gateway, heldout, env.rollout, sampling, args.eval_samples, seed=seed + 7919, outer_batch=args.updates,
        concurrency=args.concurrency, prefix="final-", progress=False,
    )  # fmt: skip
    pinned.shutdown()
    await trainer.backend.aclose()
    train = [r for r in records if r["kind"] == "train"]
    success = statistics.fmean(
        bool(t.metadata.get("success")) and not t.metadata.get("failed") for t in final
    )
    rollouts = sum(r["rollouts"] for r in train)
    dropped = sum(r.get("stale_dropped", 0) for r in train)
    print(
        f"{tag} {per_update:.0f}s per update, held-out success {success:.3f}, dropped {dropped}/{rollouts}",
        flush=True,
    )
    return {
        "per_update": per_update,
        "success": success,
        "dropped": dropped,
        "rollouts": rollouts,
        "steps": [r["optimizer_steps"] for r in train],
        "rollout_s": statistics.fmean(r["rollout_s"] for r in train),
        "train_s": statistics.fmean(r["train_s"] for r in train),
    }


def main() -> None:
    args = parse_args()
    logging.basicConfig(level=logging.ERROR)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    k = args.max_staleness
    if k < 1 or not seeds:
        raise SystemExit("async: need --max-staleness >= 1 and at least one seed")
    t0 = time.perf_counter()
    print(
        f"{MODEL} + LoRA r=16 on the lookup task; sampler pinned to cores {args.sampler_cores}, trainer to "
        f"{args.trainer_cores}, 1 torch thread each; {len(seeds)} seed(s) x (K=0, K={k}), {args.updates} "
        f"updates of {args.prompt_batch} task(s) x {args.rollouts} rollouts, {args.max_turns} turns x "
        f"{args.max_new_tokens} tokens; final held-out: {args.heldout} keys x {args.eval_samples} sampled",
        flush=True,
    )
    runs: dict[int, list[dict[str, Any]]] = {0: [], k: []}
    for seed in seeds:
        for mode in (0, k):
            runs[mode].append(asyncio.run(run_one(args, seed, mode)))
    sync, asy = runs[0], runs[k]
    ratio = statistics.fmean(r["per_update"] for r in sync) / statistics.fmean(r["per_update"] for r in asy)

    def mean_std(rs: list[dict[str, Any]]) -> tuple[float, float]:
        xs = [r["success"] for r in rs]
        return statistics.fmean(xs), statistics.stdev(xs) if len(xs) > 1 else 0.0

    (s_mean, s_std), (a_mean, a_std) = mean_std(sync), mean_std(asy)
    dropped = sum(r["dropped"] for r in asy) / max(1, sum(r["rollouts"] for r in asy))
    print("\nmode   seed  s/update  rollout_s  train_s  success  steps/update")
    for mode, rs in ((0, sync), (k, asy)):
        for seed, r in zip(seeds, rs, strict=True):
            print(
                f"K={mode:<3d} {seed:4d}  {r['per_update']:8.0f}  {r['rollout_s']:9.0f}  {r['train_s']:7.0f}  "
                f"{r['success']:7.3f}  {r['steps']}"
            )
    print(f"wall {time.perf_counter() - t0:.0f}s")
    print(
        f"RESULT updates_per_hour_ratio={ratio:.2f} success_sync={s_mean:.3f} success_async={a_mean:.3f} "
        f"dropped_fraction={dropped:.3f} success_sync_std={s_std:.3f} success_async_std={a_std:.3f} "
        f"s_per_update_sync={statistics.fmean(r['per_update'] for r in sync):.0f} "
        f"s_per_update_async={statistics.fmean(r['per_update'] for r in asy):.0f} seeds={len(seeds)} "
        f"updates={args.updates}"
    )


if __name__ == "__main__":
    main()
