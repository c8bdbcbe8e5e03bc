"""A conversation ending in an assistant message (a prefill) is refused with a clear error, before
anything is rendered, sampled or recorded (issue 28, item 6: it was rendered as a closed turn
plus a second, empty assistant turn). The same in the gateway, the Strands provider and the HTTP
front."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp.test_utils import TestClient, TestServer

from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.history.normalize import MessageError
from strands_art.serve import create_app

PREFILL = [
    {"role": "user", "content": "Is 7 prime? Reply as JSON."},
    {"role": "assistant", "content": '{"verdict": "'},
]
ANSWER = [{"role": "user", "content": "Is 7 prime? Reply as JSON."}]


@pytest.mark.parametrize("mode", ["tree", "linear"])
def test_gateway_refuses_a_prefill_and_records_nothing(qwen3, mode) -> None:
    backend = ScriptedBackend(qwen3, [{"text": '{"verdict": "yes"}<|im_end|>'}])
    gw = RolloutGateway(qwen3, backend, history_mode=mode)
    gw.open_session("s")
    with pytest.raises(
        MessageError, match=r"message 1: the conversation ends in an assistant message \(a prefill\)"
    ):
        asyncio.run(gw.generate("s", PREFILL))
    assert backend.calls == 0
    r = asyncio.run(gw.generate("s", ANSWER))  # the session goes on
    assert r.text == '{"verdict": "yes"}'
    assert len(gw.close_session("s").turns) == 1


def test_http_front_answers_400_naming_the_message(qwen3) -> None:
    backend = ScriptedBackend(qwen3, [{"text": "x<|im_end|>"}])
    gw = RolloutGateway(qwen3, backend)

    async def go():
        async with TestClient(TestServer(create_app(gw, auto_open=True))) as http:
            r = await http.post("/rollouts/r/v1/chat/completions", json={"messages": PREFILL})
            return r.status, await r.json()

    status, body = asyncio.run(go())
    assert status == 400
    assert body["error"]["param"] == "messages[1]" and "prefill" in body["error"]["message"]
    assert backend.calls == 0
