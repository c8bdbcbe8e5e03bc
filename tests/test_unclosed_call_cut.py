"""A turn that ends inside an unclosed call keeps the calls it completed, whatever its finish
reason (issue 28 item 11, the stop-ended member): k complete calls, then any prefix of a further
call, then the end token, give exactly those k calls, in every family whose parser can see a
truncated call; the row keeps every sampled token and the tail is marked; a turn whose only call
is broken stays what it was. The real turn: runs/turn-cut/before-b1, compiler-props-r0 (seed 6),
bench/results/turn-cut-2026-12-01.txt."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strands import Agent
from strands.agent.conversation_manager import NullConversationManager
from support.family_cases import WRITERS, one_turn
from support.serve_helpers import TOOLS, gateway, replay_recorded_turn, running_front
from support.strands_tools import add

from strands_art.families.select import FAMILIES
from strands_art.gateway import RolloutGateway
from strands_art.model import ARTModel
from strands_art.registry import family_of

RECORDED = Path(__file__).parent / "data" / "turn_cut" / "before-b1-compiler-props-r0.json"
CALL = '<tool_call>\n{{"name": "add", "arguments": {{"a": {a}, "b": {b}}}}}\n</tool_call>'
UNCLOSED = "\n".join([CALL.format(a=1, b=2), CALL.format(a=3, b=4), '<tool_call>\n{"name": "add", "argu'])
USER = [{"role": "user", "content": "Add 1+2 and 3+4."}]
CALLS = [("read_file", {"path": "a.txt"}), ("run", {"command": "ls -la"}), ("read_file", {"path": "b.txt"})]


def _stop(text: str) -> dict:
    return {"text": text, "finish_reason": "stop"}


def _cut_events(gw: RolloutGateway, sid: str) -> list[dict]:
    return [e for e in gw.trajectory(sid).events if e["kind"] == "length_cut_at_calls"]


def test_the_recorded_turn_keeps_its_three_calls():
    """The measured turn: 3 recipe calls, a 4th without </tool_call>, a 5th "<tool_call>", then
    <|im_end|> (finish "stop", 149 tokens); on main it parsed to 0 calls and scored 0.0."""
    rec, tok, gw, result = replay_recorded_turn(RECORDED)  # the 1.5b model's tokenizer (same GGUF vocabulary)
    assert result.finish_reason == "tool_calls" and not result.ill_formed
    assert [c.arguments["command"] for c in result.tool_calls] == [
        "find . -name pom.xml | xargs sed -i 's#>1[.]8<#>17<#g'",
        "grep -rn '1[.]8' --include=pom.xml .",
        "mvn -q clean verify",
    ]
    traj = gw.trajectory("r")
    turn, [row] = traj.turns[0], traj.rows
    assert turn.output_ids == rec["output_ids"] and row.input_ids[-149:] == rec["output_ids"]
    assert row.logprobs[-149:] == pytest.approx(rec["logprobs"]) and sum(row.loss_mask) == 149
    assert turn.finish_reason == "tool_calls" and "truncated_turns" not in traj.metadata
    [event] = _cut_events(gw, "r")
    assert event["tail"] == [116, 149] == traj.metadata["cut_turns"][0]["tail"]
    assert event["finish_reason"] == "stop" == traj.metadata["cut_turns"][0]["finish_reason"]
    assert event["problems"] == ["tool call 4: unclosed <tool_call> (no </tool_call>; output cut off?)"]
    tail = tok.decode(rec["output_ids"][116:])
    assert tail.startswith('<tool_call>\n{"name": "file_editor"') and tail.endswith("<tool_call><|im_end|>")


def test_a_stop_turn_whose_only_call_is_unclosed_stays_ill_formed(qwen3):
    """No complete call before the broken one: today's behaviour, an ill-formed turn (the raw
    text as content, no call, finish "stop", listed in ill_formed_turns)."""
    text = '<tool_call>\n{"name": "add", "arguments": {"a": 1'
    gw = gateway(qwen3, [_stop(text + "<|im_end|>")])
    gw.open_session("s")
    result = asyncio.run(gw.generate("s", USER, TOOLS))
    assert result.finish_reason == "stop" and result.tool_calls == [] and result.ill_formed
    assert result.text == text and result.tail_start is None and _cut_events(gw, "s") == []
    assert gw.trajectory("s").metadata["ill_formed_turns"][0]["turn"] == 0


def test_a_well_formed_stop_turn_is_not_cut(qwen3):
    gw = gateway(qwen3, [_stop(CALL.format(a=1, b=2) + "\nDone.<|im_end|>")])
    gw.open_session("s")
    result = asyncio.run(gw.generate("s", USER, TOOLS))
    assert len(result.tool_calls) == 1 and result.tail_start is None and _cut_events(gw, "s") == []


def test_the_strands_provider_runs_the_calls_before_an_unclosed_one(qwen3):
    gw = gateway(qwen3, [_stop(UNCLOSED + "<|im_end|>"), {"text": "3 and 7.<|im_end|>"}])
    agent = Agent(
        model=ARTModel(gateway=gw, session_id="s"),
        tools=[add],
        callback_handler=None,
        conversation_manager=NullConversationManager(),
    )
    assert "3 and 7." in str(agent("Add 1+2 and 3+4."))
    traj = gw.trajectory("s")
    assert [m["content"] for m in traj.turns[1].messages if m["role"] == "tool"] == ["3", "7"]
    [event] = _cut_events(gw, "s")
    assert event["turn"] == 0 and event["finish_reason"] == "stop"


async def test_the_http_front_returns_the_calls_before_an_unclosed_one(qwen3):
    gw = gateway(qwen3, [_stop(UNCLOSED + "<|im_end|>")])
    gw.open_session("r")
    async with running_front(gw) as base, httpx.AsyncClient(base_url=base) as http:
        r = await http.post("/rollouts/r/v1/chat/completions", json={"messages": USER, "tools": TOOLS})
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    args = [json.loads(c["function"]["arguments"]) for c in choice["message"]["tool_calls"]]
    assert args == [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
    [event] = _cut_events(gw, "r")
    assert event["finish_reason"] == "stop" and event["tail"][1] == len(
        gw.trajectory("r").turns[0].output_ids
    )


def _hermes(calls: list, index: int) -> str:
    return "\n".join(
        f"<tool_call>\n{json.dumps({'name': n, 'arguments': a})}\n</tool_call>" for n, a in calls
    )


def _fenced(calls: list, index: int) -> str:
    return "\n".join(f"```json\n{json.dumps({'name': n, 'arguments': a})}\n```" for n, a in calls)


# (case, tokenizer alias, calls per turn, the generation prompt opens reasoning, end tokens, writer)
FORMS = [
    ("qwen3 hermes", "qwen3", 2, False, ("<|im_end|>", "<|endoftext|>"), _hermes),
    ("qwen2.5 tagged", "qwen2.5-coder-0.5b", 2, False, ("<|im_end|>", "<|endoftext|>"), _hermes),
    ("qwen2.5 fenced", "qwen2.5-coder-0.5b", 2, False, ("<|im_end|>", "<|endoftext|>"), _fenced),
] + [
    (alias, alias, w.max_calls, w.think, w.ends, w.write_calls)
    for alias, w in WRITERS.items()
    if w.write_turn is None  # Harmony: a call ends with <|call|>, an end token: no call after it
]


@pytest.mark.parametrize(
    ("case", "alias", "max_calls", "think", "ends", "write"), FORMS, ids=[f[0] for f in FORMS]
)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_k_calls_then_any_prefix_of_another_then_the_end_token(
    case, alias, max_calls, think, ends, write, data
):
    """Property: k complete calls, any proper prefix of a further call, an end token -> the k calls."""
    k = data.draw(st.integers(1, min(max_calls, 2)), label="k")
    done = write(CALLS[:k], 0)
    if max_calls == 1:  # one call per turn (Llama 3.x): the model goes on with another
        more = done + "\n" + write(CALLS[k : k + 1], 0)
    else:
        more = write(CALLS[: k + 1], 0)
    # what closes the call list (Mistral's "]", DeepSeek's calls-end), at the end of both
    closers = getattr(FAMILIES.get(family_of(alias) or ""), "call_list_closers", ())  # qwen3: by detection
    closer = next((len(c) for c in closers if done.endswith(c)), 0)
    start, complete = len(done) - closer, len(more) - closer
    if write is _fenced:  # the parser reads a whole JSON object in an unclosed fence as a call
        complete = more.rindex("}") + 1
    cut = data.draw(st.integers(start, complete - 1), label="cut")  # the further call not complete
    end = data.draw(st.sampled_from(ends), label="end")
    text = ("R</think>\n\n" if think else "") + more[:cut] + end
    gw, result = one_turn(alias, _stop(text))
    assert [(c.name, c.arguments) for c in result.tool_calls] == CALLS[:k], (text, result.problems)
    assert result.finish_reason == "tool_calls" and not result.ill_formed
    turn = gw.trajectory("s").turns[0]
    assert gw.trajectory("s").rows[0].input_ids[-len(turn.output_ids) :] == turn.output_ids
    if result.tail_start is not None:  # cut: the tail is marked, up to the end token
        [event] = _cut_events(gw, "s")
        assert event["tail"] == [result.tail_start, len(turn.output_ids)] and event["finish_reason"] == "stop"
