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
``DIR/ARM-seedS`` (:func:`archive_run`), and a finished archived run is read back instead of run
again (also over an unfinished copy in the run root; copies with other settings are refused, never
mixed): a bench spread over sessions survives a machine that loses its run root.

Run files are read strictly (:mod:`run_reader`, the reader of ``bench/seed_tables.py`` too): only a
torn last line of ``metrics.jsonl`` or ``results.jsonl`` is skipped (said on stderr); any other
line that cannot be read, a train record without ``rollout_s`` / ``train_s`` or an eval record
without ``val_reward`` / ``eval_s`` is an error naming the file and line (exit 2), found before
any run starts; a run whose torn last line may be its final evaluation is refused, not run again.

Per arm (over its runs): seconds per update (rollouts + training, the train records), seconds per
held-out evaluation, the agent builds the Maven memo answered and their seconds (``tool_stats``), optimizer steps with a non-zero gradient per hour of update time
(``optimizer_steps - zero_gradient_steps``), rollouts per update, the evaluation cache's hit rate
(``eval_cache_hit`` of the rollout records), held-out reward before and after (mean +- standard
deviation over seeds). Ends with ``RESULT s_per_update_before=... s_per_update_after=...
s_per_eval_before=... s_per_eval_after=... useful_steps_per_hour_ratio=... cache_hit_rate=...
heldout_before=... heldout_after=...`` (``heldout_*``: the last evaluation of each arm, mean +- std
over its seeds). Each run's line names the commit(s) that trained it (its ``code.jsonl``,
``seed_tables.commits_of``); a first line ``CODE: ...`` says when the runs ran more than one.

    STRANDS_ART_VLLM_PYTHON=.venv-vllm/bin/python python bench/update_cost.py --run-root $ROOT \\
        --train-tasks $TASKS/train --eval-tasks $TASKS/eval --seeds 0,1,2 --archive bench/results/update-cost-runs
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from command_line import report_head
from migration_learning import FLAGS
from run_reader import RunFileError, read_jsonl, read_metrics, read_settings, require
from run_settings import TASK_KEYS, archived_bench_parser, differences, flag_problem
from seed_archive import LOGS, archive_problem, comparable, write_copy
from seed_tables import code_note, commits_of

from strands_art.training.provenance import read_code

AFTER_FLAGS = "--autocast bf16 --max-draws 4 --skip-tied 0.5"
"""The new settings: the trainer's passes in bfloat16 autocast, up to 4 groups drawn to find 2
with signal, a task whose last group tied skipped with probability 0.5 (the cuts of
bench/results/update-profile-2026-12-04.txt)."""
ARMS = ("before", "after")
TRAIN_NEEDS = {
    "rollout_s": "number",
    "train_s": "number",
    "optimizer_steps": "int?",
    "zero_gradient_steps": "int?",
}
EVAL_NEEDS = {"val_reward": "number", "eval_s": "number"}
"""The keys of the train and eval records read (``?``: checked where present; :func:`run_reader.require`)."""


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


def run_summary(run_dir: Path) -> dict[str, Any]:
    """The numbers of one run directory (finished or not).

    ``finished``: its log has the evaluation after its last outer batch; ``unsure``: not finished,
    every outer batch trained and the log's last line torn (it may be the final evaluation).

    Raises:
        RunFileError: see :mod:`run_reader`: ``train.json`` without an integer ``outer_batches``; a
            line of ``metrics.jsonl`` or ``env/rollouts/results.jsonl`` that cannot be read, a
            record without :data:`TRAIN_NEEDS` / :data:`EVAL_NEEDS`, a result without a ``rollout_id``.
    """
    n = read_settings(run_dir, {"outer_batches": "int"})["outer_batches"]
    metrics = read_metrics(run_dir / "metrics.jsonl", TRAIN_NEEDS, EVAL_NEEDS)
    trains, evals = metrics.trains, metrics.evals
    finished = any(r["outer_batch"] == n for r in evals)
    hits = lookups = memo_hits = 0
    memo_saved = 0.0
    results = read_jsonl(run_dir / "env" / "rollouts" / "results.jsonl")
    seen: dict[str, Any] = {}
    for line, rec in results.records:
        require(f"{results.path}:{line}", rec, {"rollout_id": "str"})
        seen[rec["rollout_id"]] = rec
    for rec in seen.values():
        if "eval_cache_hit" in rec:
            lookups += 1
            hits += bool(rec["eval_cache_hit"])
        stats = rec.get("tool_stats") or {}
        memo_hits += int(stats.get("maven_memo_hits", 0))
        memo_saved += float(stats.get("maven_memo_saved_s", 0.0))
    return {
        "finished": finished,
        "unsure": not finished and metrics.torn is not None and len(trains) == n,
        "update_s": [r["rollout_s"] + r["train_s"] for r in trains],
        "rollout_s": [r["rollout_s"] for r in trains],
        "train_s": [r["train_s"] for r in trains],
        "useful_steps": [r.get("optimizer_steps", 0) - r.get("zero_gradient_steps", 0) for r in trains],
        "optimizer_steps": [r.get("optimizer_steps", 0) for r in trains],
        "rollouts": [r.get("rollouts_drawn", r.get("rows", 0)) for r in trains],
        "groups_with_signal": [r.get("groups_with_signal") for r in trains],
        "eval_s": [r["eval_s"] for r in evals],
        "heldout": [(r["outer_batch"], r["val_reward"]) for r in evals],
        "cache_hits": hits,
        "cache_lookups": lookups,
        "memo_hits": memo_hits,
        "memo_saved_s": memo_saved,
        "metrics_torn": metrics.torn,
        "commits": commits_of(read_code(run_dir)),
    }


def mean(xs: list[float]) -> float:
    return statistics.fmean(xs) if xs else float("nan")


def mean_std(xs: list[float]) -> str:
    if not xs:
        return "nan"
    return f"{statistics.fmean(xs):.3f}+-{statistics.stdev(xs) if len(xs) > 1 else 0.0:.3f}"


def arm_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    update_s = [x for r in runs for x in r["update_s"]]
    useful = sum(x for r in runs for x in r["useful_steps"])
    hours = sum(update_s) / 3600
    last = [r["heldout"][-1][1] for r in runs if len(r["heldout"]) >= 2]
    first = [r["heldout"][0][1] for r in runs if len(r["heldout"]) >= 2]
    return {
        "runs": len(runs),
        "updates": len(update_s),
        "s_per_update": mean(update_s),
        "s_per_eval": mean([x for r in runs for x in r["eval_s"]]),
        "useful_steps": useful,
        "optimizer_steps": sum(x for r in runs for x in r["optimizer_steps"]),
        "useful_steps_per_hour": useful / hours if hours else float("nan"),
        "rollouts_per_update": mean([x for r in runs for x in r["rollouts"]]),
        "cache_hits": sum(r["cache_hits"] for r in runs),
        "cache_lookups": sum(r["cache_lookups"] for r in runs),
        "memo_hits": sum(r["memo_hits"] for r in runs),
        "memo_saved_s": sum(r["memo_saved_s"] for r in runs),
        "heldout_first": mean_std(first),
        "heldout_last": mean_std(last),
    }


ARCHIVED = LOGS
"""The logs :func:`archive_run` keeps beside ``train.json``: everything :func:`run_summary` reads,
and the code that trained the run (``code.jsonl``), as ``seed_experiments.py``'s archive."""


def read_run(root: Path, name: str, archive: Path | None = None) -> dict[str, Any] | None:
    """:func:`run_summary` of run ``name`` (``ARM-seedS``): the run root's copy, or the archived one
    when the run root has none or an unfinished one (archived runs are finished); None if neither
    holds a ``train.json``. ``where`` says which was read.

    Raises:
        RunFileError: see :func:`run_summary`; both copies there with other settings (``seed_archive.comparable``).
    """
    here = run_summary(root / name) if (root / name / "train.json").exists() else None
    if archive is None or not (archive / name / "train.json").exists():
        return None if here is None else {**here, "where": "run root"}
    if here is not None:
        mine, kept = (comparable(read_settings(d / name, {})) for d in (root, archive))
        if mine != kept:
            keys = sorted(k for k in mine.keys() | kept.keys() if mine.get(k) != kept.get(k))
            raise RunFileError(
                f"{root / name} and its archived copy {archive / name} differ in {', '.join(keys)}: "
                "not mixed; remove the one that is not this bench's"
            )
        if here["finished"]:
            return {**here, "where": "run root"}
    kept_run = run_summary(archive / name)
    if kept_run["finished"]:
        return {**kept_run, "where": "archive"}
    return None if here is None else {**here, "where": "run root"}


def summarize(root: Path, seeds: list[int], archive: Path | None = None) -> dict[str, Any]:
    """Per run (``ARM-seedS`` holding a ``train.json``, :func:`read_run`) :func:`run_summary`, per
    arm :func:`arm_summary`.

    Raises:
        RunFileError: see :func:`run_summary`.
    """
    out: dict[str, Any] = {"arms": {}, "runs": {}}
    for arm in ARMS:
        runs = []
        for seed in seeds:
            s = read_run(root, f"{arm}-seed{seed}", archive)
            if s is not None:
                out["runs"][f"{arm}-seed{seed}"] = s
                runs.append(s)
        out["arms"][arm] = arm_summary(runs)
    return out


def archive_run(root: Path, name: str, archive: Path, places: list[str]) -> None:
    """Copy what :func:`run_summary` reads of the finished run ``root/name`` into ``archive/name``:
    ``train.json`` with ``run_dir`` as ``$RUN_ROOT/name`` and the task directories as
    ``$TASKS/<name>``, and the logs of :data:`ARCHIVED`. Each file is written whole (a temporary
    file renamed over it).

    Raises:
        ValueError: a log names the run root, one of ``places`` (today's task directories) or the
            run's own task directories (a path of this machine in a committed file); nothing of the
            run is written then.
        RunFileError: ``train.json`` cannot be read.
    """
    src, dest = root / name, archive / name
    settings = read_settings(src, {"outer_batches": "int"})
    own = [os.path.abspath(settings[k]) for k in TASK_KEYS if settings.get(k)]  # the run's, maybe not today's
    settings["run_dir"] = f"$RUN_ROOT/{name}"
    for key in TASK_KEYS:
        if settings.get(key):
            settings[key] = "$TASKS/" + Path(settings[key]).name
    texts: dict[str, str | None] = {}
    for log in ARCHIVED:
        texts[log] = None
        if (src / log).exists():
            text = (src / log).read_text(encoding="utf-8")
            for place in dict.fromkeys((os.path.abspath(root), os.path.realpath(root), *places, *own)):
                if place in text:
                    raise ValueError(f"{src / log} names {place}: not archived (a path of this machine)")
            texts[log] = text
    write_copy(dest, texts, settings)  # a log the run lacks: an older copy's removed


def report(summary: dict[str, Any]) -> str:
    lines = []
    for name, s in summary["runs"].items():
        lines.append(
            f"{name}{' (archived)' if s.get('where') == 'archive' else ''}: {'finished' if s['finished'] else 'UNSURE (the last line of metrics.jsonl is cut short)' if s['unsure'] else 'NOT FINISHED'}; updates "
            + ", ".join(f"{u:.0f} s (rollouts {r:.0f} + training {t:.0f})" for u, r, t in zip(s["update_s"], s["rollout_s"], s["train_s"], strict=True))
            + f"; evaluations {', '.join(f'{x:.0f} s' for x in s['eval_s'])}; held-out "
            + ", ".join(f"{v:.3f} after {b}" for b, v in s["heldout"])
            + f"; useful steps {sum(s['useful_steps'])} of {sum(s['optimizer_steps'])}; rollouts per update "
            + f"{s['rollouts']}; groups with signal {s['groups_with_signal']}; eval cache {s['cache_hits']}/{s['cache_lookups']}"
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
            f"{s['memo_saved_s']:.0f} s saved, held-out {s['heldout_first']} -> {s['heldout_last']}"
        )  # fmt: skip
    ratio = (
        a["useful_steps_per_hour"] / b["useful_steps_per_hour"]
        if b["useful_steps_per_hour"]
        else float("nan")
    )
    hit = a["cache_hits"] / a["cache_lookups"] if a["cache_lookups"] else float("nan")
    lines.append(
        f"RESULT s_per_update_before={b['s_per_update']:.0f} s_per_update_after={a['s_per_update']:.0f} "
        f"s_per_eval_before={b['s_per_eval']:.0f} s_per_eval_after={a['s_per_eval']:.0f} "
        f"useful_steps_per_hour_ratio={ratio:.2f} cache_hit_rate={hit:.2f} "
        f"heldout_before={b['heldout_last']} heldout_after={a['heldout_last']}"
    )
    return "\n".join(lines)


def write_json(path: str, summary: dict[str, Any]) -> None:
    """``summary`` as strict JSON into ``path``: a number that is not defined yet (an arm with no
    update, evaluation or cache lookup: NaN in the summary) is written ``null``."""

    def defined(x: Any) -> Any:
        if isinstance(x, float) and math.isnan(x):
            return None
        if isinstance(x, dict):
            return {k: defined(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [defined(v) for v in x]
        return x

    Path(path).write_text(json.dumps(defined(summary), indent=2, allow_nan=False) + "\n", encoding="utf-8")


def keep(summary: dict[str, Any], root: Path, archive: Path | None, places: list[str]) -> None:
    """:func:`archive_run` every finished run of ``summary`` read from the run root (none without
    ``archive``).

    Raises:
        ValueError, RunFileError: see :func:`archive_run`.
    """
    for name, s in summary["runs"].items():
        if archive is not None and s["finished"] and s["where"] == "run root":
            archive_run(root, name, archive, places)


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
