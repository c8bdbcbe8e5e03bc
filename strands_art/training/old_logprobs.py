"""Where the PPO ratio's old logprobs come from (``--old-logprobs``, ``TrainerConfig.old_logprobs``).

A leaf module (no torch, no other strands_art import) so that both the settings behind
``strands-art --help`` and the trainer's configuration can name the choices without importing
each other.
"""

from __future__ import annotations

OLD_LOGPROBS_CHOICES = ("rollout", "recompute", "first-pass")
"""``--old-logprobs`` values besides ``auto``: ``rollout`` = the logprobs the backend recorded at
sampling time; ``recompute`` = one extra forward pass of the trainer before the update (decoupled
PPO's proximal policy); ``first-pass`` = the trainer's own logprob at the row's first optimizer step
of the update (no extra pass)."""

AUTO_ASYNC_OLD_LOGPROBS = "first-pass"
"""What ``--old-logprobs auto`` (the default) means with ``--max-staleness`` >= 1; with 0 it
means ``rollout``. ``TrainSettings.resolve`` saves the resolved value in ``train.json``."""


def resolve_old_logprobs(value: str, max_staleness: int) -> str:
    """``value``, with ``auto`` replaced by what it means at ``max_staleness``: ``rollout`` when
    synchronous (0), else :data:`AUTO_ASYNC_OLD_LOGPROBS`."""
    if value != "auto":
        return value
    return "rollout" if max_staleness == 0 else AUTO_ASYNC_OLD_LOGPROBS
