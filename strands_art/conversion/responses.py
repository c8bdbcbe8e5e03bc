"""Responses API requests as OpenAI chat messages (pure; records nothing).

The first half of the Responses front's step of the conversion path
(:mod:`strands_art.conversion`): :func:`responses_messages` turns ``instructions`` and
``input`` (https://platform.openai.com/docs/api-reference/responses/create) into OpenAI-format
chat messages, which then go through :func:`~strands_art.conversion.openai.openai_request` and
:meth:`~strands_art.conversion.session.SessionConversion.canonical` as a Chat Completions
request does (same prompt tokens, rows and events for the same conversation).

Items, as the gateway sees them:

- ``instructions``: a system message first (not carried over by ``previous_response_id``, as
  OpenAI's API does not);
- the conversation of ``previous_response_id`` (the caller resolves it within the rollout and
  passes its messages as ``previous``), then the ``input`` items;
- a string ``input``: one user message; message items ``{role, content}`` (``user``,
  ``system``, ``developer``, ``assistant``; content a string or ``input_text`` /
  ``output_text`` parts joined with ``""``; ``input_image`` / ``input_file`` parts become
  placeholder text and ``non_text_content`` events);
- consecutive ``reasoning``, assistant ``message`` and ``function_call`` items: one assistant
  message (reasoning ``content`` texts, else ``summary`` texts, as ``reasoning_content``; calls
  ``{call_id, name, arguments}`` as ``tool_calls``), as the model produced them in one turn;
- ``function_call_output`` ``{call_id, output}``: a ``tool`` message;
- anything else (``item_reference``, built-in tool calls): :class:`FieldError`.

Tools ``{"type": "function", name, description, parameters}`` become Chat Completions function
tools; a built-in tool (``web_search``, ``file_search``, ...) is a :class:`FieldError`.
"""

from __future__ import annotations

from typing import Any

from strands_art.conversion.incoming import FieldError
from strands_art.conversion.strands import non_text_placeholder
from strands_art.conversion.tools import check_tool_names

TEXT_PARTS = ("input_text", "output_text", "text", "summary_text", "reasoning_text")
NON_TEXT_PARTS = {"input_image": "image", "input_file": "file", "input_audio": "audio"}
ASSISTANT_ITEMS = ("reasoning", "function_call")


def _parts_text(content: Any, where: str, placeholders: list[str]) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise FieldError(where, f"'{where}' must be a string or a list of content parts")
    texts = []
    for k, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in TEXT_PARTS and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind in NON_TEXT_PARTS:
            texts.append(non_text_placeholder(NON_TEXT_PARTS[kind], None, None, part.get("filename")))
            placeholders.append(texts[-1])
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            texts.append(part["refusal"])
        else:
            raise FieldError(f"{where}[{k}]", f"'{where}[{k}]' is not a text part (type {kind!r})")
    return "".join(texts)


class _Assistant:
    """An assistant turn being gathered from consecutive output items."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.reasoning: list[str] = []
        self.calls: list[dict[str, Any]] = []

    def message(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": "assistant", "content": "".join(self.texts)}
        if self.reasoning:
            out["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            out["tool_calls"] = self.calls
        return out


def _reasoning_text(item: dict[str, Any], where: str) -> str:
    ignored: list[str] = []
    content = item.get("content")
    if content:
        return _parts_text(content, f"{where}.content", ignored)
    return "".join(_parts_text(item.get("summary") or [], f"{where}.summary", ignored))


def _call(item: dict[str, Any], where: str) -> dict[str, Any]:
    call_id, name, args = item.get("call_id"), item.get("name"), item.get("arguments", "")
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
        raise FieldError(where, f"'{where}' needs a string 'call_id' and 'name'")
    if args is not None and not isinstance(args, str):
        raise FieldError(f"{where}.arguments", f"'{where}.arguments' must be a JSON string")
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def responses_messages(
    instructions: Any, input: Any, previous: list[dict[str, Any]] | None = None
) -> tuple[list[dict[str, Any]], list[list[str]], list[str]]:
    """``instructions``, the ``previous`` conversation and ``input`` as OpenAI chat messages.

    Returns:
        ``(chat messages, placeholders per chat message, origin per chat message)``: origin is
        the request field each came from (``"instructions"``, ``"previous_response_id"``,
        ``"input[3]"``), for error messages.

    Raises:
        FieldError: naming the field (``input[2].call_id``) of a malformed item or one this
            front cannot render; ``input`` empty (``""`` or ``[]``); ``instructions`` not a string.
    """
    out: list[dict[str, Any]] = []
    found: list[list[str]] = []
    origin: list[str] = []

    def add(message: dict[str, Any], where: str, placeholders: list[str] | None = None) -> None:
        out.append(message)
        found.append(placeholders or [])
        origin.append(where)

    if instructions is not None:
        if not isinstance(instructions, str):
            raise FieldError("instructions", "'instructions' must be a string")
        add({"role": "system", "content": instructions}, "instructions")
    for message in previous or []:
        add(message, "previous_response_id")
    if not input or not isinstance(input, str | list):
        raise FieldError("input", "'input' must be a non-empty string or a non-empty list of items")
    if isinstance(input, str):
        add({"role": "user", "content": input}, "input")
        return out, found, origin
    pending: _Assistant | None = None
    pending_at = ""
    for i, item in enumerate(input):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise FieldError(where, f"'{where}' must be an object")
        kind = item.get("type", "message")
        role = item.get("role")
        if kind in ASSISTANT_ITEMS or (kind == "message" and role == "assistant"):
            if pending is None:
                pending, pending_at = _Assistant(), where
            if kind == "reasoning":
                pending.reasoning.append(_reasoning_text(item, where))
            elif kind == "function_call":
                pending.calls.append(_call(item, where))
            else:
                pending.texts.append(_parts_text(item.get("content"), f"{where}.content", []))
            continue
        if pending is not None:
            add(pending.message(), pending_at)
            pending = None
        if kind == "function_call_output":
            call_id, output = item.get("call_id"), item.get("output")
            if not isinstance(call_id, str) or not call_id:
                raise FieldError(f"{where}.call_id", f"'{where}.call_id' must be a non-empty string")
            placeholders: list[str] = []
            text = _parts_text(output, f"{where}.output", placeholders)
            add({"role": "tool", "tool_call_id": call_id, "content": text}, where, placeholders)
        elif kind == "message":
            if role not in ("user", "system", "developer"):
                raise FieldError(
                    f"{where}.role",
                    f"'{where}.role' must be user, system, developer or assistant, got {role!r}",
                )
            placeholders = []
            text = _parts_text(item.get("content"), f"{where}.content", placeholders)
            add({"role": role, "content": text}, where, placeholders)
        else:
            raise FieldError(
                f"{where}.type",
                f"'{where}': items of type {kind!r} are not supported (message, reasoning, "
                "function_call, function_call_output)",
            )
    if pending is not None:
        add(pending.message(), pending_at)
    return out, found, origin


def responses_tools(tools: Any) -> list[dict[str, Any]] | None:
    """Responses function tools as Chat Completions function tools (None when absent or empty).

    Raises:
        FieldError: ``tools`` not a list, a tool without a name or with non-object
            ``parameters``, a built-in tool (``type`` other than ``function``), or two tools
            with one name.
    """
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise FieldError("tools", "'tools' must be a list")
    out = []
    for k, tool in enumerate(tools):
        where = f"tools[{k}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise FieldError(where, f"'{where}': tool type {kind!r} is not supported (function tools only)")
        name, params = tool.get("name"), tool.get("parameters")
        if not isinstance(name, str) or not name:
            raise FieldError(where, f"'{where}.name' must be a non-empty string")
        if params is not None and not isinstance(params, dict):
            raise FieldError(where, f"'{where}.parameters' must be a JSON Schema object")
        function: dict[str, Any] = {"name": name}  # Chat Completions' key order (rendered)
        if isinstance(tool.get("description"), str):
            function["description"] = tool["description"]
        if params is not None:
            function["parameters"] = params
        out.append({"type": "function", "function": function})
    check_tool_names(out, "tools")
    return out or None
