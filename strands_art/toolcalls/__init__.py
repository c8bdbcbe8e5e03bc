"""Output parsers: sampled text (special tokens kept) → content, reasoning, tool calls.

Formats: Hermes/Qwen3 JSON (:mod:`.hermes`), Qwen2.5 JSON with fenced/bare recovery
(:mod:`.jsoncalls`) and Qwen3-Coder XML (:mod:`.qwen3_coder`), chosen
from the chat template by :func:`parser_for_template`; reasoning split by :mod:`.reasoning`.
"""

from __future__ import annotations

from strands_art.toolcalls.base import DEFAULT_END_MARKERS, ParsedOutput, ToolCall, ToolCallParser
from strands_art.toolcalls.hermes import HermesParser, format_tool_calls
from strands_art.toolcalls.jsoncalls import Qwen25JsonParser
from strands_art.toolcalls.qwen3_coder import Qwen3CoderParser
from strands_art.toolcalls.reasoning import prompt_opens_think, split_reasoning
from strands_art.toolcalls.select import parser_for_template, render_tools_instruction, supports_tools

__all__ = [
    "DEFAULT_END_MARKERS",
    "HermesParser",
    "ParsedOutput",
    "Qwen25JsonParser",
    "Qwen3CoderParser",
    "ToolCall",
    "ToolCallParser",
    "format_tool_calls",
    "parser_for_template",
    "prompt_opens_think",
    "render_tools_instruction",
    "split_reasoning",
    "supports_tools",
]
