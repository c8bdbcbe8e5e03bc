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
import json
import logging
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from strands_art.backends.base import (
    BackendError,
)
from strands_art.envs.migrationbench.run.progress import LiveBoard
from strands_art.envs.migrationbench.run.report import plot_run, print_summary
from strands_art.envs.migrationbench.run.rollout import (  # noqa: F401 - RolloutSpec, run_rollout: public here too
    BackendFactory,
    RolloutSpec,
    crashed_record,
    infrastructure_failure,
    make_policy,
    run_rollout,
)
from strands_art.envs.migrationbench.run.rundir import (
    LIVE_FILE,
    WORKSPACES_DIR,
    RunDir,
    RunDirBusy,
    check_free,
    open_run_dir,
    read_config,
    run_token,
    write_atomic,
)
from strands_art.envs.migrationbench.run.runner_args import (
    resolve_defaults,
    rollout_config,
    validate_migrate_args,
)
from strands_art.envs.migrationbench.run.settings_env import check_env_settings
from strands_art.envs.migrationbench.tasks.tasks import (
    Task,
    TaskError,
    load_tasks,
    materialize_record,
    read_records,
)
from strands_art.envs.migrationbench.workspace import remove_base_if_empty
from strands_art.registry import ModelNotFound
from strands_art.validation import UsageError

logger = logging.getLogger(__name__)


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
        UsageError: a value out of range or inconsistent options, or a ``--run-dir`` that holds a
            run already without ``--resume`` (nothing is written).
        RunDirBusy: another process holds the run directory.
        TaskError: unknown task names or a malformed task directory.
    """
    run_dir = Path(args.resume or args.run_dir or f"runs/migrate-{datetime.now():%Y%m%d-%H%M%S}")
    cfg_path = run_dir / "config.json"
    if args.resume:
        if not cfg_path.is_file():
            raise UsageError(f"--resume {run_dir}: no config.json there (not a migrate run)")
        saved = read_config(cfg_path)
        unknown = sorted(k for k in saved if not hasattr(args, k) or k == "func")
        if unknown:  # a hand-edited or foreign config: its keys would be set and silently unused
            raise UsageError(
                f"--resume {run_dir}: {cfg_path} holds keys migrate does not know: "
                f"{', '.join(repr(k)[:60] for k in unknown[:5])}; remove them to resume"
            )
        for key, value in saved.items():
            if key not in ("resume", "run_dir"):
                setattr(args, key, value)
        if "prompt" not in saved:  # a run from before --prompt: its backend's default, not the CLI's
            args.prompt = None
    resolve_defaults(args)
    validate_migrate_args(args)
    if run_dir.exists() and not run_dir.is_dir():
        raise UsageError(f"--run-dir {run_dir}: exists and is not a directory")
    check_env_settings(run_dir)
    if not args.resume and cfg_path.is_file():  # its results were made with its own settings
        raise UsageError(
            f"--run-dir {run_dir} holds a migrate run already: `--resume {run_dir}` continues it with its "
            "own settings; a new --run-dir takes new ones"
        )
    check_free(run_dir)  # a second --resume of a running run stops here, not after Ray has started
    # read and check the tasks (or records) before anything is written
    tasks: list[Task] | list[dict[str, Any]]
    tasks = read_records(args.records) if args.records else load_tasks(args.tasks_dir, args.tasks)
    await _preflight(args, backend_factory)
    if getattr(args, "ray", None):
        from strands_art.envs.migrationbench.run.ray_runner import connect

        connect(args.ray, slots=max(1, args.concurrency))  # before anything is written
    try:
        rd = open_run_dir(run_dir)
    except OSError as exc:  # a damaged run directory (a FIFO results.jsonl, a symlink planted...)
        raise UsageError(f"--run-dir {run_dir}: {exc}") from None
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
        cluster = None
        if getattr(args, "ray", None):  # rollouts on Ray workers; the model and sandbox live there
            from strands_art.envs.migrationbench.run.ray_runner import RayRollouts

            gateway, make_model, cluster = None, None, RayRollouts(args, backend_factory, run_dir)
        else:
            _check_sandbox(args, console)
            with console.status("loading the model"):
                gateway, make_model = make_policy(args, backend_factory)
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
                        if cluster is not None:
                            rec = await cluster.run(spec)
                        else:
                            rec = await run_rollout(
                                spec, config, gateway, make_model, run_dir, progress, board
                            )
                    except UsageError:
                        raise
                    except Exception as exc:  # noqa: BLE001 - one rollout never ends the run
                        rec = crashed_record(spec, exc, gateway)
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
                if cluster is not None:
                    cluster.sweep_nodes()
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
