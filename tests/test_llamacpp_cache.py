"""llama.cpp's prompt cache and reproducible sampling (issue 28, item 7), on the real
Qwen2.5-Coder-0.5B GGUF: with ``cache_prompt=False`` the same prompt, seed and settings give the
same tokens and logprobs whatever the slot held before; every sample says how many prompt tokens
came from the cache, and the gateway records it on the turn."""

from __future__ import annotations

import asyncio

import pytest

from strands_art.backends import SamplingParams, make_backend
from strands_art.gateway import RolloutGateway
from strands_art.registry import load_tokenizer

MODEL = "qwen2.5-coder-0.5b"
PARAMS = SamplingParams(temperature=0.8, top_p=1.0, max_new_tokens=6, seed=4242)


def _prompt(tok, text: str) -> list[int]:
    return tok.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
    )["input_ids"]


def test_without_prompt_cache_a_repeat_samples_exactly_like_a_cold_run() -> None:
    tok = load_tokenizer(MODEL)
    p = _prompt(tok, "Why do unit tests matter?")
    other = _prompt(tok, "Name three colours.")
    backend = make_backend(
        "llamacpp", model=MODEL, context_tokens=256, parallel=1, threads=2, cache_prompt=False
    )

    async def go():
        try:
            return [await backend.sample(x, PARAMS) for x in (p, p, other, p)]
        finally:
            await backend.aclose()

    a, b, _, c = asyncio.run(go())
    assert a.output_ids == b.output_ids == c.output_ids
    assert a.logprobs == b.logprobs == c.logprobs  # bit for bit: every prompt evaluated cold
    assert [r.info["cached_prompt_tokens"] for r in (a, b, c)] == [0, 0, 0]


def test_with_prompt_cache_the_reuse_is_reported_and_recorded_on_the_turn() -> None:
    tok = load_tokenizer(MODEL)
    backend = make_backend("llamacpp", model=MODEL, context_tokens=256, parallel=1, threads=2)
    assert backend.cache_prompt is True
    gw = RolloutGateway(tok, backend, sampling=PARAMS)
    msgs = [{"role": "user", "content": "Why do unit tests matter?"}]

    async def go():
        try:
            gw.open_session("a")
            first = await gw.generate("a", msgs)
            gw.open_session("b")
            second = await gw.generate("b", msgs)
            return first, second
        finally:
            await backend.aclose()

    first, second = asyncio.run(go())
    assert first.turn.cached_prompt_tokens == 0
    n = len(second.turn.prompt_ids)
    assert 0 < second.turn.cached_prompt_tokens < n  # llama.cpp re-reads at least the last token
    assert second.turn.to_dict()["cached_prompt_tokens"] == second.turn.cached_prompt_tokens


def test_cache_prompt_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match="cache_prompt must be True or False"):
        make_backend("llamacpp", model=MODEL, context_tokens=64, parallel=1, threads=1, cache_prompt="no")
