"""Training metrics as JSONL (one record per line, appended and fsync'ed) and their plots.

Records written by the loop (:mod:`strands_art.training.loop`):

- ``{"kind": "train", "outer_batch": b, ...}`` after outer batch ``b`` (0-based): reward_mean,
  reward_std, rollouts, failed_rollouts, zero_advantage_groups, rows, rows_per_rollout, tokens,
  sampled_tokens, optimizer_steps (this batch), step (total), mini_batches, padding_rows,
  padded_token_fraction, micro_batches, loss, grad_norm, approx_kl, clip_fraction,
  kl_ref (k3 KL to the base model, when the KL penalty is on), lr (of the last step),
  logprob_gap, logprob_abs_gap (trainer minus rollout logprob on sampled tokens, at the batch's
  first optimizer step that runs a pass, before any gradient of the batch is applied; 0.0 when
  no step runs one), tis_capped_fraction, rollout_s,
  train_s, tokens_per_s, history_mode, discarded_turns, summarizer_turns, truncated_turns,
  cut_turns, loss_excluded_turns, loss_excluded_tokens, loss_excluded_rows, untrained_rollouts
  (rollouts in their group's statistics with no token to train: every answer truncated).
- ``{"kind": "eval", "outer_batch": b, "val_reward": ..., ...}``: evaluation after ``b``
  outer batches (``b = 0``: before training); ``val_success`` too when the environment's
  rollouts report a bool ``metadata["success"]`` (lookup).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

TIMING_KEYS: frozenset[str] = frozenset(
    {
        "rollout_s",
        "train_s",
        "tokens_per_s",
        "eval_s",
        "sync_s",
        "rollout_wait_s",
        "launch_sync_s",
        "fwd_bwd_s",
        "optimizer_s",
        "actor_update_s",
        "e2e_s",
    }
)
"""Record keys measured with a clock: the only ones that differ between two runs of the same
seed and configuration (see "Determinism" in docs/training-update.md)."""

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


class MetricsError(ValueError):
    """A ``metrics.jsonl`` a run is resumed from holds a record the loop cannot have written
    (no ``kind`` string, no integer ``outer_batch``): named with its line, never guessed."""


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
        """All complete records (a torn last line from a crash is skipped with a warning; so is
        a line that is not a JSON object, counted by :func:`scan_metrics`).

        Raises:
            MetricsError: a record without a string ``kind`` or an integer ``outer_batch`` >= 0
                (a hand-edited or foreign file: the resume would mis-count its batches).
            OSError: the file cannot be read.
        """
        try:
            data = read_regular(self.path)
        except FileNotFoundError:
            return []
        except NotARegularFile as exc:
            raise MetricsError(exc.strerror) from None
        parsed = parse_metrics(data, str(self.path))
        lines = [n for n, line in enumerate(data.split(b"\n")[:-1], 1) if line.strip()]
        skipped = set(parsed.skipped)
        numbers = [n for n in lines if n not in skipped]
        for n, r in zip(numbers, parsed.records, strict=True):
            ob = r.get("outer_batch")
            if not isinstance(r.get("kind"), str) or type(ob) is not int or ob < 0:
                raise MetricsError(
                    f"{self.path}:{n}: a record without a string 'kind' and an integer 'outer_batch' "
                    f"(kind {r.get('kind')!r}, outer_batch {ob!r}); fix or remove that line"[:400]
                )
        return parsed.records

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
        tmp.unlink(missing_ok=True)  # a leftover, or a symlink planted there: never written through
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("".join(json.dumps(r) + "\n" for r in keep))
        os.replace(tmp, self.path)


@dataclass
class MetricsFile:
    """What :func:`scan_metrics` read from a metrics JSONL file.

    Attributes:
        records: the JSON objects of its complete lines, in file order.
        skipped: line numbers (1-based) of complete lines that were skipped: not UTF-8, not
            JSON, JSON nested too deep to parse, or JSON that is not an object.
        torn_tail: the last line has no newline (a crash mid-write, or a line being written);
            it is not among ``records`` nor ``skipped``.
    """

    records: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    torn_tail: bool = False


def scan_metrics(path: str | os.PathLike[str]) -> MetricsFile:
    """Read a metrics JSONL file line by line: a bad line is skipped and counted, never the
    whole file (missing file -> an empty :class:`MetricsFile`).

    Raises:
        OSError: the file cannot be read (a directory, no permission).
    """
    path = Path(path)
    try:
        data = read_regular(path)
    except FileNotFoundError:
        return MetricsFile()
    return parse_metrics(data, str(path))


class NotARegularFile(OSError):
    """A metrics file that is a FIFO, a socket, a device or a symlink (read, it could block
    forever or lead outside the run directory)."""


def read_regular(path: Path) -> bytes:
    """The bytes of the regular file ``path``, opened without following a symlink and without
    blocking (a FIFO in its place is refused at once, never waited on).

    Raises:
        FileNotFoundError: no such file.
        NotARegularFile: a symlink, FIFO, socket or device.
        IsADirectoryError: a directory.
        OSError: the file cannot be read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP and os.path.islink(path):
            raise NotARegularFile(exc.errno, f"{path} is a symlink, not a metrics file") from None
        raise
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        if not stat.S_ISREG(mode):
            raise NotARegularFile(errno.EINVAL, f"{path} is not a regular file (a FIFO, socket or device)")
        return f.read()


def parse_metrics(data: bytes, path: str = "metrics.jsonl") -> MetricsFile:
    """:func:`scan_metrics` of the bytes of a metrics JSONL file (``path`` names it in warnings)."""
    result = MetricsFile()
    lines = data.split(b"\n")
    result.torn_tail = lines[-1] != b""
    if result.torn_tail:
        logger.warning("%s:%d: skipping an incomplete line", path, len(lines))
    for n, line in enumerate(lines[:-1], 1):
        try:
            record = json.loads(line.decode("utf-8"))
        except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            record = None
        if isinstance(record, dict):
            result.records.append(record)
        elif line.strip():
            result.skipped.append(n)
    if result.skipped:
        logger.warning(
            "%s: skipped %d unreadable line(s): %s", path, len(result.skipped), result.skipped[:10]
        )
    return result


def read_metrics(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Records of a metrics JSONL file; missing file -> []; bad lines are skipped with a
    warning (:func:`scan_metrics` counts them)."""
    return scan_metrics(path).records


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


def seed_summary(runs: Mapping[int, Sequence[Mapping[str, Any]]], key: str = "val_reward") -> dict[str, Any]:
    """Held-out reward before and after training, over several runs that differ only in seed.

    Args:
        runs: seed -> that run's metrics records (each needs at least two ``eval`` records:
            the first is "before", the last "after").
        key: the eval record's number to compare (``val_reward``; ``val_success`` where the
            environment reports success, e.g. lookup). The result keeps the names
            ``reward_start``/``reward_end`` whatever the key.

    Returns:
        ``{"seeds": [{"seed", "start", "end", "gain"}, ...] (in seed order), "reward_start",
        "reward_end", "gain_mean" (means over seeds), "gain_std" (sample standard deviation
        over seeds, n - 1; 0.0 for one seed), "gain_min", "improved" (seeds whose end > start),
        "n"}``.

    Raises:
        ValueError: no runs, or a run with fewer than two eval records, or one without ``key``.
    """
    import statistics

    if not runs:
        raise ValueError("no runs to summarize")
    per_seed = []
    for seed in sorted(runs):
        evals = [r for r in runs[seed] if r.get("kind") == "eval"]
        if len(evals) < 2:
            raise ValueError(f"seed {seed}: need eval records before and after training, got {len(evals)}")
        if key not in evals[0] or key not in evals[-1]:
            raise ValueError(f"seed {seed}: the eval records have no {key!r}")
        start, end = float(evals[0][key]), float(evals[-1][key])
        per_seed.append({"seed": seed, "start": start, "end": end, "gain": end - start})
    gains = [s["gain"] for s in per_seed]
    return {
        "seeds": per_seed,
        "reward_start": statistics.fmean(s["start"] for s in per_seed),
        "reward_end": statistics.fmean(s["end"] for s in per_seed),
        "gain_mean": statistics.fmean(gains),
        "gain_std": statistics.stdev(gains) if len(gains) > 1 else 0.0,
        "gain_min": min(gains),
        "improved": sum(1 for g in gains if g > 0),
        "n": len(per_seed),
    }


def plot_seeds(
    runs: Mapping[int, Sequence[Mapping[str, Any]]],
    path: str | os.PathLike[str] | None = None,
    eval_key: str = "val_reward",
):
    """Training reward (left) and held-out ``eval_key`` (right; ``val_reward`` or
    ``val_success``) vs outer batch, one line per seed, with the mean over seeds (black).
    Returns the Figure (saved to ``path`` when given)."""
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    means: dict[str, dict[int, list[float]]] = {"train": {}, "eval": {}}
    for i, seed in enumerate(sorted(runs)):
        color = f"C{i % 10}"
        train = [r for r in runs[seed] if r.get("kind") == "train"]
        evals = [r for r in runs[seed] if r.get("kind") == "eval"]
        xs = [r["outer_batch"] + 1 for r in train]
        ax1.plot(xs, [r["reward_mean"] for r in train], ".-", color=color, alpha=0.6, label=f"seed {seed}")
        ax2.plot(
            [r["outer_batch"] for r in evals], [r[eval_key] for r in evals], "o-", color=color, alpha=0.8
        )
        for kind, recs, key, off in (("train", train, "reward_mean", 1), ("eval", evals, eval_key, 0)):
            for r in recs:
                means[kind].setdefault(r["outer_batch"] + off, []).append(r[key])
    for ax, kind in ((ax1, "train"), (ax2, "eval")):
        xs = sorted(means[kind])
        ax.plot(xs, [sum(means[kind][x]) / len(means[kind][x]) for x in xs], "k--", lw=2, label="mean")
        ax.set_xlabel("outer batches trained")
    ax1.set(ylabel="reward", title="training reward (batch mean)")
    ax2.set(title=f"held-out {eval_key.removeprefix('val_')} (evaluation records)")
    ax1.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=100)
    return fig
