"""Per-turn gateway overhead (everything but sampling) against prompt length, tree mode.

Uses the scripted backend (sampling costs ~0), the real Qwen3 tokenizer and chat template, and
a tool-using conversation grown to several prompt lengths. For each length it times one
``generate()`` end to end and reports the gateway's own share (render + tokenize + capture +
parse) in milliseconds, next to plain full re-tokenization of the same prompt for scale, measured
side by side in the same run.

    python bench/gateway_overhead.py [--lengths 1000 10000 50000] [--repeats 5]

Ends with ``RESULT overhead_ms_<N>=X ... overhead_vs_tokenize_<N>=R``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from common import LOG_LINE, SHELL_TOOL

from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.registry import load_tokenizer

TOOL = SHELL_TOOL
FILLER = LOG_LINE


def conversation(tok, target_tokens: int) -> list[dict]:
    """A tool loop of about ``target_tokens`` rendered tokens (pairs sized from a 2-pair probe)."""

    def build(pairs: int) -> list[dict]:
        msgs = [
            {"role": "system", "content": "You migrate Java projects."},
            {"role": "user", "content": "Migrate."},
        ]
        for k in range(pairs):
            args = {"command": f"mvn -q verify #{k}"}
            call = {"id": f"c{k}", "type": "function", "function": {"name": "shell", "arguments": args}}
            msgs.append({"role": "assistant", "content": "", "tool_calls": [call]})
            msgs.append({"role": "tool", "tool_call_id": f"c{k}", "content": FILLER * 20})
        return msgs

    def count(msgs: list[dict]) -> int:
        text = tok.apply_chat_template(msgs, tools=[TOOL], tokenize=False)
        return len(tok.backend_tokenizer.encode(text, add_special_tokens=False).ids)

    base, two = count(build(0)), count(build(2))
    per_pair = (two - base) / 2
    return build(max(1, round((target_tokens - base) / per_pair)))


async def time_turn(tok, msgs, repeats: int) -> tuple[float, int]:
    out = '<tool_call>\n{"name": "shell", "arguments": {"command": "ls"}}\n</tool_call><|im_end|>'
    samples, n = [], 0
    for _ in range(repeats):
        gw = RolloutGateway(tok, ScriptedBackend(tok, [{"text": out}]), max_context_tokens=1 << 30)
        sid = gw.open_session("b")
        t0 = time.perf_counter()
        r = await gw.generate(sid, msgs, [TOOL])
        total = time.perf_counter() - t0
        samples.append(total - r.turn.timings["sample"])
        n = len(r.turn.prompt_ids)
    return statistics.median(samples) * 1000, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[1000, 10000, 50000])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    tok = load_tokenizer("qwen3")
    result = []
    print(f"{'prompt tokens':>14} {'gateway ms':>11} {'tokenize ms':>12} {'ratio':>6}")
    for n in args.lengths:
        msgs = conversation(tok, n)
        overhead, prompt_len = asyncio.run(time_turn(tok, msgs, args.repeats))
        text = tok.apply_chat_template(msgs, tools=[TOOL], tokenize=False, add_generation_prompt=True)
        tk = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            tok.backend_tokenizer.encode(text, add_special_tokens=False)
            tk.append(time.perf_counter() - t0)
        tok_ms = statistics.median(tk) * 1000
        print(f"{prompt_len:>14} {overhead:>11.2f} {tok_ms:>12.2f} {overhead / tok_ms:>6.2f}")
        result += [f"overhead_ms_{n}={overhead:.2f}", f"overhead_vs_tokenize_{n}={overhead / tok_ms:.2f}"]
    print("RESULT " + " ".join(result))


if __name__ == "__main__":
    main()
