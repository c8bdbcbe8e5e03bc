"""``--ray``: MigrationBench rollouts as Ray tasks on a cluster; the driver alone writes the run.

Each rollout runs as one Ray task (:func:`_rollout_task`) on a worker node: the agent, the rollout
gateway (in-process with the agent, as without Ray), the sandboxed tool commands and the Maven
evaluation build all run there, in a node-local scratch run directory (an **attempt**). The task
asks for ``--ray-cpus`` CPUs, ``--ray-memory-gb`` of memory and one unit of the custom resource
:data:`SANDBOX_RESOURCE`, which only nodes with bubblewrap, JDK 17 and the offline Maven repository
declare (``ray start --resources '{"strands_art_sandbox": 4}'``). Sampling goes to a backend the
worker builds for itself from the run's arguments (a vLLM server URL, or a llama.cpp model per
worker; tests ship a scripted backend factory).

The worker returns ``(record, trajectory, evaluation log)``; the driver
(:class:`RayRollouts`) appends the trajectory to the run's store and then the results line,
exactly as an in-process rollout is committed (:mod:`.rundir`), so a run directory is written by
one process holding its lock, whatever the cluster.

Failures: a worker process or node that dies mid-rollout fails the task with a system error;
Ray runs it again on a live node (``max_retries`` = ``--ray-retries``) and only the attempt that
returns is recorded: nothing of a dead attempt reaches the driver. Its processes are killed on
its node by the attempt's reaper (:func:`.rundir.run_token`: a watchdog process that outlives the
worker) and by the sandbox itself (``bwrap --die-with-parent``, ``setpriv --pdeathsig``); its
scratch directory is removed by the next task or the end-of-run sweep on that node
(:func:`sweep`, which takes each attempt's lock: a held lock is a live attempt). Retries
exhausted: the rollout is recorded ``failed`` and ``--resume`` runs it again.

Ray is imported only here and only when ``--ray`` is given. Source: Ray's fault-tolerance
guide (https://docs.ray.io/en/latest/ray-core/fault_tolerance/tasks.html).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strands_art.envs.migrationbench.run.rundir import TRAJECTORIES_DIR, RunDirBusy, open_run_dir, run_token
from strands_art.store import TrajectoryStore
from strands_art.validation import UsageError

logger = logging.getLogger(__name__)

SANDBOX_RESOURCE = "strands_art_sandbox"
"""The custom Ray resource of nodes that can run a rollout: bubblewrap, JDK 17, Maven and its
offline repository (docs/scale-out.md). One unit per rollout in flight."""

SCRATCH_ENV = "STRANDS_ART_RAY_SCRATCH"
"""Where a node keeps its attempts' scratch run directories (default ``$TMPDIR/strands-art-ray``);
set it in the environment of ``ray start`` on that node."""

ATTEMPT_PREFIX = "attempt-"


def scratch_base() -> Path:
    """This node's scratch directory for attempts (:data:`SCRATCH_ENV`, else the temp dir)."""
    return Path(os.environ.get(SCRATCH_ENV) or Path(tempfile.gettempdir()) / "strands-art-ray")


def sweep(base: Path | None = None) -> int:
    """Remove the scratch directories of dead attempts under ``base`` (default :func:`scratch_base`).

    Each attempt holds its directory's lock (:func:`.rundir.open_run_dir`) while it runs; a lock
    that can be taken belongs to a dead attempt, and taking it kills that attempt's leftover
    processes (its run token and its workspaces' sandbox uids) before the directory goes.

    Returns:
        How many dead attempts were removed.
    """
    base = scratch_base() if base is None else base
    removed = 0
    with contextlib.suppress(FileNotFoundError):
        for entry in sorted(base.iterdir()):
            if not entry.name.startswith(ATTEMPT_PREFIX) or not entry.is_dir() or entry.is_symlink():
                continue
            try:
                rd = open_run_dir(entry)
            except RunDirBusy:
                continue  # a live attempt
            except OSError as exc:
                logger.warning("cannot sweep %s: %s", entry, exc)
                continue
            try:
                _remove_attempt(entry)
            finally:
                rd.close()
            removed += 1
    if removed:
        logger.warning("removed %d dead rollout attempt(s) under %s", removed, base)
    return removed


def _remove_attempt(path: Path) -> None:
    from strands_art.envs.migrationbench.workspace import remove_base

    remove_base(path / "workspaces")
    shutil.rmtree(path, ignore_errors=True)


@dataclass
class AttemptResult:
    """What a worker sends back: the results.jsonl record, the closed trajectory (None without
    token capture or when the rollout failed before one was stored), the evaluator's log text
    (``logs/<rollout>.eval.json``, None if not evaluated) and the node that ran it."""

    record: dict[str, Any]
    trajectory: Any
    evaluation_log: str | None
    node: str


def _rollout_task(spec: Any, args: argparse.Namespace, backend_factory: Any) -> AttemptResult:
    """One rollout attempt on this worker (the body of the Ray task): sweep dead attempts, run
    the rollout in a fresh locked scratch run directory under a run token and a reaper, read the
    stored trajectory back, remove the directory."""
    import ray

    node = ray.get_runtime_context().get_node_id()
    base = scratch_base()
    sweep(base)
    base.mkdir(parents=True, exist_ok=True)
    base.chmod(0o711)  # each sandbox uid passes through to its own 0700 workspace (.workspace)
    path = base / f"{ATTEMPT_PREFIX}{uuid.uuid4().hex}"
    rd = open_run_dir(path)
    try:
        with run_token(rd.token, rd.workspaces):
            record, traj, log = asyncio.run(_attempt(spec, args, backend_factory, path))
    finally:
        rd.close()
        _remove_attempt(path)
    return AttemptResult(record, traj, log, node)


async def _attempt(
    spec: Any, args: argparse.Namespace, backend_factory: Any, run_dir: Path
) -> tuple[dict[str, Any], Any, str | None]:
    from strands_art.envs.migrationbench.run.rollout import crashed_record, make_policy, run_rollout
    from strands_art.envs.migrationbench.run.runner_args import rollout_config

    if not getattr(args, "unsafe_no_sandbox", False):
        from strands_art.envs.sandbox import require_sandbox

        require_sandbox()  # SandboxUnavailable: the driver records the rollout failed, naming it
    gateway, make_model = make_policy(args, backend_factory)
    try:
        try:
            # the one call of the runner's per-rollout function on a worker
            record = await run_rollout(spec, rollout_config(args), gateway, make_model, run_dir)
        except UsageError:
            raise
        except Exception as exc:  # noqa: BLE001 - as in the in-process runner: recorded as failed
            record = crashed_record(spec, exc, gateway)
    finally:
        if gateway is not None:
            await gateway.backend.aclose()
    traj = None
    if not record.get("failed") and record.get("token_capture"):
        traj = next(
            (t for t in TrajectoryStore(run_dir / TRAJECTORIES_DIR) if t.rollout_id == spec.rollout_id), None
        )
        if traj is None:
            raise RuntimeError(f"rollout {spec.rollout_id} finished but its trajectory was not stored")
    log = run_dir / "logs" / f"{spec.rollout_id}.eval.json"
    return record, traj, log.read_text(encoding="utf-8") if log.is_file() else None


def _sweep_task() -> int:
    return sweep()


def connect(address: str, *, slots: int) -> dict[str, float]:
    """Join the Ray cluster at ``address`` (``auto``: the one this machine belongs to; ``HOST:PORT``
    or ``ray://...``) or, for ``local``, start one here with ``slots`` units of
    :data:`SANDBOX_RESOURCE` (:func:`strands_art.training.ray_rollouts.connect`, the one join of
    both commands). Returns the cluster's total resources.

    Raises:
        UsageError: Ray is not installed (``pip install 'strands-art[ray]'``), the cluster cannot
            be reached, or no node declares :data:`SANDBOX_RESOURCE`.
    """
    from strands_art.training.ray_rollouts import connect as join

    try:
        join(address, slots=slots, resources={SANDBOX_RESOURCE: 1})
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    import ray

    return ray.cluster_resources()


class RayRollouts:
    """The driver's side: submits rollouts as Ray tasks and commits what comes back.

    Args:
        args: the migrate options (``ray``, ``ray_cpus``, ``ray_memory_gb``, ``ray_retries``,
            ``concurrency`` and everything a rollout reads); sent to each worker as one object.
        backend_factory: how a worker builds its sampling backend (``None``: from ``--backend``);
            shipped once through the object store, so it must pickle (cloudpickle).
        run_dir: the run directory the driver holds the lock of.

    Raises:
        UsageError: see :func:`connect`.
    """

    def __init__(self, args: argparse.Namespace, backend_factory: Any, run_dir: Path) -> None:
        import ray

        connect(args.ray, slots=max(1, args.concurrency))
        self.run_dir = run_dir
        self.store = TrajectoryStore(run_dir / TRAJECTORIES_DIR)
        self._args = argparse.Namespace(**{k: v for k, v in vars(args).items() if k != "func"})
        self._factory = ray.put(backend_factory)
        self._task = ray.remote(_rollout_task).options(
            num_cpus=args.ray_cpus,
            memory=int(args.ray_memory_gb * 2**30),
            resources={SANDBOX_RESOURCE: 1},
            max_retries=args.ray_retries,
            retry_exceptions=False,  # only system failures (a dead worker or node) run it again
        )

    async def run(self, spec: Any) -> dict[str, Any]:
        """Run one rollout on the cluster and commit it: evaluation log, trajectory (Parquet part,
        then the JSONL line); returns the record for the caller to append to results.jsonl last.
        A task that failed on every attempt gives a ``failed`` record (run again by ``--resume``)."""
        from ray.exceptions import RayError

        from strands_art.envs.migrationbench.evaluate.evalguard import one_line
        from strands_art.envs.migrationbench.run.rollout import crashed_record

        try:
            out: AttemptResult = await self._task.remote(spec, self._args, self._factory)
        except RayError as exc:
            logger.error("rollout %s failed on the cluster: %s", spec.rollout_id, one_line(exc))
            return crashed_record(spec, exc, None)
        if out.evaluation_log is not None:
            (self.run_dir / "logs").mkdir(exist_ok=True)
            (self.run_dir / "logs" / f"{spec.rollout_id}.eval.json").write_text(
                out.evaluation_log, encoding="utf-8"
            )
        if out.trajectory is not None:
            self.store.append(out.trajectory)
        return out.record | {"ray_node": out.node[:16]}

    def sweep_nodes(self) -> int:
        """Remove dead attempts' scratch directories on every live node with the sandbox resource
        (one pinned task per node); returns how many were removed."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get(SANDBOX_RESOURCE)]
        task = ray.remote(_sweep_task)
        refs = [
            task.options(
                num_cpus=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
            ).remote()
            for n in nodes
        ]
        return sum(ray.get(refs))
