"""Which policy sampled each turn: the backend reports it, the gateway records it on the turn and
the row, the store keeps it, and the trainer corrects each token with the logprob recorded by the
policy that sampled it (rows mixing versions included)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from support.fakes import TRAIN_TRUNCATED, tiny_llama

from strands_art.backends.base import InvalidSample, SampleResult, SamplingParams
from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.store import TrajectoryStore
from strands_art.training.local import LocalTrainer, policy_lag
from strands_art.training.loss import LossConfig
from strands_art.training.trainer_config import TrainerConfig
from strands_art.trajectory import Row, Trajectory

SAMPLING = SamplingParams(temperature=1.0, max_new_tokens=8)


class VersionedBackend(ScriptedBackend):
    """A scripted backend that reports ``policy_version`` like the vLLM/transformers backends."""

    def __init__(self, tok, outputs, version=0):
        super().__init__(tok, outputs)
        self.policy_version = version

    async def sample(self, prompt_ids, params, **kw) -> SampleResult:
        version = self.policy_version
        result = await super().sample(prompt_ids, params, **kw)
        result.info["policy_version"] = version
        return result


def conversation(replies: list[str]) -> list[list[dict]]:
    """The message lists of a chat whose assistant turns are ``replies`` (each turn extends the last)."""
    msgs, out = [{"role": "user", "content": "Count."}], []
    for i, reply in enumerate(replies):
        out.append(list(msgs))
        msgs += [{"role": "assistant", "content": reply}, {"role": "user", "content": f"next {i}"}]
    return out


async def run_session(gateway, backend, versions: list[int]) -> Trajectory:
    gateway.open_session("r", "g", SAMPLING)
    replies = [f"n{i}" for i in range(len(versions))]
    for msgs, version in zip(conversation(replies), versions, strict=True):
        backend.policy_version = version  # a sync between turns
        await gateway.generate("r", msgs)
    return gateway.close_session("r", reward=1.0)


def test_turns_and_rows_record_the_policy_version_and_the_store_keeps_it(smollm2_tok, tmp_path):
    backend = VersionedBackend(smollm2_tok, [{"text": "n0<|im_end|>"}, {"text": "n1<|im_end|>"}])
    traj = asyncio.run(run_session(RolloutGateway(smollm2_tok, backend), backend, [0, 3]))
    assert [t.policy_version for t in traj.turns] == [0, 3]
    (row,) = traj.rows  # tree mode: the second turn extends the first row
    assert row.metadata["policy_versions"] == {"0": 0, "1": 3}
    store = TrajectoryStore(tmp_path)
    store.append(traj)
    (back,) = list(store)
    assert [t.policy_version for t in back.turns] == [0, 3]
    table = store.read_rows_table()
    assert '"policy_versions": {"0": 0, "1": 3}' in table.column("metadata")[0].as_py()


def test_a_backend_without_versions_records_none(smollm2_tok):
    backend = ScriptedBackend(smollm2_tok, [{"text": "n0<|im_end|>"}])
    gateway = RolloutGateway(smollm2_tok, backend)
    gateway.open_session("r", "g", SAMPLING)
    asyncio.run(gateway.generate("r", conversation(["n0"])[0]))
    traj = gateway.close_session("r")
    assert traj.turns[0].policy_version is None and "policy_versions" not in traj.rows[0].metadata


@pytest.mark.parametrize("bad", ["1", -1, True, 1.5])
def test_a_bad_version_is_refused_and_nothing_recorded(smollm2_tok, bad):
    backend = VersionedBackend(smollm2_tok, [{"text": "n0<|im_end|>"}])
    gateway = RolloutGateway(smollm2_tok, backend)
    gateway.open_session("r", "g", SAMPLING)
    backend.policy_version = bad
    with pytest.raises(InvalidSample, match="policy version"):
        asyncio.run(gateway.generate("r", conversation(["n0"])[0]))
    assert gateway.trajectory("r").turns == [] and gateway.trajectory("r").rows == []


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=4).map(sorted))
def test_every_turn_version_is_on_its_row(smollm2_tok, versions):
    """Property: each turn's version is on the row holding it, under its index; a row is mixed
    exactly when its turns' versions differ; the lag metric counts every turn once."""
    backend = VersionedBackend(smollm2_tok, [{"text": f"n{i}<|im_end|>"} for i in range(len(versions))])
    traj = asyncio.run(run_session(RolloutGateway(smollm2_tok, backend), backend, versions))
    for turn in traj.turns:
        assert traj.rows[turn.row].metadata["policy_versions"][str(turn.index)] == turn.policy_version
    from strands_art.training.batching import BatchRow

    rows = [BatchRow(row=r, advantage=1.0) for r in traj.rows]
    lag = policy_lag(rows, step=5)
    assert lag["policy_lag_max"] == 5 - min(versions)
    assert lag["policy_lag_mean"] == pytest.approx(sum(5 - v for v in versions) / len(versions))
    assert lag["mixed_policy_rows"] == sum(
        len(set(r.metadata["policy_versions"].values())) > 1 for r in traj.rows
    )


def test_transformers_backend_reports_the_trainers_step(smollm2_tok):
    from strands_art.training import loop
    from strands_art.training.rollouts import chat_rollout
    from strands_art.training.tasks_toy import capital_tasks

    torch.manual_seed(0)
    cfg = TrainerConfig(prompt_batch_size=1, rollouts_per_prompt=3, ppo_mini_batch_size=1, ppo_epochs=2,
                        lora_rank=4, lora_alpha=8, sampling=SamplingParams(temperature=1.0, max_new_tokens=4),
                        grpo=TRAIN_TRUNCATED)  # fmt: skip
    trainer = LocalTrainer(tiny_llama(), smollm2_tok, cfg)
    gateway = RolloutGateway(smollm2_tok, trainer.backend)

    def batch(b):
        return asyncio.run(loop.collect_rollouts(gateway, capital_tasks()[:1], chat_rollout, cfg.sampling, 3,
                                                 seed=0, outer_batch=b, progress=False))  # fmt: skip

    first = batch(0)
    assert {t.turns[0].policy_version for t in first} == {0}
    for k, traj in enumerate(first):  # rewards that differ: GRPO has signal
        traj.set_reward(float(k))
    trainer.update(first)
    assert trainer.step == 2 and trainer.backend.policy_version == 2
    assert {t.turns[0].policy_version for t in batch(1)} == {2}


def stale_rollouts(trainer: LocalTrainer, shift_by_turn: dict[int, float]) -> list[Trajectory]:
    """Two rollouts of one group; each row holds turn 0 (version 0) and turn 1 (version 1), and
    records the trainer's own logprob minus ``shift_by_turn[turn]``: what an older policy that
    put less mass on those tokens would have recorded."""
    trajs = []
    for k, reward in enumerate((0.0, 1.0)):
        ids = [1, 2, 3, 40 + k, 41, 4, 5, 60 + k, 61]
        spans = [[3, 5], [7, 9]]
        mask = [0] * len(ids)
        logprobs = [0.0] * len(ids)
        for turn, (a, b) in enumerate(spans):
            mine = trainer.score(ids[:b], a, trainer.config.sampling)
            for i, lp in zip(range(a, b), mine, strict=True):
                mask[i], logprobs[i] = 1, lp - shift_by_turn[turn]
        row = Row(ids, mask, logprobs, f"r{k}", "g", turns=[0, 1], turn_spans=spans,
                  metadata={"policy_versions": {"0": 0, "1": 1}})  # fmt: skip
        trajs.append(Trajectory(f"r{k}", "g", rows=[row], reward=reward))
    return trajs


def make_trainer(smollm2_tok, **kw) -> LocalTrainer:
    torch.manual_seed(0)
    kw = {"prompt_batch_size": 1, **kw}
    cfg = TrainerConfig(rollouts_per_prompt=2, ppo_mini_batch_size=1, lora_rank=4, lora_alpha=8, sampling=SAMPLING,
                        grpo=TRAIN_TRUNCATED, **kw)  # fmt: skip
    return LocalTrainer(tiny_llama(), smollm2_tok, cfg)


def test_the_ratio_uses_each_tokens_recorded_logprob(smollm2_tok):
    """Default (old = recorded): at the first step the trainer-minus-rollout gap is exactly the
    per-turn shift, averaged over tokens: each token is corrected with its own version's logprob."""
    trainer = make_trainer(smollm2_tok)
    trainer.step = 2  # the trainer is 2 steps ahead of turn 0, 1 step ahead of turn 1
    m = trainer.update(stale_rollouts(trainer, {0: 0.3, 1: 0.1}))
    assert m["logprob_gap"] == pytest.approx((0.3 + 0.1) / 2, abs=1e-5)
    assert m["logprob_abs_gap"] == pytest.approx(0.2, abs=1e-5)
    assert m["policy_lag_max"] == 2 and m["policy_lag_mean"] == 1.5 and m["mixed_policy_rows"] == 2
    assert m["clip_fraction"] > 0  # ratio exp(0.3) = 1.35 is outside [0.8, 1.2]


def test_the_gap_is_measured_at_the_first_step_that_runs_a_pass(smollm2_tok):
    """A tied group first (longer rows: packed into the first mini-batch; its rows skipped: no pass,
    no statistics): the gap comes from the next mini-batch, the first one measured, not 0.0."""
    trainer = make_trainer(smollm2_tok, prompt_batch_size=2)
    trainer.step = 2
    tied = [
        Trajectory(f"t{k}", "tied", rows=[Row([*range(1, 11), 50 + k, 51], [0] * 10 + [1, 1], [0.0] * 10 + [-1.0, -1.0], f"t{k}", "tied")],
                   reward=0.0)
        for k in range(2)
    ]  # fmt: skip
    m = trainer.update(tied + stale_rollouts(trainer, {0: 0.3, 1: 0.1}))
    assert m["zero_advantage_rows_skipped"] == 2 and m["optimizer_steps"] == 2
    assert m["logprob_gap"] == pytest.approx((0.3 + 0.1) / 2, abs=1e-5)


def test_recomputed_old_logprobs_weight_by_the_recorded_ones(smollm2_tok):
    """``old_logprobs="recompute"``: the truncated importance weight exp(old - recorded) comes from
    the recorded logprobs; a shift of 1 nat (weight e > cap 2) is capped on every token, a shift
    of 0.5 (weight 1.65) on none."""
    capped = make_trainer(smollm2_tok, old_logprobs="recompute", loss=LossConfig(tis_cap=2.0))
    assert capped.update(stale_rollouts(capped, {0: 1.0, 1: 1.0}))["tis_capped_fraction"] == 1.0
    free = make_trainer(smollm2_tok, old_logprobs="recompute", loss=LossConfig(tis_cap=2.0))
    m = free.update(stale_rollouts(free, {0: 0.5, 1: 0.5}))
    assert m["tis_capped_fraction"] == 0.0 and m["clip_fraction"] == 0.0  # ratio vs own pass = 1


def two_groups_of_stale_rollouts(trainer: LocalTrainer, shift_by_turn: dict[int, float]) -> list[Trajectory]:
    """:func:`stale_rollouts` twice, as groups ``g0`` and ``g1`` (two mini-batches of one task each)."""
    out = []
    for g in ("g0", "g1"):
        for traj in stale_rollouts(trainer, shift_by_turn):
            rid = f"{g}-{traj.rollout_id}"
            rows = [dataclasses.replace(r, rollout_id=rid, group_id=g) for r in traj.rows]
            out.append(Trajectory(rid, g, rows=rows, reward=traj.reward))
    return out


def lora_weights(trainer: LocalTrainer) -> list[torch.Tensor]:
    return [p.detach().clone() for p in trainer.params]


@pytest.mark.parametrize("epochs", [1, 2])
def test_first_pass_old_logprobs_equal_recomputed_ones_with_one_mini_batch(smollm2_tok, epochs):
    """With one mini-batch per update, the trainer's logprobs at the row's first optimizer step are
    the pre-update logprobs a recompute pass gives: the same update, weights and statistics alike,
    and neither ratio clips at the first step though the rollouts are 1 nat stale (TIS capped)."""
    out = {}
    for mode in ("recompute", "first-pass"):
        trainer = make_trainer(smollm2_tok, old_logprobs=mode, ppo_epochs=epochs)
        m = trainer.update(stale_rollouts(trainer, {0: 1.0, 1: 1.0}))
        out[mode] = (m, lora_weights(trainer))
    (m_re, w_re), (m_fp, w_fp) = out["recompute"], out["first-pass"]
    assert m_fp["optimizer_steps"] == m_re["optimizer_steps"] == epochs
    for key in ("loss", "grad_norm", "clip_fraction", "tis_capped_fraction", "approx_kl"):
        assert m_fp[key] == pytest.approx(m_re[key], abs=1e-6), key
    assert m_fp["tis_capped_fraction"] == 1.0  # exp(1) > cap 2 on every token
    assert max(float((a - b).abs().max()) for a, b in zip(w_re, w_fp, strict=True)) < 1e-6
    assert max(float(a.abs().max()) for a in w_fp) > 0  # it trained (lora_B moved from 0)


def test_first_pass_takes_each_mini_batchs_old_logprobs_at_its_own_first_step(smollm2_tok, monkeypatch):
    """Two mini-batches, one epoch, stale rollouts (0.5 nat): with the recorded logprobs as old the
    ratio clips, with ``first-pass`` it is 1 at every row's only step (no clipping; the TIS weight
    carries the correction), and no recompute pass runs."""
    rollout = make_trainer(smollm2_tok, prompt_batch_size=2)
    m_rollout = rollout.update(two_groups_of_stale_rollouts(rollout, {0: 0.5, 1: 0.5}))
    first = make_trainer(smollm2_tok, prompt_batch_size=2, old_logprobs="first-pass")
    monkeypatch.setattr(first, "_recompute", lambda *_: pytest.fail("first-pass needs no extra pass"))
    m_first = first.update(two_groups_of_stale_rollouts(first, {0: 0.5, 1: 0.5}))
    assert m_rollout["optimizer_steps"] == m_first["optimizer_steps"] == 2
    # ratio exp(0.5) = 1.65 > 1.2: the clip binds on every token of the rewarded rollout (A > 0)
    assert m_rollout["clip_fraction"] == pytest.approx(0.5)
    assert m_first["clip_fraction"] == 0.0
    assert m_first["loss"] != pytest.approx(m_rollout["loss"], abs=1e-4)


def test_old_logprobs_setting_and_its_older_spelling():
    """One setting; a config saved before it (``recompute_old_logprobs``, a bool) loads as it meant."""
    assert TrainerConfig().old_logprobs == "rollout"
    saved = TrainerConfig().to_dict()
    del saved["old_logprobs"]
    for old, new in ((True, "recompute"), (False, "rollout")):
        assert TrainerConfig.from_dict({**saved, "recompute_old_logprobs": old}).old_logprobs == new
    assert (
        TrainerConfig.from_dict(TrainerConfig(old_logprobs="first-pass").to_dict()).old_logprobs
        == "first-pass"
    )
    with pytest.raises(ValueError, match="old_logprobs must be one of rollout, recompute, first-pass"):
        TrainerConfig(old_logprobs="proximal")
