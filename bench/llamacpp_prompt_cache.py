"""What reproducible llama.cpp sampling costs: the prompt cache's three modes on a multi-turn rollout.

A multi-turn agent re-sends its whole history every turn. ``cache_prompt="any"`` (llama.cpp's own
longest-prefix reuse) re-evaluates only the new tokens; ``"aligned"`` (the default with one slot)
reuses only whole ``batch_tokens`` batches a previous prompt evaluated, so it re-reads up to one
batch more per turn and samples exactly like a cold run; ``"off"`` evaluates every prompt whole.
One rollout per mode (Qwen2.5-Coder-0.5B Q4_K_M, 1 slot): a first prompt of about
``--prompt-tokens`` tokens (build-log lines), then ``--turns`` turns, each the previous prompt +
the answer sampled in ``"off"`` mode + a tool result of about ``--result-tokens`` tokens (the same
prompts in every mode). The modes run alternated, ``--rounds`` times, in one process; per mode:
the rollout's median wall time, prompt tokens from the cache, and how many turns sampled the same
tokens and logprobs as the cold (``"off"``) run, bit for bit.

    python bench/llamacpp_prompt_cache.py [--prompt-tokens 2700] [--turns 4] [--result-tokens 150] \\
        [--new-tokens 24] [--rounds 3] [--threads 2]

Ends with ``RESULT any_s=S aligned_s=S off_s=S aligned_vs_any=R off_vs_any=R
aligned_equal_cold=K/N any_equal_cold=K/N``.
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
MODES = ("any", "aligned", "off")


def _lines(tok, tokens: int) -> str:
    text = ""
    while len(tok.encode(text + LOG_LINE, add_special_tokens=False)) < tokens:
        text += LOG_LINE
    return text


def _turn(tok, text: str) -> list[int]:
    """A user message as the chat template renders it after an assistant turn, generation prompt included."""
    full = tok.apply_chat_template(
        [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": "y"},
            {"role": "user", "content": text},
        ],
        add_generation_prompt=True,
        tokenize=True,
    )["input_ids"]
    head = tok.apply_chat_template(
        [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}], tokenize=True
    )["input_ids"]
    return full[len(head) :]


async def rollout(
    mode: str, prompts: list[list[int]] | None, args, tok, params
) -> tuple[float, list, list[list[int]]]:
    """One rollout in ``mode``: (seconds, samples, the prompts sent); ``prompts`` None builds them
    from this run's answers ("off" only)."""
    first = tok.apply_chat_template(
        [
            {
                "role": "user",
                "content": "Summarize this build log in one line.\n" + _lines(tok, args.prompt_tokens),
            }
        ],
        add_generation_prompt=True,
        tokenize=True,
    )["input_ids"]
    result = _turn(tok, "Tool result:\n" + _lines(tok, args.result_tokens))
    backend = make_backend(
        "llamacpp",
        model=MODEL,
        context_tokens=len(first) + args.turns * (len(result) + args.new_tokens) + 64,
        parallel=1,
        threads=args.threads,
        cache_prompt=mode,
    )
    samples, built = [], [first]
    try:
        t = time.perf_counter()
        for k in range(args.turns):
            prompt = prompts[k] if prompts is not None else built[k]
            s = await backend.sample(prompt, params)
            samples.append(s)
            built.append(prompt + s.output_ids + [tok.convert_tokens_to_ids("<|im_end|>"), 198] + result)
        return time.perf_counter() - t, samples, prompts if prompts is not None else built[:-1]
    finally:
        await backend.aclose()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompt-tokens", type=int, default=2700)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--result-tokens", type=int, default=150)
    ap.add_argument("--new-tokens", type=int, default=24)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    tok = load_tokenizer(MODEL)
    params = SamplingParams(temperature=0.8, top_p=1.0, max_new_tokens=args.new_tokens, seed=4242)
    _, cold, prompts = await rollout(
        "off", None, args, tok, params
    )  # the cold reference, warms the page cache
    print(
        f"{MODEL}, 1 slot, {args.threads} threads, {args.turns} turns, prompts "
        f"{len(prompts[0])}..{len(prompts[-1])} tokens, {args.new_tokens} new tokens, seed 4242"
    )
    secs: dict[str, list[float]] = {m: [] for m in MODES}
    equal: dict[str, list[bool]] = {m: [] for m in MODES}
    for r in range(args.rounds):
        for mode in MODES if r % 2 == 0 else MODES[::-1]:
            s, samples, _ = await rollout(mode, prompts, args, tok, params)
            secs[mode].append(s)
            same = [
                (a.output_ids, a.logprobs) == (c.output_ids, c.logprobs)
                for a, c in zip(samples, cold, strict=True)
            ]
            equal[mode] += same
            cached = [a.info.get("cached_prompt_tokens") for a in samples]
            print(f"round {r} {mode:>7}: {s:7.1f} s  cached_prompt_tokens={cached}  equal_to_cold={same}")
    med = {m: statistics.median(v) for m, v in secs.items()}
    eq = {m: f"{sum(v)}/{len(v)}" for m, v in equal.items()}
    print(
        f"RESULT any_s={med['any']:.1f} aligned_s={med['aligned']:.1f} off_s={med['off']:.1f} "
        f"aligned_vs_any={med['aligned'] / med['any']:.2f} off_vs_any={med['off'] / med['any']:.2f} "
        f"aligned_equal_cold={eq['aligned']} any_equal_cold={eq['any']}"
    )


if __name__ == "__main__":
    asyncio.run(main())
