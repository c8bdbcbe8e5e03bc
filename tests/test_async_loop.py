"""Asynchronous rollouts with bounded staleness (strands_art.training.staleness, loop.train's
``max_staleness``): 0 is the synchronous loop bit for bit; under asynchrony the optimizer steps per
outer batch stay those of the configuration whatever arrives, in whatever order."""

from __future__ import annotations

import asyncio
import os
import random
import time

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from support.fakes import TRAIN_TRUNCATED, LengthTask, tiny_llama
from test_determinism import delayed, lora_state, untimed

from strands_art.backends.base import SamplingParams
from strands_art.gateway import RolloutGateway
from strands_art.registry import load_tokenizer
from strands_art.training import loop
from strands_art.training.local import LocalTrainer
from strands_art.training.rollouts import chat_rollout
from strands_art.training.staleness import drop_stale, updates_behind
from strands_art.training.trainer_config import TrainerConfig
from strands_art.trajectory import Trajectory, Turn

TASKS = [LengthTask(n) for n in ("cats", "rivers", "bread", "winter")]


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("smollm2")


def config(**kw) -> TrainerConfig:
    base = dict(
        prompt_batch_size=2, rollouts_per_prompt=3, ppo_mini_batch_size=1, ppo_epochs=2,
        learning_rate=5e-2, lora_rank=4, lora_alpha=8, micro_batch_max_tokens=90, concurrency=4,
        sampling=SamplingParams(temperature=1.0, max_new_tokens=4), checkpoint_every=0, seed=1,
        grpo=TRAIN_TRUNCATED,
    )  # fmt: skip
    base.update(kw)
    return TrainerConfig(**base)


def test_max_staleness_zero_is_collect_then_update_bit_for_bit(tok, tmp_path):
    """K=0 through loop.train equals the synchronous loop written out by hand: collect batch b,
    update on it, next batch (same rows, metrics and LoRA weights)."""
    cfg = config()
    a = LocalTrainer(tiny_llama(), tok, cfg)
    gw_a = RolloutGateway(tok, a.backend)
    rows_a: dict[int, list] = {}
    records = asyncio.run(
        loop.train(
            a, gw_a, TASKS, chat_rollout, 3, tmp_path / "a", progress=False, max_staleness=0,
            on_rollouts=lambda b, trajs: rows_a.__setitem__(b, [r.to_dict() for t in trajs for r in t.rows]),
        )
    )  # fmt: skip
    b = LocalTrainer(tiny_llama(), tok, cfg)
    gw_b = RolloutGateway(tok, b.backend)
    rows_b, metrics_b = {}, []
    for ob in range(3):
        batch = loop.sample_tasks(TASKS, cfg.prompt_batch_size, cfg.seed, ob)
        trajs = asyncio.run(
            loop.collect_rollouts(
                gw_b, batch, chat_rollout, cfg.sampling, cfg.rollouts_per_prompt, seed=cfg.seed,
                outer_batch=ob, concurrency=cfg.concurrency, progress=False,
            )
        )  # fmt: skip
        rows_b[ob] = [r.to_dict() for t in trajs for r in t.rows]
        metrics_b.append(b.update(trajs))
    assert rows_a == rows_b
    train = [r for r in records if r["kind"] == "train"]
    assert [r["optimizer_steps"] for r in train] == [4, 4, 4]
    assert "stale_dropped" not in train[0]  # the synchronous record, unchanged
    strip = {"kind", "outer_batch", "rollout_s", "history_mode"}
    assert untimed([{k: v for k, v in r.items() if k not in strip} for r in train]) == untimed(metrics_b)
    sa, sb = lora_state(a), lora_state(b)
    init = lora_state(LocalTrainer(tiny_llama(), tok, cfg))
    assert any(not torch.equal(sa[n], init[n]) for n in sa)  # the updates really moved the adapter
    for n in sa:
        assert torch.equal(sa[n], sb[n]), n


@pytest.mark.parametrize("delay_seed", [1, 2])
def test_async_loop_keeps_the_step_count_and_the_staleness_bound(tok, tmp_path, delay_seed):
    """K=1 with rollouts finishing in random orders (random delays): every outer batch takes
    exactly P/M x E optimizer steps, and no trained turn is more than K updates behind."""
    cfg = config(seed=delay_seed)
    trainer = LocalTrainer(tiny_llama(), tok, cfg)
    gateway = RolloutGateway(tok, trainer.backend)
    finished: list[str] = []
    rows: dict[str, list[dict]] = {}
    lags: list[int] = []

    def check(b: int, trajs: list[Trajectory]) -> None:
        for t in trajs:
            if not t.metadata.get("failed"):
                lags.extend(updates_behind(v.policy_version, trainer.step, 4) for v in t.turns)

    records = asyncio.run(
        loop.train(
            trainer, gateway, TASKS, delayed(chat_rollout, delay_seed, finished, rows), 4,
            tmp_path / "run", progress=False, max_staleness=1, on_rollouts=check,
        )
    )  # fmt: skip
    train = [r for r in records if r["kind"] == "train"]
    assert [r["optimizer_steps"] for r in train] == [4, 4, 4, 4]
    assert trainer.step == 16
    assert all(r["max_staleness"] == 1 and r["stale_dropped"] == 0 for r in train)
    assert lags and max(lags) <= 1
    assert len(finished) == 4 * 6


def _traj(rid: str, group: str, versions: list[int]) -> Trajectory:
    t = Trajectory(rollout_id=rid, group_id=group)
    t.turns = [
        Turn(index=i, prompt_ids=[1], output_ids=[2], logprobs=[0.0], finish_reason="stop", policy_version=v)
        for i, v in enumerate(versions)
    ]
    return t


def test_drop_stale_rule():
    trajs = [_traj("a", "g", [8, 12]), _traj("b", "g", [4, 12]), _traj("c", "g", [3]), _traj("d", "g", [])]
    # steps_per_update 4, trainer at step 12, K = 1: behind = ceil((12 - oldest) / 4)
    assert [updates_behind(v, 12, 4) for v in (12, 8, 4, 3)] == [0, 1, 2, 3]
    assert drop_stale(trajs, 12, 4, 1) == 2
    assert [bool(t.metadata.get("failed")) for t in trajs] == [False, True, True, False]
    assert trajs[1].metadata["error"].startswith("stale: sampled by policy 4, 2 updates behind step 12")
    assert drop_stale(trajs, 12, 4, 1) == 0  # already dropped: not counted twice
    with pytest.raises(ValueError):
        updates_behind(0, 1, 0)


@pytest.fixture(scope="module")
def rollouts(tok):
    cfg = config()
    trainer = LocalTrainer(tiny_llama(), tok, cfg)
    gateway = RolloutGateway(tok, trainer.backend)
    return asyncio.run(
        loop.collect_rollouts(
            gateway, TASKS[:2], chat_rollout, cfg.sampling, 3, seed=0, outer_batch=0, progress=False
        )
    )


@settings(max_examples=12, deadline=None)
@given(
    order_seed=st.integers(0, 2**16),
    versions=st.lists(st.integers(0, 12), min_size=6, max_size=6),
    epochs=st.sampled_from([1, 2]),
)
def test_steps_per_outer_batch_fixed_whatever_arrives(tok, rollouts, order_seed, versions, epochs):
    """Any arrival order and any mix of stale rollouts (dropped): the update takes P/M x E steps
    as long as one rollout is usable."""
    cfg = config(ppo_epochs=epochs)
    trajs = [_copy(t, v) for t, v in zip(rollouts, versions, strict=True)]
    random.Random(order_seed).shuffle(trajs)
    dropped = drop_stale(trajs, 12, 2 * epochs, 1)
    if dropped == len(trajs):
        return
    trainer = LocalTrainer(tiny_llama(), tok, cfg)
    m = trainer.update(trajs)
    assert m["optimizer_steps"] == 2 * epochs
    assert m["failed_rollouts"] == dropped
    assert trainer.step == 2 * epochs


def _copy(t: Trajectory, version: int) -> Trajectory:
    c = Trajectory.from_dict(t.to_dict())
    for turn in c.turns:
        turn.policy_version = version
    c.reward = t.reward
    return c


def copy_sync_run(
    tok, tmp_path, name: str, delay_seed: int, launch_after_step: int = 0, slow_publish: float = 0.0
) -> dict:
    from strands_art.training.local_sync import CopySync
    from strands_art.training.lora import lora_model

    cfg = config(seed=3)
    model = lora_model(tiny_llama(), cfg)
    sync = CopySync(model, tok, cores={0})
    if slow_publish:  # a publish that starts late: the trainer's next steps must not overtake it
        publish = sync.publish

        def late() -> bool:
            time.sleep(slow_publish)
            return publish()

        sync.publish = late
    trainer = LocalTrainer(model, tok, cfg, weight_sync=sync)
    gateway = RolloutGateway(tok, trainer.backend)
    finished: list[str] = []
    rows: dict[str, list[dict]] = {}
    behind: dict[int, set[int]] = {}
    versions: dict[int, set[int]] = {}

    def check(b: int, trajs: list[Trajectory]) -> None:
        behind[b] = {updates_behind(t.policy_version, trainer.step, 4) for tr in trajs for t in tr.turns}
        versions[b] = {t.policy_version for tr in trajs for t in tr.turns}

    records = asyncio.run(
        loop.train(
            trainer, gateway, TASKS, delayed(chat_rollout, delay_seed, finished, rows), 3,
            tmp_path / name, eval_tasks=TASKS[:1], progress=False, max_staleness=1, on_rollouts=check,
            launch_after_step=launch_after_step,
        )
    )  # fmt: skip
    pinned = trainer.backend.run_on_sampler_thread(os.sched_getaffinity, 0)
    return {"lora": lora_state(trainer), "rows": rows, "records": records, "behind": behind, "pinned": pinned,
            "finished": finished, "sampler": sync.version, "step": trainer.step, "versions": versions}  # fmt: skip


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="needs sched_setaffinity")
def test_copy_sync_sampler_is_exactly_one_update_behind_and_deterministic(tok, tmp_path):
    """K=1 with the sampler copy: batch b+1 samples from the weights before update b (exactly one
    update behind when trained), whatever the completion order, so two runs are bit-identical."""
    a = copy_sync_run(tok, tmp_path, "a", delay_seed=1)
    b = copy_sync_run(tok, tmp_path, "b", delay_seed=2)
    assert a["finished"] != b["finished"]  # the rollouts really finished in other orders
    assert a["behind"] == {0: {0}, 1: {1}, 2: {1}}
    assert a["pinned"] == {0}
    assert a["step"] == 12 and a["sampler"] == 12  # the final evaluation published the last update
    assert a["rows"] == b["rows"]
    assert untimed(a["records"]) == untimed(b["records"])
    for n in a["lora"]:
        assert torch.equal(a["lora"][n], b["lora"][n]), n


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="needs sched_setaffinity")
def test_launch_after_step_samples_the_next_batch_from_that_step_deterministically(tok, tmp_path):
    """--launch-after-step 3 of 4 steps per update: batch b+1 samples from the adapter after step
    3 of update b (one optimizer step behind when trained, not a whole update), the step count per
    update stays 4, and two runs with other completion orders are bit-identical."""
    a = copy_sync_run(tok, tmp_path, "a", delay_seed=1, launch_after_step=3)
    b = copy_sync_run(tok, tmp_path, "b", delay_seed=2, launch_after_step=3, slow_publish=0.3)
    assert a["finished"] != b["finished"]
    assert a["versions"] == {0: {0}, 1: {3}, 2: {7}}  # launched at the start: {0: {0}, 1: {0}, 2: {4}}
    train = [r for r in a["records"] if r["kind"] == "train"]
    assert [r["optimizer_steps"] for r in train] == [4, 4, 4]
    assert [r["policy_lag_max"] for r in train] == [0, 1, 1]
    assert all(r["launch_after_step"] == 3 and r["stale_dropped"] == 0 for r in train)
    assert [r["launch_sync_s"] > 0 for r in train] == [True, True, False]  # the last update launches nothing
    assert a["step"] == 12 and a["sampler"] == 12
    assert a["rows"] == b["rows"] and untimed(a["records"]) == untimed(b["records"])
    for n in a["lora"]:
        assert torch.equal(a["lora"][n], b["lora"][n]), n


@pytest.mark.parametrize(
    ("k", "j", "message"),
    [
        (0, 1, "launch_after_step 1 needs max_staleness >= 1"),
        (1, 4, r"launch_after_step must be in \[0, 4\)"),
        (1, -1, r"launch_after_step must be in \[0, 4\)"),
        (1, 1, "needs a trainer with a weight_sync"),  # a shared model: no sampler to sync mid-update
    ],
)
def test_launch_after_step_out_of_range_is_refused(tok, tmp_path, k, j, message):
    trainer = LocalTrainer(tiny_llama(), tok, config())
    gateway = RolloutGateway(tok, trainer.backend)
    with pytest.raises(ValueError, match=message):
        asyncio.run(
            loop.train(
                trainer,
                gateway,
                TASKS,
                chat_rollout,
                1,
                tmp_path / "run",
                progress=False,
                max_staleness=k,
                launch_after_step=j,
            )  # fmt: skip
        )
