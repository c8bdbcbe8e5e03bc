"""llama.cpp's prompt cache and reproducible sampling, on the real Qwen2.5-Coder-0.5B GGUF.

``cache_prompt="aligned"`` (the default with one slot) reuses only whole batches a previous prompt
evaluated, so a cached repeat, a rollout's next turn and a prompt after another one sample bit
for bit like a cold run on a freshly loaded model; ``"off"`` evaluates every prompt cold; ``"any"``
is llama.cpp's own reuse. Every sample says how many prompt tokens came from the cache, and the
gateway records it on the turn."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strands_art.backends import SamplingParams, make_backend
from strands_art.backends.llamacpp import aligned_reuse
from strands_art.gateway import RolloutGateway
from strands_art.registry import load_tokenizer

MODEL = "qwen2.5-coder-0.5b"
PARAMS = SamplingParams(temperature=0.8, top_p=1.0, max_new_tokens=6, seed=4242)
BATCH = 32  # small batches: a ~60-token prompt spans whole and partial ones


def _prompt(tok, text: str) -> list[int]:
    return tok.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
    )["input_ids"]


def _backend(**kw):
    return make_backend(
        "llamacpp", model=MODEL, context_tokens=256, parallel=1, threads=2, batch_tokens=BATCH, **kw
    )


async def _cold(prompts: list[list[int]]) -> list:
    """Each prompt sampled on a freshly loaded model: the reference."""
    out = []
    for p in prompts:
        backend = _backend(cache_prompt="off")
        try:
            out.append(await backend.sample(p, PARAMS))
        finally:
            await backend.aclose()
    return out


def test_aligned_cache_samples_like_a_cold_run_and_serves_whole_batches() -> None:
    tok = load_tokenizer(MODEL)
    p = _prompt(tok, "Why do unit tests matter in a Java project? Answer in one sentence, plainly.")
    other = _prompt(tok, "Name three colours.")

    async def go():
        backend = _backend()
        assert backend.cache_prompt == "aligned"
        try:
            first = await backend.sample(p, PARAMS)
            # the next turn of the rollout: the prompt, the answer and a new user message
            nxt = p + first.output_ids + _prompt(tok, "And in Python?")[-12:]
            got = [first] + [await backend.sample(x, PARAMS) for x in (p, nxt, other, nxt, p)]
        finally:
            await backend.aclose()
        return nxt, got, await _cold([p, nxt, other])

    nxt, got, (cold_p, cold_nxt, cold_other) = asyncio.run(go())
    for sample, cold in zip(got, (cold_p, cold_p, cold_nxt, cold_other, cold_nxt, cold_p), strict=True):
        assert (sample.output_ids, sample.logprobs) == (cold.output_ids, cold.logprobs)  # bit for bit
    cached = [r.info["cached_prompt_tokens"] for r in got]
    assert cached == [
        0,
        (len(p) - 1) // BATCH * BATCH,  # the repeat: every whole batch but the one with the last token
        (len(p) - 1) // BATCH * BATCH,  # the next turn: the whole batches it shares with p
        0,  # another prompt shares only the system prompt, less than one batch
        0,  # after it, nothing of nxt's batches is left
        (len(p) - 1) // BATCH * BATCH,  # p after nxt: nxt's first batches are p's
    ]
    assert cached[1] > 0 and {r.info["prompt_cache"] for r in got} == {"aligned"}


def test_without_prompt_cache_a_repeat_samples_exactly_like_a_cold_run() -> None:
    tok = load_tokenizer(MODEL)
    p = _prompt(tok, "Why do unit tests matter?")
    other = _prompt(tok, "Name three colours.")
    backend = _backend(cache_prompt=False)

    async def go():
        try:
            return [await backend.sample(x, PARAMS) for x in (p, p, other, p)]
        finally:
            await backend.aclose()

    a, b, _, c = asyncio.run(go())
    assert a.output_ids == b.output_ids == c.output_ids
    assert a.logprobs == b.logprobs == c.logprobs  # bit for bit: every prompt evaluated cold
    assert [r.info["cached_prompt_tokens"] for r in (a, b, c)] == [0, 0, 0]


def test_llamacpp_reuse_is_reported_and_recorded_on_the_turn() -> None:
    tok = load_tokenizer(MODEL)
    backend = make_backend("llamacpp", model=MODEL, context_tokens=256, parallel=2, threads=2)
    assert backend.cache_prompt == "any"  # the default with several slots
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


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"cache_prompt": ["any"]}, "cache_prompt must be"),
        ({"cache_prompt": "no"}, "cache_prompt must be 'aligned', 'any', 'off', True or False"),
        ({"cache_prompt": "aligned", "parallel": 2}, r"cache_prompt='aligned' needs parallel=1 \(got 2\)"),
    ],
)
def test_bad_cache_modes_are_refused_before_loading(kw, message) -> None:
    with pytest.raises(ValueError, match=message):
        make_backend("llamacpp", **{"model": MODEL, "context_tokens": 64, "parallel": 1, "threads": 1, **kw})


tokens = st.lists(st.integers(0, 5), max_size=80)


@given(tokens, tokens, st.integers(1, 16))
def test_aligned_reuse_is_whole_shared_batches_before_the_last_token(evaluated, prompt, batch) -> None:
    n = aligned_reuse(evaluated, prompt, batch)
    assert n % batch == 0 and 0 <= n <= max(len(prompt) - 1, 0)
    assert evaluated[:n] == prompt[:n]  # only what both hold
    # maximal: one more batch would leave the shared prefix or reach the last token
    more = n + batch
    assert more > len(prompt) - 1 or evaluated[:more] != prompt[:more]
