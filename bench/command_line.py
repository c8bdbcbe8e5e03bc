"""A bench's command line as its report shows it: this machine's paths as variables
(``$RUN_ROOT``, ``$TASKS/…``, ``$NOTES``) and result files from the repository's root, so a
committed report names no path of one machine (``bench/seed_experiments.py``,
``bench/update_cost.py``)."""

from __future__ import annotations

import argparse
import os
import shlex
import time
from pathlib import Path


def placeholders(args: argparse.Namespace) -> dict[str, str]:
    """This machine's paths among the arguments, each with the variable it is shown as:
    ``$RUN_ROOT``, ``$TASKS/…`` (the task directories' common parent), ``$NOTES``; ``--out``,
    ``--archive``, ``--notes`` and ``--report`` under ``bench/results`` from the repository's root
    (an argument the bench does not have is skipped). Keys are the arguments as
    given and their absolute forms."""
    notes = getattr(args, "notes", None)
    names = {args.run_root: "$RUN_ROOT", **({notes: "$NOTES"} if notes else {})}
    for value in (
        getattr(args, "out", None),
        getattr(args, "archive", None),
        notes,
        getattr(args, "report", None),
    ):
        parts = Path(os.path.abspath(value)).parts if value else ()
        at = [i for i in range(len(parts) - 1) if parts[i : i + 2] == ("bench", "results")]
        if at:  # in the repository: from its root
            names[value] = "/".join(parts[at[-1] :])
    dirs = [d for d in (getattr(args, "train_tasks", None), getattr(args, "eval_tasks", None)) if d]
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


def report_head(bench: str, args: argparse.Namespace, argv: list[str], done: int, wanted: int) -> list[str]:
    """A results file's first lines: ``# PARTIAL: done of wanted runs ...`` while ``done < wanted``,
    the bench, date (UTC) and cores, and the command (:func:`shown`; ``--table-only`` said)."""
    head = [
        f"# {bench}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores",
        f"# command: python {bench} {shown(args, argv)}"
        + ("   (this report: the same with --table-only)" if args.table_only else ""),
    ]
    if done < wanted:
        head.insert(0, f"# PARTIAL: {done} of {wanted} runs finished; the same command continues (finished runs "
                       "are read back, stopped ones resumed)")  # fmt: skip
    return head
