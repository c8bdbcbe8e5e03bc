"""Crash-safe trajectory store: finished rollouts appended to JSONL and Parquet.

Layout of a store directory::

    trajectories.jsonl      one JSON trajectory per line, appended and fsync'ed (turns keep their
                            chat messages and tools, compactly: ``Trajectory.to_dict(messages=True)``)
    rows/part-<id>.parquet  one Parquet file per rollout (written to a temp name, then renamed)

A killed process loses at most the rollout being written: a torn last JSONL line is skipped
(with a warning) on read, and a Parquet part appears only once complete (atomic rename).
Read the rows of a whole run with :meth:`TrajectoryStore.read_rows_table` (a pyarrow Table
over ``rows/``).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from strands_art.trajectory import Trajectory

logger = logging.getLogger(__name__)

ROW_SCHEMA = pa.schema(
    [
        ("rollout_id", pa.string()),
        ("group_id", pa.string()),
        ("row_index", pa.int32()),
        ("input_ids", pa.list_(pa.int32())),
        ("loss_mask", pa.list_(pa.int8())),
        ("logprobs", pa.list_(pa.float32())),
        ("turns", pa.list_(pa.int32())),
        ("reward", pa.float64()),
        ("metadata", pa.string()),
    ]
)


class TrajectoryStore:
    """Append-only store of finished trajectories under ``root`` (created if missing)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        (self.root / "rows").mkdir(parents=True, exist_ok=True)
        self.jsonl = self.root / "trajectories.jsonl"
        self._lock = threading.Lock()

    def append(self, trajectory: Trajectory) -> None:
        """Persist one finished rollout (JSONL line + Parquet part), durably."""
        line = json.dumps(trajectory.to_dict(messages=True), ensure_ascii=False) + "\n"
        self._write_parquet(trajectory)
        with self._lock, open(self.jsonl, "a+b") as f:
            if f.tell() > 0:  # a torn line from a killed writer must not swallow this one
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    line = "\n" + line
            f.write(line.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())

    def _write_parquet(self, t: Trajectory) -> None:
        table = pa.Table.from_pylist(
            [
                {
                    "rollout_id": t.rollout_id,
                    "group_id": t.group_id,
                    "row_index": i,
                    "input_ids": r.input_ids,
                    "loss_mask": r.loss_mask,
                    "logprobs": r.logprobs,
                    "turns": r.turns,
                    "reward": r.reward,
                    "metadata": json.dumps(r.metadata, ensure_ascii=False),
                }
                for i, r in enumerate(t.rows)
            ],
            schema=ROW_SCHEMA,
        )
        final = self.root / "rows" / f"part-{_safe(t.rollout_id)}.parquet"
        tmp = final.with_suffix(".parquet.tmp")
        pq.write_table(table, tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, final)

    def __iter__(self) -> Iterator[Trajectory]:
        """Trajectories in append order; a torn final line (crash mid-write) is skipped."""
        if not self.jsonl.exists():
            return
        with open(self.jsonl, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.endswith("\n"):
                    logger.warning("%s:%d: skipping an incomplete line (interrupted write)", self.jsonl, n)
                    continue
                try:
                    yield Trajectory.from_dict(json.loads(line))
                except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                    logger.warning("%s:%d: skipping an unreadable line (%s)", self.jsonl, n, exc)

    def rollout_ids(self) -> set[str]:
        """Ids of the rollouts already stored (for resuming a run)."""
        return {t.rollout_id for t in self}

    def read_rows_table(self) -> pa.Table:
        """All stored rows as one pyarrow Table with :data:`ROW_SCHEMA`."""
        parts = sorted((self.root / "rows").glob("part-*.parquet"))
        if not parts:
            return ROW_SCHEMA.empty_table()
        return pa.concat_tables([pq.read_table(p, schema=ROW_SCHEMA) for p in parts])


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
