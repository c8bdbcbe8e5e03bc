"""One ``strands-art train`` run, end to end: model, sampler, trainer, loop, metrics sinks.

:func:`run_training` is what the command and ``examples/train.ipynb`` call. It

1. refuses a run directory that already holds a run unless ``resume`` (then reads the run's own
   ``train.json``: a resumed run trains with the settings it started with), builds the
   environment and checks its tasks against the settings (:func:`check_tasks`); a resumed run
   with nothing left to do returns its result here, without a model (:func:`finished_result`);
2. seeds torch with ``seed`` (the LoRA initialization), loads the model and tokenizer
   (:mod:`strands_art.registry`), builds the sampler (``transformers``: the trainer's own model;
   with ``max_staleness`` >= 1 a second in-process copy, :class:`~strands_art.training.local_sync.CopySync`;
   ``vllm``: a server started with :class:`~strands_art.backends.vllm_server.VLLMServer`, or the
   one at ``vllm_url``, with :class:`~strands_art.training.weight_sync.LoRASync`);
3. asks the environment for its gateway, and runs :func:`strands_art.training.loop.train`
   (``max_staleness`` 0: synchronous; K >= 1: the rollouts of the next K outer batches run
   during the update, :mod:`strands_art.training.staleness`);
4. writes ``metrics.jsonl`` (the loop), TensorBoard events, optionally W&B, and the rows of every
   outer batch (``rows/ob-NNNNNN.jsonl``: one line per rollout, its rows as ``Row.to_dict``).

The run directory::

    RUN_DIR/train.json         the resolved settings (TrainSettings)
    RUN_DIR/command.txt        the command line that reproduces them
    RUN_DIR/code.jsonl         the code each process that trained it ran (:mod:`.provenance`)
    RUN_DIR/metrics.jsonl      one record per outer batch and per evaluation
    RUN_DIR/tensorboard/       event files (tensorboard --logdir RUN_DIR/tensorboard)
    RUN_DIR/rows/              the trained rows, one file per outer batch (with ``--ray``, each
                               line also names the Ray node and worker pid of its rollout), and
                               beside each the rows as trained (``ob-NNNNNN.trained.parquet``)
    RUN_DIR/trajectories/      every rollout, training and held-out (:mod:`.run_store`)
    RUN_DIR/checkpoints/       LoRA adapter + optimizer + RNG (resume point)
    RUN_DIR/env/               the environment's own files (workspaces, logs)
    RUN_DIR/.lock              held (``flock``) while a process trains the run: a second
                               ``train`` on it stops at once (:func:`.run_files.hold_run_dir`)

This module never imports the gateway or an environment: the environment's ``gateway`` factory
builds the gateway, its ``rollout`` drives the agent.

Over 450 lines as one job: a training run's life (setup, resume, rows, result) around
:func:`run_training`; each helper is short and used here only. The run directory's own files,
lock and checks are :mod:`.run_files`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strands_art.store import open_new
from strands_art.training import checkpoint
from strands_art.training.environment import EnvOptions, TrainEnvironment, resolve_environment
from strands_art.training.loop import check_schedule, train
from strands_art.training.metrics import MetricsLog
from strands_art.training.phases import PROGRESS_EVERY_S, Phases
from strands_art.training.progress import LiveProgress, TensorBoardSink, WandbSink, record_line
from strands_art.training.provenance import record_start, start_line
from strands_art.training.run_files import (  # noqa: F401  (RunDirError: what arun_training raises)
    RunDirError,
    forget_start,
    hold_run_dir,
    prepare_run_dir,
)
from strands_art.training.run_store import RunStore
from strands_art.training.settings import TrainSettings
from strands_art.trajectory import Trajectory
from strands_art.validation import UsageError

logger = logging.getLogger(__name__)


@dataclass
class RunResult:
    """What a finished (or stopped) run leaves: its directory, records and final step."""

    run_dir: Path
    records: list[dict[str, Any]]
    step: int
    outer_batch: int

    @property
    def adapter(self) -> Path | None:
        """The newest checkpoint's adapter file (None without a checkpoint)."""
        ck = checkpoint.latest_checkpoint(self.run_dir)
        return None if ck is None else ck / checkpoint.ADAPTER_FILE


def env_options(settings: TrainSettings) -> EnvOptions:
    return EnvOptions(
        train_tasks=Path(settings.train_tasks) if settings.train_tasks else None,
        eval_tasks=Path(settings.eval_tasks) if settings.eval_tasks else None,
        max_turns=settings.max_turns,
        work_dir=Path(settings.run_dir) / "env",
        prompt=settings.prompt,
        history_mode=settings.history_mode,
    )


def check_tasks(settings: TrainSettings, env: TrainEnvironment) -> None:
    """``--prompt-batch`` within the environment's training tasks: each outer batch trains on that
    many distinct tasks (:func:`~strands_art.training.loop.sample_tasks`). Checked once the
    environment is built, before a model loads.

    Raises:
        UsageError: naming ``--prompt-batch`` and where the tasks come from.
    """
    have = len(env.train_tasks)
    if settings.prompt_batch > have:
        where = f"--train-tasks {settings.train_tasks}" if settings.train_tasks else f"--env {settings.env}"
        raise UsageError(
            f"--prompt-batch {settings.prompt_batch} but {where} has only {have} training "
            f"task{'' if have == 1 else 's'}: each outer batch trains on --prompt-batch distinct tasks; "
            f"pass --prompt-batch {have} or fewer"
        )


def finished_result(
    run_dir: Path, settings: TrainSettings, kept: list[dict[str, Any]], env: TrainEnvironment
) -> RunResult | None:
    """The result of a resumed run that has nothing left to do (its newest checkpoint covers every
    outer batch and, with held-out tasks, the last evaluation is in ``kept``), read from its files
    without loading a model; None when the run has work left."""
    ck = checkpoint.latest_checkpoint(run_dir)
    if ck is None:
        return None
    state = checkpoint.read_state(ck)
    done = state["outer_batch"]
    if done < settings.outer_batches:
        return None
    if env.eval_tasks and not any(r.get("kind") == "eval" and r.get("outer_batch") == done for r in kept):
        return None
    return RunResult(run_dir=run_dir, records=kept, step=state["step"], outer_batch=done)


def print_line(record: dict[str, Any]) -> None:
    """Print :func:`~strands_art.training.progress.record_line` of a metrics record to stderr
    (``progress=False`` without ``on_batch``: the command's ``--no-progress``)."""
    print(record_line(record), file=sys.stderr, flush=True)


def heartbeats(phases: Phases) -> threading.Event:
    """Call ``phases.heartbeat()`` from a daemon thread every few seconds (an update blocks the
    loop that carries the rollout events) until the returned event is set."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(PROGRESS_EVERY_S / 6):
            phases.heartbeat()

    threading.Thread(target=beat, daemon=True, name="strands-art-progress").start()
    return stop


def print_phase(line: str) -> None:
    """Print a phase change (:meth:`~strands_art.training.phases.Phases.line`) to stderr."""
    print(line, file=sys.stderr, flush=True)


async def check_server(url: str, backend: Any) -> None:
    """``GET /v1/models`` on the ``--vllm-url`` server before anything samples from it, so an
    unreachable or non-vLLM server stops the run with its reason instead of every rollout
    failing (the migrate command checks the same way).

    Raises:
        RuntimeError: naming ``--vllm-url`` and the backend's error (BackendError, BackendTimeout).
    """
    from strands_art.backends.base import BackendError

    try:
        await backend.models()
    except BackendError as exc:
        raise RuntimeError(f"--vllm-url {url}: the vLLM server is not usable: {exc}") from exc


def check_history_mode(wanted: str | None, gateway: Any) -> None:
    """``--history-mode``: the environment's gateway must capture in that mode.

    Raises:
        ValueError: the gateway's ``config["history_mode"]`` is another (a factory that does not
            read :attr:`EnvOptions.history_mode`), naming the flag.
    """
    got = (getattr(gateway, "config", None) or {}).get("history_mode", "tree")
    if wanted is not None and got != wanted:
        raise ValueError(
            f"--history-mode {wanted}: the environment's gateway captures in {got} mode (its factory does "
            "not read EnvOptions.history_mode)"
        )


def write_rows(run_dir: Path, outer_batch: int, trajectories: list[Trajectory]) -> None:
    """``rows/ob-NNNNNN.jsonl``: one line per rollout (id, group, reward, failure, rows), atomically."""
    d = run_dir / "rows"
    d.mkdir(exist_ok=True)
    lines = [
        json.dumps(
            {
                "rollout_id": t.rollout_id,
                "group_id": t.group_id,
                "reward": t.reward,
                "failed": t.metadata.get("failed", False),
                "rows": [r.to_dict() for r in t.rows],
                # --ray: the Ray node and worker process that ran the rollout
                **{k: t.metadata[k] for k in ("ray_node", "ray_pid") if k in t.metadata},
            }
        )
        for t in trajectories
    ]
    path = d / f"ob-{outer_batch:06d}.jsonl"
    tmp = path.with_suffix(".tmp")
    with open_new(tmp) as f:  # never through a symlink planted at the temporary name
        f.write("".join(x + "\n" for x in lines).encode("utf-8"))
    os.replace(tmp, path)


def _done(run_dir: Path) -> int:
    """Outer batches the newest checkpoint covers (0 without one)."""
    ck = checkpoint.latest_checkpoint(run_dir)
    return 0 if ck is None else checkpoint.read_state(ck)["outer_batch"]


def kept_records(run_dir: Path) -> list[dict[str, Any]]:
    """The metrics a resume keeps: those the newest checkpoint covers (the loop drops the rest).

    Raises:
        CheckpointError: the newest checkpoint is damaged or outside the run (each file is read
            and checked here, before any model is loaded).
        MetricsError: ``metrics.jsonl`` holds a record the loop cannot have written.
    """
    log = MetricsLog(run_dir / "metrics.jsonl")
    ck = checkpoint.latest_checkpoint(run_dir)
    if ck is None:
        return []
    done = checkpoint.read_checkpoint(ck)["state"]["outer_batch"]  # every file checked before the model loads
    log.truncate_after(done)
    return log.read()


def _load(
    settings: TrainSettings, run_dir: Path, stack: contextlib.ExitStack, max_model_len: int | None = None
) -> tuple[Any, Any]:
    """(tokenizer, LocalTrainer) on the settings' model and sampler (a vLLM server started here
    gets ``max_model_len``, the environment's context budget; None: the server's default)."""
    import torch

    from strands_art.registry import causal_lm_dir, load_causal_lm, load_tokenizer
    from strands_art.training.local import LocalTrainer

    if settings.threads:
        torch.set_num_threads(settings.threads)
    cfg = settings.trainer_config()
    from strands_art.model_cache import ModelNotFound

    try:
        tok = load_tokenizer(settings.model)
        model = load_causal_lm(settings.model)
    except ModelNotFound as exc:
        raise ModelNotFound(f"--model {settings.model}: {exc}") from exc
    torch.manual_seed(settings.seed)  # the LoRA initialization (a checkpoint replaces it on resume)
    if settings.backend == "transformers":
        if settings.max_staleness == 0:  # the sampler shares the trainer's model
            return tok, LocalTrainer(model, tok, cfg)
        from strands_art.training.local_sync import CopySync
        from strands_art.training.lora import lora_model

        peft_model = lora_model(model, cfg)  # the sampler samples from its own copy (local_sync)
        return tok, LocalTrainer(peft_model, tok, cfg, weight_sync=CopySync(peft_model, tok))
    from strands_art.backends.vllm import VLLMBackend
    from strands_art.training.weight_sync import LoRASync

    url = settings.vllm_url
    if url is None:
        from strands_art.backends.vllm_server import VLLMServer

        flags = ["--enable-lora", "--max-lora-rank", str(settings.lora_rank), "--max-loras", "2"]
        server = VLLMServer(
            causal_lm_dir(settings.model),
            settings.model,
            dtype=settings.sampler_dtype,
            extra_args=flags,
            env={"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"},
            log_path=run_dir / "vllm-server.log",
            **({"max_model_len": max_model_len} if max_model_len else {}),
        )
        stack.enter_context(server)
        url = server.base_url
    backend = VLLMBackend(url, settings.model)
    sync = LoRASync(backend, run_dir / "adapters", max_lora_rank=settings.lora_rank, run=f"s{settings.seed}")
    stack.callback(sync.close, unload=True)
    return tok, LocalTrainer(model, tok, cfg, weight_sync=sync)


def _rollout_fn(settings: TrainSettings, env: TrainEnvironment, stack: contextlib.ExitStack) -> Any:
    """The environment's rollout function, or with ``--ray`` one that runs it as Ray tasks
    (:mod:`strands_art.training.ray_rollouts`; a local cluster it starts is shut down at the end)."""
    if settings.ray is None:
        return env.rollout
    from strands_art.training.ray_rollouts import RayRollout, connect

    if connect(settings.ray, slots=settings.concurrency, resources=env.ray_resources):
        import ray

        stack.callback(ray.shutdown)
    return RayRollout(settings.env, env_options(settings), settings.model, env.ray_resources)


def run_training(settings: TrainSettings, **kwargs: Any) -> RunResult:
    """:func:`arun_training` in a new event loop (the command); same arguments."""
    return asyncio.run(arun_training(settings, **kwargs))


async def arun_training(
    settings: TrainSettings,
    *,
    resume: bool = False,
    env: TrainEnvironment | None = None,
    progress: bool = True,
    stop_after: int | None = None,
    on_batch: Callable[[dict[str, Any]], None] | None = None,
    loaded: tuple[Any, Any] | None = None,
) -> RunResult:
    """Run (or resume) the training ``settings`` describe; see the module docstring. A notebook
    awaits this one (its kernel already runs an event loop).

    Args:
        settings: the run's settings (``settings.run_dir`` is the run directory).
        resume: continue the run in ``settings.run_dir`` from its newest checkpoint.
        env: the environment (default: resolved from ``settings.env``).
        progress: the rich live panel (stderr, when it is a terminal; on a pipe one line per
            phase change and, at most every 30 s, as the phase's rollouts end,
            :mod:`strands_art.training.phases`); off, the same lines and one per metrics record on stderr
            (:func:`~strands_art.training.progress.record_line`) unless ``on_batch`` is given.
        stop_after: stop after this many outer batches in this call (as a crash would).
        on_batch: also called with each metrics record.
        loaded: ``(tokenizer, LocalTrainer)`` already built, used instead of loading the settings'
            model and sampler (a model in memory; the bench miniature's scripted sampler). The
            trainer's configuration must be ``settings.trainer_config()``.

    Raises:
        RunDirError, EnvironmentSpecError, ValueError: before any model is loaded (``--ray``
            settings it cannot run: before anything is written); ``--prompt-batch`` above the
            environment's training tasks (:func:`check_tasks`).
        RuntimeError: ``--wandb`` without wandb installed.
        ModelNotFound, OSError, …: the model, sampler or gateway failed to start, or the loop
            refused them (:func:`~strands_art.training.loop.check_schedule`). A fresh run that
            stops with any of these before the loop starts has its ``train.json``,
            ``command.txt``, ``code.jsonl``, ``.lock`` and ``tensorboard/`` removed first (:func:`forget_start`),
            so the corrected command runs into the same directory.
    """
    if settings.ray is not None:  # refused before anything is written
        from strands_art.training.ray_rollouts import check_settings

        check_settings(settings.ray, settings.backend, settings.max_staleness)
    run_dir = Path(settings.run_dir)
    prepare_run_dir(run_dir, resume)
    with hold_run_dir(run_dir):
        if not resume:  # another process may have started a run here before the lock was ours
            prepare_run_dir(run_dir, resume)
        return await _run_locked(settings, run_dir, resume, env, progress, stop_after, on_batch, loaded)


async def _run_locked(
    settings: TrainSettings,
    run_dir: Path,
    resume: bool,
    env: TrainEnvironment | None,
    progress: bool,
    stop_after: int | None,
    on_batch: Callable[[dict[str, Any]], None] | None,
    loaded: tuple[Any, Any] | None,
) -> RunResult:
    """:func:`arun_training` once the run directory's lock is held. Everything up to the loop's
    start is checked or built first; a fresh run that stops there is forgotten (:func:`forget_start`)."""
    # a damaged checkpoint or metrics.jsonl: refused here, before anything is written
    kept = kept_records(run_dir) if resume else []
    batches: dict[int, list[Trajectory]] = {}
    # the code that trains from here, read before the model loads (code.jsonl, written once the
    # process has rollouts or a record: a resume refused on its checkpoint leaves the run as it was)
    code = await asyncio.to_thread(start_line, resume, _done(run_dir) if resume else 0)
    with contextlib.ExitStack() as stack:
        try:
            env = env or resolve_environment(settings.env, env_options(settings))
            check_tasks(settings, env)
            finished = finished_result(run_dir, settings, kept, env) if resume else None
            if finished is not None:  # nothing to train or evaluate: no model to load
                return finished
            sinks: list[Any] = [TensorBoardSink(run_dir)]
            stack.callback(sinks[0].close)
            if settings.wandb:
                sinks.append(WandbSink(run_dir, settings.to_dict()))
                stack.callback(sinks[-1].close)
            if not resume:
                settings.save(run_dir)
                (run_dir / "command.txt").write_text(settings.command() + "\n", encoding="utf-8")
            elif settings.outer_batches > TrainSettings.load(run_dir).outer_batches:
                settings.save(run_dir)  # extended (--outer-batches): what a later --resume continues
            sinks[0].replay(kept)
            store = RunStore(run_dir)  # every rollout, for the viewer; a resume drops what it redoes
            store.reconcile(
                _done(run_dir) if resume else 0, {r["outer_batch"] for r in kept if r.get("kind") == "eval"}
            )
            started = time.monotonic()
            lines = not (progress and sys.stderr.isatty()) and (progress or on_batch is None)
            if lines:  # the first phase, before the minutes a model takes to load
                print_phase(f"[    0s] starting: loading {settings.model} and the {settings.backend} sampler")
            rollout = store.wrap(_rollout_fn(settings, env, stack))  # --ray: the cluster first
            tok, trainer = loaded or _load(settings, run_dir, stack, env.max_context_tokens)
            if loaded is not None and trainer.config != settings.trainer_config():
                raise ValueError("loaded: the trainer's configuration is not the settings' trainer_config()")
            trainer.trace = {}  # the rows as trained (rows/ob-NNNNNN.trained.parquet)
            if settings.vllm_url is not None:  # the user's server: reachable, or no run at all
                await check_server(settings.vllm_url, trainer.backend)
            gateway = env.gateway(tok, trainer.backend)
            check_history_mode(settings.history_mode, gateway)
            check_schedule(
                trainer, gateway, env.train_tasks, max_staleness=settings.max_staleness,
                launch_after_step=settings.launch_after_step, max_draws=settings.max_draws,
                skip_tied=settings.skip_tied,
            )  # fmt: skip
            store.history_mode = gateway.config.get("history_mode")
        except BaseException:
            if not resume:  # nothing was trained: leave the directory as a fresh run can use it
                forget_start(run_dir)
            raise
        size = (settings.outer_batches, settings.prompt_batch * settings.rollouts_per_prompt)
        kw = dict(eval_total=len(env.eval_tasks or []) * settings.eval_samples,
                  checkpoint_every=trainer.config.checkpoint_every, resumed_at=_done(run_dir) if resume else None,
                  started=started,
                  most_per_batch=(settings.max_draws or settings.prompt_batch) * settings.rollouts_per_prompt)  # fmt: skip
        watcher: LiveProgress | Phases | None = None
        if progress and sys.stderr.isatty():
            watcher = stack.enter_context(LiveProgress(*size, **kw))
        elif lines:  # a pipe, or --no-progress: a line per phase change and as its rollouts end
            watcher = Phases(*size, **kw, on_change=print_phase, every=PROGRESS_EVERY_S)
            stack.callback(heartbeats(watcher).set)
            if watcher.resumed_line():
                print_phase(watcher.resumed_line())
            if on_batch is None:  # and per record (a caller with on_batch shows records its way)
                on_batch = print_line

        unrecorded = [code]  # written with the process's first rollouts or record: it trained the run

        def note_code() -> None:
            if unrecorded:
                try:
                    record_start(run_dir, unrecorded.pop())
                except OSError as exc:  # advisory: a loaded run is not given up for it
                    logger.warning("%s not written: %s", run_dir / "code.jsonl", exc)

        def on_rollouts(b: int, trajs: list[Trajectory]) -> None:
            note_code()
            if watcher is not None:
                watcher.on_rollouts(b)
            write_rows(run_dir, b, trajs)
            store.add(trajs, "train", b)
            batches[b] = trajs

        def emit(record: dict[str, Any]) -> None:
            note_code()
            if record.get("kind") == "train" and record.get("outer_batch") in batches:
                try:
                    store.write_trained(record["outer_batch"], batches.pop(record["outer_batch"]),
                                        trainer.trace or {}, trainer.config.grpo)  # fmt: skip
                except OSError as exc:
                    logger.warning(
                        "rows as trained of outer batch %s not written: %s", record["outer_batch"], exc
                    )
            for sink in sinks:
                sink.write(record)
            if on_batch is not None:
                on_batch(record)
            if watcher is not None:  # after the record's line: a checkpoint phase follows it
                watcher.on_record(record)

        records = await train(
            trainer, gateway, env.train_tasks, rollout, settings.outer_batches, run_dir,
            eval_tasks=env.eval_tasks or None, stop_after=stop_after, progress=False, on_batch=emit,
            on_event=watcher.on_event if watcher is not None else None,
            on_rollouts=on_rollouts,
            max_staleness=settings.max_staleness, launch_after_step=settings.launch_after_step,
            max_draws=settings.max_draws, skip_tied=settings.skip_tied,
        )  # fmt: skip
        close = getattr(trainer.backend, "aclose", None)
        if close is not None:
            await close()
    return RunResult(run_dir=run_dir, records=records, step=trainer.step, outer_batch=trainer.outer_batch)
