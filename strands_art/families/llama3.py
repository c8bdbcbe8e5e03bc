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
  (``"arguments"`` and ``"type": "function"`` are accepted too, keys in any order:
  :mod:`strands_art.toolcalls.callobj`), optionally after ``<|python_tag|>``; several calls may
  be separated by ``;`` (vLLM's ``llama3_json`` parser reads the same). Without
  ``<|python_tag|>`` a JSON answer is a call only when every object names an offered tool (no
  tools offered: always text, e.g. structured output with a ``"name"`` field); an attempted call
  that is broken (invalid JSON starting like a call to an offered tool, bad arguments, extra
  keys, a call-shaped object naming a tool not offered) is ill-formed
  (:func:`~strands_art.toolcalls.callobj.classify`); any other content is text. After
  ``<|python_tag|>`` the model declared a call: a broken one is ill-formed, an unknown name is
  kept and flagged.
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

from strands_art.families.base import (
    FamilyParser,
    ModelFamily,
    arguments_dict,
    finish,
    ill_formed,
    with_arguments,
)
from strands_art.toolcalls import strictjson
from strands_art.toolcalls.base import ParsedOutput, ToolCall
from strands_art.toolcalls.callobj import CallShapeError, read_call, untagged_calls

PYTHON_TAG = "<|python_tag|>"
END_TOKENS = ("<|eot_id|>", "<|eom_id|>", "<|end_of_text|>")
_DECODER = strictjson.DECODER
_SEP = re.compile(r"\s*;\s*")
#: an untagged object that starts like a call (``"type"`` may come first): group 1 is the name
_CALL_START = re.compile(r'\{\s*(?:"type"\s*:\s*"function"\s*,\s*)?"name"\s*:\s*"([^"\\]*)"')


class Llama3JsonParser(FamilyParser):
    """Parser for Llama 3.x JSON tool calls (see the module docstring)."""

    name = "llama3_json"

    end_tokens = END_TOKENS

    def parse_content(self, content: str, names: set[str] | None, think_open: bool) -> ParsedOutput:
        body = content.strip()
        tagged = body.startswith(PYTHON_TAG)
        if tagged:
            body = body[len(PYTHON_TAG) :].lstrip()
        elif not body.startswith("{") or names == set():
            return finish(content, None, [], names)  # no tool offered: a JSON answer is text
        values = _values(body)
        if not tagged:  # a JSON answer is a call only when it names an offered tool
            if isinstance(values, str):
                m = _CALL_START.match(body)
                if m and (names is None or m.group(1) in names):
                    return ill_formed(content, None, f"invalid JSON in a Llama 3 tool call: {values}")
                return finish(content, None, [], names)
            found = untagged_calls(values, names)
            if found is None:
                return finish(content, None, [], names)
            if isinstance(found, str):
                return ill_formed(content, None, found)
            return finish("", None, [ToolCall(name=c.name, arguments=c.arguments) for c in found], names)
        if isinstance(values, str):
            what = "<|python_tag|> code (built-in tools are not supported)"
            return ill_formed(content, None, f"invalid {what} in a Llama 3 tool call: {values}")
        calls: list[ToolCall] = []
        for value in values:
            try:
                call = read_call(value, "Llama 3")
            except CallShapeError as exc:
                return ill_formed(content, None, str(exc))
            calls.append(ToolCall(name=call.name, arguments=call.arguments))
        return finish("", None, calls, names)


def _values(body: str) -> list[Any] | str:
    """The JSON values of ``body`` separated by ``;`` (a trailing ``;`` allowed), or what is wrong."""
    values: list[Any] = []
    pos = 0
    while True:
        try:
            value, end = _DECODER.raw_decode(body, pos)
        except json.JSONDecodeError as exc:
            return exc.msg
        values.append(value)
        if end == len(body):
            return values
        sep = _SEP.match(body, end)
        if sep is None:
            return f"unexpected text after a tool call: {body[end : end + 40]!r}"
        if sep.end() == len(body):
            return values  # a trailing ";"
        pos = sep.end()


class Llama3Family(ModelFamily):
    """Meta Llama 3, 3.1, 3.2, 3.3 (see the module docstring)."""

    name = "llama3"
    end_tokens = END_TOKENS
    closer_end_tokens = END_TOKENS
    turn_start_tokens = ("<|start_header_id|>",)

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
