"""Overhead of the bubblewrap sandbox: per agent command and per evaluation build.

Side by side in one run, interleaved (sandboxed, plain, sandboxed, plain, ...) so that the load
of a shared machine hits both alike:

- **per command**: the shell tool's ``run_command("true")`` in a task workspace, inside the
  workspace's sandbox (``prlimit`` + ``setpriv`` + ``bwrap``) and without one
  (``--unsafe-no-sandbox``); median wall milliseconds of ``--commands`` runs each;
- **per build**: ``evaluate()`` of a bundled task with its ``reference.patch`` applied (copy,
  ``mvn clean verify`` under JDK 17 offline, scoring), sandboxed and not; median wall seconds of
  ``--builds`` runs each (both must score 1.0);
- the one-time probe (:func:`strands_art.envs.sandbox.probe_sandbox`), median of 5.

    python bench/sandbox.py [--commands 40] [--builds 2] [--task compiler-props]

Ends with ``RESULT command_ms_sandbox=... command_ms_plain=... command_ratio=... build_s_sandbox=...
build_s_plain=... build_ratio=... probe_ms=...``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from strands_art.envs.migrationbench.agent.commands import run_command
from strands_art.envs.migrationbench.agent.toolenv import workspace_sandbox
from strands_art.envs.migrationbench.evaluate.evaluator import EvalTask, evaluate
from strands_art.envs.migrationbench.workspace import Workspace
from strands_art.envs.sandbox import probe_sandbox, require_sandbox

TASKS = Path(__file__).resolve().parents[1] / "examples" / "migrationbench" / "tasks"


async def per_command(task_dir: Path, n: int) -> tuple[float, float]:
    with Workspace.for_task(task_dir) as ws:
        sandbox = workspace_sandbox(ws)
        times: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(n):
            for sandboxed in (True, False):
                t0 = time.perf_counter()
                res = await run_command("true", cwd=ws.root, sandbox=sandbox if sandboxed else None)
                times[sandboxed].append(time.perf_counter() - t0)
                assert res.exit_code == 0, res.output
    return statistics.median(times[True]) * 1000, statistics.median(times[False]) * 1000


def per_build(task_dir: Path, n: int) -> tuple[float, float]:
    times: dict[bool, list[float]] = {True: [], False: []}
    task = EvalTask.from_dir(task_dir)
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as tmp:
        repo = Path(tmp) / "repo"
        shutil.copytree(task_dir / "repo", repo)
        subprocess.run(["git", "apply", str(task_dir / "reference.patch")], cwd=repo, check=True)
        for _ in range(n):
            for sandboxed in (True, False):
                t0 = time.perf_counter()
                result = evaluate(repo, task, timeout_s=300, offline=True, unsafe_no_sandbox=not sandboxed)
                times[sandboxed].append(time.perf_counter() - t0)
                if result.reward != 1.0:
                    sys.exit(f"reference patch scored {result.reward} (sandboxed={sandboxed})")
                label = "sandbox" if sandboxed else "plain  "
                print(
                    f"  build {label}: {times[sandboxed][-1]:6.1f} s (maven {result.details['maven_duration_s']} s)"
                )
    return statistics.median(times[True]), statistics.median(times[False])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commands", type=int, default=40, help="runs per variant of the command benchmark")
    ap.add_argument("--builds", type=int, default=2, help="builds per variant (0 skips the build benchmark)")
    ap.add_argument("--task", default="compiler-props", help="bundled task whose reference patch is built")
    args = ap.parse_args()
    require_sandbox()
    task_dir = TASKS / args.task

    probes = []
    for _ in range(5):
        t0 = time.perf_counter()
        probe_sandbox()
        probes.append(time.perf_counter() - t0)
    probe_ms = statistics.median(probes) * 1000
    print(f"probe (once per process): {probe_ms:.1f} ms")

    cmd_sb, cmd_plain = asyncio.run(per_command(task_dir, args.commands))
    print(
        f"per command `true` ({args.commands} each): sandbox {cmd_sb:.1f} ms, plain {cmd_plain:.1f} ms, "
        f"ratio {cmd_sb / cmd_plain:.2f}x, +{cmd_sb - cmd_plain:.1f} ms"
    )
    build_sb = build_plain = float("nan")
    if args.builds > 0:
        build_sb, build_plain = per_build(task_dir, args.builds)
        print(
            f"per build ({args.task} reference, {args.builds} each): sandbox {build_sb:.1f} s, "
            f"plain {build_plain:.1f} s, ratio {build_sb / build_plain:.3f}x"
        )
    print(
        f"RESULT command_ms_sandbox={cmd_sb:.1f} command_ms_plain={cmd_plain:.1f} "
        f"command_ratio={cmd_sb / cmd_plain:.2f} build_s_sandbox={build_sb:.1f} build_s_plain={build_plain:.1f} "
        f"build_ratio={build_sb / build_plain:.3f} probe_ms={probe_ms:.1f}"
    )


if __name__ == "__main__":
    main()
