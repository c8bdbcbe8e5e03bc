"""Strict JSON (RFC 8259) for tool calls: what the model writes is accepted only as JSON defines it.

Python's :mod:`json` accepts more than the RFC: the constants ``NaN``, ``Infinity`` and
``-Infinity``, and duplicate object keys (the last one silently wins). A tool call holding either
is ambiguous (no other parser reads it the same way), so here both are a
:class:`json.JSONDecodeError` (a ``ValueError``), which the parsers report as an ill-formed call.
Everything else is the standard library's decoder (``strict=True``: no raw control characters in
strings).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DECODER", "loads"]


class _Rejected(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _Rejected(f"{name} is not JSON (RFC 8259 has no NaN or Infinity)")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Rejected(f"duplicate key {key!r} in a JSON object")
        out[key] = value
    return out


class StrictDecoder(json.JSONDecoder):
    """``json.JSONDecoder`` rejecting NaN/Infinity and duplicate keys (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__(parse_constant=_no_constant, object_pairs_hook=_unique_keys, strict=True)

    def raw_decode(self, s: str, idx: int = 0) -> tuple[Any, int]:
        try:
            return super().raw_decode(s, idx)
        except _Rejected as exc:
            raise json.JSONDecodeError(str(exc), s, idx) from None


DECODER = StrictDecoder()


def loads(text: str) -> Any:
    """``json.loads`` under RFC 8259 (raises :class:`json.JSONDecodeError`)."""
    try:
        return DECODER.decode(text)
    except _Rejected as exc:
        raise json.JSONDecodeError(str(exc), text, 0) from None
