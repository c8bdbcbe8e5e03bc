"""Training metrics as JSONL (one record per line, appended and fsync'ed) and their plots.

Records written by the loop (:mod:`strands_art.training.loop`):

- ``{"kind": "train", "outer_batch": b, ...}`` after outer batch ``b`` (0-based): reward_mean,
  reward_std, rollouts, failed_rollouts, zero_advantage_groups, rows, rows_per_rollout, tokens,
  sampled_tokens, optimizer_steps (this batch), step (total), mini_batches, padding_rows,
  padded_token_fraction, micro_batches, loss, grad_norm, approx_kl, clip_fraction,
  logprob_gap, logprob_abs_gap (trainer minus rollout logprob on sampled tokens, first
  optimizer step of the batch, before any update from it), tis_capped_fraction, rollout_s,
  train_s, tokens_per_s, history_mode, discarded_turns, summarizer_turns, loss_excluded_turns,
  loss_excluded_tokens, loss_excluded_rows.
- ``{"kind": "eval", "outer_batch": b, "val_reward": ..., ...}``: evaluation after ``b``
  outer batches (``b = 0``: before training).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

TIMING_KEYS: frozenset[str] = frozenset({"rollout_s", "train_s", "tokens_per_s", "eval_s"})
"""Record keys measured with a clock: the only ones that differ between two runs of the same
seed and configuration (see "Determinism" in docs/training.md)."""

TRAIN_KEYS: tuple[str, ...] = (
    "outer_batch",
    "step",
    "reward_mean",
    "reward_std",
    "rows_per_rollout",
    "tokens",
    "optimizer_steps",
    "padding_rows",
    "padded_token_fraction",
    "approx_kl",
    "clip_fraction",
    "logprob_gap",
)


class MetricsLog:
    """Append-only JSONL metrics file (``metrics.jsonl`` in a run directory)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record durably."""
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(dict(record)) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def read(self) -> list[dict[str, Any]]:
        """All complete records (a torn last line from a crash is skipped with a warning)."""
        return read_metrics(self.path)

    def truncate_after(self, outer_batch: int) -> None:
        """Keep what a checkpoint taken after ``outer_batch`` completed batches covers.

        Train records of batches ``< outer_batch`` and eval records at ``<= outer_batch`` stay;
        later ones (written after the checkpoint, before a crash) are dropped and redone.
        """
        keep = [
            r
            for r in self.read()
            if (r.get("kind") == "eval" and r["outer_batch"] <= outer_batch)
            or (r.get("kind") != "eval" and r["outer_batch"] < outer_batch)
        ]
        tmp = self.path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in keep), encoding="utf-8")
        os.replace(tmp, self.path)


def read_metrics(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Records of a metrics JSONL file; missing file -> []."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(keepends=True), 1):
        if not line.endswith("\n"):
            logger.warning("%s:%d: skipping an incomplete line", path, n)
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            logger.warning("%s:%d: skipping an unreadable line", path, n)
    return out


def plot_training(records: Sequence[Mapping[str, Any]], path: str | os.PathLike[str] | None = None):
    """Validation reward and training reward vs outer batch, plus rows/tokens per batch.

    Returns the matplotlib Figure (saved to ``path`` when given).
    """
    import matplotlib.pyplot as plt

    train = [r for r in records if r.get("kind") == "train"]
    evals = [r for r in records if r.get("kind") == "eval"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    if evals:
        ax1.plot(
            [r["outer_batch"] for r in evals], [r["val_reward"] for r in evals], "o-", label="validation"
        )
    if train:
        ax1.plot(
            [r["outer_batch"] + 1 for r in train],
            [r["reward_mean"] for r in train],
            ".--",
            alpha=0.7,
            label="training batch",
        )
    ax1.set_xlabel("outer batches trained")
    ax1.set_ylabel("reward")
    ax1.set_title("reward")
    ax1.legend()
    if train:
        xs = [r["outer_batch"] + 1 for r in train]
        ax2.plot(xs, [r["rows_per_rollout"] for r in train], "o-", label="rows / rollout")
        ax2.set_ylabel("rows per rollout")
        ax3 = ax2.twinx()
        ax3.plot(xs, [r["tokens"] for r in train], "s--", color="tab:orange", label="tokens")
        ax3.set_ylabel("tokens per batch")
    ax2.set_xlabel("outer batch")
    ax2.set_title("rows and tokens")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def plot_modes(runs: Mapping[str, Sequence[Mapping[str, Any]]], path: str | os.PathLike[str] | None = None):
    """Rows per rollout and tokens per outer batch for several runs (e.g. ``{"tree": ...,
    "linear": ...}``), side by side. Returns the Figure (saved to ``path`` when given)."""
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    for name, records in runs.items():
        train = [r for r in records if r.get("kind") == "train"]
        xs = [r["outer_batch"] + 1 for r in train]
        ax1.plot(xs, [r["rows_per_rollout"] for r in train], "o-", label=name)
        ax2.plot(xs, [r["tokens"] for r in train], "o-", label=name)
    ax1.set(xlabel="outer batch", ylabel="rows per rollout", title="rows per rollout")
    ax2.set(xlabel="outer batch", ylabel="tokens", title="tokens per outer batch")
    ax1.legend()
    ax2.legend()
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig
