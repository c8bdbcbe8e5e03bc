"""Base success of the migration agent per task kind (issue 24, item 3).

For each (model, prompt setting) it runs ``strands-art migrate --tasks-dir DIR --all-tasks
--model MODEL --prompt SETTING --run-dir RUN_ROOT/MODEL.SETTING`` in a subprocess (or, when that
run directory already holds a run, ``strands-art migrate --resume`` it: only missing rollouts run),
then reads the run's ``results.jsonl`` and prints, per kind (``task.json``'s ``generated.kind``),
the number of scored rollouts, the mean reward, the fraction of rollouts with reward 1.0, 0.5 and
0.0 and the mean wall seconds per rollout. Per run it also prints the fraction of *train-kind*
tasks (every kind but the held-out one, ``base64``) whose rollouts all scored 1.0, and the load
average before and after. It ends with ``RESULT runs=N rollouts=R`` and per run
``mean_<model>_<setting>=…`` and ``success_<model>_<setting>=…`` (fraction of train-kind rollouts
with reward 1.0).

Settings are ``migrate --prompt``'s: ``compact`` (the short system prompt, the shell calls
spelled out in the user turn: the llama.cpp default), ``compact-no-recipe`` (the short system
prompt, plain user turn), ``full`` (the full system prompt, plain user turn).

Usage::

    python bench/migration_base.py --tasks-dir $TASKS --run-root $RUNS \\
        --runs qwen2.5-coder-0.5b:compact-no-recipe qwen2.5-coder-0.5b:compact
    python bench/migration_base.py --tasks-dir $TASKS --run-root $RUNS --table-only --runs ...

``--table-only`` runs nothing and tabulates what the run directories hold (a run cut short
shows the rollouts it finished; a killed run continues with the same command: the run directory's
``config.json`` makes it ``migrate --resume``, which keeps every committed rollout and runs the
missing ones). ``--per-rollout`` adds one line per rollout (:func:`rollout_line`). Rollouts the
runner marked ``failed`` (infrastructure, not the policy) are counted apart and left out of the
means. On tasks without ``generated.kind`` (real repositories) each task is its own "kind", and
every task counts as a train kind (none is the held-out kind).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from strands_art.envs.migrationbench.config import PROMPTS
from strands_art.envs.migrationbench.generate.generate import HELDOUT_KIND
from strands_art.envs.migrationbench.run.rundir import scan_results

DEFAULT_RUNS = (
    "qwen2.5-coder-0.5b:compact-no-recipe",
    "qwen2.5-coder-0.5b:compact",
    "qwen2.5-coder-1.5b:compact-no-recipe",
)


def parse_run(text: str) -> tuple[str, str]:
    """``MODEL:SETTING`` -> (model, setting); argparse error for an unknown setting."""
    model, sep, setting = text.rpartition(":")
    if not sep or not model or setting not in PROMPTS:
        raise argparse.ArgumentTypeError(
            f"expected MODEL:SETTING with SETTING one of {', '.join(PROMPTS)}, got {text!r}"
        )
    return model, setting


def task_kinds(tasks_dir: Path) -> dict[str, str]:
    """Task directory name -> its kind (``generated.kind`` of ``task.json``; the name if absent)."""
    kinds = {}
    for d in sorted(tasks_dir.iterdir()):
        if (d / "task.json").is_file():
            generated = json.loads((d / "task.json").read_text()).get("generated") or {}
            kinds[d.name] = generated.get("kind", d.name)
    return kinds


def migrate_command(
    run_dir: Path, tasks_dir: Path, model: str, setting: str, args: argparse.Namespace
) -> list[str]:
    """The ``strands-art migrate`` command line of one run (``--resume`` for an existing run)."""
    cli = [sys.executable, "-m", "strands_art.cli", "migrate"]
    if (run_dir / "config.json").is_file():
        return [*cli, "--resume", str(run_dir), "--no-plot"]
    return [
        *cli,
        *("--tasks-dir", str(tasks_dir), "--all-tasks", "--model", model, "--prompt", setting),
        *("--rollouts-per-task", str(args.rollouts_per_task), "--seed", str(args.seed)),
        *("--concurrency", str(args.concurrency), "--run-dir", str(run_dir), "--no-plot"),
    ]


def summarize(records: list[dict[str, Any]], kinds: dict[str, str]) -> dict[str, Any]:
    """Per-kind and overall statistics of one run's results records.

    Returns ``{"kinds": {kind: stats}, "all": stats, "train": stats, "failed": n,
    "train_tasks_solved": fraction}`` where ``stats`` = ``{"n", "mean", "p1", "p05", "p0",
    "wall_s"}`` (fractions of rollouts with reward 1.0 / 0.5 / 0.0, mean wall seconds), and
    ``train_tasks_solved`` is the fraction of train-kind tasks whose rollouts all scored 1.0
    (nan without any).
    """
    scored = [r for r in records if not r.get("failed") and isinstance(r.get("reward"), int | float)]
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in scored:
        by_kind[kinds.get(r["task"], r["task"])].append(r)
    train = [r for r in scored if kinds.get(r["task"], r["task"]) != HELDOUT_KIND]
    by_task: dict[str, list[float]] = defaultdict(list)
    for r in train:
        by_task[r["task"]].append(float(r["reward"]))
    solved = [all(x == 1.0 for x in v) for v in by_task.values()]
    return {
        "kinds": {k: _stats(v) for k, v in sorted(by_kind.items())},
        "all": _stats(scored),
        "train": _stats(train),
        "failed": len(records) - len(scored),
        "train_tasks_solved": sum(solved) / len(solved) if solved else float("nan"),
    }


def _stats(rs: list[dict[str, Any]]) -> dict[str, float]:
    rewards = [float(r["reward"]) for r in rs]
    n = len(rewards)
    if not n:
        nan = float("nan")
        return {"n": 0, "mean": nan, "p1": nan, "p05": nan, "p0": nan, "wall_s": nan}
    return {
        "n": n,
        "mean": statistics.fmean(rewards),
        "p1": rewards.count(1.0) / n,
        "p05": rewards.count(0.5) / n,
        "p0": rewards.count(0.0) / n,
        "wall_s": statistics.fmean(float((r.get("times") or {}).get("wall_s", 0.0)) for r in rs),
    }


def _row(label: str, s: dict[str, float], width: int = 20) -> str:
    return (
        f"  {label:<{width}} {s['n']:>3} {s['mean']:>6.2f} {s['p1']:>6.2f} {s['p05']:>6.2f} {s['p0']:>6.2f} "
        f"{s['wall_s']:>8.0f}"
    )


def rollout_line(r: dict[str, Any]) -> str:
    """One rollout of ``results.jsonl`` as a line: id, reward, the Java 17 build, original tests
    passed / required, turns, shell calls, stop reason, wall seconds and the files it changed.

    ``r`` is a results record (``strands-art migrate``); missing fields print as ``?``; a failed
    (infrastructure) rollout prints its error instead of a reward.
    """
    if r.get("failed"):
        return f"  {r.get('rollout_id', '?'):<36} FAILED ({r.get('error') or 'no error recorded'})"
    edited = r.get("edited_files") or {}
    changed = [*edited.get("modified", []), *(f"+{f}" for f in edited.get("added", []))]
    changed += [f"-{f}" for f in edited.get("deleted", [])]
    calls = sum(((r.get("tool_stats") or {}).get("calls") or {}).values())
    wall = (r.get("times") or {}).get("wall_s")
    return (
        f"  {r.get('rollout_id', '?'):<36} reward {r.get('reward', '?')} "
        f"build {'ok' if r.get('build_success') else 'fail'} "
        f"tests {r.get('tests_run', '?')}/{r.get('tests_required', '?')} turns {r.get('turns', '?')} "
        f"calls {calls} stop {r.get('stop_reason', '?')} wall {'?' if wall is None else round(wall)} s "
        f"changed {','.join(changed) if changed else '-'}{' (truncated)' if edited.get('truncated') else ''}"
    )


def print_table(model: str, setting: str, summary: dict[str, Any], records: list[dict[str, Any]]) -> None:
    """The per-kind table of one run, then its stop reasons."""
    print(f"\n{model} / {setting}  (rollouts scored {summary['all']['n']}, failed {summary['failed']})")
    width = max([20, *(len(k) + 11 for k in summary["kinds"])])  # 11: " (held-out)"
    print(f"  {'kind':<{width}} {'n':>3} {'mean':>6} {'r=1':>6} {'r=.5':>6} {'r=0':>6} {'wall s':>8}")
    for kind, s in summary["kinds"].items():
        print(_row(kind + (" (held-out)" if kind == HELDOUT_KIND else ""), s, width))
    print(_row("train kinds", summary["train"], width))
    print(_row("all", summary["all"], width))
    stops: dict[str, int] = defaultdict(int)
    for r in records:
        stops[str(r.get("stop_reason"))] += 1
    print("  stop reasons: " + ", ".join(f"{k} {v}" for k, v in sorted(stops.items())))
    print(f"  train-kind tasks solved (every rollout 1.0): {summary['train_tasks_solved']:.2f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks-dir", type=Path, required=True, help="generated tasks (strands-art make-tasks)")
    p.add_argument(
        "--run-root", type=Path, required=True, help="one run directory per MODEL.SETTING under it"
    )
    p.add_argument(
        "--runs",
        nargs="+",
        type=parse_run,
        default=[parse_run(r) for r in DEFAULT_RUNS],
        metavar="MODEL:SETTING",
        help=f"runs in order (default: {' '.join(DEFAULT_RUNS)}); SETTING one of {', '.join(PROMPTS)}",
    )
    p.add_argument("--rollouts-per-task", type=int, default=1, help="migrate --rollouts-per-task (default 1)")
    p.add_argument("--seed", type=int, default=0, help="migrate --seed (default 0)")
    p.add_argument("--concurrency", type=int, default=2, help="migrate --concurrency (default 2)")
    p.add_argument("--table-only", action="store_true", help="run nothing; tabulate the run directories")
    p.add_argument(
        "--per-rollout", action="store_true", help="also one line per rollout (reward, tests, changed files)"
    )
    args = p.parse_args(argv)
    if not args.tasks_dir.is_dir():
        p.error(f"--tasks-dir {args.tasks_dir}: not a directory")
    kinds = task_kinds(args.tasks_dir)
    if not kinds:
        p.error(f"--tasks-dir {args.tasks_dir}: no task directories (task.json) in it")
    print(f"tasks: {len(kinds)} ({', '.join(f'{n}={k}' for n, k in kinds.items())})")
    results = []
    for model, setting in args.runs:
        run_dir = args.run_root / f"{model}.{setting}"
        if not args.table_only:
            cmd = migrate_command(run_dir, args.tasks_dir, model, setting, args)
            load0, t0 = os.getloadavg(), time.monotonic()
            print(
                f"\n$ python {' '.join(cmd[1:])}   (load before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f})",
                flush=True,
            )
            rc = subprocess.run(cmd, check=False).returncode
            load1 = os.getloadavg()
            print(
                f"exit {rc}, {time.monotonic() - t0:.0f} s, load after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}"
            )
        records, _, unreadable, torn = scan_results(run_dir / "results.jsonl")
        summary = summarize(records, kinds)
        print_table(model, setting, summary, records)
        if args.per_rollout:
            for r in sorted(records, key=lambda r: str(r.get("rollout_id"))):
                print(rollout_line(r))
        if unreadable or torn:
            print(f"  ({unreadable} unreadable lines, a torn last line of {torn} bytes left out)")
        results.append((model, setting, summary))
    keys = [f"runs={len(results)}", f"rollouts={sum(s['all']['n'] for _, _, s in results)}"]
    for model, setting, s in results:
        tag = f"{model}_{setting}".replace("-", "_").replace(".", "")
        keys += [f"mean_{tag}={s['train']['mean']:.3f}", f"success_{tag}={s['train']['p1']:.3f}"]
    print("\nRESULT " + " ".join(keys))
    return 0


if __name__ == "__main__":
    sys.exit(main())
