"""Turns per second through the HTTP front vs in-process, side by side in one run, per protocol.

Many concurrent sessions (default 200) each run a tool loop of N turns (default 10) on the
scripted backend with the real Qwen3 tokenizer and chat template, once in-process and once per
protocol per round:

- **in-process**: ``RolloutGateway.generate()`` called directly (what ``ARTModel`` does);
- **chat** / **anthropic** / **responses**: the same conversation as Chat Completions, Anthropic
  Messages or the Responses API against ``strands-art``'s aiohttp front on 127.0.0.1 (an
  aiohttp client by default, or the OpenAI SDK for chat), in the same process and event loop
  (one core does client, server and gateway work, like the in-process run), sessions opened
  and closed over HTTP.

Every HTTP trajectory is checked against the in-process one of the same session (same prompt IDs,
same rows) and against the row invariants (loss mask 1 exactly on sampled tokens, logprobs on
them, every turn's prompt a prefix of its row); violations are counted. After each round, with
every session closed, the live Row/Turn/Trajectory objects are counted (must be 0) and the
process RSS is printed (must stay flat): bounded memory.

    python bench/http_front.py [--sessions 200] [--turns 10] [--rounds 3] [--protocols chat,anthropic,responses]

Ends with ``RESULT http_vs_inprocess=R http_turns_per_s=X inprocess_turns_per_s=Y violations=V
live_rows_after=L rss_growth_mb=M`` (chat) and ``<protocol>_turns_per_s=X
<protocol>_vs_inprocess=R`` for the others; ``..._vs_inprocess`` is HTTP turns/s over
in-process turns/s (1.0 = no cost).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import time
from typing import Any

import aiohttp
import openai
from common import SHELL_TOOL

from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.registry import load_tokenizer
from strands_art.serve import create_app, start
from strands_art.serve.app import REGISTRY
from strands_art.trajectory import Row, Trajectory, Turn

CALL = '<tool_call>\n{"name": "shell", "arguments": {"command": "mvn -q verify"}}\n</tool_call><|im_end|>'
SYSTEM = "You migrate Java projects. Use the shell tool."


def tool_result(session: int, turn: int) -> str:
    return "".join(f"[INFO] session {session} turn {turn}: module {k} compiled\n" for k in range(8))


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def first_messages(session: int) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Migrate repository #{session}."},
    ]


async def in_process(gw: RolloutGateway, sessions: int, turns: int) -> tuple[float, dict[str, Any]]:
    async def one(k: int) -> None:
        rid = gw.open_session(f"s{k}", group_id=f"g{k % 8}")
        messages = first_messages(k)
        for t in range(turns):
            r = await gw.generate(rid, messages, [SHELL_TOOL])
            call = r.assistant_message["tool_calls"][0]
            messages = messages + [
                r.assistant_message,
                {"role": "tool", "tool_call_id": call["id"], "content": tool_result(k, t)},
            ]

    t0 = time.perf_counter()
    await asyncio.gather(*(one(k) for k in range(sessions)))
    elapsed = time.perf_counter() - t0
    return elapsed, {f"s{k}": gw.close_session(f"s{k}").to_dict() for k in range(sessions)}


ANTHROPIC_TOOL = {
    "name": SHELL_TOOL["function"]["name"],
    "description": SHELL_TOOL["function"]["description"],
    "input_schema": SHELL_TOOL["function"]["parameters"],
}
RESPONSES_TOOL = {"type": "function", **SHELL_TOOL["function"]}


class Conversation:
    """One session's history in one protocol's wire format: the request of its next turn and
    what the harness appends after it (the answer, then the tool result)."""

    def __init__(self, protocol: str, k: int) -> None:
        self.protocol, self.k = protocol, k
        first = first_messages(k)
        self.items: list[Any] = first if protocol == "chat" else [first[1]]

    def request(self) -> tuple[str, dict[str, Any]]:
        if self.protocol == "anthropic":
            body = {"model": "policy", "max_tokens": 1024, "system": SYSTEM, "messages": self.items}
            return "/v1/messages", {**body, "tools": [ANTHROPIC_TOOL]}
        if self.protocol == "responses":
            body = {"model": "policy", "instructions": SYSTEM, "input": self.items}
            return "/v1/responses", {**body, "tools": [RESPONSES_TOOL]}
        return "/v1/chat/completions", {"model": "policy", "messages": self.items, "tools": [SHELL_TOOL]}

    def add(self, answer: dict[str, Any], turn: int) -> None:
        result = tool_result(self.k, turn)
        if self.protocol == "anthropic":
            call = next(b for b in answer["content"] if b["type"] == "tool_use")
            reply = {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": result}],
            }
            self.items = self.items + [{"role": "assistant", "content": answer["content"]}, reply]
        elif self.protocol == "responses":
            call = next(i for i in answer["output"] if i["type"] == "function_call")
            reply = {"type": "function_call_output", "call_id": call["call_id"], "output": result}
            self.items = self.items + answer["output"] + [reply]
        else:
            message = answer["choices"][0]["message"] if "choices" in answer else answer
            call = message["tool_calls"][0]
            reply = {"role": "tool", "tool_call_id": call["id"], "content": result}
            self.items = self.items + [message, reply]


async def over_http(
    base: str, sessions: int, turns: int, tag: str, client_kind: str, protocol: str = "chat"
) -> tuple[float, dict[str, Any], list[float]]:
    """Run the sessions against the front in ``protocol`` with an aiohttp client (default: what
    the server costs) or, for chat, the OpenAI SDK (adds the SDK's own request building and
    response parsing)."""
    latencies: list[float] = []
    out: dict[str, Any] = {}
    connector = aiohttp.TCPConnector(limit=sessions + 8)
    async with (
        aiohttp.ClientSession(base, connector=connector) as http,
        openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0, timeout=600) as sdk,
    ):

        async def ask(rid: str, conversation: Conversation) -> dict[str, Any]:
            path, body = conversation.request()
            if client_kind == "openai" and protocol == "chat":
                resp = await sdk.chat.completions.create(
                    model="policy",
                    messages=body["messages"],
                    tools=[SHELL_TOOL],
                    extra_headers={"X-Rollout-Id": rid},
                )
                return resp.choices[0].message.model_dump(exclude_none=True)
            async with http.post(path, json=body, headers={"X-Rollout-Id": rid}) as r:
                r.raise_for_status()
                return await r.json()

        async def one(k: int) -> None:
            rid = f"{tag}-s{k}"
            async with http.post("/sessions", json={"rollout_id": rid, "group_id": f"g{k % 8}"}) as r:
                r.raise_for_status()
            conversation = Conversation(protocol, k)
            for t in range(turns):
                t1 = time.perf_counter()
                answer = await ask(rid, conversation)
                latencies.append(time.perf_counter() - t1)
                conversation.add(answer, t)
            async with http.post(f"/sessions/{rid}/close", json={"reward": 1.0}) as r:
                r.raise_for_status()
                out[f"s{k}"] = await r.json()

        t0 = time.perf_counter()
        await asyncio.gather(*(one(k) for k in range(sessions)))
        elapsed = time.perf_counter() - t0
    return elapsed, out, latencies


def violations(http: dict[str, Any], ref: dict[str, Any]) -> list[str]:
    """What is wrong with the HTTP trajectory of one session (empty: nothing)."""
    bad = []
    if [t["prompt_ids"] for t in http["turns"]] != [t["prompt_ids"] for t in ref["turns"]]:
        bad.append("prompt IDs differ from in-process")
    key = ("input_ids", "loss_mask", "logprobs")
    if [[r[k] for k in key] for r in http["rows"]] != [[r[k] for k in key] for r in ref["rows"]]:
        bad.append("rows differ from in-process")
    for turn in http["turns"]:
        row = http["rows"][turn["row"]]
        start, end = row["turn_spans"][row["turns"].index(turn["index"])]
        if row["input_ids"][:start] != turn["prompt_ids"]:
            bad.append(f"turn {turn['index']}: the row's context is not the prompt sent")
        if (
            row["input_ids"][start:end] != turn["output_ids"]
            or row["logprobs"][start:end] != turn["logprobs"]
        ):
            bad.append(f"turn {turn['index']}: sampled tokens/logprobs not in the row")
    for row in http["rows"]:
        sampled = sum(e - s for s, e in row["turn_spans"])
        if sum(row["loss_mask"]) != sampled or any(
            row["loss_mask"][i] != 1 for s, e in row["turn_spans"] for i in range(s, e)
        ):
            bad.append("loss mask not 1 exactly on sampled tokens")
    return bad


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--client",
        choices=["aiohttp", "openai"],
        default="aiohttp",
        help="HTTP client for chat (default aiohttp)",
    )
    ap.add_argument(
        "--protocols", default="chat,anthropic,responses", help="comma-separated (chat, anthropic, responses)"
    )
    args = ap.parse_args()
    protocols = [p for p in args.protocols.split(",") if p]
    tok = load_tokenizer("qwen3")
    script = lambda prompt, params, index: {"text": CALL}  # noqa: E731
    ref_gw = RolloutGateway(tok, ScriptedBackend(tok, script))
    http_gw = RolloutGateway(tok, ScriptedBackend(tok, script))
    app = create_app(http_gw, model_name="policy")
    runner = await start(app, "127.0.0.1", 0)
    base = "http://{}:{}".format(*runner.addresses[0][:2])
    total = args.sessions * args.turns
    print(
        f"{args.sessions} concurrent sessions x {args.turns} turns, scripted backend, qwen3 tokenizer, "
        f"tree mode, {args.client} client; cpus={os.cpu_count()} loadavg={os.getloadavg()[0]:.2f}"
    )
    print(
        f"{'round':>5} {'protocol':>10} {'in-process t/s':>15} {'http t/s':>10} {'ratio':>6} {'http p50 ms':>12} "
        f"{'http p99 ms':>12} {'violations':>10} {'live rows':>10} {'rss MB':>8}"
    )
    await in_process(ref_gw, 4, 2)  # warm-up: first-call imports of the SDK, the server, the template
    for protocol in protocols:
        await over_http(base, 4, 2, f"warmup-{protocol}", args.client, protocol)
    rates: dict[str, list[tuple[float, float]]] = {p: [] for p in protocols}
    bad_total, rss, live = 0, [], []
    for rnd in range(args.rounds):
        order = protocols if rnd % 2 == 0 else protocols[::-1]  # alternate which goes first
        for protocol in order:
            tag = f"round{rnd}-{protocol}"
            if rnd % 2:
                http_s, got, lat = await over_http(
                    base, args.sessions, args.turns, tag, args.client, protocol
                )
                ref_s, ref = await in_process(ref_gw, args.sessions, args.turns)
            else:
                ref_s, ref = await in_process(ref_gw, args.sessions, args.turns)
                http_s, got, lat = await over_http(
                    base, args.sessions, args.turns, tag, args.client, protocol
                )
            bad = [
                f"{rid}: {b}"
                for rid in ref
                for b in (violations(got[rid], ref[rid]) if rid in got else ["missing"])
            ]
            bad_total += len(bad)
            for b in bad[:5]:
                print("  violation:", b)
            lat.sort()
            p50, p99 = statistics.median(lat) * 1000, lat[int(0.99 * (len(lat) - 1))] * 1000
            rates[protocol].append((total / ref_s, total / http_s))
            del ref, got
            for gw in (
                ref_gw,
                http_gw,
            ):  # the scripted backend records every prompt it got (a test double's log)
                gw.backend.prompts.clear()
                gw.backend.params.clear()
            gc.collect()
            assert len(app[REGISTRY]) == 0 and not any(
                http_gw.is_open(f"{tag}-s{k}") for k in range(args.sessions)
            )
            live.append(sum(type(o) in (Row, Turn, Trajectory) for o in gc.get_objects()))
            rss.append(rss_mb())
            print(
                f"{rnd:>5} {protocol:>10} {total / ref_s:>15.1f} {total / http_s:>10.1f} {ref_s / http_s:>6.2f} "
                f"{p50:>12.1f} {p99:>12.1f} {len(bad):>10} {live[-1]:>10} {rss[-1]:>8.1f}"
            )
    await runner.cleanup()
    growth = rss[-1] - rss[0]
    fields = []
    for protocol in protocols:
        inproc = statistics.median(r[0] for r in rates[protocol])
        http = statistics.median(r[1] for r in rates[protocol])
        ratios = [r[1] / r[0] for r in rates[protocol]]
        print(
            f"{protocol}: medians over {args.rounds} rounds: in-process {inproc:.1f} turns/s, http {http:.1f} "
            f"turns/s; ratio per round {min(ratios):.2f}-{max(ratios):.2f}"
        )
        if protocol == "chat":
            fields.insert(
                0,
                f"http_vs_inprocess={http / inproc:.3f} http_turns_per_s={http:.1f} inprocess_turns_per_s={inproc:.1f}",
            )
        else:
            fields.append(f"{protocol}_vs_inprocess={http / inproc:.3f} {protocol}_turns_per_s={http:.1f}")
    print(f"RSS after the first run {rss[0]:.1f} MB, after the last {rss[-1]:.1f} MB")
    print(
        f"RESULT {' '.join(fields)} violations={bad_total} live_rows_after={live[-1]} rss_growth_mb={growth:.1f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
