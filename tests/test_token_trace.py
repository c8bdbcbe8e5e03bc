"""The rows as trained (training/token_trace.py, training/run_store.py) on a tiny random Llama
through the real gateway and trainer: what is recorded is what the loss used, the file holds the
trainer's advantages and every row, a resume drops what it redoes, and the viewer shows it."""

from __future__ import annotations

import asyncio
import dataclasses

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from support.fakes import TRAIN_TRUNCATED, LengthTask, tiny_llama

from strands_art.backends.base import SamplingParams
from strands_art.gateway import RolloutGateway
from strands_art.registry import load_tokenizer
from strands_art.training import loop
from strands_art.training.grpo import compute_advantages
from strands_art.training.local import LocalTrainer
from strands_art.training.rollouts import chat_rollout
from strands_art.training.run_store import RunStore, parse_rollout_id, trained_path
from strands_art.training.trainer_config import TrainerConfig

TASKS = [LengthTask(f"t{i}") for i in range(6)]
SAMPLING = SamplingParams(temperature=0.8, max_new_tokens=6)


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("smollm2")


def make(tok, **kw):
    torch.manual_seed(0)
    cfg = dict(
        prompt_batch_size=2, rollouts_per_prompt=3, ppo_mini_batch_size=1, ppo_epochs=2,
        learning_rate=5e-2, lora_rank=4, lora_alpha=8, sampling=SAMPLING,
        eval_sampling=SamplingParams(temperature=0.0, max_new_tokens=6), micro_batch_max_tokens=200,
        grpo=TRAIN_TRUNCATED,
    )  # fmt: skip
    cfg.update(kw)
    trainer = LocalTrainer(tiny_llama(), tok, TrainerConfig(**cfg))
    return trainer, RolloutGateway(tok, trainer.backend)


def batch(trainer, gateway, b=0):
    tasks = loop.sample_tasks(TASKS, 2, 0, b)
    return asyncio.run(
        loop.collect_rollouts(
            gateway, tasks, chat_rollout, SAMPLING, 3, seed=0, outer_batch=b, progress=False
        )
    )


def test_the_trace_is_what_the_loss_used(tok, tmp_path):
    trainer, gateway = make(tok)
    trainer.trace = {}
    trajs = batch(trainer, gateway)
    first = trajs[0].group_id
    trajs = [
        dataclasses.replace(t, reward=0.5) if t.group_id == first else t for t in trajs
    ]  # one tied group
    trajs[-1].metadata.update(failed=True, error="RuntimeError: the sampler went away")
    trainer.update(trajs)
    adv = compute_advantages(trajs, trainer.config.grpo)
    entries = list(trainer.trace.values())
    forwarded = [t for t in trajs if t.group_id != first and not t.metadata.get("failed")]
    assert {e["row"].rollout_id for e in entries} == {t.rollout_id for t in forwarded}
    for e in entries:
        row = e["row"]
        assert e["advantage"] == adv.advantages[row.rollout_id] != 0
        # one group per mini-batch: the tied group's step (its rows skipped, no update) and the
        # other group's are steps 1 and 2 of the first epoch; no gradient was applied before
        assert e["step"] in (1, 2)
        assert e["loss_mask"].tolist() == row.loss_mask  # nothing filtered at temperature 0.8
        on = np.asarray(row.loss_mask, bool)
        np.testing.assert_allclose(e["sampler_logprobs"][on], np.asarray(row.logprobs)[on], atol=1e-6)
        # the trainer's model is the sampler's at step 1: the ratio is 1 up to numerics, no clip
        np.testing.assert_allclose(e["trainer_logprobs"][on], e["sampler_logprobs"][on], atol=2e-3)
        assert not e["clipped"].any() and np.allclose(e["importance_weight"][on], 1.0)
        assert (e["importance_weight"][~on] == 0).all()
    assert sum(int(e["loss_mask"].sum()) for e in entries) == sum(
        r.num_sampled for t in forwarded for r in t.rows
    )

    store = RunStore(tmp_path)
    store.add(trajs, "train", 0)
    path = store.write_trained(0, trajs, trainer.trace, trainer.config.grpo)
    assert path == trained_path(tmp_path, 0)
    recs = pq.read_table(path).to_pylist()
    assert [(r["rollout_id"], r["row_index"]) for r in recs] == [
        (t.rollout_id, i) for t in trajs for i in range(len(t.rows))
    ]
    for r in recs:
        if r["rollout_id"] == trajs[-1].rollout_id:
            assert r["advantage"] is None and r["excluded"].startswith("rollout failed: RuntimeError")
            assert not r["forwarded"]
        elif r["rollout_id"] in {t.rollout_id for t in forwarded}:
            assert r["forwarded"] and r["advantage"] == adv.advantages[r["rollout_id"]]
            (row,) = next(t for t in trajs if t.rollout_id == r["rollout_id"]).rows
            assert len(r["trainer_logprobs"]) == len(row.input_ids) and r["loss_mask"] == row.loss_mask
        else:  # the tied group: advantage 0, skipped exactly
            assert r["advantage"] == 0.0 and not r["forwarded"] and r["trainer_logprobs"] is None


def test_first_pass_old_logprobs_give_ratio_one(tok):
    trainer, gateway = make(tok, old_logprobs="first-pass", ppo_epochs=1)
    trainer.trace = {}
    trainer.update(batch(trainer, gateway))
    for e in trainer.trace.values():
        on = e["loss_mask"].astype(bool)
        np.testing.assert_allclose(e["old_logprobs"][on], e["trainer_logprobs"][on], atol=1e-6)


def test_resume_keeps_what_the_checkpoint_covers(tok, tmp_path):
    from strands_art.trajectory import Trajectory

    store = RunStore(tmp_path)
    for b in range(3):
        store.add([Trajectory(rollout_id=f"b{b}-t0-r0", group_id="t0", reward=1.0)], "train", b)
    for b in (0, 2, 3):
        store.add([Trajectory(rollout_id=f"eval-b{b}-k-r0", group_id="k", reward=0.0)], "eval", b)
    (tmp_path / "rows").mkdir()
    for b in range(3):
        trained_path(tmp_path, b).write_bytes(b"x")
    store.reconcile(2, {0, 2})
    assert store.store.rollout_ids() == {"b0-t0-r0", "b1-t0-r0", "eval-b0-k-r0", "eval-b2-k-r0"}
    assert [trained_path(tmp_path, b).exists() for b in range(3)] == [True, True, False]
    assert parse_rollout_id("eval-b12-x-r3") == ("eval", 12) and parse_rollout_id("task-r0") is None
