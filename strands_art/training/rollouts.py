"""Rollout functions the outer loop calls: one rollout through the gateway, reward attached.

A rollout function has the signature (:data:`RolloutFn`)::

    async def rollout(gateway, task, rollout_id, group_id, sampling) -> Trajectory

It opens the session ``rollout_id`` on the :class:`~strands_art.gateway.RolloutGateway` with
``group_id`` and ``sampling``, runs the episode (every model call through the gateway, so the
rows are the real captured tokens), scores it, and returns the closed trajectory with its
reward. Exceptions are handled by the loop (the rollout is marked failed and left out of GRPO).

- :func:`chat_rollout`: one user turn, one sampled reply, reward ``task.reward(text, truncated)``
  (the small verifiable task, :mod:`strands_art.training.tasks_toy`).
- :func:`strands_art.envs.migrationbench.run.episodes.migrationbench_rollout`: the MigrationBench
  Strands agent (fresh workspace, shell + editor tools, real Maven evaluation) through
  :class:`~strands_art.model.ARTModel`; it lives with the environment (``training/`` imports
  neither ``envs`` nor a front).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from strands_art.backends.base import SamplingParams
from strands_art.trajectory import Trajectory

RolloutFn = Callable[[Any, Any, str, str, SamplingParams], Awaitable[Trajectory]]


async def chat_rollout(
    gateway: Any, task: Any, rollout_id: str, group_id: str, sampling: SamplingParams
) -> Trajectory:
    """One-turn rollout: ``task.messages()`` → one generation → ``task.reward(text, truncated)``.

    ``task`` needs ``messages() -> list[dict]`` and ``reward(text, truncated) -> float``
    (``truncated``: the reply hit ``max_new_tokens``); the trajectory's metadata gets the text.
    """
    gateway.open_session(rollout_id, group_id, sampling)
    result = await gateway.generate(rollout_id, task.messages())
    reward = task.reward(result.text, truncated=result.finish_reason == "length")
    traj = gateway.close_session(rollout_id, reward)
    traj.metadata["text"] = result.text
    return traj
