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

With ``max_staleness = K >= 1`` the rollouts of up to K outer batches ahead run while the trainer
updates (launched once the batch before them is collected; a deferred weight sync such as
:class:`~strands_art.training.local_sync.CopySync` is published just before each launch), and a
rollout more than K updates behind when its batch is trained is dropped
(:mod:`strands_art.training.staleness`). ``K = 0`` is the synchronous loop above. With
``launch_after_step = J >= 1`` the next batch's rollouts launch after the J-th optimizer step of
the update instead of before it, with the adapter of that step synced to the sampler first: J
steps less lag, the rollouts overlapping only the update's remaining steps.

Each train record also has ``e2e_s``: the wall seconds from the previous train record (the loop's
start for the first one after a start or a resume) to this one, held-out evaluations left out
(they are their records' ``eval_s``): the rollouts (or the wait for them), the update, the weight
sync, and the checkpoint written after the previous record.

:func:`train` resumes from the newest checkpoint of ``run_dir`` (adapter, optimizer, step,
RNG), drops metrics written after it, and continues with the same step count.

Over 450 lines because :func:`train` is one schedule (rollouts, overlapping updates, evaluation,
checkpoints) whose inner functions share its state; what they do not share is in batching, phases,
metrics and checkpoint.
"""

from __future__ import annotations

import asyncio
import logging
import random
import statistics
import time
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from strands_art.backends.base import BackendUnavailable, SamplingParams
from strands_art.invocation import view_command
from strands_art.training.batching import plan
from strands_art.training.dynamic_sampling import Draws, TaskHistory, candidate_order
from strands_art.training.grpo import reward_problem
from strands_art.training.local import LocalTrainer
from strands_art.training.metrics import MetricsLog
from strands_art.training.rollouts import RolloutFn
from strands_art.training.staleness import drop_stale
from strands_art.trajectory import Trajectory

RolloutEvent = Callable[[str, str], None]
"""``on_event(kind, rollout_id)``: ``kind`` is ``"start"`` or ``"end"`` (see :func:`collect_rollouts`)."""

logger = logging.getLogger(__name__)


class SamplerUnavailable(RuntimeError):
    """Rollouts failed because the sampler stopped answering (:class:`BackendUnavailable`: a
    refused connection, 502/503/504 after the backend's retries). The loop stops before training
    on the batch (or evaluating with it), so the run ends at its last checkpoint and ``--resume``
    redoes the batch once the sampler is back — instead of training on the rollouts that
    happened to finish and skipping the rest."""


def sampler_failure(exc: BaseException) -> BackendUnavailable | None:
    """The :class:`BackendUnavailable` behind ``exc`` (itself, or in its ``__cause__`` /
    ``__context__`` chain: the gateway's provider re-raises it as Strands'
    ``ModelThrottledException``), None when the failure is the agent's or the environment's."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, BackendUnavailable):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return None


def check_sampler(trajs: Sequence[Trajectory], where: str) -> None:
    """Raise :class:`SamplerUnavailable` when a rollout of ``trajs`` failed for want of a sampler
    (``metadata["sampler_unavailable"]``, set by :func:`run_one`)."""
    gone = [t for t in trajs if t.metadata.get("sampler_unavailable")]
    if gone:
        raise SamplerUnavailable(
            f"the sampler stopped answering during {where}: {len(gone)} of {len(trajs)} rollouts failed "
            f"({str(gone[0].metadata.get('error'))[:200]})"
        )


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


async def run_one(
    rollout: RolloutFn, gateway: Any, task: Any, rid: str, gid: str, sampling: SamplingParams
) -> Trajectory:
    """One rollout; an exception of the agent, the environment or the backend gives a failed
    trajectory (``metadata["failed"]``, ``metadata["error"]``, left out of GRPO), never a raise."""
    try:
        return await rollout(gateway, task, rid, gid, sampling)
    except Exception as exc:  # the agent, the environment or the backend failed
        logger.warning("rollout %s failed: %s: %s", rid, type(exc).__name__, exc)
        try:
            traj = gateway.close_session(rid)
        except KeyError:  # the session was never opened or is already closed
            traj = Trajectory(rollout_id=rid, group_id=gid)
        traj.metadata.update(failed=True, error=f"{type(exc).__name__}: {exc}")
        if sampler_failure(exc) is not None:
            traj.metadata["sampler_unavailable"] = True
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
    on_event: RolloutEvent | None = None,
    first_index: int = 0,
) -> list[Trajectory]:
    """Run ``rollouts_per_task`` rollouts of every task concurrently; trajectories in task order.

    Rollout ids are ``{prefix}b{outer_batch}-{task.name}-r{k}``; the group id is ``task.name``.
    Task ``i`` of ``tasks`` samples as task ``first_index + i`` of the outer batch
    (:func:`rollout_seed`; a later wave of dynamic sampling continues the numbering).
    ``on_event(kind, rollout_id)`` is called with ``"start"`` when a rollout gets a concurrency
    slot and ``"end"`` when it has finished (failed or not): live progress displays count them.
    """
    sem = asyncio.Semaphore(concurrency)
    bar = tqdm(
        total=len(tasks) * rollouts_per_task, desc=f"{prefix}rollouts b{outer_batch}", disable=not progress
    )

    async def one(i: int, task: Any, k: int) -> Trajectory:
        params = replace(sampling, seed=rollout_seed(seed, outer_batch, first_index + i, k))
        rid = f"{prefix}b{outer_batch}-{task.name}-r{k}"
        async with sem:
            if on_event is not None:
                on_event("start", rid)
            traj = await run_one(rollout, gateway, task, rid, task.name, params)
        bar.update(1)
        if on_event is not None:
            on_event("end", rid)
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
    on_event: RolloutEvent | None = None,
) -> dict[str, Any]:
    """Mean reward of ``samples`` rollouts per task (not trained on; failed rollouts and rewards
    that are not finite numbers score 0 and count in ``val_failed``).

    Returns ``{"val_reward", "val_reward_std", "val_rollouts", "val_failed", "val_texts"}``
    (``val_texts``: the reply texts the rollouts stored in ``metadata["text"]``, if any), plus
    ``val_success`` (fraction in [0, 1]; failed rollouts count as failures) when at least one
    rollout did not fail and every such rollout put a bool ``metadata["success"]`` (the lookup
    environment does).
    """
    trajs = await collect_rollouts(
        gateway, tasks, rollout, sampling, samples, seed=seed + 7919, outer_batch=tag,
        concurrency=concurrency, prefix="eval-", progress=progress, on_event=on_event,
    )  # fmt: skip
    check_sampler(trajs, f"the evaluation at outer batch {tag}")
    failed = [t.metadata.get("failed") or reward_problem(t.reward) is not None for t in trajs]
    rewards = [0.0 if bad else float(t.reward) for t, bad in zip(trajs, failed, strict=True)]
    out: dict[str, Any] = {
        "val_reward": statistics.fmean(rewards),
        "val_reward_std": statistics.pstdev(rewards),
        "val_rollouts": len(trajs),
        "val_failed": sum(1 for bad in failed if bad),
        "val_texts": [t.metadata.get("text") for t in trajs if "text" in t.metadata],
    }
    kept = [t for t, bad in zip(trajs, failed, strict=True) if not bad]
    if kept and all(isinstance(t.metadata.get("success"), bool) for t in kept):
        out["val_success"] = sum(1 for t in kept if t.metadata["success"]) / len(trajs)
    return out


def check_schedule(
    trainer: LocalTrainer,
    gateway: Any,
    tasks: Sequence[Any],
    *,
    max_staleness: int = 0,
    launch_after_step: int = 0,
    max_draws: int | None = None,
    skip_tied: float = 0.0,
) -> None:
    """Refuse what :func:`train` cannot run (its arguments of the same names), before anything
    is sampled or written: :func:`train` calls it first, ``strands-art train`` before the run
    directory holds a run.

    Raises:
        ValueError: the gateway does not sample from the trainer's backend; fewer ``tasks`` than
            the prompt batch; ``max_staleness`` negative; ``launch_after_step`` not in
            ``[0, optimizer steps per update)``, or set with ``max_staleness`` 0 or a trainer
            without a weight sync; ``max_draws`` below the prompt batch; ``skip_tied`` not in [0, 1].
    """
    if max_staleness < 0:
        raise ValueError(f"max_staleness must be >= 0, got {max_staleness}")
    if gateway.backend is not trainer.backend:
        raise ValueError("the gateway must sample from trainer.backend (the model being trained)")
    cfg = trainer.config
    if len(tasks) < cfg.prompt_batch_size:
        raise ValueError(f"prompt_batch_size={cfg.prompt_batch_size} but only {len(tasks)} tasks")
    steps_per_update = plan(cfg.prompt_batch_size * cfg.rollouts_per_prompt, trainer.batching).optimizer_steps
    if not 0 <= launch_after_step < steps_per_update:
        raise ValueError(
            f"launch_after_step must be in [0, {steps_per_update}) (the optimizer steps of one update), "
            f"got {launch_after_step}"
        )
    if max_draws is not None and max_draws < cfg.prompt_batch_size:
        raise ValueError(f"max_draws must be >= the prompt batch ({cfg.prompt_batch_size}), got {max_draws}")
    if not 0.0 <= skip_tied <= 1.0:
        raise ValueError(f"skip_tied must be a probability in [0, 1], got {skip_tied}")
    if launch_after_step and not max_staleness:
        raise ValueError(f"launch_after_step {launch_after_step} needs max_staleness >= 1 (0: synchronous)")
    if launch_after_step and trainer.weight_sync is None:
        raise ValueError(
            "launch_after_step needs a trainer with a weight_sync (a sampler of its own): a sampler "
            "sharing the trainer's model would wait for the whole update"
        )


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
    on_event: RolloutEvent | None = None,
    on_rollouts: Callable[[int, list[Trajectory]], None] | None = None,
    max_staleness: int = 0,
    launch_after_step: int = 0,
    train_executor: Executor | None = None,
    max_draws: int | None = None,
    skip_tied: float = 0.0,
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
        on_event: rollout start/end events (:func:`collect_rollouts`), for live progress.
        on_rollouts: called with ``(outer_batch, trajectories)`` before the update trains on
            them (the command stores the rows there).
        max_staleness: ``K``: the rollouts of up to K outer batches ahead run while the trainer
            updates on this one; a rollout more than K updates behind when its batch is trained
            is dropped (:mod:`strands_art.training.staleness`). 0: the synchronous loop.
        launch_after_step: ``J``: with ``max_staleness`` >= 1, launch the rollouts ahead after the
            J-th optimizer step of the update (its adapter synced to the sampler first with
            :meth:`LocalTrainer.sync_weights`); 0: before the update. An update that takes fewer
            steps (``fixed_rows`` batching with fewer rows, or none) launches them when it ends.
        train_executor: where :meth:`LocalTrainer.update` runs (default: asyncio's thread pool;
            bench/async.py passes a thread pinned to its own cores).
        max_draws: the most groups rolled out for one update (dynamic sampling,
            :mod:`strands_art.training.dynamic_sampling`); None: the prompt batch (no extra draws).
        skip_tied: the probability of skipping, before its rollouts, a task whose last group tied.

    Returns:
        All metrics records of the run (including those from before a resume).

    Raises:
        ValueError: arguments :func:`check_schedule` refuses, before anything is sampled.
        SamplerUnavailable: a rollout failed because the sampler stopped answering; nothing of
            that batch was trained, the run stands at its last checkpoint.
        CheckpointError: a checkpoint that cannot be loaded or written (damaged, outside the
            run, a full disk).
        MetricsError: ``metrics.jsonl`` holds a record the loop cannot have written.
    """
    check_schedule(trainer, gateway, tasks, max_staleness=max_staleness, launch_after_step=launch_after_step,
                   max_draws=max_draws, skip_tied=skip_tied)  # fmt: skip
    cfg = trainer.config
    steps_per_update = plan(cfg.prompt_batch_size * cfg.rollouts_per_prompt, trainer.batching).optimizer_steps
    max_draws = cfg.prompt_batch_size if max_draws is None else max_draws
    dynamic = max_draws > cfg.prompt_batch_size or skip_tied > 0
    run_dir = Path(run_dir)
    log = MetricsLog(run_dir / "metrics.jsonl")
    state = trainer.resume(run_dir)
    if state is not None:
        log.truncate_after(trainer.outer_batch)
    elif log.path.exists():  # no checkpoint: the run starts over
        log.path.unlink()
    mode = gateway.config.get("history_mode", "tree")
    history = TaskHistory()  # the groups drawn so far (the skip reads it), rebuilt from the log on resume
    for r in log.read():
        if r.get("kind") == "train":
            history.add_record(r)
    drawn: dict[int, dict[str, Any]] = {}  # outer batch -> its dynamic-sampling metrics
    eval_rollout = eval_rollout or rollout

    def emit(record: dict[str, Any]) -> None:
        log.write(record)
        if on_batch is not None:
            on_batch(record)

    pending: dict[int, asyncio.Task[tuple[list[Trajectory], float]]] = {}

    async def publish() -> None:
        """A deferred weight sync (CopySync) takes the staged adapter now, between launches."""
        staged = getattr(trainer.weight_sync, "publish", None)
        if staged is not None:
            await asyncio.to_thread(staged)

    eval_seconds = [0.0]  # evaluations since the last train record (left out of its e2e_s)

    async def run_eval() -> None:
        if eval_tasks is None:
            return
        t_eval = time.perf_counter()
        try:
            await _run_eval()
        finally:
            eval_seconds[0] += time.perf_counter() - t_eval

    async def _run_eval() -> None:
        if pending:  # the rollouts ahead finish on their policy first; then evaluate the newest one
            await asyncio.wait(list(pending.values()))
        await publish()
        t0 = time.perf_counter()
        res = await evaluate(
            gateway, eval_tasks, eval_rollout, cfg.eval_sampling, cfg.eval_samples, seed=cfg.seed,
            tag=trainer.outer_batch, concurrency=cfg.concurrency, progress=progress, on_event=on_event,
        )  # fmt: skip
        emit({"kind": "eval", "outer_batch": trainer.outer_batch, "step": trainer.step, **res,
              "eval_s": time.perf_counter() - t0})  # fmt: skip

    done_here = 0

    async def collect(b: int) -> tuple[list[Trajectory], float]:
        t0 = time.perf_counter()
        if dynamic:
            return await collect_dynamic(b), time.perf_counter() - t0
        trajs = await collect_rollouts(
            gateway, sample_tasks(tasks, cfg.prompt_batch_size, cfg.seed, b), rollout, cfg.sampling,
            cfg.rollouts_per_prompt, seed=cfg.seed, outer_batch=b, concurrency=cfg.concurrency,
            progress=progress, on_event=on_event,
        )  # fmt: skip
        return trajs, time.perf_counter() - t0

    async def collect_dynamic(b: int) -> list[Trajectory]:
        """Waves of groups until the prompt batch has signal or ``max_draws`` are drawn
        (:class:`~strands_art.training.dynamic_sampling.Draws`); exactly the prompt batch is kept."""
        first = sample_tasks(tasks, cfg.prompt_batch_size, cfg.seed, b)
        draws = Draws(cfg.prompt_batch_size, max_draws, skip_tied, cfg.seed, b,
                      candidate_order(tasks, first, cfg.seed, b), history)  # fmt: skip
        while wave := draws.next_wave():
            trajs = await collect_rollouts(
                gateway, wave, rollout, cfg.sampling, cfg.rollouts_per_prompt, seed=cfg.seed, outer_batch=b,
                concurrency=cfg.concurrency, progress=progress, on_event=on_event,
                first_index=len(draws.drawn_groups),
            )  # fmt: skip
            draws.add(wave, trajs, cfg.rollouts_per_prompt)
            if draws.done():
                break
        for name, rewards in draws.drawn_groups.items():
            history.add(name, rewards)
        drawn[b] = draws.metrics()
        return draws.batch()

    def launch(batches: list[int]) -> None:
        for a in batches:
            pending[a] = asyncio.create_task(collect(a))

    launch_syncs: list[float] = []  # seconds of the step-J syncs of the current update

    def launch_after(j: int, batches: list[int], loop: asyncio.AbstractEventLoop) -> Callable[[int], None]:
        """``LocalTrainer.update``'s ``on_step``: after step ``j``, in the trainer's thread, hand the
        adapter to the sampler (a deferred sync is published here, before the trainer's next step
        can stage another), then launch ``batches`` in the event loop. Its callbacks run in the order
        they were scheduled, so the launch is in ``pending`` before the update's result arrives."""

        def on_step(k: int) -> None:
            if k != j or closing:
                return
            t0 = time.perf_counter()
            trainer.sync_weights()
            staged = getattr(trainer.weight_sync, "publish", None)
            if staged is not None:
                staged()
            launch_syncs.append(time.perf_counter() - t0)
            loop.call_soon_threadsafe(lambda: None if closing else launch(batches))

        return on_step

    async def eval_if_due() -> None:
        """Evaluate after ``trainer.outer_batch`` batches if one is due there (before training,
        every ``eval_every``, at the end) and the log lacks it (a crash between the checkpoint
        and the evaluation loses nothing)."""
        ob = trainer.outer_batch
        if not (ob == 0 or ob == outer_batches or (cfg.eval_every and ob % cfg.eval_every == 0)):
            return
        if not any(r.get("kind") == "eval" and r["outer_batch"] == ob for r in log.read()):
            await run_eval()

    closing = (
        False  # set on the way out: a step-J hook still running in the trainer's thread launches nothing
    )
    try:
        await eval_if_due()
        t_batch = time.perf_counter()  # e2e_s: wall time since the last train record (or the start)
        eval_seconds[0] = 0.0
        while trainer.outer_batch < outer_batches:
            if stop_after is not None and done_here >= stop_after:
                logger.info("stopping after %d outer batches (stop_after)", done_here)
                return log.read()
            b = trainer.outer_batch
            if b not in pending:
                await publish()
                pending[b] = asyncio.create_task(collect(b))
            t_wait = time.perf_counter()
            trajs, rollout_s = await pending.pop(b)
            check_sampler(trajs, f"outer batch {b}")  # nothing of this batch is trained or kept
            waited_s = time.perf_counter() - t_wait
            # up to max_staleness batches ahead run while this one trains (0: none)
            ahead = [a for a in range(b + 1, min(b + 1 + max_staleness, outer_batches)) if a not in pending]
            on_step = None
            launch_syncs.clear()
            if ahead and launch_after_step:
                on_step = launch_after(launch_after_step, ahead, asyncio.get_running_loop())
            else:
                await publish()
                launch(ahead)
            dropped = drop_stale(trajs, trainer.step, steps_per_update, max_staleness) if max_staleness else 0
            if on_rollouts is not None:
                on_rollouts(b, trajs)
            if train_executor is None:
                metrics = await asyncio.to_thread(trainer.update, trajs, on_step)
            else:
                metrics = await asyncio.get_running_loop().run_in_executor(
                    train_executor, trainer.update, trajs, on_step
                )
            if any(a not in pending for a in ahead):  # fewer steps than launch_after_step: launch now
                await publish()
                launch([a for a in ahead if a not in pending])
            record = {"kind": "train", "outer_batch": b, **metrics, "step": trainer.step,
                      "rollout_s": rollout_s, "history_mode": mode}  # fmt: skip
            if b in drawn:
                record.update(drawn.pop(b))
            if max_staleness:
                record.update(stale_dropped=dropped, rollout_wait_s=waited_s, max_staleness=max_staleness,
                              launch_after_step=launch_after_step)  # fmt: skip
            if launch_after_step:
                record["launch_sync_s"] = sum(launch_syncs)
            now = time.perf_counter()
            record["e2e_s"] = now - t_batch - eval_seconds[0]
            t_batch, eval_seconds[0] = now, 0.0
            emit(record)
            done_here += 1
            last = trainer.outer_batch >= outer_batches
            if cfg.checkpoint_every and (trainer.outer_batch % cfg.checkpoint_every == 0 or last):
                await asyncio.to_thread(trainer.save, run_dir)
            await eval_if_due()
        await eval_if_due()  # a resume after the last checkpoint, before the final evaluation
        if progress:
            tqdm.write(f"browse the run: {view_command(run_dir)}")
        return log.read()
    finally:
        closing = True
        for task in pending.values():  # a stop or an error: rollouts still in flight are abandoned
            task.cancel()
        if pending:
            await asyncio.gather(*pending.values(), return_exceptions=True)
