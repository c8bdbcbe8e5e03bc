"""Bounded staleness for asynchronous rollouts: which rollouts an update may still train on.

With ``max_staleness = K`` the loop (:func:`strands_art.training.loop.train`) keeps the
rollouts of up to K outer batches ahead in flight while the trainer updates on the current one.
Every turn records the policy version that sampled it (``Turn.policy_version``: optimizer steps
behind the weights, set by the backend). When batch ``b`` is trained, a rollout is **dropped**
(left out of GRPO like a failed rollout, ``metadata["failed"]``, reason ``stale: ...``, counted
as ``stale_dropped`` in the metrics) if its oldest turn is more than K *updates* behind the
trainer::

    updates_behind = ceil((trainer.step - oldest_policy_version) / steps_per_update)
    drop  if  updates_behind > K

``steps_per_update`` is the fixed number of optimizer steps of one outer batch (mini-batches x
PPO epochs). A kept rollout is corrected with its recorded logprobs, token by token (a rollout
may mix versions when a weight sync lands between its turns): ``strands-art train`` with K >= 1
takes the PPO ratio's old logprobs from the trainer's own first pass over the row
(``old_logprobs="first-pass"``), so the recorded ones enter the truncated importance weight and
the clip does not throw away the gradient of tokens the trainer has already moved past the clip
range since they were sampled (:mod:`strands_art.training.local`, docs/training-update.md). Dropping was chosen over finishing and correcting because a stale rollout's whole token
prefix came from the old policy; the loop's schedule keeps rollouts within K (a batch's rollouts
start at most K updates before it is trained), so a drop is a guard (a slow rollout, a sync that
lagged), and the count says when it fires. Dropping changes the rows, never the optimizer step
count (step-stable batching pads the mini-batches).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from strands_art.trajectory import Trajectory


def oldest_version(traj: Trajectory) -> int | None:
    """The smallest ``policy_version`` of the rollout's turns (None: no turn says)."""
    versions = [t.policy_version for t in traj.turns if t.policy_version is not None]
    return min(versions) if versions else None


def updates_behind(version: int, step: int, steps_per_update: int) -> int:
    """``ceil((step - version) / steps_per_update)``, at least 0.

    Raises:
        ValueError: ``steps_per_update`` < 1.
    """
    if steps_per_update < 1:
        raise ValueError(f"steps_per_update must be >= 1, got {steps_per_update}")
    return max(0, math.ceil((step - version) / steps_per_update))


def drop_stale(
    trajectories: Sequence[Trajectory], step: int, steps_per_update: int, max_staleness: int
) -> int:
    """Mark rollouts more than ``max_staleness`` updates behind ``step`` as failed (in place).

    A rollout already failed, or without recorded versions, is left as it is. Returns how many
    were dropped.
    """
    dropped = 0
    for traj in trajectories:
        if traj.metadata.get("failed"):
            continue
        oldest = oldest_version(traj)
        if oldest is None:
            continue
        behind = updates_behind(oldest, step, steps_per_update)
        if behind > max_staleness:
            traj.metadata.update(
                failed=True,
                stale=True,
                error=f"stale: sampled by policy {oldest}, {behind} updates behind step {step} "
                f"(max staleness {max_staleness})",
            )
            dropped += 1
    return dropped
