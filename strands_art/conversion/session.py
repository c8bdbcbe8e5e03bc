"""One session's conversion state, and the one place where the conversion's events are emitted.

A front turns its request into :class:`~strands_art.conversion.incoming.Incoming` messages
(:func:`~strands_art.conversion.strands.strands_request`,
:func:`~strands_art.conversion.openai.openai_request`: pure, refuse bad input), then
:meth:`SessionConversion.canonical` walks them once: non-text content, harness rewrites of
assistant messages and changed tool results are recorded as events
(:class:`~strands_art.conversion.canonical.CanonicalHistory`) and each assistant message the
gateway produced is replaced by what it produced. The request fields a front did not apply are
recorded here too (:meth:`~SessionConversion.tool_choice_ignored`,
:meth:`~SessionConversion.field_ignored`).
"""

from __future__ import annotations

import json
from typing import Any

from strands_art.conversion.canonical import CanonicalHistory
from strands_art.conversion.incoming import Incoming
from strands_art.conversion.openai import RequestKnown
from strands_art.conversion.strands import StrandsKnown
from strands_art.gateway import RolloutGateway


class SessionConversion:
    """The conversion path's state for one session of a front.

    Args:
        gateway: where events are recorded (:meth:`RolloutGateway.record_event`).
        rollout_id: the session.

    Attributes:
        history: the canonical history (what the gateway produced, what was reported).
        known: the last recorded request's messages (HTTP front; :func:`openai_request` reuses them).
        strands_known: the last recorded call's Strands messages (Strands front;
            :func:`~strands_art.conversion.strands.strands_request` reuses them).
    """

    def __init__(self, gateway: RolloutGateway, rollout_id: str) -> None:
        self.gateway = gateway
        self.rollout_id = rollout_id
        self.history = CanonicalHistory(gateway, rollout_id)
        self.known = RequestKnown()
        self.strands_known = StrandsKnown()
        self.responses: dict[str, list[dict[str, Any]]] = {}

    def keep_response(self, response_id: str, conversation: list[dict[str, Any]]) -> None:
        """Keep the conversation a Responses API response ended (its messages without the
        instructions, then the produced assistant message), for a later ``previous_response_id``
        of the same rollout (dropped with the session)."""
        self.responses[response_id] = conversation

    def canonical(self, incoming: list[Incoming]) -> list[dict[str, Any]]:
        """The OpenAI-format messages for the gateway, one per incoming message, in order.

        Each assistant message the gateway produced is replaced by what it produced (so the
        prompt tokens are the ones the model saw); events: ``non_text_content`` (once per request
        message), ``rewrite`` (codes in :mod:`strands_art.conversion.canonical`). A message taken
        from the last recorded request (``known``) is not looked at again.
        """
        history = self.history
        out = []
        for item in incoming:
            if item.index is None:
                out.append(item.message)
                continue
            if item.known is not None and history.maps_as_before(item.known):
                out.append(item.known.out)
                continue
            message = item.message
            history.report_non_text(item.index, list(item.placeholders))
            if message["role"] == "assistant":
                message = history.assistant(item.index, message)
            elif message["role"] == "tool":
                history.check_tool_result(item.index, message)
            out.append(message)
        return out

    def remember(
        self,
        produced: dict[str, Any],
        incoming: list[Incoming] | None = None,
        out: list[dict[str, Any]] | None = None,
    ) -> None:
        """After a recorded turn: keep the assistant message the gateway produced
        (``GenerateResult.assistant_message``) and, when given, the request as converted
        (``incoming`` and the :meth:`canonical` messages made of it) for the next request."""
        self.history.remember(produced)
        if incoming is not None and out is not None:
            self.known.remember(incoming, out)

    def tool_choice_ignored(self, tool_choice: Any, **where: Any) -> None:
        """Record a ``tool_choice_ignored`` event: a forcing ``tool_choice`` (Strands' or OpenAI's)
        cannot be enforced on token-level sampling. ``where``: e.g. ``turn``."""
        self.gateway.record_event(
            self.rollout_id,
            "tool_choice_ignored",
            f"{describe_tool_choice(tool_choice)} is not enforced: sampling is unconstrained",
            **where,
            field="tool_choice",
            tool_choice=tool_choice,
        )

    def field_ignored(self, name: str, reason: str, **where: Any) -> None:
        """Record a ``request_field_ignored`` event for a request field the front did not apply."""
        self.gateway.record_event(self.rollout_id, "request_field_ignored", reason, **where, field=name)


def describe_tool_choice(tool_choice: Any) -> str:
    """``tool_choice <its JSON, keys sorted, at most 200 characters>`` (for warnings and events)."""
    return f"tool_choice {json.dumps(tool_choice, sort_keys=True)[:200]}"
