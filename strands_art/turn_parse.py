"""The parse step of a turn: sampled token IDs read back as text, reasoning and tool calls.

The gateway (:meth:`~strands_art.gateway.RolloutGateway.generate`) calls it once a sample came
back, the streaming preview (:meth:`~strands_art.gateway.RolloutGateway.preview`) on a partial
output. Pure: it records nothing. Decoding drops the end-of-turn tokens; whether the prompt
opened a ``<think>`` block is read from its last tokens; the family's tool parser
(:mod:`strands_art.toolcalls`) does the rest. The calls get the gateway's ids
(:meth:`~strands_art.families.base.ModelFamily.call_id`, unique within the session) and the
turn's assistant message is the one a harness replays (:mod:`strands_art.conversion`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from strands_art.render import ChatRenderer
from strands_art.toolcalls.base import ParsedOutput, ToolCall
from strands_art.toolcalls.reasoning import prompt_opens_think


def parse_output(
    renderer: ChatRenderer,
    prompt_ids: list[int],
    output_ids: list[int],
    tools: list[dict[str, Any]] | None,
    suffix: str = "",
) -> ParsedOutput:
    """Parse an output (token IDs after ``prompt_ids``, end-of-turn tokens at its end ignored).

    ``tools``: the turn's OpenAI-format tool specs (the parser checks call names against them).
    ``suffix``: text added after the decoded output (a call-list closer after a cut,
    :mod:`strands_art.turn_cut`), with a dangling ``,`` or newline before it removed.
    """
    eot = set(renderer.end_of_turn_ids)
    ids = list(output_ids)
    while ids and ids[-1] in eot:
        ids.pop()
    text = renderer.decode(ids)
    if suffix:  # a call-list closer after a cut (toolcalls/cut.py): no dangling separator before it
        text = text.rstrip(", \n") + suffix
    think_open = prompt_opens_think(renderer.decode(prompt_ids[-8:]))
    names = {(t.get("function", t)).get("name") for t in tools or []}
    return renderer.tool_parser.parse(text, names, tools=tools or [], think_open=think_open)


def session_calls(renderer: ChatRenderer, rollout_id: str, turn: int, parsed: ParsedOutput) -> list[ToolCall]:
    """The parsed calls with the gateway's ids (the family's :meth:`call_id`, unique in the session)."""
    family = renderer.family
    return [replace(c, id=family.call_id(rollout_id, turn, k, c.id)) for k, c in enumerate(parsed.tool_calls)]


def assistant_message(parsed: ParsedOutput, calls: list[ToolCall]) -> dict[str, Any]:
    """The OpenAI-format assistant message of a parsed turn (what a harness replays)."""
    assistant: dict[str, Any] = {"role": "assistant", "content": parsed.text}
    if parsed.reasoning is not None:
        assistant["reasoning_content"] = parsed.reasoning
    if calls:
        assistant["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": replay_arguments(c)},
            }
            for c in calls
        ]
    return assistant


def replay_arguments(call: ToolCall) -> str | dict[str, Any]:
    """Arguments for the canonical assistant message: the exact JSON text the model sampled when
    the parser kept it (a template renders a string verbatim, so the replay re-produces the
    sampled tokens), else the decoded dict."""
    return call.raw_arguments if call.raw_arguments is not None else call.arguments
