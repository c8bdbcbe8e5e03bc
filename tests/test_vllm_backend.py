"""VLLMBackend against a local fake vLLM server (tests/support/fake_vllm.py) speaking vLLM's JSON."""

from __future__ import annotations

import socket
import time

import pytest
from support.fake_vllm import FakeVLLM

from strands_art.backends import make_backend
from strands_art.backends.base import BackendError, BackendTimeout, SamplingBackend, SamplingParams
from strands_art.backends.vllm import VLLMBackend, completions_url, format_request

PROMPT = [151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198]


@pytest.fixture
async def server():
    fake = await FakeVLLM().start()
    yield fake
    await fake.stop()


@pytest.fixture
async def backend(server):
    b = VLLMBackend(server.url, server.model, timeout_s=5, max_retries=2, retry_backoff_s=0.01)
    yield b
    await b.aclose()


async def test_happy_path_ids_logprobs_and_length(server, backend):
    assert isinstance(backend, SamplingBackend)
    res = await backend.sample(PROMPT, SamplingParams(max_new_tokens=4))
    first = sum(PROMPT) % 50000 + 1
    assert res.output_ids == [first, first + 1, first + 2, first + 3]
    assert res.logprobs == [-0.25, -0.5, -0.75, -1.0]
    assert res.finish_reason == "length"
    assert res.info["id"] == "cmpl-1"
    assert res.info["usage"]["completion_tokens"] == 4


async def test_stop_token_is_kept_and_maps_to_stop(server, backend):
    server.script = [11, 12, 151645, 13]
    res = await backend.sample(PROMPT, SamplingParams(max_new_tokens=10, stop_token_ids=(151645,)))
    assert res.output_ids == [11, 12, 151645]
    assert res.logprobs == [-0.25, -0.5, -0.75]
    assert res.finish_reason == "stop"
    assert res.info["stop_reason"] is None  # the model's EOS: real vLLM names no stop_reason
    server.script = [11, 12, 151643, 13]  # a stop token that is not EOS: vLLM names it
    res = await backend.sample(PROMPT, SamplingParams(max_new_tokens=10, stop_token_ids=(151643,)))
    assert (res.output_ids, res.finish_reason, res.info["stop_reason"]) == ([11, 12, 151643], "stop", 151643)
    server.script = [11, 12]  # end of script = EOS
    res = await backend.sample(PROMPT, SamplingParams(max_new_tokens=10))
    assert (res.output_ids, res.finish_reason) == ([11, 12], "stop")


async def test_params_are_mapped_on_the_wire(server, backend):
    params = SamplingParams(
        temperature=0.7, top_p=0.9, top_k=20, max_new_tokens=3, stop=("</x>",), stop_token_ids=(5, 6), seed=42
    )
    await backend.sample(PROMPT, params)
    sent = server.requests[-1]
    assert sent["prompt"] == PROMPT
    assert sent["model"] == "fake/model"
    expected = {
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 20,
        "max_tokens": 3,
        "stop": ["</x>"],
        "stop_token_ids": [5, 6],
        "seed": 42,
        "skip_special_tokens": False,
        "include_stop_str_in_output": True,
        "return_token_ids": True,
        "return_tokens_as_token_ids": True,
        "logprobs": 1,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "n": 1,
        "stream": False,
    }
    assert {k: sent[k] for k in expected} == expected
    await backend.sample(PROMPT, SamplingParams(top_k=0))
    assert server.requests[-1]["top_k"] == -1
    assert "seed" not in server.requests[-1]


async def test_legacy_server_ids_from_logprob_tokens(server, backend):
    server.legacy = True
    server.script = [3, 4, 5]
    res = await backend.sample(PROMPT, SamplingParams(max_new_tokens=8))
    assert res.output_ids == [3, 4, 5]
    assert res.logprobs == [-0.25, -0.5, -0.75]


async def test_retries_5xx_then_succeeds(server, backend):
    server.fail_next = [500, 503]
    res = await backend.sample(PROMPT, SamplingParams(max_new_tokens=2))
    assert len(res.output_ids) == 2
    assert len(server.requests) == 3


async def test_5xx_after_all_retries_is_backend_error(server, backend):
    server.fail_next = [500, 502, 503]
    with pytest.raises(BackendError, match=r"failed after 3 attempts: HTTP 503: simulated HTTP 503"):
        await backend.sample(PROMPT, SamplingParams())
    assert len(server.requests) == 3


async def test_4xx_is_not_retried_and_carries_server_message(server):
    b = VLLMBackend(server.url, "other/model", max_retries=3, retry_backoff_s=0.01)
    try:
        with pytest.raises(BackendError, match=r"HTTP 404\): The model `other/model` does not exist"):
            await b.sample(PROMPT, SamplingParams())
        assert len(server.requests) == 1
    finally:
        await b.aclose()


async def test_read_timeout_is_backend_timeout_without_retry(server):
    server.delay_s = 2.0
    b = VLLMBackend(server.url, server.model, timeout_s=0.3, max_retries=3, retry_backoff_s=0.01)
    t0 = time.monotonic()
    try:
        with pytest.raises(BackendTimeout, match="did not answer within 0.3 s"):
            await b.sample(PROMPT, SamplingParams())
    finally:
        await b.aclose()
    assert time.monotonic() - t0 < 1.5
    assert len(server.requests) == 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_connection_refused_is_fast_backend_error_naming_url():
    url = f"http://127.0.0.1:{_free_port()}"
    b = VLLMBackend(url, "m", max_retries=2, retry_backoff_s=0.01)
    t0 = time.monotonic()
    try:
        with pytest.raises(
            BackendError, match=r"could not reach vLLM at .*127\.0\.0\.1.*after 3 attempts: ConnectError"
        ) as exc:
            await b.sample(PROMPT, SamplingParams())
    finally:
        await b.aclose()
    assert not isinstance(exc.value, BackendTimeout)
    assert time.monotonic() - t0 < 1.0


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("not_json", "not JSON"),
        ("no_choices", "no choices"),
        ("length_mismatch", "3 token IDs but 2 logprobs"),
        ("none_logprob", "non-numeric logprob"),
        ("prompt_mismatch", "different prompt"),
        ("ids_disagree", "name different tokens"),
        ("no_ids", "no token IDs"),
    ],
)
async def test_malformed_responses_are_backend_errors(server, backend, mode, message):
    server.malformed = mode
    server.script = [1, 2, 3]
    with pytest.raises(BackendError, match=message):
        await backend.sample(PROMPT, SamplingParams(max_new_tokens=5))
    assert len(server.requests) == 1  # malformed answers are not retried


async def test_abort_is_backend_error(server, backend):
    server.abort = True
    with pytest.raises(BackendError, match="aborted"):
        await backend.sample(PROMPT, SamplingParams(max_new_tokens=2))


async def test_concurrent_calls_share_one_client(server, backend):
    import asyncio

    prompts = [[i + 1, 2, 3] for i in range(8)]
    results = await asyncio.gather(*(backend.sample(p, SamplingParams(max_new_tokens=2)) for p in prompts))
    for p, r in zip(prompts, results, strict=True):
        assert r.output_ids[0] == sum(p) % 50000 + 1
    assert len(server.requests) == 8


async def test_closed_backend_and_bad_prompt(server):
    b = VLLMBackend(server.url + "/v1/", server.model)
    assert b.url == server.url + "/v1/completions"
    assert await b.models() == ["fake/model"]
    with pytest.raises(ValueError, match="empty prompt"):
        await b.sample([], SamplingParams())
    await b.aclose()
    await b.aclose()  # idempotent
    with pytest.raises(BackendError, match="closed"):
        await b.sample(PROMPT, SamplingParams())
    assert server.requests == []


def test_url_and_request_helpers():
    assert completions_url("http://h:8000") == "http://h:8000/v1/completions"
    with pytest.raises(ValueError):
        completions_url("h:8000")
    with pytest.raises(ValueError):
        format_request("m", [1, -2], SamplingParams())
    with pytest.raises(ValueError):
        VLLMBackend("http://h", "m", max_retries=-1)


async def test_make_backend_builds_vllm(server):
    b = make_backend("vllm", base_url=server.url, model=server.model)
    try:
        assert isinstance(b, VLLMBackend)
        res = await b.sample(PROMPT, SamplingParams(max_new_tokens=1))
        assert len(res.output_ids) == 1
    finally:
        await b.aclose()


async def test_total_deadline_stops_a_server_that_trickles_its_answer(server):
    # every 16-byte piece arrives well within the 1 s read timeout, so only the deadline can stop it
    server.trickle_s = 0.05
    b = VLLMBackend(server.url, server.model, timeout_s=1.0, deadline_s=0.6, max_retries=0)
    t0 = time.monotonic()
    try:
        with pytest.raises(BackendTimeout, match="within its 0.6 s deadline"):
            await b.sample(PROMPT, SamplingParams(max_new_tokens=64))
    finally:
        await b.aclose()
    assert 0.6 <= time.monotonic() - t0 < 3.0
    server.trickle_s = 0.0


def test_deadline_and_timeouts_must_be_finite_and_positive():
    for kw in ({"deadline_s": 0}, {"deadline_s": float("nan")}, {"timeout_s": float("inf")}):
        with pytest.raises(ValueError, match="finite and > 0"):
            VLLMBackend("http://127.0.0.1:1", "m", **kw)
