"""What a training run is doing now, from the loop's own events: the phase and its progress.

:class:`Phases` follows a run of :func:`strands_art.training.loop.train` through the callbacks
the loop already makes, and names one phase at a time:

- ``sampling`` outer batch ``b``: from its first rollout's start (``on_event("start", "b…")``);
  progress: rollouts of the batch done / the batch's rollouts, and in flight (with dynamic
  sampling: done, the batch's rollouts and the most it may draw);
- ``evaluating`` after ``k`` outer batches: from a held-out rollout's start (``eval-b…``);
  progress: held-out rollouts done / ``eval_total``;
- ``updating`` outer batch ``b``: from ``on_rollouts(b)`` (the loop calls it right before the
  update) until the batch's metrics record;
- ``checkpointing`` after ``b + 1`` batches: from that record when a checkpoint is due there
  (every ``checkpoint_every`` batches and at the end), until the next phase starts.

With ``max_staleness`` >= 1 the next batch's rollouts run during an update; the phase shown is
the update (the rollouts ahead are counted in ``ahead``). Every phase has its own clock
(``since``); ``on_change`` is called with :meth:`Phases.line` each time the phase changes, which
is what ``train --no-progress`` (or a pipe) prints from the first phase on. Given ``every``
(seconds), it is also called when a rollout of the sampling or evaluating phase under way ends,
at most once in ``every`` seconds and always for the phase's last rollout, so a log of long
rollouts counts them as they finish (a phase's first line is written as its first rollout
starts: ``0 / N done, 1 in flight``), and :meth:`Phases.heartbeat` repeats an update's or a
checkpoint's line every ``every`` seconds. The live panel redraws itself and passes no ``every``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from strands_art.training.run_store import parse_rollout_id

PROGRESS_EVERY_S = 30.0
"""``--no-progress`` (or a pipe): the most often a phase's progress line is repeated as its
rollouts end (:class:`Phases`' ``every``)."""


class Phases:
    """The current phase of a training run (see the module docstring).

    Args:
        outer_batches: the run's outer batches in all. per_batch: rollouts per outer batch.
        eval_total: held-out rollouts per evaluation (0: no evaluation).
        checkpoint_every: checkpoint period in outer batches (0: none).
        resumed_at: outer batches a resumed run had done (None: a fresh run).
        clock: seconds, monotonic (tests pass their own).
        on_change: called with the new phase's line.
        started: ``clock()`` when the run started (its clock counts from there; default: now).
        every: also call ``on_change`` as the phase's rollouts end, at most once in ``every``
            seconds and for its last rollout (None: at phase changes only).
        most_per_batch: the most rollouts one outer batch may draw (``--max-draws`` groups x
            rollouts per prompt; None: ``per_batch``). Above ``per_batch`` the sampling line says
            both: ``9 rollouts done (8 a batch, up to 16 while groups tie)``, never ``9 / 8``.
    """

    def __init__(
        self,
        outer_batches: int,
        per_batch: int,
        eval_total: int = 0,
        checkpoint_every: int = 1,
        resumed_at: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[str], None] | None = None,
        started: float | None = None,
        every: float | None = None,
        most_per_batch: int | None = None,
    ) -> None:
        self.outer_batches = outer_batches
        self.per_batch = per_batch
        self.most_per_batch = max(per_batch, most_per_batch or per_batch)
        self.eval_total = eval_total
        self.checkpoint_every = checkpoint_every
        self.resumed_at = resumed_at
        self.clock = clock
        self.on_change = on_change
        self.t0 = clock() if started is None else started
        self.phase = "starting"
        self.batch: int | None = None
        self.since = self.t0
        self.in_flight: set[str] = set()
        self.done: dict[tuple[str, int], int] = {}
        self.trained = resumed_at or 0
        self.every = every
        self.last_line = self.t0  # clock() of the last on_change call

    # ------------------------------------------------------------------ the loop's callbacks
    def on_event(self, kind: str, rid: str) -> None:
        parsed = parse_rollout_id(rid)
        if kind == "start":
            self.in_flight.add(rid)
            if parsed is not None and not (self.phase == "updating" and parsed[0] == "train"):
                self._enter("evaluating" if parsed[0] == "eval" else "sampling", parsed[1])
        else:
            self.in_flight.discard(rid)
            if parsed is not None:
                self.done[parsed] = self.done.get(parsed, 0) + 1
                if parsed[0] == "train" and self.phase in ("checkpointing", "between phases"):
                    self._enter("sampling", parsed[1])  # rollouts launched ahead, still running
                else:
                    self._tick(parsed)

    def _tick(self, ended: tuple[str, int]) -> None:
        """A rollout of ``ended`` (split, outer batch) ended: repeat the line of the phase it
        belongs to when ``every`` seconds have passed since the last line, or it was the last."""
        if self.every is None or self.on_change is None or ended[1] != self.batch:
            return
        split = {"sampling": "train", "evaluating": "eval"}.get(self.phase)
        if split != ended[0]:
            return
        last = (self.per_batch, self.most_per_batch) if split == "train" else (self.eval_total,)
        if self.clock() - self.last_line >= self.every or self.done[ended] in last:
            self._emit()

    def heartbeat(self) -> None:
        """For the phases no rollout ends in (updating, checkpointing: minutes on a CPU): the line
        again once ``every`` seconds have passed since the last one. A timer calls it
        (:func:`strands_art.training.run.run_train`); without ``every`` it does nothing."""
        if self.every is None or self.on_change is None or self.phase not in ("updating", "checkpointing"):
            return
        if self.clock() - self.last_line >= self.every:
            self._emit()

    def on_rollouts(self, outer_batch: int) -> None:
        self._enter("updating", outer_batch)

    def on_record(self, r: Mapping[str, Any]) -> None:
        if r.get("kind") != "train" or not isinstance(r.get("outer_batch"), int):
            return
        self.trained = r["outer_batch"] + 1
        due = self.checkpoint_every and (
            self.trained % self.checkpoint_every == 0 or self.trained >= self.outer_batches
        )
        if due:
            self._enter("checkpointing", self.trained)
        elif self.phase == "updating":
            self._enter("between phases", self.trained)

    def _enter(self, phase: str, batch: int | None) -> None:
        if (phase, batch) == (self.phase, self.batch):
            return
        self.phase, self.batch, self.since = phase, batch, self.clock()
        self._emit()

    def _emit(self) -> None:
        if self.on_change is not None:
            self.last_line = self.clock()
            self.on_change(self.line())

    # ------------------------------------------------------------------ what is shown
    def elapsed(self) -> float:
        """Seconds since the run (this process) started."""
        return self.clock() - self.t0

    def progress(self) -> str:
        """The current phase's own progress, e.g. ``3 / 4 rollouts done, 1 in flight``."""
        b = self.batch
        if self.phase == "sampling" and b is not None:
            done, flying = self.done.get(("train", b), 0), self._flying("train")
            if self.most_per_batch > self.per_batch:  # dynamic sampling: tied groups draw more
                return (
                    f"{done} rollouts done ({self.per_batch} a batch, up to {self.most_per_batch} while groups "
                    f"tie), {flying} in flight"
                )
            return f"{done} / {self.per_batch} rollouts done, {flying} in flight"
        if self.phase == "evaluating" and b is not None:
            total = f" / {self.eval_total}" if self.eval_total else ""
            return f"{self.done.get(('eval', b), 0)}{total} held-out rollouts done, {self._flying('eval')} in flight"
        if self.phase == "updating":
            ahead = self._flying("train")
            return f"{self.trained} / {self.outer_batches} trained" + (
                f", {ahead} rollouts ahead in flight" if ahead else ""
            )
        return f"{self.trained} / {self.outer_batches} trained"

    def _flying(self, split: str) -> int:
        return sum(1 for rid in self.in_flight if (parse_rollout_id(rid) or ("", 0))[0] == split)

    def label(self) -> str:
        """``sampling outer batch 2``, ``evaluating after 3 outer batches``, …"""
        b = self.batch
        if self.phase in ("sampling", "updating"):
            return f"{self.phase} outer batch {b}"
        if self.phase == "evaluating":
            return f"evaluating after {b} outer batch{'' if b == 1 else 'es'}"
        if self.phase == "checkpointing":
            return f"checkpointing after {b} outer batch{'' if b == 1 else 'es'}"
        return self.phase

    def line(self) -> str:
        """``[  12s] sampling outer batch 2: 0 / 4 rollouts done, 2 in flight`` (seconds since
        the start of this process)."""
        return f"[{self.elapsed():5.0f}s] {self.label()}: {self.progress()}"

    def resumed_line(self) -> str | None:
        """``resumed at outer batch k (of n)`` for a resumed run, else None."""
        if self.resumed_at is None:
            return None
        return (
            f"resumed at outer batch {self.resumed_at} (of {self.outer_batches}): batches before it are kept"
        )
