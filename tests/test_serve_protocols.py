"""Anthropic Messages and the Responses API on the front, with the official SDKs (``anthropic``,
``openai``) on the scripted backend: the 3-turn tool loop of tests/test_serve_clients.py gives
the same prompt IDs and rows as the conversation through ARTModel in-process (which the Chat
Completions front matches too), streaming or not; linear mode keeps one row when the harness
re-serializes tool inputs; a malformed request gets the protocol's error shape and records
nothing; every field of each SDK's request type is placed in the front's table."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anthropic
import httpx
import openai
import pytest
from anthropic.types import message_create_params
from openai.types.responses import response_create_params
from support.protocol_loops import ANTHROPIC_TOOLS, RESPONSES_TOOLS, anthropic_loop, responses_loop
from support.serve_helpers import (
    QUESTION,
    ROLLOUT,
    SCRIPT,
    SYSTEM,
    TOOLS,
    gateway,
    reference_rows,
    run_tool,
    running_front,
    summary,
)

from strands_art.backends.base import BackendContextOverflow
from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.serve import anthropic_wire, responses_wire

TOKEN = "test-token-123"


async def _chat_rows(qwen3, **config: Any):
    """The conversation through the Chat Completions front (the OpenAI SDK): its prompts and rows."""
    async with running_front(gateway(qwen3, **config), api_key=TOKEN) as base:

        async def run():
            async with _openai(base) as client:
                messages: list[Any] = [
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": QUESTION},
                ]
                for _ in range(3):
                    message = (
                        (await client.chat.completions.create(model="policy", messages=messages, tools=TOOLS))
                        .choices[0]
                        .message
                    )
                    messages.append(message.model_dump(exclude_none=True))
                    for call in message.tool_calls or []:
                        out = run_tool(call.function.name, call.function.arguments)
                        messages.append({"role": "tool", "tool_call_id": call.id, "content": out})

        return summary(await _session(base, run))


@pytest.fixture(scope="module")
def reference(qwen3):
    """The rows of the conversation through Chat Completions, which equal those through
    ARTModel in-process (tests/test_serve_clients.py)."""
    chat = asyncio.run(_chat_rows(qwen3))
    assert chat == asyncio.run(reference_rows(qwen3))
    return chat


async def _session(base: str, run, rollout: str = ROLLOUT) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=base, headers=headers) as http:
        assert (
            await http.post("/sessions", json={"rollout_id": rollout, "group_id": "task-a"})
        ).status_code == 201
        await run()
        r = await http.post(f"/sessions/{rollout}/close", json={"reward": 1.0})
        assert r.status_code == 200, r.text
        return r.json()


def _anthropic(base: str, rollout: str = ROLLOUT) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=f"{base}/rollouts/{rollout}", api_key=TOKEN, max_retries=0)


def _openai(base: str, rollout: str = ROLLOUT) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{base}/rollouts/{rollout}/v1", api_key=TOKEN, max_retries=0)


@pytest.mark.parametrize("stream", [False, True])
async def test_anthropic_sdk_tool_loop_matches_chat_completions(qwen3, reference, stream):
    answers = []
    async with running_front(gateway(qwen3), api_key=TOKEN) as base:

        async def run():
            async with _anthropic(base) as client:
                answers.extend(await anthropic_loop(client, stream))

        traj = await _session(base, run)
    assert [a.stop_reason for a in answers] == ["tool_use", "tool_use", "end_turn"]
    assert answers[-1].content[-1].text == "17 + 25 + 8 = 50."
    assert [b.type for b in answers[1].content] == ["thinking", "tool_use"]
    assert answers[1].content[0].thinking == "now add 8"
    assert answers[0].content[0].input == {"a": 17, "b": 25}
    assert answers[0].usage.input_tokens == len(traj["turns"][0]["prompt_ids"])
    assert answers[0].usage.output_tokens == len(traj["turns"][0]["output_ids"])
    assert summary(traj) == reference and len(traj["rows"]) == 1
    assert [e for e in traj["events"] if e["kind"] in ("rewrite", "fork", "reset")] == []


@pytest.mark.parametrize(("stream", "chained"), [(False, False), (True, False), (False, True), (True, True)])
async def test_responses_sdk_tool_loop_matches_chat_completions(qwen3, reference, stream, chained):
    answers = []
    async with running_front(gateway(qwen3), api_key=TOKEN) as base:

        async def run():
            async with _openai(base) as client:
                answers.extend(await responses_loop(client, stream, chained=chained))

        traj = await _session(base, run)
    assert [[i.type for i in a.output] for a in answers] == [
        ["function_call"],
        ["reasoning", "function_call"],
        ["message"],
    ]
    assert answers[-1].output_text == "17 + 25 + 8 = 50." and answers[-1].status == "completed"
    assert answers[1].output[0].content[0].text == "now add 8"
    assert answers[0].usage.input_tokens == len(traj["turns"][0]["prompt_ids"])
    assert summary(traj) == reference and len(traj["rows"]) == 1
    assert [e for e in traj["events"] if e["kind"] in ("rewrite", "fork", "reset")] == []


@pytest.mark.parametrize("protocol", ["anthropic", "responses"])
async def test_linear_mode_keeps_one_row_when_tool_inputs_are_reserialized(qwen3, protocol):
    """The first call's arguments were sampled compact (``{"a":17,"b":25}``); Anthropic clients
    send the input back as an object and Responses harnesses re-serialize the string: the
    conversion maps both back to what was sampled, so the row is never reset."""
    reference = await _chat_rows(qwen3, history_mode="linear")
    async with running_front(gateway(qwen3, history_mode="linear"), api_key=TOKEN) as base:

        async def run():
            if protocol == "anthropic":
                async with _anthropic(base) as client:
                    await anthropic_loop(client, False)
            else:
                async with _openai(base) as client:
                    await responses_loop(client, False, reserialize=True)

        traj = await _session(base, run)
    assert len(traj["rows"]) == 1 and summary(traj) == reference
    assert [e for e in traj["events"] if e["kind"] in ("reset", "linear_disabled", "fork")] == []


async def _nothing_recorded(base: str, rollout: str) -> None:
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        traj = (await http.get(f"/sessions/{rollout}/trajectory")).json()
    assert traj["turns"] == [] and traj["rows"] == [] and traj["events"] == []


async def test_malformed_anthropic_request_gets_anthropics_error_and_records_nothing(qwen3):
    async with running_front(gateway(qwen3), api_key=TOKEN) as base:
        async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            await http.post("/sessions", json={"rollout_id": "bad"})
        client = _anthropic(base, "bad")  # closed with the loop: a short test
        orphan = [
            {"role": "user", "content": QUESTION},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"}]},
        ]
        bad_block = [{"role": "user", "content": [{"type": "text"}]}]
        for messages, field in ((bad_block, "messages.0.content.0"), (orphan, "messages.1")):
            with pytest.raises(anthropic.BadRequestError) as info:
                await client.messages.create(
                    model="m", max_tokens=10, messages=messages, tools=ANTHROPIC_TOOLS
                )
            body = info.value.body
            assert info.value.status_code == 400 and body["type"] == "error"
            assert body["error"]["type"] == "invalid_request_error" and field in body["error"]["message"]
            assert "tool_call_id" not in body["error"]["message"]  # Chat Completions' word
        assert "tool_use_id 'toolu_1'" in str(info.value)  # the orphan, Anthropic's word for its id
        with pytest.raises(anthropic.BadRequestError) as info:  # two tools under one name
            await client.messages.create(
                model="m",
                max_tokens=10,
                messages=bad_block[:0] or [{"role": "user", "content": "hi"}],
                tools=ANTHROPIC_TOOLS * 2,
            )
        assert "'add'" in info.value.body["error"]["message"]
        async with httpx.AsyncClient(base_url=base, headers={"x-api-key": TOKEN}) as http:
            r = await http.post(
                "/rollouts/bad/v1/messages",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            )
            assert r.status_code == 400
            assert r.json() == {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "max_tokens: a positive integer is required",
                },
            }
            r = await http.post(
                "/rollouts/nobody/v1/messages",
                json={"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
            )
            assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
        await _nothing_recorded(base, "bad")


async def test_malformed_responses_request_gets_openais_error_and_records_nothing(qwen3):
    async with running_front(gateway(qwen3), api_key=TOKEN) as base:
        async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            await http.post("/sessions", json={"rollout_id": "bad"})
        client = _openai(base, "bad")
        cases = [
            ({"input": ""}, "input"),
            ({"input": []}, "input"),
            ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type"),
            ({"input": [{"type": "function_call_output", "call_id": "c1", "output": "1"}]}, "input[0]"),
            ({"input": "hi", "previous_response_id": "resp_nope"}, "previous_response_id"),
            ({"input": "hi", "tools": RESPONSES_TOOLS * 2}, "tools"),
            ({"input": "hi", "tools": [{"type": "web_search"}]}, "tools[0]"),
            ({"input": "hi", "background": True}, "background"),
        ]
        for kwargs, param in cases:
            with pytest.raises(openai.BadRequestError) as info:
                await client.responses.create(model="m", **kwargs)
            assert info.value.status_code == 400 and info.value.param == param, (kwargs, info.value.body)
            assert info.value.body["type"] == "invalid_request_error"
            assert "tool_call_id" not in info.value.message  # Chat Completions' word
            if "function_call_output" in str(kwargs):
                assert "call_id 'c1'" in info.value.message
        await _nothing_recorded(base, "bad")


class OverflowsLate(ScriptedBackend):
    """The backend's own context overflow, after a stream's headers went out."""

    async def sample(self, prompt_ids, params, **kw):
        await asyncio.sleep(0.6)
        raise BackendContextOverflow("too long", prompt_tokens=len(prompt_ids), context_tokens=16)


@pytest.mark.parametrize("late", [False, True])
@pytest.mark.parametrize("stream", [False, True])
async def test_a_responses_context_overflow_names_input(qwen3, stream, late):
    """The Responses API's conversation is ``input``: its overflow names that param, not Chat
    Completions' ``messages`` (before or after the stream's headers went out)."""
    if late:
        gw = RolloutGateway(qwen3, OverflowsLate(qwen3, []))
    else:
        gw = gateway(qwen3, max_context_tokens=16)
    gw.open_session("r")
    body = {"model": "m", "input": QUESTION, "stream": stream}
    async with running_front(gw) as base, httpx.AsyncClient(base_url=base, timeout=30) as http:
        r = await http.post("/rollouts/r/v1/responses", json=body)
    if stream and late:
        error = json.loads(r.text.split("event: error\ndata: ")[1].split("\n")[0])
    else:
        assert r.status_code == 400, r.text
        error = r.json()["error"]
    assert error["code"] == "context_length_exceeded" and error["param"] == "input", error
    assert "messages" not in error["message"] and "input" in error["message"]
    assert gw.trajectory("r").turns == []


async def test_ignored_fields_are_recorded_per_protocol(qwen3):
    async with running_front(gateway(qwen3), api_key=TOKEN) as base:

        async def run():
            async with _anthropic(base) as client:
                await client.messages.create(
                    model="m",
                    max_tokens=64,
                    messages=[{"role": "user", "content": QUESTION}],
                    tools=ANTHROPIC_TOOLS,
                    tool_choice={"type": "any"},
                    thinking={"type": "enabled", "budget_tokens": 1024},
                    metadata={"user_id": "u-1"},
                )

        traj = await _session(base, run)
    kinds = {(e["kind"], e.get("field")) for e in traj["events"]}
    assert {("tool_choice_ignored", "tool_choice"), ("request_field_ignored", "thinking")} <= kinds
    assert ("request_field_ignored", "metadata") in kinds and ("sampling_override_ignored", None) in kinds
    assert "max_tokens" in next(
        e["reason"] for e in traj["events"] if e["kind"] == "sampling_override_ignored"
    )


#: per protocol: (path, body) of one turn whose output cap is the trainer's limit or above
CAPS = {
    "anthropic": ("messages", {"max_tokens": 512, "messages": [{"role": "user", "content": QUESTION}]}),
    "anthropic-above": (
        "messages",
        {"max_tokens": 8192, "messages": [{"role": "user", "content": QUESTION}]},
    ),
    "chat": ("chat/completions", {"max_tokens": 512, "messages": [{"role": "user", "content": QUESTION}]}),
    "chat-completion": (
        "chat/completions",
        {"max_completion_tokens": 4096, "messages": [{"role": "user", "content": QUESTION}]},
    ),
    "responses": ("responses", {"max_output_tokens": 600, "input": QUESTION}),
}


@pytest.mark.parametrize("mode", ["ignore", "reject"])
@pytest.mark.parametrize("case", sorted(CAPS))
async def test_an_output_cap_at_or_above_the_trainers_limit_is_no_override(qwen3, case, mode, caplog):
    """Anthropic requires ``max_tokens``: a cap at or above the trainer's limit (512, the default
    ``max_new_tokens``) asks for nothing the trainer does not do, so it is accepted silently in
    every mode and protocol (no event, no warning); a lower one would cut turns short: an
    override (an event, or a 400 under ``reject``)."""
    gw = gateway(qwen3, [{"text": "Fifty.<|im_end|>"}], on_sampling_override=mode)
    gw.open_session("r")
    path, body = CAPS[case]
    async with running_front(gw) as base, httpx.AsyncClient(base_url=base) as http:
        r = await http.post(f"/rollouts/r/v1/{path}", json={"model": "m", **body})
        assert r.status_code == 200, r.text
        assert gw.trajectory("r").events == [] and len(gw.trajectory("r").turns) == 1
        assert "overrides" not in caplog.text
        if mode == "reject":
            lower = {k: (511 if k.startswith("max_") else v) for k, v in body.items()}
            gw.open_session("low")
            r = await http.post(f"/rollouts/low/v1/{path}", json={"model": "m", **lower})
            assert r.status_code == 400 and "max_" in r.text and gw.trajectory("low").turns == []


def test_every_sdk_request_field_is_placed():
    for params, table, extra in (
        (
            message_create_params.MessageCreateParamsStreaming,
            anthropic_wire.FIELDS,
            anthropic_wire.EXTRA_FIELDS,
        ),
        (
            response_create_params.ResponseCreateParamsStreaming,
            responses_wire.FIELDS,
            responses_wire.EXTRA_FIELDS,
        ),
    ):
        listed = params.__required_keys__ | params.__optional_keys__
        assert sorted(listed - set(table)) == []
        assert not set(extra) & set(table)


async def test_duplicate_tool_names_are_refused_in_chat_completions_too(qwen3):
    gw = gateway(qwen3)
    gw.open_session("r")
    async with (
        running_front(gw) as base,
        openai.AsyncOpenAI(base_url=f"{base}/rollouts/r/v1", api_key="k", max_retries=0) as client,
    ):
        other = {
            "type": "function",
            "function": {"name": "add", "description": "files", "parameters": {"type": "object"}},
        }
        with pytest.raises(openai.BadRequestError) as info:
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], tools=[*TOOLS, other]
            )
    assert info.value.code == "duplicate_tool_name" and "'add'" in info.value.message
    assert gw.backend.calls == 0 and gw.trajectory("r").events == []


async def test_close_of_a_rollout_never_opened_or_already_closed(qwen3):
    async with running_front(gateway(qwen3)) as base, httpx.AsyncClient(base_url=base) as http:
        r = await http.post("/sessions/never/close", json={"reward": 1.0})
        assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found"
        assert (await http.post("/sessions", json={"rollout_id": "once"})).status_code == 201
        assert (await http.post("/sessions/once/close", json={})).status_code == 200
        r = await http.post("/sessions/once/close", json={})
        assert r.status_code == 409 and r.json()["error"]["code"] == "session_closed"
        assert "store" not in r.json()["error"]["message"]


async def test_tool_call_ids_differ_between_rollouts(qwen3):
    """Rollout ids that share their first characters (``rollout-1``, ``rollout-2``) used to get
    the same call ids; a harness keeping results by call id mixed them up."""
    gw = gateway(qwen3, [SCRIPT[0], SCRIPT[0]])
    ids = []
    for rid in ("rollout-1", "rollout-2"):
        gw.open_session(rid)
        result = await gw.generate(rid, [{"role": "user", "content": QUESTION}], TOOLS)
        ids.append(result.tool_calls[0].id)
    assert ids[0] != ids[1]
    assert ids[0] == gw.renderer.family.call_id("rollout-1", 0, 0)  # the same on a replay


def test_served_model_name_is_the_model_served():
    from argparse import Namespace

    from strands_art.serve.cli import served_name

    args = Namespace(served_model_name=None, backend="scripted", tokenizer="qwen3", model="smollm2")
    assert served_name(args) == "scripted:qwen3"
    assert (
        served_name(
            Namespace(served_model_name=None, backend="llamacpp", tokenizer=None, model="qwen2.5-coder-1.5b")
        )
        == "qwen2.5-coder-1.5b"
    )
    assert served_name(Namespace(served_model_name="p", backend="scripted", tokenizer=None, model="x")) == "p"


@pytest.mark.parametrize("empty", ["", "  ", "\n\t ", None])
@pytest.mark.parametrize("mode", ["tree", "linear"])
async def test_every_empty_arguments_form_is_the_same_call(qwen3, empty, mode):
    """A call without arguments echoed back with ``arguments`` "", whitespace (Continue) or null:
    the same message, one row, no rewrite."""
    call = '<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call><|im_end|>'
    tools = [
        {
            "type": "function",
            "function": {
                "name": "now",
                "description": "time",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    gw = gateway(qwen3, [{"text": call}, {"text": "Noon.<|im_end|>"}], history_mode=mode)
    gw.open_session("r")
    user = {"role": "user", "content": "Time?"}
    async with (
        running_front(gw) as base,
        openai.AsyncOpenAI(base_url=f"{base}/rollouts/r/v1", api_key="k", max_retries=0) as client,
    ):
        message = (
            (await client.chat.completions.create(model="m", messages=[user], tools=tools)).choices[0].message
        )
        echoed = message.model_dump(exclude_none=True)
        echoed["tool_calls"][0]["function"]["arguments"] = empty
        result = {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "12:00"}
        await client.chat.completions.create(model="m", messages=[user, echoed, result], tools=tools)
    traj = gw.trajectory("r")
    assert len(traj.rows) == 1 and [e for e in traj.events if e["kind"] in ("rewrite", "fork", "reset")] == []
