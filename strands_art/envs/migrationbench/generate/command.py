"""``strands-art make-tasks``: its flags (:func:`add_make_tasks_parser`, kept light: ``--help``
imports nothing heavy) and what runs them: the generated kinds (:func:`.generate.make_tasks`,
each task then checked by :mod:`.verify`), or real records (``--from-records``:
:mod:`.fromrecords`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from strands_art.envs.migrationbench.generate.generate import (
    HELDOUT_KIND,
    KINDS,
    SPLITS,
    GenerateError,
    make_tasks,
)


def add_make_tasks_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``make-tasks`` on the ``strands-art`` subcommand parser."""
    kinds = "\n".join(f"  {k.name:<18} {k.doc}" for k in KINDS.values())
    splits = "\n".join(f"  {name:<13} task seeds [{lo}, {hi})" for name, (lo, hi) in SPLITS.items())
    p = sub.add_parser(
        "make-tasks",
        help="generate Java 8 MigrationBench tasks (deterministic from a seed), each verified in the sandbox",
        description=(
            "Generate MigrationBench task directories (repo/ as a git repository, task.json, "
            "reference.patch) and check each with two sandboxed Maven builds: untouched 0.0, "
            f"reference 1.0.\n\nkinds:\n{kinds}\n\nsplits (--seed is an offset inside the range; "
            f"{HELDOUT_KIND} is made only by heldout-kind):\n{splits}"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("out_dir", metavar="OUT_DIR", help="where the task directories go (new or empty)")
    p.add_argument(
        "--kinds", default=None, help="comma-separated kinds, used in turn (default: all of the split)"
    )
    p.add_argument("--n", type=int, default=13, help="number of tasks (default 13)")
    p.add_argument("--seed", type=int, default=0, help="first task's seed (offset in the split; default 0)")
    p.add_argument(
        "--split", choices=sorted(SPLITS), default=None, help="take seeds (and kinds) from a split"
    )
    p.add_argument("--no-verify", action="store_true", help="skip the two sandboxed Maven builds per task")
    p.add_argument("--timeout", type=float, default=300.0, help="per-build timeout in seconds (default 300)")
    p.add_argument(
        "--fork-count", type=int, default=None, help="surefire forkCount for the checks (default: surefire's)"
    )
    real = p.add_argument_group(
        "real MigrationBench records (strands_art/envs/migrationbench/generate/realtasks.py)",
        "With --from-records, OUT_DIR receives one task per record that has a clone under --repos: "
        "repo/ exported untouched at base_commit, offline/ proposed from what did not resolve, "
        "the untouched tree scored (< 1.0); OUT_DIR/report.jsonl says made or blocked, per record "
        "(a rerun resumes).",
    )
    real.add_argument(
        "--from-records", metavar="RECORDS", help="CSV, Parquet, JSON or JSONL records as published"
    )
    real.add_argument(
        "--repos", metavar="DIR", help="local clones: DIR/owner__name (or owner+name/repo), bare or not"
    )
    real.add_argument(
        "--reference",
        metavar="PATCH",
        help="a reference migration to check (1.0), or a directory of owner__name.patch",
    )
    real.add_argument(
        "--recheck",
        action="store_true",
        help="score --reference again on made tasks whose reference did not score 1.0 (or had none)",
    )
    real.add_argument(
        "--retry-blocked",
        action="store_true",
        help="make blocked records again (e.g. after installing a package)",
    )
    real.add_argument(
        "--remake",
        action="store_true",
        help="make the selected records again from the start, made or blocked (each task directory is removed "
        "first; with --only, just those)",
    )
    real.add_argument(
        "--only",
        metavar="REPOS",
        help="comma-separated owner/name: only these records (each must be a record with a clone, else exit 2)",
    )
    real.add_argument(
        "--max-rounds",
        type=int,
        default=6,
        help="propose offline/ at most this many times per build (make and --recheck; default 6)",
    )
    real.add_argument(
        "--max-seconds",
        type=float,
        default=0.0,
        help="start no record after this long (0: no limit; rerun resumes)",
    )
    p.set_defaults(func=make_tasks_command)


def make_tasks_command(args: argparse.Namespace) -> int:
    """``strands-art make-tasks``: 0 when every task was made (and verified), 1 when a check
    failed, 2 for bad arguments."""
    from strands_art.envs.migrationbench.evaluate.evaluator import MAX_BUILD_TIMEOUT_S
    from strands_art.validation import UsageError, check_float, check_int

    record_only = [flag for flag, value in (("--repos", args.repos), ("--reference", args.reference),
                   ("--recheck", args.recheck), ("--retry-blocked", args.retry_blocked), ("--remake", args.remake),
                   ("--only", args.only), ("--max-seconds", args.max_seconds)) if value]  # fmt: skip
    if record_only and not args.from_records:
        print(f"strands-art make-tasks: {record_only[0]} needs --from-records RECORDS", file=sys.stderr)
        return 2
    if args.from_records:
        from strands_art.envs.migrationbench.generate.fromrecords import make_tasks_from_records

        if not args.repos:
            print(
                "strands-art make-tasks: --from-records needs --repos DIR (the local clones)", file=sys.stderr
            )
            return 2

        try:
            check_float("--timeout", args.timeout, 0.0, MAX_BUILD_TIMEOUT_S, lo_open=True)
            check_int("--max-rounds", args.max_rounds, 0, 50)
        except UsageError as exc:
            print(f"strands-art make-tasks: {exc}", file=sys.stderr)
            return 2
        return make_tasks_from_records(args)
    kinds = [k.strip() for k in args.kinds.split(",")] if args.kinds is not None else None
    t0 = time.monotonic()
    try:
        if kinds is not None and not all(kinds):
            raise UsageError(f"--kinds {args.kinds!r}: an empty kind (comma-separated names, none empty)")
        check_float("--timeout", args.timeout, 0.0, MAX_BUILD_TIMEOUT_S, lo_open=True)
        if args.fork_count is not None:
            check_int("--fork-count", args.fork_count, 0, 1024)
        dirs = make_tasks(args.out_dir, kinds, args.n, args.seed, args.split)
    except (GenerateError, UsageError) as exc:
        print(f"strands-art make-tasks: {exc}", file=sys.stderr)
        return 2
    except (RuntimeError, OSError) as exc:  # git failed, or the disk
        print(f"strands-art make-tasks: {' '.join(str(exc).split())[:500]}", file=sys.stderr)
        return 1
    made = {d.name: json.loads((d / "task.json").read_text(encoding="utf-8")) for d in dirs}
    kinds_made = sorted({r["generated"]["kind"] for r in made.values()})
    print(
        f"made {len(dirs)} tasks of {len(kinds_made)} kinds in {args.out_dir} ({time.monotonic() - t0:.1f} s)",
        flush=True,
    )
    if args.no_verify:
        return 0
    return _verify_all(dirs, made, args, t0)


def _verify_all(dirs: list[Path], made: dict[str, dict], args: argparse.Namespace, t0: float) -> int:
    from strands_art.envs.migrationbench.evaluate.verify import check_task, record_check
    from strands_art.envs.sandbox import SandboxError

    ok: dict[str, int] = {}
    failed = 0
    with tempfile.TemporaryDirectory(prefix="strands-art-verify-") as work:
        for i, d in enumerate(dirs, 1):
            gen = made[d.name]["generated"]
            try:
                res = check_task(
                    d,
                    Path(work),
                    fork_count=args.fork_count,
                    timeout_s=args.timeout,
                    untouched_builds=gen["untouched_builds"],
                )
                line, good, why = res.line(), res.ok, None
            except SandboxError as exc:
                print(f"strands-art make-tasks: the sandbox cannot start: {exc}", file=sys.stderr)
                return 2
            except (RuntimeError, OSError, ValueError) as exc:
                res, why = None, " ".join(str(exc).split())[:300]
                line, good = f"{d.name:<28} FAIL: {why}", False
            record_check(d, res, why)  # train refuses a failed task, warns about an unchecked one
            print(f"[{i}/{len(dirs)} {time.monotonic() - t0:.0f}s] {line}", flush=True)
            if good:
                ok[gen["kind"]] = ok.get(gen["kind"], 0) + 1
            failed += not good
    per_kind = " ".join(f"{k}={v}" for k, v in sorted(ok.items()))
    print(
        f"RESULT verified={sum(ok.values())} kinds={len(ok)} failed={failed} tasks={len(dirs)} "
        f"seconds={time.monotonic() - t0:.0f} per_kind: {per_kind}",
        flush=True,
    )
    return 1 if failed else 0
