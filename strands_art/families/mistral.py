"""Mistral (SentencePiece v3 and later, Tekken): ``[INST]``, ``[TOOL_CALLS]``, ``</s>``.

Format (templates from ``mistral_common``'s ``generate_chat_template``)::

    <s>[AVAILABLE_TOOLS] [...][/AVAILABLE_TOOLS][INST] SYSTEM\\n\\nUSER[/INST]
    [TOOL_CALLS] [{"name": "f", "arguments": {...}, "id": "a1B2c3D4e"}]</s>
    [TOOL_RESULTS] {"content": ..., "call_id": "a1B2c3D4e"}[/TOOL_RESULTS]

- End token: ``</s>`` (EOS), which is also the template's closer.
- Tool calls: ``[TOOL_CALLS]`` then a JSON list of ``{"name", "arguments", "id"}`` objects (a
  single object is accepted). The template refuses call ids that are not nine characters, so the
  family's :meth:`MistralFamily.call_id` keeps the id the model sampled when it is nine
  alphanumerics not yet used in the rollout, and otherwise derives one (:func:`~strands_art.families.base.alnum_id`).
- History rewrites: the system prompt and the tool list are written into the *last* user
  message, so they move when a new user message arrives (tree mode forks there; linear mode
  reports ``template_prefix_unstable``); inside a tool loop (one user message) they stay put.
  Tool results whose text is a number are re-rendered as that number. String arguments are
  decoded to a dict before rendering, so the template writes them as ``mistral_common``'s
  encoder does (``json.dumps`` spacing), whatever spacing the harness used.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from strands_art.families.base import (
    FamilyParser,
    ModelFamily,
    alnum_id,
    arguments_dict,
    finish,
    ill_formed,
    with_arguments,
)
from strands_art.toolcalls import strictjson
from strands_art.toolcalls.base import ParsedOutput, ToolCall
from strands_art.toolcalls.callobj import CallShapeError, read_call
from strands_art.toolcalls.hermes import _raw_value

TOOL_CALLS = "[TOOL_CALLS]"
END_TOKENS = ("</s>",)
_DECODER = strictjson.DECODER
_ID = re.compile(r"[A-Za-z0-9]{9}")


class MistralParser(FamilyParser):
    """Parser for Mistral ``[TOOL_CALLS]`` JSON (see the module docstring)."""

    name = "mistral"

    end_tokens = END_TOKENS

    def parse_content(self, content: str, names: set[str] | None, think_open: bool) -> ParsedOutput:
        at = content.find(TOOL_CALLS)
        if at == -1:
            return finish(content, None, [], names)
        before, body = content[:at], content[at + len(TOOL_CALLS) :]
        items = _objects(body)
        if isinstance(items, str):
            return ill_formed(content, None, items)
        calls = []
        for item, item_text in items:
            call = _call(item, item_text)
            if isinstance(call, str):
                return ill_formed(content, None, call)
            calls.append(call)
        if not calls:
            return ill_formed(content, None, "[TOOL_CALLS] with an empty list")
        problems = [f"text before [TOOL_CALLS] kept as content: {before[:40]!r}"] if before.strip() else []
        return finish(before.strip(), None, calls, names, problems)


def _call(item: Any, json_text: str) -> ToolCall | str:
    try:
        call = read_call(item, "Mistral")
    except CallShapeError as exc:
        return str(exc)
    key = call.arguments_key
    raw = _raw_value(json_text, item[key], key) if key else None
    return ToolCall(name=call.name, arguments=call.arguments, raw_arguments=raw, id=call.id)


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def mistral_ids(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages whose tool-call ids and ``tool_call_id``s the Mistral template accepts.

    A harness often replaces the model's nine-character ids with its own (``call_abc123``,
    ``toolu_...``), which the template refuses. Ids are mapped, not refused:

    - a call id that is not nine alphanumerics gets a derived one (a hash of the harness id, or
      of the message position when there is none: the same every turn, so renders stay stable);
    - a tool result naming a mapped id gets the mapped id; one naming no earlier call answers the
      latest assistant's calls by position (as the Harmony family does), so a result the harness
      re-labelled still follows the call the model made (with the id the model sampled).

    Messages needing no change are shared, not copied. A tool result that names no earlier call
    and has no call left to answer keeps its id (the template then says what is wrong).
    """
    mapped: dict[str, str] = {}
    known: set[str] = set()
    last: list[str] = []
    answered = 0
    out = []
    for i, m in enumerate(messages):
        calls = m.get("tool_calls") if m.get("role") == "assistant" else None
        if calls:
            new_calls = []
            for k, tc in enumerate(calls):
                cid = tc.get("id") or ""
                if _valid_id(cid):
                    new = cid
                else:  # derived from the harness id, or the position when there is none
                    new = mapped.get(cid) or alnum_id(f"harness-id:{cid}" if cid else f"position:{i}", 0, k)
                if cid:
                    mapped[cid] = new
                known.add(new)
                new_calls.append(tc if new == cid else {**tc, "id": new})
            last, answered = [tc["id"] for tc in new_calls], 0
            m = (
                {**m, "tool_calls": new_calls}
                if any(a is not b for a, b in zip(new_calls, calls, strict=True))
                else m
            )
        elif m.get("role") == "tool":
            tid = m.get("tool_call_id") or ""
            new = tid if tid in known else mapped.get(tid)
            if new is None and answered < len(last):
                new = last[answered]
            answered += 1
            if new is not None and new != tid:
                m = {**m, "tool_call_id": new}
        out.append(m)
    return out


def _objects(body: str) -> list[tuple[Any, str]] | str:
    """The JSON values after ``[TOOL_CALLS]`` with their exact source text: a list's items, or
    one object; or what is wrong."""
    ws = re.compile(r"\s*")
    pos = ws.match(body).end()
    listed = body.startswith("[", pos)
    if listed:
        pos = ws.match(body, pos + 1).end()
    out: list[tuple[Any, str]] = []
    while True:
        try:
            value, end = _DECODER.raw_decode(body, pos)
        except json.JSONDecodeError as exc:
            return f"invalid JSON after [TOOL_CALLS]: {exc.msg}"
        out.append((value, body[pos:end]))
        pos = ws.match(body, end).end()
        if not listed:
            break
        if body.startswith(",", pos):
            pos = ws.match(body, pos + 1).end()
            continue
        if body.startswith("]", pos):
            pos += 1
            break
        return "unclosed tool-call list after [TOOL_CALLS]"
    if body[pos:].strip():
        return f"unexpected text after the tool calls: {body[pos : pos + 40]!r}"
    return out


class MistralFamily(ModelFamily):
    """Mistral instruct models with ``[INST]``/``[TOOL_CALLS]`` templates (see the module docstring)."""

    name = "mistral"
    end_tokens = END_TOKENS
    call_list_closers = ("]",)
    closer_end_tokens = END_TOKENS
    turn_start_tokens = ("[INST]",)

    def detect(self, chat_template: str, tokenizer: Any) -> bool:
        return "[INST]" in chat_template

    def parser(self, chat_template: str, end_markers: Sequence[str]) -> MistralParser:
        return MistralParser(end_markers)

    def prepare_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Tool-call arguments as dicts (rendered ``| tojson``, as mistral_common writes them);
        call ids the template would refuse mapped to nine-character ids (:func:`mistral_ids`)."""
        return mistral_ids(with_arguments(messages, arguments_dict))

    def __init__(self) -> None:
        self._issued: OrderedDict[str, set[str]] = OrderedDict()  # rollout -> ids given out

    def call_id(self, rollout_id: str, turn: int, k: int, sampled: str = "") -> str:
        """The sampled id when it is nine alphanumerics and new in the rollout, else a derived
        nine-character id (ids stay unique within a rollout; the last 4,096 rollouts are tracked)."""
        issued = self._issued.setdefault(rollout_id, set())
        self._issued.move_to_end(rollout_id)
        while len(self._issued) > 4096:
            self._issued.popitem(last=False)
        new = (
            sampled
            if _ID.fullmatch(sampled or "") and sampled not in issued
            else alnum_id(rollout_id, turn, k)
        )
        issued.add(new)
        return new
