"""Write verl's RL dataset (Parquet) for MigrationBench tasks: one row per task.

Columns are those verl's ``RLHFDataset`` reads (``verl/utils/dataset/rl_dataset.py``):
``prompt`` (chat messages; shown in verl's logs, the agent builds its own first turn in a fresh
workspace), ``data_source``, ``agent_name`` (the agent loop to run: ``strands_migration`` from
``verl_agent_loops.yaml``), ``reward_model`` (unused: the agent loop scores with Maven) and
``extra_info`` (``index``, ``task``, ``task_dir`` = absolute task directory, which must exist on
every node that runs agent-loop workers).

``val.parquet`` (verl's validation set) holds the ``--val-tasks-dir`` tasks, held out: none of
them may be a training task; without it, the training tasks again (the published recipe).

    python examples/migrationbench/make_verl_dataset.py --out data/migrationbench
    python examples/migrationbench/make_verl_dataset.py --tasks-dir /shared/mb-train \
        --val-tasks-dir /shared/mb-eval --out data/mb
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from strands_art.envs.migrationbench.agent.agent import USER_TURN, num_tests_of
from strands_art.envs.migrationbench.tasks.tasks import load_tasks
from strands_art.validation import listed


def rows(tasks_dir: str | None, agent_name: str) -> list[dict]:
    out = []
    for i, task in enumerate(load_tasks(tasks_dir)):
        text = USER_TURN.format(repo_path=task.name, num_tests=num_tests_of(task.record))
        out.append(
            {
                "data_source": "migrationbench",
                "agent_name": agent_name,
                "prompt": [{"role": "user", "content": text}],
                "reward_model": {"style": "rule", "ground_truth": ""},
                "extra_info": {"index": i, "task": task.name, "task_dir": str(task.dir.resolve())},
            }
        )
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks-dir", default=None, help="training task folders (default: the bundled tasks)")
    p.add_argument(
        "--val-tasks-dir",
        default=None,
        help="held-out task folders for val.parquet, none a training task (default: the training tasks)",
    )
    p.add_argument("--out", required=True, help="output directory (train.parquet, val.parquet)")
    p.add_argument("--agent-name", default="strands_migration")
    args = p.parse_args(argv)
    train = rows(args.tasks_dir, args.agent_name)
    val = rows(args.val_tasks_dir, args.agent_name) if args.val_tasks_dir else train
    both = sorted({r["extra_info"]["task"] for r in train} & {r["extra_info"]["task"] for r in val})
    if args.val_tasks_dir and both:
        p.error(f"--val-tasks-dir holds training tasks: {listed(both)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(train), out / "train.parquet")
    pq.write_table(pa.Table.from_pylist(val), out / "val.parquet")
    print(f"{len(train)} tasks -> {out}/train.parquet, {len(val)} tasks -> {out}/val.parquet")


if __name__ == "__main__":
    main()
