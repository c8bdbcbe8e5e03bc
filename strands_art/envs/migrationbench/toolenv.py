"""The Maven set-up the agent's shell sees: a ``mvn`` wrapper, settings and a private local repo.

:func:`prepare_tool_env` puts everything in the workspace's ``aux`` directory (outside the
repository, removed with the workspace): a fresh local repository (seeded for offline builds by
:func:`~strands_art.envs.migrationbench.offline_repo.seed_local_repo`), a ``settings.xml``
(:func:`~strands_art.envs.migrationbench.offline_repo.write_settings`), a private ``HOME`` (so
nothing touches ``~/.m2``) and ``bin/mvn`` (:func:`~.commands.write_mvn_wrapper`) that adds
``-B -Dstyle.color=never -ntp -s settings.xml -gs settings.xml`` to every call the model makes.
Pass the result to :func:`~strands_art.envs.migrationbench.agent.build_agent` /
:func:`~strands_art.envs.migrationbench.tools.make_tools` as ``env`` and ``extra_path``.
"""

from __future__ import annotations

import logging
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .commands import write_mvn_wrapper
from .maven import maven_env, use_offline
from .offline_repo import seed_local_repo, write_settings
from .workspace import Workspace

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolEnv:
    """``env`` and ``extra_path`` for the tools, and whether Maven resolves offline."""

    env: dict[str, str] = field(default_factory=dict)
    extra_path: list[str] = field(default_factory=list)
    offline: bool = True


def prepare_tool_env(workspace: Workspace, *, offline: bool | None = None) -> ToolEnv:
    """Write the ``mvn`` wrapper, settings and local repository for one rollout.

    Args:
        workspace: the rollout's workspace (its ``aux_dir`` receives everything).
        offline: force offline (Debian repository) or online resolution; None = probe
            (see :func:`~strands_art.envs.migrationbench.maven.use_offline`).

    Returns:
        A :class:`ToolEnv`; ``env`` holds only the variables to add (JDK 17 ``JAVA_HOME``,
        ``MAVEN_OPTS``, ``HOME``, ``MVN_LOCAL_REPO``).

    Raises:
        FileNotFoundError: Maven is not installed.
    """
    aux = workspace.aux_dir
    is_offline = use_offline(offline)
    local_repo = aux / "m2" / "repository"
    local_repo.mkdir(parents=True, exist_ok=True)
    if is_offline:
        seed_local_repo(local_repo, project_dir=workspace.root)
    settings = write_settings(aux / "settings.xml", local_repo, offline=is_offline)
    # The agent edits pom.xml (pinning plugin versions Debian lacks): re-seed relocation POMs for
    # the project's current pins before every Maven call, as the evaluator does before its build.
    prelude = (
        f"{shlex.quote(sys.executable)} -m strands_art.envs.migrationbench.toolenv seed "
        f'{shlex.quote(str(local_repo))} "$PWD" >/dev/null 2>&1\n'
        if is_offline
        else ""
    )
    wrapper = write_mvn_wrapper(
        aux / "bin",
        settings=settings,
        extra_args=["-ntp", "-gs", str(settings), f"-Dmaven.repo.local={local_repo}"],
        prelude=prelude,
    )
    home = aux / "home"
    home.mkdir(exist_ok=True)
    full = maven_env()
    env = {k: full[k] for k in ("JAVA_HOME", "MAVEN_OPTS") if k in full}
    env.update({"HOME": str(home), "MVN_LOCAL_REPO": str(local_repo)})
    logger.debug("tool env ready in %s (offline=%s)", aux, is_offline)
    return ToolEnv(env=env, extra_path=[str(wrapper.parent)], offline=is_offline)


def _main(argv: list[str]) -> int:
    """``python -m strands_art.envs.migrationbench.toolenv seed LOCAL_REPO PROJECT_DIR``."""
    if len(argv) != 3 or argv[0] != "seed":
        sys.stderr.write(
            "usage: python -m strands_art.envs.migrationbench.toolenv seed LOCAL_REPO PROJECT_DIR\n"
        )
        return 2
    project = Path(argv[2])
    seed_local_repo(Path(argv[1]), project_dir=project if (project / "pom.xml").is_file() else None)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
