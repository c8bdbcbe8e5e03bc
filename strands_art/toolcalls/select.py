"""Pick the output parser for a ChatML-style template, and a tool prompt for templates without tools.

The model family (:mod:`strands_art.families`) decides the parser first; Qwen/ChatML and the
generic family fall back to :func:`parser_for_template` for the Qwen formats below.

:func:`parser_for_template` reads the template text:

- ``<function=`` and ``<parameter=`` → Qwen3-Coder XML (:class:`Qwen3CoderParser`; Qwen3-Coder,
  Qwen3.5/3.6 templates);
- ``<arg_key>`` → None: GLM-4.5's ``<tool_call>NAME<arg_key>..`` format is not supported;
- ``<tool_call>`` and Qwen2.5's default system prompt ("You are Qwen, created by Alibaba Cloud")
  → :class:`Qwen25JsonParser`: the tagged JSON first, then unambiguous fenced/bare JSON calls,
  which Qwen2.5(-Coder) models often write instead;
- ``<tool_call>`` → Hermes/Qwen3 JSON (:class:`HermesParser`; Qwen3, Hermes);
- anything else → None: the template has no tool-call format we know.

Templates that ignore ``tools`` (SmolLM2's plain ChatML, for one) get tools the Hermes way: the
gateway appends :func:`render_tools_instruction` to the system message (creating one if needed),
renders earlier assistant tool calls with :func:`strands_art.toolcalls.hermes.format_tool_calls`
as content, and parses the output with :class:`HermesParser`. :func:`supports_tools` tells the two
cases apart.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from strands_art.toolcalls.base import DEFAULT_END_MARKERS, ToolCallParser
from strands_art.toolcalls.hermes import HermesParser
from strands_art.toolcalls.jsoncalls import Qwen25JsonParser
from strands_art.toolcalls.qwen3_coder import Qwen3CoderParser

QWEN25_MARKER = "You are Qwen, created by Alibaba Cloud"
"""Qwen2.5's default system prompt: only its templates have it (Qwen3's have none)."""


def parser_for_template(
    chat_template: str | None, end_markers: Sequence[str] = DEFAULT_END_MARKERS
) -> ToolCallParser | None:
    """The parser matching a chat template's tool-call syntax, or None (see module docstring)."""
    if not chat_template:
        return None
    if "<function=" in chat_template and "<parameter=" in chat_template:
        return Qwen3CoderParser(end_markers)
    if "<arg_key>" in chat_template:
        return None
    if "<tool_call>" in chat_template and QWEN25_MARKER in chat_template:
        return Qwen25JsonParser(end_markers)
    if "<tool_call>" in chat_template:
        return HermesParser(end_markers)
    return None


def supports_tools(chat_template: str | None) -> bool:
    """True when the template renders ``tools`` itself (it mentions the ``tools`` variable and a
    tool-call syntax we parse)."""
    return bool(chat_template) and "tools" in chat_template and parser_for_template(chat_template) is not None


def render_tools_instruction(tools: Sequence[dict]) -> str:
    """A Hermes-style system-prompt section offering ``tools``, worded as Qwen3's template words it.

    Args:
        tools: tool specs as given to ``apply_chat_template(tools=...)`` (OpenAI format
            ``{"type": "function", "function": {...}}`` or bare specs); each is written as one
            JSON line.

    Returns:
        The section text (starts with ``# Tools``; no trailing newline). The gateway appends it to
        the system message after a blank line.

    Raises:
        ValueError: ``tools`` is empty.
    """
    if not tools:
        raise ValueError("render_tools_instruction needs at least one tool")
    lines = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)
    return (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        f"<tools>\n{lines}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n"
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )
