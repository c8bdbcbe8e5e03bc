"""Run Maven non-interactively, with a timeout that kills the whole process group.

Each call gets a fresh local repository and a generated ``settings.xml`` in a temporary directory
(never ``~/.m2``). Resolution is *offline* — Debian's ``/usr/share/maven-repo`` through a
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
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from strands_art.envs.migrationbench.offline_repo import DEBIAN_REPO, seed_local_repo, write_settings

logger = logging.getLogger(__name__)

OFFLINE_ENV = "STRANDS_ART_MAVEN_OFFLINE"
CENTRAL_URL = "https://repo.maven.apache.org/maven2/"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]")


class MavenNotFound(RuntimeError):
    """``mvn`` or a JDK 17 is not installed (run ``scripts/setup-system.sh``)."""


@dataclass(frozen=True)
class MavenResult:
    """Outcome of one Maven invocation.

    ``exit_code`` is None when the build was killed on timeout. ``duration_s`` is wall-clock
    seconds. ``output_tail`` is the last ``tail_chars`` characters of stdout+stderr, ANSI codes
    stripped; ``log_path`` holds the full (stripped) log when the caller asked for one.
    ``error_lines`` are the first 30 ``[ERROR]`` lines of the whole log, stack frames left out.
    """

    command: tuple[str, ...]
    exit_code: int | None
    timed_out: bool
    duration_s: float
    output_tail: str
    offline: bool
    log_path: Path | None = None
    error_lines: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


def strip_ansi(text: str) -> str:
    """Remove ANSI escape sequences (colour, cursor) from ``text``."""
    return _ANSI.sub("", text)


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
    """Environment for a non-interactive, colourless Maven under JDK 17."""
    env = dict(os.environ if base is None else base)
    java_home = find_java17_home()
    if java_home is not None:
        env["JAVA_HOME"] = str(java_home)
    env["MAVEN_OPTS"] = " ".join(
        x
        for x in (
            env.get("MAVEN_OPTS", ""),
            "-Djansi.force=false -Djansi.passthrough=false -XX:TieredStopAtLevel=1",
        )
        if x
    )
    env["TERM"] = "dumb"
    env.pop("MAVEN_ARGS", None)
    env.pop("JAVA_TOOL_OPTIONS", None)
    return env


def _kill_group(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """SIGTERM the process group of ``proc``, then SIGKILL what is left after ``grace_s``."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
        # mvn itself exited; forked test JVMs may linger in the group.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return


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
    scratch_dir: Path | None = None,
) -> MavenResult:
    """Run ``mvn -B -Dstyle.color=never -s SETTINGS <args>`` in ``project_dir``.

    Args:
        project_dir: directory with the root ``pom.xml``.
        args: Maven goals/options, e.g. ``["clean", "verify"]``.
        timeout_s: wall-clock limit; on expiry the whole process group (Maven and forked test
            JVMs) is killed and ``timed_out`` is True.
        offline: force offline/online resolution; None = :func:`use_offline`.
        fork_count: passed as ``-DforkCount=N`` when set (see module doc); None = surefire default.
        log_path: write the full ANSI-stripped output there.
        keep_local_repo: use this local repository directory instead of a throw-away one.
        scratch_dir: where the throw-away directory (local repository, settings, raw log) is
            made; default the system's temp directory (``migrate`` uses its run's workspaces).

    Raises:
        MavenNotFound: ``mvn`` is not on PATH.
        FileNotFoundError: ``project_dir`` has no ``pom.xml``.
    """
    project_dir = Path(project_dir).resolve()
    if not (project_dir / "pom.xml").is_file():
        raise FileNotFoundError(f"no pom.xml in {project_dir}")
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenNotFound("mvn not found on PATH; run scripts/setup-system.sh")
    is_offline = use_offline(offline)
    with tempfile.TemporaryDirectory(prefix="strands-art-mvn-", dir=scratch_dir) as tmp:
        tmp_path = Path(tmp)
        local_repo = keep_local_repo or tmp_path / "repository"
        if is_offline:
            seed_local_repo(local_repo, project_dir=project_dir)
        else:
            local_repo.mkdir(parents=True, exist_ok=True)
        settings = write_settings(tmp_path / "settings.xml", local_repo, offline=is_offline)
        cmd = [mvn, "-B", "-Dstyle.color=never", "-ntp", "-s", str(settings), "-gs", str(settings)]
        if fork_count is not None:
            cmd.append(f"-DforkCount={fork_count}")
        cmd += list(args)
        raw_log = tmp_path / "maven.log"
        start = time.monotonic()
        timed_out = False
        with open(raw_log, "wb") as out:
            proc = subprocess.Popen(
                cmd,
                cwd=project_dir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=maven_env(),
                start_new_session=True,
            )
            try:
                exit_code: int | None = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                exit_code = None
                logger.warning(
                    "mvn %s in %s timed out after %.0f s; killing its group", args, project_dir, timeout_s
                )
                _kill_group(proc)
            else:
                _kill_group_quiet(proc)
        duration = time.monotonic() - start
        text = strip_ansi(raw_log.read_bytes().decode("utf-8", errors="replace"))
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log_path.write_text(text, encoding="utf-8")
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
        output_tail=text[-tail_chars:],
        offline=is_offline,
        log_path=log_path,
        error_lines=tuple(_error_lines(text)),
    )


def _error_lines(text: str, limit: int = 30) -> list[str]:
    lines = []
    for line in text.splitlines():
        if (
            line.startswith("[ERROR]")
            and not line[7:].lstrip().startswith("at ")
            and line.strip() != "[ERROR]"
        ):
            lines.append(line)
            if len(lines) == limit:
                break
    return lines


def _kill_group_quiet(proc: subprocess.Popen[bytes]) -> None:
    """After a normal exit, make sure no stray process (e.g. a leaked test JVM) survives."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
