"""Token IDs in vLLM's completion responses: the ``token_ids`` field and the ``"token_id:N"``
strings of ``return_tokens_as_token_ids``.

A leaf module used by the non-streamed (:mod:`strands_art.backends.vllm`) and the streamed
(:mod:`strands_art.backends.vllm_stream`) readers, so that neither imports the other back.
"""

from __future__ import annotations

from typing import Any

from strands_art.backends.base import BackendError
from strands_art.validation import is_int

TOKEN_ID_PREFIX = "token_id:"
"""How vLLM writes a token in ``logprobs.tokens`` with ``return_tokens_as_token_ids``."""


def token_ids_from_strings(tokens: Any) -> list[int] | None:
    """IDs from ``["token_id:N", ...]``; None when ``tokens`` is not a list in that form."""
    if not isinstance(tokens, list):
        return None
    ids = []
    for tok in tokens:
        if not isinstance(tok, str) or not tok.startswith(TOKEN_ID_PREFIX):
            return None
        try:
            ids.append(int(tok[len(TOKEN_ID_PREFIX) :]))
        except ValueError:
            return None
    return ids


def check_ids(ids: Any, what: str) -> list[int]:
    """``ids`` if it is a list of non-negative integers (never a bool).

    Raises:
        BackendError: naming ``what`` (e.g. ``choices[0].token_ids``) and the start of the value.
    """
    if not isinstance(ids, list) or any(not is_int(t) or t < 0 for t in ids):
        raise BackendError(f"vLLM response: {what} is not a list of token IDs: {str(ids)[:80]}")
    return ids
