"""Property tests per model family: random tool loops with cosmetic drift on the real tokenizers.

For each family (real tokenizer + template), hypothesis draws a tool loop: 1-4 tool-call turns
(random tools, arguments, end tokens, reasoning) then an answer; the harness re-serializes every
call's arguments (key order, spacing, indentation, dict). Linear mode must keep one row with no
reset or fork, the row must be the concatenation of the recorded prompts and outputs, and the
capture invariants must hold (prompt IDs = what the backend received; loss mask 1 exactly on
sampled tokens, with their logprobs). Tree mode must keep the capture invariants and explain
every extra row by a fork event.
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.family_cases import WRITERS, tool_loop
from test_capture_properties import check_invariants

from strands_art.registry import load_tokenizer

ALIASES = list(WRITERS)
DRIFTS = ["none", "compact", "reversed", "indent", "dict"]
words = st.text(alphabet="abcdefghijXYZ019._-/ ", min_size=1, max_size=16).map(str.strip).filter(bool)


@st.composite
def call(draw):
    if draw(st.booleans()):
        return ("read_file", {"path": draw(words)})
    args = {"command": draw(words)}
    if draw(st.booleans()):
        args["timeout"] = draw(st.integers(1, 900))
    return ("run", args)


@st.composite
def loops(draw, alias: str):
    writer = WRITERS[alias]
    n = draw(st.integers(1, 4))
    turns = []
    for _ in range(n):
        calls = draw(st.lists(call(), min_size=1, max_size=writer.max_calls))
        reasoning = draw(words) if writer.think else None
        turns.append((calls, "", reasoning, draw(st.sampled_from(writer.ends))))
    turns.append(([], draw(words), draw(words) if writer.think else None, draw(st.sampled_from(writer.ends))))
    drifts = draw(st.lists(st.sampled_from(DRIFTS), min_size=n, max_size=n))
    return turns, drifts


def _check_linear(loop) -> None:
    traj = loop.trajectory
    check_invariants(traj, loop.backend.prompts)
    assert not [e for e in traj.events if e["kind"] in ("reset", "fork", "linear_disabled")], traj.events
    assert len(traj.rows) == 1
    expected: list[int] = []
    for t in traj.turns:
        assert t.prompt_ids[: len(expected)] == expected
        expected = t.prompt_ids + t.output_ids
    assert traj.rows[0].input_ids == expected


@pytest.mark.parametrize("alias", ALIASES)
def test_linear_tool_loops_keep_one_row_and_the_invariants(alias):
    load_tokenizer(alias)  # once, outside the examples

    @settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(loops(alias))
    def check(case):
        turns, drifts = case
        loop = asyncio.run(tool_loop(alias, turns, "linear", drifts=drifts))
        _check_linear(loop)
        for (calls, _, _, _), r in zip(turns, loop.results, strict=True):
            assert [(c.name, c.arguments) for c in r.tool_calls] == calls

    check()


@pytest.mark.parametrize("alias", ALIASES)
def test_tree_tool_loops_keep_the_invariants_and_explain_forks(alias):
    load_tokenizer(alias)

    @settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(loops(alias))
    def check(case):
        turns, drifts = case
        loop = asyncio.run(tool_loop(alias, turns, "tree", drifts=drifts))
        traj = loop.trajectory
        check_invariants(traj, loop.backend.prompts)
        forks = [e for e in traj.events if e["kind"] == "fork"]
        assert len(traj.rows) - 1 == len(forks) and all(e.get("reason") for e in forks)

    check()
