"""``strands-art train --env capitals``: the one-word capital task (:mod:`strands_art.training.tasks_toy`).

One user turn, one sampled reply (:func:`~strands_art.training.rollouts.chat_rollout`), reward
``1 / words`` when the reply names the capital (0 for a reply cut at the token limit). The
defaults are the settings ``bench/learning.py`` chose by measurement (5 of 5 seeds improved,
docs/training-tasks.md), with truncated replies trained (``--train-truncated``): the reward
itself scores the cut, so the overlong filtering the trainer applies by default does not apply.
"""

from __future__ import annotations

from typing import Any

from strands_art.gateway import RolloutGateway
from strands_art.training.environment import EnvOptions, TrainEnvironment
from strands_art.training.rollouts import chat_rollout
from strands_art.training.tasks_toy import capital_tasks

DEFAULTS: dict[str, Any] = {
    "model": "smollm2",
    "outer_batches": 10,
    "prompt_batch": 2,
    "rollouts_per_prompt": 6,
    "ppo_mini_batch": 1,
    "lr": 7e-4,
    "temperature": 1.0,
    "max_new_tokens": 10,
    "eval_samples": 4,
    "eval_temperature": 1.0,
    # its reward is 0 for a reply cut at the token limit: the cut is the failure this task
    # teaches against (and these settings were measured training it), not a noisy reward
    "train_truncated": True,
}


def train_environment(options: EnvOptions) -> TrainEnvironment:
    """The capital task: 24 training countries, 8 held-out ones (``--train-tasks``/``--eval-tasks``,
    ``--max-turns`` and ``--prompt`` do not apply and are refused)."""
    if options.train_tasks or options.eval_tasks or options.max_turns or options.prompt:
        raise ValueError(
            "--env capitals has its own tasks, prompt and one turn: "
            "no --train-tasks/--eval-tasks/--max-turns/--prompt"
        )
    return TrainEnvironment(
        name="capitals",
        train_tasks=capital_tasks("train"),
        eval_tasks=capital_tasks("heldout"),
        rollout=chat_rollout,
        gateway=lambda tokenizer, backend: RolloutGateway(
            tokenizer, backend, history_mode=options.history_mode or "tree"
        ),  # one turn: one row either way
        defaults=DEFAULTS,
    )
