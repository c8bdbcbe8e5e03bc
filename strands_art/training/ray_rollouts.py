"""``strands-art train --ray``: the rollouts of the embedded loop as Ray tasks.

Each rollout runs as one Ray task (:func:`_rollout_task`) on a worker: the worker builds its own
:class:`~strands_art.backends.vllm.VLLMBackend` on the run's vLLM server URL, switched to the LoRA
adapter (name and policy version) the driver's weight sync has already loaded into that server
when the rollout was submitted, asks the environment for its gateway on that backend, runs the
environment's rollout function and returns the closed :class:`~strands_art.trajectory.Trajectory`.
The environment is named by its ``--env`` spec (a bundled name or ``module:function``), so the
worker imports and builds it itself (once per worker process), with the same
:class:`~strands_art.training.environment.EnvOptions` as the driver.

:class:`RayRollout` is a :data:`~strands_art.training.rollouts.RolloutFn`: the driver's loop
(:func:`strands_art.training.loop.train`) calls it as it calls the environment's rollout, so
batching, training, checkpoints, metrics and the rows are the driver's, unchanged. A rollout
that fails on the worker (the agent, the environment, the server) comes back as a failed
trajectory, as in-process; only a dead worker process or node runs it again (``max_retries``,
``retry_exceptions=False``); retries used up raise on the driver, where the loop keeps the
rollout as failed.

Requirements (checked by :func:`check_settings` before anything is written): ``--backend vllm``
(a server every worker reaches: the one the command starts, or ``--vllm-url``) and
``--max-staleness 0`` (a worker samples one adapter for its whole rollout, and the weight sync
unloads an adapter once the next one is loaded, which would fail the rollouts still running on it).

Ray is imported only when ``--ray`` is given. Source: Ray's task fault tolerance
(https://docs.ray.io/en/latest/ray-core/fault_tolerance/tasks.html).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from strands_art.backends.base import SamplingParams
from strands_art.training.environment import EnvOptions, TrainEnvironment, resolve_environment
from strands_art.trajectory import Trajectory
from strands_art.validation import UsageError, check_ray_address, probe_ray_address

logger = logging.getLogger(__name__)

RAY_CPUS = 1.0
"""CPUs each rollout task asks for (as ``migrate --ray``'s default)."""
RAY_MEMORY_GB = 2.0
"""Memory each rollout task asks for, GiB (as ``migrate --ray``'s default)."""
RAY_RETRIES = 3
"""Runs again of a rollout whose worker or node died (as ``migrate --ray``'s default)."""


def check_settings(ray: str | None, backend: str, max_staleness: int) -> None:
    """Refuse ``--ray`` settings the Ray rollouts cannot run (nothing is written before this).

    Raises:
        ValueError: an address that is not ``local``, ``auto``, ``HOST:PORT`` or ``ray://...``;
            a backend other than ``vllm``; ``max_staleness`` other than 0; a ``HOST:PORT`` nothing
            answers on.
    """
    if ray is None:
        return
    check_ray_address(ray)
    if backend != "vllm":
        raise ValueError(
            f"--ray needs --backend vllm (a server every Ray worker reaches), got --backend {backend}"
        )
    if max_staleness != 0:
        raise ValueError(f"--ray needs --max-staleness 0 (got {max_staleness}): see docs/scale-out.md")
    probe_ray_address(ray)  # ray.init retries an unreachable address for minutes


@dataclass(frozen=True)
class RolloutJob:
    """Everything one rollout task needs (pickled to the worker).

    Attributes:
        env_spec: the ``--env`` spec; env_options: what the driver built the environment with.
        model: the ``--model`` alias or directory (the worker loads its tokenizer).
        url: the vLLM server; base_model: its served base model name.
        adapter: the model name to sample from (``base_model`` before the first sync);
            policy_version: the optimizer steps behind it.
        task, rollout_id, group_id, sampling: as the loop passes them to a rollout function.
    """

    env_spec: str
    env_options: EnvOptions
    model: str
    url: str
    base_model: str
    adapter: str
    policy_version: int
    task: Any
    rollout_id: str
    group_id: str
    sampling: SamplingParams


_ENVS: dict[tuple[str, EnvOptions], TrainEnvironment] = {}
_TOKENIZERS: dict[str, Any] = {}


def _environment(job: RolloutJob) -> tuple[TrainEnvironment, Any]:
    """The job's environment and tokenizer, built once per worker process."""
    from strands_art.registry import load_tokenizer

    key = (job.env_spec, job.env_options)
    if key not in _ENVS:
        _ENVS[key] = resolve_environment(job.env_spec, job.env_options)
    if job.model not in _TOKENIZERS:
        _TOKENIZERS[job.model] = load_tokenizer(job.model)
    return _ENVS[key], _TOKENIZERS[job.model]


async def run_job(job: RolloutJob) -> Trajectory:
    """One rollout on this process: its own VLLM backend and gateway; a failure of the rollout is
    a failed trajectory (:func:`strands_art.training.loop.run_one`), never an exception."""
    from strands_art.backends.vllm import VLLMBackend
    from strands_art.training.loop import run_one

    env, tok = _environment(job)
    backend = VLLMBackend(job.url, job.base_model)
    if job.adapter != job.base_model:
        backend.use_adapter(job.adapter, job.policy_version)
    try:
        gateway = env.gateway(tok, backend)
        return await run_one(env.rollout, gateway, job.task, job.rollout_id, job.group_id, job.sampling)
    finally:
        await backend.aclose()


def _rollout_task(job: RolloutJob) -> Trajectory:
    """The body of the Ray task: :func:`run_job`, the trajectory labelled with the worker's node
    and process (``metadata["ray_node"]``, ``metadata["ray_pid"]``)."""
    import ray

    traj = asyncio.run(run_job(job))
    traj.metadata.update(ray_node=ray.get_runtime_context().get_node_id(), ray_pid=os.getpid())
    return traj


def connect(address: str, *, slots: int, resources: Mapping[str, float]) -> bool:
    """Join the Ray cluster at ``address`` (``auto``, ``HOST:PORT``, ``ray://...``) or, for
    ``local``, start one here with ``slots`` times each of ``resources``. Returns whether this call
    connected (False: Ray was already initialized in this process).

    Raises:
        ValueError: Ray is not installed, the cluster cannot be reached, or no node declares a
            resource the rollouts need.
    """
    try:
        import ray
    except ImportError:
        raise ValueError("--ray needs Ray: pip install 'strands-art[ray]' (docs/scale-out.md)") from None
    started = False
    if not ray.is_initialized():
        try:
            if address == "local":
                ray.init(
                    num_cpus=max(os.cpu_count() or 1, slots),
                    resources={k: v * slots for k, v in resources.items()},
                    include_dashboard=False,
                    logging_level=logging.WARNING,
                    _system_config={"worker_niceness": 0},  # as migrate --ray (docs/scale-out.md)
                )
            else:
                probe_ray_address(address)
                ray.init(address=address, logging_level=logging.WARNING)
        except UsageError:
            raise
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ValueError(f"--ray {address}: cannot join the Ray cluster: {exc}") from None
        started = True
    total = ray.cluster_resources()
    missing = [k for k, v in resources.items() if total.get(k, 0) < v]
    if missing:
        wanted = json.dumps({k: "N" for k in missing})
        raise ValueError(
            f"--ray {address}: no node of the cluster declares the resource(s) {missing} the rollouts "
            f"need; start the nodes that can run them with ray start --resources '{wanted}' "
            f"(docs/scale-out.md)"
        )
    return started


class RayRollout:
    """A rollout function that runs each rollout as a Ray task (see the module docstring).

    Args:
        env_spec, env_options, model: how a worker builds the environment and the tokenizer.
        resources: custom Ray resources each rollout asks for (the environment's
            ``ray_resources``), besides :data:`RAY_CPUS` and :data:`RAY_MEMORY_GB`.

    The driver's gateway passed to :meth:`__call__` is read for its backend's server URL, base
    model, current adapter and policy version (a :class:`~strands_art.backends.vllm.VLLMBackend`).
    """

    def __init__(
        self, env_spec: str, env_options: EnvOptions, model: str, resources: Mapping[str, float]
    ) -> None:
        import ray

        self._job = {"env_spec": env_spec, "env_options": env_options, "model": model}
        self._task = ray.remote(_rollout_task).options(
            num_cpus=RAY_CPUS,
            memory=int(RAY_MEMORY_GB * 2**30),
            resources=dict(resources),
            max_retries=RAY_RETRIES,
            retry_exceptions=False,  # only system failures (a dead worker or node) run it again
        )

    async def __call__(
        self, gateway: Any, task: Any, rollout_id: str, group_id: str, sampling: SamplingParams
    ) -> Trajectory:
        b = gateway.backend
        job = RolloutJob(
            **self._job, url=b.base_url, base_model=b.base_model, adapter=b.model,
            policy_version=b.policy_version, task=task, rollout_id=rollout_id, group_id=group_id,
            sampling=sampling,
        )  # fmt: skip
        return await self._task.remote(job)
