"""Run Maven non-interactively inside the sandbox, with a timeout that kills the whole process group.

Maven runs in a :class:`~strands_art.envs.sandbox.Sandbox` (bubblewrap): the project's code
(plugins, tests, static initializers) runs as an unprivileged uid with no network, a read-only
system, and only the project and its local repository writable. Each call gets a fresh local
repository and a generated ``settings.xml`` in a temporary directory (never ``~/.m2``). Resolution is *offline* — Debian's ``/usr/share/maven-repo`` through a
``file://`` mirror, see :mod:`.offline_repo` — when Maven Central is unreachable (a short, cached
HTTPS check) or when ``STRANDS_ART_MAVEN_OFFLINE=1``; ``STRANDS_ART_MAVEN_OFFLINE=0`` forces
Central.

Surefire forks: we keep surefire's default (one forked test JVM per module) rather than
``-DforkCount=0``. In-process tests are faster (~5 s less per module here) but change what is
being judged: surefire ignores ``<argLine>`` when it does not fork, so a migration that fixes
reflective access the documented way (``--add-opens`` in ``argLine``) would fail, and a test
calling ``System.exit`` would end Maven itself. Pass ``fork_count=0`` to trade that for speed.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from strands_art.envs.migrationbench.maven.mavenlog import digest_log, strip_ansi  # noqa: F401 (strip_ansi: public here too)
from strands_art.envs.migrationbench.maven.offline_repo import (
    DEBIAN_REPO,
    seed_local_repo,
    serve_metadata_versions,
    write_settings,
)
from strands_art.envs.migrationbench.tasks.offline_env import OfflineEnv, seed_offline_env
from strands_art.envs.sandbox import Identity, Limits, Sandbox, chown_tree, run_sync

logger = logging.getLogger(__name__)

OFFLINE_ENV = "STRANDS_ART_MAVEN_OFFLINE"
CENTRAL_URL = "https://repo.maven.apache.org/maven2/"


class MavenNotFound(RuntimeError):
    """``mvn`` or a JDK 17 is not installed (run ``scripts/setup-system.sh``)."""


@dataclass(frozen=True)
class MavenResult:
    """Outcome of one Maven invocation.

    ``exit_code`` is None when the build was killed on timeout. ``duration_s`` is wall-clock
    seconds. ``output_tail`` is the last ``tail_chars`` characters of stdout+stderr, ANSI codes
    stripped; ``log_path`` holds the stripped log (capped at 16 MiB) when the caller asked for one.
    ``error_lines`` are the first 30 ``[ERROR]`` lines of the whole log, stack frames left out.
    ``max_skipped`` / ``skipped_by_class`` / ``skip_lines_overflow``: the skips surefire printed
    (:class:`.mavenlog.LogDigest`).
    """

    command: tuple[str, ...]
    exit_code: int | None
    timed_out: bool
    duration_s: float
    output_tail: str
    offline: bool
    log_path: Path | None = None
    error_lines: tuple[str, ...] = ()
    max_skipped: int = 0
    skipped_by_class: tuple[tuple[str, int], ...] = ()
    skip_lines_overflow: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@functools.lru_cache(maxsize=1)
def central_reachable(url: str = CENTRAL_URL, timeout_s: float = 3.0) -> bool:
    """True if an HTTPS HEAD to Maven Central answers within ``timeout_s`` (cached per process)."""
    try:
        req = urllib.request.Request(url, method="HEAD")
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 (fixed https URL)
            return resp.status < 500
    except (urllib.error.URLError, OSError, ValueError) as exc:
        logger.info("Maven Central unreachable (%s); resolving offline from %s", exc, DEBIAN_REPO)
        return False


def use_offline(offline: bool | None = None) -> bool:
    """Decide the resolution mode: explicit ``offline``, else ``$STRANDS_ART_MAVEN_OFFLINE``, else probe.

    Raises ValueError for an env value other than 0/1/true/false/yes/no (empty = auto).
    """
    if offline is not None:
        return offline
    raw = os.environ.get(OFFLINE_ENV, "").strip().lower()
    if raw in ("1", "true", "yes"):
        return True
    if raw in ("0", "false", "no"):
        return False
    if raw:
        raise ValueError(f"{OFFLINE_ENV}={raw!r}: expected 1/0 (or unset for auto-detection)")
    return not central_reachable()


def find_java17_home() -> Path | None:
    """JAVA_HOME of a JDK 17: ``$STRANDS_ART_JAVA_HOME``, else ``/usr/lib/jvm/java-17-*``, else None."""
    env = os.environ.get("STRANDS_ART_JAVA_HOME")
    if env:
        return Path(env)
    for cand in sorted(Path("/usr/lib/jvm").glob("java-17-openjdk*")):
        if (cand / "bin" / "javac").exists():
            return cand
    return None


def maven_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for a non-interactive, colourless Maven under JDK 17, whose JVM no other JVM
    can attach to (``-XX:+DisableAttachMechanism``: the JDK's Attach API needs no ptrace)."""
    env = dict(os.environ if base is None else base)
    java_home = find_java17_home()
    if java_home is not None:
        env["JAVA_HOME"] = str(java_home)
    env["MAVEN_OPTS"] = " ".join(
        x
        for x in (
            env.get("MAVEN_OPTS", ""),
            "-Djansi.force=false -Djansi.passthrough=false -XX:TieredStopAtLevel=1",
            # a test JVM (same uid, same /tmp) must not attach to Maven's and load an agent that
            # ends it with status 0; after .mvn/jvm.config's options, so it wins
            "-XX:+DisableAttachMechanism",
        )
        if x
    )
    env["TERM"] = "dumb"
    env.pop("MAVEN_ARGS", None)
    env.pop("JAVA_TOOL_OPTIONS", None)
    return env


def sandbox_readonly_paths() -> tuple[Path, ...]:
    """Host paths a Maven sandbox reads besides the system ones: Debian's repository and the JDK."""
    paths = [DEBIAN_REPO]
    java_home = find_java17_home()
    if java_home is not None and not Path(java_home).resolve().is_relative_to("/usr"):
        paths.append(Path(java_home).resolve())
    return tuple(paths)


def owner_identity(path: Path) -> Identity:
    """The identity owning ``path``: a sandbox uid (switched to) when we are root and it is not."""
    st = path.stat()
    return Identity(st.st_uid, st.st_gid, drop=os.geteuid() == 0 and st.st_uid != 0)


def run_maven(
    project_dir: Path | str,
    args: Sequence[str],
    timeout_s: float = 300.0,
    *,
    offline: bool | None = None,
    fork_count: int | None = None,
    log_path: Path | None = None,
    tail_chars: int = 8000,
    keep_local_repo: Path | None = None,
    identity: Identity | None = None,
    limits: Limits | None = None,
    unsafe_no_sandbox: bool = False,
    scratch_dir: Path | None = None,
    offline_env: OfflineEnv | None = None,
) -> MavenResult:
    """Run ``mvn -B -Dstyle.color=never -s SETTINGS <args>`` in ``project_dir``, sandboxed.

    Args:
        project_dir: directory with the root ``pom.xml``.
        args: Maven goals/options, e.g. ``["clean", "verify"]``.
        timeout_s: wall-clock limit; on expiry the whole process group (Maven and forked test
            JVMs) is killed and ``timed_out`` is True.
        offline: force offline/online resolution; None = :func:`use_offline`.
        fork_count: passed as ``-DforkCount=N`` when set (see module doc); None = surefire default.
        log_path: write the ANSI-stripped output there (capped: see :func:`.mavenlog.digest_log`).
        keep_local_repo: use this local repository directory instead of a throw-away one
            (it must be writable by ``identity``).
        identity: the sandbox uid, which must own ``project_dir``; default: its owner
            (:func:`owner_identity`: no uid switch for a root-owned project).
        limits: the sandbox's resource limits (default :class:`~strands_art.envs.sandbox.Limits`
            with a CPU limit of ``timeout_s`` per core).
        unsafe_no_sandbox: run Maven unconfined (the explicit opt-out; never the default).
        scratch_dir: where the throw-away directory (local repository, settings, raw log) is
            made; default the system's temp directory. The sandbox uid must be able to enter it
            (:func:`.evaluator.evaluate` passes its own directory under ``<run_dir>/workspaces``).
        offline_env: the task's declared offline environment (:mod:`.offline_env`), copied into
            the local repository after the fixed relocations; ignored online.

    Raises:
        MavenNotFound: ``mvn`` is not on PATH.
        FileNotFoundError: ``project_dir`` has no ``pom.xml``.
        SandboxError: bwrap/setpriv/prlimit are missing.
    """
    project_dir = Path(project_dir).resolve()
    if not (project_dir / "pom.xml").is_file():
        raise FileNotFoundError(f"no pom.xml in {project_dir}")
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenNotFound("mvn not found on PATH; run scripts/setup-system.sh")
    is_offline = use_offline(offline)
    owner = identity or owner_identity(project_dir)
    with tempfile.TemporaryDirectory(prefix="strands-art-mvn-", dir=scratch_dir) as tmp:
        tmp_path = Path(tmp)
        os.chmod(tmp_path, 0o711)  # the sandbox uid enters its own subdirectory, lists nothing
        mine = tmp_path / "sandbox"  # written by the sandboxed build
        mine.mkdir()
        local_repo = keep_local_repo or mine / "repository"
        if is_offline:
            seed_local_repo(local_repo, project_dir=project_dir)
            if offline_env is not None:
                seed_offline_env(local_repo, offline_env)
                serve_metadata_versions(local_repo, [rel for rel, _ in offline_env.files])
        else:
            local_repo.mkdir(parents=True, exist_ok=True)
        settings = write_settings(mine / "settings.xml", local_repo, offline=is_offline)
        chown_tree(mine, owner)
        os.chmod(mine, 0o700)
        cmd = [mvn, "-B", "-Dstyle.color=never", "-ntp", "-s", str(settings), "-gs", str(settings)]
        if fork_count is not None:
            cmd.append(f"-DforkCount={fork_count}")
        cmd += list(args)
        env = maven_env({"HOME": str(mine)})
        env["MVN_LOCAL_REPO"] = str(local_repo)
        sandbox = None
        if not unsafe_no_sandbox:
            cores = os.cpu_count() or 1
            sandbox = Sandbox(
                owner,
                writable=(project_dir, mine, *((keep_local_repo,) if keep_local_repo else ())),
                readonly=sandbox_readonly_paths(),
                limits=limits or Limits(cpu_s=int(timeout_s * cores) + 60),
            )
        raw_log = tmp_path / "maven.log"  # host-private: the sandbox cannot reach it by name
        start = time.monotonic()
        with open(raw_log, "w+b") as out:
            exit_code, timed_out = run_sync(
                sandbox, cmd, cwd=project_dir, env=env, timeout_s=timeout_s, stdout=out
            )
            if timed_out:
                logger.warning(
                    "mvn %s in %s timed out after %.0f s; its group was killed", args, project_dir, timeout_s
                )
            duration = time.monotonic() - start
            out.seek(0)
            if log_path is not None:
                log_path.parent.mkdir(parents=True, exist_ok=True)
            # hostile output (up to the sandbox's 1 GiB file limit): read in bounded memory
            log = digest_log(out, tail_chars=tail_chars, log_path=log_path)
    logger.info(
        "mvn %s in %s: exit=%s timed_out=%s %.1f s",
        " ".join(args),
        project_dir,
        exit_code,
        timed_out,
        duration,
    )
    return MavenResult(
        command=tuple(cmd),
        exit_code=exit_code,
        timed_out=timed_out,
        duration_s=duration,
        output_tail=log.tail,
        offline=is_offline,
        log_path=log_path,
        error_lines=log.error_lines,
        max_skipped=log.max_skipped,
        skipped_by_class=tuple(sorted(log.skipped_by_class.items())),
        skip_lines_overflow=log.skip_lines_overflow,
    )
