"""Divergences from a linear history, and how far a heal is from a plain re-render.

:class:`HistoryDivergence` is what ``on_nonlinear="error"`` raises; :func:`describe` writes the
one-line detail every reset / disable event and error carries; :func:`token_distance` measures
drift (token edit distance). See docs/linear-history.md.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

try:  # rapidfuzz computes token edit distances in C; difflib is the fallback
    from rapidfuzz.distance import Levenshtein as _Levenshtein
except ImportError:  # pragma: no cover
    _Levenshtein = None


class HistoryDivergence(RuntimeError):
    """Linear mode with ``on_nonlinear="error"``: the request is not an append-only continuation.

    Attributes:
        reason: "message_edited", "tools_changed", "template_prefix_unstable" or
            "closer_unresolved".
        message_index: index of the first differing message (None when not message-specific).
        lineage: the lineage id the request was compared with.
    """

    def __init__(self, reason: str, message_index: int | None, detail: str, lineage: int | None) -> None:
        where = f" at message {message_index}" if message_index is not None else ""
        super().__init__(f"linear history diverged{where} ({reason}): {detail}")
        self.reason = reason
        self.message_index = message_index
        self.lineage = lineage


def token_distance(a: list[int], b: list[int]) -> int:
    """Token edit distance (Levenshtein over token IDs) between two ID lists."""
    if _Levenshtein is not None:
        return int(_Levenshtein.distance(a, b))
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()  # pragma: no cover
    return sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in ops if tag != "equal")  # pragma: no cover


def describe(reason: str, stored: list[dict[str, Any]], messages: list[dict[str, Any]], k: int | None) -> str:
    """What diverged: the stored and received message ``k``, or the reason in words."""
    if k is not None and k < len(stored):
        return f"stored {_preview(stored[k])} but got " + (
            _preview(messages[k]) if k < len(messages) else "no message (the request is shorter)"
        )
    if reason == "tools_changed":
        return "the tool specs differ from the ones this history was rendered with"
    if reason == "closer_unresolved":
        return "the end of the last assistant turn could not be located in the new render"
    return "the chat template rendered earlier messages differently"


def _preview(msg: dict[str, Any] | None, n: int = 60) -> str:
    if msg is None:
        return "<none>"
    text = msg.get("content") or json.dumps(msg.get("tool_calls") or "", default=str)
    text = text if len(text) <= n else text[:n] + "..."
    return f"{msg.get('role')}: {text!r}"
