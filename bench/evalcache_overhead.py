"""What the evaluation cache adds to every scored rollout: the host's own copy of the workspace
and its digest (:mod:`strands_art.envs.migrationbench.evaluate.evalcache`), and what a hit costs in all
(copy, digest, key, reading the stored verdict), on every bundled task's reference migration.

No Maven and no model: the verdict stored is a fixed one (the evaluation itself is what a hit
saves; its cost is measured by bench/update_profile.py and bench/evaluator_cost.py). Prints per
task the tree's files and bytes, milliseconds per copy + digest (median of ``--reps``) and per hit,
and ``RESULT copy_digest_ms_median=... hit_ms_median=... tasks=N``.

    python bench/evalcache_overhead.py --reps 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from strands_art.envs.migrationbench.evaluate.buildcopy import copy_for_build
from strands_art.envs.migrationbench.evaluate.evalcache import EvalCache, cached_evaluate_command
from strands_art.envs.migrationbench.treedigest import tree_digest
from strands_art.envs.sandbox import Identity

TASKS = Path(__file__).resolve().parents[1] / "examples" / "migrationbench" / "tasks"
VERDICT = {"reward": 1.0, "build_success": True, "java17_bytecode": True, "tests_run": 1, "tests_required": 1,
           "tests_equivalent": True, "details": {"reasons": [], "left_out_of_build": []}}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args(argv)
    print(f"# loadavg before: {os.getloadavg()}")
    host = Identity(os.getuid(), os.getgid(), drop=False)
    copy_ms, hit_ms = [], []
    for task in sorted(t.name for t in TASKS.iterdir() if (t / "task.json").is_file()):
        with tempfile.TemporaryDirectory(prefix="evalcache-overhead-") as tmp:
            repo = Path(tmp) / "ws"
            shutil.copytree(TASKS / task / "repo", repo, ignore=shutil.ignore_patterns("target"))
            subprocess.run(["git", "apply", "--whitespace=nowarn", str(TASKS / task / "reference.patch")], cwd=repo,
                           check=True, capture_output=True)  # fmt: skip
            files = [f for f in repo.rglob("*") if f.is_file()]
            size = sum(f.stat().st_size for f in files)
            runs = []
            for i in range(args.reps):
                t0 = time.perf_counter()
                copy_for_build(repo, Path(tmp) / f"c{i}", host, 300.0)
                tree_digest(Path(tmp) / f"c{i}")
                runs.append(1000 * (time.perf_counter() - t0))
            cache = EvalCache(Path(tmp) / "cache")
            cached_evaluate_command(repo, TASKS / task, cache=cache, scratch_dir=Path(tmp), evaluate=lambda *a, **k: dict(VERDICT))  # fmt: skip
            hits = []
            for _ in range(args.reps):
                t0 = time.perf_counter()
                out = cached_evaluate_command(repo, TASKS / task, cache=EvalCache(Path(tmp) / "cache"),
                                              scratch_dir=Path(tmp), evaluate=None)  # fmt: skip
                hits.append(1000 * (time.perf_counter() - t0))
                assert out["details"]["eval_cache"]["hit"]
        copy_ms.append(statistics.median(runs))
        hit_ms.append(statistics.median(hits))
        print(f"{task:18s} {len(files):4d} files {size / 1024:7.1f} KiB  copy+digest {copy_ms[-1]:7.1f} ms  "
              f"hit {hit_ms[-1]:7.1f} ms", flush=True)  # fmt: skip
    print(f"# loadavg after: {os.getloadavg()}")
    print(f"RESULT copy_digest_ms_median={statistics.median(copy_ms):.1f} hit_ms_median={statistics.median(hit_ms):.1f} "
          f"tasks={len(copy_ms)} reps={args.reps}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
