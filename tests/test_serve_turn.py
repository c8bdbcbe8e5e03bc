"""One turn through the front for every protocol (strands_art/serve/turn.py): a streaming turn
that takes longer to sample than a client's read timeout still completes and is recorded (the
headers and a first event go out at once, then keep-alive comments while nothing else is
written); a client that leaves mid-stream leaves nothing recorded."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import ClientSession, ClientTimeout
from support.serve_helpers import running_front

from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway

OUT = "<think>\nThinking it through carefully.\n</think>\n\nThe answer is 42.<|im_end|>"
REQUESTS = {
    "chat": ("/rollouts/r/v1/chat/completions", {"messages": [{"role": "user", "content": "6 x 7?"}]}),
    "anthropic": (
        "/rollouts/r/v1/messages",
        {"max_tokens": 64, "messages": [{"role": "user", "content": "6 x 7?"}]},
    ),
    "responses": ("/rollouts/r/v1/responses", {"input": "6 x 7?"}),
}
LAST = {"chat": "data: [DONE]", "anthropic": "event: message_stop", "responses": "event: response.completed"}


@pytest.mark.parametrize("protocol", sorted(REQUESTS))
async def test_a_slow_streamed_turn_outlives_a_read_timeout(qwen3, protocol):
    """The backend takes 3 s; the client gives up after 1.5 s without a byte: it completes."""
    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, [{"text": OUT}], delay=3.0))
    gw.open_session("r")
    path, body = REQUESTS[protocol]
    async with running_front(gw) as base, ClientSession(base) as http:
        timeout = ClientTimeout(total=None, sock_read=1.5)
        async with http.post(path, json={"model": "m", "stream": True, **body}, timeout=timeout) as r:
            assert r.status == 200 and r.headers["Content-Type"] == "text/event-stream"
            text = (await r.read()).decode()
    assert ": keep-alive" in text and LAST[protocol] in text
    assert "42" in text and len(gw.trajectory("r").turns) == 1


@pytest.mark.parametrize("protocol", sorted(REQUESTS))
async def test_a_client_that_leaves_mid_stream_records_nothing(qwen3, protocol):
    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, [{"text": OUT}], delay=30.0))
    gw.open_session("r")
    path, body = REQUESTS[protocol]
    async with running_front(gw) as base:
        async with (
            ClientSession(base) as http,
            http.post(path, json={"model": "m", "stream": True, **body}) as r,
        ):
            assert r.status == 200
            first = await r.content.readany()  # the first event, long before the turn is sampled
            assert first
        await asyncio.sleep(0.5)
        # (the gateway records a sampling_override_ignored event for max_tokens before sampling)
        assert gw.trajectory("r").turns == [] and gw.trajectory("r").rows == []


class FailsLate(ScriptedBackend):
    """Fails after 0.6 s of sampling (after the stream's headers went out)."""

    async def sample(self, prompt_ids, params, **kw):
        await asyncio.sleep(0.6)
        return await super().sample(prompt_ids, params, **kw)


async def test_an_error_after_the_headers_is_the_protocols_error_event(qwen3):
    gw = RolloutGateway(qwen3, FailsLate(qwen3, [{"error": "the GPU fell over"}]))
    gw.open_session("r")
    path, body = REQUESTS["anthropic"]
    async with running_front(gw) as base, ClientSession(base) as http:
        async with http.post(path, json={"model": "m", "stream": True, **body}) as r:
            text = (await r.read()).decode()
    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    assert events[0]["type"] == "message_start" and events[-1]["type"] == "error"
    assert events[-1]["error"]["type"] == "api_error" and "GPU fell over" in events[-1]["error"]["message"]
    assert gw.trajectory("r").turns == []


def _text_deltas(protocol: str, text: str) -> list[str]:
    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]
    if protocol == "chat":
        return [
            c["choices"][0]["delta"]["content"]
            for c in events
            if c["choices"] and c["choices"][0]["delta"].get("content")
        ]
    if protocol == "anthropic":
        return [
            e["delta"]["text"]
            for e in events
            if e["type"] == "content_block_delta" and e["delta"]["type"] == "text_delta"
        ]
    return [e["delta"] for e in events if e["type"] == "response.output_text.delta"]


@pytest.mark.parametrize("protocol", sorted(REQUESTS))
async def test_answer_text_streams_as_it_is_sampled_and_adds_up(qwen3, protocol):
    """A plain answer sampled over 1.5 s arrives in several text deltas that join to exactly the
    recorded answer (no piece sent twice, none lost)."""
    answer = "The answer is forty-two, which is six times seven, as the table says.<|im_end|>"
    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, [{"text": answer}], delay=1.5))
    gw.open_session("r")
    path, body = REQUESTS[protocol]
    async with running_front(gw) as base, ClientSession(base) as http:
        async with http.post(path, json={"model": "m", "stream": True, **body}) as r:
            text = (await r.read()).decode()
    deltas = _text_deltas(protocol, text)
    assert len(deltas) > 2 and "".join(deltas) == answer.removesuffix("<|im_end|>")
    assert gw.trajectory("r").turns[0].output_ids == qwen3.encode(answer, add_special_tokens=False)
