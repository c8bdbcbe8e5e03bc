"""Tool results paired with the calls they answer, as OpenAI's API requires.

A tool result that names no call, names a call no assistant message made, or answers a call
that was already answered cannot be attributed: the chat template would render it against the
wrong call (or the harness lost one), and a row built on it teaches the model a conversation
that never happened. :func:`check_tool_pairing` refuses such a history before anything is
sampled or recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from strands_art.history.normalize import MessageError


def check_tool_pairing(
    messages: list[dict[str, Any]], id_field: str = "tool_call_id", names: Sequence[str] | None = None
) -> None:
    """Check that every ``tool`` message answers one call of the assistant message before it.

    ``messages`` are normalized OpenAI messages (``tool_call_id`` a string, "" when absent;
    assistant ``tool_calls`` with their ``id``). The tool messages after an assistant message
    with calls answer those calls, each once, in any order; a call left unanswered when the
    next assistant or user message begins, or when the history ends after some but not all
    of the last calls' results, is refused too (a history ending in the assistant message
    with calls itself is left to the caller). The errors speak the request's protocol:
    ``id_field`` is its name for the id a result answers (Anthropic's ``tool_use_id``, the
    Responses API's ``call_id``) and ``names[k]`` its name for message ``k`` (``messages.3``,
    ``input[5]``; default ``message k``).

    Raises:
        MessageError: naming the message and the id: a tool message without ``tool_call_id``,
            one whose id no preceding assistant call carries (an orphan), one answering a call
            already answered (a duplicate), a tool message with no assistant call before it,
            or a call left unanswered.
    """

    def name(k: int) -> str:
        if k >= len(messages):
            return "the end of the conversation"
        return names[k] if names is not None and k < len(names) else f"message {k}"

    pending: dict[str, int] = {}  # call id -> index of the assistant message that made it
    answered: set[str] = set()
    owner = -1
    for index, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            call_id = message.get("tool_call_id") or ""
            if not call_id:
                raise MessageError(index, f"a tool result has no '{id_field}': which call does it answer?")
            if call_id in answered:
                raise MessageError(
                    index, f"{id_field} {call_id!r} was already answered (a duplicate tool result)"
                )
            if call_id not in pending:
                where = name(owner) if owner >= 0 else "any earlier assistant message"
                raise MessageError(
                    index, f"{id_field} {call_id!r} answers no tool call of {where} (an orphan tool result)"
                )
            del pending[call_id]
            answered.add(call_id)
            continue
        if role == "system":  # instructions between calls and results do not end the results
            continue
        _check_answered(pending, name(index))
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
        _check_answered(pending, name(len(messages)))


def _check_answered(pending: dict[str, int], before: str) -> None:
    if pending:
        call_id, owner = next(iter(pending.items()))
        raise MessageError(owner, f"tool call {call_id!r} has no tool result before {before}")


def order_tool_results(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int]]:
    """The tool results of each assistant message with calls, in the order of its calls.

    A harness that runs parallel calls may send their results back in completion order. Chat
    templates pair results with calls by position (Qwen's ``<tool_response>`` blocks, Llama 3's
    ``ipython`` turns, DeepSeek's ``<｜tool▁output▁begin｜>``, Harmony's messages from
    ``functions.NAME``), so the model would read one call's result as another's. Each run of
    ``tool`` messages right after an assistant message with calls is put in call order by
    ``tool_call_id`` when every result of the run names a distinct call of that message; a run
    that does not (ids rewritten by the harness, results missing or extra) is left as sent.

    Args:
        messages: normalized OpenAI messages (``tool_call_id`` a string).

    Returns:
        ``(messages, moved)``: the messages (the same list when nothing moved, else a new list
        holding the same message objects) and the index of each assistant message whose
        results were reordered.
    """
    out: list[dict[str, Any]] | None = None
    moved: list[int] = []
    i = 0
    while i < len(messages):
        calls = messages[i].get("tool_calls") if messages[i]["role"] == "assistant" else None
        j = i + 1
        while j < len(messages) and messages[j]["role"] == "tool":
            j += 1
        if calls and j - i > 2:
            rank = {c.get("id"): k for k, c in enumerate(calls)}
            ids = [m.get("tool_call_id") for m in messages[i + 1 : j]]
            if all(x in rank for x in ids) and len(set(ids)) == len(ids):
                order = sorted(range(i + 1, j), key=lambda k: rank[messages[k].get("tool_call_id")])
                if order != list(range(i + 1, j)):
                    out = list(messages) if out is None else out
                    out[i + 1 : j] = [messages[k] for k in order]
                    moved.append(i)
        i = max(j, i + 1)
    return (messages if out is None else out), moved
