"""What an evaluation costs, before and after a change of the evaluator, on the bundled tasks.

For each task (``examples/migrationbench/tasks/*``), side by side and interleaved (before,
after, before, after... so that the load of a shared machine hits both alike), runs
``examples/migrationbench/verify_tasks.py TASK`` with ``PYTHONPATH`` set to each side's source
tree: the untouched ``repo/`` (must score 0.0: one compile build) and the reference patch (must
score 1.0: compile build and test build), real sandboxed offline Maven. Prints the wall seconds
of each (task, side), whether each side's check passed, and the per-side totals and ratio.

    git archive REF | tar -x -C $BEFORE          # the evaluator before the change
    python bench/evaluator_cost.py --before $BEFORE --after . [--rounds 1] [TASK ...]

Ends with ``RESULT before_s=... after_s=... ratio=... passed_before=N/M passed_after=N/M``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "examples" / "migrationbench" / "tasks"


def run_side(tree: Path, task: str) -> tuple[float, bool, str]:
    """``verify_tasks.py task`` with ``tree``'s code: (wall seconds, passed, last line)."""
    env = dict(os.environ, PYTHONPATH=str(tree.resolve()))
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples/migrationbench/verify_tasks.py"), task],
        env=env,
        capture_output=True,
        text=True,
        cwd=tree,
    )
    wall = time.monotonic() - t0
    lines = [x for x in (done.stdout + done.stderr).splitlines() if x.strip()]
    return wall, done.returncode == 0, lines[-1][:160] if lines else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="source tree of the evaluator before")
    parser.add_argument("--after", type=Path, default=ROOT, help="source tree after (default: this one)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("tasks", nargs="*", help="default: every bundled task")
    args = parser.parse_args(argv)
    tasks = args.tasks or sorted(p.name for p in TASKS.iterdir() if (p / "task.json").is_file())
    totals = {"before": 0.0, "after": 0.0}
    passed = {"before": 0, "after": 0}
    runs = 0
    print(f"{'task':<20} {'side':<7} {'wall s':>8}  check")
    for task in tasks:
        for _ in range(args.rounds):
            runs += 1
            for side, tree in (("before", args.before), ("after", args.after)):
                wall, ok, last = run_side(tree, task)
                totals[side] += wall
                passed[side] += ok
                print(f"{task:<20} {side:<7} {wall:8.1f}  {'ok' if ok else 'FAILED: ' + last}", flush=True)
    ratio = totals["after"] / totals["before"] if totals["before"] else float("nan")
    print(
        f"total over {len(tasks)} tasks x {args.rounds} round(s): before {totals['before']:.1f} s, "
        f"after {totals['after']:.1f} s, after/before {ratio:.3f}"
    )
    print(
        f"RESULT before_s={totals['before']:.1f} after_s={totals['after']:.1f} ratio={ratio:.3f} "
        f"passed_before={passed['before']}/{runs} passed_after={passed['after']}/{runs}"
    )
    return 0 if passed["after"] == runs else 1


if __name__ == "__main__":
    raise SystemExit(main())
