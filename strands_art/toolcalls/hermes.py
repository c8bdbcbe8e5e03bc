"""Hermes / Qwen3 JSON tool calls: ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``.

The format of the Qwen2.5/Qwen3 chat templates (and NousResearch Hermes); vLLM parses it with
its ``hermes`` tool parser. Several calls may follow each other (the Qwen3 template joins them
with ``\\n``, and puts ``\\n`` between non-empty content and the first call). ``arguments`` may
also be a JSON *string* holding an object (some models double-encode); it is decoded.

Strictness (a botched call is text plus ``ill_formed``, never a guessed call):

- the block must close with ``</tool_call>`` (an output cut off by the length limit is ill-formed);
- the body must be exactly one JSON object (surrounding whitespace allowed);
- ``name`` must be a non-empty string; ``arguments`` (or ``parameters``) must be an object (or a
  string holding one); keys in any order (:mod:`strands_art.toolcalls.callobj`). A missing
  ``arguments`` key reads as ``{}`` and is noted in ``problems``.

:attr:`ToolCall.raw_arguments` is the exact JSON text the model wrote for the arguments value, so
the gateway can hand it to a template that inserts string arguments verbatim (Qwen3 does) and
re-render the sampled tokens exactly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from strands_art.toolcalls import strictjson
from strands_art.toolcalls.base import ToolCall
from strands_art.toolcalls.callobj import CallShapeError, read_call
from strands_art.toolcalls.scan import CLOSE, CallSyntaxError, TaggedCallParser

_DECODER = strictjson.DECODER
_WS = re.compile(r"\s*")
_ARGS_KEY = re.compile(r'"arguments"\s*:\s*')


class HermesParser(TaggedCallParser):
    """Parser for Hermes/Qwen3 JSON tool calls (see the module docstring)."""

    name = "hermes"
    separators = ("\n",)
    stray_markers = (CLOSE,)

    def _read_call(self, content: str, start: int, specs: dict[str, dict]) -> tuple[ToolCall, int, list[str]]:
        if content.find(CLOSE, start) == -1:
            raise CallSyntaxError("unclosed <tool_call> (no </tool_call>; output cut off?)")
        j = _WS.match(content, start).end()
        try:
            obj, k = _DECODER.raw_decode(content, j)
        except json.JSONDecodeError as exc:
            raise CallSyntaxError(f"invalid JSON in <tool_call>: {exc.msg} at offset {exc.pos - j}") from None
        m = _WS.match(content, k).end()
        if not content.startswith(CLOSE, m):
            raise CallSyntaxError(f"unexpected text after the JSON object: {content[m : m + 40]!r}")
        if not isinstance(obj, dict):
            raise CallSyntaxError(f"the JSON in <tool_call> is a {type(obj).__name__}, not an object")
        try:
            shape = read_call(obj)
        except CallShapeError as exc:
            raise CallSyntaxError(str(exc)) from None
        name, arguments, key = shape.name, shape.arguments, shape.arguments_key
        notes: list[str] = []
        if shape.extra_keys:
            notes.append(f"ignored keys {list(shape.extra_keys)} in tool call {name!r}")
        raw_args: str | None = None
        if key is None:
            notes.append(f'tool call {name!r} has no "arguments"; read as {{}}')
        else:
            raw_args = _raw_value(content[j:k], obj[key], key)
        call = ToolCall(name=name, arguments=arguments, raw_arguments=raw_args)
        return call, m + len(CLOSE), notes


def _raw_value(json_text: str, value: Any, key: str = "arguments") -> str | None:
    """The exact source text of the top-level ``key`` value inside ``json_text``."""
    found = None
    for m in (_ARGS_KEY if key == "arguments" else re.compile(rf'"{key}"\s*:\s*')).finditer(json_text):
        try:
            candidate, end = _DECODER.raw_decode(json_text, m.end())
        except json.JSONDecodeError:
            continue
        if candidate == value and type(candidate) is type(value):
            found = json_text[m.end() : end]
    return found


def format_tool_calls(calls: Sequence[dict]) -> str:
    """Render tool calls the way the Qwen3 template does, for templates without tool support.

    Args:
        calls: OpenAI-format calls (``{"function": {"name", "arguments"}}``) or bare
            ``{"name", "arguments"}``; ``arguments`` a dict or a JSON string (inserted verbatim,
            as the Qwen3 template does).

    Returns:
        ``<tool_call>\\n{"name": "N", "arguments": {...}}\\n</tool_call>`` blocks joined by ``\\n``.
    """
    blocks = []
    for call in calls:
        fn = call.get("function", call)
        args = fn.get("arguments", {})
        args_text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        blocks.append(f'<tool_call>\n{{"name": "{fn["name"]}", "arguments": {args_text}}}\n</tool_call>')
    return "\n".join(blocks)
