"""Canonical history: replay the assistant messages the gateway produced, report rewrites.

Harnesses rewrite history before they send it again: Strands replaces blank text with
"[blank text]" and unparseable tool input with ``{}``; OpenAI-compatible clients drop
``reasoning_content``, send ``content: null`` or re-serialize tool-call arguments (LangChain and
LiteLLM parse them and ``json.dumps`` them back, which changes spacing). A chat template renders
what it is given, so a rewritten assistant message would change the prompt tokens and fork the
row. Every front keeps one :class:`CanonicalHistory` per session (inside its
:class:`~strands_art.conversion.session.SessionConversion`): each assistant message a
client replays is mapped back to the one the gateway produced (by the tool-call ids the gateway
assigned, else by its text), and any other difference is recorded on the trajectory as a
reason-coded ``rewrite`` event (codes: ``unknown_assistant_message``, ``tool_call_removed``,
``tool_input_changed``, ``text_changed``, ``tool_result_changed``). Content the chat template
cannot render (an image a tool returned, a document, audio) reaches the model as placeholder
text and is recorded once per message as a ``non_text_content`` event; the rollout goes on.
"""

from __future__ import annotations

import logging
from typing import Any

from strands_art.conversion.incoming import Known
from strands_art.gateway import RolloutGateway
from strands_art.history.normalize import parsed_arguments

logger = logging.getLogger(__name__)

BLANK_TEXT = "[blank text]"  # what Strands stores for an assistant message without text


def _text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    return "" if content == BLANK_TEXT else content


class CanonicalHistory:
    """What the gateway produced in one session, and what the harness sent back.

    Args:
        gateway: where rewrite events are recorded (:meth:`RolloutGateway.record_event`).
        rollout_id: the session.

    Messages are OpenAI-format dicts with ``content`` a string (or None) and tool-call
    ``arguments`` a dict or a JSON string (compared parsed, so key order and spacing do not count).
    """

    def __init__(self, gateway: RolloutGateway, rollout_id: str) -> None:
        self.gateway = gateway
        self.rollout_id = rollout_id
        self._by_tool_id: dict[str, dict[str, Any]] = {}
        self._by_text: dict[str, dict[str, Any]] = {}
        self._tool_results: dict[str, str] = {}
        self._reported: set[tuple[int, str]] = set()

    @property
    def produced_tool_ids(self) -> list[str]:
        """The tool-call ids of every produced assistant message, in order."""
        return list(self._by_tool_id)

    def remember(self, assistant: dict[str, Any]) -> None:
        """Keep an assistant message the gateway produced (``GenerateResult.assistant_message``)."""
        for call in assistant.get("tool_calls", []):
            self._by_tool_id[call["id"]] = assistant
        if not assistant.get("tool_calls"):
            self._by_text[assistant["content"]] = assistant

    def assistant(self, index: int, seen: dict[str, Any]) -> dict[str, Any]:
        """The produced message ``seen`` (message ``index`` of the request) stands for, or ``seen``
        itself (reported as ``unknown_assistant_message``) when the gateway did not produce it."""
        produced = self._produced(seen)
        if produced is None:
            self._report(
                index, "unknown_assistant_message", "an assistant message the gateway did not produce"
            )
            return seen
        self._compare(index, seen, produced)
        return produced

    def _produced(self, seen: dict[str, Any]) -> dict[str, Any] | None:
        """The produced message ``seen`` stands for (by the tool-call ids, else by the text), or None."""
        produced = None
        for call in seen.get("tool_calls") or []:
            produced = self._by_tool_id.get(call.get("id", ""))
            if produced is not None:
                break
        if produced is None and not seen.get("tool_calls"):
            produced = self._by_text.get(_text(seen))
        return produced

    def maps_as_before(self, known: Known) -> bool:
        """Whether converting ``known.sent`` again would give ``known.out`` and no new event.

        Its events (keyed by message index, emitted once) were emitted when it was converted at
        the same index; only the mapping of an assistant message can change since (a later turn
        produced a message with the same text), so it is looked up again: dict look-ups on the
        ids or on the text string already hashed then, no parse.
        """
        if known.sent.get("role") != "assistant":
            return True
        return (self._produced(known.sent) or known.sent) is known.out

    def check_tool_result(self, index: int, message: dict[str, Any]) -> None:
        """Report a tool result whose text changed since the harness first sent it."""
        before = self._tool_results.setdefault(message.get("tool_call_id", ""), message.get("content"))
        if before != message.get("content"):
            self._report(
                index,
                "tool_result_changed",
                f"result of {message.get('tool_call_id')} changed (e.g. truncated)",
            )

    def report_non_text(self, index: int, placeholders: list[str]) -> None:
        """Record a ``non_text_content`` event (once per message) for content the template
        cannot render and the model saw as placeholder text instead
        (:func:`~strands_art.conversion.strands.non_text_placeholder`)."""
        if placeholders and (index, "non_text_content") not in self._reported:
            self._reported.add((index, "non_text_content"))
            logger.info("message %d: non-text content replaced by placeholders %s", index, placeholders)
            self.gateway.record_event(
                self.rollout_id,
                "non_text_content",
                "; ".join(placeholders),
                message=index,
                code="non_text_content",
                placeholders=list(placeholders),
            )

    def _compare(self, index: int, seen: dict[str, Any], produced: dict[str, Any]) -> None:
        seen_calls = {c.get("id", ""): c.get("function", c) for c in seen.get("tool_calls") or []}
        for call in produced.get("tool_calls", []):
            got = seen_calls.get(call["id"])
            if got is None:
                self._report(index, "tool_call_removed", f"tool call {call['id']} was removed by the harness")
            elif _arguments(got.get("arguments")) != parsed_arguments(call["function"]["arguments"]):
                self._report(index, "tool_input_changed", f"input of tool call {call['id']} was rewritten")
        if _text(seen) != produced["content"]:
            self._report(index, "text_changed", "assistant text was rewritten by the harness")

    def _report(self, index: int, kind: str, reason: str) -> None:
        if (index, kind) in self._reported:
            return
        self._reported.add((index, kind))
        logger.info("history rewrite at message %d: %s (%s)", index, kind, reason)
        self.gateway.record_event(self.rollout_id, "rewrite", f"{kind}: {reason}", message=index, code=kind)


def _arguments(args: Any) -> Any:
    """Parsed arguments, or the raw value when the harness sent something that is not an object
    (it then differs from the produced call and is reported as ``tool_input_changed``)."""
    try:
        return parsed_arguments(args)
    except ValueError:
        return args
