"""What reproducible llama.cpp sampling costs: ``cache_prompt=False`` and ``batch_tokens=1`` vs the
default prompt cache.

A multi-turn agent re-sends its whole history every turn; with the prompt cache llama.cpp
re-evaluates only the tokens after the common prefix, without it the whole prompt. One model per
setting (Qwen2.5-Coder-0.5B Q4_K_M, 1 slot), the same prompt (a tool loop's history of about
``--prompt-tokens`` tokens) sampled ``--repeats`` times after a first, warming sample; per
sample: wall time, prompt tokens taken from the cache, and whether tokens and logprobs equal the
first (cold) sample's; and the cold sample's own time (the whole prompt evaluated), where
``batch_tokens=1`` (one token per forward pass, cache kept) pays its cost.

    python bench/llamacpp_prompt_cache.py [--prompt-tokens 160] [--new-tokens 4] [--repeats 3] [--threads 2]

Ends with ``RESULT cached_ms=M uncached_ms=M uncached_vs_cached=R cached_repeats_equal_cold=K/N
uncached_repeats_equal_cold=K/N onebatch_repeats_equal_cold=K/N cold_ms_512=M cold_ms_1=M
onebatch_vs_512_cold=R`` (medians of the repeats; the cold times of one sample each).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from common import LOG_LINE

from strands_art.backends import SamplingParams, make_backend
from strands_art.registry import load_tokenizer

MODEL = "qwen2.5-coder-0.5b"


def prompt(tok, tokens: int) -> list[int]:
    """A user turn holding build-log lines, about ``tokens`` tokens in all."""
    text = "Summarize this build log in one line.\n"
    while len(tok.encode(text + LOG_LINE, add_special_tokens=False)) < tokens:
        text += LOG_LINE
    return tok.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
    )["input_ids"]


async def run(
    cache: bool, ids: list[int], params: SamplingParams, repeats: int, threads: int, batch_tokens: int = 512
):
    backend = make_backend(
        "llamacpp",
        model=MODEL,
        context_tokens=len(ids) + 64,
        parallel=1,
        threads=threads,
        cache_prompt=cache,
        batch_tokens=batch_tokens,
    )
    try:
        t = time.perf_counter()
        cold = await backend.sample(ids, params)
        cold.info["cold_ms"] = (time.perf_counter() - t) * 1e3
        rows = []
        for _ in range(repeats):
            t = time.perf_counter()
            r = await backend.sample(ids, params)
            rows.append(
                (
                    (time.perf_counter() - t) * 1e3,
                    r.info.get("cached_prompt_tokens"),
                    r.output_ids == cold.output_ids and r.logprobs == cold.logprobs,
                )
            )
        return cold, rows
    finally:
        await backend.aclose()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompt-tokens", type=int, default=160)
    ap.add_argument("--new-tokens", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    tok = load_tokenizer(MODEL)
    ids = prompt(tok, args.prompt_tokens)
    params = SamplingParams(temperature=0.8, top_p=1.0, max_new_tokens=args.new_tokens, seed=4242)
    print(
        f"{MODEL}, 1 slot, {args.threads} threads, prompt {len(ids)} tokens, {args.new_tokens} new tokens, seed 4242"
    )
    out, cold_ms = {}, {}
    for name, cache, batch in (("cached", True, 512), ("uncached", False, 512), ("onebatch", True, 1)):
        cold, rows = await run(cache, ids, params, args.repeats, args.threads, batch)
        out[name], cold_ms[name] = rows, cold.info["cold_ms"]
        for k, (ms, cached, equal) in enumerate(rows):
            print(f"{name:>9} repeat {k}: {ms:8.0f} ms  cached_prompt_tokens={cached}  equal_to_cold={equal}")
        print(
            f"{name:>9} cold sample: {cold.info['cold_ms']:8.0f} ms  "
            f"cached_prompt_tokens={cold.info.get('cached_prompt_tokens')}"
        )
    cached_ms = statistics.median(ms for ms, _, _ in out["cached"])
    uncached_ms = statistics.median(ms for ms, _, _ in out["uncached"])
    eq = {k: f"{sum(e for _, _, e in v)}/{len(v)}" for k, v in out.items()}
    print(
        f"RESULT cached_ms={cached_ms:.0f} uncached_ms={uncached_ms:.0f} uncached_vs_cached={uncached_ms / cached_ms:.2f} "
        f"cached_repeats_equal_cold={eq['cached']} uncached_repeats_equal_cold={eq['uncached']} "
        f"onebatch_repeats_equal_cold={eq['onebatch']} cold_ms_512={cold_ms['cached']:.0f} "
        f"cold_ms_1={cold_ms['onebatch']:.0f} onebatch_vs_512_cold={cold_ms['onebatch'] / cold_ms['cached']:.2f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
