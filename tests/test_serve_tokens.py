"""The ``bytes`` of returned logprobs are each token's own raw bytes (strands_art/serve/tokens.py):
a character split over several tokens (an emoji, a rare CJK character) is rebuilt by joining
them, on every byte-level tokenizer family and through both OpenAI protocols."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.serve_helpers import running_front

from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.registry import load_tokenizer
from strands_art.serve.tokens import token_bytes

ANSWER = "Stored 𠮷 and 🦜 in the map."
BYTE_LEVEL = ["qwen3", "llama3.1", "gpt-oss", "smollm2"]


@pytest.mark.parametrize("alias", BYTE_LEVEL)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40))
def test_joined_token_bytes_are_the_texts_utf8(alias, text):
    tok = load_tokenizer(alias)
    ids = tok.encode(ANSWER + text, add_special_tokens=False)
    raw = token_bytes(tok, ids)
    assert len(raw) == len(ids)
    # what the tokenizer decodes, invalid sequences replaced as it replaces them (SmolLM2 has no
    # token for the byte 0xF1 of U+40000: its continuation bytes alone decode to U+FFFD)
    assert b"".join(raw).decode("utf-8", "replace") == tok.decode(ids)


def test_a_split_emoji_keeps_its_own_bytes(qwen3):
    ids = qwen3.encode("🦜", add_special_tokens=False)
    raw = token_bytes(qwen3, ids)
    assert len(ids) > 1 and b"".join(raw) == "🦜".encode()
    assert all(b != "\ufffd".encode() for b in raw)  # what decoding one partial token gives


def test_sentencepiece_byte_fallback(monkeypatch):
    tok = load_tokenizer("mistral-v3")
    ids = tok.encode("a 🦜", add_special_tokens=False)
    assert b"".join(token_bytes(tok, ids)).strip() == "a 🦜".encode()


def _entries(data: dict, stream: bool, protocol: str) -> list[dict]:
    if protocol == "chat" and stream:
        chunks = [json.loads(line[6:]) for line in data.splitlines() if line.startswith("data: {")]
        return [
            e
            for c in chunks
            for ch in c["choices"]
            for e in ((ch.get("logprobs") or {}).get("content") or [])
        ]
    if protocol == "chat":
        return data["choices"][0]["logprobs"]["content"]
    if stream:
        events = [json.loads(line[6:]) for line in data.splitlines() if line.startswith("data: {")]
        data = next(e["response"] for e in events if e["type"] == "response.completed")
    return next(i for i in data["output"] if i["type"] == "message")["content"][0]["logprobs"]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("protocol", ["chat", "responses"])
async def test_logprob_bytes_rebuild_the_sampled_text(qwen3, protocol, stream):
    out = "<think>\nok\n</think>\n\n" + ANSWER + "<|im_end|>"
    ids = qwen3.encode(out, add_special_tokens=False)
    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, [{"text": out}]))
    gw.open_session("r")
    if protocol == "chat":
        path, body = (
            "/rollouts/r/v1/chat/completions",
            {"messages": [{"role": "user", "content": "Go"}], "logprobs": True},
        )
    else:
        path, body = "/rollouts/r/v1/responses", {"input": "Go", "include": ["message.output_text.logprobs"]}
    async with running_front(gw) as base, httpx.AsyncClient(base_url=base) as http:
        r = await http.post(path, json={"model": "m", "stream": stream, **body})
        assert r.status_code == 200, r.text
        entries = _entries(r.text if stream else r.json(), stream, protocol)
    assert len(entries) == len(ids)
    assert b"".join(bytes(e["bytes"]) for e in entries) == qwen3.decode(ids).encode("utf-8")
    assert [e["logprob"] for e in entries] == gw.trajectory("r").turns[0].logprobs
