"""Keep what the viewer reads of a real ``strands-art train`` run as test data (tests/data/train-*).

Copies ``train.json``, ``command.txt``, ``metrics.jsonl``, ``rows/`` (the rows and the rows as
trained) and ``trajectories/`` (every rollout) of ``SRC`` to ``DEST``, leaving out the model's
checkpoints, the TensorBoard events and the environment's work files (megabytes the viewer never
opens), and writes the run directory and task paths of the machine it ran on as the relative ones
given (``--as runs/x``, ``--tasks-as DIR=NAME``: no absolute path of one machine in the
repository), in the settings and in the rollouts' metadata (JSONL lines and the Parquet parts'
``metadata`` column). Nothing else is changed.

    python -m tests.support.keep_train_run SRC DEST --as runs/train-lookup [--tasks-as /tmp/t=tasks]
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

KEPT = ("train.json", "command.txt", "metrics.jsonl")
KEPT_DIRS = ("rows", "trajectories")


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
    for name in KEPT_DIRS:
        shutil.copytree(src / name, dest / name, ignore=shutil.ignore_patterns("*.tmp", "*.torn"))
    pairs = sorted(replace.items(), key=lambda kv: -len(kv[0]))
    for path in dest.rglob("*.jsonl"):  # a rollout's metadata may name its workspace
        text = path.read_text(encoding="utf-8")
        for old, new in pairs:
            text = text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])
        path.write_text(text, encoding="utf-8")
    for path in (dest / "trajectories" / "rows").glob("*.parquet"):
        table = pq.read_table(path)
        meta = table.column("metadata").to_pylist()
        fixed = []
        for m in meta:
            for old, new in pairs:
                m = m.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1]) if m else m
            fixed.append(m)
        if fixed != meta:
            i = table.schema.get_field_index("metadata")
            pq.write_table(table.set_column(i, table.schema.field(i), pa.array(fixed, pa.string())), path)


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
