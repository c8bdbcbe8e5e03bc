"""Rollout functions the outer loop calls: one rollout through the gateway, reward attached.

A rollout function has the signature (:data:`RolloutFn`)::

    async def rollout(gateway, task, rollout_id, group_id, sampling) -> Trajectory

It opens the session ``rollout_id`` on the :class:`~strands_art.gateway.RolloutGateway` with
``group_id`` and ``sampling``, runs the episode (every model call through the gateway, so the
rows are the real captured tokens), scores it, and returns the closed trajectory with its
reward. Exceptions are handled by the loop (the rollout is marked failed and left out of GRPO).

- :func:`chat_rollout`: one user turn, one sampled reply, reward ``task.reward(text, truncated)``
  (the small verifiable task, :mod:`strands_art.training.tasks_toy`).
- :func:`migrationbench_rollout`: the MigrationBench Strands agent
  (:func:`strands_art.envs.migrationbench.runner.run_rollout`: fresh workspace, shell + editor
  tools, real Maven evaluation) through :class:`~strands_art.model.ARTModel`.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
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


@dataclass
class MigrationBenchLimits:
    """Per-rollout limits of :func:`migrationbench_rollout` (``strands-art migrate`` defaults
    are much larger; a notebook demo keeps them tiny).

    Attributes:
        max_turns: model calls per rollout.
        time_limit: seconds per rollout.
        command_timeout: seconds per shell command.
        max_output_bytes: shell output kept per command.
        build_timeout: seconds for the evaluation build.
        run_dir: where the runner writes evaluation logs and its trajectory store
            (default: a fresh temporary directory).
    """

    max_turns: int = 50
    time_limit: float = 1800.0
    command_timeout: float = 300.0
    max_output_bytes: int = 16384
    build_timeout: float = 300.0
    run_dir: Path | None = None


def migrationbench_rollout(limits: MigrationBenchLimits | None = None, model_id: str = "strands-art") -> Any:
    """A :data:`RolloutFn` running the MigrationBench agent on a ``Task`` (``envs.migrationbench``).

    The returned function opens the session with the loop's sampling parameters, builds an
    :class:`~strands_art.model.ARTModel` on it, lets the runner drive the agent and the evaluator
    (reward 0 / 0.5 / 1.0), and returns the trajectory the runner closed and stored.
    """
    from strands_art.envs.migrationbench.runner import RolloutSpec, run_rollout
    from strands_art.model import ARTModel
    from strands_art.store import TrajectoryStore

    limits = limits or MigrationBenchLimits()
    run_dir = limits.run_dir or Path(tempfile.mkdtemp(prefix="strands-art-mb-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    args = argparse.Namespace(
        max_turns=limits.max_turns,
        time_limit=limits.time_limit,
        command_timeout=limits.command_timeout,
        max_output_bytes=limits.max_output_bytes,
        build_timeout=limits.build_timeout,
    )

    @dataclass
    class _Spec(RolloutSpec):
        rid: str = ""

        @property
        def rollout_id(self) -> str:  # the loop's id, unique across outer batches
            return self.rid

    async def rollout(
        gateway: Any, task: Any, rollout_id: str, group_id: str, sampling: SamplingParams
    ) -> Trajectory:
        def make_model(spec: RolloutSpec) -> Any:
            gateway.open_session(spec.rollout_id, group_id, sampling)
            return ARTModel(gateway=gateway, session_id=spec.rollout_id, group_id=group_id, model_id=model_id)

        spec = _Spec(task=task, index=0, seed=sampling.seed or 0, rid=rollout_id)
        record = await run_rollout(spec, args, gateway, make_model, run_dir)
        for traj in TrajectoryStore(run_dir / "trajectories"):
            if traj.rollout_id == rollout_id:
                traj.metadata["record"] = record
                return traj
        raise RuntimeError(f"rollout {rollout_id} finished but its trajectory was not stored")

    return rollout
