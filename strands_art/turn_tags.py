"""Calls a Strands agent throws away, recognized by the provider and tagged on their turns.

A provider sees only calls, yet some of its responses never become part of the agent's
conversation, and some calls are not the agent's turns at all (strands-agents >= 1.0):

- ``AfterModelCallEvent.retry`` set by a hook: "the current model response is discarded and the
  model is called again" (strands/hooks/events.py). Tag ``discarded``, reason ``retry``.
- a cancelled turn (``agent.cancel()``): the response is replaced by the cancel message
  (stop reason ``cancelled``), or the agent stops reading the stream before its end. Tag
  ``discarded``, reason ``cancelled`` / ``not_delivered``.
- a ``SummarizingConversationManager`` summarization call: the manager appends the user
  message ``"Please summarize this conversation."`` (strands/agent/conversation_manager/
  compression/context_compression.py ``generate_summary``, and the dedicated-agent path). Tag
  ``summarizer``.

The provider finds the agent in ``invocation_state["agent"]`` (set by ``Agent``) and adds one
``AfterModelCallEvent`` callback per agent. Strands runs that event's callbacks in reverse order
of registration, so ours runs before a user hook may set ``retry``: the event is kept and read
at the provider's next call (a retry always makes one). Tags land on the turn and its row
(:meth:`~strands_art.gateway.RolloutGateway.tag_turn`); the trainer leaves ``discarded`` turns
out of the loss by default (``GRPOConfig.exclude_turn_tags``).
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

from strands.hooks import AfterModelCallEvent

from strands_art.gateway import GatewayError, RolloutGateway

logger = logging.getLogger(__name__)

SUMMARIZE_REQUEST = "Please summarize this conversation."  # strands' summarization request text
DISCARDED = "discarded"
SUMMARIZER = "summarizer"


def is_summarizer_call(messages: list[dict[str, Any]], tool_specs: Any) -> bool:
    """Whether a Strands call is a conversation manager's summarization request: no tools and
    the last message is the user text ``SUMMARIZE_REQUEST``."""
    if tool_specs or not messages:
        return False
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "user":
        return False
    texts = [b.get("text") for b in last.get("content") or [] if isinstance(b, dict) and "text" in b]
    return texts == [SUMMARIZE_REQUEST]


class TurnTagger:
    """Watches the agents that call one provider and tags the turns they throw away.

    Args:
        gateway: where the tags go.
    """

    def __init__(self, gateway: RolloutGateway) -> None:
        self.gateway = gateway
        self._agents: weakref.WeakSet[Any] = weakref.WeakSet()
        self._last: tuple[str, int] | None = None  # (session, turn) of the latest delivered turn
        self._pending: list[tuple[AfterModelCallEvent, str, int]] = []

    def watch(self, invocation_state: dict[str, Any] | None) -> None:
        """Register the AfterModelCallEvent callback on the calling agent (once per agent)."""
        agent = (invocation_state or {}).get("agent")
        hooks = getattr(agent, "hooks", None)
        if agent is None or hooks is None or agent in self._agents:
            return
        try:
            hooks.add_callback(AfterModelCallEvent, self._after_model_call)
        except Exception as exc:  # an agent-like object without the hook registry we know
            logger.warning("cannot watch agent %r for discarded calls: %s", agent, exc)
            return
        self._agents.add(agent)

    def produced(self, session: str, turn: int) -> None:
        """The provider delivered ``turn`` of ``session`` to the agent."""
        self._last = (session, turn)

    def settle(self) -> None:
        """Read the kept events: tag every turn a hook asked to retry (call before each new call)."""
        pending, self._pending = self._pending, []
        for event, session, turn in pending:
            if event.retry:
                self.tag(
                    session, turn, DISCARDED, "retry: an AfterModelCallEvent hook discarded the response"
                )

    def tag(self, session: str, turn: int, tag: str, reason: str) -> None:
        try:
            self.gateway.tag_turn(session, turn, tag, reason)
        except (GatewayError, IndexError) as exc:  # the session was closed meanwhile
            logger.warning("cannot tag turn %d of %s as %s: %s", turn, session, tag, exc)

    def _after_model_call(self, event: AfterModelCallEvent) -> None:
        if self._last is None or event.stop_response is None:
            return
        session, turn = self._last
        self._last = None
        if event.stop_response.stop_reason == "cancelled":
            self.tag(session, turn, DISCARDED, "cancelled: the agent was cancelled during the turn")
            return
        self._pending.append((event, session, turn))
