"""``strands-art train --env migrationbench``: GRPO on MigrationBench task directories.

``--train-tasks DIR`` and ``--eval-tasks DIR`` take any directory of task directories in the
bundled format (``task.json`` + ``repo/``, :func:`~strands_art.envs.migrationbench.tasks.tasks.load_tasks`):
the bundled tasks, or those a task generator wrote. Without ``--train-tasks`` the bundled tasks
are used; without ``--eval-tasks`` there is no held-out evaluation. Each rollout is the Strands
migration agent (:func:`~strands_art.envs.migrationbench.run.episodes.migrationbench_rollout`: fresh workspace,
sandboxed shell and editor tools, real Maven evaluation, reward 0 / 0.5 / 1.0) in linear history
mode (``--history-mode tree`` for the tree capture), its evaluation logs under ``RUN_DIR/env/rollouts``.
"""

from __future__ import annotations

import logging
from typing import Any

from strands_art.envs.migrationbench.config import PROMPTS, SMALL_MODEL_LIMITS, RolloutConfig
from strands_art.envs.migrationbench.evaluate.verify import failed_checks
from strands_art.envs.migrationbench.run.episodes import migrationbench_rollout
from strands_art.envs.migrationbench.run.ray_runner import SANDBOX_RESOURCE
from strands_art.envs.migrationbench.run.settings_env import check_env_settings
from strands_art.envs.migrationbench.tasks.tasks import TaskError, load_tasks
from strands_art.gateway import RolloutGateway
from strands_art.training.environment import EnvOptions, TrainEnvironment
from strands_art.validation import UsageError, listed

logger = logging.getLogger(__name__)
DEFAULTS: dict[str, Any] = {
    "model": "qwen2.5-coder-0.5b",
    "outer_batches": 4,
    "prompt_batch": 1,
    "rollouts_per_prompt": 4,
    "ppo_mini_batch": 1,
    "lr": 1e-4,
    "temperature": 0.7,
    "max_new_tokens": 512,
    "max_turns": 20,
    "prompt": "full",  # recorded in train.json: a resume that restates --prompt full is the run's
    "micro_batch_tokens": 8192,
    "concurrency": 2,
}
MAX_CONTEXT_TOKENS = 16384
"""The gateway's context budget for a rollout (prompt + all turns)."""


def train_environment(options: EnvOptions) -> TrainEnvironment:
    """MigrationBench tasks from ``options.train_tasks`` (default: bundled) and ``options.eval_tasks``.

    Each rollout runs with the :class:`RolloutConfig` of ``--max-turns`` and ``--prompt``
    (:data:`.config.PROMPTS`, as ``strands-art migrate --prompt``; default ``full``), the same object
    ``strands-art migrate`` and verl's agent loop build. The compact prompts are the small-model
    setting and take its limits too (:data:`.config.SMALL_MODEL_LIMITS`: 600 s per rollout, 4,000
    bytes of shell output kept per command), as ``migrate`` does on llama.cpp, so a training run
    and the base success table of ``bench/migration_base.py`` roll out alike; ``full`` keeps the
    class defaults.

    Raises:
        TaskError: a tasks directory that does not exist, holds no task or a malformed one
            (:func:`.tasks.load_tasks`), or a generated task whose ``make-tasks`` check failed
            (:func:`.verify.failed_checks`; one never checked is only warned about). Held-out tasks that are training tasks too are refused by
            :meth:`TrainEnvironment.check` (``resolve_environment`` calls it), as for every
            environment; ``make-tasks --split eval`` draws seeds disjoint from ``--split train``.
        UsageError: ``--max-turns`` out of range (named ``max_turns``), or a ``--prompt`` that is
            not one of :data:`.config.PROMPTS`; ``STRANDS_ART_EVAL_CACHE`` or
            ``STRANDS_ART_MAVEN_MEMO`` unusable (:func:`.settings_env.check_env_settings`).
    """
    config = rollout_config(options.max_turns, options.prompt)
    check_env_settings(options.work_dir / "rollouts")
    train = load_tasks(options.train_tasks)
    held = load_tasks(options.eval_tasks) if options.eval_tasks else []
    failed, unchecked = failed_checks((t.name, t.record) for t in [*train, *held])
    if failed:
        raise TaskError(
            f"{len(failed)} task(s) failed their make-tasks check (untouched must score 0.0, the "
            f"reference 1.0; task.json generated.check says why): {listed(failed)}"
        )
    if unchecked:
        logger.warning(
            "%d generated task(s) were never checked (make-tasks --no-verify, or stopped before "
            "them); their rewards are unproven: %s",
            len(unchecked),
            listed(unchecked),
        )
    return TrainEnvironment(
        name="migrationbench",
        train_tasks=train,
        eval_tasks=held,
        rollout=migrationbench_rollout(config, run_dir=options.work_dir / "rollouts"),
        gateway=lambda tokenizer, backend: RolloutGateway(
            tokenizer,
            backend,
            history_mode=options.history_mode or "linear",
            max_context_tokens=MAX_CONTEXT_TOKENS,
        ),
        defaults=DEFAULTS,
        ray_resources={SANDBOX_RESOURCE: 1},
        max_context_tokens=MAX_CONTEXT_TOKENS,
    )


def rollout_config(max_turns: int | None, prompt: str | None) -> RolloutConfig:
    """The rollout settings of ``--max-turns`` (None: :data:`DEFAULTS`) and ``--prompt`` (None: ``full``).

    Raises:
        UsageError: see :func:`train_environment`.
    """
    name = prompt or "full"
    if name not in PROMPTS:
        raise UsageError(f"--prompt must be one of {', '.join(PROMPTS)}, got {prompt!r}")
    limits = {k: v for k, v in SMALL_MODEL_LIMITS.items() if k != "max_turns"} if name != "full" else {}
    return RolloutConfig(max_turns=max_turns or DEFAULTS["max_turns"], **limits, **PROMPTS[name])
