"""Anthropic Messages requests as OpenAI chat messages (pure; records nothing).

The first half of the Anthropic front's step of the conversion path
(:mod:`strands_art.conversion`): :func:`anthropic_messages` turns ``system`` and ``messages``
(https://docs.anthropic.com/en/api/messages) into OpenAI-format chat messages, which then go
through :func:`~strands_art.conversion.openai.openai_request` and
:meth:`~strands_art.conversion.session.SessionConversion.canonical` exactly as a Chat
Completions request does, so the same conversation gives the same prompt tokens, rows and
events whichever protocol carried it.

Blocks, as the gateway sees them:

- ``system``: a string, or text blocks joined with ``"\\n"``: one system message first;
- user ``text`` blocks: one user message (texts joined with ``""``, as Strands' are);
  ``tool_result`` blocks ``{tool_use_id, content, is_error}``: one ``tool`` message each, before
  the user text (their ``content`` a string or text blocks joined with ``"\\n"``; ``is_error``
  prefixes ``"Error: "``, as the Strands front does for ``status: "error"``);
- assistant ``text``, ``thinking`` (its ``thinking`` text becomes ``reasoning_content``; the
  ``signature`` is not rendered) and ``tool_use`` ``{id, name, input}`` (a tool call);
- ``image``, ``document`` and ``search_result`` blocks: placeholder text
  (:func:`~strands_art.conversion.strands.non_text_placeholder`), reported as
  ``non_text_content`` events;
- anything else (``redacted_thinking``, server tool blocks): :class:`FieldError`.

Tools ``{name, description, input_schema}`` become OpenAI function tools; a server tool
(``type`` other than ``custom``) is a :class:`FieldError`.
"""

from __future__ import annotations

from typing import Any

from strands_art.conversion.incoming import FieldError
from strands_art.conversion.strands import non_text_placeholder
from strands_art.conversion.tools import check_tool_names

NON_TEXT_BLOCKS = {"image": "image", "document": "document", "search_result": "search result"}


def _placeholder(block: dict[str, Any]) -> str:
    source = block.get("source") if isinstance(block.get("source"), dict) else {}
    fmt = source.get("media_type") or source.get("type")
    data = source.get("data")
    size = len(data) if isinstance(data, str) else None
    return non_text_placeholder(NON_TEXT_BLOCKS[block["type"]], fmt, size, block.get("title"))


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    """Content as a list of blocks (a string is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise FieldError(where, f"'{where}' must be a string or a list of content blocks")
    for k, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise FieldError(f"{where}.{k}", f"'{where}.{k}' must be a content block with a 'type'")
    return content


def _text(block: dict[str, Any], where: str, key: str = "text") -> str:
    text = block.get(key)
    if not isinstance(text, str):
        raise FieldError(where, f"'{where}.{key}' must be a string")
    return text


def system_text(system: Any) -> str | None:
    """The system prompt of ``system`` (a string or text blocks joined with ``"\\n"``), or None."""
    if system is None:
        return None
    blocks = _blocks(system, "system")
    texts = []
    for k, block in enumerate(blocks):
        if block["type"] != "text":
            raise FieldError(f"system.{k}", f"'system.{k}' must be a text block, got {block['type']!r}")
        texts.append(_text(block, f"system.{k}"))
    return "\n".join(texts)


def _tool_result(block: dict[str, Any], where: str, placeholders: list[str]) -> dict[str, Any]:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or not call_id:
        raise FieldError(where, f"'{where}.tool_use_id' must be a non-empty string")
    content = block.get("content", "")
    parts = []
    for k, part in enumerate(_blocks(content, f"{where}.content") if content != "" else []):
        if part["type"] == "text":
            parts.append(_text(part, f"{where}.content.{k}"))
        elif part["type"] in NON_TEXT_BLOCKS:
            parts.append(_placeholder(part))
            placeholders.append(parts[-1])
        else:
            raise FieldError(f"{where}.content.{k}", f"a tool result cannot hold a {part['type']!r} block")
    text = "\n".join(parts)
    if block.get("is_error") is True and not text.lower().startswith("error"):
        text = f"Error: {text}"
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _user(message: dict[str, Any], where: str) -> tuple[list[dict[str, Any]], list[str]]:
    tools, texts, placeholders = [], [], []
    for k, block in enumerate(_blocks(message.get("content"), f"{where}.content")):
        at, kind = f"{where}.content.{k}", block["type"]
        if kind == "tool_result":
            tools.append(_tool_result(block, at, placeholders))
        elif kind == "text":
            texts.append(_text(block, at))
        elif kind in NON_TEXT_BLOCKS:
            texts.append(_placeholder(block))
            placeholders.append(texts[-1])
        else:
            raise FieldError(
                at, f"a user message cannot hold a {kind!r} block (text, tool_result, image, document)"
            )
    out = list(tools)
    if texts or not tools:
        out.append({"role": "user", "content": "".join(texts)})
    return out, placeholders


def _assistant(message: dict[str, Any], where: str) -> dict[str, Any]:
    texts, reasoning, calls = [], [], []
    for k, block in enumerate(_blocks(message.get("content"), f"{where}.content")):
        at, kind = f"{where}.content.{k}", block["type"]
        if kind == "text":
            texts.append(_text(block, at))
        elif kind == "thinking":
            reasoning.append(_text(block, at, "thinking"))
        elif kind == "tool_use":
            call_id, name, args = block.get("id"), block.get("name"), block.get("input", {})
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
                raise FieldError(at, f"'{at}' needs a string 'id' and 'name'")
            if not isinstance(args, dict):
                raise FieldError(at, f"'{at}.input' must be an object")
            calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": args}})
        else:
            raise FieldError(
                at, f"an assistant message cannot hold a {kind!r} block (text, thinking, tool_use)"
            )
    out: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if reasoning:
        out["reasoning_content"] = "".join(reasoning)
    if calls:
        out["tool_calls"] = calls
    return out


def anthropic_messages(system: Any, messages: Any) -> tuple[list[dict[str, Any]], list[list[str]], list[str]]:
    """``system`` and ``messages`` of a Messages request as OpenAI chat messages.

    Returns:
        ``(chat messages, placeholders per chat message, origin per chat message)``: origin is
        the request field each came from (``"system"``, ``"messages.3"``), for error messages.

    Raises:
        FieldError: naming the field (``messages.2.content.0.tool_use_id``) of a malformed
            message or a block this front cannot render.
    """
    if not isinstance(messages, list) or not messages:
        raise FieldError("messages", "'messages' must be a non-empty list")
    out: list[dict[str, Any]] = []
    found: list[list[str]] = []
    origin: list[str] = []
    prompt = system_text(system)
    if prompt is not None:
        out.append({"role": "system", "content": prompt})
        found.append([])
        origin.append("system")
    for i, message in enumerate(messages):
        where = f"messages.{i}"
        role = message.get("role") if isinstance(message, dict) else None
        if role == "assistant":
            out.append(_assistant(message, where))
            found.append([])
            origin.append(where)
        elif role == "user":
            converted, placeholders = _user(message, where)
            for k, m in enumerate(converted):
                out.append(m)
                found.append(placeholders if k == 0 else [])
                origin.append(where)
        else:
            raise FieldError(f"{where}.role", f"'{where}.role' must be 'user' or 'assistant', got {role!r}")
    return out, found, origin


def anthropic_tools(tools: Any) -> list[dict[str, Any]] | None:
    """Anthropic client tools as OpenAI function tools (None when absent or empty).

    Raises:
        FieldError: ``tools`` not a list, a tool without a name or with a non-object
            ``input_schema``, or a server tool (``type`` other than ``custom``).
    """
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise FieldError("tools", "'tools' must be a list")
    out = []
    for k, tool in enumerate(tools):
        where = f"tools.{k}"
        if not isinstance(tool, dict):
            raise FieldError(where, f"'{where}' must be an object")
        if tool.get("type", "custom") != "custom":
            raise FieldError(
                where, f"'{where}': server tool {tool.get('type')!r} is not supported (client tools only)"
            )
        name, schema = tool.get("name"), tool.get("input_schema", {})
        if not isinstance(name, str) or not name:
            raise FieldError(where, f"'{where}.name' must be a non-empty string")
        if not isinstance(schema, dict):
            raise FieldError(where, f"'{where}.input_schema' must be a JSON Schema object")
        function: dict[str, Any] = {"name": name}  # OpenAI's key order: the template renders it
        if isinstance(tool.get("description"), str):
            function["description"] = tool["description"]
        function["parameters"] = schema
        out.append({"type": "function", "function": function})
    check_tool_names(out, "tools")
    return out or None
