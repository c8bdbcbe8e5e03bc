"""The embedded trainer on a tiny random Llama (SmolLM2 tokenizer) through the real gateway:
step counts from the configuration, LoRA updates served to the sampler, logprob consistency,
checkpoints and resume, metrics JSONL, the toy task's reward."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math

import numpy as np
import pytest
import torch
from support.fakes import TRAIN_TRUNCATED, LengthTask, tiny_llama

from strands_art.backends.base import SamplingParams
from strands_art.gateway import RolloutGateway
from strands_art.registry import load_tokenizer
from strands_art.training import loop
from strands_art.training.checkpoint import latest_checkpoint
from strands_art.training.local import LocalTrainer
from strands_art.training.metrics import TRAIN_KEYS, plot_modes, plot_training, read_metrics
from strands_art.training.rollouts import chat_rollout
from strands_art.training.tasks_toy import capital_reward, capital_tasks
from strands_art.training.trainer_config import TrainerConfig, config_changes
from strands_art.trajectory import Row, Trajectory

VOCAB = 49152


TASKS = [LengthTask(f"t{i}") for i in range(6)]
SAMPLING = SamplingParams(temperature=0.8, max_new_tokens=6)


def config(**kw) -> TrainerConfig:
    base = dict(
        prompt_batch_size=2,
        rollouts_per_prompt=3,
        ppo_mini_batch_size=1,
        ppo_epochs=2,
        learning_rate=5e-2,
        lora_rank=4,
        lora_alpha=8,
        sampling=SAMPLING,
        eval_sampling=SamplingParams(temperature=0.0, max_new_tokens=6),
        micro_batch_max_tokens=200,
        checkpoint_every=1,
        grpo=TRAIN_TRUNCATED,
    )
    base.update(kw)
    return TrainerConfig(**base)


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("smollm2")


def make(tok, **kw) -> tuple[LocalTrainer, RolloutGateway]:
    torch.manual_seed(0)
    trainer = LocalTrainer(tiny_llama(), tok, config(**kw))
    return trainer, RolloutGateway(tok, trainer.backend)


def rollouts(trainer, gateway, b: int = 0, sampling: SamplingParams = SAMPLING) -> list[Trajectory]:
    tasks = loop.sample_tasks(TASKS, 2, 0, b)
    return asyncio.run(
        loop.collect_rollouts(
            gateway, tasks, chat_rollout, sampling, 3, seed=0, outer_batch=b, progress=False
        )
    )


def split_rows(traj: Trajectory) -> Trajectory:
    """The same rollout as 2 rows (a tree fork): row 1 = prompt + first half of the output, row 2
    = everything with only the second half sampled (mask 1)."""
    (row,) = traj.rows
    idx = [i for i, m in enumerate(row.loss_mask) if m]
    cut = idx[len(idx) // 2]
    r1 = Row(row.input_ids[:cut], row.loss_mask[:cut], row.logprobs[:cut], traj.rollout_id, traj.group_id)
    mask2 = [0] * cut + row.loss_mask[cut:]
    lp2 = [0.0] * cut + row.logprobs[cut:]
    r2 = Row(list(row.input_ids), mask2, lp2, traj.rollout_id, traj.group_id)
    return dataclasses.replace(traj, rows=[r1, r2])


def lora_state(trainer) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}


# ---------------------------------------------------------------- step counts


def test_optimizer_steps_come_from_the_configuration(tok):
    trainer, gateway = make(tok)
    trajs = rollouts(trainer, gateway)
    assert len(trajs) == 6 and all(len(t.rows) == 1 for t in trajs)
    assert len({t.reward for t in trajs}) > 1  # GRPO has signal
    calls = []
    step = trainer.optimizer.step
    trainer.optimizer.step = lambda *a, **k: (calls.append(1), step(*a, **k))[1]
    m1 = trainer.update(trajs)
    # P=2, M=1, E=2 -> 2 mini-batches x 2 epochs
    assert len(calls) == 4 and trainer.step == 4 and m1["optimizer_steps"] == 4
    assert m1["rows"] == 6 and m1["rows_per_rollout"] == 1.0 and m1["padding_rows"] == 0
    split = [split_rows(t) for t in trajs]
    m2 = trainer.update(split)
    assert m2["rows"] == 12 and m2["rows_per_rollout"] == 2.0
    assert len(calls) == 8 and trainer.step == 8 and m2["optimizer_steps"] == 4
    assert m2["sampled_tokens"] == m1["sampled_tokens"]
    assert 0.0 <= m2["padded_token_fraction"] < 0.5


def test_fixed_rows_mode_takes_more_steps_with_more_rows(tok):
    trainer, gateway = make(tok, batching_mode="fixed_rows", rows_per_mini_batch=3, ppo_epochs=1)
    trajs = rollouts(trainer, gateway)
    assert trainer.update(trajs)["optimizer_steps"] == 2  # 6 rows / 3
    assert trainer.update([split_rows(t) for t in trajs])["optimizer_steps"] == 4  # 12 rows / 3
    assert trainer.step == 6


# ---------------------------------------------------------------- weights served to the sampler


def test_lora_update_changes_what_the_backend_samples(tok):
    trainer, gateway = make(tok, ppo_epochs=1)
    base_before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if not p.requires_grad}
    lora_before = lora_state(trainer)
    prompt = tok("The capital of France is", add_special_tokens=False)["input_ids"]
    greedy = SamplingParams(temperature=0.0, max_new_tokens=4)

    async def sample():
        return await trainer.backend.sample(prompt, greedy)

    before = asyncio.run(sample())
    trainer.update(rollouts(trainer, gateway))
    after = asyncio.run(sample())
    changed = [n for n, p in lora_state(trainer).items() if not torch.equal(p, lora_before[n])]
    assert any("lora_B" in n for n in changed) and any("lora_A" in n for n in changed)
    for n, p in trainer.model.named_parameters():
        if not p.requires_grad:
            assert torch.equal(p, base_before[n]), n  # the base model is frozen
    assert trainer.backend.model is trainer.model
    assert before.logprobs[0] != pytest.approx(after.logprobs[0], abs=1e-6)


def test_trainer_logprobs_match_the_sampler(tok):
    """At the first optimizer step nothing has changed yet: trainer and rollout logprobs (same
    temperature, KV-cache decoding vs one batched pass) agree, so the gap metric is ~0."""
    trainer, gateway = make(tok, ppo_epochs=1)
    m = trainer.update(rollouts(trainer, gateway))
    assert m["logprob_abs_gap"] < 1e-4
    assert m["filtered_tokens"] == 0
    assert 0.0 <= m["clip_fraction"] <= 1.0 and m["approx_kl"] >= 0.0
    assert m["loss"] != 0.0 and m["grad_norm"] > 0.0


def test_failed_rollouts_are_left_out(tok):
    trainer, gateway = make(tok, ppo_epochs=1)

    async def flaky(gw, task, rid, gid, sampling):
        if rid.endswith("-r0"):
            gw.open_session(rid, gid, sampling)
            raise RuntimeError("environment crashed")
        return await chat_rollout(gw, task, rid, gid, sampling)

    tasks = loop.sample_tasks(TASKS, 2, 0, 0)
    trajs = asyncio.run(
        loop.collect_rollouts(gateway, tasks, flaky, SAMPLING, 3, seed=0, outer_batch=0, progress=False)
    )
    failed = [t for t in trajs if t.metadata.get("failed")]
    assert len(failed) == 2 and "environment crashed" in failed[0].metadata["error"]
    m = trainer.update(trajs)
    assert m["failed_rollouts"] == 2 and m["rollouts"] == 4 and m["optimizer_steps"] == 2


def crashed_rollouts(gateway) -> list[Trajectory]:
    """Two tasks x 2 rollouts, every one failed: an outer batch that leaves no row."""

    async def crashed(gw, task, rid, gid, sampling):
        gw.open_session(rid, gid, sampling)
        raise RuntimeError("environment crashed")

    tasks = loop.sample_tasks(TASKS, 2, 0, 0)
    return asyncio.run(
        loop.collect_rollouts(gateway, tasks, crashed, SAMPLING, 2, seed=0, outer_batch=0, progress=False)
    )


def test_an_outer_batch_without_a_usable_rollout_still_takes_the_configured_steps(tok, tmp_path):
    """Fixed-step batching: no row arrived, yet the step count advances by mini-batches x epochs
    (2 x 2 here), each a zero-gradient step: no weight moves and AdamW's state stays empty."""
    trainer, gateway = make(tok, ppo_epochs=2)
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters() if v.requires_grad}
    seen: list[int] = []
    m = trainer.update(crashed_rollouts(gateway), on_step=seen.append)
    assert m["skipped"] == 1 and m["rows"] == 0 and m["failed_rollouts"] == 4
    assert m["optimizer_steps"] == m["zero_gradient_steps"] == 4 and trainer.step == m["step"] == 4
    assert seen == [1, 2, 3, 4] and trainer.backend.policy_version == 4 and trainer.outer_batch == 1
    assert not trainer.optimizer.state  # optimizer.step() never ran
    for k, v in trainer.model.named_parameters():
        if v.requires_grad:
            assert torch.equal(v, before[k]), k
    # the keys a trained update has (the notebook's progress line and the benches read train_s)
    assert m["train_s"] >= 0 and m["fwd_bwd_s"] == m["optimizer_s"] == m["actor_update_s"] == 0.0
    # the next real update starts its warmup at its own first nonzero gradient, not before
    assert trainer.warmup_offset is None
    # every key a trained update's record has (the plots read tokens, rows_per_rollout, ...)
    trained = trainer.update(rollouts(trainer, gateway, b=1))
    assert trained["optimizer_steps"] == 4 and trainer.step == 8 and trained["grad_norm"] > 0
    assert set(trained) - set(m) == set() and m["tokens"] == m["loss"] == 0 and m["lr"] == 5e-2
    records = [{"kind": "train", "outer_batch": i, **r} for i, r in enumerate((m, trained))]
    plot_training(records, tmp_path / "rowless.png")
    assert (tmp_path / "rowless.png").stat().st_size > 0


def test_a_rowless_outer_batch_syncs_its_version_and_waits_with_warmup(tok):
    """The sampler follows the step count (its next rollouts record version 2), and the warmup
    has not started: the record's lr is the 0 of a waiting warmup."""
    from strands_art.training.local_sync import CopySync
    from strands_art.training.lora import lora_model

    cfg = config(ppo_epochs=1, lr_warmup_steps=3)
    model = lora_model(tiny_llama(), cfg)
    sync = CopySync(model, tok)
    trainer = LocalTrainer(model, tok, cfg, weight_sync=sync)
    m = trainer.update(crashed_rollouts(RolloutGateway(tok, trainer.backend)))
    assert m["optimizer_steps"] == 2 and "sync_s" in m and m["lr"] == 0.0 and trainer.warmup_offset is None
    assert sync.publish() and sync.version == 2 and sync.backend.policy_version == 2


def test_an_outer_batch_without_a_row_takes_no_step_with_fixed_row_batching(tok):
    """Fixed-row batching: zero rows are zero mini-batches, so zero steps (its steps follow rows)."""
    trainer, gateway = make(tok, ppo_epochs=2, batching_mode="fixed_rows", rows_per_mini_batch=3)
    seen: list[int] = []
    m = trainer.update(crashed_rollouts(gateway), on_step=seen.append)
    assert m["skipped"] == 1 and m["optimizer_steps"] == m["zero_gradient_steps"] == 0 and trainer.step == 0
    assert trainer.outer_batch == 1 and seen == [] and trainer.backend.policy_version == 0
    assert m["lr"] == 0.0 and m["mini_batches"] == 0


# ---------------------------------------------------------------- checkpoints, resume, metrics


def test_checkpoint_round_trip(tok, tmp_path):
    trainer, gateway = make(tok, ppo_epochs=1)
    trainer.update(rollouts(trainer, gateway))
    trainer.outer_batch = 1
    path = trainer.save(tmp_path)
    assert latest_checkpoint(tmp_path) == path
    saved = lora_state(trainer)
    opt = trainer.optimizer.state_dict()["state"]
    expect_rand = torch.rand(3)
    other, _ = make(tok, ppo_epochs=1)
    assert any(not torch.equal(p, saved[n]) for n, p in lora_state(other).items())
    state = other.resume(tmp_path)
    assert state["step"] == 2 and other.step == 2 and other.outer_batch == 1
    for n, p in lora_state(other).items():
        torch.testing.assert_close(p, saved[n], rtol=0, atol=0)
    loaded = other.optimizer.state_dict()["state"]
    assert loaded.keys() == opt.keys()
    for k in opt:
        torch.testing.assert_close(loaded[k]["exp_avg"], opt[k]["exp_avg"])
    torch.testing.assert_close(torch.rand(3), expect_rand)  # RNG restored
    assert TrainerConfig.from_dict(state["config"]) == other.config


def run_loop(tok, run_dir, stop_after=None):
    trainer, gateway = make(tok)
    records = asyncio.run(
        loop.train(
            trainer, gateway, TASKS, chat_rollout, 3, run_dir,
            eval_tasks=TASKS[:2], stop_after=stop_after, progress=False,
        )
    )  # fmt: skip
    return trainer, records


@pytest.fixture(scope="module")
def straight_run(tok, tmp_path_factory):
    """3 outer batches without interruption (shared by the resume and metrics tests)."""
    run_dir = tmp_path_factory.mktemp("straight")
    trainer, records = run_loop(tok, run_dir)
    return trainer, records, run_dir


def test_resume_after_a_stop_continues_with_the_same_steps(tok, tmp_path, straight_run):
    straight, records, _ = straight_run
    assert straight.step == 3 * 4 and straight.outer_batch == 3
    first, partial = run_loop(tok, tmp_path / "b", stop_after=2)
    assert first.step == 8 and [r["outer_batch"] for r in partial if r["kind"] == "train"] == [0, 1]
    # a torn metrics line and a record written after the checkpoint must not survive the resume
    with open(tmp_path / "b" / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"kind": "train", "outer_batch": 2, "step": 99}) + "\n" + '{"kind": "tr')
    (tmp_path / "b" / "checkpoints" / "latest").write_text("ob-000002")
    resumed, records_b = run_loop(tok, tmp_path / "b")
    assert resumed.step == 12 and resumed.outer_batch == 3
    train_b = [r for r in records_b if r["kind"] == "train"]
    assert [r["outer_batch"] for r in train_b] == [0, 1, 2]
    assert [r["step"] for r in train_b] == [4, 8, 12]
    train_a = [r for r in records if r["kind"] == "train"]
    assert [r["reward_mean"] for r in train_b] == pytest.approx([r["reward_mean"] for r in train_a])
    for n, p in lora_state(resumed).items():
        torch.testing.assert_close(p, lora_state(straight)[n], rtol=1e-5, atol=1e-6)


def test_metrics_jsonl_and_plots(tmp_path, straight_run):
    _, records, run_dir = straight_run
    on_disk = read_metrics(run_dir / "metrics.jsonl")
    assert on_disk == records
    evals = [r for r in on_disk if r["kind"] == "eval"]
    assert [r["outer_batch"] for r in evals] == [0, 3]
    assert all(0.0 <= r["val_reward"] <= 1.0 and r["val_rollouts"] == 2 for r in evals)
    for r in (r for r in on_disk if r["kind"] == "train"):
        assert set(TRAIN_KEYS) <= set(r)
        assert r["optimizer_steps"] == 4 and r["history_mode"] == "tree"
        assert r["tokens"] > r["sampled_tokens"] > 0
        for key in ("loss", "grad_norm", "logprob_abs_gap", "rollout_s", "train_s", "tokens_per_s"):
            assert isinstance(r[key], float)
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("ob-*")) == ["ob-000002", "ob-000003"]
    plot_training(on_disk, tmp_path / "train.png")
    plot_modes({"tree": on_disk, "linear": on_disk}, tmp_path / "modes.png")
    assert (tmp_path / "train.png").stat().st_size > 1000 and (tmp_path / "modes.png").stat().st_size > 1000


def test_gateway_must_use_the_trainers_backend(tok, tmp_path):
    trainer, _ = make(tok)
    other, gateway = make(tok)
    with pytest.raises(ValueError, match="trainer.backend"):
        asyncio.run(loop.train(trainer, gateway, TASKS, chat_rollout, 1, tmp_path, progress=False))


@pytest.mark.maven
def test_one_outer_batch_of_the_migrationbench_agent(tok, tmp_path):
    """The Strands migration agent through ARTModel + gateway, real Maven evaluation, one update."""
    from strands_art.envs.migrationbench.config import RolloutConfig
    from strands_art.envs.migrationbench.run.episodes import migrationbench_rollout
    from strands_art.envs.migrationbench.tasks.tasks import load_tasks

    torch.manual_seed(0)
    model = tiny_llama()
    model.config.max_position_embeddings = 8192  # room for the agent's system prompt and tools
    trainer = LocalTrainer(model, tok, config(rollouts_per_prompt=2, prompt_batch_size=1, ppo_epochs=1,
                                              micro_batch_max_tokens=8192, checkpoint_every=0))  # fmt: skip
    gateway = RolloutGateway(tok, trainer.backend)
    rollout_config = RolloutConfig(max_turns=2, time_limit=120, build_timeout=200)
    records = asyncio.run(
        loop.train(
            trainer,
            gateway,
            load_tasks(names=["compiler-props"]),
            migrationbench_rollout(rollout_config, run_dir=tmp_path / "mb"),
            1,
            tmp_path / "run",
            progress=False,
        )  # fmt: skip
    )
    (rec,) = records
    assert rec["rollouts"] == 2 and rec["failed_rollouts"] == 0
    assert rec["reward_mean"] == 0.0  # a random model migrates nothing; the build check fails
    assert rec["rows"] >= 2 and rec["tokens"] > 1000 and rec["optimizer_steps"] == 1 and trainer.step == 1
    results = [json.loads(x) for x in (tmp_path / "mb" / "results.jsonl").read_text().splitlines()]
    assert sorted(r["rollout_id"] for r in results) == ["b0-compiler-props-r0", "b0-compiler-props-r1"]
    assert [r["reward"] for r in results] == [0.0, 0.0] and all(
        r["task"] == "compiler-props" for r in results
    )
    assert all(set(r["edited_files"]) == {"modified", "added", "deleted", "truncated"} for r in results)


# ---------------------------------------------------------------- config and toy task


def test_config_round_trip_and_errors():
    cfg = config(lora_target_modules=("q_proj", "v_proj"))
    assert TrainerConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ValueError, match="not divisible"):
        config(prompt_batch_size=3, ppo_mini_batch_size=2)
    with pytest.raises(ValueError, match="rollouts_per_prompt"):
        config(rollouts_per_prompt=0)
    with pytest.raises(ValueError, match="unknown TrainerConfig keys"):
        TrainerConfig.from_dict({"lr": 1.0})
    with pytest.raises(ValueError, match="prompt_batch_size=2 but only 1 tasks"):
        loop.sample_tasks(TASKS[:1], 2, 0, 0)
    assert loop.sample_tasks(TASKS, 2, 0, 5) == loop.sample_tasks(TASKS, 2, 0, 5)


def test_capital_reward():
    assert capital_reward("Paris", "Paris") == 1.0
    assert capital_reward(" paris.\n", "Paris") == 1.0
    assert capital_reward("The capital of France is Paris.", "Paris") == pytest.approx(1 / 6)
    assert capital_reward("Lyon", "Paris") == 0.0
    assert capital_reward("", "Paris") == 0.0
    assert capital_reward("Parisian food", "Paris") == 0.0
    task = capital_tasks("heldout")[0]
    assert task.reward(task.capital) == 1.0 and task.reward(task.capital, truncated=True) == 0.0
    train, held = capital_tasks("train"), capital_tasks("heldout")
    assert len(train) == 24 and len(held) == 8
    assert not {t.country for t in train} & {t.country for t in held}
    assert all(len(t.capital.split()) == 1 for t in capital_tasks("all"))
    with pytest.raises(ValueError):
        capital_tasks("test")  # type: ignore[arg-type]


# ---------------------------------------------------------------- zero-advantage rows


def test_zero_advantage_rows_are_skipped_exactly(tok):
    """A group whose rewards are all equal adds nothing to the loss: skipping its forward and
    backward passes gives the same LoRA weights as running them, and no forward pass at all
    runs when every group is like that (the optimizer steps still count)."""
    trainer, gateway = make(tok, ppo_epochs=1)
    trajs = rollouts(trainer, gateway)
    first = trajs[0].group_id
    flat = [dataclasses.replace(t, reward=0.5) if t.group_id == first else t for t in trajs]
    assert len({t.reward for t in flat if t.group_id != first}) > 1  # the other group has signal

    def updated(skip: bool, batch: list[Trajectory]) -> tuple[dict[str, torch.Tensor], dict, int]:
        t, _ = make(tok, ppo_epochs=1)
        t.skip_zero_advantage_rows = skip
        forwards = []
        hook = t.model.register_forward_hook(lambda *a: forwards.append(1))
        metrics = t.update(batch)
        hook.remove()
        return lora_state(t), metrics, len(forwards)

    skipped, m_skip, n_skip = updated(True, flat)
    ran, m_ran, n_ran = updated(False, flat)
    assert m_skip["zero_advantage_rows_skipped"] == 3 and m_ran["zero_advantage_rows_skipped"] == 0
    assert m_skip["optimizer_steps"] == m_ran["optimizer_steps"] == 2
    assert 0 < n_skip < n_ran
    before = lora_state(make(tok, ppo_epochs=1)[0])
    assert any(not torch.equal(before[k], ran[k]) for k in ran)  # the mixed group did train
    for k in ran:
        assert torch.allclose(skipped[k], ran[k], atol=1e-7), k

    all_flat = [dataclasses.replace(t, reward=0.5) for t in trajs]
    same, m_flat, n_flat = updated(True, all_flat)
    assert n_flat == 0 and m_flat["optimizer_steps"] == 2 and m_flat["zero_advantage_rows_skipped"] == 6
    assert all(torch.equal(same[k], before[k]) for k in before)  # zero gradient, zero Adam state


def test_a_zero_gradient_step_moves_nothing(tok):
    """After a batch with signal, a batch whose groups all tie has gradient exactly 0: its steps
    count (step, policy version) but leave every LoRA weight and AdamW's state as they were.
    Stepped anyway, AdamW's momentum moves every weight along the last gradient's sign (the
    last check steps the same trainer on that zero gradient: what the skip avoids)."""
    trainer, gateway = make(tok, ppo_epochs=1)
    trajs = rollouts(trainer, gateway)
    m1 = trainer.update(trajs)
    assert m1["grad_norm"] > 0 and m1["zero_gradient_steps"] < m1["optimizer_steps"]
    before = lora_state(trainer)
    adam = {k: {n: v.clone() for n, v in st.items()} for k, st in trainer.optimizer.state.items()}
    step = trainer.step
    tied = [dataclasses.replace(t, reward=0.5) for t in trajs]
    m2 = trainer.update(tied)
    assert m2["optimizer_steps"] == m2["zero_gradient_steps"] == 2 and m2["grad_norm"] == 0.0
    assert trainer.step == step + 2
    assert all(torch.equal(before[k], v) for k, v in lora_state(trainer).items())
    for k, st in trainer.optimizer.state.items():
        for n, v in st.items():
            assert torch.equal(v, adam[k][n]), n

    # what optimizer.step() on that zero gradient would have done: moved every weight with momentum
    for p in trainer.params:
        p.grad = torch.zeros_like(p)
    trainer.optimizer.step()
    moved = [k for k, v in lora_state(trainer).items() if not torch.equal(before[k], v)]
    assert len(moved) == len(before)


# ---------------------------------------------------------------- warmup and KL penalty


def record_step_lrs(trainer) -> list[float]:
    """The learning rate of every ``optimizer.step()`` call from now on (appended as they happen)."""
    lrs: list[float] = []
    step = trainer.optimizer.step
    trainer.optimizer.step = lambda *a, **k: (
        lrs.append(trainer.optimizer.param_groups[0]["lr"]),
        step(*a, **k),
    )[1]
    return lrs


def test_learning_rate_warmup(tok):
    trainer, gateway = make(tok, ppo_epochs=1, lr_warmup_steps=4)
    assert [trainer.learning_rate_at(s) for s in (1, 2, 4, 9)] == pytest.approx([1.25e-2, 2.5e-2, 5e-2, 5e-2])
    lrs = record_step_lrs(trainer)
    trajs = rollouts(trainer, gateway)
    m = trainer.update(trajs)
    trainer.update(trajs)
    assert lrs == pytest.approx([1.25e-2, 2.5e-2, 3.75e-2, 5e-2]) and m["lr"] == pytest.approx(2.5e-2)
    # warmup is a function of step counts saved in the checkpoint: a resumed trainer continues it
    assert make(tok, lr_warmup_steps=0)[0].learning_rate_at(1) == 5e-2
    with pytest.raises(ValueError, match="lr_warmup_steps must be >= 0"):
        config(lr_warmup_steps=-1)
    for bad in (2.5, 4.0, True):  # a float or bool count is refused, not silently used
        with pytest.raises(ValueError, match=f"lr_warmup_steps must be an int, got {bad!r}"):
            config(lr_warmup_steps=bad)
    with pytest.raises(ValueError, match="ppo_epochs must be an int"):
        config(ppo_epochs=1.0)
    for bad in (True, "1e-3", math.nan):
        with pytest.raises(ValueError, match="learning_rate must be a finite real number"):
            config(learning_rate=bad)
    numpy_cfg = config(lr_warmup_steps=np.int64(4), learning_rate=np.float32(0.5))
    assert type(numpy_cfg.lr_warmup_steps) is int and type(numpy_cfg.learning_rate) is float
    assert json.loads(json.dumps(numpy_cfg.to_dict()))["lr_warmup_steps"] == 4


def test_warmup_waits_for_the_first_nonzero_gradient(tok, tmp_path, caplog):
    """Optimizer steps before the first nonzero gradient (every group's rewards equal; with a KL
    term too, since a fresh adapter is the base model) skip AdamW altogether and do not use up the
    warmup: the first real update is bit for bit that of a trainer whose first batch had signal.
    The offset survives a checkpoint; resuming with a changed configuration is logged, key by key."""
    import logging

    from strands_art.training.loss import LossConfig

    trainer, gateway = make(tok, ppo_epochs=1, lr_warmup_steps=4, loss=LossConfig(kl_coef=0.5))
    lrs = record_step_lrs(trainer)
    trajs = rollouts(trainer, gateway)
    flat = [dataclasses.replace(t, reward=0.5) for t in trajs]
    before = lora_state(trainer)
    m0 = trainer.update(flat)
    assert m0["grad_norm"] == 0.0 and m0["lr"] == 0.0 and m0["optimizer_steps"] == 2 and trainer.step == 2
    assert lrs == [] and trainer.optimizer.state == {} and trainer.warmup_offset is None
    assert trainer.backend.policy_version == 2  # the steps count, as the configuration says
    assert all(torch.equal(before[k], v) for k, v in lora_state(trainer).items())
    trainer.update(trajs)
    assert lrs == pytest.approx([1.25e-2, 2.5e-2]) and trainer.warmup_offset == 2
    fresh, _ = make(tok, ppo_epochs=1, lr_warmup_steps=4, loss=LossConfig(kl_coef=0.5))
    fresh.update(trajs)  # the same first signal, without the waiting batch before it
    assert all(torch.equal(fresh_w, lora_state(trainer)[k]) for k, fresh_w in lora_state(fresh).items())

    trainer.save(tmp_path)
    resumed, _ = make(tok, ppo_epochs=1, lr_warmup_steps=8, loss=LossConfig(kl_coef=0.5))
    with caplog.at_level(logging.WARNING, logger="strands_art.training.local"):
        resumed.resume(tmp_path)
    assert resumed.step == 4 and resumed.warmup_offset == 2
    assert "changed configuration: lr_warmup_steps: 4 -> 8" in caplog.text
    assert config_changes(trainer.config.to_dict(), trainer.config.to_dict()) == []
    assert config_changes(config().to_dict(), config(loss=LossConfig(kl_coef=0.1)).to_dict()) == [
        "loss.kl_coef: 0.0 -> 0.1"
    ]
    old = config().to_dict()  # a checkpoint written before lr_warmup_steps / kl_coef existed
    del old["lr_warmup_steps"], old["loss"]["kl_coef"]
    assert config_changes(old, config().to_dict()) == []  # defaults unchanged: nothing to say
    assert config_changes(old, config(lr_warmup_steps=3).to_dict()) == ["lr_warmup_steps: (absent) -> 3"]


def test_a_non_finite_gradient_refuses_the_step(tok):
    """A diverging loss (here a KL coefficient of 3e38 times a nonzero KL) gives an inf / nan
    gradient: the step is refused with a clear error and the adapter keeps its weights."""
    from strands_art.training.local import NonFiniteGradient
    from strands_art.training.loss import LossConfig

    trainer, gateway = make(tok, ppo_epochs=1)
    trajs = rollouts(trainer, gateway)
    trainer.update(trajs)  # move away from the base model: the KL term is no longer 0
    trainer.config = trainer.config.replace(loss=LossConfig(kl_coef=3e38))
    before, step = lora_state(trainer), trainer.step
    with pytest.raises(
        NonFiniteGradient,
        match=r"at optimizer step 3: this step refused, the adapter keeps the weights of step 2 \(0 earlier",
    ):
        trainer.update(trajs)
    assert trainer.step == step
    assert all(torch.equal(before[k], v) for k, v in lora_state(trainer).items())


def test_kl_penalty_trains_zero_advantage_groups_toward_the_base_model(tok):
    """With kl_coef > 0 no row is skipped: a batch whose rewards are all equal still moves the
    adapter, and toward the base model (KL to the reference falls)."""
    from strands_art.training.loss import LossConfig

    trainer, gateway = make(tok, ppo_epochs=1, learning_rate=5e-2)
    trajs = rollouts(trainer, gateway)
    trainer.update(trajs)  # drift away from the base model (no KL term)
    trainer.update(trajs)
    kl_cfg = trainer.config.replace(loss=LossConfig(kl_coef=1.0), learning_rate=1e-2)
    trainer.config = kl_cfg
    flat = [dataclasses.replace(t, reward=0.5) for t in trajs]
    before = lora_state(trainer)
    m1 = trainer.update(flat)
    assert m1["zero_advantage_rows_skipped"] == 0 and m1["kl_ref"] > 0
    after = lora_state(trainer)
    assert any(not torch.equal(before[k], after[k]) for k in after)
    for _ in range(3):
        m = trainer.update(flat)
    assert m["kl_ref"] < m1["kl_ref"]


def test_kl_to_a_fresh_adapter_is_zero(tok):
    from strands_art.training.loss import LossConfig

    trainer, gateway = make(tok, ppo_mini_batch_size=2, ppo_epochs=1, loss=LossConfig(kl_coef=0.5))
    trajs = rollouts(trainer, gateway)
    m = trainer.update(trajs)  # one step, measured before it: lora_B = 0, so policy = base
    assert m["optimizer_steps"] == 1 and m["zero_advantage_rows_skipped"] == 0
    assert 0 <= m["kl_ref"] < 1e-6
    assert trainer.update(trajs)["kl_ref"] > 1e-4  # after one step at lr 5e-2 it has moved


def test_kl_penalty_under_top_k_is_taken_without_the_filters(tok):
    """With top-k sampling a drifted policy samples tokens outside the base model's top k, whose
    reference logprob under the sampling filters is -inf: a clamped KL term with no gradient on
    exactly the tokens that drifted. The penalty (and ``kl_ref``) uses the temperature-scaled
    distribution without top-k / top-p instead, for both policies, and pulls those tokens back."""
    import math

    from strands_art.training.logprobs import trainer_logprobs
    from strands_art.training.loss import LossConfig

    topk = SamplingParams(temperature=0.8, top_k=5, max_new_tokens=6)
    unfiltered = SamplingParams(temperature=0.8, max_new_tokens=6)
    trainer, gateway = make(tok, ppo_epochs=1, sampling=topk)
    for b in range(3):  # drift away from the base model
        trainer.update(rollouts(trainer, gateway, b, topk))
    flat = [dataclasses.replace(t, reward=0.5) for t in rollouts(trainer, gateway, 3, topk)]

    def by_hand() -> tuple[float, float, float]:
        """Over the sampled tokens the trainer's own filters keep: the k3 KL to the base,
        unfiltered and clamped as in the loss, and the fraction outside the base model's top k;
        over all sampled tokens: the mean log-ratio policy / base (unfiltered)."""
        total, n, outside, log_ratio, n_all = 0.0, 0, 0, 0.0, 0
        for traj in flat:
            for row in traj.rows:
                ids = torch.tensor([row.input_ids])
                with torch.no_grad():
                    logits = trainer.model(input_ids=ids).logits.float()
                    with trainer.model.disable_adapter():
                        base = trainer.model(input_ids=ids).logits.float()
                lp_k = trainer_logprobs(logits, ids, topk)[0]
                lp, ref = (
                    trainer_logprobs(logits, ids, unfiltered)[0],
                    trainer_logprobs(base, ids, unfiltered)[0],
                )
                ref_k = trainer_logprobs(base, ids, topk)[0]
                for i, m in enumerate(row.loss_mask):
                    if not m:
                        continue
                    log_ratio += float(lp[i] - ref[i])
                    n_all += 1
                    if math.isfinite(float(lp_k[i])):
                        d = min(20.0, max(-20.0, float(ref[i] - lp[i])))
                        total += min(10.0, math.exp(d) - d - 1)
                        n += 1
                        outside += not math.isfinite(float(ref_k[i]))
        return total / n, outside / n, log_ratio / n_all

    kl0, outside, ratio0 = by_hand()
    assert outside > 0.5 and ratio0 > 3  # most sampled tokens are ones the base model's top 5 would remove
    trainer.config = trainer.config.replace(loss=LossConfig(kl_coef=1.0), learning_rate=1e-9)
    m = trainer.update(flat)  # a negligible step: kl_ref is measured on this policy
    assert m["kl_ref"] == pytest.approx(kl0, rel=1e-4)
    trainer.config = trainer.config.replace(learning_rate=1e-2)
    for _ in range(3):
        trainer.update(flat)
    assert by_hand()[2] < 0.6 * ratio0  # pulled toward the base model (old code: ~0.8)


def test_gradient_checkpointing_gives_the_same_update(tok):
    """Activation checkpointing recomputes activations in the backward pass: the same loss and
    LoRA weights as the plain update (2 PPO epochs, 2 mini-batches), the model back in eval mode
    and without checkpointing afterwards (the shared sampler generates with its KV cache)."""
    trainer, gateway = make(tok)
    trajs = rollouts(trainer, gateway)
    plain, ckpt = make(tok)[0], make(tok, gradient_checkpointing=True)[0]
    saved = {"plain": 0, "ckpt": 0}  # tensors autograd saves for the backward pass, outside checkpoints

    def update(name: str, t: LocalTrainer) -> dict:
        def pack(x: torch.Tensor) -> torch.Tensor:
            saved[name] += 1
            return x

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
            return t.update(trajs)

    m_plain, m_ckpt = update("plain", plain), update("ckpt", ckpt)
    assert m_ckpt["loss"] == pytest.approx(m_plain["loss"], abs=1e-6)
    assert m_ckpt["grad_norm"] == pytest.approx(m_plain["grad_norm"], abs=1e-6)
    a, b = lora_state(plain), lora_state(ckpt)
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    assert 0 < saved["ckpt"] < saved["plain"] / 2, saved  # the decoder layers' activations are not kept
    assert not ckpt.model.training and not ckpt.model.get_base_model().is_gradient_checkpointing
    with pytest.raises(ValueError, match="use one of share_prefix and gradient_checkpointing"):
        config(share_prefix=True, gradient_checkpointing=True)
