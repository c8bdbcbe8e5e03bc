"""GRPO advantages: group rollouts by source prompt, baseline = group mean.

For the rollouts ``i`` of one group (same ``group_id``, i.e. the same task) with rewards ``r_i``:

    A_i = r_i - mean(r)                      (``scale_by_std=False``: Dr.GRPO, Liu et al. 2025)
    A_i = (r_i - mean(r)) / (std(r) + eps)   (``scale_by_std=True``: GRPO, Shao et al. 2024)

``std`` is the unbiased sample standard deviation, as in verl's
``compute_grpo_outcome_advantage``. Every row of a rollout carries ``A_i`` on its sampled
tokens. A failed rollout (reward None, not a number, or not finite — NaN, +inf, -inf — or
``metadata["failed"]`` set by the runner on an exception or timeout) is left out of its group's
statistics, logged with its reason, and given no rows: one rollout whose reward function
overflowed must not turn every advantage of its group into NaN or crash the batch. A group whose valid rewards are all equal (including a group of one) has no signal:
its advantages are 0 and it is counted in ``zero_advantage_groups``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from strands_art.training.batching import BatchRow
from strands_art.trajectory import Row, Trajectory
from strands_art.turn_cut import TRUNCATED
from strands_art.validation import is_real

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GRPOConfig:
    """Advantage estimation settings.

    Attributes:
        scale_by_std: divide by the group's standard deviation (GRPO); False is Dr.GRPO.
        std_eps: added to the standard deviation before dividing.
        exclude_turn_tags: turns carrying one of these tags (``Turn.tags``, on rows as
            ``metadata["turn_tags"]``, see strands_art/turn_tags.py) get loss mask 0: by default
            ``discarded`` ones (a response the agent threw away: a hook's retry, a cancelled
            turn). Add ``"summarizer"`` to leave summarization calls out too; ``()`` trains
            every tagged turn but truncated ones (``train_truncated``).
        train_truncated: False (default): a turn tagged ``truncated`` (sampled to the token
            limit, ``max_new_tokens`` or the context budget, with no complete call to end at)
            gets loss mask 0, DAPO's overlong filtering (TRL's ``mask_truncated_completions``);
            True trains it at the rollout's advantage (``train --train-truncated``). Counted in
            ``truncated_turns`` either way.
        train_cut_tails: False (default): the tail of a cut turn (after its last complete
            call, or from a turn-start token the model wrote: ``row.metadata["cut_tails"]``,
            :mod:`strands_art.turn_cut`) gets loss mask 0, the calls before it are trained;
            True trains the tail at the rollout's advantage.

    Raises:
        ValueError: ``std_eps`` < 0, ``exclude_turn_tags`` not a list of names, or
            ``train_truncated`` with ``"truncated"`` among ``exclude_turn_tags``.
    """

    scale_by_std: bool = True
    std_eps: float = 1e-6
    exclude_turn_tags: tuple[str, ...] = ("discarded",)
    train_truncated: bool = False
    train_cut_tails: bool = False

    def __post_init__(self) -> None:
        if self.std_eps < 0:
            raise ValueError(f"std_eps must be >= 0, got {self.std_eps}")
        if isinstance(self.exclude_turn_tags, str) or not all(
            isinstance(t, str) for t in self.exclude_turn_tags
        ):
            raise ValueError(f"exclude_turn_tags must be a list of tag names, got {self.exclude_turn_tags!r}")
        object.__setattr__(self, "exclude_turn_tags", tuple(self.exclude_turn_tags))
        if self.train_truncated and TRUNCATED in self.exclude_turn_tags:
            raise ValueError("train_truncated contradicts 'truncated' in exclude_turn_tags")

    @property
    def masked_tags(self) -> frozenset[str]:
        """The turn tags whose turns get loss mask 0: ``exclude_turn_tags``, plus ``truncated``
        unless ``train_truncated``."""
        return frozenset(self.exclude_turn_tags) | (frozenset() if self.train_truncated else {TRUNCATED})


@dataclass
class Advantages:
    """The result of :func:`compute_advantages`.

    Attributes:
        advantages: rollout_id -> advantage, for every rollout kept.
        rows: every row of every kept rollout, with its rollout's advantage, rollouts in
            ``rollout_id`` order (rows of one rollout in their trajectory order): the same rows in
            the same order whatever order the rollouts finished in.
        excluded: rollout_id -> reason, for every failed rollout (they have no rows here).
        metrics: reward_mean, reward_std (over kept rollouts), rollouts, failed_rollouts,
            groups, zero_advantage_groups, rows, rows_per_rollout, advantage_abs_mean, and over
            kept rollouts: discarded_turns, summarizer_turns (turns with that tag),
            loss_excluded_turns, loss_excluded_tokens (sampled tokens masked out by
            :attr:`GRPOConfig.masked_tags` and cut tails), loss_excluded_rows (rows left with no
            sampled token), untrained_rollouts (kept rollouts, in their group's statistics, left
            with no row), truncated_turns (turns tagged ``truncated``), cut_turns (turns with a
            cut tail).
    """

    advantages: dict[str, float]
    rows: list[BatchRow]
    excluded: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)


def failure_reason(traj: Trajectory) -> str | None:
    """Why a rollout must be left out of training, or None if it is usable."""
    if traj.metadata.get("failed"):
        detail = traj.metadata.get("error") or traj.metadata.get("failed")
        return f"rollout failed: {detail}"
    return reward_problem(traj.reward)


def reward_problem(reward: object) -> str | None:
    """Why ``reward`` cannot enter a GRPO group ("no reward", "reward is NaN", "reward is +inf",
    "reward is -inf", "reward is not a number: ..."), or None for a finite real number."""
    if reward is None:
        return "no reward"
    if not is_real(reward, finite=False):
        return f"reward is not a number: {reward!r:.60}"
    if math.isnan(reward):
        return "reward is NaN"
    if math.isinf(reward):
        return "reward is +inf" if reward > 0 else "reward is -inf"
    return None


#: row metadata key (on a row as trained, never on the recorded one): the sampled spans given
#: loss mask 0, each ``{"turn", "span": [start, end) in the row, "reason"}``; ``reason`` is the
#: turn's tag (``truncated``, ``discarded``, ...) or ``cut_tail``
LOSS_EXCLUDED = "loss_excluded"
CUT_TAIL = "cut_tail"


def exclude_tagged_turns(
    row: Row, tags: frozenset[str] | set[str], cut_tails: bool = True
) -> tuple[Row, int, int]:
    """``row`` with loss mask 0 on the sampled spans of turns tagged with one of ``tags``
    (``row.metadata["turn_tags"]``) and, with ``cut_tails``, on the cut tails of its turns
    (``row.metadata["cut_tails"]``: turn -> [start, end) in that turn's output); the number of
    spans masked and of sampled tokens masked. What was masked and why is recorded on the
    returned row (``metadata["loss_excluded"]``, :data:`LOSS_EXCLUDED`). The row is copied when
    anything changes, never mutated."""
    turn_tags = row.metadata.get("turn_tags") or {}
    records = [
        {"turn": turn, "span": list(span), "reason": sorted(tags & set(turn_tags.get(str(turn), ())))[0]}
        for turn, span in (row.tagged_spans(tags) if tags else [])
    ]
    tails = (row.metadata.get("cut_tails") or {}) if cut_tails else {}
    for turn, span in zip(row.turns, row.turn_spans, strict=False):
        tail = tails.get(str(turn))
        if tail:
            start, end = min(span[0] + tail[0], span[1]), min(span[0] + tail[1], span[1])
            records.append({"turn": turn, "span": [start, end], "reason": CUT_TAIL})
    if not records:
        return row, 0, 0
    mask = list(row.loss_mask)
    tokens = 0
    for rec in records:
        start, end = rec["span"]
        tokens += sum(mask[start:end])
        mask[start:end] = [0] * (end - start)
    metadata = {**row.metadata, LOSS_EXCLUDED: records}
    return dataclasses.replace(row, loss_mask=mask, metadata=metadata), len(records), tokens


def rows_as_trained(rows: Sequence[Row], config: GRPOConfig | None = None) -> list[Row]:
    """``rows`` with the loss mask GRPO trains them with under ``config`` (default settings):
    :attr:`GRPOConfig.masked_tags` and, unless ``train_cut_tails``, cut tails at 0, each
    masked span on ``metadata["loss_excluded"]``; rows kept even when nothing is left (what the
    HTTP front serves and verl's agent loop starts from)."""
    config = config or GRPOConfig()
    return [exclude_tagged_turns(r, config.masked_tags, not config.train_cut_tails)[0] for r in rows]


def group_advantages(rewards: Sequence[float], config: GRPOConfig) -> list[float]:
    """Advantages for one group's rewards (see the module docstring); all-equal -> zeros."""
    if len(rewards) < 2 or max(rewards) == min(rewards):
        return [0.0] * len(rewards)
    mean = statistics.fmean(rewards)
    centred = [r - mean for r in rewards]
    if not config.scale_by_std:
        return centred
    std = statistics.stdev(rewards)
    return [c / (std + config.std_eps) for c in centred]


def compute_advantages(trajectories: Sequence[Trajectory], config: GRPOConfig | None = None) -> Advantages:
    """GRPO advantages for a batch of finished rollouts, and their rows ready for batching.

    The result does not depend on the order of ``trajectories`` (they are taken in
    ``rollout_id`` order), so rollouts that finish in a different order give the same rows.

    Args:
        trajectories: finished rollouts, in any order; ``group_id`` names the task (a rollout
            without one is its own group, logged), ``reward`` the outcome.
        config: advantage settings (defaults: GRPO with std scaling).

    Returns:
        :class:`Advantages`.

    Raises:
        ValueError: on duplicate rollout ids, or a row whose rollout_id / group_id disagrees
            with its trajectory, or whose aligned lists differ in length.
    """
    config = config or GRPOConfig()
    trajectories = sorted(trajectories, key=lambda t: t.rollout_id)  # completion order must not matter
    seen: set[str] = set()
    groups: dict[str, list[Trajectory]] = {}
    excluded: dict[str, str] = {}
    for traj in trajectories:
        if traj.rollout_id in seen:
            raise ValueError(f"duplicate rollout_id {traj.rollout_id!r}")
        seen.add(traj.rollout_id)
        reason = failure_reason(traj)
        if reason is not None:
            logger.warning("rollout %s (group %s) excluded: %s", traj.rollout_id, traj.group_id, reason)
            excluded[traj.rollout_id] = reason
            continue
        if traj.group_id is None:
            logger.warning("rollout %s has no group_id; it forms a group of its own", traj.rollout_id)
        key = traj.group_id if traj.group_id is not None else f"rollout:{traj.rollout_id}"
        groups.setdefault(key, []).append(traj)

    advantages: dict[str, float] = {}
    zero_groups = 0
    for members in groups.values():
        values = group_advantages([float(t.reward) for t in members], config)  # type: ignore[arg-type]
        if not any(values):
            zero_groups += 1
        for traj, adv in zip(members, values, strict=True):
            advantages[traj.rollout_id] = adv

    rows: list[BatchRow] = []
    kept = 0
    tag_counts = {"discarded": 0, "summarizer": 0, "truncated": 0}
    cut_turns = 0
    excluded_turns = excluded_tokens = excluded_rows = untrained = 0
    exclude = config.masked_tags
    for traj in trajectories:
        if traj.rollout_id not in advantages:
            continue
        kept += 1
        for turn in traj.turns:
            for tag in turn.tags:
                tag_counts[tag] = tag_counts.get(tag, 0) + 1
        cut_turns += len(traj.metadata.get("cut_turns") or ())
        if not traj.rows:
            logger.warning("rollout %s has a reward but no rows", traj.rollout_id)
        trained_before = len(rows)
        for row in traj.rows:
            row.check()
            if row.rollout_id != traj.rollout_id:
                raise ValueError(f"row of rollout {row.rollout_id!r} found in trajectory {traj.rollout_id!r}")
            if row.group_id is None and traj.group_id is not None:
                row = dataclasses.replace(row, group_id=traj.group_id)
            elif row.group_id != traj.group_id:
                raise ValueError(
                    f"row group {row.group_id!r} disagrees with trajectory {traj.rollout_id!r} group {traj.group_id!r}"
                )
            row, n_turns, n_tokens = exclude_tagged_turns(row, exclude, not config.train_cut_tails)
            excluded_turns += n_turns
            excluded_tokens += n_tokens
            if n_turns and not any(row.loss_mask):
                excluded_rows += 1
                continue
            rows.append(BatchRow(row=row, advantage=advantages[traj.rollout_id]))
        if len(rows) == trained_before:  # still in its group's statistics above: no token to train
            untrained += 1

    rewards = [float(t.reward) for g in groups.values() for t in g]  # type: ignore[arg-type]
    metrics = {
        "reward_mean": statistics.fmean(rewards) if rewards else 0.0,
        "reward_std": statistics.pstdev(rewards) if rewards else 0.0,
        "rollouts": kept,
        "failed_rollouts": len(excluded),
        "groups": len(groups),
        "zero_advantage_groups": zero_groups,
        "rows": len(rows),
        "rows_per_rollout": len(rows) / kept if kept else 0.0,
        "advantage_abs_mean": statistics.fmean(abs(a) for a in advantages.values()) if advantages else 0.0,
        **{f"{tag}_turns": n for tag, n in sorted(tag_counts.items())},
        "loss_excluded_turns": excluded_turns,
        "loss_excluded_tokens": excluded_tokens,
        "loss_excluded_rows": excluded_rows,
        "untrained_rollouts": untrained,
        "cut_turns": cut_turns,
    }
    return Advantages(advantages=advantages, rows=rows, excluded=excluded, metrics=metrics)
