"""``strands-art train --env migrationbench``: GRPO on MigrationBench task directories.

``--train-tasks DIR`` and ``--eval-tasks DIR`` take any directory of task directories in the
bundled format (``task.json`` + ``repo/``, :func:`~strands_art.envs.migrationbench.tasks.load_tasks`):
the bundled tasks, or those a task generator wrote. Without ``--train-tasks`` the bundled tasks
are used; without ``--eval-tasks`` there is no held-out evaluation. Each rollout is the Strands
migration agent (:func:`~strands_art.envs.migrationbench.episodes.migrationbench_rollout`: fresh workspace,
sandboxed shell and editor tools, real Maven evaluation, reward 0 / 0.5 / 1.0) in linear history
mode, its evaluation logs under ``RUN_DIR/env/rollouts``.
"""

from __future__ import annotations

from typing import Any

from strands_art.envs.migrationbench.config import RolloutConfig
from strands_art.envs.migrationbench.episodes import migrationbench_rollout
from strands_art.envs.migrationbench.ray_runner import SANDBOX_RESOURCE
from strands_art.envs.migrationbench.tasks import load_tasks
from strands_art.gateway import RolloutGateway
from strands_art.training.environment import EnvOptions, TrainEnvironment

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
    "micro_batch_tokens": 8192,
    "concurrency": 2,
}
MAX_CONTEXT_TOKENS = 16384
"""The gateway's context budget for a rollout (prompt + all turns)."""


def train_environment(options: EnvOptions) -> TrainEnvironment:
    """MigrationBench tasks from ``options.train_tasks`` (default: bundled) and ``options.eval_tasks``.

    Each rollout runs with ``RolloutConfig(max_turns=...)`` (:mod:`.config`; the other limits at
    their defaults), the same object ``strands-art migrate`` and verl's agent loop build.

    Raises:
        TaskError: a tasks directory that does not exist or holds a malformed task.
        UsageError: ``--max-turns`` out of range (named ``max_turns``).
    """
    train = load_tasks(options.train_tasks)
    held = load_tasks(options.eval_tasks) if options.eval_tasks else []
    config = RolloutConfig(max_turns=options.max_turns or DEFAULTS["max_turns"])
    return TrainEnvironment(
        name="migrationbench",
        train_tasks=train,
        eval_tasks=held,
        rollout=migrationbench_rollout(config, run_dir=options.work_dir / "rollouts"),
        gateway=lambda tokenizer, backend: RolloutGateway(
            tokenizer, backend, history_mode="linear", max_context_tokens=MAX_CONTEXT_TOKENS
        ),
        defaults=DEFAULTS,
        ray_resources={SANDBOX_RESOURCE: 1},
    )
