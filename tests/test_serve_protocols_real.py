"""Anthropic Messages and the Responses API on a real model: the official SDKs drive a tool loop
against the front on llama.cpp with the Qwen2.5-Coder-0.5B-Instruct GGUF (the model
tests/test_llamacpp_backend.py loads), in linear mode, streaming (Anthropic) and not (Responses). The same conversation
sent through Chat Completions (the OpenAI SDK, the model's samples played back token for token
by the scripted backend) gives the same prompts and rows, token for token; the rollout stays one
row although the harness re-serializes tool inputs."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anthropic
import httpx
import openai
import pytest
from support.serve_helpers import running_front, summary

from strands_art.backends import SamplingParams, make_backend
from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.registry import load_tokenizer
from strands_art.rowcheck import row_problems
from strands_art.training.grpo import rows_as_trained

MODEL = "qwen2.5-coder-0.5b"
SYSTEM = "Use the add tool to add numbers, then answer in one short sentence."
QUESTION = "What is 17 plus 25?"
TURNS = 3
SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
}
CHAT_TOOLS = [
    {"type": "function", "function": {"name": "add", "description": "Add two numbers.", "parameters": SCHEMA}}
]


def run_tool(name: str, args: Any) -> str:
    """The tool, total on whatever a small model writes."""
    try:
        args = json.loads(args) if isinstance(args, str) else args
        return str(float(args["a"]) + float(args["b"])) if name == "add" else f"Error: no tool {name!r}"
    except (ValueError, KeyError, TypeError) as exc:
        return f"Error: {type(exc).__name__}"


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(MODEL)


@pytest.fixture(scope="module")
def backend():
    b = make_backend("llamacpp", model=MODEL, context_tokens=1024, parallel=1, threads=2)
    yield b
    asyncio.run(b.aclose())


def _gateway(tok, backend) -> RolloutGateway:
    gw = RolloutGateway(tok, backend, history_mode="linear")
    gw.open_session("r", "g", SamplingParams(temperature=0.7, max_new_tokens=48, seed=3))
    return gw


async def _anthropic_loop(base: str, stream: bool) -> None:
    tools = [{"name": "add", "description": "Add two numbers.", "input_schema": SCHEMA}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    async with anthropic.AsyncAnthropic(base_url=f"{base}/rollouts/r", api_key="k", max_retries=0) as client:
        for _ in range(TURNS):
            kwargs = {"model": "m", "max_tokens": 48, "system": SYSTEM, "messages": messages, "tools": tools}
            if stream:
                async with client.messages.stream(**kwargs) as events:
                    reply = await events.get_final_message()
            else:
                reply = await client.messages.create(**kwargs)
            messages.append(
                {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]}
            )
            calls = [b for b in reply.content if b.type == "tool_use"]
            if not calls:
                return
            results = [
                {"type": "tool_result", "tool_use_id": c.id, "content": run_tool(c.name, c.input)}
                for c in calls
            ]
            messages.append({"role": "user", "content": results})


async def _responses_loop(base: str, stream: bool) -> None:
    tools = [{"type": "function", **CHAT_TOOLS[0]["function"]}]
    items: list[Any] = [{"role": "user", "content": QUESTION}]
    async with openai.AsyncOpenAI(base_url=f"{base}/rollouts/r/v1", api_key="k", max_retries=0) as client:
        for _ in range(TURNS):
            kwargs = {"model": "m", "instructions": SYSTEM, "input": items, "tools": tools, "store": False}
            if stream:
                reply = None
                async for event in await client.responses.create(stream=True, **kwargs):
                    if event.type in ("response.completed", "response.incomplete"):
                        reply = event.response
                assert reply is not None
            else:
                reply = await client.responses.create(**kwargs)
            produced = [i.model_dump(exclude_none=True) for i in reply.output]
            calls = [i for i in produced if i["type"] == "function_call"]
            for call in calls:  # what harnesses that parse the arguments send back
                try:
                    call["arguments"] = json.dumps(json.loads(call["arguments"]))
                except ValueError:
                    pass
            items += produced
            if not calls:
                return
            items += [
                {
                    "type": "function_call_output",
                    "call_id": c["call_id"],
                    "output": run_tool(c["name"], c["arguments"]),
                }
                for c in calls
            ]


async def _chat_replay(tok, traj) -> dict[str, Any]:
    """The same conversation through Chat Completions: the model's samples played back."""
    script = [{"token_ids": t.output_ids, "logprobs": t.logprobs} for t in traj.turns]
    gw = RolloutGateway(tok, ScriptedBackend(tok, script), history_mode="linear")
    gw.open_session("r", "g", SamplingParams(temperature=0.7, max_new_tokens=48, seed=3))
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    async with running_front(gw) as base:
        async with openai.AsyncOpenAI(base_url=f"{base}/rollouts/r/v1", api_key="k", max_retries=0) as client:
            for _ in range(len(script)):
                message = (
                    (await client.chat.completions.create(model="m", messages=messages, tools=CHAT_TOOLS))
                    .choices[0]
                    .message
                )
                messages.append(message.model_dump(exclude_none=True))
                for call in message.tool_calls or []:
                    out = run_tool(call.function.name, call.function.arguments)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": out})
        async with httpx.AsyncClient(base_url=base) as http:
            return (await http.post("/sessions/r/close", json={})).json()


# one streaming and one plain loop on the real model (all four pass: 9 min on 2 loaded cores,
# so CI runs two); tests/test_serve_protocols.py runs every combination on the scripted backend
@pytest.mark.parametrize(("protocol", "stream"), [("anthropic", True), ("responses", False)])
def test_real_model_tool_loop_equals_chat_completions(tok, backend, protocol, stream):
    async def go():
        gw = _gateway(tok, backend)
        async with running_front(gw) as base:
            await (_anthropic_loop if protocol == "anthropic" else _responses_loop)(base, stream)
        traj = gw.close_session("r")
        return traj, await _chat_replay(tok, traj)

    traj, chat = asyncio.run(go())
    assert traj.turns and row_problems(traj) == []
    # the front serves rows with the loss mask GRPO trains (a turn the 48-token limit cut is 0)
    trained = {**traj.to_dict(), "rows": [r.to_dict() for r in rows_as_trained(traj.rows)]}
    assert summary(trained) == summary(chat)  # prompts and rows, token for token
    resets = [e for e in traj.events if e["kind"] in ("reset", "linear_disabled")]
    assert resets == [] and len(traj.rows) == 1
