"""Deterministic updates for a given seed (issue 15 item 1).

Two short trainings of the real SmolLM2-135M-Instruct (transformers backend, LoRA) whose
rollouts finish in different orders (random delays before and after each generation, different
delay seeds) end with bit-identical LoRA weights, rows and metrics; a third run with another
training seed differs. The trainer's update and the batch layout do not depend on the order in
which they are handed the rollouts either (a real trainer update, and a hypothesis property).
"""

from __future__ import annotations

import asyncio
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from support.fakes import TRAIN_TRUNCATED, LengthTask, tiny_llama
from test_local_trainer import split_rows

from strands_art.backends.base import SamplingParams
from strands_art.gateway import RolloutGateway
from strands_art.registry import load_causal_lm, load_tokenizer
from strands_art.training import loop
from strands_art.training.batching import BatchingConfig, BatchRow, build_batch, micro_batches
from strands_art.training.local import LocalTrainer
from strands_art.training.loss import LossConfig
from strands_art.training.metrics import TIMING_KEYS
from strands_art.training.rollouts import chat_rollout
from strands_art.training.trainer_config import TrainerConfig
from strands_art.trajectory import Row, Trajectory

TASKS = [LengthTask(n) for n in ("cats", "rivers", "bread", "winter")]


def delayed(rollout, delay_seed: int, finished: list[str], rows: dict[str, list[dict]]):
    """``rollout`` with a random sleep before and after it: rollouts reach the backend and finish
    in an order set by ``delay_seed``; records the finishing order and each rollout's rows."""
    rng = random.Random(delay_seed)

    async def run(gateway, task, rollout_id, group_id, sampling) -> Trajectory:
        before, after = rng.uniform(0, 0.15), rng.uniform(0, 0.15)
        await asyncio.sleep(before)
        traj = await rollout(gateway, task, rollout_id, group_id, sampling)
        await asyncio.sleep(after)
        finished.append(rollout_id)
        rows[rollout_id] = [r.to_dict() for r in traj.rows]
        return traj

    return run


def lora_state(trainer: LocalTrainer) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}


def untimed(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in records]


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # conftest.py


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    return load_tokenizer("smollm2")


def smollm2_run(tok, tmp_path, name: str, seed: int, delay_seed: int) -> dict:
    cfg = TrainerConfig(
        prompt_batch_size=2,
        rollouts_per_prompt=2,
        ppo_mini_batch_size=1,
        ppo_epochs=1,
        learning_rate=2e-2,
        lora_rank=4,
        lora_alpha=8,
        sampling=SamplingParams(temperature=1.0, max_new_tokens=4),
        grpo=TRAIN_TRUNCATED,
        micro_batch_max_tokens=60,  # rows of ~40 tokens: 2 micro-batches accumulated per step
        concurrency=4,
        checkpoint_every=0,
        seed=seed,
    )
    trainer = LocalTrainer(load_causal_lm("smollm2", device="cpu"), tok, cfg)
    init = lora_state(trainer)
    gateway = RolloutGateway(tok, trainer.backend)
    finished: list[str] = []
    rows: dict[str, list[dict]] = {}
    records = asyncio.run(
        loop.train(
            trainer, gateway, TASKS, delayed(chat_rollout, delay_seed, finished, rows), 2,
            tmp_path / name, progress=False,
        )
    )  # fmt: skip
    return {"init": init, "lora": lora_state(trainer), "records": records, "finished": finished, "rows": rows}


def test_same_seed_same_updates_whatever_the_completion_order(smollm2_tokenizer, tmp_path):
    a = smollm2_run(smollm2_tokenizer, tmp_path, "a", seed=3, delay_seed=1)
    b = smollm2_run(smollm2_tokenizer, tmp_path, "b", seed=3, delay_seed=2)
    # the rollouts really finished in different orders, and the training really moved the adapter
    assert a["finished"] != b["finished"] and sorted(a["finished"]) == sorted(b["finished"])
    assert len(a["finished"]) == 8
    train = [r for r in a["records"] if r["kind"] == "train"]
    assert [r["optimizer_steps"] for r in train] == [2, 2]
    assert any(r["zero_advantage_groups"] < 2 and r["grad_norm"] > 0 for r in train)  # a real gradient
    assert any(not torch.equal(a["init"][n], a["lora"][n]) for n in a["lora"])
    # identical rows (token IDs, masks, logprobs), metrics and LoRA weights, bit for bit
    assert a["rows"] == b["rows"]
    assert untimed(a["records"]) == untimed(b["records"])
    assert a["lora"].keys() == b["lora"].keys()
    for n in a["lora"]:
        assert torch.equal(a["lora"][n], b["lora"][n]), n
    # another training seed: other adapter init, other samples, other weights
    c = smollm2_run(smollm2_tokenizer, tmp_path, "c", seed=4, delay_seed=1)
    assert c["rows"] != a["rows"]
    assert any(not torch.equal(a["lora"][n], c["lora"][n]) for n in a["lora"])


# ---------------------------------------------------------------- the update alone


@pytest.mark.parametrize("kl_coef", [0.0, 0.1])
def test_update_does_not_depend_on_the_order_of_the_trajectories(smollm2_tokenizer, kl_coef):
    """Also with the KL penalty (a reference pass with the adapter disabled per micro-batch)."""
    cfg = TrainerConfig(
        prompt_batch_size=2, rollouts_per_prompt=3, ppo_mini_batch_size=2, ppo_epochs=2,
        learning_rate=5e-2, lora_rank=4, lora_alpha=8, loss=LossConfig(kl_coef=kl_coef),
        sampling=SamplingParams(temperature=0.8, max_new_tokens=6), micro_batch_max_tokens=90,
        grpo=TRAIN_TRUNCATED,
    )  # fmt: skip
    first = LocalTrainer(tiny_llama(), smollm2_tokenizer, cfg)
    gateway = RolloutGateway(smollm2_tokenizer, first.backend)
    trajs = asyncio.run(
        loop.collect_rollouts(
            gateway, TASKS[:2], chat_rollout, cfg.sampling, 3, seed=0, outer_batch=0, progress=False
        )
    )
    assert len({t.reward for t in trajs}) > 1
    trajs = [split_rows(t) for t in trajs]  # 2 rows per rollout, equal lengths: ties
    second = LocalTrainer(tiny_llama(), smollm2_tokenizer, cfg)
    shuffled = list(trajs)
    random.Random(5).shuffle(shuffled)
    assert [t.rollout_id for t in shuffled] != [t.rollout_id for t in trajs]
    m1 = first.update(trajs)
    m2 = second.update(shuffled)
    assert m1["micro_batches"] > 2  # several micro-batches per step: accumulation order matters
    assert {k: v for k, v in m1.items() if k not in TIMING_KEYS} == {
        k: v for k, v in m2.items() if k not in TIMING_KEYS
    }
    s1, s2 = lora_state(first), lora_state(second)
    for n in s1:
        assert torch.equal(s1[n], s2[n]), n


# ---------------------------------------------------------------- layout (property)


def layout(rows: list[BatchRow], config: BatchingConfig) -> list:
    """Mini-batches → shards → micro-batches as (rollout_id, row length) pairs."""
    batch = build_batch(rows, config)
    return [
        [
            [[(r.row.rollout_id, r.num_tokens) for r in micro] for micro in micro_batches(shard, 64)]
            for shard in mb.shards
        ]
        for mb in batch.mini_batches
    ]


@settings(max_examples=60, deadline=None)
@given(
    groups=st.lists(
        st.lists(st.lists(st.integers(2, 20), min_size=1, max_size=3), min_size=1, max_size=4),
        min_size=2,
        max_size=4,
    ),
    dp=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_batch_layout_is_invariant_to_rollout_order(groups, dp, seed):
    """``groups[g][k]`` = row lengths of rollout ``k`` of group ``g``; many equal lengths (ties)."""
    rollouts = []
    for g, members in enumerate(groups):
        for k, lengths in enumerate(members):
            rollouts.append(
                [
                    BatchRow(Row(list(range(n)), [0] * (n - 1) + [1], [0.0] * n, f"g{g}-r{k}", f"g{g}"), 0.5)
                    for n in lengths
                ]
            )
    config = BatchingConfig(prompt_batch_size=len(groups), ppo_mini_batch_size=1, dp_size=dp)
    shuffled = list(rollouts)
    random.Random(seed).shuffle(shuffled)
    flat = [r for ro in rollouts for r in ro]
    assert layout(flat, config) == layout([r for ro in shuffled for r in ro], config)
