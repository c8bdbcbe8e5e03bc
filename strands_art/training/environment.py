"""What ``strands-art train`` needs from an environment, and how ``--env`` finds one.

An environment is a factory ``make(options: EnvOptions) -> TrainEnvironment``. The training side
never imports an environment or the gateway (docs/training.md, "Your own environment"): the
factory hands it

- ``train_tasks`` / ``eval_tasks``: sequences of tasks, each with a ``name`` (the GRPO group id;
  ``eval_tasks`` is the held-out set, never trained on, empty for none);
- ``rollout``: a :data:`~strands_art.training.rollouts.RolloutFn`,
  ``async (gateway, task, rollout_id, group_id, sampling) -> Trajectory``, which opens the session,
  drives the agent through :class:`~strands_art.model.ARTModel` on that gateway, scores the
  episode and closes the session with its reward (``gateway.close_session(rollout_id, reward)``);
- ``gateway``: ``(tokenizer, backend) -> gateway``, builds the rollout gateway the rollouts run
  on (history mode, context limit: the environment's choice);
- ``defaults``: recommended settings (``{"model": "smollm2", "lr": 7e-4, ...}``, keys named as
  the command's options with ``_`` for ``-``), used where the command line gives none;
- ``ray_resources`` (optional): custom Ray resources each rollout asks for under ``train --ray``
  (:mod:`strands_art.training.ray_rollouts`, whose workers build the environment from ``--env``).

``--env NAME`` resolves a bundled environment (:data:`BUILTIN`), ``--env package.module:function``
any importable factory.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strands_art.training.rollouts import RolloutFn
from strands_art.validation import listed

BUILTIN: dict[str, str] = {
    "capitals": "strands_art.envs.capitals:train_environment",
    "lookup": "strands_art.envs.lookup:train_environment",
    "migrationbench": "strands_art.envs.migrationbench.run.train_env:train_environment",
}
"""Bundled environments: ``--env`` name -> ``module:function``."""


class EnvironmentSpecError(ValueError):
    """``--env`` names nothing loadable, or the factory returned something unusable."""


@dataclass(frozen=True)
class EnvOptions:
    """What the command passes to an environment factory.

    Attributes:
        train_tasks: ``--train-tasks`` (a directory or file of the environment's tasks), or None
            for the environment's own.
        eval_tasks: ``--eval-tasks``, likewise.
        max_turns: ``--max-turns`` (model calls per rollout), None for the environment's default.
        work_dir: a directory the environment may write to (logs, workspaces): ``RUN_DIR/env``.
        prompt: ``--prompt`` (the name of one of the environment's prompt settings), or None for
            its default; an environment without such settings refuses one.
        history_mode: ``--history-mode`` (``"tree"`` or ``"linear"``), the capture mode of the
            gateway the environment builds, or None for the environment's own choice. The command
            checks the gateway it gets and refuses a run whose gateway captures otherwise.
    """

    train_tasks: Path | None = None
    eval_tasks: Path | None = None
    max_turns: int | None = None
    work_dir: Path = Path("env")
    prompt: str | None = None
    history_mode: str | None = None


@dataclass
class TrainEnvironment:
    """An environment as the training command sees it (see the module docstring)."""

    name: str
    train_tasks: Sequence[Any]
    eval_tasks: Sequence[Any]
    rollout: RolloutFn
    gateway: Callable[[Any, Any], Any]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    ray_resources: Mapping[str, float] = field(default_factory=dict)
    """Custom Ray resources each rollout asks for under ``train --ray`` (e.g. MigrationBench's
    ``{"strands_art_sandbox": 1}``: nodes with the sandbox, JDK and Maven repository)."""
    max_context_tokens: int | None = None
    """Tokens one rollout's context may reach (prompt + every turn; the gateway's budget): the
    vLLM server the command starts is given it as ``--max-model-len`` (None: 4,096)."""

    def check(self) -> None:
        """Raise :class:`EnvironmentSpecError` for no training task, a task without a ``name``,
        task names that repeat within a split (they are the GRPO group ids), or a held-out task
        whose name is a training task's too (held-out success would measure what was trained on)."""
        if not self.train_tasks:
            raise EnvironmentSpecError(f"environment {self.name!r} has no training task")
        for kind, tasks in (("training", self.train_tasks), ("held-out", self.eval_tasks)):
            names = [getattr(t, "name", None) for t in tasks]
            if any(not isinstance(n, str) or not n for n in names):
                raise EnvironmentSpecError(f"environment {self.name!r}: a {kind} task has no string `name`")
            if len(set(names)) != len(names):
                raise EnvironmentSpecError(f"environment {self.name!r}: {kind} task names repeat")
        both = sorted({t.name for t in self.train_tasks} & {t.name for t in self.eval_tasks})
        if both:
            raise EnvironmentSpecError(
                f"environment {self.name!r}: held-out tasks are also training tasks: {listed(both)} "
                "(held-out tasks must not be trained on)"
            )


def resolve_environment(spec: str, options: EnvOptions) -> TrainEnvironment:
    """The environment ``spec`` names (a :data:`BUILTIN` name or ``module:function``), built.

    Raises:
        EnvironmentSpecError: unknown name, a module or function that cannot be imported, a name
            that is not callable, a factory that raises or exits (other than ValueError, RuntimeError
            or OSError, which pass through with their own message), one that does not return a
            :class:`TrainEnvironment`, or one that fails its check.
    """
    target = BUILTIN.get(spec, spec)
    if ":" not in target:
        raise EnvironmentSpecError(
            f"unknown environment {spec!r}: use one of {', '.join(BUILTIN)} or module:function"
        )
    module_name, _, attr = target.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise EnvironmentSpecError(f"cannot load environment {spec!r}: {exc}") from exc
    if not callable(factory):
        raise EnvironmentSpecError(
            f"environment {spec!r}: {target} is a {type(factory).__name__}, not a function of EnvOptions "
            "returning a TrainEnvironment"
        )
    try:
        env = factory(options)
    except (ValueError, RuntimeError, OSError):  # the factory's own refusals carry their message
        raise
    except (Exception, SystemExit) as exc:  # SystemExit: `--env builtins:exit` exited 1 silently
        raise EnvironmentSpecError(
            f"environment factory {target} raised {type(exc).__name__}: {str(exc)[:300]}"
        ) from exc
    if not isinstance(env, TrainEnvironment):
        raise EnvironmentSpecError(
            f"environment factory {target} returned {type(env).__name__}, not a TrainEnvironment"
        )
    env.check()
    return env
