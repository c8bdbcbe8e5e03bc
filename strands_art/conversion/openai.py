"""OpenAI chat messages as the gateway's canonical messages (pure; records nothing).

The HTTP front's first step of the conversion path (:mod:`strands_art.conversion`):
:func:`openai_request` validates and normalizes a request's messages
(:func:`~strands_art.history.normalize.normalize_message`), replaces content the chat template
cannot render by placeholder text (:func:`replace_non_text_parts`) and checks that every tool
result answers a call (:func:`~strands_art.history.pairing.check_tool_pairing`), before a
session is opened or anything recorded.

Proportional to the new messages: a harness re-sends the whole history every turn. With the
session's :class:`RequestKnown` (the last recorded request's messages), a message that is *the
same* as the known one at its position (:func:`~strands_art.history.known.same_as_normalized`:
string comparisons, no scan, no parse) is taken as it was; only new or changed messages are
normalized and scanned, and :attr:`RequestKnown.work` counts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from strands_art.conversion.incoming import Incoming, Known
from strands_art.conversion.strands import non_text_placeholder
from strands_art.history.known import same_as_normalized
from strands_art.history.normalize import NormalizeWork, normalize_message
from strands_art.history.pairing import check_tool_pairing

OPENAI_NON_TEXT_PARTS = {"image_url": "image", "input_audio": "audio", "file": "file"}


def replace_non_text_parts(message: Any) -> tuple[Any, list[str]]:
    """An OpenAI chat message with its ``image_url`` / ``input_audio`` / ``file`` content parts
    replaced by text parts holding placeholder text (:func:`non_text_placeholder`), and the
    placeholders. Anything else is returned unchanged (validation happens later)."""
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        return message, []
    parts, placeholders = [], []
    for part in message["content"]:
        kind = OPENAI_NON_TEXT_PARTS.get(part.get("type")) if isinstance(part, dict) else None
        if kind is None:
            parts.append(part)
            continue
        body = part.get(part["type"]) if isinstance(part.get(part["type"]), dict) else {}
        fmt = body.get("format")
        url = body.get("url")
        if fmt is None and isinstance(url, str) and url.startswith("data:"):
            fmt = url[5:].split(";", 1)[0].split(",", 1)[0] or None
        placeholder = non_text_placeholder(kind, fmt, None, body.get("filename"))
        placeholders.append(placeholder)
        parts.append({"type": "text", "text": placeholder})
    return ({**message, "content": parts} if placeholders else message), placeholders


class RequestKnown:
    """The messages of a session's last recorded request, as the conversion path left them.

    Attributes:
        entries: one :class:`Known` per message of that request, in order.
        work: messages normalized in full and characters scanned, over the session's requests
            (what must not grow with the history).
    """

    def __init__(self) -> None:
        self.entries: list[Known] = []
        self.work = NormalizeWork()

    def remember(self, incoming: list[Incoming], out: list[dict[str, Any]]) -> None:
        """Keep a recorded request: its incoming messages and what the conversion made of them."""
        self.entries = [Known(item.message, m) for item, m in zip(incoming, out, strict=True)]


def openai_request(
    messages: list[Any],
    known: RequestKnown | None = None,
    *,
    id_field: str = "tool_call_id",
    names: Sequence[str] | None = None,
) -> list[Incoming]:
    """A request's chat messages validated and normalized, with their placeholders; tool
    results checked against the calls they answer. Records nothing: a request refused here
    leaves no trace. A message equal to ``known``'s at its position is taken from it.
    ``id_field`` and ``names``: the protocol's words in pairing errors (see
    :func:`~strands_art.history.pairing.check_tool_pairing`).

    Raises:
        MessageError: a malformed message or an unpaired tool result (HTTP 400 ``invalid_message``).
    """
    entries = known.entries if known is not None else []
    work = known.work if known is not None else None
    out: list[Incoming] = []
    for index, raw in enumerate(messages):
        if index < len(entries) and same_as_normalized(raw, entries[index].sent):
            out.append(Incoming(index, entries[index].sent, known=entries[index]))
            continue
        raw, found = replace_non_text_parts(raw)
        out.append(Incoming(index, normalize_message(index, raw, work), tuple(found)))
    check_tool_pairing([item.message for item in out], id_field, names)
    return out


def forces_tool_choice(tool_choice: Any) -> bool:
    """Whether an OpenAI ``tool_choice`` asks for more than sampling does (anything but absent
    or ``"auto"``: ``"required"``, ``"none"``, a named function)."""
    return tool_choice not in (None, "auto")
