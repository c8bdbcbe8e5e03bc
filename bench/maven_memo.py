"""The agent's repeated clean builds: how often a policy repeats them, and what the Maven memo
(strands_art/envs/migrationbench/agent/mavenmemo.py) saves.

Two parts, either or both:

- ``--run-dir RUN ...``: reads the rollout records of ``strands-art train`` run directories
  (``env/rollouts/results.jsonl``) and prints, per run, the
  rollouts' Maven calls and seconds (``tool_stats``) against their wall time, and the rollouts
  with the most Maven calls: where a policy repeats its builds.
- ``--repeats N`` (default 4): the same shell tool as a rollout, sandboxed, on a bundled task,
  runs ``mvn -q clean verify`` N times back to back with the memo on and with it off, the two
  alternated (off, on, off, on, ... ``--rounds`` times), and prints the seconds of each and the
  ratio.

Prints ``RESULT repeats=N off_s=... on_s=... ratio=... hits=...``.

    python bench/maven_memo.py --run-dir $RUN_ROOT/tree-fixed-steps/seed0 --repeats 4 --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from migration_learning import rollout_records

from strands_art.envs.migrationbench.agent.toolenv import prepare_tool_env
from strands_art.envs.migrationbench.agent.tools import ToolStats, make_tools
from strands_art.envs.migrationbench.workspace import Workspace

TASKS = Path(__file__).resolve().parents[1] / "examples" / "migrationbench" / "tasks"


def report_run(run_dir: Path, top: int = 5) -> list[str]:
    if not (run_dir / "env" / "rollouts" / "results.jsonl").exists():
        raise FileNotFoundError(
            f"{run_dir}: no env/rollouts/results.jsonl (a strands-art train run directory)"
        )
    recs = [r for r in rollout_records(run_dir) if r.get("tool_stats")]
    wall = sum(r["times"]["wall_s"] for r in recs)
    mvn_s = sum(r["tool_stats"]["maven_s"] for r in recs)
    calls = [r["tool_stats"]["maven_calls"] for r in recs]
    lines = [
        f"{run_dir}: {len(recs)} rollouts, {sum(calls)} agent Maven calls (median {statistics.median(calls) if calls else 0} "
        f"per rollout), {mvn_s:,.0f} s of agent Maven in {wall:,.0f} rollout-seconds ({100 * mvn_s / wall if wall else 0:.1f} %)"
    ]
    for r in sorted(recs, key=lambda r: -r["tool_stats"]["maven_calls"])[:top]:
        s = r["tool_stats"]
        lines.append(
            f"  {r['rollout_id']}: {s['maven_calls']} Maven calls, {s['maven_s']:.0f} s of {r['times']['wall_s']:.0f} s, "
            f"{r['turns']} turns, reward {r['reward']}"
        )
    return lines


async def repeats(task: str, n: int, memo: bool, base: Path) -> tuple[float, int]:
    """Seconds for ``n`` back-to-back ``mvn -q clean verify`` in one sandboxed workspace, and the memo's hits."""
    with Workspace.for_task(TASKS / task, base_dir=base) as w:
        tenv = prepare_tool_env(w, offline=True)
        stats = ToolStats()
        shell, _ = make_tools(w, env=tenv.env, extra_path=tenv.extra_path, sandbox=tenv.sandbox, stats=stats,
                              maven_memo=memo)  # fmt: skip
        t0 = time.monotonic()
        texts = [(await shell(command="mvn -q clean verify"))["content"][0]["text"] for _ in range(n)]
        spent = time.monotonic() - t0
    if len(set(texts)) != 1 or not texts[0].endswith("[exit code: 0]"):
        raise RuntimeError(f"the {n} builds did not all pass with the same text (memo {memo}): {texts!r}")
    return spent, stats.maven_memo_hits


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run-dir", action="append", default=[], help="a run directory to read (repeatable)")
    p.add_argument("--task", default="compiler-props", help="bundled task for the timed part")
    p.add_argument(
        "--repeats", type=int, default=4, help="builds back to back per workspace (0: no timed part)"
    )
    p.add_argument("--rounds", type=int, default=2, help="off/on pairs, alternated")
    p.add_argument("--scratch", default=None, help="where the workspaces go (default: the system temp dir)")
    args = p.parse_args(argv)
    for run_dir in args.run_dir:
        print("\n".join(report_run(Path(run_dir))))
    if args.repeats <= 0:
        return 0
    base = Path(args.scratch) if args.scratch else None
    off, on, hits = [], [], 0
    for i in range(args.rounds):
        for memo in (False, True):
            s, h = asyncio.run(repeats(args.task, args.repeats, memo, base))
            (on if memo else off).append(s)
            hits += h
            print(
                f"round {i}: memo {'on ' if memo else 'off'}: {args.repeats} x mvn -q clean verify in {s:.1f} s ({h} from the memo)"
            )
    off_s, on_s = statistics.fmean(off), statistics.fmean(on)
    print(
        f"RESULT repeats={args.repeats} off_s={off_s:.1f} on_s={on_s:.1f} ratio={off_s / on_s:.2f} hits={hits}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
