"""The Maven set-up the agent's shell sees: a ``mvn`` wrapper, settings and a private local repo.

:func:`prepare_tool_env` puts everything in the workspace's ``aux`` directory (outside the
repository, removed with the workspace): a fresh local repository (seeded for offline builds by
:func:`~strands_art.envs.migrationbench.maven.offline_repo.seed_local_repo`), a ``settings.xml``
(:func:`~strands_art.envs.migrationbench.maven.offline_repo.write_settings`), a private ``HOME`` (so
nothing touches ``~/.m2``) and ``bin/mvn`` (:func:`~.commands.write_mvn_wrapper`) that adds
``-B -Dstyle.color=never -ntp -s settings.xml -gs settings.xml`` to every call the model makes.
Pass the result to :func:`~strands_art.envs.migrationbench.agent.agent.build_agent` /
:func:`~strands_art.envs.migrationbench.agent.tools.make_tools` as ``env``, ``extra_path`` and
``sandbox``.

:func:`workspace_sandbox` is the workspace's :class:`~strands_art.envs.sandbox.Sandbox`: its
identity, the repository and ``aux`` writable, Debian's Maven repository and the JDK read-only.
The wrapper re-seeds relocation POMs inside the sandbox with the system ``python3`` and a copy of
:mod:`.offline_repo` (stdlib only) in ``aux/bin``: no host Python environment is exposed.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from strands_art.envs.migrationbench.agent.commands import write_mvn_wrapper
from strands_art.envs.migrationbench.maven import offline_repo
from strands_art.envs.migrationbench.maven.maven import maven_env, sandbox_readonly_paths, use_offline
from strands_art.envs.migrationbench.maven.offline_repo import (
    seed_local_repo,
    serve_metadata_versions,
    write_settings,
)
from strands_art.envs.migrationbench.tasks.offline_env import OfflineEnv, seed_offline_env
from strands_art.envs.migrationbench.workspace import Workspace
from strands_art.envs.sandbox import Limits, Sandbox, chown_tree

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolEnv:
    """``env``, ``extra_path`` and ``sandbox`` for the tools, and whether Maven resolves offline.

    ``sandbox`` is None only with the explicit ``unsafe_no_sandbox`` opt-out."""

    env: dict[str, str] = field(default_factory=dict)
    extra_path: list[str] = field(default_factory=list)
    offline: bool = True
    sandbox: Sandbox | None = None


def workspace_sandbox(workspace: Workspace, limits: Limits | None = None) -> Sandbox:
    """The sandbox of ``workspace``'s commands (see the module doc)."""
    return Sandbox(
        workspace.identity,
        writable=workspace.writable_dirs,
        readonly=sandbox_readonly_paths(),
        limits=limits or Limits(),
    )


def _python_inside() -> str:
    """The Python the wrapper runs inside the sandbox: the system one (under /usr, bound)."""
    for cand in ("/usr/bin/python3", shutil.which("python3") or ""):
        if cand and os.path.realpath(cand).startswith("/usr/"):
            return cand
    return sys.executable  # only reachable unsandboxed; the re-seed then fails quietly inside


OFFLINE_COPY = "offline"
"""The read-only copy of a task's offline environment in ``aux`` (the wrapper re-seeds from it)."""


def _read_only_copy(env: OfflineEnv, dest: Path) -> None:
    """Copy ``env``'s files to ``dest``, owned by this process: directories 0755, files 0444."""
    for rel, _digest in env.files:
        out = dest.joinpath(*rel.split("/"))
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(env.root.joinpath(*rel.split("/")), out)
        os.chmod(out, 0o444)
    for dirpath, _dirs, _files in os.walk(dest):
        os.chmod(dirpath, 0o755)


def prepare_tool_env(
    workspace: Workspace,
    *,
    offline: bool | None = None,
    limits: Limits | None = None,
    unsafe_no_sandbox: bool = False,
    offline_env: OfflineEnv | None = None,
) -> ToolEnv:
    """Write the ``mvn`` wrapper, settings and local repository for one rollout.

    Args:
        workspace: the rollout's workspace (its ``aux_dir`` receives everything).
        offline: force offline (Debian repository) or online resolution; None = probe
            (see :func:`~strands_art.envs.migrationbench.maven.maven.use_offline`).
        limits: the sandbox's resource limits (default :class:`~strands_art.envs.sandbox.Limits`).
        unsafe_no_sandbox: no sandbox (``ToolEnv.sandbox`` None): the explicit opt-out.
        offline_env: the task's declared offline Maven environment (:mod:`.offline_env`): seeded
            into the local repository now, and copied to ``aux/offline`` (owned by this process,
            read-only to the sandbox uid), from which the wrapper re-seeds before every call.

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
        if offline_env is not None:
            seed_offline_env(local_repo, offline_env)
            serve_metadata_versions(local_repo, [rel for rel, _ in offline_env.files])
    settings = write_settings(aux / "settings.xml", local_repo, offline=is_offline)
    # The agent edits pom.xml (pinning plugin versions Debian lacks): re-seed relocation POMs for
    # the project's current pins before every Maven call, as the evaluator does before its build.
    seeder = aux / "bin" / "offline_repo.py"
    seeder.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(offline_repo.__file__, seeder)
    env_copy = aux / OFFLINE_COPY if offline_env is not None else None
    prelude = (
        f"{shlex.quote(_python_inside())} -I {shlex.quote(str(seeder))} seed "
        f'{shlex.quote(str(local_repo))} "$PWD"'
        + (f" {shlex.quote(str(env_copy))}" if env_copy is not None else "")
        + " >/dev/null 2>&1\n"
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
    chown_tree(aux, workspace.identity)
    if env_copy is not None and offline_env is not None:
        _read_only_copy(offline_env, env_copy)  # after chown_tree: it stays ours, not the sandbox uid's
    sandbox = None if unsafe_no_sandbox else workspace_sandbox(workspace, limits)
    logger.debug("tool env ready in %s (offline=%s)", aux, is_offline)
    return ToolEnv(env=env, extra_path=[str(wrapper.parent)], offline=is_offline, sandbox=sandbox)
