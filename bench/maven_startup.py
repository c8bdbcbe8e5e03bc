"""Does a faster JVM start-up shorten MigrationBench's Maven builds? (issue "A MigrationBench GRPO
update in minutes", item 2.)

Builds one bundled task's reference migration (``compiler-props`` by default) with the project's
own :func:`strands_art.envs.migrationbench.maven.maven.run_maven` (offline, Debian's repository, a fresh
local repository per build, as the evaluator builds) under several ``MAVEN_OPTS`` additions, the
variants alternated, ``--reps`` times each:

- ``today``: nothing added (``maven_env`` already gives ``-XX:TieredStopAtLevel=1``);
- ``serialgc``: ``-XX:+UseSerialGC`` (no parallel GC threads on 2 cores);
- ``appcds``: ``-XX:SharedArchiveFile=ARCHIVE``, an application class-data archive of Maven's own
  classes written once beforehand by a build with ``-XX:ArchiveClassesAtExit`` (JDK 17);
- ``noshare``: ``-Xshare:off`` (what the JDK's default class-data sharing gives, for reference).

The builds run without the sandbox (``unsafe_no_sandbox``: the archive would otherwise need a
read-only bind of its own; the sandbox's start is the same for every variant and is measured by
bench/update_profile.py), the compile build ``clean verify -DskipTests`` and the test build
``verify`` each. Only Maven's JVM takes the flags; surefire's forked test JVMs do not (their
options are the project's ``argLine``, which the evaluator must not change). Prints seconds per
build (median, min, max) per variant and ``RESULT today_s=... best=NAME best_s=... ratio=...``.

    flock /tmp/strands-art-heavy.lock python bench/maven_startup.py --reps 3
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
from typing import Any

from strands_art.envs.migrationbench.maven import maven

TASKS = Path(__file__).resolve().parents[1] / "examples" / "migrationbench" / "tasks"


def prepare(task: str, dest: Path) -> Path:
    repo = dest / "repo"
    shutil.copytree(TASKS / task / "repo", repo, ignore=shutil.ignore_patterns("target"))
    subprocess.run(["git", "apply", "--whitespace=nowarn", str(TASKS / task / "reference.patch")], cwd=repo,
                   check=True, capture_output=True)  # fmt: skip
    return repo


_maven_env = maven.maven_env
EXTRA = {"opts": ""}


def _env_with_extra(base: Any = None) -> dict[str, str]:
    """The project's Maven environment with the variant's options in front of its own (run_maven
    builds it from a fixed base, not from this process's environment)."""
    return _maven_env({**(base or {}), "MAVEN_OPTS": EXTRA["opts"]})


maven.maven_env = _env_with_extra


def build(repo: Path, opts: str, goals: list[str]) -> float:
    EXTRA["opts"] = opts
    result = maven.run_maven(repo, goals, 600, offline=True, unsafe_no_sandbox=True)
    if not result.ok:
        raise RuntimeError(f"{goals} with MAVEN_OPTS={opts!r} failed: {result.output_tail[-800:]}")
    return result.duration_s


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="compiler-props")
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args(argv)
    print(f"# loadavg before: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="maven-startup-") as tmp:
        repo = prepare(args.task, Path(tmp))
        archive = Path(tmp) / "maven.jsa"
        t0 = time.monotonic()
        build(repo, f"-XX:ArchiveClassesAtExit={archive}", ["clean", "verify", "-DskipTests=true"])
        print(
            f"archive written in {time.monotonic() - t0:.1f} s ({archive.stat().st_size >> 20} MiB)",
            flush=True,
        )
        variants = {
            "today": "",
            "serialgc": "-XX:+UseSerialGC",
            "appcds": f"-XX:SharedArchiveFile={archive}",
            "noshare": "-Xshare:off",
        }
        times: dict[str, dict[str, list[float]]] = {v: {"compile": [], "test": []} for v in variants}
        for rep in range(args.reps):
            order = list(variants) if rep % 2 == 0 else list(variants)[::-1]
            for name in order:
                times[name]["compile"].append(
                    build(repo, variants[name], ["clean", "verify", "-DskipTests=true"])
                )
                times[name]["test"].append(build(repo, variants[name], ["verify"]))
                print(f"rep {rep} {name:9s} compile {times[name]['compile'][-1]:6.1f} s  test "
                      f"{times[name]['test'][-1]:6.1f} s  load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    total = {}
    for name, t in times.items():
        both = [a + b for a, b in zip(t["compile"], t["test"], strict=True)]
        total[name] = statistics.median(both)
        print(f"{name:9s} compile median {statistics.median(t['compile']):6.1f} s (min {min(t['compile']):.1f}, "
              f"max {max(t['compile']):.1f}); test median {statistics.median(t['test']):6.1f} s (min "
              f"{min(t['test']):.1f}, max {max(t['test']):.1f}); both median {total[name]:.1f} s")  # fmt: skip
    best = min((n for n in total if n != "noshare"), key=total.get)
    print(f"# loadavg after: {os.getloadavg()}")
    print(f"RESULT today_s={total['today']:.1f} best={best} best_s={total[best]:.1f} "
          f"ratio={total['today'] / total[best]:.2f} reps={args.reps}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
