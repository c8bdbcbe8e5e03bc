"""The per-outer-batch accounting behind bench/seed_experiments.py's tables, in the experiment's own
batch shape (``--prompt-batch 1 --ppo-mini-batch 1 --rollouts-per-prompt 4 --max-draws 2``), through
``strands-art train``'s run function with real gateway capture (tree and linear), batching, GRPO and
LoRA updates of a tiny Llama over Qwen2.5's vocabulary, sampled by the scripted backend of
tests/test_seed_experiments.py. The rewards are set per (outer batch, task) so that every case of
dynamic sampling with one prompt occurs: a tied first group replaced by one with signal (the first
dropped), two tied groups (the first kept, tied, the second dropped), a first group with signal.
``rows``, ``tokens`` and ``processed_tokens`` are recounted from the rows files of the kept group;
the optimizer steps, the timings' scopes and a resume after ``--stop-after`` are checked."""

from __future__ import annotations

import asyncio
import json
import math
import re
from pathlib import Path

import pytest
from test_determinism import untimed
from test_seed_experiments import (
    MODEL,
    ScriptedSync,
    rows_files,
    script,
    tiny_qwen_vocab_llama,
    trained_tokens,
)

from strands_art.backends.scripted import ScriptedBackend
from strands_art.envs.lookup import train_environment
from strands_art.registry import load_tokenizer
from strands_art.training import loop
from strands_art.training.dynamic_sampling import candidate_order
from strands_art.training.environment import EnvOptions
from strands_art.training.local import LocalTrainer
from strands_art.training.run import arun_training
from strands_art.training.settings import TrainSettings

ARMS = {
    "tree-fixed-steps": {"history_mode": "tree", "batching": "fixed-steps"},
    "tree-fixed-rows": {"history_mode": "tree", "batching": "fixed-rows"},
    "linear-fixed-steps": {"history_mode": "linear", "batching": "fixed-steps"},
}
GIVEN = {
    "outer_batches": 3, "prompt_batch": 1, "rollouts_per_prompt": 4, "ppo_mini_batch": 1, "epochs": 1,
    "lr": 1e-2, "warmup_steps": 0, "kl_coef": 0.0, "lora_rank": 4, "micro_batch_tokens": 512,
    "max_new_tokens": 64, "max_turns": 2, "eval_every": 1, "eval_samples": 1, "max_staleness": 0,
    "concurrency": 8, "checkpoint_every": 1, "max_draws": 2, "seed": 0,
}  # fmt: skip
# per outer batch: (first drawn group has signal, second drawn group has signal or None if not drawn)
CASES = {0: (False, True), 1: (False, False), 2: (True, None)}
EVAL_SLEEP_S = 1.0  # each held-out rollout waits this long: an evaluation takes >= 1 s


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # conftest.py


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(MODEL)


def drawn_tasks(env, b: int) -> list[str]:
    """The first two candidates of outer batch ``b`` (the loop's draw, then the next in order)."""
    first = loop.sample_tasks(env.train_tasks, 1, GIVEN["seed"], b)
    return [t.name for t in candidate_order(env.train_tasks, first, GIVEN["seed"], b)[:2]]


def controlled(env, eval_sleep_s: float):
    """``env.rollout`` with the training rewards of :data:`CASES` (signal: rollout 0 gets 1.0, the
    others 0.0; tied: all 0.0) and held-out rollouts that take ``eval_sleep_s`` longer."""
    inner = env.rollout
    signal = {
        (b, name)
        for b, flags in CASES.items()
        for name, f in zip(drawn_tasks(env, b), flags, strict=True)
        if f
    }

    async def rollout(gateway, task, rid, gid, sampling):
        traj = await inner(gateway, task, rid, gid, sampling)
        if rid.startswith("eval-"):
            await asyncio.sleep(eval_sleep_s)
            return traj
        b, k = int(re.match(r"b(\d+)-", rid).group(1)), int(rid.rsplit("-r", 1)[1])
        traj.reward = float(k == 0) if (b, task.name) in signal else 0.0
        return traj

    return rollout


def run_arm(tok, run_dir: Path, arm: str, stop_after: int | None = None, resume: bool = False) -> None:
    mode = ARMS[arm]
    env = train_environment(EnvOptions(history_mode=mode["history_mode"], work_dir=run_dir / "env"))
    env.rollout = controlled(env, 0.0 if stop_after else EVAL_SLEEP_S)
    settings = TrainSettings.resolve("lookup", str(run_dir), {**GIVEN, **mode}, env.defaults)
    backend = ScriptedBackend(tok, script(tok))
    trainer = LocalTrainer(
        tiny_qwen_vocab_llama(), tok, settings.trainer_config(), weight_sync=ScriptedSync(backend)
    )
    asyncio.run(
        arun_training(
            settings,
            env=env,
            progress=False,
            on_batch=lambda r: None,
            loaded=(tok, trainer),
            stop_after=stop_after,
            resume=resume,
        )  # fmt: skip
    )


def records(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(tok, tmp_path_factory):
    root = tmp_path_factory.mktemp("seed-accounting")
    for arm in ARMS:
        run_arm(tok, root / arm, arm)
    # tree-fixed-rows again, stopped after its first outer batch and resumed (twice: 1 + 1 + 1)
    for i in range(3):
        run_arm(tok, root / "resumed", "tree-fixed-rows", stop_after=1, resume=i > 0)
    return root


@pytest.mark.parametrize("arm", list(ARMS))
def test_rows_and_tokens_are_the_kept_groups(runs, arm):
    env = train_environment(EnvOptions())
    trains = [r for r in records(runs / arm) if r["kind"] == "train"]
    assert [r["outer_batch"] for r in trains] == [0, 1, 2]
    for rec, rollouts in zip(trains, rows_files(runs / arm), strict=True):
        b = rec["outer_batch"]
        first, second = drawn_tasks(env, b)
        kept = second if CASES[b] == (False, True) else first
        assert {r["group_id"] for r in rollouts} == {kept} and len(
            rollouts
        ) == 4  # the dropped group: not here
        assert rec["groups_drawn"] == (1 if CASES[b][1] is None else 2)
        assert (
            rec["groups_dropped"] == rec["groups_drawn"] - 1
            and rec["rollouts_drawn"] == 4 * rec["groups_drawn"]
        )
        assert rec["rows"] == sum(len(r["rows"]) for r in rollouts)
        assert rec["tokens"] == sum(len(row["input_ids"]) for r in rollouts for row in r["rows"])
        assert rec["processed_tokens"] == trained_tokens(rollouts)
        if CASES[b] == (False, False):  # the kept group tied: advantage 0, no pass
            assert rec["zero_advantage_groups"] == 1 and rec["groups_tied_kept"] == 1
            assert rec["processed_tokens"] == 0 and rec["zero_gradient_steps"] == rec["optimizer_steps"]
        else:  # rewards [1, 0, 0, 0]: every rollout off the mean, every row forwarded
            assert rec["zero_advantage_groups"] == 0 and rec["processed_tokens"] == rec["tokens"] > 0
        if ARMS[arm]["history_mode"] == "linear":
            assert all(len(r["rows"]) == 1 for r in rollouts)


@pytest.mark.parametrize("arm", list(ARMS))
def test_the_optimizer_steps_are_the_configurations_or_the_kept_rows(runs, arm):
    trains = [r for r in records(runs / arm) if r["kind"] == "train"]
    if ARMS[arm]["batching"] == "fixed-steps":  # one mini-batch of one prompt, whatever arrived
        expect = [1, 1, 1]
    else:  # mini-batches of --ppo-mini-batch x --rollouts-per-prompt = 4 rows of the kept group
        assert json.loads((runs / arm / "train.json").read_text())["rows_per_mini_batch"] == 4
        expect = [math.ceil(r["rows"] / 4) for r in trains]
    assert [r["optimizer_steps"] for r in trains] == expect
    assert [r["step"] for r in trains] == [sum(expect[: i + 1]) for i in range(3)]


@pytest.mark.parametrize("arm", list(ARMS))
def test_the_timings_cover_what_the_tables_say(runs, arm):
    recs = records(runs / arm)
    evals = [r for r in recs if r["kind"] == "eval"]
    assert [e["outer_batch"] for e in evals] == [0, 1, 2, 3] and all(
        e["eval_s"] >= EVAL_SLEEP_S for e in evals
    )
    for rec in (r for r in recs if r["kind"] == "train"):
        # the update's passes only, inside the update's time; the outer batch's wall time holds the
        # rollouts and the update, not the evaluation before it (>= EVAL_SLEEP_S, every batch here)
        assert 0 < rec["actor_update_s"] <= rec["fwd_bwd_s"] + rec["optimizer_s"] + 0.05
        assert rec["actor_update_s"] <= rec["train_s"]
        assert (
            rec["rollout_s"] + rec["train_s"]
            <= rec["e2e_s"]
            < rec["rollout_s"] + rec["train_s"] + EVAL_SLEEP_S
        )


def test_a_resumed_run_records_each_outer_batch_once_as_an_uninterrupted_one(runs):
    whole, resumed = records(runs / "tree-fixed-rows"), records(runs / "resumed")
    assert [(r["kind"], r["outer_batch"]) for r in resumed] == [(r["kind"], r["outer_batch"]) for r in whole]
    drop = {"e2e_s", "actor_update_s", "fwd_bwd_s", "optimizer_s", "launch_sync_s"}
    assert [{k: v for k, v in r.items() if k not in drop} for r in untimed(resumed)] == [
        {k: v for k, v in r.items() if k not in drop} for r in untimed(whole)
    ]
    assert rows_files(runs / "resumed") == rows_files(runs / "tree-fixed-rows")
