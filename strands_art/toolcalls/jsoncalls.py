"""Qwen2.5 tool calls: the template's ``<tool_call>`` JSON first, then fenced or bare JSON calls.

Qwen2.5(-Coder)-Instruct's template asks for ``<tool_call>{"name": ..., "arguments": {...}}
</tool_call>``, but the small models often write the same JSON object in a Markdown fence
(````` ```json ... ``` `````) or bare. :class:`Qwen25JsonParser` reads the tagged form exactly like
:class:`~strands_art.toolcalls.hermes.HermesParser` and, only when the output has no
``<tool_call>`` tag at all, recovers the untagged forms when they are unambiguous:

- **fenced**: one or more fenced blocks (language ``json`` or none) whose whole body is one JSON
  object with a ``name`` among the offered tools, ``arguments`` (or ``parameters``) an object (or
  a JSON string holding one), optionally ``"type": "function"``, keys in any order, and no other
  keys (:mod:`strands_art.toolcalls.callobj`) (or several such objects separated by whitespace); only
  whitespace between the blocks. Text may stand *before*
  the first block or *after* the last one, not both: a fenced JSON example with prose on both
  sides is prose.
- **bare**: the content starts (whitespace aside) with one or more such objects; text after
  them is kept as content (as a Hermes parser keeps text after a call).
- **listed**: every non-blank line is one such object, each after a list marker (``1.``,
  ``2)``, ``-``, ``*``): a numbered list of calls, as small models copy a numbered recipe.

Text kept next to a recovered call is noted in :attr:`ParsedOutput.problems`.

A fenced block after which nothing else follows, that starts like a call (``{`` with a ``"name"``
key) but does not parse or has the wrong shape, is an ill-formed call (``ill_formed`` with the
reason); so is an unclosed last block after call blocks whose body is empty or starts with ``{``
(the output ended inside a further call: the gateway then keeps the calls before it,
:mod:`strands_art.toolcalls.cut`). Everything recovered is listed in :attr:`ParsedOutput.recovered` (``"fenced_json"`` /
``"bare_json"``); the sampled tokens are never changed, the row keeps exactly what was sampled.

Replayed calls carry decoded ``arguments`` (``raw_arguments`` is None): this template writes
``arguments | tojson``, which would quote a JSON string a second time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from strands_art.toolcalls.base import ParsedOutput, ToolCall, flag_unknown, resolve_tool_names
from strands_art.toolcalls.callobj import CallShapeError, classify, read_call
from strands_art.toolcalls.hermes import HermesParser
from strands_art.toolcalls.scan import CLOSE, OPEN

_FENCE_OPEN = re.compile(r"```(?:json|JSON)?[ \t]*\n")
_FENCE_END = re.compile(r"\n?[ \t]*```")


def fenced_blocks(content: str) -> list[tuple[int, int, str]]:
    """``(start, end, body)`` of each fenced block (language ``json`` or none), in order.

    A body that starts with a JSON value ends where that value ends (so a JSON string holding
    ````` ``` ````` does not close the block early); any other body ends at the next fence. An
    unclosed block runs to the end of ``content``.
    """
    blocks = []
    pos = 0
    while (m := _FENCE_OPEN.search(content, pos)) is not None:
        j = _WS.match(content, m.end()).end()
        end = None
        try:
            _, k = _DECODER.raw_decode(content, j)
            close = _FENCE_END.match(content, k)
            if close is not None:
                end, body_end = close.end(), k
        except json.JSONDecodeError:
            pass
        if end is None:
            close = _FENCE_END.search(content, m.end())
            body_end = close.start() if close else len(content)
            end = close.end() if close else len(content)
        blocks.append((m.start(), end, content[m.end() : body_end]))
        pos = end
    return blocks


_DECODER = json.JSONDecoder()
_WS = re.compile(r"\s*")
_LISTED = re.compile(r"^\s*(?:\d{1,2}[.)]|[-*])\s*(\{.*\})\s*$")


class NotACall(ValueError):
    """A JSON text is not a tool call of the accepted shape (the message says why)."""


def call_from_json(body: str, tool_names: set[str] | None) -> ToolCall:
    """The tool call a JSON text spells, if it is exactly one call-shaped object.

    Raises:
        NotACall: invalid JSON, not an object, extra keys, no/unknown ``name``, bad ``arguments``.
    """
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as exc:
        raise NotACall(f"invalid JSON: {exc.msg} at offset {exc.pos}") from None
    return _call_from_obj(obj, tool_names, body.strip())


def calls_from_json_sequence(body: str, tool_names: set[str] | None) -> list[ToolCall]:
    """The calls of a text that is one or more call-shaped JSON objects separated by whitespace.

    Raises:
        NotACall: anything else in the text, or an object that is not a call (see
            :func:`call_from_json`).
    """
    calls: list[ToolCall] = []
    pos = _WS.match(body).end()
    while pos < len(body):
        try:
            obj, end = _DECODER.raw_decode(body, pos)
        except json.JSONDecodeError as exc:
            raise NotACall(f"invalid JSON: {exc.msg} at offset {exc.pos}") from None
        calls.append(_call_from_obj(obj, tool_names, body[pos:end]))
        pos = _WS.match(body, end).end()
    if not calls:
        raise NotACall("no JSON object")
    return calls


def _call_from_obj(obj: Any, tool_names: set[str] | None, raw: str) -> ToolCall:
    try:
        call = read_call(obj)
    except CallShapeError as exc:
        raise NotACall(str(exc)) from None
    if call.extra_keys:
        raise NotACall(f"unexpected keys {list(call.extra_keys)}")
    if tool_names is not None and call.name not in tool_names:
        raise NotACall(f"{call.name!r} is not an offered tool")
    return ToolCall(name=call.name, arguments=call.arguments, raw=raw)


def _looks_like_call(body: str, names: set[str] | None) -> bool:
    """A fenced body that tried to be a call (:func:`~strands_art.toolcalls.callobj.classify`):
    invalid JSON that starts like one, or an object it calls broken. Never when no tool was offered."""
    if names is not None and not names:
        return False
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        s = body.lstrip()
        return s.startswith("{") and '"name"' in s
    return isinstance(classify(obj, names), str)


def _cut_inside(content: str, start: int, end: int, body: str) -> bool:
    """The fenced block ``content[start:end]`` is unclosed (the output ended inside it) and its
    body, empty or starting with ``{``, may be the start of a call."""
    unclosed = end == len(content) and not content[start:end].endswith("```")
    return unclosed and (not body.strip() or body.lstrip().startswith("{"))


class Qwen25JsonParser(HermesParser):
    """Hermes ``<tool_call>`` JSON, plus unambiguous fenced/bare JSON calls (module docstring)."""

    name = "qwen2.5-json"

    def parse(
        self,
        text: str,
        tool_names: set[str] | None = None,
        *,
        tools: Sequence[dict] | None = None,
        think_open: bool = False,
    ) -> ParsedOutput:
        """See :class:`~strands_art.toolcalls.base.ToolCallParser`. Never raises on model output."""
        out = super().parse(text, tool_names, tools=tools, think_open=think_open)
        out.tool_calls = [replace(c, raw_arguments=None) for c in out.tool_calls]
        if out.tool_calls or out.ill_formed or OPEN in out.text or CLOSE in out.text:
            return out
        names = resolve_tool_names(tool_names, tools)
        recovered = self._fenced(out, names) or self._bare(out, names) or self._listed(out, names)
        return flag_unknown(recovered, names) if recovered is not None else out

    @staticmethod
    def _fenced(out: ParsedOutput, names: set[str] | None) -> ParsedOutput | None:
        content = out.text
        blocks = fenced_blocks(content)
        if not blocks:
            return None
        # only whitespace between the blocks, and text on one side at most: otherwise it is prose
        for a, b in zip(blocks, blocks[1:], strict=False):
            if content[a[1] : b[0]].strip():
                return None
        lead = content[: blocks[0][0]].rstrip()
        tail = content[blocks[-1][1] :].strip()
        if lead.strip() and tail:
            return None
        calls: list[ToolCall] = []
        for k, (start, end, body) in enumerate(blocks, 1):
            try:
                block_calls = calls_from_json_sequence(body, names)
            except NotACall as exc:
                if calls and k == len(blocks) and _cut_inside(content, start, end, body):
                    problem = f"fenced tool call {k}: unclosed (no closing ```; output cut off?)"
                    return replace(out, ill_formed=True, problems=[*out.problems, problem])
                if not _looks_like_call(body, names):
                    return None  # a code block that is not JSON-call-like: plain content
                return replace(out, ill_formed=True, problems=[*out.problems, f"fenced tool call {k}: {exc}"])
            raw = content[start:end] if len(block_calls) == 1 else None
            calls.extend(replace(c, raw=raw if raw is not None else c.raw) for c in block_calls)
        notes = [f"text after the tool calls kept as content: {tail[:60]!r}"] if tail else []
        return replace(
            out,
            text=lead or tail,
            tool_calls=calls,
            problems=[*out.problems, *notes],
            recovered=["fenced_json"] * len(calls),
        )

    @staticmethod
    def _bare(out: ParsedOutput, names: set[str] | None) -> ParsedOutput | None:
        content = out.text
        pos = _WS.match(content).end()
        if not content.startswith("{", pos):
            return None
        calls: list[ToolCall] = []
        while pos < len(content) and content.startswith("{", pos):
            try:
                obj, end = _DECODER.raw_decode(content, pos)
                call = _call_from_obj(obj, names, content[pos:end])
            except (json.JSONDecodeError, NotACall) as exc:
                if not calls:
                    return None  # does not start with a call: leave it as text
                if isinstance(exc, json.JSONDecodeError) and _looks_like_call(content[pos:], names):
                    # an unclosed or broken call after complete ones (cut at the token limit): the
                    # gateway's cut keeps the complete ones (strands_art.toolcalls.cut), never as content
                    problem = f"bare tool call {len(calls) + 1}: invalid JSON after {len(calls)} complete call(s) ({exc.msg}; output cut off?)"
                    return replace(out, ill_formed=True, problems=[*out.problems, problem])
                break
            calls.append(call)
            pos = _WS.match(content, end).end()
        tail = content[pos:].strip()
        notes = [f"text after the tool calls kept as content: {tail[:60]!r}"] if tail else []
        return replace(
            out,
            text=tail,
            tool_calls=calls,
            problems=[*out.problems, *notes],
            recovered=["bare_json"] * len(calls),
        )

    @staticmethod
    def _listed(out: ParsedOutput, names: set[str] | None) -> ParsedOutput | None:
        lines = [line for line in out.text.splitlines() if line.strip()]
        calls: list[ToolCall] = []
        for line in lines:
            m = _LISTED.match(line)
            if m is None:
                return None
            try:
                calls.append(replace(call_from_json(m.group(1), names), raw=line))
            except NotACall:
                return None
        if not calls:
            return None
        return replace(out, text="", tool_calls=calls, recovered=["listed_json"] * len(calls))
