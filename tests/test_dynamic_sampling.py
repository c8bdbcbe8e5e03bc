"""Dynamic sampling and the tied-task skip (strands_art.training.dynamic_sampling, loop.train's
``max_draws`` / ``skip_tied``): the trained batch has the configured number of groups whatever the
rewards, so the optimizer step count is the configuration's; groups with signal come first."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.fakes import TRAIN_TRUNCATED, LengthTask, tiny_llama

from strands_art.backends.base import SamplingParams
from strands_art.gateway import RolloutGateway
from strands_art.registry import load_tokenizer
from strands_art.training import loop
from strands_art.training.dynamic_sampling import Draws, TaskHistory, candidate_order, has_signal
from strands_art.training.local import LocalTrainer
from strands_art.training.progress import record_line
from strands_art.training.rollouts import chat_rollout
from strands_art.training.settings import TrainSettings
from strands_art.training.trainer_config import TrainerConfig
from strands_art.trajectory import Trajectory
from strands_art.validation import UsageError


@dataclass(frozen=True)
class T:
    name: str


def _group(name: str, rewards: list[float]) -> list[Trajectory]:
    out = []
    for k, r in enumerate(rewards):
        t = Trajectory(rollout_id=f"{name}-r{k}", group_id=name)
        t.reward = r
        out.append(t)
    return out


def _run(draws: Draws, rewards: dict[str, list[float]], r: int) -> list[list[str]]:
    waves = []
    while wave := draws.next_wave():
        waves.append([t.name for t in wave])
        draws.add(wave, [t for task in wave for t in _group(task.name, rewards[task.name])], r)
        if draws.done():
            break
    return waves


def test_signal_and_ties() -> None:
    assert has_signal([0.0, 1.0]) and has_signal([0.5, 0.5, 1.0])
    assert not has_signal([1.0, 1.0, 1.0]) and not has_signal([0.0]) and not has_signal([])


def test_waves_replace_tied_groups_and_keep_signal_first() -> None:
    tasks = [T(n) for n in "abcdef"]
    rewards = {"a": [1, 1], "b": [0, 1], "c": [0, 0], "d": [1, 1], "e": [0, 0.5], "f": [0, 1]}
    draws = Draws(2, 4, 0.0, 0, 0, list(tasks), TaskHistory())
    assert _run(draws, rewards, 2) == [["a", "b"], ["c"], ["d"]]  # budget 4 spent before a second signal
    assert [t.group_id for t in draws.batch()] == ["b", "b", "a", "a"]  # signal first, then a tied one
    m = draws.metrics()
    assert (m["groups_drawn"], m["rollouts_drawn"], m["groups_with_signal"], m["groups_tied_kept"],
            m["groups_dropped"], m["rollouts_per_signal_group"]) == (4, 8, 1, 1, 2, 8.0)  # fmt: skip
    draws = Draws(2, 6, 0.0, 0, 0, list(tasks), TaskHistory())
    assert _run(draws, rewards, 2) == [["a", "b"], ["c"], ["d"], ["e"]]
    assert [t.group_id for t in draws.batch()] == ["b", "b", "e", "e"]


def test_skip_reads_the_history_and_never_starves_the_batch() -> None:
    tasks = [T(n) for n in "abc"]
    history = TaskHistory()
    history.add("a", [1.0, 1.0])  # tied at 1
    history.add("b", [0.0, 0.0])  # tied at 0
    history.add("c", [0.0, 1.0])
    draws = Draws(1, 3, 1.0, 0, 0, list(tasks), history)
    assert _run(draws, {"c": [0.0, 1.0]}, 2) == [["c"]]
    assert draws.metrics()["skipped_tied_at_1"] == 1 and draws.metrics()["skipped_tied_at_0"] == 1
    # two tied tasks, a batch of two: neither may be skipped
    draws = Draws(2, 2, 1.0, 0, 0, [T("a"), T("b")], history)
    assert _run(draws, {"a": [1, 1], "b": [0, 0]}, 2) == [["a", "b"]]
    assert draws.metrics()["skipped_tied_at_0"] == draws.metrics()["skipped_tied_at_1"] == 0


def test_candidate_order_starts_with_the_usual_draw() -> None:
    tasks = [T(n) for n in "abcdefg"]
    first = loop.sample_tasks(tasks, 3, 5, 2)
    order = candidate_order(tasks, first, 5, 2)
    assert order[:3] == first and sorted(t.name for t in order) == list("abcdefg")
    assert order == candidate_order(tasks, first, 5, 2)


@settings(max_examples=200, deadline=None)
@given(
    n_tasks=st.integers(1, 8),
    p=st.integers(1, 4),
    extra=st.integers(0, 6),
    q=st.sampled_from([0.0, 0.5, 1.0]),
    r=st.integers(1, 4),
    data=st.data(),
)
def test_the_batch_always_has_the_configured_groups(n_tasks, p, extra, q, r, data) -> None:
    """Whatever the rewards and the history: min(P, tasks) groups trained on, of R rollouts each,
    at most N drawn, each task at most once, signal groups first, and drawing stops as soon as P
    groups have signal."""
    names = [f"t{i}" for i in range(n_tasks)]
    value = st.sampled_from([0.0, 0.5, 1.0])
    rewards = {n: data.draw(st.lists(value, min_size=r, max_size=r)) for n in names}
    history = TaskHistory()
    for n in names:
        if data.draw(st.booleans()):
            history.add(n, data.draw(st.lists(value, min_size=1, max_size=3)))
    draws = Draws(p, p + extra, q, 0, 0, [T(n) for n in names], history)
    waves = _run(draws, rewards, r)
    drawn = [n for w in waves for n in w]
    assert len(drawn) == len(set(drawn)) <= p + extra
    batch = draws.batch()
    groups = [batch[i].group_id for i in range(0, len(batch), r)]
    assert len(batch) == r * len(groups) and len(groups) == min(p, n_tasks, len(drawn))
    if n_tasks >= p:
        assert len(groups) == p  # the skip never leaves the batch short
    flags = [has_signal(rewards[g]) for g in groups]
    assert flags == sorted(flags, reverse=True)
    signal_drawn = [n for n in drawn if has_signal(rewards[n])]
    assert len(signal_drawn) <= p  # no wave after the batch had its P groups with signal
    if len(signal_drawn) < p and len(drawn) < p + extra:  # stopped early only when out of tasks
        assert len(drawn) + sum(draws.skipped.values()) == n_tasks


# ---------------------------------------------------------------- through loop.train, a real trainer
TASKS = [LengthTask(n) for n in ("cats", "rivers", "bread", "winter", "snow", "tea")]


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("smollm2")


def tied_for(names: set[str]):
    """chat_rollout, with every rollout of the named tasks rewarded 1.0 (a tied group)."""

    async def rollout(gateway, task, rid, gid, sampling):
        traj = await chat_rollout(gateway, task, rid, gid, sampling)
        if task.name in names:
            traj.reward = 1.0
        else:  # rewards that differ within the group
            traj.reward = float(re.search(r"-r(\d+)$", rid).group(1) == "0")
        return traj

    return rollout


@pytest.mark.parametrize("max_draws,skip_tied", [(2, 0.0), (4, 0.0), (4, 1.0)])
def test_loop_trains_the_configured_steps_with_dynamic_sampling(tok, tmp_path, max_draws, skip_tied) -> None:
    cfg = TrainerConfig(
        prompt_batch_size=2, rollouts_per_prompt=2, ppo_mini_batch_size=1, ppo_epochs=1, learning_rate=1e-2,
        lora_rank=4, lora_alpha=8, micro_batch_max_tokens=90, concurrency=4, checkpoint_every=0, seed=3,
        sampling=SamplingParams(temperature=1.0, max_new_tokens=4), grpo=TRAIN_TRUNCATED,
    )  # fmt: skip
    trainer = LocalTrainer(tiny_llama(), tok, cfg)
    tied = {"cats", "rivers", "bread", "winter"}
    records = asyncio.run(
        loop.train(
            trainer,
            RolloutGateway(tok, trainer.backend),
            TASKS,
            tied_for(tied),
            3,
            tmp_path / "run",
            progress=False,
            max_staleness=0,
            max_draws=max_draws,
            skip_tied=skip_tied,
        )  # fmt: skip
    )
    train = [r for r in records if r["kind"] == "train"]
    assert [r["optimizer_steps"] for r in train] == [2, 2, 2] and trainer.step == 6
    assert all(r["rows"] == 4 for r in train)
    if max_draws == 2 and skip_tied == 0.0:
        assert "groups_drawn" not in train[0]  # the loop without the settings: its record unchanged
        return
    for r in train:
        assert r["groups_drawn"] <= max_draws and r["groups_tied_kept"] + min(r["groups_with_signal"], 2) == 2
        assert r["rollouts_drawn"] == 2 * r["groups_drawn"]
        assert set(r["groups"]) <= {t.name for t in TASKS}
    # with more draws, batches reach the two tasks with signal more often than the first draw does
    assert sum(r["groups_with_signal"] for r in train) >= 2
    if skip_tied:
        assert sum(r["skipped_tied_at_1"] for r in train) >= 1
    line = record_line(train[-1])  # the console line names the draws
    assert f"{train[-1]['groups_drawn']} groups drawn ({train[-1]['groups_with_signal']} with signal" in line


def test_settings_check_and_record_the_new_knobs(tmp_path) -> None:
    s = TrainSettings.resolve("lookup", str(tmp_path), {"max_draws": 4, "skip_tied": 0.5, "prompt_batch": 2})
    assert s.to_dict()["max_draws"] == 4 and s.to_dict()["skip_tied"] == 0.5
    assert TrainSettings.from_dict(s.to_dict()) == s
    with pytest.raises(UsageError, match="--max-draws must be at least --prompt-batch"):
        TrainSettings.resolve("lookup", str(tmp_path), {"max_draws": 1, "prompt_batch": 2})
    with pytest.raises(UsageError, match="^--max-draws must be an integer from 1"):
        TrainSettings.resolve("lookup", str(tmp_path), {"max_draws": 0})
    with pytest.raises(UsageError, match="--skip-tied"):
        TrainSettings.resolve("lookup", str(tmp_path), {"skip_tied": 1.5})
    for knob in ({"max_draws": 4}, {"skip_tied": 0.5}):  # the verl launch draws its own batches
        with pytest.raises(UsageError, match="dynamic sampling is the embedded trainer's loop"):
            TrainSettings.resolve("lookup", str(tmp_path), {"trainer": "verl", "prompt_batch": 2, **knob})
    verl = TrainSettings.resolve(
        "lookup", str(tmp_path), {"trainer": "verl", "prompt_batch": 2, "max_draws": 2}
    )
    assert verl.max_draws == 2  # = --prompt-batch: no extra draws, allowed


def test_a_resume_reads_records_of_batches_drawn_without_dynamic_sampling() -> None:
    """A train record without dynamic sampling holds GRPO's group count under ``groups``
    (an int): a resumed run's history skips it instead of failing (it did: AttributeError)."""
    history = TaskHistory()
    history.add_record({"kind": "train", "outer_batch": 0, "groups": 2})
    history.add_record({"kind": "train", "outer_batch": 1, "groups": {"t0": [1.0, 1.0]}})
    assert history.groups == {"t0": [[1.0, 1.0]]} and history.tied_at("t0") == "1"


def test_a_resumed_run_draws_and_skips_as_an_uninterrupted_one(tok, tmp_path) -> None:
    """The skip reads the tasks' history, which a resume rebuilds from metrics.jsonl: a run stopped
    after its first update and resumed draws, skips and trains exactly as one that never stopped."""
    from test_determinism import untimed

    cfg = TrainerConfig(
        prompt_batch_size=2, rollouts_per_prompt=2, ppo_mini_batch_size=1, ppo_epochs=1, learning_rate=1e-2,
        lora_rank=4, lora_alpha=8, micro_batch_max_tokens=90, concurrency=4, checkpoint_every=1, seed=5,
        sampling=SamplingParams(temperature=1.0, max_new_tokens=4), grpo=TRAIN_TRUNCATED,
    )  # fmt: skip
    rollout = tied_for({"cats", "rivers", "bread", "winter"})

    def run(run_dir, stop_after=None):
        trainer = LocalTrainer(tiny_llama(), tok, cfg)
        return asyncio.run(
            loop.train(
                trainer,
                RolloutGateway(tok, trainer.backend),
                TASKS,
                rollout,
                3,
                run_dir,
                progress=False,
                max_staleness=0,
                max_draws=4,
                skip_tied=1.0,
                stop_after=stop_after,
            )  # fmt: skip
        )

    whole = run(tmp_path / "whole")
    run(tmp_path / "resumed", stop_after=1)
    resumed = run(tmp_path / "resumed")
    train = [r for r in whole if r["kind"] == "train"]
    assert sum(r["skipped_tied_at_1"] for r in train) >= 1  # the history was read
    assert untimed(resumed) == untimed(whole)
