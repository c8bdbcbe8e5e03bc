"""Normalization proportional to a turn's new messages (the session's known-good messages).

A harness re-sends the whole history every turn; normalizing and scanning all of it again (for
lone surrogates: :func:`~strands_art.history.normalize.normalize_message`) made the heal grow
with the history. :class:`KnownMessages` keeps the last recorded request's normalized messages
and its answer, and takes a re-sent message that is *the same* as the known one at its position
(:func:`same_as_normalized`) without normalizing it again.
"""

from __future__ import annotations

from typing import Any

from strands_art.history import normalize as _normalize
from strands_art.history.normalize import REASONING_FIELDS, MessageError, NormalizeWork


class KnownMessages:
    """Normalization proportional to a turn's new messages.

    A harness re-sends the whole history every turn. The messages of the last request (and the
    answer the gateway gave to it) were normalized and checked then; a request message that is
    *the same* as the known message at its position (:func:`same_as_normalized`: its fields
    compared as strings, no scan, no parse) is taken as that known message. Only new or changed
    messages are normalized (and scanned for lone surrogates); ``work`` counts what was done.
    """

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.work = NormalizeWork()

    def normalize(self, messages: Any) -> list[dict[str, Any]]:
        """Like :func:`~strands_art.history.normalize.normalize_messages`, reusing the known messages that are unchanged."""
        if not isinstance(messages, list) or not messages:
            raise MessageError(0, "messages must be a non-empty list")
        known = self.messages
        out = []
        for i, m in enumerate(messages):
            if i < len(known) and same_as_normalized(m, known[i]):
                out.append(known[i])
            else:
                out.append(_normalize.normalize_message(i, m, self.work))
        return out

    def remember(self, messages: list[dict[str, Any]]) -> None:
        """Record normalized messages (a committed request plus its answer) as known-good."""
        self.messages = list(messages)


def same_as_normalized(raw: Any, norm: dict[str, Any]) -> bool:
    """True only when ``normalize_message(i, raw) == norm`` for a ``norm`` that normalize_message
    produced: every field normalization reads is compared, as exact strings, to ``norm``'s.

    Conservative: any form that normalization would change (content parts, arguments given as
    an object, reasoning under a name or in a form other than the stored one) answers False, and
    the message is normalized in full. Cost: string comparisons (memcmp), no scan or parse.
    """
    if type(raw) is not dict or raw.get("role") != norm["role"]:
        return False
    content = raw.get("content")
    if content is None:
        content = ""
    if type(content) is not str or content != norm["content"]:
        return False
    role = norm["role"]
    if role == "tool":
        call_id, name = raw.get("tool_call_id"), raw.get("name")
        return (
            (call_id is None or type(call_id) is str)
            and (call_id or "") == norm["tool_call_id"]
            and (name is None or type(name) is str)
            and (name or None) == norm.get("name")
        )
    if role != "assistant":
        return True
    reasoning = norm.get("reasoning_content")
    seen = reasoning is None
    for field_name in REASONING_FIELDS:
        value = raw.get(field_name)
        if value is None or value == "" and type(value) is str:
            continue  # no reasoning under this name
        if type(value) is not str or value != reasoning:
            return False
        seen = True
    if not seen:
        return False
    calls = raw.get("tool_calls")
    known_calls = norm.get("tool_calls") or []
    if calls is None or (type(calls) is list and not calls):
        return not known_calls
    if type(calls) is not list or len(calls) != len(known_calls):
        return False
    for tc, known in zip(calls, known_calls, strict=True):
        if type(tc) is not dict:
            return False
        fn = tc.get("function", tc)
        if type(fn) is not dict:
            return False
        call_id, name, args = tc.get("id"), fn.get("name"), fn.get("arguments")
        kfn = known["function"]
        if not (
            (call_id is None or type(call_id) is str)
            and (call_id or "") == known["id"]
            and type(name) is str
            and name == kfn["name"]
            and type(args) is str
            and type(kfn["arguments"]) is str
            and args == kfn["arguments"]
        ):
            return False
    return True
