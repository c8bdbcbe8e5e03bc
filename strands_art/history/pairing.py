"""Tool results paired with the calls they answer, as OpenAI's API requires.

A tool result that names no call, names a call no assistant message made, or answers a call
that was already answered cannot be attributed: the chat template would render it against the
wrong call (or the harness lost one), and a row built on it teaches the model a conversation
that never happened. :func:`check_tool_pairing` refuses such a history before anything is
sampled or recorded.
"""

from __future__ import annotations

from typing import Any

from strands_art.history.normalize import MessageError


def check_tool_pairing(messages: list[dict[str, Any]]) -> None:
    """Check that every ``tool`` message answers one call of the assistant message before it.

    ``messages`` are normalized OpenAI messages (``tool_call_id`` a string, "" when absent;
    assistant ``tool_calls`` with their ``id``). The tool messages after an assistant message
    with calls answer those calls, each once, in any order; a call left unanswered when the
    next assistant or user message begins, or when the history ends after some but not all
    of the last calls' results, is refused too (a history ending in the assistant message
    with calls itself is left to the caller).

    Raises:
        MessageError: naming the message and the id: a tool message without ``tool_call_id``,
            one whose id no preceding assistant call carries (an orphan), one answering a call
            already answered (a duplicate), a tool message with no assistant call before it,
            or a call left unanswered.
    """
    pending: dict[str, int] = {}  # call id -> index of the assistant message that made it
    answered: set[str] = set()
    owner = -1
    for index, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            call_id = message.get("tool_call_id") or ""
            if not call_id:
                raise MessageError(index, "tool message has no 'tool_call_id': which call does it answer?")
            if call_id in answered:
                raise MessageError(
                    index, f"tool_call_id {call_id!r} was already answered (a duplicate tool result)"
                )
            if call_id not in pending:
                where = f"message {owner}" if owner >= 0 else "any earlier assistant message"
                raise MessageError(
                    index, f"tool_call_id {call_id!r} answers no tool call of {where} (an orphan tool result)"
                )
            del pending[call_id]
            answered.add(call_id)
            continue
        if role == "system":  # instructions between calls and results do not end the results
            continue
        _check_answered(pending, index)
        if role == "assistant":
            calls = message.get("tool_calls") or []
            owner = index if calls else -1
            pending = {}
            answered = set()
            for call in calls:
                call_id = call.get("id") or ""
                if not call_id:
                    raise MessageError(index, "a tool call has no 'id': its result cannot be paired")
                if call_id in pending:
                    raise MessageError(index, f"two tool calls share the id {call_id!r}")
                pending[call_id] = index
    if answered:  # a history ending in some results of the last calls but not all
        _check_answered(pending, len(messages))


def _check_answered(pending: dict[str, int], index: int) -> None:
    if pending:
        call_id, owner = next(iter(pending.items()))
        raise MessageError(owner, f"tool call {call_id!r} has no tool result before message {index}")
