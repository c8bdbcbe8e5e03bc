"""The live panel of ``strands-art train`` and its ``--no-progress`` lines
(training/phases.py, training/progress.py): the phase with its own progress and clock, a clock
that runs between events, the resume line, one line per phase change from the first one on."""

from __future__ import annotations

import io

from rich.console import Console

from strands_art.training.phases import Phases
from strands_art.training.progress import LiveProgress


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def drive(watcher, clock: Clock) -> None:
    """The callbacks of a 2-batch synchronous run with an evaluation before and after, as
    loop.train makes them: 2 rollouts per batch, 2 held-out rollouts per evaluation."""
    for k in range(2):
        watcher.on_event("start", f"eval-b0-key{k}-r0")
    clock.t += 30
    for k in range(2):
        watcher.on_event("end", f"eval-b0-key{k}-r0")
    watcher.on_record({"kind": "eval", "outer_batch": 0, "val_reward": 0.5, "val_reward_std": 0.5,
                       "val_rollouts": 2, "eval_s": 30.0})  # fmt: skip
    for b in range(2):
        watcher.on_event("start", f"b{b}-key1-r0")
        watcher.on_event("start", f"b{b}-key1-r1")
        clock.t += 10
        watcher.on_event("end", f"b{b}-key1-r0")
        watcher.on_event("end", f"b{b}-key1-r1")
        watcher.on_rollouts(b)
        clock.t += 118  # an update: no event for two minutes
        watcher.on_record({"kind": "train", "outer_batch": b, "reward_mean": 0.5, "step": 2 * b + 2})
        clock.t += 5
    watcher.on_event("start", "eval-b2-key0-r0")


def test_one_line_per_phase_change_from_the_first_phase_on() -> None:
    clock, lines = Clock(), []
    phases = Phases(2, 2, eval_total=2, checkpoint_every=2, clock=clock, on_change=lines.append)
    drive(phases, clock)
    assert lines == [
        "[    0s] evaluating after 0 outer batches: 0 / 2 held-out rollouts done, 1 in flight",
        "[   30s] sampling outer batch 0: 0 / 2 rollouts done, 1 in flight",
        "[   40s] updating outer batch 0: 0 / 2 trained",
        "[  158s] between phases: 1 / 2 trained",  # no checkpoint due after batch 1 of 2 (every 2)
        "[  163s] sampling outer batch 1: 0 / 2 rollouts done, 1 in flight",
        "[  173s] updating outer batch 1: 1 / 2 trained",
        "[  291s] checkpointing after 2 outer batches: 2 / 2 trained",
        "[  296s] evaluating after 2 outer batches: 0 / 2 held-out rollouts done, 1 in flight",
    ]
    assert phases.resumed_line() is None


def test_the_panel_clock_runs_between_events_and_says_where_a_resume_started() -> None:
    clock, buf = Clock(), io.StringIO()
    live = LiveProgress(5, 2, console=Console(file=buf, width=200), eval_total=2, resumed_at=3, clock=clock)
    with live:
        live.on_event("start", "b3-key1-r0")
        live.on_event("end", "b3-key1-r0")
        live.on_rollouts(3)
        clock.t += 118  # no event: the panel, rendered now, still shows the time
        panel = Console(file=io.StringIO(), width=200)
        panel.print(live)
        text = panel.file.getvalue()
    assert "updating outer batch 3: 3 / 5 trained (118s)" in text
    rows = {
        line.split(None, 1)[0]: line.split(None, 1)[1].strip()
        for line in text.splitlines()[1:]
        if line.strip()
    }
    assert rows["resumed"] == "at outer batch 3" and rows["elapsed"] == "118s"
    out = buf.getvalue()
    assert out.splitlines()[0] == "resumed at outer batch 3 (of 5): batches before it are kept"
    assert "[    0s] sampling outer batch 3: 0 / 2 rollouts done, 1 in flight" in out
    assert live.done == {"b3": 1} and live.in_flight == set()


def test_without_a_terminal_a_phase_line_is_repeated_as_its_rollouts_end() -> None:
    """``every`` (``train --no-progress`` or a pipe): a phase's line again when one of its
    rollouts ends, at most once in ``every`` seconds and for its last one (before: a log of long
    rollouts read ``0 / N rollouts done, 1 in flight`` for the whole phase)."""
    clock, lines = Clock(), []
    phases = Phases(2, 4, eval_total=2, clock=clock, on_change=lines.append, every=30)
    for k in range(4):
        phases.on_event("start", f"b0-key1-r{k}")
    for dt, k in ((10, 0), (25, 1), (5, 2), (100, 3)):  # 10 s: too soon; 35 s: due; 40 s: too soon
        clock.t += dt
        phases.on_event("end", f"b0-key1-r{k}")
    phases.on_rollouts(0)
    phases.on_event("start", "b1-key1-r0")  # launched ahead, ends during the update: no line
    clock.t += 40
    phases.on_event("end", "b1-key1-r0")
    phases.on_record({"kind": "train", "outer_batch": 0, "reward_mean": 0.5, "step": 2})
    for k in range(2):
        phases.on_event("start", f"eval-b1-key{k}-r0")
    clock.t += 31
    phases.on_event("end", "eval-b1-key0-r0")
    phases.on_event("end", "eval-b1-key1-r0")  # the last: always, though just after a line
    assert lines == [
        "[    0s] sampling outer batch 0: 0 / 4 rollouts done, 1 in flight",
        "[   35s] sampling outer batch 0: 2 / 4 rollouts done, 2 in flight",
        "[  140s] sampling outer batch 0: 4 / 4 rollouts done, 0 in flight",
        "[  140s] updating outer batch 0: 0 / 2 trained",
        "[  180s] checkpointing after 1 outer batch: 1 / 2 trained",
        "[  180s] evaluating after 1 outer batch: 0 / 2 held-out rollouts done, 1 in flight",
        "[  211s] evaluating after 1 outer batch: 1 / 2 held-out rollouts done, 1 in flight",
        "[  211s] evaluating after 1 outer batch: 2 / 2 held-out rollouts done, 0 in flight",
    ]
    quiet, plain = Clock(), []  # no every: at phase changes only, as the live panel's lines
    drive(Phases(2, 2, eval_total=2, checkpoint_every=2, clock=quiet, on_change=plain.append), quiet)
    assert len(plain) == 8


def test_an_update_line_is_repeated_every_so_often() -> None:
    """An update or a checkpoint has no rollout events: :meth:`Phases.heartbeat` (a timer calls
    it) repeats its line once ``every`` seconds have passed, never in a rollout phase or without
    ``every`` (a newcomer's log showed nothing for a 10-minute update)."""
    clock, lines = Clock(), []
    phases = Phases(2, 1, clock=clock, on_change=lines.append, every=30)
    phases.on_event("start", "b0-key1-r0")
    clock.t += 40
    phases.heartbeat()  # sampling: its rollouts' ends say how it goes
    phases.on_event("end", "b0-key1-r0")
    phases.on_rollouts(0)
    for dt in (10, 25, 5, 31):  # 10 s: too soon; 35 s: due; 40 s: too soon; 71 s: due
        clock.t += dt
        phases.heartbeat()
    assert lines == [
        "[    0s] sampling outer batch 0: 0 / 1 rollouts done, 1 in flight",
        "[   40s] sampling outer batch 0: 1 / 1 rollouts done, 0 in flight",
        "[   40s] updating outer batch 0: 0 / 2 trained",
        "[   75s] updating outer batch 0: 0 / 2 trained",
        "[  111s] updating outer batch 0: 0 / 2 trained",
    ]
    quiet, plain = Clock(), []
    silent = Phases(2, 1, clock=quiet, on_change=plain.append)
    silent.on_rollouts(0)
    quiet.t += 100
    silent.heartbeat()
    assert plain == ["[    0s] updating outer batch 0: 0 / 2 trained"]


def test_with_dynamic_sampling_the_line_never_reads_more_done_than_the_total() -> None:
    """``--max-draws 4`` with 2 tasks x 4 rollouts: a batch needs 8 rollouts and may draw 16; the
    line says both (before: ``9 / 8 rollouts done``), and repeats at 8 and at 16 done."""
    clock, lines = Clock(), []
    phases = Phases(2, 8, clock=clock, on_change=lines.append, every=30, most_per_batch=16)
    for k in range(12):
        phases.on_event("start", f"b0-key{k // 4}-r{k % 4}")
    for k in range(12):
        clock.t += 1
        phases.on_event("end", f"b0-key{k // 4}-r{k % 4}")
    assert lines == [
        "[    0s] sampling outer batch 0: 0 rollouts done (8 a batch, up to 16 while groups tie), 1 in flight",
        "[    8s] sampling outer batch 0: 8 rollouts done (8 a batch, up to 16 while groups tie), 4 in flight",
    ]
    plain = Phases(2, 8, clock=clock, most_per_batch=8)  # no dynamic sampling: as before
    plain.on_event("start", "b0-key0-r0")
    assert plain.progress() == "0 / 8 rollouts done, 1 in flight"
