"""One MigrationBench rollout: the policy (backend, gateway, Strands provider), the agent in a fresh
workspace, the guarded evaluation and the record :mod:`.runner` commits (``results.jsonl``).

Used by the in-process runner (:mod:`.runner`), the Ray workers (:mod:`.ray_runner`) and the
training/verl episodes (:mod:`.episodes`); it never touches the run directory's bookkeeping.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.progress import Progress
from strands.types.exceptions import ModelThrottledException

from strands_art.backends.base import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    InvalidSample,
    SamplingBackend,
    SamplingParams,
)
from strands_art.envs.migrationbench.agent.agent import (
    COMPACT_SYSTEM_PROMPT,
    SYSTEM_PROMPT,
    RolloutLimits,
    build_agent,
    run_agent,
    user_prompt,
)
from strands_art.envs.migrationbench.agent.toolenv import prepare_tool_env
from strands_art.envs.migrationbench.agent.tools import ToolStats
from strands_art.envs.migrationbench.config import RolloutConfig
from strands_art.envs.migrationbench.evaluate.evalguard import guarded_evaluation, one_line, reason_of
from strands_art.envs.migrationbench.run.edits import edited_files
from strands_art.envs.migrationbench.run.progress import LiveBoard, RolloutProgress
from strands_art.envs.migrationbench.run.rundir import (
    WORKSPACES_DIR,
)
from strands_art.envs.migrationbench.tasks.tasks import Task
from strands_art.envs.migrationbench.workspace import Workspace
from strands_art.store import TrajectoryStore
from strands_art.training.grpo import rows_as_trained
from strands_art.turn_cut import TRUNCATED

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


def make_backend(args: argparse.Namespace) -> tuple[SamplingBackend, Any]:
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


def make_policy(args: argparse.Namespace, backend_factory: BackendFactory | None = None):
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

    backend, tokenizer = (backend_factory or make_backend)(args)
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
    from strands_art.envs.migrationbench.evaluate.evalcache import cache_for_run, cached_evaluate_command

    if not isinstance(config, RolloutConfig):
        raise TypeError(
            f"run_rollout takes a RolloutConfig (strands_art.envs.migrationbench.config), got "
            f"{type(config).__name__}; build one with runner_args.rollout_config(args)"
        )
    t0 = time.monotonic()
    unsafe, compact = config.unsafe_no_sandbox, config.compact_prompt
    ws = Workspace.for_task(spec.task.dir, base_dir=run_dir / WORKSPACES_DIR)
    try:
        tool_env = prepare_tool_env(
            ws, unsafe_no_sandbox=unsafe, offline_env=getattr(spec.task, "offline_env", None)
        )
        setup_s = time.monotonic() - t0  # the workspace copy and the sandbox's tool environment
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
        if infrastructure_failure(end.error):
            # the sampling backend failed: not a result of the policy. Nothing is scored or
            # stored; the record says failed, and --resume runs the rollout again.
            if gateway is not None:
                gateway.close_session(spec.rollout_id)
            record = base_record(
                spec, end, gateway, NOT_EVALUATED | {"tests_required": spec.task.num_test_cases}
            )
            return record | {"failed": True, "times": {"wall_s": round(time.monotonic() - t0, 3)}}
        t_agent = time.monotonic()
        log_dir = run_dir / "logs"
        log_dir.mkdir(exist_ok=True)
        evaluation, scored = await asyncio.to_thread(
            guarded_evaluation,
            functools.partial(
                cached_evaluate_command,  # one real evaluation per distinct tree (.evalcache)
                str(ws.root),
                str(spec.task.dir),
                timeout_s=config.build_timeout,
                cache=cache_for_run(run_dir),
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
            record = base_record(spec, end, gateway, evaluation)
            return record | {"failed": True, "times": {"wall_s": round(time.monotonic() - t0, 3)}}
        reward = float(evaluation["reward"])
        record = base_record(spec, end, gateway, evaluation)
        cached = (evaluation.get("details") or {}).get("eval_cache")
        if isinstance(cached, dict):  # .evalcache: this verdict was a stored one (hit) or evaluated now
            record["eval_cache_hit"] = bool(cached.get("hit"))
        times = {"tools_s": stats.tools_s, "maven_s": stats.maven_s + eval_s, "evaluation_s": eval_s,
                 "setup_s": setup_s}  # fmt: skip
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
                # what GRPO trains by default: truncated answers and cut tails out of the loss
                trained_tokens=sum(sum(r.loss_mask) for r in rows_as_trained(traj.rows)),
                truncated_turns=sum(1 for t in traj.turns if TRUNCATED in t.tags),
                cut_turns=len(traj.metadata.get("cut_turns") or ()),
                forks=sum(1 for e in traj.events if e["kind"] in ("fork", "reset")),
                ill_formed_turns=len(traj.metadata.get("ill_formed_turns", [])),
                recovered_calls=sum(len(r["how"]) for r in traj.metadata.get("recovered_calls", [])),
            )
        try:  # the audit of what the agent changed (not part of the reward)
            record["edited_files"] = await asyncio.to_thread(edited_files, spec.task.dir / "repo", ws.root)
        except Exception as exc:  # noqa: BLE001 - an audit of hostile files never fails the rollout
            record["edited_files_error"] = one_line(exc)
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


def base_record(spec: RolloutSpec, end: Any, gateway: Any, evaluation: dict[str, Any]) -> dict[str, Any]:
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


def crashed_record(spec: RolloutSpec, exc: Exception, gateway: Any) -> dict[str, Any]:
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


def infrastructure_failure(error: str | None) -> bool:
    """The rollout ended because the sampling backend failed, not because of the policy: ARTModel
    raises Strands' ``ModelThrottledException`` for BackendUnavailable/BackendTimeout (after
    Strands' retries) and any other BackendError (InvalidSample, a rejection) as is."""
    return bool(error) and error.startswith(_BACKEND_FAILURES)


_BACKEND_FAILURES = tuple(
    f"{cls.__name__}:"
    for cls in (ModelThrottledException, BackendError, InvalidSample, BackendTimeout, BackendUnavailable)
)
