"""Cost of the per-command memory cgroup (``strands_art/envs/sandbox/memcg.py``).

Side by side in one run, interleaved so that the load of a shared machine hits both alike: the
shell tool's ``run_command("true")`` in a task workspace's sandbox, with its own memory cgroup
(made, limited, entered through ``/bin/sh``, removed) and without (the process limits only, as
on a machine without a delegated memory controller); median wall milliseconds of ``--commands``
runs each.

    python bench/memcg.py [--commands 60] [--task compiler-props]

Ends with ``RESULT command_ms_cgroup=... command_ms_no_cgroup=... ratio=... cgroup_version=...``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

from strands_art.envs.migrationbench.agent.commands import run_command
from strands_art.envs.migrationbench.agent.toolenv import workspace_sandbox
from strands_art.envs.migrationbench.workspace import Workspace
from strands_art.envs.sandbox import memcg, require_sandbox

TASKS = Path(__file__).resolve().parents[1] / "examples" / "migrationbench" / "tasks"


async def per_command(task_dir: Path, n: int, support: memcg.CgroupSupport) -> dict[bool, float]:
    off = memcg.CgroupSupport(None, 0, "off for the benchmark")
    times: dict[bool, list[float]] = {True: [], False: []}
    with Workspace.for_task(task_dir) as ws:
        sandbox = workspace_sandbox(ws)
        for _ in range(n):
            for with_cgroup in (True, False):
                memcg._support = support if with_cgroup else off
                t0 = time.perf_counter()
                res = await run_command("true", cwd=ws.root, sandbox=sandbox)
                times[with_cgroup].append(time.perf_counter() - t0)
                assert res.exit_code == 0, res.output
    memcg._support = support
    return {k: statistics.median(v) * 1000 for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commands", type=int, default=60, help="runs per variant")
    ap.add_argument("--task", default="compiler-props", help="bundled task whose workspace is used")
    args = ap.parse_args()
    require_sandbox()
    support = memcg.memory_cgroups()
    if support.base is None:
        sys.exit(f"no memory cgroup here ({support.why}): nothing to compare")
    ms = asyncio.run(per_command(TASKS / args.task, args.commands, support))
    print(
        f"per command `true` ({args.commands} each, cgroup v{support.version}): with cgroup {ms[True]:.1f} ms, "
        f"without {ms[False]:.1f} ms, +{ms[True] - ms[False]:.1f} ms"
    )
    print(
        f"RESULT command_ms_cgroup={ms[True]:.1f} command_ms_no_cgroup={ms[False]:.1f} "
        f"ratio={ms[True] / ms[False]:.3f} cgroup_version={support.version}"
    )


if __name__ == "__main__":
    main()
