"""The HTTP front: session routing and control, errors in OpenAI's shape, limits, auth,
client disconnects, the loopback default and the ``strands-art serve`` command."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest
from strands.types.exceptions import ContextWindowOverflowException
from support.serve_helpers import QUESTION, SCRIPT, SYSTEM, TOOLS, gateway, running_front, summary

from strands_art.backends.base import BackendError, BackendTimeout, BackendUnavailable, turn_seed
from strands_art.backends.scripted import ScriptedBackend
from strands_art.cli import build_parser
from strands_art.gateway import RolloutGateway
from strands_art.serve import DEFAULT_HOST, create_app, start

REPO = Path(__file__).resolve().parents[1]
FIRST = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]


def sdk(base: str, rollout: str | None = None, **kw) -> openai.AsyncOpenAI:
    url = f"{base}/rollouts/{rollout}/v1" if rollout else f"{base}/v1"
    return openai.AsyncOpenAI(base_url=url, api_key=kw.pop("api_key", "none"), max_retries=0, **kw)


async def ask(
    base: str, rollout: str | None = None, headers: dict | None = None, api_key: str = "none", **kw
):
    """One chat completion with the OpenAI SDK (client closed afterwards)."""
    async with sdk(base, rollout, api_key=api_key, default_headers=headers) as client:
        return await client.chat.completions.create(model="m", **kw)


async def open_session(http: httpx.AsyncClient, rollout: str, **body) -> httpx.Response:
    return await http.post("/sessions", json={"rollout_id": rollout, **body})


# ---------------------------------------------------------------------------- routing
async def test_rollout_id_precedence_is_path_then_header_then_user(qwen3):
    gw = gateway(qwen3, SCRIPT * 3)
    async with running_front(gw) as base, httpx.AsyncClient(base_url=base) as http:
        for rid in ("p", "h", "u"):
            assert (await open_session(http, rid)).status_code == 201
        await ask(base, "p", {"X-Rollout-Id": "h"}, messages=FIRST, tools=TOOLS, user="u")
        await ask(base, None, {"X-Rollout-Id": "h"}, messages=FIRST, tools=TOOLS, user="u")
        await ask(base, None, messages=FIRST, tools=TOOLS, user="u")
        turns = {rid: len((await http.get(f"/sessions/{rid}/trajectory")).json()["turns"]) for rid in "phu"}
    assert turns == {"p": 1, "h": 1, "u": 1}


async def test_unknown_closed_missing_and_bad_ids_are_clear_4xx(qwen3):
    async with running_front(gateway(qwen3)) as base, httpx.AsyncClient(base_url=base) as http:
        with pytest.raises(openai.NotFoundError) as err:
            await ask(base, "nobody", messages=FIRST)
        assert err.value.code == "session_not_found" and "POST /sessions" in err.value.message
        with pytest.raises(openai.BadRequestError) as err:
            await ask(base, messages=FIRST)
        assert err.value.code == "missing_rollout_id"
        with pytest.raises(openai.BadRequestError) as err:
            await ask(base, messages=FIRST, user="a b/../c")
        assert err.value.code == "bad_rollout_id"
        assert (await open_session(http, "r1")).status_code == 201
        assert (await http.post("/sessions/r1/close", json={"reward": 0.5})).json()["reward"] == 0.5
        with pytest.raises(openai.ConflictError) as err:
            await ask(base, "r1", messages=FIRST)
        assert err.value.code == "session_closed"
        assert (await open_session(http, "r1")).status_code == 409
        assert (await http.get("/sessions/r1/trajectory")).status_code == 409
        assert (await http.get("/sessions/r2/trajectory")).json()["error"]["code"] == "session_not_found"
        assert (await http.post("/sessions/r2/close", json={"reward": "high"})).status_code == 400


async def test_auto_open_starts_unknown_sessions_but_never_reopens_closed_ones(qwen3):
    config = {"auto_open": True, "max_open_sessions": 2}
    async with running_front(gateway(qwen3), **config) as base, httpx.AsyncClient(base_url=base) as http:
        resp = await ask(base, "fresh", messages=FIRST, tools=TOOLS)
        assert resp.choices[0].message.tool_calls[0].function.name == "add"
        await http.post("/sessions/fresh/close", json={})
        with pytest.raises(openai.ConflictError):
            await ask(base, "fresh", messages=FIRST, tools=TOOLS)
        # open sessions are bounded, whichever way they are opened
        assert (await open_session(http, "a")).status_code == 201
        assert (await open_session(http, "a")).status_code == 201  # idempotent
        await ask(base, "b", messages=FIRST, tools=TOOLS)
        with pytest.raises(openai.RateLimitError) as err:
            await ask(base, "c", messages=FIRST, tools=TOOLS)
        assert err.value.code == "too_many_sessions"
        assert (await http.post("/sessions", json={})).json()["error"]["code"] == "too_many_sessions"
        await http.post("/sessions/a/close", json={})
        assert (await http.post("/sessions", json={"group_id": "x" * 201})).status_code == 400
        assert (await open_session(http, "c")).status_code == 201


# ---------------------------------------------------------------------------- control
async def test_session_control_sets_group_and_trainer_sampling(qwen3):
    gw = gateway(qwen3)
    async with running_front(gw) as base, httpx.AsyncClient(base_url=base) as http:
        r = await http.post(
            "/sessions", json={"group_id": "task-9", "sampling": {"temperature": 0.3, "seed": 7}}
        )
        assert r.status_code == 201
        rid = r.json()["rollout_id"]
        assert len(rid) == 32 and r.json()["group_id"] == "task-9"
        assert (await open_session(http, rid, group_id="other")).json()["error"]["code"] == "session_exists"
        bad = await http.put(f"/sessions/{rid}/sampling", json={"temprature": 1.0})
        assert bad.status_code == 400 and "unknown sampling keys" in bad.json()["error"]["message"]
        assert (await http.put(f"/sessions/{rid}/sampling", json={"top_p": 1.5})).status_code == 400
        await ask(base, rid, messages=FIRST, tools=TOOLS)
        r = await http.put(f"/sessions/{rid}/sampling", json={"temperature": 0.9, "stop_token_ids": [5]})
        assert r.json()["temperature"] == 0.9
        # the agent's own temperature is ignored (the trainer owns sampling) and recorded
        messages = FIRST + [{"role": "user", "content": "again"}]
        await ask(base, rid, messages=messages, tools=TOOLS, temperature=2.0)
        traj = (await http.get(f"/sessions/{rid}/trajectory")).json()
    p0, p1 = gw.backend.params
    # the session seed 7 reaches the backend as the per-turn seed of turn 0 of this rollout
    # (issue 14, item 7; issue 48, U08)
    assert (p0.temperature, p0.seed) == (0.3, turn_seed(7, 0, rid)) and (p1.temperature, p1.seed) == (
        0.9,
        None,
    )
    assert 5 in p1.stop_token_ids
    assert traj["group_id"] == "task-9" and traj["rows"][0]["group_id"] == "task-9"
    # the second request dropped the assistant turn: a fork, explained
    assert [e["kind"] for e in traj["events"]] == ["sampling_override_ignored", "fork"]


async def test_sampling_overrides_rejected_and_tool_choice_recorded(qwen3):
    gw = gateway(qwen3, on_sampling_override="reject")
    async with running_front(gw, auto_open=True) as base:
        with pytest.raises(openai.BadRequestError) as err:
            await ask(base, "r", messages=FIRST, top_p=0.5)
        assert err.value.code == "sampling_override_rejected"
        await ask(base, "r", messages=FIRST, tools=TOOLS, tool_choice="required")
        with pytest.raises(openai.BadRequestError) as err:
            await ask(base, "r", messages=FIRST, n=2)
        assert err.value.param == "n"
    traj = gw.trajectory("r")
    assert len(traj.turns) == 1
    assert [e["kind"] for e in traj.events] == ["tool_choice_ignored"]


# ---------------------------------------------------------------------------- errors
async def test_context_overflow_is_openais_400_for_sdk_litellm_and_strands(qwen3):
    from strands import Agent
    from strands.models.openai import OpenAIModel

    gw = gateway(qwen3, max_context_tokens=20)
    async with running_front(gw, auto_open=True) as base:
        with pytest.raises(openai.BadRequestError) as err:
            await ask(base, "r", messages=FIRST)
        assert err.value.status_code == 400 and err.value.code == "context_length_exceeded"
        assert err.value.body == {
            "message": "This model's maximum context length is 20 tokens. However, your messages resulted in "
            "41 tokens, which leaves no room to generate. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
        os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        import litellm

        with pytest.raises(litellm.ContextWindowExceededError):
            await litellm.acompletion(
                model="openai/m", api_base=f"{base}/rollouts/r/v1", api_key="x", messages=FIRST, num_retries=0
            )
        model = OpenAIModel(client_args={"base_url": f"{base}/rollouts/s/v1", "api_key": "x"}, model_id="m")
        with pytest.raises(ContextWindowOverflowException):
            await Agent(model=model, callback_handler=None).invoke_async(QUESTION)
    assert gw.trajectory("r").turns == [] and gw.trajectory("s").turns == []
    assert gw.backend.calls == 0


class Failing:
    name = "failing"

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    async def sample(self, prompt_ids, params):
        raise self.exc

    async def aclose(self):
        pass


@pytest.mark.parametrize(
    "exc, error, status, code",
    [
        (BackendTimeout("no answer in 60 s"), openai.RateLimitError, 429, "rate_limit_exceeded"),
        (BackendUnavailable("connection refused"), openai.InternalServerError, 503, "backend_unavailable"),
    ],
)
async def test_backend_failures_are_retryable_statuses(qwen3, exc, error, status, code):
    gw = RolloutGateway(qwen3, Failing(exc))
    async with running_front(gw, auto_open=True) as base, httpx.AsyncClient(base_url=base) as http:
        with pytest.raises(error) as err:
            await ask(base, "r", messages=FIRST)
        assert err.value.status_code == status and err.value.code == code
        assert err.value.response.headers["Retry-After"] == "1"
        assert str(exc) in err.value.message
        assert (await http.get("/sessions/r/trajectory")).json()["turns"] == []


async def test_other_backend_failures_are_502_without_retry_after(qwen3):
    # issue 14 item 9: an upstream rejection is not throttling; retrying it would fail the same way
    exc = BackendError("vLLM rejected the request (HTTP 400): top_k must be 0 (disable), or at least 1")
    gw = RolloutGateway(qwen3, Failing(exc))
    async with running_front(gw, auto_open=True) as base:
        async with httpx.AsyncClient(base_url=base) as http:
            r = await http.post("/rollouts/r/v1/chat/completions", json={"messages": FIRST})
    assert r.status_code == 502 and "Retry-After" not in r.headers
    assert r.json()["error"]["code"] == "backend_error" and str(exc) in r.json()["error"]["message"]
    assert gw.trajectory("r").turns == []


async def test_bad_input_is_400_and_records_nothing(qwen3):
    gw = gateway(qwen3)
    async with running_front(gw, auto_open=True, max_body_bytes=4096) as base:
        async with httpx.AsyncClient(base_url=base) as http:
            r = await http.post("/rollouts/r/v1/chat/completions", content=b"{not json")
            assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
            r = await http.post("/rollouts/r/v1/chat/completions", json={"messages": [{"role": "wizard"}]})
            assert r.json()["error"] == {
                "message": "message 0: unknown role 'wizard' (expected one of system, user, assistant, tool)",
                "type": "invalid_request_error",
                "param": "messages[0]",
                "code": "invalid_message",
            }
            r = await http.post(
                "/rollouts/r/v1/chat/completions", json={"messages": FIRST, "tools": [{"x": 1}]}
            )
            assert r.status_code == 400 and r.json()["error"]["param"] == "tools"
            r = await http.post("/rollouts/r/v1/chat/completions", json={"messages": [], "stream": True})
            assert r.status_code == 400 and r.json()["error"]["param"] == "messages"
            r = await http.get("/v1/nothing-here")
            assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
        with pytest.raises(openai.APIStatusError) as err:
            big = [{"role": "user", "content": "x" * 5000}]
            await ask(base, "r", messages=big)
        assert err.value.status_code == 413 and err.value.code == "request_too_large"
    assert gw.backend.calls == 0 and not gw.is_open("r")  # refused before auto-open opened it


async def test_bearer_token_guards_everything_but_health(qwen3):
    async with running_front(gateway(qwen3), api_key="s3cret", model_name="policy-7") as base:
        with pytest.raises(openai.AuthenticationError) as err:
            async with sdk(base, api_key="wrong") as client:
                await client.models.list()
        assert err.value.code == "invalid_api_key"
        async with httpx.AsyncClient(base_url=base) as http:
            assert (await http.post("/sessions", json={})).status_code == 401
            assert (await http.get("/health")).json() == {"status": "ok", "sessions": 0}
        async with sdk(base, api_key="s3cret") as client:
            models = await client.models.list()
        assert [m.id for m in models.data] == ["policy-7"]


# ---------------------------------------------------------------------------- disconnects
class Watched(ScriptedBackend):
    """The scripted backend, counting sample calls that were cancelled."""

    cancelled = 0

    async def sample(self, prompt_ids, params, **kw):
        try:
            return await super().sample(prompt_ids, params, **kw)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise


@pytest.mark.parametrize("stream", [True, False])
async def test_client_disconnect_cancels_sampling_and_records_nothing(qwen3, stream):
    backend = Watched(qwen3, [SCRIPT[0], *SCRIPT], delay=30.0)
    gw = RolloutGateway(qwen3, backend)
    gw.open_session("r")
    async with running_front(gw) as base:
        client = sdk(base, "r")

        async def wait():
            answer = await client.chat.completions.create(
                model="m", messages=FIRST, tools=TOOLS, stream=stream
            )
            if stream:  # the headers and a first event come at once; the turn does not
                async for _ in answer:
                    pass

        with pytest.raises(TimeoutError):
            await asyncio.wait_for(wait(), timeout=0.5)  # the client gives up and closes
        await client.close()
        for _ in range(100):
            if backend.cancelled:
                break
            await asyncio.sleep(0.05)
        assert backend.cancelled == 1 and gw.trajectory("r").turns == []
        backend.delay = 0.0
        messages = list(FIRST)
        for _ in range(2):  # the retry is turn 0; the next turn extends the same row
            message = (await ask(base, "r", messages=messages, tools=TOOLS)).choices[0].message
            call = message.tool_calls[0]
            messages += [
                message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": "42"},
            ]
    traj = gw.close_session("r")
    assert backend.prompts[0] == backend.prompts[1] == traj.turns[0].prompt_ids
    assert [t.index for t in traj.turns] == [0, 1] and len(traj.rows) == 1
    assert traj.rows[0].turns == [0, 1]


# ---------------------------------------------------------------------------- bind + CLI
async def test_default_bind_address_is_loopback(qwen3):
    assert DEFAULT_HOST == "127.0.0.1"
    assert inspect.signature(start).parameters["host"].default == "127.0.0.1"
    assert build_parser().parse_args(["serve"]).host == "127.0.0.1"
    runner = await start(create_app(gateway(qwen3)), port=0)  # the default host
    try:
        assert [a[0] for a in runner.addresses] == ["127.0.0.1"]
    finally:
        await runner.cleanup()


async def test_serve_command_end_to_end(tmp_path, qwen3):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    env = {**os.environ, "PYTHONPATH": str(REPO), "MY_KEY": "k-1"}
    cmd = [sys.executable, "-m", "strands_art.cli", "serve", "--backend", "scripted", "--script", str(script)]
    cmd += [
        "--tokenizer",
        "qwen3",
        "--port",
        "0",
        "--api-key-env",
        "MY_KEY",
        "--store",
        str(tmp_path / "store"),
    ]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    try:
        line = await asyncio.wait_for(asyncio.to_thread(proc.stderr.readline), timeout=120)
        assert line.startswith("strands-art serve: http://127.0.0.1:"), line
        base = line.split()[2].removesuffix("/v1")
        async with httpx.AsyncClient(base_url=base, headers={"Authorization": "Bearer k-1"}) as http:
            assert (await http.post("/sessions", json={"rollout_id": "cli-1"})).status_code == 201
            resp = await ask(base, "cli-1", api_key="k-1", messages=FIRST, tools=TOOLS)
            assert resp.choices[0].finish_reason == "tool_calls"
            traj = (await http.post("/sessions/cli-1/close", json={"reward": 1})).json()
        prompts, rows = summary(traj)
        assert len(prompts) == 1 and sum(rows[0][1]) == len(traj["turns"][0]["output_ids"])
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    stored = (tmp_path / "store" / "trajectories.jsonl").read_text().splitlines()
    assert [json.loads(s)["rollout_id"] for s in stored] == ["cli-1"]


def serve_command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "strands_art.cli", "serve", "--backend", "scripted", *args],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_serve_command_errors_clearly_without_a_script():
    proc = serve_command()
    assert proc.returncode == 2 and "strands-art serve: --backend scripted needs --script" in proc.stderr


def test_serve_command_unknown_tokenizer_is_one_line_not_a_traceback(tmp_path):
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(SCRIPT))
    proc = serve_command("--script", str(script), "--port", "0", "--tokenizer", "no-such-alias")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("strands-art serve: unknown tokenizer/model 'no-such-alias': use one of")
    assert "Traceback" not in proc.stderr
