"""The embedded outer loop: tasks → rollouts through the gateway → GRPO update → next rollouts.

For each outer batch ``b``:

1. sample ``prompt_batch_size`` tasks (``random.Random(f"{seed}-{b}")``: the same tasks after a
   resume);
2. run ``rollouts_per_prompt`` rollouts per task through the :class:`~strands_art.gateway.RolloutGateway`,
   concurrently (``concurrency`` in flight), with a progress bar; rollout ``k`` of task ``i``
   samples with seed ``hash(seed, b, i, k)``; a rollout that raises is kept as a failed
   trajectory (left out of GRPO, reason logged);
3. :meth:`LocalTrainer.update` (holds the backend's lock; the backend shares the model, so the
   next rollouts sample from the updated adapter);
4. append metrics to ``run_dir/metrics.jsonl``; checkpoint every ``checkpoint_every`` batches;
   evaluate every ``eval_every`` batches (and always before and after).

:func:`train` resumes from the newest checkpoint of ``run_dir`` (adapter, optimizer, step,
RNG), drops metrics written after it, and continues with the same step count.
"""

from __future__ import annotations

import asyncio
import logging
import random
import shlex
import statistics
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from strands_art.backends.base import SamplingParams
from strands_art.training.grpo import reward_problem
from strands_art.training.local import LocalTrainer
from strands_art.training.metrics import MetricsLog
from strands_art.training.rollouts import RolloutFn
from strands_art.trajectory import Trajectory

logger = logging.getLogger(__name__)


def rollout_seed(seed: int, outer_batch: int, task_index: int, k: int) -> int:
    """A deterministic 31-bit sampling seed for rollout ``k`` of task ``task_index`` in batch ``b``."""
    return zlib.crc32(f"{seed}:{outer_batch}:{task_index}:{k}".encode()) & 0x7FFFFFFF


def sample_tasks(tasks: Sequence[Any], n: int, seed: int, outer_batch: int) -> list[Any]:
    """``n`` distinct tasks for an outer batch, the same for the same (seed, outer_batch).

    Raises:
        ValueError: if there are fewer than ``n`` tasks.
    """
    if len(tasks) < n:
        raise ValueError(f"prompt_batch_size={n} but only {len(tasks)} tasks")
    return random.Random(f"{seed}-{outer_batch}").sample(list(tasks), n)


async def _one(
    rollout: RolloutFn, gateway: Any, task: Any, rid: str, gid: str, sampling: SamplingParams
) -> Trajectory:
    try:
        return await rollout(gateway, task, rid, gid, sampling)
    except Exception as exc:  # the agent, the environment or the backend failed
        logger.warning("rollout %s failed: %s: %s", rid, type(exc).__name__, exc)
        try:
            traj = gateway.close_session(rid)
        except KeyError:  # the session was never opened or is already closed
            traj = Trajectory(rollout_id=rid, group_id=gid)
        traj.metadata.update(failed=True, error=f"{type(exc).__name__}: {exc}")
        return traj


async def collect_rollouts(
    gateway: Any,
    tasks: Sequence[Any],
    rollout: RolloutFn,
    sampling: SamplingParams,
    rollouts_per_task: int,
    *,
    seed: int,
    outer_batch: int,
    concurrency: int = 8,
    prefix: str = "",
    progress: bool = True,
) -> list[Trajectory]:
    """Run ``rollouts_per_task`` rollouts of every task concurrently; trajectories in task order.

    Rollout ids are ``{prefix}b{outer_batch}-{task.name}-r{k}``; the group id is ``task.name``.
    """
    sem = asyncio.Semaphore(concurrency)
    bar = tqdm(
        total=len(tasks) * rollouts_per_task, desc=f"{prefix}rollouts b{outer_batch}", disable=not progress
    )

    async def one(i: int, task: Any, k: int) -> Trajectory:
        params = replace(sampling, seed=rollout_seed(seed, outer_batch, i, k))
        async with sem:
            traj = await _one(
                rollout, gateway, task, f"{prefix}b{outer_batch}-{task.name}-r{k}", task.name, params
            )
        bar.update(1)
        return traj

    try:
        return list(
            await asyncio.gather(
                *(one(i, t, k) for i, t in enumerate(tasks) for k in range(rollouts_per_task))
            )
        )
    finally:
        bar.close()


async def evaluate(
    gateway: Any,
    tasks: Sequence[Any],
    rollout: RolloutFn,
    sampling: SamplingParams,
    samples: int = 1,
    *,
    seed: int = 0,
    tag: int = 0,
    concurrency: int = 8,
    progress: bool = True,
) -> dict[str, Any]:
    """Mean reward of ``samples`` rollouts per task (not trained on; failed rollouts and rewards
    that are not finite numbers score 0 and count in ``val_failed``).

    Returns ``{"val_reward", "val_reward_std", "val_rollouts", "val_failed", "val_texts"}``
    (``val_texts``: the reply texts the rollouts stored in ``metadata["text"]``, if any).
    """
    trajs = await collect_rollouts(
        gateway, tasks, rollout, sampling, samples, seed=seed + 7919, outer_batch=tag,
        concurrency=concurrency, prefix="eval-", progress=progress,
    )  # fmt: skip
    failed = [t.metadata.get("failed") or reward_problem(t.reward) is not None for t in trajs]
    rewards = [0.0 if bad else float(t.reward) for t, bad in zip(trajs, failed, strict=True)]
    return {
        "val_reward": statistics.fmean(rewards),
        "val_reward_std": statistics.pstdev(rewards),
        "val_rollouts": len(trajs),
        "val_failed": sum(1 for bad in failed if bad),
        "val_texts": [t.metadata.get("text") for t in trajs if "text" in t.metadata],
    }


async def train(
    trainer: LocalTrainer,
    gateway: Any,
    tasks: Sequence[Any],
    rollout: RolloutFn,
    outer_batches: int,
    run_dir: str | Path,
    *,
    eval_tasks: Sequence[Any] | None = None,
    eval_rollout: RolloutFn | None = None,
    stop_after: int | None = None,
    progress: bool = True,
    on_batch: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run (or resume) the loop until ``outer_batches`` outer batches are done.

    Args:
        trainer: the :class:`LocalTrainer` (its backend must be the gateway's backend).
        gateway: the rollout gateway.
        tasks: training tasks (each with a ``name``).
        rollout: the :data:`~strands_art.training.rollouts.RolloutFn`.
        outer_batches: total outer batches of the run (counting those before a resume).
        run_dir: ``metrics.jsonl`` and ``checkpoints/`` go here.
        eval_tasks: held-out tasks; evaluated before training, every ``eval_every`` batches and
            at the end (skipped when None).
        eval_rollout: rollout function for evaluation (default: ``rollout``).
        stop_after: stop after this many outer batches *in this call* (a deliberate
            interruption, as a crash would be; resume by calling again).
        progress: show progress bars.
        on_batch: called with each metrics record as it is written.

    Returns:
        All metrics records of the run (including those from before a resume).

    Raises:
        ValueError: if the gateway does not sample from the trainer's backend.
    """
    if gateway.backend is not trainer.backend:
        raise ValueError("the gateway must sample from trainer.backend (the model being trained)")
    cfg = trainer.config
    run_dir = Path(run_dir)
    log = MetricsLog(run_dir / "metrics.jsonl")
    state = trainer.resume(run_dir)
    if state is not None:
        log.truncate_after(trainer.outer_batch)
    elif log.path.exists():  # no checkpoint: the run starts over
        log.path.unlink()
    mode = gateway.config.get("history_mode", "tree")
    eval_rollout = eval_rollout or rollout

    def emit(record: dict[str, Any]) -> None:
        log.write(record)
        if on_batch is not None:
            on_batch(record)

    async def run_eval() -> None:
        if eval_tasks is None:
            return
        t0 = time.perf_counter()
        res = await evaluate(
            gateway, eval_tasks, eval_rollout, cfg.eval_sampling, cfg.eval_samples, seed=cfg.seed,
            tag=trainer.outer_batch, concurrency=cfg.concurrency, progress=progress,
        )  # fmt: skip
        emit({"kind": "eval", "outer_batch": trainer.outer_batch, "step": trainer.step, **res,
              "eval_s": time.perf_counter() - t0})  # fmt: skip

    done_here = 0
    if trainer.outer_batch == 0 and not any(r.get("kind") == "eval" for r in log.read()):
        await run_eval()
    while trainer.outer_batch < outer_batches:
        if stop_after is not None and done_here >= stop_after:
            logger.info("stopping after %d outer batches (stop_after)", done_here)
            return log.read()
        b = trainer.outer_batch
        batch_tasks = sample_tasks(tasks, cfg.prompt_batch_size, cfg.seed, b)
        t0 = time.perf_counter()
        trajs = await collect_rollouts(
            gateway, batch_tasks, rollout, cfg.sampling, cfg.rollouts_per_prompt, seed=cfg.seed,
            outer_batch=b, concurrency=cfg.concurrency, progress=progress,
        )  # fmt: skip
        rollout_s = time.perf_counter() - t0
        metrics = await asyncio.to_thread(trainer.update, trajs)
        record = {"kind": "train", "outer_batch": b, **metrics, "step": trainer.step,
                  "rollout_s": rollout_s, "history_mode": mode}  # fmt: skip
        emit(record)
        done_here += 1
        last = trainer.outer_batch >= outer_batches
        if cfg.checkpoint_every and (trainer.outer_batch % cfg.checkpoint_every == 0 or last):
            await asyncio.to_thread(trainer.save, run_dir)
        if last or (cfg.eval_every and trainer.outer_batch % cfg.eval_every == 0):
            await run_eval()
    if progress:
        tqdm.write(f"browse the run: strands-art view {shlex.quote(str(run_dir))}")
    return log.read()
