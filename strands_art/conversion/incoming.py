"""What the first step of the conversion path hands to the second: one message at a time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class FieldError(ValueError):
    """A request field a front's conversion cannot take (each front answers it in its own error
    shape, a 400 naming :attr:`field`).

    Attributes:
        field: the field at fault, as the protocol spells paths (``messages.2.content.0``,
            ``input[3]``, ``tools``).
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Known:
    """One message of the session's last recorded request, as the conversion path left it.

    Attributes:
        sent: the message as the harness sent it, normalized
            (:func:`~strands_art.history.normalize.normalize_message`).
        out: what the conversion handed to the gateway for it: ``sent``, or for an assistant
            message the one the gateway produced (:class:`~strands_art.conversion.canonical.CanonicalHistory`).
    """

    sent: dict[str, Any]
    out: dict[str, Any]


@dataclass(frozen=True)
class Incoming:
    """One OpenAI-format message on its way to the gateway.

    Attributes:
        index: the position of the message it came from in the front's request (a Strands
            message index, or a chat message index); None for a message no event can concern
            (the Strands system prompt).
        message: the OpenAI-format message.
        placeholders: non-text content of that request message, replaced by these texts
            (reported once per index as a ``non_text_content`` event).
        known: the same message of the session's last recorded request (HTTP front): its
            events were emitted then, so it is taken as it was, not converted again.
    """

    index: int | None
    message: dict[str, Any]
    placeholders: tuple[str, ...] = ()
    known: Known | None = None
