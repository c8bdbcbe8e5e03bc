"""Real clients against the HTTP front: the OpenAI SDK (sync, async, streaming), LiteLLM and
Strands' own OpenAIModel each run the same 3-turn tool loop, and the rows must equal those of
the conversation through ARTModel in-process (same prompt IDs, same rows)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import httpx
import openai
import pytest
from support.serve_helpers import (
    QUESTION,
    ROLLOUT,
    SYSTEM,
    TOOLS,
    gateway,
    reference_rows,
    run_agent,
    run_tool,
    running_front,
    summary,
)

TOKEN = "test-token-123"


@pytest.fixture(scope="module")
def reference(qwen3):
    return asyncio.run(reference_rows(qwen3))


async def _open_and_close(base: str, run) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=base, headers=headers) as http:
        r = await http.post("/sessions", json={"rollout_id": ROLLOUT, "group_id": "task-a"})
        assert r.status_code == 201, r.text
        await run()
        r = await http.post(f"/sessions/{ROLLOUT}/close", json={"reward": 1.0})
        assert r.status_code == 200, r.text
        return r.json()


def _openai_loop_sync(client: openai.OpenAI) -> list[str]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": QUESTION},
    ]
    finishes = []
    for _ in range(3):
        choice = client.chat.completions.create(model="policy", messages=messages, tools=TOOLS).choices[0]
        finishes.append(choice.finish_reason)
        messages.append(choice.message.model_dump(exclude_none=True))
        for call in choice.message.tool_calls or []:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": run_tool(call.function.name, call.function.arguments),
                }
            )
    assert messages[-1]["content"] == "17 + 25 + 8 = 50."
    return finishes


async def test_openai_sdk_sync_matches_in_process(qwen3, reference):
    async with running_front(gateway(qwen3), api_key=TOKEN) as base:
        client = openai.OpenAI(base_url=f"{base}/rollouts/{ROLLOUT}/v1", api_key=TOKEN, max_retries=0)
        finishes = []

        async def run():
            finishes.extend(await asyncio.to_thread(_openai_loop_sync, client))

        traj = await _open_and_close(base, run)
    assert finishes == ["tool_calls", "tool_calls", "stop"]
    assert summary(traj) == reference
    assert traj["reward"] == 1.0 and traj["group_id"] == "task-a" and len(traj["rows"]) == 1
    assert [e["code"] for e in traj["events"] if e["kind"] == "rewrite"] == []


@pytest.mark.parametrize("mode", ["tree", "linear"])
async def test_openai_sdk_async_by_header_matches_in_process(qwen3, reference, mode):
    if mode == "linear":
        reference = await reference_rows(qwen3, history_mode="linear")
    async with running_front(gateway(qwen3, history_mode=mode), api_key=TOKEN) as base:
        client = openai.AsyncOpenAI(
            base_url=f"{base}/v1", api_key=TOKEN, max_retries=0, default_headers={"X-Rollout-Id": ROLLOUT}
        )

        async def run():
            messages: list[Any] = [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": QUESTION},
            ]
            for _ in range(3):
                resp = await client.chat.completions.create(model="policy", messages=messages, tools=TOOLS)
                message = resp.choices[0].message
                assert resp.usage.completion_tokens > 0
                # what many harnesses do: keep only the standard fields, content None with tool calls
                messages.append(
                    {"role": "assistant", "content": message.content, "tool_calls": message.tool_calls}
                    if message.tool_calls
                    else {"role": "assistant", "content": message.content}
                )
                for call in message.tool_calls or []:
                    out = run_tool(call.function.name, call.function.arguments)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": out})
            await client.close()

        traj = await _open_and_close(base, run)
    assert summary(traj) == reference


async def test_openai_sdk_streaming_by_user_field_matches_in_process(qwen3, reference):
    async with running_front(gateway(qwen3), api_key=TOKEN) as base:
        client = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=TOKEN, max_retries=0)
        usage_seen = []

        async def run():
            messages: list[Any] = [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": QUESTION},
            ]
            for _ in range(3):
                stream = await client.chat.completions.create(
                    model="policy",
                    messages=messages,
                    tools=TOOLS,
                    stream=True,
                    stream_options={"include_usage": True},
                    user=ROLLOUT,
                )
                text, calls, finish = "", {}, None
                async for chunk in stream:
                    if chunk.usage:
                        usage_seen.append(chunk.usage.total_tokens)
                    for choice in chunk.choices:
                        text += choice.delta.content or ""
                        finish = choice.finish_reason or finish
                        for tc in choice.delta.tool_calls or []:
                            entry = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                            entry["id"] += tc.id or ""
                            entry["name"] += tc.function.name or ""
                            entry["arguments"] += tc.function.arguments or ""
                assert finish == ("tool_calls" if calls else "stop")
                tool_calls = [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": c["arguments"]},
                    }
                    for c in calls.values()
                ]
                messages.append(
                    {"role": "assistant", "content": text, **({"tool_calls": tool_calls} if calls else {})}
                )
                for c in calls.values():
                    messages.append(
                        {
                            "role": "tool",
                            "tool_call_id": c["id"],
                            "content": run_tool(c["name"], c["arguments"]),
                        }
                    )
            assert text == "17 + 25 + 8 = 50."
            await client.close()

        traj = await _open_and_close(base, run)
    assert summary(traj) == reference
    assert len(usage_seen) == 3 and all(n > 0 for n in usage_seen)


async def test_litellm_openai_provider_matches_in_process(qwen3, reference):
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm

    async with running_front(gateway(qwen3), api_key=TOKEN) as base:

        async def run():
            messages: list[Any] = [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": QUESTION},
            ]
            for _ in range(3):
                resp = await litellm.acompletion(
                    model="openai/policy",
                    api_base=f"{base}/rollouts/{ROLLOUT}/v1",
                    api_key=TOKEN,
                    messages=messages,
                    tools=TOOLS,
                    num_retries=0,
                )
                message = resp.choices[0].message
                messages.append(message.model_dump(exclude_none=True))
                for call in message.tool_calls or []:
                    out = run_tool(call.function.name, call.function.arguments)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": out})
            assert messages[-1]["content"] == "17 + 25 + 8 = 50."

        traj = await _open_and_close(base, run)
    assert summary(traj) == reference


async def test_strands_openai_model_matches_in_process(qwen3, reference):
    from strands.models.openai import OpenAIModel

    async with running_front(gateway(qwen3), api_key=TOKEN) as base:

        async def run():
            model = OpenAIModel(
                client_args={"base_url": f"{base}/rollouts/{ROLLOUT}/v1", "api_key": TOKEN, "max_retries": 0},
                model_id="policy",
            )
            await run_agent(model)

        traj = await _open_and_close(base, run)
    assert summary(traj) == reference
    assert len(traj["turns"]) == 3 and len(traj["rows"]) == 1
