"""The held recorded runs replay to the rows they stored (issue 26, "rows identical").

Every run directory committed under ``tests/data/`` (today ``view-run``, recorded by
``tests/support/make_view_run.py`` through the real agent, gateway, chat template and store, and
``train-lookup`` and ``train-migrationbench``, real ``train --env lookup`` and
``train --env migrationbench`` runs) is replayed
rollout by rollout with ``replay --from-run`` (:func:`strands_art.replay.spec_from_run`: the
stored chat messages and sampled token IDs through a fresh gateway) and compared with the rows
stored in ``trajectories.jsonl`` and in the Parquet parts. A refactor of the conversion, render,
capture or healing code that changes a single token, mask bit or logprob fails here.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from strands_art.replay import replay, spec_from_run
from strands_art.store import TrajectoryStore

DATA = Path(__file__).resolve().parent / "data"
RUNS = sorted(p.parent.parent for p in DATA.glob("*/trajectories/trajectories.jsonl"))
FIXTURES = [(run, traj.rollout_id) for run in RUNS for traj in TrajectoryStore(run / "trajectories")]


def test_every_held_run_is_covered():
    """The fixtures are found (a moved folder must not turn this file into zero tests)."""
    assert [r.name for r in RUNS] == ["train-lookup", "train-migrationbench", "view-run"]
    by_run = {run.name: [rid for r, rid in FIXTURES if r == run] for run in RUNS}
    assert by_run["view-run"] == ["compiler-props-r0", "compiler-props-r1", "alpha-r0", "alpha-r1"]
    # the recorded `train --env lookup` run: training (bN-...) and held-out (eval-bN-...) rollouts
    assert by_run["train-lookup"] and all(rid.startswith(("b", "eval-b")) for rid in by_run["train-lookup"])
    assert sorted(by_run["train-migrationbench"]) == [
        *(f"b{b}-compiler-props-r{r}" for b in range(3) for r in range(4)),
        "eval-b0-junit-mix-r0", "eval-b3-junit-mix-r0",
    ]  # fmt: skip


# Rollouts recorded under a rule changed since, on purpose (CHANGELOG), replayed in their own test
# below: train-lookup's b1-lookup-marble-r0 ended its first turn with a Qwen2.5 bare call and a
# second one broken by the end token (`{"name": "code", "arguments": {"value": "science"}`); the
# gateway kept the broken call as the turn's text then, and cuts the turn at its complete call now.
SUPERSEDED = {("train-lookup", "b1-lookup-marble-r0")}
CURRENT = [(r, i) for r, i in FIXTURES if (r.name, i) not in SUPERSEDED]


def test_superseded_rollouts_are_held():
    assert {(r.name, i) for r, i in FIXTURES} >= SUPERSEDED


@pytest.mark.parametrize(("run", "rollout_id"), CURRENT, ids=[f"{r.name}/{i}" for r, i in CURRENT])
def test_replay_gives_the_stored_rows(run: Path, rollout_id: str):
    store = TrajectoryStore(run / "trajectories")
    [stored] = [t for t in store if t.rollout_id == rollout_id]
    result = asyncio.run(replay(spec_from_run(run, rollout_id)))

    replayed = [(r["input_ids"], r["loss_mask"], r["logprobs"]) for r in result["rows"]]
    assert replayed == [(r.input_ids, r.loss_mask, r.logprobs) for r in stored.rows]
    assert [r["turns"] for r in result["rows"]] == [r.turns for r in stored.rows]
    assert [(t["prompt_ids"], t["output_ids"], t["row"]) for t in result["turns"]] == [
        (t.prompt_ids, t.output_ids, t.row) for t in stored.turns
    ]
    assert [e["kind"] for e in result["events"] if e["kind"] in ("fork", "reset")] == [
        e["kind"] for e in stored.events if e["kind"] in ("fork", "reset")
    ]
    part = store.read_part(rollout_id).to_pylist()  # what a trainer reads
    assert [(p["input_ids"], p["loss_mask"], p["logprobs"]) for p in part] == replayed
    assert sum(sum(m) for _, m, _ in replayed) > 0  # sampled tokens to compare, not empty rows


def test_a_turn_ended_inside_a_bare_call_replays_under_the_cut_rule():
    """b1-lookup-marble-r0 under today's rule: the same sampled tokens, the broken second call
    (output tokens 16-32, the end token included) marked as the cut tail, and the next turn, whose
    stored history holds the broken call as the assistant's text, starting a new row (the stored
    row healed it into one)."""
    run = DATA / "train-lookup"
    [stored] = [t for t in TrajectoryStore(run / "trajectories") if t.rollout_id == "b1-lookup-marble-r0"]
    result = asyncio.run(replay(spec_from_run(run, "b1-lookup-marble-r0")))

    first, second = result["turns"]
    assert (first["prompt_ids"], first["output_ids"]) == (
        stored.turns[0].prompt_ids,
        stored.turns[0].output_ids,
    )
    assert second["output_ids"] == stored.turns[1].output_ids
    assert [c["name"] for c in first["tool_calls"]] == ["lookup"] and first["finish_reason"] == "tool_calls"
    [cut] = [e for e in result["events"] if e["kind"] == "length_cut_at_calls"]
    assert (cut["turn"], cut["tail"], cut["finish_reason"]) == (0, [16, 32], "stop")
    [reset] = [e for e in result["events"] if e["kind"] == "reset"]
    assert (reset["turn"], reset["reason"], reset["role"]) == (1, "message_edited", "assistant")
    assert [e["kind"] for e in stored.events] == ["heal"]

    [row] = stored.rows
    assert [r["turns"] for r in result["rows"]] == [[0], [1]] and row.turns == [0, 1]
    head = result["rows"][0]
    n = len(head["input_ids"])
    assert (head["input_ids"], head["loss_mask"], head["logprobs"]) == (
        row.input_ids[:n],
        row.loss_mask[:n],
        row.logprobs[:n],
    )
    # the row keeps the tail (GRPO leaves it out: train_cut_tails)
    assert sum(head["loss_mask"]) == len(first["output_ids"])
    tail = result["rows"][1]  # the next turn's row: its sampled tokens and their logprobs, as stored
    out = stored.turns[1].output_ids
    assert sum(tail["loss_mask"]) == len(out) and tail["input_ids"][-len(out) :] == out
    assert [lp for lp, m in zip(tail["logprobs"], tail["loss_mask"], strict=True) if m] == stored.turns[
        1
    ].logprobs
    assert row.input_ids[-len(out) :] == out and row.logprobs[-len(out) :] == stored.turns[1].logprobs
