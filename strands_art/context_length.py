"""The model's own context length: where the gateway's default context budget comes from.

Sources, first that answers:

1. the backend's ``max_context_tokens`` attribute: llama.cpp's slot size (by default the GGUF's
   trained context), the vLLM server's ``max_model_len`` (``GET /v1/models``), the transformers
   model's ``max_position_embeddings``;
2. the model's ``config.json`` next to the tokenizer (``max_position_embeddings``,
   ``n_positions``, ``max_sequence_length``, ``seq_length``; e.g. SmolLM2-135M: 8,192);
3. the tokenizer's ``model_max_length`` when the tokenizer declares one (transformers uses
   ~1e30 for "not declared", which is ignored; e.g. Qwen3: 131,072).

With none of them :data:`FALLBACK_CONTEXT_TOKENS` is used and a warning says how to set the
budget (``RolloutGateway(..., max_context_tokens=N)``).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from strands_art.validation import is_int

logger = logging.getLogger(__name__)

FALLBACK_CONTEXT_TOKENS = 32768
CONFIG_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")
_UNDECLARED = 10**9  # transformers' VERY_LARGE_INTEGER (~1e30) means "no limit declared"


def config_context_length(directory: str | Path) -> int | None:
    """The context length a model directory's ``config.json`` declares (tokens), or None.

    Reads the first of :data:`CONFIG_KEYS` at the top level or under ``text_config``.
    A missing or unreadable file is None, not an error.
    """
    path = Path(directory) / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for scope in (config, config.get("text_config") if isinstance(config, dict) else None):
        if not isinstance(scope, dict):
            continue
        for key in CONFIG_KEYS:
            value = scope.get(key)
            if is_int(value) and value > 0:
                return int(value)
    return None


def tokenizer_context_length(tokenizer: Any, name: str | None = None) -> int | None:
    """The model's context length as known from the tokenizer's side (tokens), or None.

    ``name`` is the alias or directory the tokenizer was loaded from, when known; else the
    tokenizer's ``name_or_path``. Checks the model's ``config.json`` first, then the
    tokenizer's declared ``model_max_length``.
    """
    directory = None
    if name is not None:
        from strands_art.registry import ModelNotFound, resolve_dir

        try:
            directory = resolve_dir(name)
        except ModelNotFound:
            directory = None
    if directory is None:
        path = getattr(tokenizer, "name_or_path", None)
        directory = Path(path) if isinstance(path, str) and path and Path(path).is_dir() else None
    if directory is not None:
        found = config_context_length(directory)
        if found is not None:
            return found
    declared = getattr(tokenizer, "model_max_length", None)
    if isinstance(declared, int) and 0 < declared < _UNDECLARED:
        return declared
    return None


def default_context_tokens(backend: Any, tokenizer: Any, name: str | None = None) -> tuple[int, str]:
    """The gateway's default context budget and where it came from (``"backend"``,
    ``"model"`` or ``"fallback"``); see the module docstring for the order."""
    from_backend = getattr(backend, "max_context_tokens", None)
    if is_int(from_backend) and from_backend > 0:
        return int(from_backend), "backend"
    from_model = tokenizer_context_length(tokenizer, name)
    if from_model is not None:
        return from_model, "model"
    logger.warning(
        "the model's context length is unknown (no backend max_context_tokens, no config.json, no "
        "tokenizer model_max_length): using %d tokens; set RolloutGateway(..., max_context_tokens=N)",
        FALLBACK_CONTEXT_TOKENS,
    )
    return FALLBACK_CONTEXT_TOKENS, "fallback"
