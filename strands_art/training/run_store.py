"""What a ``strands-art train`` run keeps of its rollouts, for the viewer and ``replay``.

- every rollout (training and held-out) in the run's trajectory store,
  ``RUN_DIR/trajectories/`` (:class:`~strands_art.store.TrajectoryStore`: one JSONL line with the
  conversation, one Parquet part of rows), its ``metadata`` carrying ``split`` (``"train"`` or
  ``"eval"``) and ``outer_batch`` (the batch it was sampled for; for a held-out rollout, the
  number of outer batches trained when it was sampled);
- the rows as trained (:mod:`strands_art.training.token_trace`), one Parquet file per outer batch
  beside its rows JSONL: ``RUN_DIR/rows/ob-NNNNNN.trained.parquet``, one record per row of the
  batch with :data:`TRAINED_SCHEMA`.

Rollout ids are the loop's (:func:`~strands_art.training.loop.collect_rollouts`):
``b{outer_batch}-{task}-r{k}``, held-out ``eval-b{outer_batch}-{task}-r{k}``. A resumed run
redoes the batches after its checkpoint under the same ids; :meth:`RunStore.reconcile` drops
what it will redo first.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from strands_art.store import TrajectoryStore, open_new
from strands_art.training.grpo import GRPOConfig, compute_advantages
from strands_art.training.token_trace import TRACE_COLUMNS as TOKEN_COLUMNS
from strands_art.trajectory import Trajectory

logger = logging.getLogger(__name__)

ROLLOUT_ID = re.compile(r"^(eval-)?b(\d+)-")
"""``(eval-)?b{outer_batch}-…``: the loop's rollout ids."""

TRAJECTORIES_DIR = "trajectories"

TRAINED_SCHEMA = pa.schema(
    [
        ("rollout_id", pa.string()),
        ("row_index", pa.int32()),
        ("advantage", pa.float64()),
        ("excluded", pa.string()),
        ("forwarded", pa.bool_()),
        ("step", pa.int32()),
        ("loss_mask", pa.list_(pa.int8())),
        ("trainer_logprobs", pa.list_(pa.float32())),
        ("sampler_logprobs", pa.list_(pa.float32())),
        ("old_logprobs", pa.list_(pa.float32())),
        ("importance_weight", pa.list_(pa.float32())),
        ("clipped", pa.list_(pa.int8())),
    ]
)
"""One row as trained. ``advantage``: the trainer's (None: the rollout was left out of GRPO, the
reason in ``excluded``: failed, stale, no finite reward); ``forwarded`` False: no optimizer step forwarded the row (advantage 0
and no KL term, or no token left in its loss, e.g. a truncated turn left out) and its per-token
lists are null; ``step``: the run's optimizer step (1-based) that first
forwarded it; the lists are aligned with the row's ``input_ids`` (see
:mod:`~strands_art.training.token_trace`; ``trainer_logprobs`` NaN where filtered)."""


def parse_rollout_id(rid: str) -> tuple[str, int] | None:
    """``("train" | "eval", outer_batch)`` of a loop rollout id, None for any other id."""
    m = ROLLOUT_ID.match(rid)
    if m is None:
        return None
    return ("eval" if m.group(1) else "train", int(m.group(2)))


def trained_path(run_dir: Path, outer_batch: int) -> Path:
    """``RUN_DIR/rows/ob-NNNNNN.trained.parquet``."""
    return Path(run_dir) / "rows" / f"ob-{outer_batch:06d}.trained.parquet"


class RunStore:
    """The trajectory store of a training run and the files of its rows as trained.

    Storing never stops training: a rollout the store refuses (:meth:`TrajectoryStore.append`
    raising ValueError or OSError) is logged and left out of the viewer.
    """

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.store = TrajectoryStore(self.run_dir / TRAJECTORIES_DIR)
        self.history_mode: str | None = None
        """The gateway's history mode, recorded on each rollout (``replay --from-run`` reads it)."""

    def add(self, trajectories: Sequence[Trajectory], split: str, outer_batch: int) -> None:
        """Append ``trajectories`` with ``metadata`` ``split`` and ``outer_batch`` set."""
        for t in trajectories:
            t.metadata["split"] = split
            t.metadata["outer_batch"] = outer_batch
            if self.history_mode is not None:
                t.metadata["history_mode"] = self.history_mode
            try:
                self.store.append(t)
            except (ValueError, OSError) as exc:
                logger.warning("rollout %s not stored for the viewer: %s", t.rollout_id, exc)

    def wrap(self, rollout: Any) -> Any:
        """``rollout`` (a :data:`~strands_art.training.rollouts.RolloutFn`) that also stores each
        held-out rollout (id ``eval-b…``) it returns; one that raises is stored as a failed
        trajectory with its error, then the exception propagates (the loop scores it 0)."""

        async def stored(gateway: Any, task: Any, rid: str, gid: str, sampling: Any) -> Trajectory:
            parsed = parse_rollout_id(rid)
            if parsed is None or parsed[0] != "eval":
                return await rollout(gateway, task, rid, gid, sampling)
            try:
                traj = await rollout(gateway, task, rid, gid, sampling)
            except Exception as exc:
                failed = Trajectory(rollout_id=rid, group_id=gid)
                failed.metadata.update(failed=True, error=f"{type(exc).__name__}: {exc}")
                self.add([failed], "eval", parsed[1])
                raise
            self.add([traj], "eval", parsed[1])
            return traj

        return stored

    def reconcile(self, done: int, eval_batches: set[int]) -> None:
        """Before a resume redoes outer batches ``done`` and later: keep the training rollouts
        of batches before ``done`` and the held-out ones of the evaluations the metrics kept
        (``eval_batches``); drop the rest and the trained-row files of batches ``>= done``."""
        keep = set()
        for rid in self.store.rollout_ids():
            parsed = parse_rollout_id(rid)
            if parsed is None:
                continue
            split, b = parsed
            if (split == "train" and b < done) or (split == "eval" and b in eval_batches):
                keep.add(rid)
        dropped, _ = self.store.retain(keep)
        if dropped:
            logger.info("resume: %d stored rollouts of redone batches dropped", len(dropped))
        for path in (self.run_dir / "rows").glob("ob-*.trained.parquet"):
            m = re.match(r"ob-(\d+)\.trained\.parquet$", path.name)
            if m and int(m.group(1)) >= done:
                path.unlink(missing_ok=True)

    def write_trained(
        self,
        outer_batch: int,
        trajectories: Sequence[Trajectory],
        trace: dict[int, dict[str, Any]],
        grpo: GRPOConfig | None = None,
    ) -> Path:
        """Write the rows of ``trajectories`` as the last update trained them (``trace``:
        :attr:`LocalTrainer.trace`) to :func:`trained_path` (temp name, then rename).

        Every row of the batch gets a record: ``advantage`` is the trainer's own
        (:func:`~strands_art.training.grpo.compute_advantages` with the trainer's ``grpo``
        settings on the same trajectories; None for a rollout left out of GRPO, whose reason is
        in ``excluded``); a row is matched to its trace entry by rollout id and token IDs, and one
        never forwarded (advantage 0 and no KL term, or no token left in its loss) has
        ``forwarded`` False and null lists.
        """
        try:
            adv = compute_advantages(trajectories, grpo)
            advantages, excluded = adv.advantages, adv.excluded
        except ValueError as exc:  # the update raised the same: nothing was trained
            logger.warning("outer batch %d: rows as trained not written: %s", outer_batch, exc)
            advantages, excluded = {}, {t.rollout_id: str(exc)[:300] for t in trajectories}
        by_row: dict[tuple[str, tuple[int, ...]], dict[str, Any]] = {}
        for entry in trace.values():
            row = entry["row"]
            by_row[(row.rollout_id, tuple(row.input_ids))] = entry
        records = []
        for t in trajectories:
            for i, row in enumerate(t.rows):
                entry = by_row.get((t.rollout_id, tuple(row.input_ids)))
                rec: dict[str, Any] = {
                    "rollout_id": t.rollout_id,
                    "row_index": i,
                    "advantage": advantages.get(t.rollout_id),
                    "excluded": excluded.get(t.rollout_id),
                    "forwarded": entry is not None,
                }
                if entry is not None:
                    rec["step"] = entry["step"]
                    for key in TOKEN_COLUMNS:
                        rec[key] = np.asarray(entry[key]).tolist()
                records.append(rec)
        path = trained_path(self.run_dir, outer_batch)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with open_new(tmp) as f:  # never through a symlink planted at the temporary name
            pq.write_table(pa.Table.from_pylist(records, schema=TRAINED_SCHEMA), f)
        os.replace(tmp, path)
        return path
