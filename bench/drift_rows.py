"""Rows and processed tokens, tree vs linear, over a drift corpus of synthetic tool-using rollouts.

Each rollout is a Qwen3 tool loop (3-8 turns, a shell and an edit tool) played through the real
gateway with the scripted backend, once per mode. The harness replays the conversation the way
agent frameworks do: tool-call arguments re-serialized (sorted keys, other spacing or
indentation), empty reasoning dropped, empty content sent as None. One rollout in eight also
compacts an earlier tool result (a genuine history edit), which starts a true new segment.

A second corpus (issue 14, item 1b) decides linear mode's ``reasoning_omitted`` default: the
same rollouts, but every tool call is preceded by non-empty reasoning (``<think>\nLet me check
the build.\n</think>``) and half the harness echoes drop it (the other half send it back as
``reasoning_content``). It is played in linear mode under both policies, ``heal`` and ``reset``.

    python bench/drift_rows.py [--rollouts 200] [--seed 0]

Ends with ``RESULT rollouts=N tree_rows=N linear_rows=N true_segments=N tree_tokens=N
linear_tokens=N omitted_true_segments=N heal_rows=N heal_tokens=N reset_rows=N reset_tokens=N``
(target: linear_rows == true_segments, zero spurious splits; heal_rows == omitted_true_segments).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time

from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.registry import load_tokenizer

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "shell",
            "description": "Run a shell command.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "edit",
            "description": "Replace text in a file.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "old": {"type": "string"},
                    "new": {"type": "string"},
                },
                "required": ["path", "old", "new"],
            },
        },
    },
]
SPACINGS = [None, (",", ":"), (", ", ": ")]


REASONING = "<think>\nLet me check the build.\n</think>\n\n"


def sampled_call(rng: random.Random, k: int, reasoning: bool = False) -> str:
    if rng.random() < 0.5:
        args = {"command": f"mvn -q verify -pl m{k}", "timeout": rng.choice([60, 300])}
    else:
        args = {"path": f"src/Main{k}.java", "old": "javax.", "new": "jakarta."}
    items = list(args.items())
    rng.shuffle(items)  # the model's own key order
    sep = rng.choice(SPACINGS)
    text = json.dumps(dict(items), separators=sep) if sep else json.dumps(dict(items))
    name = "shell" if "command" in args else "edit"
    think = "<think>\n\n</think>\n\n" if rng.random() < 0.5 else ""
    if reasoning:
        think = REASONING
    return f'{think}<tool_call>\n{{"name": "{name}", "arguments": {text}}}\n</tool_call><|im_end|>'


def harness_replay(msg: dict, rng: random.Random, omit_half: bool = False) -> dict:
    out = {"role": "assistant", "content": msg.get("content") or None}
    if omit_half and msg.get("reasoning_content") and rng.random() < 0.5:
        out["reasoning_content"] = msg["reasoning_content"]  # this echo keeps the reasoning
    calls = []
    for c in msg.get("tool_calls", []):
        args = c["function"]["arguments"]
        args = json.loads(args) if isinstance(args, str) else args
        style = rng.randrange(3)
        text = [
            json.dumps(args, sort_keys=True, separators=(",", ":")),
            json.dumps(dict(reversed(list(args.items())))),
            json.dumps(args, indent=2),
        ][style]
        calls.append(
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["function"]["name"], "arguments": text},
            }
        )
    if calls:
        out["tool_calls"] = calls
    return out


def make_rollout(rng: random.Random, reasoning: bool = False) -> dict:
    turns = rng.randint(3, 8)
    outputs = [{"text": sampled_call(rng, k, reasoning)} for k in range(turns - 1)] + [
        {"text": "Migration done.<|im_end|>"}
    ]
    compact_at = rng.randint(2, turns - 1) if rng.random() < 0.125 else None
    return {"outputs": outputs, "compact_at": compact_at, "seed": rng.random()}


async def play(tok, rollout: dict, mode: str, **cfg) -> tuple[int, int]:
    rng = random.Random(rollout["seed"])
    omit_half = cfg.pop("omit_half", False)
    gw = RolloutGateway(tok, ScriptedBackend(tok, rollout["outputs"]), history_mode=mode, **cfg)
    sid = gw.open_session("b")
    msgs = [
        {"role": "system", "content": "You migrate Java 8 projects to Java 17."},
        {"role": "user", "content": "Migrate /repo."},
    ]
    for k in range(len(rollout["outputs"])):
        if rollout["compact_at"] == k:
            msgs[3] = {**msgs[3], "content": "[output compacted]"}  # a genuine edit of the first tool result
        r = await gw.generate(sid, msgs, TOOLS)
        msgs = msgs + [harness_replay(r.assistant_message, rng, omit_half)]
        for c in r.tool_calls:
            log = f"[INFO] BUILD SUCCESS step {k}\n" * rng.randint(3, 30)
            msgs.append({"role": "tool", "tool_call_id": c.id, "content": log})
    traj = gw.close_session(sid)
    return len(traj.rows), traj.num_tokens


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rollouts", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    tok = load_tokenizer("qwen3")
    rng = random.Random(args.seed)
    corpus = [make_rollout(rng) for _ in range(args.rollouts)]
    true_segments = sum(2 if r["compact_at"] is not None else 1 for r in corpus)
    totals = {}
    t0 = time.perf_counter()
    for mode in ("tree", "linear"):
        rows = tokens = spurious = 0
        for r in corpus:
            n_rows, n_tokens = await play(tok, r, mode)
            rows += n_rows
            tokens += n_tokens
            spurious += max(0, n_rows - (2 if r["compact_at"] is not None else 1))
        totals[mode] = (rows, tokens, spurious)
    turns = sum(len(r["outputs"]) for r in corpus)
    print(
        f"corpus: {args.rollouts} rollouts, {turns} turns, {true_segments} true segments "
        f"({true_segments - args.rollouts} compactions); qwen3 tokenizer; {time.perf_counter() - t0:.0f} s"
    )
    print(f"{'mode':>7} {'rows':>6} {'tokens':>9} {'spurious splits':>16}")
    for mode, (rows, tokens, spurious) in totals.items():
        print(f"{mode:>7} {rows:>6} {tokens:>9} {spurious:>16}")
    (tr, tt, _), (lr, lt, _) = totals["tree"], totals["linear"]
    print(f"tree vs linear: {100 * (tr / lr - 1):.2f}% more rows, {100 * (tt / lt - 1):.2f}% more tokens")

    # item 1b: non-empty reasoning before every call, half the echoes drop it
    rng = random.Random(args.seed)
    rcorpus = [make_rollout(rng, reasoning=True) for _ in range(args.rollouts)]
    r_true = sum(2 if r["compact_at"] is not None else 1 for r in rcorpus)
    policies = {}
    for policy in ("heal", "reset"):
        rows = tokens = 0
        for r in rcorpus:
            n_rows, n_tokens = await play(tok, r, "linear", reasoning_omitted=policy, omit_half=True)
            rows += n_rows
            tokens += n_tokens
        policies[policy] = (rows, tokens)
    print(
        f"reasoning corpus: {args.rollouts} rollouts, {r_true} true segments, non-empty reasoning "
        "before every call, half the echoes drop it; linear mode"
    )
    print(f"{'reasoning_omitted':>18} {'rows':>6} {'tokens':>9} {'spurious splits':>16}")
    for policy, (rows, tokens) in policies.items():
        print(f"{policy:>18} {rows:>6} {tokens:>9} {rows - r_true:>16}")
    (hr, ht), (rr, rt) = policies["heal"], policies["reset"]
    print(f"reset vs heal: {100 * (rr / hr - 1):.2f}% more rows, {100 * (rt / ht - 1):.2f}% more tokens")
    print(
        f"RESULT rollouts={args.rollouts} tree_rows={tr} linear_rows={lr} true_segments={true_segments} "
        f"tree_tokens={tt} linear_tokens={lt} omitted_true_segments={r_true} heal_rows={hr} "
        f"heal_tokens={ht} reset_rows={rr} reset_tokens={rt}"
    )


if __name__ == "__main__":
    asyncio.run(main())
