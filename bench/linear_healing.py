"""Per-turn linear healing cost vs full re-tokenization vs the reference LinearHealer.

Two conversation shapes, each at stored histories of about 10K, 50K and 100K tokens with a
~200-token delta (one new tool result); a Qwen3 tool loop in thinking mode (a shell tool,
build-log tool results; every assistant turn carries reasoning, so the Qwen3 template renders
earlier and last turns alike and the reference does not reset):

- ``fixed``: the same 9 messages at every size (system, user, 3 tool calls whose results grow
  with the history, the last tool call). The message count does not grow, only the text: the
  shape the issue's reference figures fit (the reference grows ~1.7x from 10K to 100K here as
  there). Its ratios are the RESULT's headline keys.
- ``loop``: tool results of ~4000 tokens, so the message count grows with the history (7, 27,
  51 messages). The one full-history Jinja render per turn costs ~20 us per message, so here the
  cost grows with the number of messages. Its ratios are the ``loop_*`` keys.

Timed side by side in one run, on the same conversation and tokenizer (medians):

- ``heal``: what the gateway does from request to prompt token IDs: normalizing the request
  (:class:`KnownMessages`, as the gateway's session does: the messages re-sent unchanged since
  the last turn are compared, not normalized or scanned again), :meth:`LinearHistory.plan` (one render of the stored history plus the delta, text
  slicing, tokenization of the delta only; the saved tokens are handed over as the plan's prefix),
  and building the prompt list the backend receives (``PromptPlan.prompt_ids``: one copy of the
  saved tokens; the reference's ``heal`` also returns a built list);
- ``drift``: the heal's deferred metric (token edit distance of the last assistant turn's
  re-render), which :meth:`PromptPlan.finish` computes after the prompt went to the backend;
- ``full``: rendering and tokenizing the whole conversation (what tree mode does every turn);
- ``reference``: ``LinearHealer.heal`` from ``agentcore-rl-toolkit[gateway]==0.2.0`` with its
  ``HfTemplateRenderer`` on the same tokenizer. It is installed only in the benchmark venv (see
  bench/README.md); when it is not importable the column is skipped with a note.

    python bench/linear_healing.py [--sizes 10000 50000 100000] [--repeats 15] [--shapes fixed loop]

Ends with ``RESULT heal_vs_full_100k=R heal_100k_vs_10k=R heal_vs_reference_100k=R
loop_heal_vs_full_100k=R loop_heal_100k_vs_10k=R loop_heal_vs_reference_100k=R`` (ratios of
median milliseconds; ``nan`` when the reference is unavailable).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time

from common import LOG_LINE, SHELL_TOOL

from strands_art.history.known import KnownMessages
from strands_art.history.linear import LinearHistory
from strands_art.history.normalize import normalize_messages
from strands_art.registry import load_tokenizer
from strands_art.render import ChatRenderer

TOOL = SHELL_TOOL
LOG = LOG_LINE


def assistant(k: int) -> dict:
    """An assistant tool call as the gateway produced it (arguments: the sampled JSON text)."""
    args = {"command": f"mvn -q -pl module{k % 7} verify -DskipTests={k % 2 == 0}"}
    return {
        "role": "assistant",
        "content": "",
        "reasoning_content": f"I will build module{k % 7} next.",
        "tool_calls": [
            {"id": f"c{k}", "type": "function", "function": {"name": "shell", "arguments": json.dumps(args)}}
        ],
    }


def output_text(msg: dict) -> str:
    fn = msg["tool_calls"][0]["function"]
    think = f"<think>\n{msg['reasoning_content']}\n</think>\n\n"
    return (
        think
        + f'<tool_call>\n{{"name": "{fn["name"]}", "arguments": {fn["arguments"]}}}\n</tool_call><|im_end|>'
    )


def conversation(renderer: ChatRenderer, target: int, result_tokens: int) -> list[dict]:
    """system, user, then (assistant tool call, tool result of ~``result_tokens``) pairs up to ``target``."""
    lines = max(1, result_tokens // len(renderer.encode_sync(LOG)))
    per_pair = len(renderer.encode_sync(LOG * lines)) + 40
    pairs = 0
    while (pairs + 1) * per_pair < target:
        pairs += 1
    return _tool_loop(pairs, lines)


def fixed_conversation(renderer: ChatRenderer, target: int, pairs: int = 3) -> list[dict]:
    """The same ``2 * pairs + 3`` messages at every size; the tool results share ``target`` tokens."""
    lines = max(1, (target // pairs - 40) // len(renderer.encode_sync(LOG)))
    return _tool_loop(pairs, lines)


def _tool_loop(pairs: int, lines: int) -> list[dict]:
    msgs = [
        {"role": "system", "content": "You migrate Java projects."},
        {"role": "user", "content": "Migrate it."},
    ]
    for k in range(pairs):
        msgs += [assistant(k), {"role": "tool", "tool_call_id": f"c{k}", "content": LOG * lines}]
    return msgs + [assistant(pairs)]


DELTA = {"role": "tool", "tool_call_id": "new", "content": LOG * 8}  # ~200 tokens


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


async def prepare_ours(renderer, msgs, out_ids) -> tuple[LinearHistory, KnownMessages, list[dict]]:
    """A linear history after the conversation's first turn, the session's known messages (that
    turn's request and answer, as the gateway remembers them), and the next request (+ DELTA)."""
    h = LinearHistory(renderer)
    known = KnownMessages()
    plan = await h.plan(known.normalize(msgs[:-1]), [TOOL])
    h.commit(plan, out_ids, "stop", msgs[-1])
    known.remember(normalize_messages(msgs))
    # a request as a harness sends it: fresh objects, equal text (nothing shared with the stored)
    request = json.loads(json.dumps(msgs + [DELTA]))
    return h, known, request


async def heal_once(h: LinearHistory, known: KnownMessages, request: list[dict]):
    """(heal seconds, drift seconds, plan): normalize + plan + the prompt list, then the deferred drift."""
    t = time.perf_counter()
    plan = await h.plan(known.normalize(request), [TOOL])
    plan.prompt_ids  # noqa: B018 - the list the gateway sends (prefix + suffix), built once
    t1 = time.perf_counter()
    await plan.finish(h.renderer.encode)
    t2 = time.perf_counter()
    # the same request is healed again next round without a commit: restore the saved history
    # (a real turn commits instead; either is O(history) list work after the prompt went out)
    h.abandon()
    return t1 - t, t2 - t1, plan


async def time_ours(
    states: dict[int, tuple[LinearHistory, KnownMessages, list[dict]]], repeats: int
) -> dict[int, tuple]:
    """Per size (heal ms, drift ms, prompt length, heal path); sizes interleaved round by round so
    machine noise hits them alike."""
    heal: dict[int, list[float]] = {n: [] for n in states}
    drift: dict[int, list[float]] = {n: [] for n in states}
    plans = {}
    for _ in range(repeats):
        for n, (h, known, request) in states.items():
            dt_heal, dt_drift, plans[n] = await heal_once(h, known, request)
            heal[n].append(dt_heal)
            drift[n].append(dt_drift)
    for plan in plans.values():
        assert plan.events[0]["kind"] == "heal", plan.events
    return {
        n: (median_ms(heal[n]), median_ms(drift[n]), len(plans[n].prompt_ids), plans[n].events[0]["reason"])
        for n in states
    }


def time_render(renderer, msgs, repeats):
    """One render of the complete history (the part of a heal that grows with the history)."""
    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        renderer.render(msgs + [DELTA], [TOOL], True)
        samples.append(time.perf_counter() - t)
    return median_ms(samples)


def time_full(renderer, msgs, repeats):
    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        renderer.encode_sync(renderer.render(msgs + [DELTA], [TOOL], True))
        samples.append(time.perf_counter() - t)
    return median_ms(samples)


async def time_reference(tok, msgs, prompt_ids, out_ids, repeats):
    from agentcore_rl_toolkit.rollout_gateway import HfTemplateRenderer, LinearHealer

    healer = LinearHealer(HfTemplateRenderer(tok))
    healer.commit(
        "s",
        fed_prompt_ids=prompt_ids,
        output_ids=out_ids,
        messages=msgs[:-1],
        response_message=msgs[-1],
        tools=[TOOL],
    )
    samples, ids = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        ids = await healer.heal("s", msgs + [DELTA], [TOOL])
        samples.append(time.perf_counter() - t)
    assert healer.counters["nonlinear"] == 0, healer.counters
    return median_ms(samples), len(ids)


SHAPES = {
    "fixed": lambda renderer, size, args: fixed_conversation(renderer, size),
    "loop": lambda renderer, size, args: conversation(renderer, size, args.result_tokens),
}


async def run_shape(name, renderer, tok, args, have_ref) -> dict[int, tuple[float, float, float]]:
    print(
        f"\nshape {name}: {'the same 9 messages at every size' if name == 'fixed' else f'tool results of ~{args.result_tokens} tokens'}"
    )
    print(
        f"{'history':>9} {'msgs':>5} {'prompt':>8} {'heal ms':>8} {'render':>7} {'drift':>6} {'path':>6} "
        f"{'full ms':>8} {'full/heal':>9} {'ref ms':>8} {'ref/heal':>8}"
    )
    rows = {}
    convs, states = {}, {}
    for size in args.sizes:
        msgs = convs[size] = SHAPES[name](renderer, size, args)
        states[size] = await prepare_ours(renderer, msgs, renderer.encode_sync(output_text(msgs[-1])))
    ours = await time_ours(states, 8 * args.repeats)
    for size in args.sizes:
        msgs = convs[size]
        prompt_ids = renderer.encode_sync(renderer.render(normalize_messages(msgs[:-1]), [TOOL], True))
        out_ids = renderer.encode_sync(output_text(msgs[-1]))
        heal_ms, drift_ms, n_prompt, path = ours[size]
        render_ms = time_render(renderer, normalize_messages(msgs), args.repeats)
        full_ms = time_full(renderer, normalize_messages(msgs), max(3, args.repeats // 3))
        ref_ms = float("nan")
        if have_ref:
            ref_ms, n_ref = await time_reference(tok, msgs, prompt_ids, out_ids, args.repeats)
            assert n_ref == n_prompt, (n_ref, n_prompt)
        rows[size] = (heal_ms, full_ms, ref_ms)
        print(
            f"{size:>9} {len(msgs):>5} {n_prompt:>8} {heal_ms:>8.2f} {render_ms:>7.2f} {drift_ms:>6.2f} {path:>6} "
            f"{full_ms:>8.1f} {full_ms / heal_ms:>9.0f} {ref_ms:>8.2f} {ref_ms / heal_ms:>8.2f}"
        )
    if have_ref and len(rows) > 1:
        big, small = max(rows), min(rows)
        print(f"reference {big}/{small} cost: {rows[big][2] / rows[small][2]:.2f}x")
    return rows


def ratios(rows: dict[int, tuple[float, float, float]], prefix: str) -> str:
    big, small = max(rows), min(rows)
    heal_big, full_big, ref_big = rows[big]
    return (
        f"{prefix}heal_vs_full_100k={full_big / heal_big:.1f} {prefix}heal_100k_vs_10k={heal_big / rows[small][0]:.2f} "
        f"{prefix}heal_vs_reference_100k={heal_big / ref_big:.2f}"
    )


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000, 100_000])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument(
        "--result-tokens", type=int, default=4000, help="tokens per tool result in the loop shape"
    )
    ap.add_argument("--shapes", nargs="+", choices=sorted(SHAPES), default=["fixed", "loop"])
    args = ap.parse_args()
    tok = load_tokenizer("qwen3")
    renderer = ChatRenderer(tok)
    try:
        import agentcore_rl_toolkit.rollout_gateway  # noqa: F401

        have_ref = True
    except ImportError as exc:
        have_ref = False
        print(
            f"note: reference column skipped: agentcore-rl-toolkit[gateway]==0.2.0 is not importable ({exc}); "
            "see bench/README.md for the benchmark venv"
        )
    print(
        f"python {sys.version.split()[0]}, tokenizer qwen3 (ChatML), delta = one ~200-token tool result; medians of "
        f"{8 * args.repeats} heals (sizes interleaved), {args.repeats} of the rest; heal = normalize + plan + prompt list; drift = the deferred metric (after the prompt is sent)"
    )
    results = [
        ratios(await run_shape(name, renderer, tok, args, have_ref), "" if name == "fixed" else f"{name}_")
        for name in args.shapes
    ]
    print("RESULT " + " ".join(results))


if __name__ == "__main__":
    asyncio.run(main())
