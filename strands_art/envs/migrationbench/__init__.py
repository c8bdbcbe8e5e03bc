"""MigrationBench: a Strands agent migrates a Java 8 Maven project to Java 17, rewarded by real,
sandboxed Maven builds (docs/migrationbench.md).

The package's parts, each a folder that imports only the parts listed below it
(``python -m strands_art.devtools.layers`` checks it, :data:`strands_art.devtools.layers.PARTS`):

- ``run/``: many rollouts: ``strands-art migrate`` (runner, run directory, Ray), one rollout
  (policy, agent, guarded evaluation), the trainers' episodes and ``train --env migrationbench``;
- ``generate/``: tasks made offline: the generated kinds (``strands-art make-tasks``) and real
  MigrationBench records (``make-tasks --from-records``); never imported by ``run/``;
- ``evaluate/``: the reward from evidence the agent cannot write (evaluator, verdict, build copy,
  build outputs, test selection, the original's tests from git, the evaluation cache);
- ``agent/``: the agent and its sandboxed shell and file-editor tools; never imports
  ``evaluate/`` (and ``evaluate/`` never imports it);
- ``maven/``: Maven run offline in the sandbox: the build, its log, the throw-away local
  repository;
- ``tasks/``: what a task is: ``task.json``, ``repo/``'s test methods, the declared ``offline/``
  environment, task loading and published records;
- this folder's own modules: :mod:`.config` (``RolloutConfig``), :mod:`.workspace` (a
  rollout's confined copy of ``repo/``) and :mod:`.controlseq` (terminal control sequences
  removed from command output); they import no part.

The names below load lazily (module-level ``__getattr__``), so importing a part pulls in nothing
else: ``from strands_art.envs.migrationbench import RolloutConfig, build_agent, load_tasks``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from strands_art.envs.migrationbench.agent.agent import RolloutLimits, build_agent, run_agent, user_prompt
    from strands_art.envs.migrationbench.agent.toolenv import prepare_tool_env
    from strands_art.envs.migrationbench.agent.tools import ToolStats
    from strands_art.envs.migrationbench.config import RolloutConfig
    from strands_art.envs.migrationbench.evaluate.evaltask import EvalTask
    from strands_art.envs.migrationbench.evaluate.verdict import EvalResult
    from strands_art.envs.migrationbench.generate.generate import make_tasks
    from strands_art.envs.migrationbench.run.episodes import migrationbench_episode, migrationbench_rollout
    from strands_art.envs.migrationbench.tasks.tasks import Task, TaskError, load_tasks, read_records
    from strands_art.envs.migrationbench.workspace import Workspace

_PKG = "strands_art.envs.migrationbench"

# name -> module that defines it (imported on first touch)
_LAZY: dict[str, str] = {
    # one rollout, and the trainers' episodes
    "RolloutConfig": f"{_PKG}.config",
    "migrationbench_rollout": f"{_PKG}.run.episodes",
    "migrationbench_episode": f"{_PKG}.run.episodes",
    # the agent and its tools
    "build_agent": f"{_PKG}.agent.agent",
    "run_agent": f"{_PKG}.agent.agent",
    "user_prompt": f"{_PKG}.agent.agent",
    "RolloutLimits": f"{_PKG}.agent.agent",
    "prepare_tool_env": f"{_PKG}.agent.toolenv",
    "ToolStats": f"{_PKG}.agent.tools",
    "Workspace": f"{_PKG}.workspace",
    # tasks
    "Task": f"{_PKG}.tasks.tasks",
    "TaskError": f"{_PKG}.tasks.tasks",
    "load_tasks": f"{_PKG}.tasks.tasks",
    "read_records": f"{_PKG}.tasks.tasks",
    "make_tasks": f"{_PKG}.generate.generate",
    # the reward (the function: strands_art.envs.migrationbench.evaluate.evaluator.evaluate)
    "EvalTask": f"{_PKG}.evaluate.evaltask",
    "EvalResult": f"{_PKG}.evaluate.verdict",
}

__all__ = [
    "EvalResult",
    "EvalTask",
    "RolloutConfig",
    "RolloutLimits",
    "Task",
    "TaskError",
    "ToolStats",
    "Workspace",
    "build_agent",
    "load_tasks",
    "make_tasks",
    "migrationbench_episode",
    "migrationbench_rollout",
    "prepare_tool_env",
    "read_records",
    "run_agent",
    "user_prompt",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` and return the name (cached in this module).

    Raises:
        AttributeError: ``name`` is neither a public name nor a part (a subpackage is found by
            the import system, not here).
    """
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
