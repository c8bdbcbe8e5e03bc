"""What the viewer reads of a ``strands-art train`` run beyond its trajectory store.

- :class:`TrainedIndex`: the rows as trained (``rows/ob-NNNNNN.trained.parquet``,
  :mod:`strands_art.training.run_store`), indexed once per file state: the trainer's advantage,
  exclusion reason and forwarded flag of every rollout; :meth:`TrainedIndex.row` reads one row's
  per-token values.
- :func:`batches`: one summary per outer batch from ``metrics.jsonl`` and the rollouts.
- :func:`compare`: the metrics of several runs side by side, per outer batch and in total.

Metric keys per outer batch (``metrics.jsonl`` train records): ``rows`` (training sequences),
``processed_tokens`` (every token forwarded, context included), ``actor_update_s`` (forward,
backward and optimizer), ``optimizer_steps``, ``rollout_s``, ``eval_s``, ``e2e_s`` (end-to-end
seconds of that outer batch); a key a run does not record is None (shown as a dash).
"""

from __future__ import annotations

import logging
import math
import re
import stat
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from strands_art.training.run_store import TRAINED_SCHEMA, parse_rollout_id
from strands_art.validation import is_int

from .files import RunFiles

logger = logging.getLogger(__name__)

TRAINED = re.compile(r"^ob-(\d{6})\.trained\.parquet$")
COMPARE_KEYS = (
    "rows",
    "processed_tokens",
    "actor_update_s",
    "optimizer_steps",
    "e2e_s",
    "rollout_s",
    "eval_s",
)
"""Per-outer-batch keys :func:`compare` puts side by side (summed in the totals)."""
TRAINED_KEYS = ("processed_tokens", "actor_update_s")
"""The trainer's keys, also compared over the outer batches where both runs ran a pass."""
BATCH_KEYS = (
    "reward_mean", "rollouts", "failed_rollouts", "stale_dropped", "groups", "zero_advantage_groups",
    "rows", "tokens", "sampled_tokens", "processed_tokens", "optimizer_steps", "step", "rollout_s",
    "train_s", "actor_update_s", "eval_s", "e2e_s", "sync_s", "loss", "grad_norm", "approx_kl",
    "clip_fraction", "logprob_abs_gap", "skipped", "groups_drawn", "groups_dropped", "groups_tied_kept",
    "skipped_tied_at_0", "skipped_tied_at_1", "skipped_tied_mixed",
)  # fmt: skip
"""Keys of a train record :func:`batches` passes on (None where absent)."""


def group_key(rid: str, group_id: str | None) -> str:
    """The GRPO group of a training-loop rollout: its id without ``-r{k}`` (``b2-France``,
    ``eval-b0-France``): a task's rollouts of one outer batch; else ``group_id`` or the id."""
    if parse_rollout_id(rid) is not None and "-r" in rid:
        return rid.rsplit("-r", 1)[0]
    return group_id or rid


class TrainedIndex:
    """The ``rows/*.trained.parquet`` files of a run directory, indexed.

    Attributes:
        advantage: rollout id -> the trainer's advantage (None: left out of GRPO).
        excluded: rollout id -> why it was left out (failed, stale, no finite reward).
        forwarded: rollout id -> rows forwarded by the trainer, of rows.
        problems: file name -> why it is unreadable; ``""``: ``rows/`` itself (a symlink).
    """

    def __init__(self, files: RunFiles | str | Path) -> None:
        self.files = files if isinstance(files, RunFiles) else RunFiles(files)
        self.dir = self.files.root / "rows"
        self._seen: dict[str, tuple[int, int]] = {}
        self._per_file: dict[str, dict[str, Any]] = {}
        self.problems: dict[str, str] = {}
        self.advantage: dict[str, float | None] = {}
        self.excluded: dict[str, str] = {}
        self.forwarded: dict[str, tuple[int, int]] = {}

    def refresh(self) -> bool:
        """Read files new or changed since the last call; True if anything changed."""
        st = self.files.stat("rows")
        if st is not None and stat.S_ISLNK(st.st_mode):  # listed as empty: say why
            self.problems[""] = "a symbolic link: not followed, it may lead outside the run directory"
        else:
            self.problems.pop("", None)
        names = sorted(n for n in self.files.listdir("rows") if TRAINED.match(n))
        changed = set(self._seen) - set(names)
        for name in changed:
            self._seen.pop(name)
            self._per_file.pop(name, None)
        for name in names:
            st = self.files.stat(f"rows/{name}")
            if st is None:
                continue
            key = (st.st_size, st.st_mtime_ns)
            if self._seen.get(name) == key:
                continue
            self._seen[name] = key
            changed.add(name)
            try:
                with self.files.open(f"rows/{name}") as f:  # no symlink followed, regular files only
                    table = pq.read_table(
                        f, columns=["rollout_id", "advantage", "excluded", "forwarded"], schema=TRAINED_SCHEMA
                    )
                self._per_file[name] = {
                    "rollout_id": table.column("rollout_id").to_pylist(),
                    "advantage": table.column("advantage").to_pylist(),
                    "excluded": table.column("excluded").to_pylist(),
                    "forwarded": table.column("forwarded").to_pylist(),
                }
                self.problems.pop(name, None)
            except (
                OSError,
                ValueError,
                KeyError,
                pa.ArrowException,
            ) as exc:  # a torn or foreign file: said, skipped
                self.problems[name] = str(exc)[:200]
                self._per_file.pop(name, None)
        if not changed:
            return False
        self.advantage, self.excluded, self.forwarded = {}, {}, {}
        for cols in self._per_file.values():
            for rid, adv, exc, fwd in zip(
                cols["rollout_id"], cols["advantage"], cols["excluded"], cols["forwarded"], strict=True
            ):
                self.advantage[rid] = adv
                if exc:
                    self.excluded[rid] = exc
                n, total = self.forwarded.get(rid, (0, 0))
                self.forwarded[rid] = (n + bool(fwd), total + 1)
        return True

    def row(self, outer_batch: int, rid: str, index: int) -> dict[str, Any] | None:
        """The record of row ``index`` of rollout ``rid`` (outer batch ``outer_batch``), None
        when the batch has no file or the file no such row.

        Raises:
            ValueError: the file is unreadable (a torn write, not Parquet).
        """
        rel = f"rows/ob-{outer_batch:06d}.trained.parquet"
        if not self.files.is_file(rel):
            return None
        try:  # read as the trainer writes it: a foreign file's columns raise here, not in the filter
            with self.files.open(rel) as f:
                table = pq.read_table(f, schema=TRAINED_SCHEMA)
            hit = table.filter(
                pc.and_(pc.equal(table["rollout_id"], rid), pc.equal(table["row_index"], index))
            )
        except (OSError, ValueError, KeyError, pa.ArrowException) as exc:  # ArrowInvalid is a ValueError
            raise ValueError(f"{rel}: {str(exc)[:200]}") from exc
        return hit.to_pylist()[0] if hit.num_rows else None


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def _by_batch(records: list[dict[str, Any]], kind: str) -> dict[int, dict[str, Any]]:
    """The metrics records of ``kind`` (``train``, ``eval``) by their integer ``outer_batch``."""
    return {
        r["outer_batch"]: r
        for r in records
        if r.get("kind") == kind and is_int(r.get("outer_batch"))  # not a bool: True would be batch 1
    }


def _batch_value(rec: dict[str, Any], ev: dict[str, Any], key: str) -> float | None:
    """``key`` of outer batch ``rec``; ``eval_s`` the loop writes on the evaluation record, so a
    batch's ``eval_s`` is that of the held-out evaluation after it (``ev``) when ``rec`` has none."""
    value = rec.get(key)
    if value is None and key == "eval_s":
        value = ev.get("eval_s")
    return _num(value)


def batches(records: list[dict[str, Any]], items: list[dict[str, Any]]) -> dict[str, Any]:
    """Per outer batch: its train record's :data:`BATCH_KEYS`, the held-out evaluation after it
    (``val_reward``, ``val_success``), the rollouts stored (training, held-out), failed ones and
    the reasons rollouts were left out of GRPO (counted), tied groups; and ``evals``: every
    evaluation (after ``outer_batch`` batches) with its held-out rollouts stored."""
    train, evals = _by_batch(records, "train"), _by_batch(records, "eval")
    per: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for it in items:
        split, b = it.get("split"), it.get("outer_batch")
        if split in ("train", "eval") and is_int(b):
            per.setdefault((split, b), []).append(it)
    numbers = sorted(set(train) | {b for s, b in per if s == "train"})
    out = []
    for b in numbers:
        rec = train.get(b, {})
        rolls = per.get(("train", b), [])
        reasons: dict[str, int] = {}
        for it in rolls:
            why = it.get("excluded")
            if why:
                reason = (
                    str(why).split(":", 1)[0] if not str(why).startswith("rollout failed: stale") else "stale"
                )
                reasons[reason] = reasons.get(reason, 0) + 1
        tied = {it["group"] for it in rolls if it.get("zero_variance")}
        ev = evals.get(b + 1, {})
        out.append(
            {
                "outer_batch": b,
                "trained": b in train,
                **{k: _batch_value(rec, ev, k) for k in BATCH_KEYS},
                "val_reward": _num(ev.get("val_reward")),
                "val_success": _num(ev.get("val_success")),
                "stored": len(rolls),
                "stored_failed": sum(1 for it in rolls if it.get("failed")),
                "excluded": reasons,
                "tied_groups": sorted(tied),
                "held_out_stored": len(per.get(("eval", b + 1), [])),
            }
        )
    eval_list = [
        {
            "outer_batch": b,
            "val_reward": _num(r.get("val_reward")),
            "val_reward_std": _num(r.get("val_reward_std")),
            "val_success": _num(r.get("val_success")),
            "val_rollouts": _num(r.get("val_rollouts")),
            "eval_s": _num(r.get("eval_s")),
            "stored": len(per.get(("eval", b), [])),
        }
        for b, r in sorted(evals.items())
    ]
    return {"batches": out, "evals": eval_list}


def run_labels(roots: list[Path]) -> list[str]:
    """A name per run directory of ``roots``: the shortest trailing part of its path (1, 2, ...
    components) that no other root ends in, so ``tree-fixed-steps/seed0`` and
    ``linear-fixed-steps/seed0`` are told apart where both are ``seed0``; the whole path where even
    that repeats (the same directory given twice: then the same label)."""
    parts = [Path(r).parts for r in roots]
    labels = []
    for i, p in enumerate(parts):
        others = [q for j, q in enumerate(parts) if j != i]
        n = next((k for k in range(1, len(p) + 1) if all(q[-k:] != p[-k:] for q in others)), len(p))
        labels.append(str(Path(*p[-n:])) if 0 < n < len(p) else str(roots[i]))
    return labels


def compare(runs: list[tuple[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    """``runs``: ``[(name, metrics records)]``. Per outer batch and in total, each run's
    :data:`COMPARE_KEYS` (a total is None when a batch lacks the key) and the held-out reward of
    the evaluation after that batch (the last one in the totals: None while only the one before
    training exists, which is ``val_reward_before``), with the % difference of each
    run against the first (``100 * (x - first) / first``; None where either is None or first 0).
    A batch's ``eval_s`` is the held-out evaluation after it, so the total sums the evaluations
    after batches (with ``--eval-every K`` most batches have none; None when one of them lacks
    ``eval_s``) and leaves out the one before training. ``trained_pct``: the % difference of
    :data:`TRAINED_KEYS` summed over the ``trained_batches`` outer batches where both the run and
    the first ran a pass (``processed_tokens`` > 0 in both; the reductions of
    ``bench/seed_tables.py``), None without such a batch."""
    per_run = []
    for name, records in runs:
        train, evals = _by_batch(records, "train"), _by_batch(records, "eval")
        rows = []
        for b in sorted(train):
            rec = {k: _batch_value(train[b], evals.get(b + 1, {}), k) for k in COMPARE_KEYS}
            rec["outer_batch"] = b
            rec["val_reward"] = _num(evals.get(b + 1, {}).get("val_reward"))
            rows.append(rec)
        total: dict[str, Any] = {}
        for k in COMPARE_KEYS:
            vals = [r[k] for r in rows]
            if k == "eval_s":  # every evaluation after a batch (one without its seconds: no total)
                vals = [r[k] for r in rows if r[k] is not None or r["outer_batch"] + 1 in evals] or [None]
            total[k] = sum(vals) if vals and all(v is not None for v in vals) else None
        after = [b for b in evals if b > 0]  # the evaluation before training is no result
        total["val_reward"] = _num(evals[max(after)].get("val_reward")) if after else None
        total["val_reward_before"] = _num(evals.get(0, {}).get("val_reward"))
        total["outer_batches"] = len(rows)
        per_run.append({"name": name, "batches": rows, "total": total})
    if per_run:
        base = per_run[0]["total"]
        for run in per_run:
            run["total_pct"] = {
                k: _pct(run["total"].get(k), base.get(k)) for k in (*COMPARE_KEYS, "val_reward")
            }
            first = {r["outer_batch"]: r for r in per_run[0]["batches"]}
            for r in run["batches"]:
                f = first.get(r["outer_batch"], {})
                r["pct"] = {k: _pct(r.get(k), f.get(k)) for k in (*COMPARE_KEYS, "val_reward")}
                if not ((r.get("processed_tokens") or 0) > 0 and (f.get("processed_tokens") or 0) > 0):
                    # a batch without a pass in either run: its actor seconds are bookkeeping, no ratio
                    r["pct"].update(dict.fromkeys(TRAINED_KEYS))
            # the trainer's totals where both runs ran a pass (bench/seed_tables.py's rule): a batch
            # whose kept group tied trains nothing, by the rollouts' luck, not the capture's
            both = [(r, first[r["outer_batch"]]) for r in run["batches"] if r["outer_batch"] in first
                    and (r.get("processed_tokens") or 0) > 0 and (first[r["outer_batch"]].get("processed_tokens") or 0) > 0]  # fmt: skip
            run["trained_batches"] = len(both)
            run["trained_pct"] = {
                k: _pct(sum(r.get(k) or 0.0 for r, _ in both), sum(f.get(k) or 0.0 for _, f in both))
                for k in TRAINED_KEYS
            }
    return {"keys": list(COMPARE_KEYS), "runs": per_run}


def _pct(x: float | None, base: float | None) -> float | None:
    if x is None or base is None or base == 0:
        return None
    return 100.0 * (x - base) / base
