"""Keep what the viewer reads of a real ``strands-art train`` run as test data (tests/data/train-*).

Copies ``train.json``, ``command.txt``, ``metrics.jsonl``, ``code.jsonl`` (where the run has
one: the code that trained it), ``rows/`` (the rows and the rows as
trained) and ``trajectories/`` (every rollout) of ``SRC`` to ``DEST``, leaving out the model's
checkpoints, the TensorBoard events and the environment's work files (megabytes the viewer never
opens), and writes the run directory and task paths of the machine it ran on as the relative ones
given (``--as runs/x``, ``--tasks-as DIR=NAME``: no absolute path of one machine in the
repository) in ``train.json`` and ``command.txt``. The rollouts are kept byte for byte: their
messages are the text their token IDs encode (``replay --from-run`` rebuilds the rows from them,
tests/test_replay_fixtures.py), so a path an agent saw (a MigrationBench workspace under the run
directory) stays as recorded; record such a run under a scratch directory (``/tmp/...``), as
tests/support/make_view_run.py does.

    python -m tests.support.keep_train_run SRC DEST --as runs/train-lookup [--tasks-as /tmp/t=tasks]
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

KEPT = ("train.json", "command.txt", "metrics.jsonl")
KEPT_DIRS = ("rows", "trajectories")
KEPT_IF_THERE = ("code.jsonl",)  # commits and versions, no path


def keep(src: Path, dest: Path, replace: dict[str, str]) -> None:
    """Copy the kept files of ``src`` to ``dest`` (created), replacing each key of ``replace``
    by its value in ``train.json`` and ``command.txt``."""
    dest.mkdir(parents=True, exist_ok=False)
    for name in KEPT:
        text = (src / name).read_text(encoding="utf-8")
        if name != "metrics.jsonl":
            for old, new in sorted(replace.items(), key=lambda kv: -len(kv[0])):
                text = text.replace(old, new)
        (dest / name).write_text(text, encoding="utf-8")
    for name in KEPT_IF_THERE:
        if (src / name).is_file():
            shutil.copyfile(src / name, dest / name)
    for name in KEPT_DIRS:
        shutil.copytree(src / name, dest / name, ignore=shutil.ignore_patterns("*.tmp", "*.torn"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("dest", type=Path)
    ap.add_argument("--as", dest="as_", required=True, help="the run directory's name in the copy")
    ap.add_argument("--tasks-as", action="append", default=[], metavar="DIR=NAME")
    args = ap.parse_args()
    replace = {str(args.src): args.as_, str(args.src.resolve()): args.as_}
    for item in args.tasks_as:
        old, _, new = item.partition("=")
        replace[old] = new
    keep(args.src, args.dest, replace)


if __name__ == "__main__":
    main()
