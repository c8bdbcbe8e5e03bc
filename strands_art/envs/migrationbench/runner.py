"""``strands-art migrate``: the migration agent over a set of tasks, scored by real Maven builds.

For every task × rollout: copy the task's repository into a fresh workspace, run the Strands
migration agent (:mod:`.agent`) through :class:`~strands_art.model.ARTModel` and the rollout gateway
(or a hosted model through Strands' ``LiteLLMModel``, with no token capture), evaluate the result
(:mod:`.evaluator`), attach the reward to the trajectory and persist it.

A run directory holds::

    config.json        the arguments of the run
    results.jsonl      one line per finished rollout (task, reward, details, turns, rows, tokens, times)
    trajectories/      the trajectory store (JSONL + Parquet rows with rewards)
    summary.png        rewards and rows per rollout
    live.json          the rollouts in flight, for ``strands-art view`` (while the run is on)
    logs/              <rollout>.eval.json: the evaluator's result (details incl. the Maven log tail)
    workspaces/        the running rollouts' workspaces (mode 0700)
    .lock              the run-directory lock

Completed rollouts are appended as they finish, so a crash or Ctrl-C keeps them and
``--resume RUN_DIR`` runs only the missing ones; :mod:`.rundir` makes each rollout count
exactly once whatever the kill point, and lets one process at a time use the directory.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from strands.types.exceptions import ModelThrottledException

from strands_art.backends.base import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    InvalidSample,
    SamplingBackend,
    SamplingParams,
)
from strands_art.registry import ModelNotFound
from strands_art.store import TrajectoryStore
from strands_art.validation import UsageError

from .agent import COMPACT_SYSTEM_PROMPT, SYSTEM_PROMPT, RolloutLimits, build_agent, run_agent, user_prompt
from .config import RolloutConfig
from .evalguard import guarded_evaluation, one_line, reason_of
from .progress import LiveBoard, RolloutProgress
from .report import plot_run, print_summary
from .rundir import (
    LIVE_FILE,
    WORKSPACES_DIR,
    RunDir,
    RunDirBusy,
    open_run_dir,
    read_config,
    run_token,
    write_atomic,
)
from .runner_args import resolve_defaults, rollout_config, validate_migrate_args
from .tasks import Task, TaskError, load_tasks, materialize_record, read_records
from .toolenv import prepare_tool_env
from .tools import ToolStats
from .workspace import Workspace, remove_base_if_empty

logger = logging.getLogger(__name__)


@dataclass
class RolloutSpec:
    task: Task
    index: int  # rollout index within the task (GRPO group member)
    seed: int

    @property
    def rollout_id(self) -> str:
        return f"{self.task.name}-r{self.index}"


BackendFactory = Callable[[argparse.Namespace], "tuple[SamplingBackend, Any]"]
"""``(args) -> (sampling backend, tokenizer)``: how :func:`run_migration` gets its policy backend.

The default builds the ``--backend transformers|vllm`` backend; tests inject a
:class:`~strands_art.backends.scripted.ScriptedBackend` here, so the run still goes through
``ARTModel`` and the gateway exactly as with a real model."""


def _make_backend(args: argparse.Namespace) -> tuple[SamplingBackend, Any]:
    """The ``--backend llamacpp|transformers|vllm`` sampling backend and its tokenizer."""
    if args.backend == "vllm":
        from strands_art.backends.vllm import VLLMBackend

        return VLLMBackend(args.base_url, args.model), args.tokenizer or args.model
    from strands_art.backends import local_backend

    backend, tokenizer = local_backend(
        args.model,
        args.backend,
        context_tokens=args.max_context_tokens or 8192,
        parallel=max(1, args.concurrency),
        threads=getattr(args, "threads", None),
    )
    return backend, args.tokenizer or tokenizer


def _make_policy(args: argparse.Namespace, backend_factory: BackendFactory | None = None):
    """(gateway or None, a function making the Strands model for one rollout)."""
    if args.backend == "litellm":
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        from strands.models.litellm import LiteLLMModel

        def litellm_model(spec: RolloutSpec) -> Any:
            # drop_params: providers without a `seed` (or `top_p`) ignore it instead of failing
            client_args: dict[str, Any] = {"drop_params": True}
            if args.base_url:
                client_args["api_base"] = args.base_url
            params = {
                "temperature": args.temperature,
                "top_p": args.top_p,
                "max_tokens": args.max_new_tokens,
                "seed": spec.seed,
            }
            return LiteLLMModel(client_args=client_args, model_id=args.model, params=params)

        return None, litellm_model

    from strands_art.gateway import RolloutGateway
    from strands_art.model import ARTModel

    backend, tokenizer = (backend_factory or _make_backend)(args)
    config: dict[str, Any] = {"history_mode": args.history_mode}
    if args.max_context_tokens:
        config["max_context_tokens"] = args.max_context_tokens
    gateway = RolloutGateway(tokenizer, backend, **config)

    def art_model(spec: RolloutSpec) -> Any:
        sampling = SamplingParams(
            temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.max_new_tokens, seed=spec.seed
        )
        gateway.open_session(spec.rollout_id, spec.task.name, sampling)
        return ARTModel(
            gateway=gateway, session_id=spec.rollout_id, group_id=spec.task.name, model_id=args.model
        )

    return gateway, art_model


async def run_rollout(
    spec: RolloutSpec,
    config: RolloutConfig,
    gateway: Any,
    make_model: Any,
    run_dir: Path,
    progress: Progress | None = None,
    board: LiveBoard | None = None,
) -> dict:
    """One rollout end to end; returns its results.jsonl record (never raises for agent failures).

    Args:
        spec: the task, the rollout's index in its group and its seed.
        config: the limits, the sandbox opt-out and the prompt (:class:`.config.RolloutConfig`,
            validated when built).
        gateway: the rollout gateway (or None for a hosted model without token capture); its
            ``close_session`` is called once with the reward.
        make_model: ``spec -> Strands model`` (opens the gateway session when there is one).
        run_dir: where ``workspaces/``, ``logs/`` and ``trajectories/`` go.

    The workspace is made under ``run_dir/workspaces`` and removed at the end.

    Raises:
        TypeError: ``config`` is not a RolloutConfig (e.g. the argparse Namespace of old callers).
    """
    from .evaluator import evaluate_command

    if not isinstance(config, RolloutConfig):
        raise TypeError(
            f"run_rollout takes a RolloutConfig (strands_art.envs.migrationbench.config), got "
            f"{type(config).__name__}; build one with runner_args.rollout_config(args)"
        )
    t0 = time.monotonic()
    unsafe, compact = config.unsafe_no_sandbox, config.compact_prompt
    ws = Workspace.for_task(spec.task.dir, base_dir=run_dir / WORKSPACES_DIR)
    try:
        tool_env = prepare_tool_env(ws, unsafe_no_sandbox=unsafe)
        stats = ToolStats()
        limits = RolloutLimits(max_turns=config.max_turns, time_limit_s=config.time_limit)
        model = make_model(spec)
        row = RolloutProgress(progress, spec.rollout_id, board) if progress is not None else None
        agent = build_agent(
            model,
            ws,
            spec.task.record,
            limits=limits,
            stats=stats,
            env=tool_env.env,
            extra_path=tool_env.extra_path,
            sandbox=tool_env.sandbox,
            unsafe_no_sandbox=unsafe,
            command_timeout_s=config.command_timeout,
            max_output_bytes=config.max_output_bytes,
            system_prompt=COMPACT_SYSTEM_PROMPT if compact else SYSTEM_PROMPT,
            hooks=[row] if row is not None else (),
        )
        try:
            end = await run_agent(
                agent, user_prompt(ws, spec.task.record, compact=compact, recipe=config.user_recipe), limits
            )
        finally:
            if row is not None:
                row.close()
        if _infrastructure_failure(end.error):
            # the sampling backend failed: not a result of the policy. Nothing is scored or
            # stored; the record says failed, and --resume runs the rollout again.
            if gateway is not None:
                gateway.close_session(spec.rollout_id)
            record = _base_record(
                spec, end, gateway, NOT_EVALUATED | {"tests_required": spec.task.num_test_cases}
            )
            return record | {"failed": True, "times": {"wall_s": round(time.monotonic() - t0, 3)}}
        t_agent = time.monotonic()
        log_dir = run_dir / "logs"
        log_dir.mkdir(exist_ok=True)
        evaluation, scored = await asyncio.to_thread(
            guarded_evaluation,
            functools.partial(
                evaluate_command,
                str(ws.root),
                str(spec.task.dir),
                timeout_s=config.build_timeout,
                scratch_dir=run_dir / WORKSPACES_DIR,  # a killed run's build scratch goes with its workspaces
                unsafe_no_sandbox=unsafe,
            ),
            tests_required=spec.task.num_test_cases,
        )
        (log_dir / f"{spec.rollout_id}.eval.json").write_text(json.dumps(evaluation, indent=2))
        eval_s = time.monotonic() - t_agent
        if not scored:  # the host failed twice (evalguard): not a result of the policy, runs again
            if gateway is not None:
                gateway.close_session(spec.rollout_id)
            record = _base_record(spec, end, gateway, evaluation)
            return record | {"failed": True, "times": {"wall_s": round(time.monotonic() - t0, 3)}}
        reward = float(evaluation["reward"])
        record = _base_record(spec, end, gateway, evaluation)
        times = {"tools_s": stats.tools_s, "maven_s": stats.maven_s + eval_s, "evaluation_s": eval_s}
        if gateway is not None:
            traj = gateway.close_session(spec.rollout_id, reward)
            traj.metadata.update(
                {
                    "task": spec.task.name,
                    "seed": spec.seed,
                    "stop_reason": end.reason,
                    "evaluation": evaluation,
                }
            )
            TrajectoryStore(run_dir / "trajectories").append(traj)
            sample_s = sum(t.timings.get("sample", 0.0) for t in traj.turns)
            times["sampling_s"] = sample_s
            times["gateway_s"] = sum(t.timings.get("total", 0.0) for t in traj.turns) - sample_s
            record.update(
                rows=len(traj.rows),
                tokens=traj.num_tokens,
                sampled_tokens=sum(r.num_sampled for r in traj.rows),
                forks=sum(1 for e in traj.events if e["kind"] in ("fork", "reset")),
                ill_formed_turns=len(traj.metadata.get("ill_formed_turns", [])),
                recovered_calls=sum(len(r["how"]) for r in traj.metadata.get("recovered_calls", [])),
            )
        times["wall_s"] = time.monotonic() - t0
        record["times"] = {k: round(v, 3) for k, v in times.items()}
        record["tool_stats"] = stats.to_dict()
        return record
    finally:
        ws.cleanup()


EVAL_FIELDS = (
    "reward",
    "build_success",
    "java17_bytecode",
    "tests_run",
    "tests_required",
    "tests_equivalent",
)
NOT_EVALUATED = {
    "reward": 0.0,
    "build_success": False,
    "java17_bytecode": False,
    "tests_run": 0,
    "tests_equivalent": False,
}


def _base_record(spec: RolloutSpec, end: Any, gateway: Any, evaluation: dict[str, Any]) -> dict[str, Any]:
    """The results.jsonl fields every rollout has: identity, the evaluator's verdict, how it ended."""
    return {
        "rollout_id": spec.rollout_id,
        "task": spec.task.name,
        "index": spec.index,
        "seed": spec.seed,
        **{k: evaluation[k] for k in EVAL_FIELDS},
        **({"evaluation_error": evaluation["evaluation_error"]} if "evaluation_error" in evaluation else {}),
        "stop_reason": end.reason,
        "error": end.error,
        "turns": end.model_calls,
        "token_capture": gateway is not None,
    }


def _crashed_record(spec: RolloutSpec, exc: Exception, gateway: Any) -> dict[str, Any]:
    """The results.jsonl record of a rollout that raised outside the evaluation (evaluation
    failures are scored by :mod:`.evalguard`): not scored, ``failed``, so ``--resume`` reruns it."""
    logger.error("rollout %s failed: %s", spec.rollout_id, one_line(exc), exc_info=exc)
    if gateway is not None:
        with contextlib.suppress(Exception):
            gateway.close_session(spec.rollout_id)
    return {
        "rollout_id": spec.rollout_id,
        "task": spec.task.name,
        "index": spec.index,
        "seed": spec.seed,
        **NOT_EVALUATED,
        "tests_required": spec.task.num_test_cases,
        "stop_reason": "error",
        "error": one_line(exc),
        "rollout_error": {"reason": reason_of(exc), "message": one_line(exc)},
        "turns": 0,
        "token_capture": gateway is not None,
        "failed": True,
        "times": {"wall_s": 0.0},
    }


def _infrastructure_failure(error: str | None) -> bool:
    """The rollout ended because the sampling backend failed, not because of the policy: ARTModel
    raises Strands' ``ModelThrottledException`` for BackendUnavailable/BackendTimeout (after
    Strands' retries) and any other BackendError (InvalidSample, a rejection) as is."""
    return bool(error) and error.startswith(_BACKEND_FAILURES)


_BACKEND_FAILURES = tuple(
    f"{cls.__name__}:"
    for cls in (ModelThrottledException, BackendError, InvalidSample, BackendTimeout, BackendUnavailable)
)


async def run_migration(
    args: argparse.Namespace, console: Console, *, backend_factory: BackendFactory | None = None
) -> list[dict]:
    """Run every missing rollout of the configuration; returns all results (old and new).

    Args:
        args: the ``strands-art migrate`` options (:mod:`.runner_args`). With ``args.resume``
            the saved ``config.json`` of that run directory replaces them.
        console: where the progress bar and the summary table go.
        backend_factory: overrides how the sampling backend is built (not for ``litellm``);
            default: from ``--backend``/``--model``.

    The run directory is locked for the whole run and reconciled first (:mod:`.rundir`): a
    second process on it stops with RunDirBusy; a dead run's processes and workspaces are removed;
    each rollout is counted once.

    Raises:
        UsageError: a value out of range or inconsistent options (nothing is written).
        RunDirBusy: another process holds the run directory.
        TaskError: unknown task names or a malformed task directory.
    """
    run_dir = Path(args.resume or args.run_dir or f"runs/migrate-{datetime.now():%Y%m%d-%H%M%S}")
    cfg_path = run_dir / "config.json"
    if args.resume:
        if not cfg_path.is_file():
            raise UsageError(f"--resume {run_dir}: no config.json there (not a migrate run)")
        for key, value in read_config(cfg_path).items():
            if key not in ("resume", "run_dir"):
                setattr(args, key, value)
    resolve_defaults(args)
    validate_migrate_args(args)
    if run_dir.exists() and not run_dir.is_dir():
        raise UsageError(f"--run-dir {run_dir}: exists and is not a directory")
    # read and check the tasks (or records) before anything is written
    tasks: list[Task] | list[dict[str, Any]]
    tasks = read_records(args.records) if args.records else load_tasks(args.tasks_dir, args.tasks)
    await _preflight(args, backend_factory)
    rd = open_run_dir(run_dir)
    try:
        with run_token(rd.token, rd.workspaces):
            return await _run(args, console, backend_factory, rd, tasks)
    finally:
        rd.close()


async def _preflight(args: argparse.Namespace, backend_factory: BackendFactory | None) -> None:
    """What can fail outside this process, checked before anything is written: the tokenizer
    loads (``--tokenizer``, or the vLLM model's), and a vLLM server answers ``/v1/models``.

    Raises:
        UsageError: naming the tokenizer or the server and why.
    """
    from strands_art.registry import load_tokenizer

    if args.backend == "litellm":
        return
    if args.tokenizer or args.backend == "vllm":
        name = args.tokenizer or args.model
        try:
            load_tokenizer(name)
        except ModelNotFound as exc:
            raise UsageError(f"--tokenizer {name}: {exc}") from None
    if args.backend == "vllm" and backend_factory is None:
        from strands_art.backends.vllm import VLLMBackend

        backend = VLLMBackend(args.base_url, args.model, max_retries=0)
        try:
            await backend.models()
        except BackendError as exc:
            raise UsageError(f"the vLLM server is not usable: {exc}") from None
        finally:
            await backend.aclose()


async def _run(
    args: argparse.Namespace,
    console: Console,
    backend_factory: BackendFactory | None,
    rd: RunDir,
    tasks: list[Task] | list[dict[str, Any]],
) -> list[dict]:
    run_dir, cfg_path = rd.path, rd.path / "config.json"
    write_atomic(cfg_path, json.dumps({k: v for k, v in vars(args).items() if k != "func"}, indent=2))
    args.run_dir_used = str(run_dir)
    if args.records:  # clone each record's repository into the run directory
        tasks = [materialize_record(r, run_dir / "tasks") for r in tasks]
    specs = [
        RolloutSpec(task, k, args.seed + i * args.rollouts_per_task + k)
        for i, task in enumerate(tasks)
        for k in range(args.rollouts_per_task)
    ]
    results_path = run_dir / "results.jsonl"
    done = rd.report.done
    todo = [s for s in specs if s.rollout_id not in done]
    console.print(
        f"run dir [bold]{run_dir}[/bold]: {len(specs)} rollouts over {len(tasks)} tasks, "
        f"{len(done)} already done, backend {args.backend} ({args.model}), {args.history_mode} capture"
    )
    if todo:
        config = rollout_config(args)
        _check_sandbox(args, console)
        with console.status("loading the model"):
            gateway, make_model = _make_policy(args, backend_factory)
        if gateway is not None and hasattr(gateway.backend, "models"):  # vLLM: fail fast, before any rollout
            try:
                await gateway.backend.models()
            except BackendError as exc:
                await gateway.backend.aclose()
                raise SystemExit(f"strands-art migrate: the vLLM server is not usable: {exc}") from None
        sem = asyncio.Semaphore(max(1, args.concurrency))
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        board = LiveBoard(run_dir / LIVE_FILE)  # the rollouts in flight, for strands-art view
        with Progress(*columns, console=console) as progress:
            bar = progress.add_task("rollouts", total=len(todo))

            async def one(spec: RolloutSpec) -> None:
                async with sem:
                    try:
                        rec = await run_rollout(spec, config, gateway, make_model, run_dir, progress, board)
                    except UsageError:
                        raise
                    except Exception as exc:  # noqa: BLE001 - one rollout never ends the run
                        rec = _crashed_record(spec, exc, gateway)
                with open(results_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(rec) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
                done[spec.rollout_id] = rec
                progress.advance(bar)
                calls = sum((rec.get("tool_stats") or {}).get("calls", {}).values())
                progress.console.print(
                    f"{spec.rollout_id}: reward {rec['reward']:.1f} ({rec['stop_reason']}, "
                    f"{rec['turns']} turns, {calls} tool calls, {rec['times']['wall_s']:.0f} s)"
                )

            try:
                await asyncio.gather(*(one(s) for s in todo))
            finally:
                board.close()
        remove_base_if_empty(run_dir / WORKSPACES_DIR)
        if gateway is not None:
            await gateway.backend.aclose()
    results = [done[s.rollout_id] for s in specs if s.rollout_id in done]
    print_summary(results, console)
    if not args.no_plot and results:
        path = plot_run(results, run_dir / "summary.png")
        console.print(f"plot: {path}")
    console.print(f"results: {results_path}")
    from strands_art.invocation import view_command

    console.print(f"browse it: {view_command(run_dir)}", markup=False, highlight=False)
    return results


def _check_sandbox(args: argparse.Namespace, console: Console) -> None:
    """Fail closed before any rollout: the sandbox works, or the user opted out loudly."""
    from strands_art.envs.sandbox import SandboxUnavailable, require_sandbox

    if getattr(args, "unsafe_no_sandbox", False):
        console.print(
            "[bold red]--unsafe-no-sandbox: agent commands and evaluation builds run WITHOUT a sandbox, "
            "with this process's privileges[/bold red]"
        )
        return
    try:
        require_sandbox()
    except SandboxUnavailable as exc:
        raise SystemExit(f"strands-art migrate: {exc}") from None


LOG_WIDTH = 160
"""Console width when stdout is not a terminal (rich would wrap at 80 columns; a numeric
``$COLUMNS`` wins)."""


def main_from_args(args: argparse.Namespace, *, backend_factory: BackendFactory | None = None) -> int:
    """Entry point of ``strands-art migrate``; returns the process exit code: 0, 2 (bad options or
    tasks), 3 (some rollouts failed because the backend or the host failed: not scored, ``--resume``
    reruns them), 130 (Ctrl-C)."""
    console = Console()
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console.width = LOG_WIDTH  # a log or a pipe: no 80-column wrapping of the table
    try:
        results = asyncio.run(run_migration(args, console, backend_factory=backend_factory))
    except KeyboardInterrupt:
        run_dir = getattr(args, "run_dir_used", None) or "RUN_DIR"
        console.print(
            f"[yellow]interrupted: completed rollouts are kept; continue with --resume {run_dir}[/yellow]"
        )
        return 130
    except (TaskError, ModelNotFound, UsageError, RunDirBusy) as exc:
        print(f"strands-art migrate: {exc}", file=sys.stderr)  # one line, never wrapped
        return 2
    failed = [r["rollout_id"] for r in results if r.get("failed")]
    if failed:
        console.print(
            f"[red]{len(failed)} rollout(s) failed because the sampling backend or the host failed "
            f"({', '.join(failed)}); they are not scored; rerun them with --resume {args.run_dir_used}[/red]"
        )
        return 3
    return 0
