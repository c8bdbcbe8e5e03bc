"""Decode and prefill speed of the sampling backends on one model and prompt, side by side.

Backends: llama.cpp (``xllamacpp``, the GGUF as is), transformers (the same GGUF de-quantized to
float32) and vLLM (only where the ``vllm`` package is importable; skipped with a note otherwise).
Every backend gets the same token-ID prompt through the same ``SamplingBackend.sample`` call.

- prefill tokens/s: prompt tokens / time of a 1-token generation on a prompt the backend has
  not cached (a fresh first token defeats llama.cpp's prompt cache);
- decode tokens/s: (N - 1) / (time of an N-token generation - time of a 1-token generation),
  on the same uncached-prompt scheme, median of ``--repeats``;
- the memory-bandwidth bound: decoding reads every weight once per token, so tokens/s cannot
  exceed (measured copy bandwidth) / (bytes of weights). Bandwidth: a large ``numpy`` copy
  (bytes read + bytes written per second, best of 5). Weights: the GGUF's size for llama.cpp,
  parameters x 4 bytes for float32 transformers.

Usage::

    python bench/backends.py [--model qwen2.5-coder-1.5b] [--threads N] [--decode 32]

Ends with ``RESULT llamacpp_decode_tps=… transformers_decode_tps=… llamacpp_vs_transformers=…
llamacpp_fraction_of_bound=…``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import os
import statistics
import time

import numpy as np

from strands_art.backends import SamplingParams, make_backend
from strands_art.registry import gguf_file, load_tokenizer

PROMPT = (
    "You migrate a Java 8 Maven project to Java 17. Read the pom.xml below and list every line "
    "that must change, then explain why each change is needed.\n\n<project>\n  <modelVersion>4.0.0"
    "</modelVersion>\n  <groupId>org.example</groupId>\n  <artifactId>demo</artifactId>\n  "
    "<version>1.0</version>\n  <properties>\n    <maven.compiler.source>1.8</maven.compiler.source>"
    "\n    <maven.compiler.target>1.8</maven.compiler.target>\n  </properties>\n  <dependencies>\n"
    "    <dependency>\n      <groupId>junit</groupId>\n      <artifactId>junit</artifactId>\n"
    "      <version>4.12</version>\n    </dependency>\n  </dependencies>\n</project>"
)


def copy_bandwidth(nbytes: int = 512 << 20, repeats: int = 5) -> float:
    """Bytes/s of a large numpy copy (read + write), best of ``repeats``."""
    src = np.ones(nbytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return 2 * nbytes / best


async def measure(backend, prompts: list[list[int]], decode: int) -> tuple[float, float]:
    """(prefill tokens/s, decode tokens/s), medians over the prompts (each used once per length)."""
    half = len(prompts) // 2
    prefill, decode_tps = [], []
    for one, many in zip(prompts[:half], prompts[half:], strict=True):
        t0 = time.perf_counter()
        await backend.sample(one, SamplingParams(temperature=0.7, max_new_tokens=1, seed=1))
        t1 = time.perf_counter() - t0
        prefill.append(len(one) / t1)
        t0 = time.perf_counter()
        out = await backend.sample(many, SamplingParams(temperature=0.7, max_new_tokens=decode, seed=1))
        tn = time.perf_counter() - t0
        n = len(out.output_ids)
        if n > 1 and tn > t1:
            decode_tps.append((n - 1) / (tn - t1))
    return statistics.median(prefill), statistics.median(decode_tps) if decode_tps else float("nan")


def distinct_prompts(base: list[int], k: int, vocab_ids: list[int]) -> list[list[int]]:
    """``k`` copies of ``base`` differing in their first token (no prompt-cache hits)."""
    return [[vocab_ids[i % len(vocab_ids)], *base[1:]] for i in range(k)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: the backend's)")
    ap.add_argument("--decode", type=int, default=32, help="tokens per decode measurement")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-transformers", action="store_true")
    args = ap.parse_args()

    tok = load_tokenizer(args.model)
    base = tok.apply_chat_template(
        [{"role": "user", "content": PROMPT}], add_generation_prompt=True, tokenize=True
    )["input_ids"]
    starts = [
        tok.convert_tokens_to_ids(t) for t in ("<|im_start|>", "Hello", "The", "A", "We", "In", "On", "At")
    ]
    prompts = distinct_prompts(base, 2 * args.repeats, starts)
    bandwidth = copy_bandwidth()
    gguf_bytes = os.path.getsize(gguf_file(args.model))
    print(
        f"model {args.model}: GGUF {gguf_bytes / 1e9:.2f} GB; prompt {len(base)} tokens; decode {args.decode} tokens"
    )
    print(f"cpus {os.cpu_count()}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"memory bandwidth (numpy copy, read+write): {bandwidth / 1e9:.2f} GB/s")

    rows = []
    t0 = time.perf_counter()
    llama = make_backend("llamacpp", model=args.model, context_tokens=2048, parallel=1, threads=args.threads)
    load = time.perf_counter() - t0
    pre, dec = asyncio.run(measure(llama, prompts, args.decode))
    bound = bandwidth / gguf_bytes
    rows.append(("llama.cpp", f"Q4_K_M, {llama.threads} threads", load, pre, dec, bound))
    asyncio.run(llama.aclose())
    del llama
    gc.collect()

    tf_dec = float("nan")
    if not args.skip_transformers:
        t0 = time.perf_counter()
        tf = make_backend("transformers", model_name_or_dir=args.model)
        load = time.perf_counter() - t0
        params = sum(p.numel() for p in tf.model.parameters())
        threads = __import__("torch").get_num_threads()
        pre, tf_dec = asyncio.run(measure(tf, prompts[:2], min(args.decode, 16)))
        rows.append(
            ("transformers", f"float32, {threads} threads", load, pre, tf_dec, bandwidth / (params * 4))
        )
        asyncio.run(tf.aclose())
        del tf
        gc.collect()
    if importlib.util.find_spec("vllm") is None:
        print("vllm: not installed here (see docs/setup-vllm.md), skipped")

    print(
        f"{'backend':>13} {'weights':>22} {'load s':>8} {'prefill t/s':>12} {'decode t/s':>11} {'bound t/s':>10} {'of bound':>9}"
    )
    for name, what, load, pre, dec, bnd in rows:
        print(f"{name:>13} {what:>22} {load:8.1f} {pre:12.1f} {dec:11.2f} {bnd:10.1f} {dec / bnd:9.1%}")
    ll = rows[0]
    ratio = ll[4] / tf_dec if tf_dec == tf_dec and tf_dec > 0 else float("nan")
    print(
        f"RESULT llamacpp_decode_tps={ll[4]:.2f} transformers_decode_tps={tf_dec:.2f} "
        f"llamacpp_vs_transformers={ratio:.1f} llamacpp_fraction_of_bound={ll[4] / ll[5]:.3f}"
    )


if __name__ == "__main__":
    main()
