"""Turn / Row / Trajectory serialization: to_dict equals dataclasses.asdict, copies, round-trips."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strands_art.trajectory import Row, Trajectory, Turn

ids = st.lists(st.integers(0, 151_000), max_size=40)
floats = st.lists(st.floats(-20, 0, allow_nan=False), max_size=40)
jsonish = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


@st.composite
def rows(draw):
    n = draw(st.integers(0, 30))
    return Row(
        input_ids=draw(st.lists(st.integers(0, 151_000), min_size=n, max_size=n)),
        loss_mask=draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)),
        logprobs=draw(st.lists(st.floats(-20, 0, allow_nan=False), min_size=n, max_size=n)),
        rollout_id=draw(st.text(min_size=1, max_size=8)),
        group_id=draw(st.none() | st.text(max_size=8)),
        turns=draw(st.lists(st.integers(0, 9), max_size=4)),
        turn_spans=draw(st.lists(st.lists(st.integers(0, 30), min_size=2, max_size=2), max_size=4)),
        reward=draw(st.none() | st.floats(-1, 1)),
        metadata=draw(st.dictionaries(st.text(max_size=4), jsonish, max_size=3)),
    )


@st.composite
def turns(draw):
    return Turn(
        index=draw(st.integers(0, 50)),
        prompt_ids=draw(ids),
        output_ids=draw(ids),
        logprobs=draw(floats),
        finish_reason=draw(st.sampled_from(["stop", "length", "tool_calls"])),
        timings=draw(st.dictionaries(st.text(max_size=4), st.floats(0, 9), max_size=3)),
        messages=draw(st.lists(st.dictionaries(st.text(max_size=4), jsonish, max_size=3), max_size=3)),
        tools=draw(
            st.none() | st.lists(st.dictionaries(st.text(max_size=4), jsonish, max_size=2), max_size=2)
        ),
    )


@given(rows(), turns(), st.booleans())
def test_to_dict_is_asdict_and_a_deep_copy(row, turn, full):
    assert row.to_dict() == asdict(row)
    expected = asdict(turn)
    if not full:
        del expected["messages"], expected["tools"]
    assert turn.to_dict(full=full) == expected
    d = row.to_dict()
    d["input_ids"].append(1)
    d["turn_spans"].append([0, 0])
    d["metadata"]["new"] = 1
    assert row.to_dict() == asdict(row) and "new" not in row.metadata


@given(st.lists(rows(), max_size=3), st.lists(turns(), max_size=3))
def test_trajectory_round_trips(rs, ts):
    traj = Trajectory(rollout_id="r", group_id="g", rows=rs, turns=ts, events=[{"turn": 0, "kind": "fork"}])
    back = Trajectory.from_dict(traj.to_dict())
    assert back.to_dict() == traj.to_dict()
    assert back.rows == rs


def test_to_dict_with_messages_stores_each_turn_s_new_messages_only():
    from strands_art.trajectory import Trajectory, Turn

    m0 = [{"role": "user", "content": "hi"}]
    m1 = m0 + [{"role": "assistant", "content": "yo"}, {"role": "user", "content": "again"}]
    m2 = [{"role": "user", "content": "edited"}]  # not an extension: stored whole
    turns = [Turn(k, [1], [2], [-0.1], "stop", messages=m) for k, m in enumerate((m0, m1, m2))]
    d = Trajectory("r", turns=turns).to_dict(messages=True)
    assert [t.get("messages_prefix", 0) for t in d["turns"]] == [0, 1, 0]
    assert d["turns"][1]["messages"] == m1[1:]
    back = Trajectory.from_dict(json.loads(json.dumps(d)))
    assert [t.messages for t in back.turns] == [m0, m1, m2]
    assert "messages" not in Trajectory("r", turns=turns).to_dict()["turns"][0]
    d["turns"][0]["messages_prefix"] = 3
    with pytest.raises(ValueError, match="messages_prefix 3 has no previous messages"):
        Trajectory.from_dict(d)
