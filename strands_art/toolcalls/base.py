"""Shared types for output parsers: sampled text in, (content, reasoning, tool calls) out.

A parser reads the *decoded sampled output with special tokens kept* (it may start with
``<think>`` and end with ``<|im_end|>``). It never raises on model output: a botched tool call
leaves the text as text, sets :attr:`ParsedOutput.ill_formed` and says what failed in
:attr:`ParsedOutput.problems`. It never returns a partially parsed call.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

DEFAULT_END_MARKERS: tuple[str, ...] = ("<|im_end|>", "<|endoftext|>")
"""End-of-turn markers stripped from the end of the sampled text (ChatML / Qwen family)."""


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """One parsed tool call.

    Attributes:
        name: the function name as the model wrote it.
        arguments: the decoded arguments (a JSON object).
        raw: the exact sampled text of the call, ``<tool_call>`` ... ``</tool_call>`` included.
        raw_arguments: Hermes only: the exact JSON text the model wrote for the arguments (so a
            re-render can reproduce the sampled tokens); None for formats without one.
        id: the call id; parsers leave it empty, the gateway assigns one.
    """

    name: str
    arguments: dict[str, Any]
    raw: str = ""
    raw_arguments: str | None = None
    id: str = ""

    def to_openai(self, call_id: str | None = None) -> dict[str, Any]:
        """The call in OpenAI chat format (``arguments`` as a JSON string)."""
        return {
            "id": call_id if call_id is not None else self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments, ensure_ascii=False)},
        }


@dataclass
class ParsedOutput:
    """What a parser makes of one sampled output.

    Attributes:
        text: the assistant content (reasoning and well-formed tool calls removed, end-of-turn
            marker stripped). When a tool call is ill-formed this is the whole content as sampled.
        reasoning: the ``<think>`` block's text, or None when the output had none.
        tool_calls: the parsed calls in order; empty when any call was ill-formed.
        ill_formed: True when the output tried to call a tool but the syntax was broken.
        problems: human-readable notes on everything that was off (ill-formed syntax, unknown
            tools, parameters kept as strings, stray text between calls, unclosed reasoning).
        unknown_tools: names of parsed calls that were not among the offered tools. Those calls are
            kept in :attr:`tool_calls` (the tool runner answers with an error the model can learn
            from); ``ill_formed`` stays False for them.
        recovered: one note per call recovered from a form other than the template's own (e.g.
            ``"fenced_json"``, ``"bare_json"``); the gateway records them on the trajectory.
    """

    text: str
    reasoning: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    ill_formed: bool = False
    problems: list[str] = field(default_factory=list)
    unknown_tools: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)


@runtime_checkable
class ToolCallParser(Protocol):
    """Turns decoded sampled text into :class:`ParsedOutput`. Never raises on model output."""

    name: str

    def parse(
        self,
        text: str,
        tool_names: set[str] | None = None,
        *,
        tools: Sequence[dict] | None = None,
        think_open: bool = False,
    ) -> ParsedOutput:
        """Parse one sampled output.

        Args:
            text: decoded sampled output with special tokens.
            tool_names: names offered to the model; None means "do not check". Derived from
                ``tools`` when omitted.
            tools: the tool specs offered (OpenAI ``{"type": "function", "function": {...}}`` or
                bare ``{"name", "parameters"}``); used for parameter types (Qwen3-Coder XML).
            think_open: the rendered prompt already opened ``<think>`` (see
                :func:`strands_art.toolcalls.reasoning.prompt_opens_think`).
        """
        ...


def strip_end_markers(text: str, markers: Iterable[str]) -> str:
    """Remove end-of-turn markers (repeatedly) from the end of ``text``; nothing else changes."""
    markers = [m for m in markers if m]
    changed = True
    while changed:
        changed = False
        for marker in markers:
            if text.endswith(marker):
                text = text[: -len(marker)]
                changed = True
    return text


def tool_specs_by_name(tools: Sequence[dict] | None) -> dict[str, dict]:
    """Map tool name -> function spec (``{"name", "description", "parameters"}``).

    Accepts OpenAI-format entries (``{"type": "function", "function": {...}}``) and bare specs;
    entries without a name are skipped.
    """
    out: dict[str, dict] = {}
    for tool in tools or ():
        if not isinstance(tool, dict):
            continue
        spec = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        name = spec.get("name")
        if isinstance(name, str) and name:
            out[name] = spec
    return out


def resolve_tool_names(tool_names: set[str] | None, tools: Sequence[dict] | None) -> set[str] | None:
    """``tool_names`` if given, else the names in ``tools``, else None (no check)."""
    if tool_names is not None:
        return set(tool_names)
    if tools is not None:
        return set(tool_specs_by_name(tools))
    return None


def flag_unknown(out: ParsedOutput, tool_names: set[str] | None) -> ParsedOutput:
    """Record calls whose name was not offered (kept, but listed in ``unknown_tools``)."""
    if tool_names is None:
        return out
    for call in out.tool_calls:
        if call.name not in tool_names and call.name not in out.unknown_tools:
            out.unknown_tools.append(call.name)
            out.problems.append(f"unknown tool {call.name!r} (not among the offered tools)")
    return out
