"""The MigrationBench rollout for the trainers: one agent run through a trainer's gateway.

Both build a :class:`.config.RolloutConfig` and call :func:`.rollout.run_rollout` (fresh
workspace, sandboxed shell and editor tools, real Maven evaluation, reward 0 / 0.5 / 1.0):

- :func:`migrationbench_rollout`: a ``RolloutFn`` for the embedded training loop
  (:func:`strands_art.training.loop.train`, ``strands-art train --env migrationbench``).
- :func:`migrationbench_episode`: an ``Episode`` for verl's agent loop
  (:class:`strands_art.verl.agent_loop.StrandsAgentLoop`; the limits come from the YAML's
  ``episode_kwargs``, examples/migrationbench/verl_agent_loops.yaml).

They live with the environment (not in ``training/`` or ``verl/``) so that the trainers never
import ``envs`` (docs/architecture.md; ``python -m strands_art.devtools.layers``).
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strands_art.backends.base import SamplingParams
from strands_art.envs.migrationbench.config import LIMIT_FIELDS, RolloutConfig
from strands_art.envs.migrationbench.run.rollout import RolloutSpec, run_rollout
from strands_art.envs.migrationbench.run.rundir import RESULTS_FILE
from strands_art.envs.migrationbench.tasks.tasks import load_task
from strands_art.gateway import RolloutGateway
from strands_art.model import ARTModel
from strands_art.store import TrajectoryStore
from strands_art.trajectory import Trajectory


@dataclass
class _LoopSpec(RolloutSpec):
    """A rollout named by the training loop (its id is unique across outer batches)."""

    rid: str = ""

    @property
    def rollout_id(self) -> str:
        return self.rid


def migrationbench_rollout(
    config: RolloutConfig | None = None, model_id: str = "strands-art", *, run_dir: Path | None = None
) -> Any:
    """A ``RolloutFn`` (:data:`strands_art.training.rollouts.RolloutFn`) running the MigrationBench
    agent on a :class:`.tasks.Task`.

    Args:
        config: the rollout settings (default ``RolloutConfig()``: the ``migrate`` defaults of
            a non-llama.cpp backend).
        model_id: the ``model_id`` of the :class:`~strands_art.model.ARTModel` of each rollout.
        run_dir: where the runner writes evaluation logs, its trajectory store and
            ``results.jsonl`` (one record per rollout, training and held-out, as ``migrate``
            writes it; a resumed training run redoes the outer batch it was killed in and appends
            those rollouts again: the last line of a rollout id is the one trained on; made by
            the first rollout, so building a training environment writes nothing; default: a
            fresh temporary directory, made now).

    The returned ``async (gateway, task, rollout_id, group_id, sampling) -> Trajectory`` opens the
    session with the loop's sampling parameters, builds an ``ARTModel`` on it, lets the runner
    drive the agent and the evaluator, and returns the trajectory the runner closed and stored
    (its ``metadata["record"]`` is the results.jsonl record).

    Raises:
        TypeError: ``config`` is not a RolloutConfig.
    """
    config = RolloutConfig() if config is None else config
    if not isinstance(config, RolloutConfig):
        raise TypeError(f"migrationbench_rollout takes a RolloutConfig, got {type(config).__name__}")
    where = Path(run_dir) if run_dir is not None else Path(tempfile.mkdtemp(prefix="strands-art-mb-"))

    async def rollout(
        gateway: Any, task: Any, rollout_id: str, group_id: str, sampling: SamplingParams
    ) -> Trajectory:
        where.mkdir(parents=True, exist_ok=True)

        def make_model(spec: RolloutSpec) -> Any:
            gateway.open_session(spec.rollout_id, group_id, sampling)
            return ARTModel(gateway=gateway, session_id=spec.rollout_id, group_id=group_id, model_id=model_id)

        spec = _LoopSpec(task=task, index=0, seed=sampling.seed or 0, rid=rollout_id)
        record = await run_rollout(spec, config, gateway, make_model, where)
        append_record(where / RESULTS_FILE, record)
        for traj in TrajectoryStore(where / "trajectories"):
            if traj.rollout_id == rollout_id:
                traj.metadata["record"] = record
                return traj
        raise RuntimeError(f"rollout {rollout_id} finished but its trajectory was not stored")

    return rollout


def append_record(path: Path, record: Mapping[str, Any]) -> None:
    """Append ``record`` as one JSON line to ``path`` in a single ``O_APPEND`` write, fsync'ed
    (rollouts of one process append concurrently; a line is never interleaved)."""
    line = (json.dumps(record) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def episode_config(sample: Mapping[str, Any]) -> RolloutConfig:
    """The :class:`.config.RolloutConfig` of a verl episode: the defaults, overridden by the
    limits (:data:`.config.LIMIT_FIELDS`) present in ``sample`` (the YAML's ``episode_kwargs``
    over the dataset row). Nothing else of the sample is read: a dataset column cannot turn the
    sandbox off or change the prompt.

    Raises:
        UsageError: a limit of the wrong type or out of range, naming the field.
    """
    return RolloutConfig.from_mapping({k: sample[k] for k in LIMIT_FIELDS if k in sample})


class _KeepClosed:
    """The ``gateway`` the MigrationBench runner sees: keeps the trajectory it closes."""

    def __init__(self, gateway: RolloutGateway) -> None:
        self.gateway = gateway
        self.trajectory: Trajectory | None = None

    def close_session(self, rollout_id: str, reward: float | None = None) -> Trajectory:
        self.trajectory = self.gateway.close_session(rollout_id, reward)
        return self.trajectory


async def migrationbench_episode(
    gateway: RolloutGateway, sampling: SamplingParams, sample: Mapping[str, Any]
) -> Trajectory:
    """One MigrationBench rollout (the ``strands-art migrate`` agent and evaluator) as a verl
    ``Episode``: ``(gateway, sampling, sample) -> finished trajectory``.

    ``sample["extra_info"]["task_dir"]`` names the task directory (``task.json`` + ``repo/``;
    ``examples/migrationbench/make_verl_dataset.py`` writes it). Options in ``sample`` (from
    ``episode_kwargs``): ``run_dir`` (default ``$STRANDS_ART_RUN_DIR`` or ``runs/verl``; each
    worker writes logs and trajectories under ``run_dir/<host>-<pid>``) and any rollout limit
    (:func:`episode_config`; the :class:`.config.RolloutConfig` defaults otherwise).

    Raises:
        KeyError: no ``task_dir``; TaskError: not a task directory; UsageError: a bad limit;
        RuntimeError: the rollout ended without a trajectory.
    """
    config = episode_config(sample)
    task = load_task(sample["extra_info"]["task_dir"])
    base = Path(sample.get("run_dir") or os.environ.get("STRANDS_ART_RUN_DIR", "runs/verl"))
    run_dir = base / f"{socket.gethostname()}-{os.getpid()}"
    run_dir.mkdir(parents=True, exist_ok=True)
    spec = RolloutSpec(task=task, index=int(sample.get("session_id", 0)), seed=0)
    group = str(sample.get("uid", task.name))
    gateway.open_session(spec.rollout_id, group, sampling)
    keep = _KeepClosed(gateway)

    def make_model(s: RolloutSpec) -> ARTModel:
        return ARTModel(gateway=gateway, session_id=s.rollout_id, group_id=group, model_id="verl")

    await run_rollout(spec, config, keep, make_model, run_dir)
    if keep.trajectory is None:
        raise RuntimeError(f"rollout {spec.rollout_id} ended without a trajectory")
    return keep.trajectory
