"""Llama 3.x (3, 3.1, 3.2, 3.3): headers, ``<|eot_id|>``/``<|eom_id|>``, JSON tool calls.

Format (Meta's templates, e.g. ``trl/chat_templates/llama3_1.jinja``)::

    <|begin_of_text|><|start_header_id|>system<|end_header_id|>\\n\\n
    Cutting Knowledge Date: December 2023\\nToday Date: 26 Jul 2024\\n\\n...<|eot_id|>
    <|start_header_id|>assistant<|end_header_id|>\\n\\n
    {"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>

- End tokens: ``<|eot_id|>`` (end of turn), ``<|eom_id|>`` (end of message: the model expects a
  tool result, ipython mode) and ``<|end_of_text|>`` (EOS). A turn sampled to ``<|eom_id|>`` is
  closed: the closer logic does not append ``<|eot_id|>`` after it.
- Tool calls: the whole content is one JSON object ``{"name": ..., "parameters": {...}}``
  (``"arguments"`` is accepted too), optionally after ``<|python_tag|>``; several calls may be
  separated by ``;`` (vLLM's ``llama3_json`` parser reads the same). Content that starts like a
  call but does not parse is ill-formed; any other content is text.
- History rewrites: the 3.1/3.2 templates print ``Today Date: <date_string>``; 3.2 fills it from
  ``strftime_now`` at every render, so a rollout crossing midnight would change its first
  tokens. The family fixes ``date_string`` when the renderer is built (override it with
  ``chat_template_kwargs={"date_string": ...}``). The template renders ``arguments | tojson``, so
  string arguments are decoded to a dict before rendering. The template emits
  ``<|begin_of_text|>`` itself and the renderer encodes without special tokens: one BOS.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from typing import Any

from strands_art.families.base import ModelFamily, arguments_dict, finish, ill_formed, with_arguments
from strands_art.toolcalls.base import (
    ParsedOutput,
    ToolCall,
    resolve_tool_names,
    strip_end_markers,
)

PYTHON_TAG = "<|python_tag|>"
END_TOKENS = ("<|eot_id|>", "<|eom_id|>", "<|end_of_text|>")
_DECODER = json.JSONDecoder()
_SEP = re.compile(r"\s*;\s*")
_CALL_START = re.compile(r'\{\s*"name"\s*:')


class Llama3JsonParser:
    """Parser for Llama 3.x JSON tool calls (see the module docstring)."""

    name = "llama3_json"

    def __init__(self, end_markers: Sequence[str] = END_TOKENS) -> None:
        self.end_markers = tuple(dict.fromkeys((*end_markers, *END_TOKENS)))

    def parse(
        self,
        text: str,
        tool_names: set[str] | None = None,
        *,
        tools: Sequence[dict] | None = None,
        think_open: bool = False,
    ) -> ParsedOutput:
        names = resolve_tool_names(tool_names, tools)
        content = strip_end_markers(text, self.end_markers)
        body = content.strip()
        tagged = body.startswith(PYTHON_TAG)
        if tagged:
            body = body[len(PYTHON_TAG) :].lstrip()
        if not tagged and not _CALL_START.match(body):
            return finish(content, None, [], names)
        calls: list[ToolCall] = []
        pos = 0
        while True:
            try:
                obj, end = _DECODER.raw_decode(body, pos)
            except json.JSONDecodeError as exc:
                what = (
                    "<|python_tag|> code (built-in tools are not supported)"
                    if tagged and not calls
                    else "JSON"
                )
                return ill_formed(content, None, f"invalid {what} in a Llama 3 tool call: {exc.msg}")
            call = _call(obj)
            if isinstance(call, str):
                return ill_formed(content, None, call)
            calls.append(call)
            sep = _SEP.match(body, end)
            if end == len(body):
                break
            if sep is None or sep.end() == len(body):
                if sep is not None:  # a trailing ";"
                    break
                return ill_formed(
                    content, None, f"unexpected text after a tool call: {body[end : end + 40]!r}"
                )
            pos = sep.end()
        return finish("", None, calls, names)


def _call(obj: Any) -> ToolCall | str:
    """A ToolCall from one decoded object, or what is wrong with it."""
    if not isinstance(obj, dict):
        return f"a Llama 3 tool call must be a JSON object, got {type(obj).__name__}"
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return 'missing or empty "name" in a Llama 3 tool call'
    args = obj.get("parameters", obj.get("arguments", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return f"parameters of {name!r} is a string that is not JSON"
    if not isinstance(args, dict):
        return f"parameters of {name!r} is a {type(args).__name__}, not a JSON object"
    return ToolCall(name=name, arguments=args)


class Llama3Family(ModelFamily):
    """Meta Llama 3, 3.1, 3.2, 3.3 (see the module docstring)."""

    name = "llama3"
    end_tokens = END_TOKENS
    closer_end_tokens = END_TOKENS

    def __init__(self) -> None:
        self._date = time.strftime("%d %b %Y")

    def detect(self, chat_template: str, tokenizer: Any) -> bool:
        return "<|start_header_id|>" in chat_template and "<|eot_id|>" in chat_template

    def parser(self, chat_template: str, end_markers: Sequence[str]) -> Llama3JsonParser:
        return Llama3JsonParser(end_markers)

    def template_vars(self) -> dict[str, Any]:
        """``date_string`` fixed now (the day the renderer was built), as "%d %b %Y"."""
        return {"date_string": self._date}

    def prepare_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Tool-call arguments as dicts (the template renders ``arguments | tojson``)."""
        return with_arguments(messages, arguments_dict)
