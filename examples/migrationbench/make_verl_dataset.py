"""Write verl's RL dataset (Parquet) for MigrationBench tasks: one row per task.

Columns are those verl's ``RLHFDataset`` reads (``verl/utils/dataset/rl_dataset.py``):
``prompt`` (chat messages; shown in verl's logs, the agent builds its own first turn in a fresh
workspace), ``data_source``, ``agent_name`` (the agent loop to run: ``strands_migration`` from
``verl_agent_loops.yaml``), ``reward_model`` (unused: the agent loop scores with Maven) and
``extra_info`` (``index``, ``task``, ``task_dir`` = absolute task directory, which must exist on
every node that runs agent-loop workers).

    python examples/migrationbench/make_verl_dataset.py --out data/migrationbench
    python examples/migrationbench/make_verl_dataset.py --tasks-dir /shared/mb-tasks --out data/mb
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from strands_art.envs.migrationbench.agent import USER_TURN, num_tests_of
from strands_art.envs.migrationbench.tasks import load_tasks


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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks-dir", default=None, help="task folders (default: the bundled tasks)")
    p.add_argument("--out", required=True, help="output directory (train.parquet, val.parquet)")
    p.add_argument("--agent-name", default="strands_migration")
    args = p.parse_args()
    table = pa.Table.from_pylist(rows(args.tasks_dir, args.agent_name))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for split in ("train", "val"):
        pq.write_table(table, out / f"{split}.parquet")
    print(f"{table.num_rows} tasks -> {out}/train.parquet, {out}/val.parquet")


if __name__ == "__main__":
    main()
