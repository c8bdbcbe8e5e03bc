"""What a MigrationBench GRPO update costs: today's settings against the new ones, side by side
(issue "A MigrationBench GRPO update in minutes").

Two arms, the same seeds and tasks, alternated within one invocation (seed 0: before then after;
seed 1: after then before; ...), each arm one ``strands-art train --env migrationbench`` run per
seed with the recorded settings (:data:`migration_learning.FLAGS`, then ``--extra``):

- ``before``: the recorded settings, every rollout's evaluation afresh (``STRANDS_ART_EVAL_CACHE=off``)
  and every agent build run (``STRANDS_ART_MAVEN_MEMO=off``);
- ``after``: the recorded settings plus :data:`AFTER_FLAGS` (bf16 autocast, dynamic sampling and the
  tied-task skip, :mod:`strands_art.training.dynamic_sampling`), the per-run evaluation cache on
  (:mod:`strands_art.envs.migrationbench.evaluate.evalcache`) and the agent's Maven memo on
  (:mod:`strands_art.envs.migrationbench.agent.mavenmemo`).

Each run takes the heavy lock on its own (``--lock FILE``: ``flock FILE strands-art train ...``; by
default the machine's heavy-job lock, as ``bench/seed_experiments.py``; ``--lock ''`` for none), so
other work can run between two runs; a finished run directory is not run again and a stopped one
is resumed, so the same command continues an interrupted bench. After every run the summary so
far is printed and written (``--out`` JSON; ``--report``: the printed text under a header with the
date, the command with this machine's paths as ``$RUN_ROOT`` / ``$TASKS``, the settings, ``PARTIAL``
while runs are missing and the ``--notes`` file's lines), so a bench stopped half-way keeps what it
measured.
``--table-only`` summarizes the run directories under ``--run-root`` and the finished runs of
``--archive`` (no task directories needed) and creates nothing but ``--out`` / ``--report``; with no run there it is an error.
To run, every existing run must be one this bench's flags start (``FLAGS``, ``--extra``, ``--after``,
the seed; compared as ``bench/migration_learning.py`` compares them), else exit 2 naming the settings. ``--archive DIR`` keeps each finished run's
``train.json`` (its paths as ``$RUN_ROOT`` / ``$TASKS``), ``metrics.jsonl`` and rollout records in
``DIR/ARM-seedS`` (:func:`update_cost_runs.archive_run`), and a finished archived run is read back instead of run
again (also over an unfinished copy in the run root; copies with other settings are refused, never
mixed): a bench spread over sessions survives a machine that loses its run root.

Run files are read strictly (:mod:`update_cost_runs`, with :mod:`run_reader`, the reader of ``bench/seed_tables.py`` too): only a
torn last line of ``metrics.jsonl`` or ``results.jsonl`` is skipped (said on stderr); any other
line that cannot be read, a train record without ``rollout_s`` / ``train_s`` or an eval record
without ``val_reward`` / ``eval_s`` is an error naming the file and line (exit 2), found before
any run starts; a run whose torn last line may be its final evaluation is refused, not run again.

Per arm (over its runs): seconds per update (rollouts + training, the train records), seconds per
held-out evaluation, the agent builds the Maven memo answered and their seconds (``tool_stats``), optimizer steps with a non-zero gradient per hour of update time
(``optimizer_steps - zero_gradient_steps``), rollouts per update, the evaluation cache's hit rate
(``eval_cache_hit`` of the rollout records), held-out reward before and after (mean +- standard
deviation over seeds), and the spread over seeds of each run's seconds; per seed both arms ran, after / before
of the seconds per update and per evaluation and of the useful steps per hour, with their mean +- std
(:func:`update_cost_runs.paired`). Ends with ``RESULT s_per_update_before=... s_per_update_after=...
s_per_eval_before=... s_per_eval_after=... useful_steps_per_hour_ratio=... cache_hit_rate=...
heldout_before=... heldout_after=...`` (``heldout_*``: the last evaluation of each arm, mean +- std
over its seeds). Each run's line names the commit(s) that trained it (its ``code.jsonl``,
``seed_tables.commits_of``); a first line ``CODE: ...`` says when the runs ran more than one.

    STRANDS_ART_VLLM_PYTHON=.venv-vllm/bin/python python bench/update_cost.py --run-root $ROOT \\
        --train-tasks $TASKS/train --eval-tasks $TASKS/eval --seeds 0,1,2 --archive bench/results/update-cost-runs
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from command_line import report_head
from migration_learning import FLAGS
from run_reader import RunFileError, read_settings
from run_settings import archived_bench_parser, differences, flag_problem
from seed_archive import archive_problem
from seed_tables import code_note
from update_cost_runs import ARMS, keep, summarize, write_json

AFTER_FLAGS = "--autocast bf16 --max-draws 4 --skip-tied 0.5"
"""The new settings: the trainer's passes in bfloat16 autocast, up to 4 groups drawn to find 2
with signal, a task whose last group tied skipped with probability 0.5 (the cuts of
bench/results/update-profile-2026-12-04.txt)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = archived_bench_parser(
        __doc__,
        f"Each run: strands-art train --env migrationbench FLAGS, --extra, (after arm) --after, --seed S, where\n"
        f"FLAGS = {FLAGS}\nThe before arm runs with the evaluation cache and the Maven memo off.",
        "one run directory per arm and seed: ARM-seedS",
    )
    p.add_argument(
        "--train-tasks",
        help="training task directories (strands-art make-tasks --split train); needed to run, not with --table-only",
    )
    p.add_argument(
        "--eval-tasks",
        help="held-out task directories (strands-art make-tasks --split eval); needed to run, not with --table-only",
    )
    p.add_argument(
        "--seeds", default="0,1,2", help="comma-separated seeds, each once; one run per arm and seed"
    )
    p.add_argument("--extra", default="", help="more `strands-art train` flags for both arms, after FLAGS")
    p.add_argument("--after", default=AFTER_FLAGS, help="the after arm's own flags")
    p.add_argument(
        "--lock",
        default="/tmp/strands-art-heavy.lock",
        help="take this lock (flock) around each run ('' for none)",
    )
    p.add_argument(
        "--table-only",
        action="store_true",
        help="summarize the run directories (and the archive); run nothing, write nothing but --out and --report",
    )
    p.add_argument(
        "--out",
        help="write the summary here (JSON; a number not defined yet, such as an arm with no run, is null), after every run",
    )
    p.add_argument(
        "--report",
        help="write the printed summary here too, after every run, under a header: date, cores, the command "
        "(this machine's paths as $RUN_ROOT / $TASKS), the settings, PARTIAL while runs are missing, --notes",
    )
    p.add_argument(
        "--notes", help="a text file whose lines go into --report's header (what ran beside the runs, ...)"
    )
    p.add_argument(
        "--archive",
        help="keep each finished run's train.json, metrics.jsonl and rollout records in ARCHIVE/ARM-seedS; "
        "finished archived runs are read back instead of run again",
    )
    args = p.parse_args(argv)
    if not re.fullmatch(r"\d+(,\d+)*", args.seeds):
        p.error(f"--seeds {args.seeds!r}: comma-separated non-negative integers, e.g. 0,1,2")
    seeds = args.seeds.split(",")
    if len(set(map(int, seeds))) < len(seeds):
        p.error(f"--seeds {args.seeds!r}: a seed given twice")
    for flag in ("out", "report"):
        value = getattr(args, flag)
        parent = Path(value).parent if value else None
        if value and (Path(value).is_dir() or not parent.is_dir() or not os.access(parent, os.W_OK)):
            p.error(f"--{flag} {value}: not a file in a writable directory")
    if args.notes and not Path(args.notes).is_file():
        p.error(f"--notes {args.notes}: no such file")
    if Path(args.run_root).exists() and not Path(args.run_root).is_dir():
        p.error(f"--run-root {args.run_root}: not a directory (a file is there)")
    if (why := archive_problem(args.archive, args.run_root)) is not None:
        p.error(f"--archive {args.archive}: {why}")
    if args.table_only and args.archive and not Path(args.archive).is_dir():
        p.error(
            f"--archive {args.archive}: no such directory (--table-only reads the archive, never makes it)"
        )
    if not args.table_only:
        for flag in ("train_tasks", "eval_tasks"):
            value = getattr(args, flag)
            if value is None:
                p.error(f"--{flag.replace('_', '-')} is needed to run (--table-only runs nothing)")
            if not Path(value).is_dir():
                p.error(
                    f"--{flag.replace('_', '-')} {value}: not a directory (make it with strands-art make-tasks)"
                )
        # what `strands-art train` would refuse, before any run root, lock or run
        if (why := flag_problem(arm_flags(args, "before"))) is not None:
            p.error(f"--extra {args.extra!r}: {why}")
        if (why := flag_problem(arm_flags(args, "after"))) is not None:
            p.error(f"--after {args.after!r} (with --extra {args.extra!r}): {why}")
    return args


def command(args: argparse.Namespace, arm: str, seed: int, run_dir: Path) -> tuple[list[str], dict[str, str]]:
    exe = Path(sys.executable).parent / "strands-art"
    head = [
        *(["flock", args.lock] if args.lock else []),
        str(exe) if exe.exists() else "strands-art",
        "train",
    ]
    env = dict(os.environ)
    for var in ("STRANDS_ART_EVAL_CACHE", "STRANDS_ART_MAVEN_MEMO"):
        if arm == "before":
            env[var] = "off"
        elif env.get(var, "").lower() == "off":
            del env[var]  # after: the per-run cache / the memo on (or the cache directory the caller set)
    if (run_dir / "train.json").exists():
        return [*head, "--resume", "--run-dir", str(run_dir), "--no-progress"], env
    return [
        *head, "--env", "migrationbench", "--train-tasks", args.train_tasks, "--eval-tasks", args.eval_tasks,
        *run_flags(args, arm, seed), "--run-dir", str(run_dir), "--no-progress",
    ], env  # fmt: skip


def arm_flags(args: argparse.Namespace, arm: str) -> list[str]:
    """The ``strands-art train`` flags of ``arm``'s runs but the seed: :data:`FLAGS`, ``--extra``,
    the after arm's ``--after``."""
    return [*FLAGS.split(), *args.extra.split(), *(args.after.split() if arm == "after" else [])]


def run_flags(args: argparse.Namespace, arm: str, seed: int) -> list[str]:
    """The ``strands-art train`` flags that start run ``(arm, seed)``: :func:`arm_flags`, the seed."""
    return [*arm_flags(args, arm), "--seed", str(seed)]


def check_settings(
    args: argparse.Namespace, summary: dict[str, Any], root: Path, archive: Path | None
) -> None:
    """Refuse a run (run root or archive) that this bench's flags would not have started: it is
    resumed or read back, never restarted, so other flags would be ignored quietly.

    Raises:
        RunFileError: the run's ``train.json`` and every setting in which it differs.
        SystemExit: ``--extra`` / ``--after`` that ``strands-art train`` refuses (argparse's message).
    """
    for name, s in summary["runs"].items():
        arm, seed = name.rsplit("-seed", 1)
        d = (archive if s["where"] == "archive" else root) / name
        clash = differences(run_flags(args, arm, int(seed)), read_settings(d, {}), d)
        if clash:
            raise RunFileError(
                f"{d / 'train.json'}: this bench's flags would start another run: {'; '.join(clash)}. "
                "Pass the --extra / --after it was started with, or another --run-root / --archive"
            )


def report(summary: dict[str, Any]) -> str:
    lines = []
    for name, s in summary["runs"].items():
        lines.append(
            f"{name}{' (archived)' if s.get('where') == 'archive' else ''}: {'finished' if s['finished'] else 'UNSURE (the last line of metrics.jsonl is cut short)' if s['unsure'] else 'NOT FINISHED'}; updates "
            + ", ".join(f"{u:.0f} s (rollouts {r:.0f} + training {t:.0f})" for u, r, t in zip(s["update_s"], s["rollout_s"], s["train_s"], strict=True))
            + f"; evaluations {', '.join(f'{x:.0f} s' for x in s['eval_s'])}; held-out "
            + ", ".join(f"{v:.3f} after {b}" for b, v in s["heldout"])
            + f"; useful steps {sum(s['useful_steps'])} of {sum(s['optimizer_steps'])}; rollouts per update "
            + f"{s['rollouts']}; groups with signal {', '.join('-' if g is None else str(g) for g in s['groups_with_signal'])}; eval cache {s['cache_hits']}/{s['cache_lookups']}"
            + f"; code {', '.join(s.get('commits') or []) or 'not recorded'}"
        )  # fmt: skip
    # runs with a record only: one still before its first record has neither numbers nor code.jsonl yet
    recorded = [s for s in summary["runs"].values() if s["heldout"] or s["update_s"]]
    if (note := code_note([s.get("commits") or [] for s in recorded])) is not None:
        lines.insert(0, note.lstrip("# "))
    b, a = summary["arms"]["before"], summary["arms"]["after"]
    for arm, s in (("before", b), ("after", a)):
        lines.append(
            f"{arm}: {s['runs']} runs, {s['updates']} updates, {s['s_per_update']:.0f} s per update, "
            f"{s['s_per_eval']:.0f} s per evaluation, useful steps {s['useful_steps']} of {s['optimizer_steps']} "
            f"({s['useful_steps_per_hour']:.1f} per hour of updates), {s['rollouts_per_update']:.1f} rollouts per "
            f"update, eval cache {s['cache_hits']}/{s['cache_lookups']}, Maven memo {s['memo_hits']} builds / "
            f"{s['memo_saved_s']:.0f} s saved, held-out {s['heldout_first']} -> {s['heldout_last']}; over its "
            f"seeds (mean+-std of each run's mean): {s['s_per_update_seeds']} s per update, "
            f"{s['s_per_eval_seeds']} s per evaluation"
        )  # fmt: skip
    pairs = summary["paired"]
    if pairs["per_seed"]:
        lines.append(
            "after / before per seed: "
            + "; ".join(
                f"seed {seed}: " + ", ".join(f"{k} {v:.2f}" for k, v in r.items())
                for seed, r in pairs["per_seed"].items()
            )
            + "; over the seeds: "
            + ", ".join(f"{k} {v}" for k, v in pairs["spread"].items())
        )
    ratio = (
        a["useful_steps_per_hour"] / b["useful_steps_per_hour"]
        if b["useful_steps_per_hour"]
        else float("nan")
    )
    hit = a["cache_hits"] / a["cache_lookups"] if a["cache_lookups"] else float("nan")
    lines.append(
        "heldout_before / heldout_after: the before arm's and the after arm's last held-out evaluation "
        "(after training), mean+-std over seeds; held-out before training is each arm's line's first value"
    )
    lines.append(
        f"RESULT s_per_update_before={b['s_per_update']:.0f} s_per_update_after={a['s_per_update']:.0f} "
        f"s_per_eval_before={b['s_per_eval']:.0f} s_per_eval_after={a['s_per_eval']:.0f} "
        f"useful_steps_per_hour_ratio={ratio:.2f} cache_hit_rate={hit:.2f} "
        f"heldout_before={b['heldout_last']} heldout_after={a['heldout_last']}"
    )
    return "\n".join(lines)


def write_report(args: argparse.Namespace, argv: list[str], summary: dict[str, Any], text: str) -> None:
    """``text`` (:func:`report`) into ``--report`` under its header (see ``--report``'s help); PARTIAL
    while a run of ``--seeds`` x both arms is unfinished."""
    wanted = [f"{arm}-seed{seed}" for seed in args.seeds.split(",") for arm in ARMS]
    done = sum(1 for name in wanted if summary["runs"].get(name, {}).get("finished"))
    head = report_head("bench/update_cost.py", args, argv, done, len(wanted))
    head.append(
        f"# settings: FLAGS = {FLAGS} {args.extra}".rstrip() + f"; the after arm adds {args.after}; before: "
        "STRANDS_ART_EVAL_CACHE=off STRANDS_ART_MAVEN_MEMO=off"
    )
    if args.notes:
        head += ["#", *(f"# {x}".rstrip() for x in Path(args.notes).read_text(encoding="utf-8").splitlines())]
    Path(args.report).write_text("\n".join([*head, "", text]) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    root = Path(args.run_root)
    archive = Path(args.archive) if args.archive else None
    places = [os.path.abspath(t) for t in (args.train_tasks, args.eval_tasks) if t]
    order = [(seed, arm) for i, seed in enumerate(seeds) for arm in (ARMS if i % 2 == 0 else ARMS[::-1])]
    try:
        summary = summarize(root, seeds, archive)  # every run file read before anything runs or is written
        if args.table_only and not summary["runs"]:
            raise RunFileError(
                f"no run directory ARM-seedS ({', '.join(ARMS)}; seeds {args.seeds}) with a train.json in {root}"
                f"{f' or {archive}' if archive else ''}: "
                "nothing to summarize"
            )
        unsure = [name for name, s in summary["runs"].items() if s["unsure"]]
        if unsure and not args.table_only:
            raise RunFileError(
                f"{root / unsure[0] / 'metrics.jsonl'}:{summary['runs'][unsure[0]]['metrics_torn']}: the last line is "
                "cut short and every outer batch trained: the run may be finished (that line its final evaluation); "
                "not run again over it. Remove that line to have the final evaluation run again"
            )
        if not args.table_only:
            check_settings(args, summary, root, archive)
            root.mkdir(parents=True, exist_ok=True)
            keep(summary, root, archive, places)  # runs finished before --archive was given
        for seed, arm in order if not args.table_only else []:
            run_dir = root / f"{arm}-seed{seed}"
            if summary["runs"].get(f"{arm}-seed{seed}", {}).get("finished"):
                continue
            cmd, env = command(args, arm, seed, run_dir)
            print(f"$ {' '.join(cmd)}   ({time.strftime('%H:%M:%S')}, load {os.getloadavg()})", flush=True)
            t0 = time.monotonic()
            rc = subprocess.run(cmd, env=env).returncode
            print(
                f"{arm} seed {seed}: exit {rc} after {time.monotonic() - t0:.0f} s, load {os.getloadavg()}",
                flush=True,
            )
            summary = summarize(root, seeds, archive)
            text = report(summary)
            print(text, flush=True)
            if args.out:
                write_json(args.out, summary)
            if args.report:
                write_report(args, argv, summary, text)
            keep(summary, root, archive, places)  # after the report: a refused copy loses no result
            if rc != 0:
                return rc
        if args.out:
            write_json(args.out, summary)
        text = report(summary)
        if args.report:
            write_report(args, argv, summary, text)
        print(text)
    except (ValueError, OSError) as exc:
        print(f"update_cost.py: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
