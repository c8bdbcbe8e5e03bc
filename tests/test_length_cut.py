"""A turn cut at the token limit keeps the calls it completed (issue 28 item 11): the turn ends
at its last complete call in the gateway, the Strands provider runs those calls, the HTTP front
returns them, and the row keeps every sampled token with the tail marked."""

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

from strands_art.model import ARTModel

CALL = '<tool_call>\n{{"name": "add", "arguments": {{"a": {a}, "b": {b}}}}}\n</tool_call>'
CUT = "\n".join([CALL.format(a=1, b=2), CALL.format(a=3, b=4), '<tool_call>\n{"name": "add", "argu'])
USER = [{"role": "user", "content": "Add 1+2 and 3+4."}]
BARE = Path(__file__).parent / "data" / "turn_cut" / "r2-linear-s2-bare-json-length-cut.json"


def _length(text: str) -> dict:
    return {"text": text, "finish_reason": "length"}


def test_the_gateway_ends_a_cut_turn_at_its_last_complete_call(qwen3):
    gw = gateway(qwen3, [_length(CUT)])
    gw.open_session("s")
    result = asyncio.run(gw.generate("s", USER, TOOLS))
    assert result.finish_reason == "tool_calls" and not result.ill_formed
    assert [(c.name, c.arguments) for c in result.tool_calls] == [
        ("add", {"a": 1, "b": 2}),
        ("add", {"a": 3, "b": 4}),
    ]
    traj = gw.trajectory("s")
    turn, [row] = traj.turns[0], traj.rows
    assert turn.finish_reason == "length" and traj.metadata["truncated_turns"] == [0]
    n = len(turn.output_ids)
    assert row.input_ids[-n:] == turn.output_ids and sum(row.loss_mask) == n  # every sampled token kept
    tail = qwen3.decode(turn.output_ids[result.tail_start :])
    assert tail.startswith("<tool_call>") and tail.endswith('"argu')
    [event] = [e for e in traj.events if e["kind"] == "length_cut_at_calls"]
    assert event["tail"] == [result.tail_start, n] == traj.metadata["cut_turns"][0]["tail"]


@pytest.mark.parametrize(
    "output",
    ["Just text cut off at the lim", '<tool_call>\n{"name": "add", "arguments": {"a": 1'],
    ids=["text only", "no complete call"],
)
def test_a_cut_turn_without_a_complete_call_stays_a_length_turn(qwen3, output):
    gw = gateway(qwen3, [_length(output)])
    gw.open_session("s")
    result = asyncio.run(gw.generate("s", USER, TOOLS))
    assert result.finish_reason == "length" and result.tool_calls == [] and result.tail_start is None
    assert [e for e in gw.trajectory("s").events if e["kind"] == "length_cut_at_calls"] == []


FAMILIES = [alias for alias, w in WRITERS.items() if w.write_turn is None]  # Harmony: one call per turn
CALLS = [("read_file", {"path": "a.txt"}), ("run", {"command": "ls -la"}), ("read_file", {"path": "b.txt"})]


@pytest.mark.parametrize("alias", FAMILIES)
@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_every_family_keeps_the_calls_before_the_cut(alias, data):
    """Property: the calls a family's model completed, then a cut anywhere inside the next one."""
    writer = WRITERS[alias]
    n = min(writer.max_calls, 2)
    done, more = writer.write_calls(CALLS[:n], 0), writer.write_calls(CALLS[: n + 1], 0)
    if writer.max_calls == 1:  # one call per turn (Llama 3.1): the model goes on with another
        more = done + "\n" + writer.write_calls(CALLS[n : n + 1], 0)
    shared = next((i for i, (x, y) in enumerate(zip(done, more, strict=False)) if x != y), len(done))
    # inside the next call: within the first half of what it adds (its closing marker is later)
    cut = data.draw(st.integers(shared + 3, shared + (len(more) - len(done)) // 2), label="cut")
    text = ("R</think>\n\n" if writer.think else "") + more[:cut]
    gw, result = one_turn(alias, _length(text))
    assert [(c.name, c.arguments) for c in result.tool_calls] == CALLS[:n]
    assert result.finish_reason == "tool_calls" and result.tail_start is not None
    assert 0 < result.tail_start <= len(gw.trajectory("s").turns[0].output_ids)


def test_the_strands_provider_runs_the_calls_of_a_cut_turn(qwen3):
    """On main the agent stopped with MaxTokensReachedException and ran no call."""
    gw = gateway(qwen3, [_length(CUT), {"text": "3 and 7.<|im_end|>"}])
    agent = Agent(
        model=ARTModel(gateway=gw, session_id="s"),
        tools=[add],
        callback_handler=None,
        conversation_manager=NullConversationManager(),
    )
    result = agent("Add 1+2 and 3+4.")
    assert "3 and 7." in str(result)
    traj = gw.trajectory("s")
    assert len(traj.turns) == 2
    results = [m for m in traj.turns[1].messages if m["role"] == "tool"]
    assert [m["content"] for m in results] == ["3", "7"]


async def test_the_http_front_returns_the_calls_of_a_cut_turn(qwen3):
    gw = gateway(qwen3, [_length(CUT)])
    gw.open_session("r")
    async with running_front(gw) as base, httpx.AsyncClient(base_url=base) as http:
        r = await http.post("/rollouts/r/v1/chat/completions", json={"messages": USER, "tools": TOOLS})
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    args = [json.loads(c["function"]["arguments"]) for c in choice["message"]["tool_calls"]]
    assert args == [{"a": 1, "b": 2}, {"a": 3, "b": 4}]


def test_a_bare_json_turn_cut_inside_its_next_call_keeps_its_complete_calls():
    """The recorded turn (Qwen2.5-Coder-0.5B, the r2 seed experiments): 7 bare JSON calls, then
    ``{"name": "file_editor", "arguments": {"`` at the 512-token limit. The parser kept that tail
    as the turn's content and the cut found an empty tail (``[512, 512]``), so the broken call
    went into the history and was trained; 58 turns of the r2 runs, both capture modes. Now the
    unclosed bare call makes the whole output ill-formed and the cut keeps the 7 calls."""
    rec, tok, gw, result = replay_recorded_turn(BARE)
    assert result.finish_reason == "tool_calls" and not result.ill_formed and len(result.tool_calls) == 7
    assert result.text == ""  # no broken call left as content
    traj = gw.trajectory("r")
    [event] = [e for e in traj.events if e["kind"] == "length_cut_at_calls"]
    start, end = event["tail"]
    assert (
        end == 512
        and start < end
        and tok.decode(rec["output_ids"][start:]).strip() == ('{"name": "file_editor", "arguments": {"')
    )
    assert event["problems"] == [
        "bare tool call 8: invalid JSON after 7 complete call(s) (Unterminated string starting at; output cut off?)"
    ]
    [row] = traj.rows
    assert sum(row.loss_mask) == 512  # every sampled token kept in the row; the trainer masks the tail
