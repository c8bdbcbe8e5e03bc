"""Groups that cannot teach: dynamic sampling (DAPO) and a pre-rollout skip of tasks whose recent
groups tied (GRESO-style), with the update's shape fixed by the configuration.

A GRPO group whose rewards all tie has advantage 0 everywhere: its rollouts cost their full time
and move nothing. Two settings of ``strands-art train`` spend fewer rollouts on such groups:

- ``--max-draws N`` (N >= ``--prompt-batch`` P): the groups of one update are drawn in waves. The
  first wave is the P tasks the loop draws without the setting (:func:`.loop.sample_tasks`); while
  fewer than P kept groups have rewards that differ and fewer than N groups were rolled out, the
  next wave rolls out as many further tasks (in a fixed order from the seed and the outer batch)
  as groups with signal are missing. The update then trains on exactly P groups: the groups with
  signal first (in draw order), filled up with tied groups (in draw order) when fewer than P had
  signal. So the batch the trainer sees has the configured size whatever the rewards were and the
  optimizer step count is the configuration's (:func:`strands_art.training.batching.plan`);
  groups beyond P are rolled out and not trained on. N = P is the loop without the setting.
- ``--skip-tied Q`` (0 <= Q <= 1): before a task is rolled out, if its most recent group (in
  this run) tied, it is skipped with probability Q (a draw from the seed, the outer batch and the
  task: the same after a resume), and the next task is considered instead (GRESO, Li et al. 2025,
  "Act Only When It Pays": predict zero-variance prompts from their history and skip them before
  the rollout; their skip probability adapts, ours is fixed). A task is never skipped when the
  tasks left could not fill the wave otherwise, so a batch always has P groups. Q = 0: no skip.

Metrics (in the train record when either setting is on): ``groups_drawn``, ``rollouts_drawn``,
``groups_with_signal`` (among those drawn), ``groups_tied_kept`` (tied groups trained on to fill
the batch), ``groups_dropped`` (rolled out, not trained on), ``skipped_tied_at_0`` /
``skipped_tied_at_1`` / ``skipped_tied_mixed`` (skipped before the rollout, by the reward their
last group tied at), ``rollouts_per_signal_group`` (rollouts drawn / groups with signal trained
on; null when none), ``draw_waves``, and ``groups`` (``{task: [reward, ...]}`` of every group
drawn: the history the skip reads, rebuilt from ``metrics.jsonl`` on ``--resume``).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from strands_art.training.grpo import reward_problem
from strands_art.trajectory import Trajectory


def group_rewards(trajectories: Iterable[Trajectory]) -> list[float]:
    """The rewards GRPO uses of one group: failed rollouts and rewards that are not finite
    numbers left out (:func:`strands_art.training.grpo.reward_problem`)."""
    return [
        float(t.reward)
        for t in trajectories
        if not t.metadata.get("failed") and reward_problem(t.reward) is None
    ]


def has_signal(rewards: Sequence[float]) -> bool:
    """At least two usable rewards and not all equal: a group with a non-zero advantage."""
    return len(rewards) >= 2 and max(rewards) != min(rewards)


@dataclass
class TaskHistory:
    """Each task's reward lists of its groups, in the order they were drawn."""

    groups: dict[str, list[list[float]]] = field(default_factory=dict)

    def add(self, task: str, rewards: Sequence[float]) -> None:
        self.groups.setdefault(task, []).append([float(r) for r in rewards])

    def add_record(self, record: Mapping[str, Any]) -> None:
        """Add the ``groups`` of a train record (written by :func:`batch_metrics`); a record of a
        batch drawn without dynamic sampling holds GRPO's group count there and adds nothing."""
        groups = record.get("groups")
        for task, rewards in (groups if isinstance(groups, dict) else {}).items():
            self.add(task, rewards)

    def tied_at(self, task: str) -> str | None:
        """``"0"`` / ``"1"`` / ``"mixed"`` when the task's most recent group tied (at reward 0,
        at 1, at another value), None when it had signal or the task was never drawn."""
        past = self.groups.get(task)
        if not past or has_signal(past[-1]) or not past[-1]:
            return None
        value = past[-1][0]
        return "0" if value == 0.0 else "1" if value == 1.0 else "mixed"


def skip_draw(seed: int, outer_batch: int, task: str) -> float:
    """A number in [0, 1) fixed by (seed, outer batch, task): the skip's coin."""
    return random.Random(zlib.crc32(f"skip:{seed}:{outer_batch}:{task}".encode())).random()


def candidate_order(tasks: Sequence[Any], first: Sequence[Any], seed: int, outer_batch: int) -> list[Any]:
    """``first`` (the loop's usual draw), then every other task in an order fixed by the seed and
    the outer batch."""
    names = {t.name for t in first}
    rest = [t for t in tasks if t.name not in names]
    random.Random(f"{seed}-{outer_batch}-more").shuffle(rest)
    return [*first, *rest]


@dataclass
class Draws:
    """The state of one outer batch's waves (see the module doc)."""

    prompt_batch: int
    max_draws: int
    skip_tied: float
    seed: int
    outer_batch: int
    candidates: list[Any]
    history: TaskHistory
    signal: list[tuple[Any, list[Trajectory]]] = field(default_factory=list)
    tied: list[tuple[Any, list[Trajectory]]] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    drawn_groups: dict[str, list[float]] = field(default_factory=dict)
    waves: int = 0
    rollouts: int = 0

    def next_wave(self) -> list[Any]:
        """The tasks to roll out next; empty when the batch is complete or the budget spent."""
        need = self.prompt_batch - len(self.signal) if self.waves else self.prompt_batch
        need = min(need, self.max_draws - len(self.drawn_groups))
        wave: list[Any] = []
        while len(wave) < need and self.candidates:
            task = self.candidates.pop(0)
            tied = self.history.tied_at(task.name)
            # never skip when the tasks left could not fill the wave (a batch always has P groups)
            spare = len(self.candidates) >= need - len(wave)
            if (
                tied is not None
                and spare
                and self.skip_tied > 0
                and skip_draw(self.seed, self.outer_batch, task.name) < self.skip_tied
            ):
                key = f"skipped_tied_{'at_' if tied != 'mixed' else ''}{tied}"
                self.skipped[key] = self.skipped.get(key, 0) + 1
                continue
            wave.append(task)
        return wave

    def add(self, wave: Sequence[Any], trajectories: Sequence[Trajectory], rollouts_per_prompt: int) -> None:
        """Record a wave's groups (``trajectories`` in task order, ``rollouts_per_prompt`` each)."""
        self.waves += 1
        self.rollouts += len(trajectories)
        for i, task in enumerate(wave):
            group = list(trajectories[i * rollouts_per_prompt : (i + 1) * rollouts_per_prompt])
            rewards = group_rewards(group)
            self.drawn_groups[task.name] = rewards
            (self.signal if has_signal(rewards) else self.tied).append((task, group))

    def done(self) -> bool:
        return (
            len(self.signal) >= self.prompt_batch
            or len(self.drawn_groups) >= self.max_draws
            or not self.candidates
        )

    def batch(self) -> list[Trajectory]:
        """The trained groups: signal first, then tied ones, ``prompt_batch`` groups in all (fewer
        only when fewer were drawn)."""
        kept = (self.signal + self.tied)[: self.prompt_batch]
        return [t for _, group in kept for t in group]

    def metrics(self) -> dict[str, Any]:
        kept_signal = min(len(self.signal), self.prompt_batch)
        kept_tied = min(len(self.tied), self.prompt_batch - kept_signal)
        out: dict[str, Any] = {
            "groups_drawn": len(self.drawn_groups),
            "rollouts_drawn": self.rollouts,
            "groups_with_signal": len(self.signal),
            "groups_tied_kept": kept_tied,
            "groups_dropped": len(self.drawn_groups) - kept_signal - kept_tied,
            "skipped_tied_at_0": 0,
            "skipped_tied_at_1": 0,
            "skipped_tied_mixed": 0,
            **self.skipped,
            "rollouts_per_signal_group": self.rollouts / kept_signal if kept_signal else None,
            "draw_waves": self.waves,
            "groups": dict(self.drawn_groups),
        }
        return out
