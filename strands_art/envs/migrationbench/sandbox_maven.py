"""Maven inside the agent's sandbox: an ``mvn`` wrapper that resolves the way the evaluator does.

Each rollout gets a throw-away local repository under the workspace's private ``aux`` directory
(never ``~/.m2``) and, when Maven Central is unreachable, a settings file that resolves from
Debian's ``/usr/share/maven-repo``. Because the agent edits ``pom.xml`` (pinning new plugin
versions), the wrapper re-seeds relocation POMs for the project's current pins before every
Maven call (``python -m strands_art.envs.migrationbench.sandbox_maven seed LOCAL_REPO DIR``).
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

from .maven import maven_env, use_offline
from .offline_repo import seed_local_repo, write_settings
from .workspace import Workspace


def prepare_agent_maven(ws: Workspace) -> tuple[dict[str, str], Path]:
    """Write the local repository, settings and ``mvn`` wrapper for one rollout.

    Returns ``(env, bin_dir)``: extra environment variables for the shell tool (JAVA_HOME,
    MAVEN_OPTS, ...) and the directory to put first on PATH. Raises FileNotFoundError when
    Maven is not installed (run scripts/setup-system.sh).
    """
    real_mvn = shutil.which("mvn")
    if real_mvn is None:
        raise FileNotFoundError("mvn not found on PATH; run scripts/setup-system.sh")
    aux = ws.aux_dir
    local_repo = aux / "m2-repository"
    offline = use_offline(None)
    if offline:
        seed_local_repo(local_repo, project_dir=ws.root)
    else:
        local_repo.mkdir(parents=True, exist_ok=True)
    settings = write_settings(aux / "settings.xml", local_repo, offline=offline)
    bin_dir = aux / "bin"
    bin_dir.mkdir(exist_ok=True)
    seed = (
        f"{shlex.quote(sys.executable)} -m strands_art.envs.migrationbench.sandbox_maven seed "
        f'{shlex.quote(str(local_repo))} "$PWD" >/dev/null 2>&1\n'
        if offline
        else ""
    )
    fixed = ["-B", "-Dstyle.color=never", "-ntp", "-s", str(settings), "-gs", str(settings)]
    script = f'#!/bin/sh\n{seed}exec {shlex.quote(real_mvn)} {" ".join(shlex.quote(a) for a in fixed)} "$@"\n'
    wrapper = bin_dir / "mvn"
    wrapper.write_text(script)
    wrapper.chmod(0o755)
    env = {k: v for k, v in maven_env({}).items()}
    return env, bin_dir


def _main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] != "seed":
        print("usage: python -m strands_art.envs.migrationbench.sandbox_maven seed LOCAL_REPO PROJECT_DIR")
        return 2
    project = Path(argv[2])
    seed_local_repo(Path(argv[1]), project_dir=project if (project / "pom.xml").exists() else None)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
