"""Where a training run's metrics go besides ``metrics.jsonl``, and its live progress display.

- :class:`TensorBoardSink`: every record as scalars in TensorBoard event files under
  ``RUN_DIR/tensorboard`` (tensorboardX), ``train/<key>`` at x = outer batches trained
  (``outer_batch + 1``), ``eval/<key>`` at x = ``outer_batch``. On resume the event files are
  rewritten from ``metrics.jsonl`` (:meth:`TensorBoardSink.replay`), so they hold exactly its
  records, never those of batches redone after a crash.
- :class:`WandbSink`: the same records to Weights & Biases, only when asked (``--wandb``).
- :class:`LiveProgress`: a rich live panel: outer batches trained, the phase (sampling,
  evaluating, updating, checkpointing: :mod:`strands_art.training.phases`) with its own progress
  and clock, the last update's reward, KL, grad norm and its time split, a running clock.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from strands_art.training.phases import Phases
from strands_art.validation import is_real


def _scalars(record: Mapping[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in record.items() if is_real(v, finite=False) and k not in ("outer_batch",)}


def _x(record: Mapping[str, Any]) -> int:
    return int(record["outer_batch"]) + (1 if record.get("kind") == "train" else 0)


class TensorBoardSink:
    """Metrics records as TensorBoard scalars (``RUN_DIR/tensorboard``)."""

    def __init__(self, run_dir: str | Path) -> None:
        self.dir = Path(run_dir) / "tensorboard"
        self._writer: Any = None

    def _open(self) -> Any:
        if self._writer is None:
            from tensorboardX import SummaryWriter

            self._writer = SummaryWriter(logdir=str(self.dir))
        return self._writer

    def replay(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Start the event files over with ``records`` (the kept ``metrics.jsonl`` of a resume)."""
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        for r in records:
            self.write(r)

    def write(self, record: Mapping[str, Any]) -> None:
        writer = self._open()
        kind = record.get("kind", "train")
        for key, value in _scalars(record).items():
            writer.add_scalar(f"{kind}/{key}", value, _x(record))
        writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class WandbSink:
    """Metrics records to Weights & Biases (``wandb.init`` with the run's settings as config).

    Raises:
        RuntimeError: ``wandb`` is not installed (``pip install wandb``).
    """

    def __init__(self, run_dir: str | Path, config: Mapping[str, Any]) -> None:
        try:
            import wandb
        except ImportError as exc:
            raise RuntimeError("--wandb needs the wandb package: pip install wandb") from exc
        self._run = wandb.init(
            project="strands-art", name=Path(run_dir).name, config=dict(config), dir=str(run_dir)
        )

    def write(self, record: Mapping[str, Any]) -> None:
        kind = record.get("kind", "train")
        self._run.log({f"{kind}/{k}": v for k, v in _scalars(record).items()} | {"outer_batch": _x(record)})

    def close(self) -> None:
        self._run.finish()


def record_line(r: Mapping[str, Any]) -> str:
    """One line for a metrics record (``kind`` train or eval, as :func:`strands_art.training.loop.train`
    writes to ``metrics.jsonl``): what the live panel prints per record and what ``--no-progress``
    prints alone. Times in seconds, KL as the loop's natural-log estimate; a train record's
    rollouts that failed are counted apart from its stale drops (those are counted failed too).

    Raises:
        KeyError: an eval record without ``outer_batch``, ``val_reward``, ``val_reward_std``,
            ``val_rollouts`` or ``eval_s``; a train record without ``outer_batch``.
    """
    if r.get("kind") == "eval":
        success = f", success {r['val_success']:.3f}" if "val_success" in r else ""
        return (
            f"eval after {r['outer_batch']} outer batches: held-out reward {r['val_reward']:.3f} "
            f"± {r['val_reward_std']:.3f}{success} ({r['val_rollouts']} rollouts, {r['eval_s']:.0f}s)"
        )
    stale = int(r.get("stale_dropped", 0))
    failed = int(r.get("failed_rollouts", 0)) - stale  # visible: a sampler that went away fails them all
    tail = (f", {stale} stale dropped" if stale else "") + (
        f", {failed} rollouts failed" if failed > 0 else ""
    )
    if "groups_drawn" in r:  # --max-draws / --skip-tied (strands_art.training.dynamic_sampling)
        skipped = sum(
            int(r.get(k, 0)) for k in ("skipped_tied_at_0", "skipped_tied_at_1", "skipped_tied_mixed")
        )
        tail += f", {r['groups_drawn']} groups drawn ({r.get('groups_with_signal', 0)} with signal, {skipped} skipped)"
    return (
        f"batch {r['outer_batch']}: reward {r.get('reward_mean', 0):.3f}, kl {r.get('approx_kl', 0):.2e}, "
        f"grad norm {r.get('grad_norm', 0):.3g}, {r.get('optimizer_steps', 0)} optimizer steps "
        f"(step {r.get('step')}), rollouts {r.get('rollout_s', 0):.0f}s train {r.get('train_s', 0):.0f}s{tail}"
    )


class LiveProgress:
    """A rich live panel of the run (on stderr) that re-renders twice a second (a running clock),
    and prints one line per metrics record and per phase change above it.

    Feed it rollout events (``on_event``), the loop's ``on_rollouts`` (``on_rollouts(b)``: the
    update of ``b`` starts) and metrics records (``on_record``); the phase and its progress come
    from :class:`~strands_art.training.phases.Phases`.

    Args:
        outer_batches, rollouts_per_batch: the run's size. eval_total: held-out rollouts per
        evaluation. checkpoint_every: as the run's. resumed_at: the outer batches a resumed run
        had done (a ``resumed at outer batch k`` line), None for a fresh run. started: the
        ``clock()`` the run started at (default: now). most_per_batch: see
        :class:`~strands_art.training.phases.Phases`.
    """

    def __init__(
        self,
        outer_batches: int,
        rollouts_per_batch: int,
        console: Console | None = None,
        *,
        eval_total: int = 0,
        checkpoint_every: int = 1,
        resumed_at: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        started: float | None = None,
        most_per_batch: int | None = None,
    ) -> None:
        self.console = console or Console(stderr=True)
        self.phases = Phases(
            outer_batches, rollouts_per_batch, eval_total, checkpoint_every, resumed_at, clock,
            on_change=lambda line: self.console.print(line), started=started, most_per_batch=most_per_batch,
        )  # fmt: skip
        self.outer_batches = outer_batches
        self.per_batch = rollouts_per_batch
        self.last: dict[str, Any] = {}
        self.last_eval: dict[str, Any] = {}
        self.dropped = 0
        self._live = Live(self, console=self.console, refresh_per_second=2, transient=False)

    @property
    def in_flight(self) -> set[str]:
        return self.phases.in_flight

    @property
    def done(self) -> dict[str, int]:
        """Rollouts done per outer batch (``"b0"``) and for the evaluation under way (``"eval"``)."""
        out: dict[str, int] = {}
        for (split, b), n in self.phases.done.items():
            key = "eval" if split == "eval" else f"b{b}"
            out[key] = out.get(key, 0) + n
        return out

    def __enter__(self) -> LiveProgress:
        self._live.__enter__()
        line = self.phases.resumed_line()
        if line:
            self.console.print(line)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._live.__exit__(*exc)

    def on_event(self, kind: str, rid: str) -> None:
        self.phases.on_event(kind, rid)

    def on_rollouts(self, outer_batch: int) -> None:
        self.phases.on_rollouts(outer_batch)

    def on_record(self, r: Mapping[str, Any]) -> None:
        if r.get("kind") == "eval":
            self.last_eval = dict(r)
        else:
            self.last = dict(r)
            self.dropped += int(r.get("stale_dropped", 0))
        self.console.print(record_line(r))
        self.phases.on_record(r)

    def __rich__(self) -> Table:
        """The panel, computed at each refresh (rich calls this): the clock runs between events."""
        return self._render()

    def _render(self) -> Table:
        p = self.phases
        t = Table(show_header=False, box=None, title="strands-art train")
        if p.resumed_at is not None:
            t.add_row("resumed", f"at outer batch {p.resumed_at}")
        t.add_row("outer batch", f"{p.trained} / {self.outer_batches} trained")
        t.add_row("phase", f"{p.label()}: {p.progress()} ({p.clock() - p.since:.0f}s)")
        if self.last:
            r = self.last
            t.add_row(
                "last update",
                f"reward {r.get('reward_mean', 0):.3f}  approx KL {r.get('approx_kl', 0):.2e}  "
                f"KL to base {r.get('kl_ref', 0):.2e}  grad norm {r.get('grad_norm', 0):.3g}",
            )
            t.add_row(
                "time split", f"rollouts {r.get('rollout_s', 0):.0f}s  training {r.get('train_s', 0):.0f}s"
            )
        if self.last_eval:
            t.add_row("held-out", f"{self.last_eval['val_reward']:.3f} after {self.last_eval['outer_batch']}")
        if self.dropped:
            t.add_row("stale dropped", str(self.dropped))
        t.add_row("elapsed", f"{p.elapsed():.0f}s")
        return t
