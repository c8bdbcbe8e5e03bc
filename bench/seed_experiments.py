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
``--out``, marked PARTIAL with the command that continues it while any run is unfinished, and
Figures 1 and 2 next to it (``--out`` with ``.png`` suffixes). ``--table-only`` writes the report
from the run directories as they are.

``--archive DIR`` keeps what the tables read (``train.json``, its paths replaced by ``$RUN_ROOT`` and
``$TASKS``, and ``metrics.jsonl``) of every run in ``DIR/ARM/seedS`` after each chunk, so a machine
that starts without the run root (checkpoints and trajectories are not archived) reads the
finished runs back from it instead of running them again; a run found in the run root wins over
its archived copy, and an unfinished archived run with no run directory is run again from its
start (its checkpoint is gone).

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
import shutil
import subprocess
import sys
import time
from pathlib import Path

import seed_tables
from seed_tables import ARMS, Run, read_run

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
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run-root", required=True, help="run directories go here: ARM/seedS")
    p.add_argument("--train-tasks", help="training task directories (make-tasks --split train)")
    p.add_argument(
        "--eval-tasks",
        help="held-out task directories (make-tasks --split eval); without it the runs have no held-out "
        "evaluation (Table 2's costs only, no reward columns)",
    )
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    p.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated arms, of {', '.join(ARMS)}")
    p.add_argument("--extra", default="", help="more `strands-art train` flags, after FLAGS")
    p.add_argument("--chunk", type=int, default=1, help="outer batches per process (each under the lock)")
    p.add_argument(
        "--lock", default="/tmp/strands-art-heavy.lock", help="flock file held per chunk ('' for none)"
    )
    p.add_argument("--max-chunks", type=int, default=None, help="stop after this many chunks (then continue)")
    p.add_argument(
        "--table-only", action="store_true", help="write the report from the run directories; run nothing"
    )
    p.add_argument(
        "--out", help="write the report here (and Figure 1 / 2 beside it, -figure1.png / -figure2.png)"
    )
    p.add_argument(
        "--archive",
        help="keep each run's train.json (paths as $RUN_ROOT/$TASKS) and metrics.jsonl in ARCHIVE/ARM/seedS "
        "after every chunk; finished archived runs are read back instead of run again",
    )
    p.add_argument(
        "--notes", help="a text file whose lines go into the report's header (how the tasks were made, ...)"
    )
    args = p.parse_args(argv)
    if not re.fullmatch(r"\d+(,\d+)*", args.seeds):
        p.error(f"--seeds {args.seeds!r}: comma-separated non-negative integers, e.g. 0,1,2")
    unknown = [a for a in args.arms.split(",") if a not in ARMS]
    if unknown:
        p.error(f"--arms: unknown {unknown}; the arms are {', '.join(ARMS)}")
    if not args.table_only:
        for flag in ("train_tasks", "eval_tasks"):
            value = getattr(args, flag)
            if (value or flag == "train_tasks") and not (value and Path(value).is_dir()):
                p.error(
                    f"--{flag.replace('_', '-')} {value}: not a directory (make it with strands-art make-tasks)"
                )
    if args.chunk < 1:
        p.error("--chunk must be >= 1")
    return args


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


def run_dir_of(root: Path, archive: Path | None, arm: str, seed: int) -> Path | None:
    """Where run ``(arm, seed)`` is read from: its run directory when that holds a run
    (``train.json``), else its archived copy when there is one, else None."""
    for base in (root, archive):
        if base is not None and (base / arm / f"seed{seed}" / "train.json").exists():
            return base / arm / f"seed{seed}"
    return None


def read_runs(root: Path, runs: list[tuple[str, int]], archive: Path | None = None) -> list[Run]:
    """The runs of ``runs`` that exist (:func:`run_dir_of`), read back."""
    return [read_run(d) for arm, seed in runs if (d := run_dir_of(root, archive, arm, seed)) is not None]


def archive_runs(args: argparse.Namespace, root: Path, archive: Path, runs: list[tuple[str, int]]) -> None:
    """Copy what the tables read of each run directory of ``runs`` under ``root`` into
    ``archive/ARM/seedS``: ``train.json`` with ``run_dir``, ``train_tasks`` and ``eval_tasks`` as
    ``$RUN_ROOT/ARM/seedS`` and ``$TASKS/…`` (no path of this machine in a committed file), and
    ``metrics.jsonl`` (refused if it names the run root: it would carry a path of this machine).

    Raises:
        ValueError: a ``metrics.jsonl`` that holds the run root's absolute path.
    """
    names = placeholders(args)
    for arm, seed in runs:
        src = root / arm / f"seed{seed}"
        if not (src / "train.json").exists():
            continue
        dest = archive / arm / f"seed{seed}"
        dest.mkdir(parents=True, exist_ok=True)
        settings = json.loads((src / "train.json").read_text(encoding="utf-8"))
        settings["run_dir"] = f"$RUN_ROOT/{arm}/seed{seed}"
        for key in ("train_tasks", "eval_tasks"):
            if settings.get(key):
                settings[key] = names.get(
                    os.path.abspath(settings[key]), "$TASKS/" + Path(settings[key]).name
                )
        (dest / "train.json").write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
        metrics = src / "metrics.jsonl"
        if metrics.exists():
            if os.path.abspath(root) in metrics.read_text(encoding="utf-8"):
                raise ValueError(
                    f"{metrics} names the run root {root}: not archived (a path of this machine)"
                )
            shutil.copyfile(metrics, dest / "metrics.jsonl")


def placeholders(args: argparse.Namespace) -> dict[str, str]:
    """This machine's paths among the arguments, each with the variable it is shown as:
    ``$RUN_ROOT``, ``$TASKS/…`` (the task directories' common parent), ``$NOTES``; ``--out``,
    ``--archive`` and ``--notes`` under ``bench/results`` from the repository's root. Keys are the arguments as
    given and their absolute forms."""
    names = {args.run_root: "$RUN_ROOT", **({args.notes: "$NOTES"} if args.notes else {})}
    for value in (args.out, args.archive, args.notes):
        parts = Path(os.path.abspath(value)).parts if value else ()
        at = [i for i in range(len(parts) - 1) if parts[i : i + 2] == ("bench", "results")]
        if at:  # in the repository: from its root
            names[value] = "/".join(parts[at[-1] :])
    dirs = [d for d in (args.train_tasks, args.eval_tasks) if d]
    if dirs:
        parent = os.path.commonpath([os.path.abspath(os.path.join(d, os.pardir)) for d in dirs])
        for d in dirs:
            names[d] = "$TASKS/" + os.path.relpath(os.path.abspath(d), parent)
    names.update({os.path.abspath(k): v for k, v in list(names.items())})
    return names


def shown(args: argparse.Namespace, argv: list[str]) -> str:
    """``argv`` as a command line with this machine's paths as variables (:func:`placeholders`)."""
    names = placeholders(args)
    return " ".join(names.get(a, shlex.quote(a)) for a in argv if a != "--table-only")


def write_report(args: argparse.Namespace, argv: list[str], runs: list[Run], wanted: int) -> str:
    """The report text (and the figures when ``--out``); PARTIAL while any run is unfinished."""
    lines, _t1, t2 = seed_tables.report(runs)
    done = sum(1 for r in runs if r.finished)
    head = [
        f"# bench/seed_experiments.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores",
        f"# command: python bench/seed_experiments.py {shown(args, argv)}"
        + ("   (this report: the same with --table-only)" if args.table_only else ""),
        f"# settings: {FLAGS} {args.extra}".rstrip(),
    ]
    if done < wanted:
        head.insert(0, f"# PARTIAL: {done} of {wanted} runs finished; the same command continues (finished runs are "
                       "read back, stopped ones resumed)")  # fmt: skip
    if args.notes:
        head += ["#", *(f"# {x}".rstrip() for x in Path(args.notes).read_text(encoding="utf-8").splitlines())]
    text = "\n".join([*head, "", *lines]) + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        stem = str(Path(args.out).with_suffix(""))
        if any(r.evals for r in runs):  # held-out reward curves (none without --eval-tasks)
            seed_tables.figure1(runs, f"{stem}-figure1.png")
        if t2["pairs"]:
            seed_tables.figure2(t2, f"{stem}-figure2.png")
    return text


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    root = Path(args.run_root)
    archive = Path(args.archive) if args.archive else None
    wanted = order([int(s) for s in args.seeds.split(",")], args.arms.split(","))
    chunks = 0

    def finished(arm: str, seed: int) -> bool:
        d = run_dir_of(root, archive, arm, seed)
        return d is not None and read_run(d).finished

    def report() -> str:
        if archive is not None:
            archive_runs(args, root, archive, wanted)
        return write_report(args, argv, read_runs(root, wanted, archive), len(wanted))

    try:
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
