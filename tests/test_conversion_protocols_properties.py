"""Property: one conversation written in Chat Completions, Anthropic Messages or the Responses
API gives the gateway the same prompt, token for token (strands_art/conversion/anthropic.py,
responses.py, then the chat path), for any mix of reasoning, text, parallel tool calls, tool
results and user turns, on the real Qwen3 tokenizer and chat template."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strands_art.backends.scripted import ScriptedBackend
from strands_art.conversion.anthropic import anthropic_messages, anthropic_tools
from strands_art.conversion.responses import responses_messages, responses_tools
from strands_art.gateway import RolloutGateway
from strands_art.serve.fronts import converted

SYSTEM = "You add numbers."
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
CHAT_TOOLS = [{"type": "function", "function": {"name": "add", "description": "Add.", "parameters": SCHEMA}}]

words = st.text(st.sampled_from("abc xyz 123 \n"), min_size=1, max_size=12).map(str.strip).filter(bool)
turn = st.fixed_dictionaries(
    {
        "user": words,
        "reasoning": st.none() | words,
        "text": words,
        "calls": st.lists(
            st.fixed_dictionaries({"a": st.integers(0, 99), "b": st.integers(0, 99)}), max_size=2
        ),
    }
)


def chat_form(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    n = 0
    for t in turns:
        out.append({"role": "user", "content": t["user"]})
        message: dict[str, Any] = {"role": "assistant", "content": t["text"]}
        if t["reasoning"]:
            message["reasoning_content"] = t["reasoning"]
        ids = [f"call_{n + k}" for k in range(len(t["calls"]))]
        n += len(ids)
        if t["calls"]:
            message["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": "add", "arguments": json.dumps(c)}}
                for i, c in zip(ids, t["calls"], strict=True)
            ]
        out.append(message)
        out += [
            {"role": "tool", "tool_call_id": i, "content": str(c["a"] + c["b"])}
            for i, c in zip(ids, t["calls"], strict=True)
        ]
    out.append({"role": "user", "content": "and now?"})
    return out


def anthropic_form(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []  # tool results go first in the next user message
    n = 0
    for t in turns:
        messages.append({"role": "user", "content": [*pending, {"type": "text", "text": t["user"]}]})
        blocks: list[dict[str, Any]] = []
        if t["reasoning"]:
            blocks.append({"type": "thinking", "thinking": t["reasoning"], "signature": ""})
        blocks.append({"type": "text", "text": t["text"]})
        ids = [f"call_{n + k}" for k in range(len(t["calls"]))]
        n += len(ids)
        blocks += [
            {"type": "tool_use", "id": i, "name": "add", "input": c}
            for i, c in zip(ids, t["calls"], strict=True)
        ]
        messages.append({"role": "assistant", "content": blocks})
        pending = [
            {"type": "tool_result", "tool_use_id": i, "content": str(c["a"] + c["b"])}
            for i, c in zip(ids, t["calls"], strict=True)
        ]
    messages.append({"role": "user", "content": [*pending, {"type": "text", "text": "and now?"}]})
    return messages


def responses_form(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    n = 0
    for t in turns:
        items.append({"role": "user", "content": t["user"]})
        if t["reasoning"]:
            items.append(
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [],
                    "content": [{"type": "reasoning_text", "text": t["reasoning"]}],
                }
            )
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": t["text"], "annotations": []}],
            }
        )
        ids = [f"call_{n + k}" for k in range(len(t["calls"]))]
        n += len(ids)
        items += [
            {"type": "function_call", "call_id": i, "name": "add", "arguments": json.dumps(c)}
            for i, c in zip(ids, t["calls"], strict=True)
        ]
        items += [
            {"type": "function_call_output", "call_id": i, "output": str(c["a"] + c["b"])}
            for i, c in zip(ids, t["calls"], strict=True)
        ]
    items.append({"role": "user", "content": "and now?"})
    return items


_GATEWAYS: dict[int, RolloutGateway] = {}


def _prompt(tok: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
    """The prompt IDs the gateway sends the backend for ``messages`` (a fresh session each time)."""
    gw = _GATEWAYS.get(id(tok))
    if gw is None:
        gw = _GATEWAYS[id(tok)] = RolloutGateway(
            tok, ScriptedBackend(tok, lambda p, s, i: {"text": "ok<|im_end|>"})
        )
    rid = gw.open_session()
    asyncio.run(gw.generate(rid, messages, tools))
    gw.close_session(rid)
    return gw.backend.prompts.pop()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.lists(turn, min_size=1, max_size=3))
def test_the_same_conversation_renders_the_same_prompt_in_every_protocol(qwen3, turns):
    chat = [i.message for i in converted(chat_form(turns), [[]] * 99, ["x"] * 99, None, "tool_call_id")]
    anthropic = [
        i.message for i in converted(*anthropic_messages(SYSTEM, anthropic_form(turns)), None, "tool_use_id")
    ]
    responses = [
        i.message for i in converted(*responses_messages(SYSTEM, responses_form(turns)), None, "call_id")
    ]
    assert anthropic_tools([{"name": "add", "description": "Add.", "input_schema": SCHEMA}]) == CHAT_TOOLS
    assert responses_tools([{"type": "function", **CHAT_TOOLS[0]["function"]}]) == CHAT_TOOLS
    reference = _prompt(qwen3, chat, CHAT_TOOLS)
    assert _prompt(qwen3, anthropic, CHAT_TOOLS) == reference
    assert _prompt(qwen3, responses, CHAT_TOOLS) == reference
