"""The 3-turn tool conversation of tests/support/serve_helpers.py as the official SDKs of each
protocol run it against the front: Anthropic Messages (``anthropic``) and the Responses API
(``openai``), streaming or not."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai

from .serve_helpers import QUESTION, SYSTEM, TOOLS, run_tool

ANTHROPIC_TOOLS = [
    {
        "name": t["function"]["name"],
        "description": t["function"]["description"],
        "input_schema": t["function"]["parameters"],
    }
    for t in TOOLS
]
RESPONSES_TOOLS = [{"type": "function", **t["function"]} for t in TOOLS]


async def anthropic_loop(client: anthropic.AsyncAnthropic, stream: bool, turns: int = 3) -> list[Any]:
    """Run the conversation; returns the response messages (the last one answers)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    answers = []
    for _ in range(turns):
        kwargs = {
            "model": "policy",
            "max_tokens": 1024,
            "system": SYSTEM,
            "messages": messages,
            "tools": ANTHROPIC_TOOLS,
        }
        if stream:
            async with client.messages.stream(**kwargs) as events:
                message = await events.get_final_message()
        else:
            message = await client.messages.create(**kwargs)
        answers.append(message)
        messages.append(
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]}
        )
        results = [
            {"type": "tool_result", "tool_use_id": b.id, "content": run_tool(b.name, json.dumps(b.input))}
            for b in message.content
            if b.type == "tool_use"
        ]
        if results:
            messages.append({"role": "user", "content": results})
    return answers


async def responses_loop(
    client: openai.AsyncOpenAI,
    stream: bool,
    *,
    chained: bool = False,
    reserialize: bool = False,
    turns: int = 3,
) -> list[Any]:
    """Run the conversation with the Responses API; ``chained``: send only the new items with
    ``previous_response_id``; ``reserialize``: send the calls' arguments back re-serialized
    (``json.dumps(json.loads(...))``, as harnesses that parse them do). Returns the responses."""
    history: list[Any] = [{"role": "user", "content": QUESTION}]
    new: list[Any] = list(history)
    previous = None
    answers = []
    for _ in range(turns):
        kwargs: dict[str, Any] = {"model": "policy", "instructions": SYSTEM, "tools": RESPONSES_TOOLS}
        kwargs["input"] = new if chained else history
        if chained and previous is not None:
            kwargs["previous_response_id"] = previous
        if stream:
            response = None
            async for event in await client.responses.create(stream=True, **kwargs):
                if event.type in ("response.completed", "response.incomplete"):
                    response = event.response
            assert response is not None
        else:
            response = await client.responses.create(**kwargs)
        answers.append(response)
        previous = response.id
        produced = [item.model_dump(exclude_none=True) for item in response.output]
        if reserialize:
            for item in produced:
                if item["type"] == "function_call":
                    item["arguments"] = json.dumps(json.loads(item["arguments"]))
        outputs = [
            {
                "type": "function_call_output",
                "call_id": i["call_id"],
                "output": run_tool(i["name"], i["arguments"]),
            }
            for i in produced
            if i["type"] == "function_call"
        ]
        history += produced + outputs
        new = outputs
    return answers
