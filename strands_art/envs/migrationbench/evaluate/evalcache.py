"""The scoring evaluation memoized by content: one real evaluation per distinct migrated tree.

GRPO groups often end in identical trees (four rollouts that made the same one-line POM fix, or
gave up without a change), and each paid 27-45 s of Maven for the same verdict. This module wraps
the evaluator from outside (:func:`.evaluator.evaluate_command`, unchanged):

1. the host copies the agent's workspace into a directory of its own with the evaluator's own
   copy (:func:`.buildcopy.copy_for_build`: measured first, bounded by the build timeout, Maven
   outputs left out: what the evaluator would copy), after the agent's processes have ended;
2. the key is the SHA-256 of that copy (:func:`tree_digest`: every path, type, permission bits,
   file content and symlink target), the task (:func:`task_digest`: ``task.json`` and the
   original ``repo/``), the evaluator's version (:func:`evaluator_version`: the
   ``EVALUATOR_VERSION`` constant, and the source of the
   evaluator's packages, so any change to its code is a new key), the JDK and Maven installed,
   and the evaluation's own parameters (timeout, sandbox or not, ``STRANDS_ART_MAVEN_OFFLINE``);
3. a hit returns the stored verdict; a miss evaluates **that same host copy** (never the
   workspace the agent could still touch) and stores the verdict, unless it depends on the
   machine's load (a build or test timeout: :data:`UNCACHED_REASONS`).

Nothing the agent wrote is ever read as a key or a verdict: the digest is computed by the host
from its own copy, and the store is a host directory (mode 0700) that no sandbox binds (the
sandbox's root is an empty tmpfs with only the workspace writable, :mod:`strands_art.envs.sandbox.bwrap`)
and whose owner is not a sandbox uid.

Where the verdicts live: by default one directory per run (``<run_dir>/eval-cache``, so a
resumed run keeps them); ``STRANDS_ART_EVAL_CACHE=DIR`` shares one directory across runs (the
opt-in: a verdict is reused only under the same key, evaluator source included);
``STRANDS_ART_EVAL_CACHE=off`` evaluates every rollout afresh. A directory the cache creates has
mode 0700; an existing one is used only if it is this user's and closed to others, never changed
(:func:`prepare_directory`), and the setting is checked before a run loads its model
(:func:`check_cache_setting`). Two rollouts of one process that
end with the same tree at the same time evaluate it once (the second waits for the first).

A verdict from the cache carries ``details["eval_cache"] = {"hit": true, "key": ...}``; a fresh
one ``{"hit": false, ...}``. A flaky project (a test that passes at random) is scored once per
distinct tree: the cached verdict is the draw its first evaluation made.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import logging
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strands_art.envs.migrationbench.evaluate import evaluator as _evaluator
from strands_art.envs.migrationbench.evaluate.buildcopy import copy_for_build
from strands_art.envs.migrationbench.evaluate.verdict import REASON_BUILD_TIMEOUT, REASON_TESTS_TIMEOUT
from strands_art.envs.migrationbench.treedigest import tree_digest
from strands_art.envs.sandbox import Identity
from strands_art.envs.sandbox.removal import remove_tree
from strands_art.validation import UsageError, env_switch

logger = logging.getLogger(__name__)

CACHE_ENV = "STRANDS_ART_EVAL_CACHE"
"""Environment variable: a directory shared across runs, or ``off``; unset: ``<run_dir>/eval-cache``."""
RUN_CACHE_DIR = "eval-cache"
UNCACHED_REASONS = frozenset({REASON_BUILD_TIMEOUT, REASON_TESTS_TIMEOUT})
"""Verdicts with these reasons depend on the machine's load, not on the tree: never stored."""
KEY_FORMAT = "strands-art-evalcache-1"


@functools.lru_cache(maxsize=256)
def task_digest(task_dir: str) -> str:
    """SHA-256 of a task directory's ``task.json`` and ``repo/`` (once per process and path:
    a task directory does not change during a run).

    Raises:
        OSError: ``task.json`` cannot be read.
    """
    d = Path(task_dir)
    h = hashlib.sha256(b"task\0")
    h.update(hashlib.sha256((d / "task.json").read_bytes()).digest())
    repo = d / "repo"
    h.update(tree_digest(repo).encode() if repo.is_dir() else b"no-repo")
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def evaluator_version() -> str:
    """The evaluator's version as part of every key: ``EVALUATOR_VERSION`` of
    :mod:`.evaluator`, the SHA-256 of the source of the packages it runs
    (``strands_art/envs/migrationbench`` and ``strands_art/envs/sandbox``, every ``.py`` below them), and the
    JDK and Maven installed (resolved path, size and modification time of ``java`` and ``mvn``,
    and of Debian's Maven repository directory)."""
    h = hashlib.sha256(KEY_FORMAT.encode())
    h.update(repr(_evaluator.EVALUATOR_VERSION).encode())
    migrationbench = Path(__file__).resolve().parents[1]
    for pkg in (migrationbench, migrationbench.parent / "sandbox"):
        for path in sorted(pkg.rglob("*.py")):
            name = path.relative_to(pkg).as_posix()
            h.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    for tool in ("java", "mvn"):
        found = shutil.which(tool)
        h.update(_stat_line(os.path.realpath(found)) if found else f"{tool}: none".encode())
    h.update(_stat_line("/usr/share/maven-repo"))
    return h.hexdigest()


def _stat_line(path: str) -> bytes:
    try:
        st = os.stat(path)
    except OSError:
        return f"{path}: none".encode()
    return f"{path}: {st.st_size} {st.st_mtime_ns}".encode()


@dataclass
class EvalCache:
    """Verdicts by key: in memory, and in ``directory`` (one JSON file per key) when given.

    Thread-safe within a process; several processes may share a directory (an entry is written
    to a temporary name and renamed into place). ``hits`` / ``misses`` / ``stored`` count this
    process's lookups.
    """

    directory: Path | None = None
    hits: int = 0
    misses: int = 0
    stored: int = 0
    _memory: dict[str, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _inflight: dict[str, threading.Lock] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.directory is not None:
            self.directory = Path(self.directory)
            prepare_directory(self.directory)

    def key_lock(self, key: str) -> threading.Lock:
        """The lock that makes concurrent lookups of ``key`` evaluate once."""
        with self._lock:
            return self._inflight.setdefault(key, threading.Lock())

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored verdict of ``key`` (a copy), or None. A directory entry that is not this
        format's JSON for this key is ignored (a miss), with a warning."""
        with self._lock:
            hit = self._memory.get(key)
        if hit is None and self.directory is not None:
            path = self.directory / f"{key}.json"
            try:
                entry = json.loads(path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                entry = None
            except (OSError, ValueError) as exc:
                logger.warning("evaluation cache entry %s unreadable, ignored: %s", path, exc)
                entry = None
            if entry is not None:
                if (
                    isinstance(entry, dict)
                    and entry.get("key") == key
                    and isinstance(entry.get("verdict"), dict)
                ):
                    hit = entry["verdict"]
                    with self._lock:
                        self._memory[key] = hit
                else:
                    logger.warning("evaluation cache entry %s is not an entry for its key, ignored", path)
        with self._lock:
            if hit is None:
                self.misses += 1
            else:
                self.hits += 1
        return copy.deepcopy(hit) if hit is not None else None

    def put(self, key: str, verdict: dict[str, Any]) -> None:
        with self._lock:
            self._memory[key] = copy.deepcopy(verdict)
            self.stored += 1
        if self.directory is not None:
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}-", suffix=".tmp", dir=self.directory)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"key": key, "verdict": verdict}, f)
            os.replace(tmp, self.directory / f"{key}.json")


_RUN_CACHES: dict[str, EvalCache] = {}
_RUN_CACHES_LOCK = threading.Lock()


class CacheDirectoryError(UsageError):
    """The evaluation cache's directory cannot be used as it is (nothing of it was changed)."""


def prepare_directory(directory: Path) -> None:
    """Create ``directory`` (and its parents) for the cache, itself with mode 0700 (host only: no
    sandbox uid can list, read or write it), or check an existing one: a directory of this user
    that no one else may read or write. An existing directory is never changed: a shared one
    (``/tmp``, a team directory) given by mistake keeps its mode.

    Raises:
        CacheDirectoryError: ``directory`` (or a parent) is not a directory, cannot be created, or
            exists with group/other permissions or another owner.
    """
    try:
        directory.mkdir(parents=True, mode=0o700)
        return
    except FileExistsError:
        pass
    except OSError as exc:
        raise CacheDirectoryError(
            f"evaluation cache {directory}: cannot be created: {exc.strerror or exc}"
        ) from exc
    check_existing_directory(directory)


def check_existing_directory(directory: Path) -> None:
    """See :func:`prepare_directory` (the existing case).

    Raises:
        CacheDirectoryError: as :func:`prepare_directory`.
    """
    try:
        st = os.stat(directory)
    except OSError as exc:
        raise CacheDirectoryError(f"evaluation cache {directory}: {exc.strerror or exc}") from exc
    if not stat.S_ISDIR(st.st_mode):
        raise CacheDirectoryError(f"evaluation cache {directory}: exists and is not a directory")
    wrong = []
    if st.st_uid != os.getuid():
        wrong.append(f"owned by uid {st.st_uid}, not this user (uid {os.getuid()})")
    if st.st_mode & 0o077:
        wrong.append(f"open to others (mode {stat.S_IMODE(st.st_mode):04o})")
    if wrong:
        raise CacheDirectoryError(
            f"evaluation cache {directory}: an existing directory {' and '.join(wrong)}: the cache's "
            "directory must be this user's alone (mode 0700), and an existing one is not changed. Give a new "
            "directory (it is created with mode 0700), or chmod 700 it if it is yours alone"
        )


def cache_directory(run_dir: str | os.PathLike[str]) -> Path | None:
    """Where a run's verdicts live: ``$STRANDS_ART_EVAL_CACHE`` if set to a directory, None if it is
    off (:data:`~strands_art.validation.OFF_WORDS`), else ``run_dir/eval-cache`` (also for unset,
    empty or :data:`~strands_art.validation.ON_WORDS`)."""
    setting = os.environ.get(CACHE_ENV, "").strip()
    switch = env_switch(setting)
    if switch is False:
        return None
    return Path(setting).expanduser() if setting and switch is None else Path(run_dir) / RUN_CACHE_DIR


def check_cache_setting(run_dir: str | os.PathLike[str]) -> None:
    """Check ``$STRANDS_ART_EVAL_CACHE`` before a run starts (``train --env migrationbench`` and
    ``migrate`` call it before a model loads), creating nothing: an existing directory as
    :func:`prepare_directory` wants it; a new one under a directory this user can write.

    Raises:
        CacheDirectoryError: naming the directory and what is wrong.
    """
    directory = cache_directory(run_dir)
    if directory is None:
        return
    setting = os.environ.get(CACHE_ENV, "").strip()
    given = f"{CACHE_ENV}={setting}: " if directory != Path(run_dir) / RUN_CACHE_DIR else ""
    try:
        if os.path.lexists(directory):
            check_existing_directory(directory)
            return
        parent = directory.parent
        while not os.path.lexists(parent) and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            raise CacheDirectoryError(
                f"evaluation cache {directory}: cannot be created: {parent} is not a directory this user can write"
            )
    except CacheDirectoryError as exc:
        raise CacheDirectoryError(f"{given}{exc}") from None


def cache_for_run(run_dir: str | os.PathLike[str]) -> EvalCache | None:
    """The cache a run's rollouts share (one object per directory in this process) in
    :func:`cache_directory`, or None when the cache is off.

    Raises:
        CacheDirectoryError: see :func:`prepare_directory`.
    """
    directory = cache_directory(run_dir)
    if directory is None:
        return None
    where = os.path.realpath(directory)
    with _RUN_CACHES_LOCK:
        if where not in _RUN_CACHES:
            _RUN_CACHES[where] = EvalCache(Path(where))
        return _RUN_CACHES[where]


def cacheable(verdict: dict[str, Any]) -> bool:
    """A verdict that depends only on the tree: scored (no ``evaluation_error``) and without a
    timeout among its reasons."""
    details = verdict.get("details") or {}
    reasons = set(details.get("reasons") or ())
    return (
        "evaluation_error" not in verdict
        and not (reasons & UNCACHED_REASONS)
        and not details.get("timed_out")
    )


Evaluate = Callable[..., dict[str, Any]]


def cached_evaluate_command(
    repo_dir: str | os.PathLike[str],
    task_dir: str | os.PathLike[str],
    timeout_s: float = 300.0,
    *,
    cache: EvalCache | None,
    scratch_dir: Path | None = None,
    unsafe_no_sandbox: bool = False,
    evaluate: Evaluate | None = None,
) -> dict[str, Any]:
    """:func:`.evaluator.evaluate_command` memoized by content (see the module doc); the same
    arguments, the same result and the same exceptions, plus ``details["eval_cache"]``.

    Args:
        cache: where verdicts are kept; None evaluates ``repo_dir`` directly, as without this module.
        scratch_dir: where the host's copy is made (and the evaluation's own directory).
        evaluate: the evaluation (default :func:`.evaluator.evaluate_command`); tests pass a counter.

    A tree the host's copy refuses (too large, too deep, too slow to copy: ``UnsafeFile``, or
    unreadable) is evaluated directly, uncached, so it fails exactly as it would without the cache.
    """
    evaluate = evaluate or _evaluator.evaluate_command
    run = functools.partial(evaluate, timeout_s=timeout_s, scratch_dir=scratch_dir,
                            unsafe_no_sandbox=unsafe_no_sandbox)  # fmt: skip
    if cache is None or not Path(repo_dir).is_dir():
        return run(repo_dir, task_dir)
    top = Path(tempfile.mkdtemp(prefix="strands-art-evalcopy-", dir=scratch_dir))
    try:
        copy = top / "repo"
        try:
            host = Identity(os.getuid(), os.getgid(), drop=False)  # the copy stays the host's
            left_out = copy_for_build(Path(repo_dir), copy, host, timeout_s)
            digest = tree_digest(copy)
            task = task_digest(os.path.realpath(task_dir))
        except (OSError, ValueError, RecursionError) as exc:
            logger.info("evaluation of %s not cached (%s: %s)", repo_dir, type(exc).__name__, exc)
            return run(repo_dir, task_dir)
        key = hashlib.sha256(
            json.dumps(
                {
                    "tree": digest,
                    "left_out": left_out,
                    "task": task,
                    "evaluator": evaluator_version(),
                    "timeout_s": float(timeout_s),
                    "unsafe_no_sandbox": bool(unsafe_no_sandbox),
                    "offline": os.environ.get("STRANDS_ART_MAVEN_OFFLINE"),
                },
                sort_keys=True,
            ).encode()
        ).hexdigest()
        with cache.key_lock(key):
            hit = cache.get(key)
            if hit is not None:
                hit.setdefault("details", {})["eval_cache"] = {"hit": True, "key": key}
                return hit
            verdict = run(copy, task_dir)
            details = verdict.setdefault("details", {})
            if "left_out_of_build" in details:  # what the host's copy left out of the workspace
                details["left_out_of_build"] = left_out[:50]
            if cacheable(verdict):
                cache.put(key, verdict)
            details["eval_cache"] = {"hit": False, "key": key, "stored": cacheable(verdict)}
            return verdict
    finally:
        try:
            remove_tree(top)
        except OSError as exc:
            logger.warning("could not remove %s: %s", top, exc)
