"""Event-loop responsiveness while 8 sessions each heal a 100K-token history concurrently.

Builds 8 linear sessions (Qwen3 tool loops of ~100K tokens, 51 messages), then runs several rounds
in which all 8 plan their next turn at once (each render on the event loop in slices of
``RENDER_SLICE_S`` of template work, fragments tokenized inline or in a worker thread, ``asyncio.to_thread``). A ticker coroutine sleeps 1 ms in a loop and records how late it wakes: the
largest lateness is the largest stall of the event loop.

    python bench/event_loop.py [--sessions 8] [--tokens 100000] [--rounds 5]

Ends with ``RESULT max_stall_ms=X`` (target: under 20 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from linear_healing import DELTA, TOOL, conversation, output_text  # noqa: E402

from strands_art.history.linear import LinearHistory  # noqa: E402
from strands_art.history.normalize import normalize_messages  # noqa: E402
from strands_art.registry import load_tokenizer  # noqa: E402
from strands_art.render import ChatRenderer  # noqa: E402


async def ticker(stop: asyncio.Event, lateness: list[float], period: float = 0.001) -> None:
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.sleep(period)
        lateness.append(time.perf_counter() - t - period)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    renderer = ChatRenderer(load_tokenizer("qwen3"))
    sessions = []
    for s in range(args.sessions):
        msgs = conversation(renderer, args.tokens, 4000)
        msgs[1] = {"role": "user", "content": f"Migrate repository {s}."}
        h = LinearHistory(renderer)
        plan = await h.plan(normalize_messages(msgs[:-1]), [TOOL])
        h.commit(plan, renderer.encode_sync(output_text(msgs[-1])), "stop", msgs[-1])
        sessions.append((h, normalize_messages(msgs + [DELTA])))
    print(
        f"{args.sessions} sessions of ~{len(plan.prompt_ids)} tokens ready; {args.rounds} concurrent heal rounds"
    )

    stop, lateness = asyncio.Event(), []
    tick = asyncio.create_task(ticker(stop, lateness))
    await asyncio.sleep(0.05)
    baseline = list(lateness)
    per_round = []
    for _ in range(args.rounds):
        t = time.perf_counter()
        plans = await asyncio.gather(*(h.plan(m, [TOOL]) for h, m in sessions))
        per_round.append(time.perf_counter() - t)
        assert all(p.events[0]["kind"] == "heal" for p in plans)
    stop.set()
    await tick
    busy = lateness[len(baseline) :]
    print(f"round wall time: median {1e3 * statistics.median(per_round):.1f} ms (8 heals each)")
    print(
        f"ticker lateness: idle max {1e3 * max(baseline or [0]):.2f} ms; under load median "
        f"{1e3 * statistics.median(busy):.2f} ms, p99 {1e3 * sorted(busy)[int(0.99 * (len(busy) - 1))]:.2f} ms, "
        f"max {1e3 * max(busy):.2f} ms over {len(busy)} ticks"
    )
    print(f"RESULT max_stall_ms={1e3 * max(busy):.1f}")


if __name__ == "__main__":
    asyncio.run(main())
