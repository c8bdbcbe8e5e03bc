"""The design's two MigrationBench experiments on this stack: step-stable batching and linear history.

Three arms of ``strands-art train --env migrationbench`` (:data:`seed_tables.ARMS`), the same
settings (:data:`FLAGS`, then ``--extra``), tasks and seeds in each:

- ``tree-fixed-rows``: ``--history-mode tree --batching fixed-rows`` (mini-batches of
  ``--ppo-mini-batch x --rollouts-per-prompt`` rows: more rows, more optimizer steps; the baseline);
- ``tree-fixed-steps``: ``--history-mode tree --batching fixed-steps`` (the configured steps);
- ``linear-fixed-steps``: ``--history-mode linear --batching fixed-steps``.

Each run is one run directory, ``RUN_ROOT/ARM/seedS``, trained in chunks of ``--chunk`` outer
batches (``strands-art train ... --stop-after C``, then ``--resume``), each chunk a process of its
own under ``flock LOCK`` (``--lock``; the machine's heavy-job lock), so other jobs get the machine
between chunks. Chunks go round-robin over the runs in :func:`order` (seed by seed; within a seed
tree-fixed-steps, linear-fixed-steps, tree-fixed-rows), so whenever the bench stops, the runs of
a seed have trained about as far as each other. A finished run is read back, not run again; a
stopped one continues with ``--resume``; the same command continues the bench. After every chunk
the report (per-run lines, Table 1, Table 2, the RESULT line; :mod:`seed_tables`) is written to
``--out``, marked PARTIAL with the command that continues it while any run is unfinished (the
RESULT line's ``seeds=``: the seeds finished in every arm of ``--arms``), and Figures 1 and 2 next
to it (``--out`` with ``.png`` suffixes). ``--table-only`` writes the report from the run
directories (and the archive) as they are.

``--archive DIR`` keeps what the tables read (``train.json``, its paths replaced by ``$RUN_ROOT`` and
``$TASKS``, ``metrics.jsonl``, and the rollout records ``env/rollouts/results.jsonl`` that
``migration_learning.py --table-only`` reads) of every run in ``DIR/ARM/seedS`` after each chunk, so a machine
that starts without the run root (checkpoints and trajectories are not archived) reads the
finished runs back from it instead of running them again; only a run writes it (``--table-only``
reads it). A run found in both places (:func:`seed_archive.pick`): the run directory's copy is read
when it is at least as far as the archived one (outer batches, evaluations, finished); an
archived copy that is further is kept, never replaced by a copy behind it; one that is finished
while the run directory's is not, or copies with other settings, are refused, naming both. An
unfinished archived run with no run directory is run again from its start (its checkpoint is
gone); its archived copy stays until the new run is as far.

Before the first chunk everything is checked (:func:`preflight`): ``--seeds`` and ``--arms`` (no
repeats), ``--notes`` (a file), ``--out`` (a writable directory), every existing run's files
(:mod:`run_reader`: a line that cannot be read is an error naming the file and line; only a torn
last line is skipped, and a run whose torn last line may be its final evaluation is refused
rather than run again), and ``--extra``: an existing run trained with other settings than
``FLAGS`` and ``--extra`` give is refused (a resumed run trains with its own ``train.json``). The
report's ``# settings:`` line is what the runs' ``train.json`` holds. ``--table-only`` with no run
at all (in the run root or the archive) is an error and leaves ``--out`` as it is.

    python bench/seed_experiments.py --run-root $RUN_ROOT --train-tasks $TASKS/train \\
        --eval-tasks $TASKS/eval --seeds 0,1,2 --out bench/results/seed-experiments-DATE.txt

Needs ``.venv-vllm`` (scripts/bootstrap-vllm.sh; ``STRANDS_ART_VLLM_PYTHON=.venv-vllm/bin/python``),
Java 17 + Maven and bubblewrap (scripts/setup-system.sh), and task directories from
``strands-art make-tasks --split train`` / ``--split eval``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import seed_figures
import seed_tables
from command_line import placeholders, report_head, shown  # noqa: F401  (shown: the command line the tests read)
from run_settings import archived_bench_parser, differences, flag_problem
from seed_archive import archive_problem, archive_runs, locate, pick, read_copy
from seed_tables import ARM_KEYS, ARMS, Run

FLAGS = (
    "--model qwen2.5-coder-0.5b --backend vllm --prompt compact-no-recipe --max-turns 12 "
    "--temperature 0.7 --max-new-tokens 512 --outer-batches 6 --prompt-batch 2 --rollouts-per-prompt 4 "
    "--ppo-mini-batch 2 --epochs 1 --lr 3e-4 --warmup-steps 0 --kl-coef 0 --gradient-checkpointing "
    "--micro-batch-tokens 512 --max-staleness 0 --eval-every 3 --eval-samples 2 --eval-temperature 0.7 "
    "--concurrency 4 --checkpoint-every 1"
)
"""The settings every arm shares: the recorded migration-learning settings
(bench/migration_learning.py) with the design's batch shape, one PPO mini-batch per outer batch
(``--ppo-mini-batch`` = ``--prompt-batch``: fixed-steps takes 1 optimizer step, fixed-rows one per 8
rows), 6 outer batches, held-out evaluation before, after 3 and after 6 (2 rollouts per held-out
task: 14 with the 7 tasks of ``make-tasks --split eval --n 7``)."""

ARM_FLAGS = {
    arm: ["--history-mode", v["history_mode"], "--batching", v["batching"]] for arm, v in ARMS.items()
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    arms = "\n".join(f"  {arm}: {' '.join(flags)}" for arm, flags in ARM_FLAGS.items())
    p = archived_bench_parser(
        __doc__,
        f"Each run: strands-art train --env migrationbench FLAGS, --extra, the arm's flags, --seed S, where\n"
        f"FLAGS = {FLAGS}\n{arms}\nThe report: docs/seed-experiments.md.",
        "run directories go here: ARM/seedS",
    )
    p.add_argument("--train-tasks", help="training task directories (make-tasks --split train)")
    p.add_argument(
        "--eval-tasks",
        help="held-out task directories (make-tasks --split eval); without it the runs have no held-out "
        "evaluation (Table 2's costs only, no reward columns)",
    )
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds, each once")
    p.add_argument(
        "--arms", default=",".join(ARMS), help=f"comma-separated arms, each once, of {', '.join(ARMS)}"
    )
    p.add_argument(
        "--extra",
        default="",
        help="more `strands-art train` flags, after FLAGS (a run started with other settings is refused)",
    )
    p.add_argument("--chunk", type=int, default=1, help="outer batches per process (each under the lock)")
    p.add_argument(
        "--lock", default="/tmp/strands-art-heavy.lock", help="flock file held per chunk ('' for none)"
    )
    p.add_argument(
        "--max-chunks",
        type=int,
        default=None,
        help="stop after this many chunks (the same command continues); 0: check the runs and the flags and "
        "write the report, run nothing",
    )
    p.add_argument(
        "--table-only",
        action="store_true",
        help="write the report from the run directories (and the archive); run nothing, write no archive",
    )
    p.add_argument(
        "--out", help="write the report here (and Figure 1 / 2 beside it, -figure1.png / -figure2.png)"
    )
    p.add_argument(
        "--archive",
        help="keep each run's train.json (paths as $RUN_ROOT/$TASKS), metrics.jsonl and rollout records "
        "(env/rollouts/results.jsonl) in ARCHIVE/ARM/seedS after every chunk; finished archived runs are "
        "read back instead of run again",
    )
    p.add_argument(
        "--notes", help="a text file whose lines go into the report's header (how the tasks were made, ...)"
    )
    args = p.parse_args(argv)
    if not re.fullmatch(r"\d+(,\d+)*", args.seeds):
        p.error(f"--seeds {args.seeds!r}: comma-separated non-negative integers, e.g. 0,1,2")
    seeds = [int(s) for s in args.seeds.split(",")]
    if len(set(seeds)) < len(seeds):
        p.error(f"--seeds {args.seeds!r}: a seed given twice (each run would be counted twice)")
    arms = args.arms.split(",")
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        p.error(f"--arms: unknown {unknown}; the arms are {', '.join(ARMS)}")
    if len(set(arms)) < len(arms):
        p.error(f"--arms {args.arms!r}: an arm given twice")
    if args.notes and not Path(args.notes).is_file():
        p.error(f"--notes {args.notes}: no such file")
    if args.out:
        parent = Path(args.out).parent
        if Path(args.out).is_dir() or not parent.is_dir() or not os.access(parent, os.W_OK):
            p.error(f"--out {args.out}: not a file in a writable directory")
    if Path(args.run_root).exists() and not Path(args.run_root).is_dir():
        p.error(f"--run-root {args.run_root}: not a directory (a file is there)")
    if (why := archive_problem(args.archive, args.run_root)) is not None:
        p.error(f"--archive {args.archive}: {why}")
    if not args.table_only:
        if not args.train_tasks:
            p.error("--train-tasks is needed to run (--table-only runs nothing)")
        for flag in ("train_tasks", "eval_tasks"):
            value = getattr(args, flag)
            if value and not Path(value).is_dir():
                p.error(
                    f"--{flag.replace('_', '-')} {value}: not a directory (make it with strands-art make-tasks)"
                )
        for arm in arms:  # with the arm's own flags (fixed-rows needs --max-staleness 0, ...)
            if (why := flag_problem([*FLAGS.split(), *args.extra.split(), *ARM_FLAGS[arm]])) is not None:
                p.error(f"--extra {args.extra!r} with arm {arm}: {why}")
    if args.chunk < 1:
        p.error("--chunk must be >= 1")
    if args.max_chunks is not None and args.max_chunks < 0:
        p.error("--max-chunks must be >= 0 (0: check the runs and write the report, run nothing)")
    return args


def check_extra(args: argparse.Namespace, run: Run) -> None:
    """Refuse an existing run that ``FLAGS``, ``--extra`` and its arm's flags would not have
    started: ``strands-art train --resume`` trains with the run's ``train.json`` and ignores them.
    The comparison is the one ``--resume`` makes (by meaning:
    :func:`~strands_art.training.resume_settings.resume_settings`), except that a larger
    ``--outer-batches`` is a change here too (the bench resumes without restating it).

    Raises:
        ValueError: naming the run and each setting that differs.
    """
    clash = differences(
        [*FLAGS.split(), *args.extra.split(), *ARM_FLAGS[run.arm], "--seed", str(run.seed)],
        run.settings,
        run.dir,
        every=False,  # the report's settings line is the runs' own train.json
    )
    if clash:
        raise ValueError(
            f"--extra {args.extra!r}: {run.dir} was started with other settings: {'; '.join(clash)}; "
            "pass the --extra it was started with (its train.json holds every setting), or another --run-root "
            "and --archive"
        )


def order(seeds: list[int], arms: list[str]) -> list[tuple[str, int]]:
    """The runs in the order chunks go round: seed by seed, the history pair first."""
    pref = ["tree-fixed-steps", "linear-fixed-steps", "tree-fixed-rows"]
    return [(arm, seed) for seed in seeds for arm in pref if arm in arms]


def train_command(args: argparse.Namespace, arm: str, seed: int, run_dir: Path) -> list[str]:
    """One chunk of one run: ``strands-art train`` (``--resume`` once the directory holds the run)
    ``--stop-after CHUNK``, under ``flock LOCK`` when ``--lock`` is set."""
    exe = Path(sys.executable).parent / "strands-art"
    head = [str(exe) if exe.exists() else "strands-art", "train"]
    tail = ["--stop-after", str(args.chunk), "--no-progress"]
    if (run_dir / "train.json").exists():
        cmd = [*head, "--resume", "--run-dir", str(run_dir), *tail]
    else:
        cmd = [
            *head, "--env", "migrationbench", "--train-tasks", args.train_tasks,
            *(["--eval-tasks", args.eval_tasks] if args.eval_tasks else []), *FLAGS.split(), *args.extra.split(), *ARM_FLAGS[arm], "--seed", str(seed), "--run-dir", str(run_dir),
            *tail,
        ]  # fmt: skip
    return ["flock", args.lock, *cmd] if args.lock else cmd


def read_runs(
    root: Path, runs: list[tuple[str, int]], archive: Path | None = None, names: dict[str, str] | None = None
) -> list[Run]:
    """The runs of ``runs`` that exist, read back from the run root or the archive
    (:func:`seed_archive.locate`; ``names``: :func:`placeholders`)."""
    found = [locate(root, archive, arm, seed, names or {}) for arm, seed in runs]
    return [run for run in found if run is not None]


def preflight(
    args: argparse.Namespace,
    root: Path,
    archive: Path | None,
    wanted: list[tuple[str, int]],
    names: dict[str, str],
) -> None:
    """Before anything is written: read every existing run, both copies (:func:`seed_archive.pick`:
    errors, and a note on stderr when the archived copy is further); check its settings against
    ``FLAGS`` and ``--extra`` (:func:`check_extra`: with ``--table-only`` a note on stderr, else refused), refuse a run whose torn last
    line may be its final evaluation (:attr:`seed_tables.Run.unsure`), and say which archived runs
    are run again from their start.

    Raises:
        ValueError: naming the run (its file and line where one is at fault).
    """
    for arm, seed in wanted:
        here, kept = read_copy(root, arm, seed, names), read_copy(archive, arm, seed, names)
        run, note = pick(here, kept)
        if note:
            print(note, file=sys.stderr)
        if run is None:
            continue
        if args.table_only:  # the report reads the runs' own settings; say when --extra is not theirs
            try:
                check_extra(args, run)
            except ValueError as exc:
                print(f"note (--table-only reports the runs' own settings): {exc}", file=sys.stderr)
            continue
        check_extra(args, run)
        if run.unsure:
            raise ValueError(
                f"{run.dir / 'metrics.jsonl'}:{run.torn}: the last line is cut short and every outer batch "
                "trained: the run may be finished (that line its final evaluation); not run again over it. "
                "Remove that line to have the final evaluation run again"
            )
        if here is None and not run.finished:
            print(
                f"note: {arm} seed {seed}: the archived copy {run.dir} is unfinished and has no run directory: "
                "run again from its start (the archived copy is kept until the new run is as far)",
                file=sys.stderr,
            )


def settings_lines(runs: list[Run]) -> list[str]:
    """The report's ``# settings:`` line: what the runs' ``train.json`` holds (paths as
    ``$RUN_ROOT`` / ``$TASKS``), every setting the arms share (``seed_tables.check_same_settings``
    refuses runs that differ in one); and, per run, the arm's own settings beyond its history mode
    and batching where they differ between the runs."""

    def text(v: Any) -> str:
        return v if isinstance(v, str) and v and not any(c.isspace() for c in v) else json.dumps(v)

    if not runs:
        return ["# settings: no run yet"]
    runs = sorted(runs, key=lambda r: (list(ARMS).index(r.arm), r.seed))
    shared = {k: v for k, v in runs[0].settings.items() if k not in ARM_KEYS}
    lines = ["# settings (the runs' train.json): " + " ".join(f"{k}={text(v)}" for k, v in shared.items())]
    own = sorted({k for r in runs for k in r.settings if k in ARM_KEYS - {"seed", "run_dir", *ARMS[r.arm]}})
    differing = [k for k in own if len({json.dumps(r.settings.get(k)) for r in runs}) > 1]
    if differing:
        per_run = [
            f"{r.arm} seed {r.seed}: " + " ".join(f"{k}={text(r.settings.get(k))}" for k in differing)
            for r in runs
        ]
        lines.append("# settings per run: " + "; ".join(per_run))
    return lines


def write_report(args: argparse.Namespace, argv: list[str], runs: list[Run], wanted: int) -> str:
    """The report text (and the figures when ``--out``); PARTIAL while any run is unfinished."""
    lines, _t1, t2 = seed_tables.report(runs, args.arms.split(","))
    done = sum(1 for r in runs if r.finished)
    head = [*report_head("bench/seed_experiments.py", args, argv, done, wanted), *settings_lines(runs)]
    if any(r.unsure for r in runs):
        head.insert(1, "# UNSURE runs (see their lines): the last line of metrics.jsonl is cut short; "
                       "the bench does not run them again")  # fmt: skip
    if (note := seed_tables.code_note([r.commits for r in runs])) is not None:
        head.append(note)
    if args.notes:
        head += ["#", *(f"# {x}".rstrip() for x in Path(args.notes).read_text(encoding="utf-8").splitlines())]
    text = "\n".join([*head, "", *lines]) + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        stem = str(Path(args.out).with_suffix(""))
        if any(r.evals for r in runs):  # held-out reward curves (none without --eval-tasks)
            seed_figures.figure1(runs, f"{stem}-figure1.png")
        if t2["pairs"]:
            seed_figures.figure2(t2, f"{stem}-figure2.png")
    return text


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    root = Path(args.run_root)
    archive = Path(args.archive) if args.archive else None
    wanted = order([int(s) for s in args.seeds.split(",")], args.arms.split(","))
    names = placeholders(args)
    chunks = 0

    def finished(arm: str, seed: int) -> bool:
        run = locate(root, archive, arm, seed, names)
        return run is not None and run.finished

    def report() -> str:
        if archive is not None and not args.table_only:
            for note in archive_runs(names, root, archive, wanted):
                print(note, file=sys.stderr)
        return write_report(args, argv, read_runs(root, wanted, archive, names), len(wanted))

    try:
        if args.table_only and not read_runs(root, wanted, archive, names):
            where = f"{root}" + (f" or the archive {archive}" if archive else "")
            raise ValueError(
                f"no run of --seeds {args.seeds} --arms {args.arms} in {where}: nothing to report"
                + (f" (--out {args.out} left as it is)" if args.out else "")
            )
        preflight(args, root, archive, wanted, names)
        while not args.table_only:
            todo = [(a, s) for a, s in wanted if not finished(a, s)]
            if not todo or (args.max_chunks is not None and chunks >= args.max_chunks):
                break
            for arm, seed in todo:
                if args.max_chunks is not None and chunks >= args.max_chunks:
                    break
                run_dir = root / arm / f"seed{seed}"
                run_dir.parent.mkdir(parents=True, exist_ok=True)
                cmd = train_command(args, arm, seed, run_dir)
                print(
                    f"$ {shlex.join(cmd)}   ({time.strftime('%H:%M:%S')}, load {os.getloadavg()})", flush=True
                )
                t0 = time.monotonic()
                rc = subprocess.run(cmd).returncode
                print(f"{arm} seed {seed}: exit {rc} after {time.monotonic() - t0:.0f} s", flush=True)
                if rc != 0:
                    return rc
                chunks += 1
                report()
        print(report(), end="")
    except (ValueError, OSError) as exc:
        print(f"seed_experiments.py: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
