"""VLLMBackend's token streaming (issue 14 item 8) against the fake vLLM speaking vLLM's SSE
stream format (tests/support/fake_vllm.py): streamed IDs are the result's IDs, the result equals the
non-streamed one, failures mid-stream record nothing, cancellation closes the HTTP stream."""

from __future__ import annotations

import asyncio

import pytest
from strands import Agent
from strands.agent.conversation_manager import NullConversationManager

from strands_art.backends.base import (
    BackendContextOverflow,
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    SamplingParams,
)
from strands_art.backends.vllm import VLLMBackend
from strands_art.gateway import RolloutGateway
from strands_art.model import ARTModel
from strands_art.rowcheck import row_problems
from tests import test_vllm_backend as shared

PROMPT = shared.PROMPT
server, backend = shared.server, shared.backend  # the fake vLLM and a backend on it (fixtures)


@pytest.mark.parametrize("chunk", [1, 3])
@pytest.mark.parametrize("legacy", [False, True])
async def test_streamed_ids_are_the_result_and_equal_the_unstreamed_sample(server, backend, chunk, legacy):
    server.stream_chunk, server.legacy = chunk, legacy
    server.script = [11, 12, 13, 14, 151645, 15]
    params = SamplingParams(max_new_tokens=10, stop_token_ids=(151645,), seed=7, temperature=0.7)
    got: list[list[int]] = []
    streamed = await backend.sample(PROMPT, params, on_tokens=got.append)
    whole = await backend.sample(PROMPT, params)
    assert [t for batch in got for t in batch] == streamed.output_ids == [11, 12, 13, 14, 151645]
    assert [len(b) for b in got] == ([1] * 5 if chunk == 1 else [3, 2])
    assert streamed.output_ids == whole.output_ids
    assert streamed.logprobs == whole.logprobs == [-0.25, -0.5, -0.75, -1.0, -1.25]
    assert (streamed.finish_reason, streamed.info["stop_reason"]) == ("stop", None)  # EOS: null, as vLLM
    counts = ("prompt_tokens", "completion_tokens", "total_tokens")  # a stream's usage has no *_details
    assert {k: streamed.info["usage"][k] for k in counts} == {k: whole.info["usage"][k] for k in counts}
    sent, plain = server.requests
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert {k: v for k, v in sent.items() if k not in ("stream", "stream_options")} == {
        k: v for k, v in plain.items() if k != "stream"
    }
    assert server.streams == ["done"]


async def test_length_finish_streams(server, backend):
    got: list[int] = []
    res = await backend.sample(PROMPT, SamplingParams(max_new_tokens=4), on_tokens=got.extend)
    first = sum(PROMPT) % 50000 + 1
    assert got == res.output_ids == [first, first + 1, first + 2, first + 3]
    assert res.finish_reason == "length"


async def test_error_event_mid_stream_is_backend_error_and_records_nothing(server, backend, qwen3):
    server.stream_error_after = 2
    got: list[int] = []
    with pytest.raises(BackendError, match="mid-stream after 2 chunks: simulated engine failure"):
        await backend.sample(PROMPT, SamplingParams(max_new_tokens=8), on_tokens=got.extend)
    assert len(got) == 2 and len(server.requests) == 1  # tokens were handed out: not retried
    gw = RolloutGateway(qwen3, backend)
    gw.open_session("r1")
    seen: list[int] = []
    with pytest.raises(BackendError):
        await gw.generate(
            "r1", [{"role": "user", "content": "hi"}], on_tokens=lambda p, ids: seen.extend(ids)
        )
    assert len(seen) == 2
    traj = gw.trajectory("r1")
    assert traj.turns == [] and traj.rows == []


async def test_dropped_connection_and_missing_done_are_unavailable(server, backend):
    server.stream_drop_after = 1
    with pytest.raises(BackendUnavailable, match="stream"):
        await backend.sample(PROMPT, SamplingParams(max_new_tokens=8), on_tokens=lambda ids: None)
    assert len(server.requests) == 1


async def test_abort_and_malformed_stream_use_the_same_checks(server, backend):
    server.abort = True
    with pytest.raises(BackendUnavailable, match="abort"):
        await backend.sample(PROMPT, SamplingParams(max_new_tokens=3), on_tokens=lambda ids: None)
    server.abort, server.malformed = False, "length_mismatch"
    with pytest.raises(BackendError, match="3 token IDs but 2 logprobs"):
        await backend.sample(PROMPT, SamplingParams(max_new_tokens=3), on_tokens=lambda ids: None)


async def test_status_errors_before_the_stream_map_as_unstreamed(server, backend):
    server.fail_next = [503]
    got: list[int] = []
    res = await backend.sample(PROMPT, SamplingParams(max_new_tokens=2), on_tokens=got.extend)
    assert got == res.output_ids and len(server.requests) == 2  # retried before any token
    server.fail_next = [429, 429, 429]
    with pytest.raises(BackendUnavailable, match="HTTP 429"):
        await backend.sample(PROMPT, SamplingParams(max_new_tokens=2), on_tokens=got.extend)
    server.max_model_len = 5
    with pytest.raises(BackendContextOverflow) as info:
        await backend.sample(PROMPT, SamplingParams(max_new_tokens=2), on_tokens=got.extend)
    assert (info.value.prompt_tokens, info.value.context_tokens) == (9, 5)


async def test_cancellation_closes_the_http_stream(server, backend):
    server.stream_delay_s = 0.05
    got: list[int] = []
    task = asyncio.ensure_future(
        backend.sample(PROMPT, SamplingParams(max_new_tokens=200), on_tokens=got.extend)
    )
    while len(got) < 3:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(100):  # the server notices at its next write
        if server.streams:
            break
        await asyncio.sleep(0.02)
    assert server.streams == ["client closed"]
    assert len(got) < 200


async def test_total_deadline_bounds_a_slow_stream(server):
    server.stream_delay_s = 0.2
    b = VLLMBackend(server.url, server.model, timeout_s=5, deadline_s=0.5, max_retries=0)
    try:
        with pytest.raises(BackendTimeout, match="deadline"):
            await b.sample(PROMPT, SamplingParams(max_new_tokens=50), on_tokens=lambda ids: None)
    finally:
        await b.aclose()


async def test_strands_stream_async_gets_text_before_the_turn_is_recorded(server, backend, qwen3):
    """End to end: an Agent on ARTModel over the streaming vLLM backend sees several text deltas
    while the turn is still being sampled; they add up to the answer; the row is token-exact."""
    answer = qwen3.encode("The sum is 42, and that is final.<|im_end|>", add_special_tokens=False)
    server.script, server.stream_delay_s = answer, 0.05
    gw = RolloutGateway(qwen3, backend, sampling=SamplingParams(max_new_tokens=64))
    agent = Agent(
        model=ARTModel(gateway=gw, session_id="s"),
        callback_handler=None,
        conversation_manager=NullConversationManager(),
    )
    seen = []
    async for event in agent.stream_async("What is 40 + 2?"):
        if "data" in event:
            seen.append((event["data"], len(gw.trajectory("s").turns)))
    traj = gw.close_session("s")
    (turn,) = traj.turns
    assert turn.output_ids == answer and server.streams == ["done"]
    assert len([text for text, recorded in seen if recorded == 0]) >= 3  # before the turn was recorded
    assert "".join(text for text, _ in seen) == "The sum is 42, and that is final."
    assert row_problems(traj) == []
