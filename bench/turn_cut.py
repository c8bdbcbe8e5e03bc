"""The main job's reward before/after the length-cut rule (issue 28 item 11).

Before the rule, a turn that ran into the token limit (``--max-new-tokens``, 512) with an
unclosed tool call lost every call it had completed: the parser reported it ill-formed, Strands
stopped on ``max_tokens`` and the rollout scored 0.0 at its first turn. After it
(``strands_art/toolcalls/cut.py``), the turn ends at its last complete call and the harness runs
those calls.

``run`` runs ``strands-art migrate`` (default tasks, model and settings; ``--rollouts-per-task``
and ``--seed`` as given) from two checkouts in the order before, after, after, before, ... (ABBA:
a load that drifts linearly over the session hits both sides alike), each run with the seeds of
its block, so both sides sample with the same seeds; then ``report``.

``report`` reads each run directory's ``results.jsonl`` and ``trajectories/trajectories.jsonl``:
per rollout its reward, stop reason, turns that ended at the token limit
(``metadata["truncated_turns"]``) and turns cut at a complete call (``metadata["cut_turns"]``,
written only by the rule's code); for turns at the limit on the side without the rule it also
says whether the rule would have kept calls (the after checkout's
:func:`~strands_art.toolcalls.cut.last_complete_calls` on the stored output IDs, parsed with the
tools the rollout offered). Ends with a ``RESULT`` line.

    python bench/turn_cut.py run --before CHECKOUT --after . --out runs/turn-cut \\
        --blocks 2 --rollouts-per-task 2
    python bench/turn_cut.py report runs/turn-cut
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

SIDES = ("before", "after")


def _git(checkout: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(checkout), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _order(blocks: int) -> list[tuple[str, int]]:
    """ABBA order of (side, block): before/after alternate, each pair reversed after the first."""
    out: list[tuple[str, int]] = []
    for b in range(blocks):
        pair = SIDES if b % 2 == 0 else SIDES[::-1]
        out += [(side, b) for side in pair]
    return out


def run(args: argparse.Namespace) -> None:
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    checkouts = {"before": Path(args.before).resolve(), "after": Path(args.after).resolve()}
    n_tasks = len(args.tasks) if args.tasks else 3
    per_block = n_tasks * args.rollouts_per_task
    meta = {
        side: {
            "commit": _git(c, "rev-parse", "HEAD"),
            "dirty": bool(_git(c, "status", "--porcelain", "--", "strands_art")),
        }
        for side, c in checkouts.items()
    }
    (out / "sides.json").write_text(json.dumps(meta, indent=2) + "\n")
    env = dict(os.environ, STRANDS_ART_SKIP_VLLM="1")
    for side, block in _order(args.blocks):
        run_dir = out / f"{side}-b{block}"
        if (run_dir / "results.jsonl").exists() and len(
            (run_dir / "results.jsonl").read_text().splitlines()
        ) >= per_block:
            print(f"{run_dir.name}: done already", flush=True)
            continue
        cmd = [
            sys.executable,
            "-m",
            "strands_art.cli",
            "migrate",
            "--rollouts-per-task",
            str(args.rollouts_per_task),
        ]
        cmd += ["--seed", str(args.seed + block * per_block), "--no-plot"]
        cmd += ["--tasks", *args.tasks] if args.tasks else []
        cmd += (
            ["--resume", str(run_dir)] if (run_dir / "config.json").exists() else ["--run-dir", str(run_dir)]
        )
        t0 = time.time()
        load = os.getloadavg()[0]
        print(f"{run_dir.name}: {' '.join(cmd[1:])} (load {load:.2f})", flush=True)
        with open(out / f"{run_dir.name}.log", "a") as log:
            rc = subprocess.run(
                cmd,
                cwd=checkouts[side],
                env={**env, "PYTHONPATH": str(checkouts[side])},
                stdout=log,
                stderr=log,
            ).returncode
        print(
            f"{run_dir.name}: exit {rc} after {time.time() - t0:.0f} s (load {os.getloadavg()[0]:.2f})",
            flush=True,
        )
    report(argparse.Namespace(out=str(out)))


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class _WouldCut:
    """How many calls the rule (this checkout's toolcalls/cut.py, through the gateway's own parse)
    keeps of a turn's output: 0 when it finds no complete call."""

    def __init__(self, model: str) -> None:
        from strands_art.registry import load_tokenizer
        from strands_art.render import ChatRenderer

        self.parser = SimpleNamespace(renderer=ChatRenderer(load_tokenizer(model)))

    def __call__(self, turn: Any) -> int:
        from strands_art.gateway import RolloutGateway
        from strands_art.toolcalls.cut import last_complete_calls

        r = self.parser.renderer
        cut = last_complete_calls(
            turn.output_ids,
            lambda ids, suffix: RolloutGateway._parse(self.parser, turn.prompt_ids, ids, turn.tools, suffix),
            lambda t: r.decode([t]),
            r.family.call_list_closers,
        )
        return 0 if cut is None else len(cut[1].tool_calls)


def report(args: argparse.Namespace) -> None:
    out = Path(args.out)
    meta = json.loads((out / "sides.json").read_text())
    rewards: dict[str, list[float]] = {s: [] for s in SIDES}
    at_limit = {s: 0 for s in SIDES}
    cut = {s: 0 for s in SIDES}
    would = {s: 0 for s in SIDES}
    checker: _WouldCut | None = None
    from strands_art.trajectory import Trajectory

    for side in SIDES:
        print(
            f"== {side}: commit {meta[side]['commit']}{' (+ uncommitted changes)' if meta[side]['dirty'] else ''}"
        )
        for run_dir in sorted(out.glob(f"{side}-b*/")):
            if not (run_dir / "results.jsonl").exists():
                print(f"{run_dir.name}: no results yet")
                continue
            trajs = {t["rollout_id"]: t for t in _read_jsonl(run_dir / "trajectories" / "trajectories.jsonl")}
            config = json.loads((run_dir / "config.json").read_text())
            for rec in _read_jsonl(run_dir / "results.jsonl"):
                rid = rec["rollout_id"]
                t = trajs.get(rid, {})
                md = t.get("metadata", {})
                limit_turns = list(md.get("truncated_turns", []))
                cut_turns = [c["turn"] for c in md.get("cut_turns", [])]
                kept = []
                if side == "before" and limit_turns:
                    checker = checker or _WouldCut(config.get("model", "qwen2.5-coder-1.5b"))
                    turns = Trajectory.from_dict(t).turns
                    kept = [checker(turns[i]) for i in limit_turns]
                rewards[side].append(float(rec["reward"]))
                at_limit[side] += len(limit_turns)
                cut[side] += len(cut_turns)
                would[side] += sum(1 for k in kept if k)
                extra = f" would-keep-calls={kept}" if kept else ""
                print(
                    f"{run_dir.name}/{rid} seed={rec.get('seed')} reward={rec['reward']} stop={rec.get('stop_reason')} "
                    f"turns={rec.get('turns')} at_limit_turns={limit_turns} cut_turns={cut_turns}{extra}"
                )
    for side in SIDES:
        r = rewards[side]
        sd = statistics.stdev(r) if len(r) > 1 else float("nan")
        print(
            f"{side}: mean reward {statistics.mean(r) if r else float('nan'):.3f} ± {sd:.3f} (sample std) over {len(r)} "
            f"rollouts; {at_limit[side]} turns at the token limit, {cut[side]} cut at a complete call"
            + (
                f" ({would[side]} of them had complete calls the rule would have kept)"
                if side == "before"
                else ""
            )
        )
    mean = {s: (statistics.mean(rewards[s]) if rewards[s] else float("nan")) for s in SIDES}
    print(
        f"RESULT reward_before={mean['before']:.3f} reward_after={mean['after']:.3f} "
        f"rollouts_before={len(rewards['before'])} rollouts_after={len(rewards['after'])} "
        f"cut_turns_before={cut['before']} cut_turns_after={cut['after']}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="alternate migrate runs from two checkouts, then report")
    r.add_argument("--before", required=True, help="checkout without the rule")
    r.add_argument("--after", default=".", help="checkout with the rule (default: this one)")
    r.add_argument("--out", required=True, help="directory for the run directories and logs")
    r.add_argument("--blocks", type=int, default=2, help="runs per side (default 2)")
    r.add_argument("--rollouts-per-task", type=int, default=2)
    r.add_argument(
        "--seed", type=int, default=0, help="block b uses seeds from seed + b * rollouts per block"
    )
    r.add_argument("--tasks", nargs="*", default=None, help="default: migrate's default tasks (3)")
    r.set_defaults(fn=run)
    q = sub.add_parser("report", help="per-rollout rewards and cut turns of a run's directories")
    q.add_argument("out")
    q.set_defaults(fn=report)
    args = p.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
