"""Strands messages and tool specs as OpenAI-format chat messages (pure; records nothing).

Strands messages (https://strandsagents.com/latest/documentation/docs/user-guide/concepts/model-providers/custom_model_provider/)
hold content blocks: ``text``, ``toolUse`` ``{toolUseId, name, input}``, ``toolResult``
``{toolUseId, status, content: [{text}|{json}]}``, ``reasoningContent``
``{reasoningText: {text}}``; the gateway speaks OpenAI chat format. :func:`strands_request`
is the Strands front's first step of the conversion path (:mod:`strands_art.conversion`): it
validates and converts a whole call before anything is recorded; the events come after, in
:meth:`~strands_art.conversion.session.SessionConversion.canonical`. The way back (stream
events) is :mod:`strands_art.formats`.

Proportional to the new messages, as the HTTP front's step is: Strands re-sends its whole
history every call. With the session's :class:`StrandsKnown` (the last recorded call's Strands
messages, each with what the conversion made of it), a message that is *the same* as the known
one at its index (:func:`same_data`: a walk over its dicts and lists comparing keys in order and
leaves by type and value, no conversion, no JSON) is taken as converted then; only new or
changed messages are converted, and :attr:`StrandsKnown.work` counts them.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from strands_art.conversion.incoming import FieldError, Incoming, Known
from strands_art.conversion.tools import check_tool_names

FORCING_TOOL_CHOICES = ("any", "tool")  # Strands ToolChoice keys that force a tool call


class StrandsFormatError(ValueError):
    """A Strands message is malformed or holds a block this provider does not know."""


def tool_specs_to_openai(tool_specs: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Strands ToolSpec list → OpenAI ``[{"type": "function", "function": {...}}]`` (None if empty)."""
    if not tool_specs:
        return None
    out = []
    for spec in tool_specs:
        if not isinstance(spec, dict) or not spec.get("name"):
            raise StrandsFormatError(f"a tool spec needs a name: {spec!r}")
        schema = spec.get("inputSchema", {})
        schema = schema.get("json", schema) if isinstance(schema, dict) else {}
        out.append(
            {
                "type": "function",
                "function": {
                    "name": spec["name"],
                    "description": spec.get("description", ""),
                    "parameters": schema,
                },
            }
        )
    try:
        check_tool_names(out)
    except FieldError as exc:
        raise StrandsFormatError(str(exc)) from None
    return out


NON_TEXT_BLOCKS = ("image", "document", "video")  # Strands media blocks a text template cannot show


def non_text_placeholder(kind: str, fmt: Any = None, size: int | None = None, name: Any = None) -> str:
    """The text the model sees instead of content its chat template cannot render, e.g.
    ``[image omitted (png, 5120 bytes): this model reads text only]``. Deterministic in its
    arguments, so a replayed conversation renders to the same tokens every turn."""
    facts = [str(x) for x in (name, fmt) if x]
    if size is not None:
        facts.append(f"{size} bytes")
    detail = f" ({', '.join(facts)})" if facts else ""
    return f"[{kind} omitted{detail}: this model reads text only]"


def media_placeholder(block: dict[str, Any]) -> str | None:
    """Placeholder text for a Strands ``image`` / ``document`` / ``video`` block, else None."""
    for kind in NON_TEXT_BLOCKS:
        if kind in block:
            media = block[kind] if isinstance(block[kind], dict) else {}
            source = media.get("source") if isinstance(media.get("source"), dict) else {}
            data = source.get("bytes")
            size = len(data) if isinstance(data, (bytes, bytearray, str)) else None
            return non_text_placeholder(kind, media.get("format"), size, media.get("name"))
    return None


def tool_result_text(result: dict[str, Any], omitted: list[str] | None = None) -> str:
    """The text a chat template shows for a Strands toolResult (json parts serialized).

    An image, document or video part becomes :func:`non_text_placeholder` text; its
    placeholder is appended to ``omitted`` (when given) so the caller can record the event.
    Raises StrandsFormatError on any other block.
    """
    parts = []
    for block in result.get("content", []) or []:
        if "text" in block:
            parts.append(str(block["text"]))
        elif "json" in block:
            parts.append(json.dumps(block["json"], ensure_ascii=False))
        elif (placeholder := media_placeholder(block)) is not None:
            parts.append(placeholder)
            if omitted is not None:
                omitted.append(placeholder)
        else:
            raise StrandsFormatError(f"unsupported toolResult content block {sorted(block)}")
    text = "\n".join(parts)
    if result.get("status") == "error" and not text.lower().startswith("error"):
        text = f"Error: {text}"
    return text


def content_blocks(message: Any) -> list[dict[str, Any]]:
    """The content blocks of a Strands message; raises StrandsFormatError on a malformed one."""
    if not isinstance(message, dict):
        raise StrandsFormatError(f"a message must be a dict, got {type(message).__name__}")
    if message.get("role") not in ("user", "assistant"):
        raise StrandsFormatError(
            f"unknown message role {message.get('role')!r} (Strands uses user and assistant)"
        )
    blocks = message.get("content")
    if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
        raise StrandsFormatError(
            f"{message['role']} message content must be a list of content blocks, got {blocks!r:.80}"
        )
    return blocks


def strands_assistant_to_openai(message: dict[str, Any]) -> dict[str, Any]:
    """One Strands assistant message → an OpenAI assistant message (as Strands holds it)."""
    texts, reasoning, calls = [], [], []
    for block in content_blocks(message):
        if "text" in block:
            texts.append(block["text"])
        elif "toolUse" in block:
            tu = block["toolUse"]
            calls.append(
                {
                    "id": tu.get("toolUseId", ""),
                    "type": "function",
                    "function": {"name": tu.get("name", ""), "arguments": tu.get("input") or {}},
                }
            )
        elif "reasoningContent" in block:
            reasoning.append(block["reasoningContent"].get("reasoningText", {}).get("text", ""))
        else:
            raise StrandsFormatError(f"unsupported assistant content block {sorted(block)}")
    out: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if reasoning:
        out["reasoning_content"] = "".join(reasoning)
    if calls:
        out["tool_calls"] = calls
    return out


def strands_user_to_openai(message: dict[str, Any], omitted: list[str] | None = None) -> list[dict[str, Any]]:
    """One Strands user message → OpenAI tool messages (one per toolResult) then a user message.

    Image, document and video blocks become placeholder text (appended to ``omitted`` when
    given, see :func:`tool_result_text`); ``cachePoint`` blocks (a caching hint) are dropped.
    Raises StrandsFormatError on any other block.
    """
    tools, texts = [], []
    for block in content_blocks(message):
        if "toolResult" in block:
            tr = block["toolResult"]
            tools.append(
                {
                    "role": "tool",
                    "tool_call_id": tr.get("toolUseId", ""),
                    "content": tool_result_text(tr, omitted),
                }
            )
        elif "text" in block:
            texts.append(block["text"])
        elif (placeholder := media_placeholder(block)) is not None:
            texts.append(placeholder)
            if omitted is not None:
                omitted.append(placeholder)
        elif "cachePoint" in block:
            continue
        else:
            raise StrandsFormatError(
                f"unsupported user content block {sorted(block)} (text, toolResult, image, document, video)"
            )
    out = list(tools)
    if texts or not tools:
        out.append({"role": "user", "content": "".join(texts)})
    return out


_LEAVES = (str, int, float, bool, type(None), bytes)  # anything else: never the same, converted again


def same_data(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same data *and* would convert and render the same: dicts
    with the same keys in the same order (``json.dumps`` and a chat template keep key order,
    ``==`` does not), lists item by item, other values of the same type and equal (``1``,
    ``1.0`` and ``True`` differ; ``nan`` and a value of any other type are never the same).
    Cost: one step per dict, list and leaf; strings and bytes compared at C speed."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return len(a) == len(b) and all(
            ka == kb and same_data(va, vb) for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True)
        )
    if type(a) is list:
        return len(a) == len(b) and all(same_data(x, y) for x, y in zip(a, b, strict=True))
    return type(a) in _LEAVES and a == b


class StrandsKnown:
    """The Strands messages of a session's last recorded call, as the conversion path left them.

    Attributes:
        entries: per Strands message index, ``(snapshot, known)``: a deep copy of the message as
            it was sent (Strands may change its own list in place later: a conversation manager
            truncating a tool result) and one :class:`Known` per OpenAI message made of it; None
            for a message that cannot be copied (always converted).
        work: Strands messages converted in full, over the session's calls (what must not grow
            with the history).
    """

    def __init__(self) -> None:
        self.entries: list[tuple[Any, tuple[Known, ...]] | None] = []
        self.work = 0

    def reusable(self, index: int, message: Any) -> tuple[Known, ...] | None:
        """The known conversion of ``message`` at ``index``, when it is :func:`same_data` as the
        message converted there; else None."""
        entry = self.entries[index] if index < len(self.entries) else None
        try:
            same = entry is not None and same_data(message, entry[0])
        except RecursionError:  # nested past Python's limit: converted (and refused) as before
            same = False
        return entry[1] if same else None

    def remember(self, messages: list[Any], incoming: list[Incoming], out: list[dict[str, Any]]) -> None:
        """Keep a recorded call: its Strands ``messages``, the :func:`strands_request` items made
        of them and what :meth:`~strands_art.conversion.session.SessionConversion.canonical`
        made of those. A message taken from the known ones keeps its snapshot (it is the same);
        a converted one is copied."""
        grouped: dict[int, list[Known]] = {}
        reused: dict[int, bool] = {}
        for item, m in zip(incoming, out, strict=True):
            if item.index is None:
                continue
            grouped.setdefault(item.index, []).append(Known(item.message, m))
            reused[item.index] = reused.get(item.index, True) and item.known is not None
        entries: list[tuple[Any, tuple[Known, ...]] | None] = []
        for index, message in enumerate(messages):
            if reused.get(index) and index < len(self.entries) and self.entries[index] is not None:
                snapshot = self.entries[index][0]
            else:
                try:
                    snapshot = copy.deepcopy(message)
                except Exception:  # noqa: BLE001 - an uncopyable message is converted every call
                    entries.append(None)
                    continue
            entries.append((snapshot, tuple(grouped.get(index, ()))))
        self.entries = entries


def strands_request(
    messages: list[Any], system_prompt: str | None, known: StrandsKnown | None = None
) -> list[Incoming]:
    """A Strands call's messages as OpenAI messages, each with its Strands message index.

    The system prompt (when given) comes first, with no index (no event can concern it). An
    assistant message becomes one assistant message; a user message becomes one tool message per
    ``toolResult`` then a user message (:func:`strands_user_to_openai`), all with the user
    message's index; its non-text placeholders ride on the first of them. A message that is the
    same as ``known``'s at its index (:meth:`StrandsKnown.reusable`) is taken as converted then
    (each item carries its :class:`Known`). Records nothing.

    Raises:
        StrandsFormatError: a malformed message or an unknown block (nothing converted).
    """
    out: list[Incoming] = []
    if system_prompt:
        out.append(Incoming(None, {"role": "system", "content": system_prompt}))
    for index, message in enumerate(messages):
        reuse = known.reusable(index, message) if known is not None else None
        if reuse is not None:
            out.extend(Incoming(index, k.sent, known=k) for k in reuse)
            continue
        if known is not None:
            known.work += 1
        content_blocks(message)  # validates role and content shape (StrandsFormatError)
        if message.get("role") == "assistant":
            out.append(Incoming(index, strands_assistant_to_openai(message)))
            continue
        placeholders: list[str] = []
        converted = strands_user_to_openai(message, placeholders)
        for k, m in enumerate(converted):
            out.append(Incoming(index, m, tuple(placeholders) if k == 0 else ()))
    return out


def forces_tool_choice(tool_choice: Any) -> bool:
    """Whether a Strands ``tool_choice`` forces a call (``{"any": {}}``, ``{"tool": {...}}``):
    what token-level sampling cannot enforce. ``{"auto": {}}`` and None do not."""
    return isinstance(tool_choice, dict) and bool(set(tool_choice) & set(FORCING_TOOL_CHOICES))
