"""The lookup tool task (strands_art.envs.lookup): reward on real strings, the rollout through a
real Strands Agent + ARTModel + linear gateway (scripted with the 0.5B's own outputs, then the
real Qwen2.5-Coder-0.5B on llama.cpp): one row per rollout, tool-result tokens masked 0."""

from __future__ import annotations

import asyncio
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strands_art.backends import SamplingParams
from strands_art.backends.scripted import ScriptedBackend
from strands_art.envs.lookup import (
    ANSWER_HINT,
    HELD_OUT_KEYS,
    TRAIN_KEYS,
    LookupTask,
    code_of,
    lookup,
    lookup_reward,
    lookup_rollout,
    lookup_tasks,
    outcome,
)
from strands_art.gateway import RolloutGateway
from strands_art.registry import load_tokenizer
from strands_art.rowcheck import row_problems

MODEL = "qwen2.5-coder-0.5b"
OTTER = code_of("otter")
# what Qwen2.5-Coder-0.5B-Instruct wrote in a real rollout on this task (transformers, T=1)
CALL = '{"name": "lookup", "arguments": {"key": "otter"}}<|im_end|>'
FENCED_CALL = '```json\n{\n  "name": "lookup",\n  "arguments": {\n    "key": "otter"\n  }\n}\n```<|im_end|>'


def test_codes_and_splits() -> None:
    assert code_of("otter") == code_of("otter") and re.fullmatch(r"[1-9]\d{3}", OTTER)
    assert not set(TRAIN_KEYS) & set(HELD_OUT_KEYS)
    assert [t.key for t in lookup_tasks("heldout")] == list(HELD_OUT_KEYS)
    assert len(lookup_tasks("train")) == 24 and lookup_tasks("train")[0].name == "lookup-falcon"
    with pytest.raises(ValueError, match="split"):
        lookup_tasks("all")  # type: ignore[arg-type]


def test_tool_returns_the_code_and_refuses_unknown_keys() -> None:
    assert lookup("otter") == f"The code stored under 'otter' is {OTTER}. {ANSWER_HINT}"
    assert lookup(" 'Otter' ") == f"The code stored under 'otter' is {OTTER}. {ANSWER_HINT}"
    assert lookup("nope") == "No code is stored under 'nope'."
    assert len(lookup("x" * 10_000)) < 100  # hostile input is not echoed back whole


def test_reward_on_real_answers() -> None:
    task = LookupTask("otter")
    assert task.reward(1, f"The code stored under 'otter' is {OTTER}.") == 1.0
    assert task.reward(1, f'{{"description": "The code stored under \'otter\' is {OTTER}."') == 1.0
    assert task.reward(2, f"The code is {OTTER}.") == 0.5  # right, but the call was repeated
    assert task.reward(1, "The code stored under 'otter' is 1234.") == (1.0 if OTTER == "1234" else 0.5)
    assert task.reward(1, f"The code is 9{OTTER}.") == 0.5  # inside a longer number: the call counts
    assert task.reward(0, f"The code is {OTTER}.") == 0.0  # no call: a guess
    assert task.reward(2, None) == 0.5  # kept calling until the turn limit
    assert task.reward(0, None) == 0.0
    with pytest.raises(ValueError, match="calls"):
        lookup_reward(-1, "1234", "1234")


@given(calls=st.integers(0, 5), text=st.text(max_size=40), code=st.from_regex(r"[1-9]\d{3}", fullmatch=True))
def test_reward_property(calls: int, text: str, code: str) -> None:
    """1.0 iff one call and the code as a whole number; 0.0 iff no call; else 0.5."""
    answer = f"{text} {code}."
    called = 0.0 if calls == 0 else 0.5
    assert lookup_reward(calls, answer, code) == (1.0 if calls == 1 else called)
    assert lookup_reward(calls, None, code) == called
    if code not in re.findall(r"\d+", text):
        assert lookup_reward(calls, text, code) == called


def test_outcome_of_strands_messages() -> None:
    use = {"toolUse": {"toolUseId": "t1", "name": "lookup", "input": {"key": "otter"}}}
    result = {"toolResult": {"toolUseId": "t1", "content": [{"text": "..."}], "status": "success"}}
    user = {"role": "user", "content": [{"text": "q"}]}
    called = [user, {"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]
    assert outcome(called) == (1, None)
    answered = [*called, {"role": "assistant", "content": [{"text": "It is "}, {"text": "42."}]}]
    assert outcome(answered) == (1, "It is 42.")
    assert outcome([user]) == (0, None)


def _run(gw: RolloutGateway, task: LookupTask, max_turns: int, params: SamplingParams):
    return asyncio.run(lookup_rollout(max_turns=max_turns)(gw, task, "r", task.name, params))


def _check_one_row(tok, traj) -> str:
    """One row; loss mask 1 exactly on the turns' outputs; returns the masked-0 text after turn 0."""
    assert row_problems(traj) == []
    (row,) = traj.rows
    assert row.turns == list(range(len(traj.turns)))
    sampled = [i for s, e in row.turn_spans for i in range(s, e)]
    assert [i for i, m in enumerate(row.loss_mask) if m] == sampled
    (s0, e0), (s1, _) = row.turn_spans[0], row.turn_spans[1]
    assert row.input_ids[:s0] == traj.turns[0].prompt_ids
    assert row.input_ids[:s1] == traj.turns[1].prompt_ids
    assert set(row.loss_mask[e0:s1]) == {0}
    return tok.decode(row.input_ids[e0:s1])


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(MODEL)


@pytest.mark.parametrize(
    ("script", "reward", "calls", "stop"),
    [
        ([CALL, f"The code stored under 'otter' is {OTTER}.<|im_end|>"], 1.0, 1, "completed"),
        ([FENCED_CALL, FENCED_CALL], 0.5, 2, "turn_limit"),
        ([FENCED_CALL, CALL, f"It is {OTTER}.<|im_end|>"], 0.5, 2, "completed"),
        ([f"The code is {OTTER}.<|im_end|>"], 0.0, 0, "completed"),
    ],
)
def test_scripted_rollout_rewards_and_rows(tok, script, reward, calls, stop) -> None:
    """The 0.5B's real output forms, played back: the agent runs the tool, the reward follows the
    rule, linear mode keeps one row and the tool result is context (mask 0)."""
    backend = ScriptedBackend(tok, [{"text": t} for t in script])
    gw = RolloutGateway(tok, backend, history_mode="linear")
    max_turns = 2 if len(script) < 3 else 3
    traj = _run(gw, LookupTask("otter"), max_turns, SamplingParams(temperature=1.0, max_new_tokens=64))
    assert (traj.reward, traj.metadata["calls"], traj.metadata["stop_reason"]) == (reward, calls, stop)
    assert traj.metadata["success"] == (reward == 1.0)
    assert len(traj.turns) == len(script)
    if len(script) > 1:
        between = _check_one_row(tok, traj)
        assert f"The code stored under 'otter' is {OTTER}." in between
        assert "<tool_response>" in between


def test_cut_reply_is_no_answer(tok) -> None:
    """The call fits in max_new_tokens, the answer does not: the rollout is cut at the token limit,
    has no answer and scores 0.5 (a call was made)."""
    call_tokens = len(tok.encode(CALL, add_special_tokens=False))
    long_answer = f"The code is {OTTER} and " + "more words follow " * call_tokens
    backend = ScriptedBackend(tok, [{"text": CALL}, {"text": long_answer}])
    gw = RolloutGateway(tok, backend, history_mode="linear")
    traj = _run(gw, LookupTask("otter"), 2, SamplingParams(temperature=1.0, max_new_tokens=call_tokens))
    assert traj.metadata["calls"] == 1 and traj.metadata["truncated_turns"] == [1]
    assert traj.metadata["stop_reason"] == "max_tokens" and traj.metadata["text"] == ""
    assert traj.reward == 0.5 and not traj.metadata["success"]


def test_rollout_needs_two_turns() -> None:
    with pytest.raises(ValueError, match="max_turns"):
        lookup_rollout(max_turns=1)


@pytest.mark.slow
def test_real_rollout_on_the_0_5b(tok) -> None:
    """Qwen2.5-Coder-0.5B (llama.cpp, greedy) through Agent → ARTModel → linear gateway: it calls
    the tool; the rollout is one row whose tool-result tokens are masked 0."""
    from strands_art.backends import make_backend

    backend = make_backend("llamacpp", model=MODEL, context_tokens=1024, parallel=1, threads=1)
    try:
        gw = RolloutGateway(tok, backend, history_mode="linear")
        task = LookupTask("otter")
        traj = _run(gw, task, 2, SamplingParams(temperature=0.0, max_new_tokens=48))
    finally:
        asyncio.run(backend.aclose())
    assert traj.turns[0].finish_reason == "tool_calls"
    assert len(traj.turns) == 2 and traj.metadata["calls"] >= 1
    assert traj.reward == task.reward(traj.metadata["calls"], traj.metadata["text"] or None)
    between = _check_one_row(tok, traj)
    assert f"The code stored under 'otter' is {OTTER}." in between
