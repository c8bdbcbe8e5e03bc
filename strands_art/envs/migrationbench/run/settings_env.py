"""The migration agent's environment-variable settings, checked before a run loads a model.

``STRANDS_ART_EVAL_CACHE`` (where scoring verdicts are kept:
:func:`~strands_art.envs.migrationbench.evaluate.evalcache.check_cache_setting`) and
``STRANDS_ART_MAVEN_MEMO`` (the agent's repeated clean build answered from memory:
:func:`~strands_art.envs.migrationbench.agent.mavenmemo.enabled`) are read by each rollout; a bad
value found there would fail every rollout of a run after its model loaded. ``strands-art train
--env migrationbench`` and ``strands-art migrate`` call :func:`check_env_settings` first.
"""

from __future__ import annotations

import os
from pathlib import Path


def check_env_settings(rollouts_dir: str | os.PathLike[str]) -> None:
    """Check both variables; creates nothing.

    Args:
        rollouts_dir: the directory the run's rollouts write under (the evaluation cache's default
            home is ``rollouts_dir/eval-cache``).

    Raises:
        UsageError: naming the variable or the cache directory and what is wrong.
    """
    # here, not at import: the commands' --help stays light
    from strands_art.envs.migrationbench.agent.mavenmemo import enabled as memo_enabled
    from strands_art.envs.migrationbench.evaluate.evalcache import check_cache_setting

    memo_enabled()
    check_cache_setting(Path(rollouts_dir))
