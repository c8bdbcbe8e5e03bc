"""The HTTP front under hostile or careless input: every bad request is a 4xx in OpenAI's error
shape that names the field at fault, and loses nothing (no turn recorded, the session still
open); a session closed while one of its turns samples fails that turn instead of recording it
into a trajectory that was already handed out."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from support.serve_helpers import QUESTION, SCRIPT, SYSTEM, TOOLS, gateway, running_front

from strands_art.backends.base import SamplingParams, turn_seed
from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway, SessionClosed

FIRST = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
CHAT = "/rollouts/r/v1/chat/completions"


def with_assistant(**fields) -> list[dict]:
    return [*FIRST, {"role": "assistant", "content": "", **fields}]


BAD_MESSAGES = {
    "function is a string": (
        with_assistant(tool_calls=[{"id": "c", "type": "function", "function": "add"}]),
        "message 2: tool call 0: 'function' must be an object with 'name' and 'arguments', got str",
    ),
    "function is a list": (
        with_assistant(tool_calls=[{"id": "c", "type": "function", "function": ["add"]}]),
        "message 2: tool call 0: 'function' must be an object with 'name' and 'arguments', got list",
    ),
    "call id is a number": (
        with_assistant(tool_calls=[{"id": 5, "function": {"name": "add", "arguments": "{}"}}]),
        "message 2: tool call 0: 'id' must be a string, got int",
    ),
    "reasoning is an object": (
        with_assistant(reasoning_content={"a": 1}),
        "message 2: reasoning_content must be a string, got dict",
    ),
    "tool_call_id is a list": (
        [*FIRST, {"role": "tool", "tool_call_id": ["c"], "content": "42"}],
        "message 2: tool_call_id must be a string, got list",
    ),
    "tool name is an object": (
        [*FIRST, {"role": "tool", "tool_call_id": "c", "name": {"x": 1}, "content": "42"}],
        "message 2: name must be a string, got dict",
    ),
}


@pytest.mark.parametrize("case", list(BAD_MESSAGES))
async def test_malformed_messages_are_400_naming_the_message_and_record_nothing(qwen3, case):
    messages, message = BAD_MESSAGES[case]
    gw = gateway(qwen3)
    async with running_front(gw, auto_open=True) as base, httpx.AsyncClient(base_url=base) as http:
        r = await http.post(CHAT, json={"messages": messages, "tools": TOOLS})
        assert r.status_code == 400, r.text
        assert r.json()["error"] == {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages[2]",
            "code": "invalid_message",
        }
    assert gw.backend.calls == 0 and not gw.is_open("r")  # refused before auto-open opened it


BAD_FIELDS = {
    "stream is a string": ({"stream": "false"}, "stream", "'stream' must be true or false, got str"),
    "model is an object": ({"model": {"a": 1}}, "model", "'model' must be a string, got dict"),
    "n is true": (
        {"n": True},
        "n",
        "n=True is not supported: one sample per turn (open one session per sample)",
    ),
    "stream_options is a list": (
        {"stream": True, "stream_options": [1]},
        "stream_options",
        "'stream_options' must be an object, got list",
    ),
    "tool parameters are a string": (
        {"tools": [{"type": "function", "function": {"name": "add", "parameters": "oops"}}]},
        "tools",
        "tools[0].function.parameters must be a JSON Schema object, got str",
    ),
}


@pytest.mark.parametrize("case", list(BAD_FIELDS))
async def test_request_fields_of_the_wrong_type_are_400(qwen3, case):
    fields, param, message = BAD_FIELDS[case]
    gw = gateway(qwen3)
    async with running_front(gw, auto_open=True) as base, httpx.AsyncClient(base_url=base) as http:
        r = await http.post(CHAT, json={"messages": FIRST, **fields})
        assert r.status_code == 400, r.text
        assert r.headers["Content-Type"].startswith("application/json")  # not an SSE stream
        assert r.json()["error"]["param"] == param and r.json()["error"]["message"] == message
    assert gw.backend.calls == 0 and not gw.is_open("r")  # checked before the session is opened


async def test_deeply_nested_json_is_400_not_a_500(qwen3):
    gw = gateway(qwen3)
    async with running_front(gw, auto_open=True) as base, httpx.AsyncClient(base_url=base) as http:
        body = b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        r = await http.post(CHAT, content=body)
        assert r.status_code == 400
        assert r.json()["error"]["message"] == "the request body is nested too deeply to be read as JSON"
    assert gw.backend.calls == 0


async def test_close_rejects_a_bad_body_and_keeps_the_session_open(qwen3):
    gw = gateway(qwen3)
    async with running_front(gw) as base, httpx.AsyncClient(base_url=base) as http:
        await http.post("/sessions", json={"rollout_id": "r", "group_id": "g"})
        assert (await http.post(CHAT, json={"messages": FIRST, "tools": TOOLS})).status_code == 200
        bad = {
            b'{"rewrd": 1.0}': ("unknown fields ['rewrd'] (reward)", None),
            b'{"reward": NaN}': ("'reward' must be a finite number", "reward"),
            b'{"reward": Infinity}': ("'reward' must be a finite number", "reward"),
            b'{"reward": "1"}': ("'reward' must be a finite number", "reward"),
            b"[1.0]": ("the request body must be a JSON object", None),
        }
        for body, (message, param) in bad.items():
            r = await http.post("/sessions/r/close", content=body)
            assert r.status_code == 400, (body, r.text)
            assert r.json()["error"]["message"] == message and r.json()["error"]["param"] == param
            assert gw.is_open("r")  # nothing lost: the session and its turn are still there
        r = await http.post("/sessions/r/close", json={"reward": 0.5})
        assert r.status_code == 200
        traj = r.json()
        assert traj["reward"] == 0.5 and len(traj["turns"]) == 1
        assert [row["reward"] for row in traj["rows"]] == [0.5]


async def test_sampling_settings_are_type_checked_and_a_stop_string_is_one_stop(qwen3):
    gw = gateway(qwen3)
    async with running_front(gw) as base, httpx.AsyncClient(base_url=base) as http:
        bad = {
            "stop_token_ids": ["a"],
            "temperature": "hot",
            "max_new_tokens": 1.5,
            "top_k": True,
            "stop": [1],
            "seed": "7",
        }
        for key, value in bad.items():
            r = await http.post("/sessions", json={"rollout_id": f"s-{key}", "sampling": {key: value}})
            assert r.status_code == 400, (key, r.text)
            assert r.json()["error"]["param"] == "sampling"
            assert r.json()["error"]["message"].startswith(f"bad sampling settings: {key} must be")
            assert not gw.is_open(f"s-{key}")
        r = await http.post("/sessions", json={"rollout_id": "ok", "sampling": {"stop": "END"}})
        assert r.status_code == 201
        r = await http.put("/sessions/ok/sampling", json={"stop": "END", "stop_token_ids": [7]})
        assert r.json()["stop"] == ["END"] and r.json()["stop_token_ids"] == [7]


def test_sampling_params_normalize_sequences_and_reject_wrong_types():
    p = SamplingParams(stop="END", stop_token_ids=[3, 4])
    assert p.stop == ("END",) and p.stop_token_ids == (3, 4)
    assert SamplingParams(temperature=1, top_p=1).temperature == 1  # ints are numbers
    with pytest.raises(TypeError, match="stop_token_ids must be a sequence of token IDs"):
        SamplingParams(stop_token_ids=(1, "2"))
    with pytest.raises(TypeError, match="max_new_tokens must be an integer"):
        SamplingParams(max_new_tokens=8.0)
    with pytest.raises(ValueError, match="stop_token_ids must be >= 0"):
        SamplingParams(stop_token_ids=(-1,))
    for bad in (float("nan"), float("inf"), -1.0):
        with pytest.raises(ValueError, match="temperature must be a finite number >= 0"):
            SamplingParams(temperature=bad)


async def test_closing_a_session_mid_turn_fails_the_turn_and_records_nothing(qwen3):
    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, list(SCRIPT), delay=0.5))
    async with running_front(gw) as base, httpx.AsyncClient(base_url=base) as http:
        await http.post("/sessions", json={"rollout_id": "r"})
        turn = asyncio.create_task(http.post(CHAT, json={"messages": FIRST, "tools": TOOLS}))
        await asyncio.sleep(0.2)  # the backend is sampling
        closed = await http.post("/sessions/r/close", json={"reward": 1.0})
        r = await turn
    assert closed.status_code == 200 and closed.json()["turns"] == []
    assert r.status_code == 409, r.text
    assert r.json()["error"]["code"] == "session_closed"
    assert "closed while this turn was sampled" in r.json()["error"]["message"]


async def test_in_process_turn_of_a_session_closed_meanwhile_raises_and_leaves_the_trajectory(qwen3):
    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, list(SCRIPT), delay=0.3))
    gw.open_session("r")
    turn = asyncio.create_task(gw.generate("r", FIRST, TOOLS))
    await asyncio.sleep(0.1)
    traj = gw.close_session("r", reward=1.0)
    with pytest.raises(SessionClosed, match="'r' was closed while this turn was sampled"):
        await turn
    assert traj.turns == [] and traj.rows == [] and traj.reward == 1.0


async def test_a_token_that_is_not_utf8_is_401_not_a_500(qwen3):
    gw = gateway(qwen3)
    async with running_front(gw, api_key="s3cret") as base, httpx.AsyncClient(base_url=base) as http:
        for token in (b"Bearer \xff\xfe", "Bearer ü".encode()):
            r = await http.get("/v1/models", headers={"Authorization": token})
            assert r.status_code == 401, r.text
            assert r.json()["error"]["code"] == "invalid_api_key"
        r = await http.get("/v1/models", headers={"Authorization": "Bearer s3cret"})
        assert r.status_code == 200


async def test_sampling_fields_left_out_take_the_servers_defaults_not_the_dataclass_ones(qwen3):
    server = SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=64)
    gw = gateway(qwen3, sampling=server)
    async with running_front(gw) as base, httpx.AsyncClient(base_url=base) as http:
        r = await http.post("/sessions", json={"rollout_id": "r", "sampling": {"seed": 3}})
        assert r.status_code == 201
        assert (await http.post(CHAT, json={"messages": FIRST, "tools": TOOLS})).status_code == 200
        r = await http.put("/sessions/r/sampling", json={"temperature": 0.2})
        assert r.json() == {**server.to_dict(), "temperature": 0.2, "stop": [], "stop_token_ids": []}
        assert (await http.post(CHAT, json={"messages": FIRST, "tools": TOOLS})).status_code == 200
    first, second = gw.backend.params
    # the session's seed 3, as turn 0's seed of rollout r (per-turn seeds: backends.base.turn_seed)
    assert (first.temperature, first.top_p, first.max_new_tokens, first.seed) == (
        0.7,
        0.9,
        64,
        turn_seed(3, 0, "r"),
    )
    assert (second.temperature, second.top_p, second.max_new_tokens, second.seed) == (0.2, 0.9, 64, None)
