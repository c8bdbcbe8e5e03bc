"""A gateway turn as Strands stream events (the Strands front's way back; pure).

Stream events follow the Strands ``StreamEvent`` sequence: messageStart,
contentBlockStart/Delta/Stop per block, messageStop with a stop reason, metadata with usage.
The way in (Strands messages and tool specs as chat messages) is
:mod:`strands_art.conversion.strands`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def stream_events(
    text: str,
    reasoning: str | None,
    tool_calls: list[Any],
    finish_reason: str,
    usage: dict[str, int],
    latency_ms: int,
    *,
    streamed: str = "",
) -> Iterator[dict[str, Any]]:
    """Strands stream events for one assistant turn.

    ``tool_calls`` items need ``id``, ``name`` and ``arguments`` (dict). Stop reason:
    "tool_use" when there are tool calls, "max_tokens" on length, else "end_turn".
    ``streamed``: text already sent (:func:`text_delta_events`, a prefix of ``text``): the
    message and its text block are open; the rest of the text closes it, then come reasoning
    and tool calls.
    """
    if streamed:
        rest = text[len(streamed) :]
        if rest:
            yield {"contentBlockDelta": {"delta": {"text": rest}}}
        yield {"contentBlockStop": {}}
    else:
        yield {"messageStart": {"role": "assistant"}}
    if reasoning:
        yield {"contentBlockStart": {"start": {}}}
        yield {"contentBlockDelta": {"delta": {"reasoningContent": {"text": reasoning}}}}
        yield {"contentBlockStop": {}}
    if text and not streamed:
        yield {"contentBlockStart": {"start": {}}}
        yield {"contentBlockDelta": {"delta": {"text": text}}}
        yield {"contentBlockStop": {}}
    for call in tool_calls:
        yield {"contentBlockStart": {"start": {"toolUse": {"name": call.name, "toolUseId": call.id}}}}
        yield {
            "contentBlockDelta": {
                "delta": {"toolUse": {"input": json.dumps(call.arguments, ensure_ascii=False)}}
            }
        }
        yield {"contentBlockStop": {}}
    stop = STOP_REASONS.get(finish_reason, "end_turn")
    if tool_calls and finish_reason != "length":
        stop = "tool_use"
    yield {"messageStop": {"stopReason": stop}}
    yield {
        "metadata": {
            "usage": {
                "inputTokens": usage["prompt_tokens"],
                "outputTokens": usage["completion_tokens"],
                "totalTokens": usage["total_tokens"],
            },
            "metrics": {"latencyMs": latency_ms},
        }
    }


def text_delta_events(delta: str, first: bool) -> list[dict[str, Any]]:
    """Strands events for a streamed text delta; ``first`` opens the message and its text block."""
    events: list[dict[str, Any]] = []
    if first:
        events += [{"messageStart": {"role": "assistant"}}, {"contentBlockStart": {"start": {}}}]
    events.append({"contentBlockDelta": {"delta": {"text": delta}}})
    return events
