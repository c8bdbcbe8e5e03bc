"""Normalize OpenAI-format chat messages before rendering and comparison.

What the harness sends is validated and put into one canonical shape:

- ``content`` given as a list of parts (``[{"type": "text", "text": ...}]``) is flattened to one
  string, the way chat templates render it;
- tool-call ``arguments`` are validated (a JSON object or a string holding one, else
  :class:`MessageError`) and kept as sent, because the template renders a string verbatim and
  tree capture must see the true prompt; :func:`message_key` compares them parsed, so key order
  and spacing do not matter there;
- reasoning is kept as ``reasoning_content`` (Qwen3-style templates render it), whichever of the
  field names clients use it came under: ``reasoning_content`` (vLLM, DeepSeek), ``reasoning``
  (newer vLLM, OpenRouter, some OpenAI-compatible clients), ``thinking`` (transformers' gpt-oss
  messages). Two of them with different text are a :class:`MessageError`. Reasoning that is
  empty once its surrounding newlines are stripped (templates render ``reasoning.strip("\n")``)
  counts as none, like ``null`` and ``""``;
- the ``developer`` role (OpenAI's newer name for system instructions) is the ``system`` role;
- wire-only fields (tool-call ``id``/``type``, ``tool_call_id``, ``name`` on tool results) are
  kept for rendering but ignored by :func:`message_key`, which is what history comparison uses.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# the error and the argument parser live in a leaf module (families/ decode with it too)
from strands_art.message_errors import MessageError, parse_arguments, parsed_arguments

ROLES = ("system", "user", "assistant", "tool")
#: roles clients send under another name: OpenAI's ``developer`` (o1 and later, Codex) is the
#: system message (Harmony renders system text as its own developer message)
ROLE_ALIASES = {"developer": "system"}


def _flatten_content(index: int, content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and part.get("type", "text") == "text" and "text" in part:
                parts.append(str(part["text"]))
            else:
                raise MessageError(index, f"unsupported content part {part!r} (only text is supported)")
        return "".join(parts)
    raise MessageError(
        index, f"content must be a string or a list of text parts, got {type(content).__name__}"
    )


def _checked_arguments(index: int, name: str, args: Any) -> str | dict[str, Any]:
    """Validate tool-call arguments; keep a JSON string verbatim (the template renders it as sent)."""
    parsed = parse_arguments(index, name, args)
    return args if isinstance(args, str) and args.strip() else parsed


def _optional_str(index: int, where: str, value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise MessageError(index, f"{where} must be a string, got {type(value).__name__}")


#: the names clients send an assistant message's reasoning under (first: the canonical one)
REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")


def _reasoning(index: int, msg: dict[str, Any]) -> str | None:
    """The reasoning of an assistant message under any of :data:`REASONING_FIELDS`, or None."""
    found: dict[str, str] = {}
    for name in REASONING_FIELDS:
        value = msg.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise MessageError(index, f"{name} must be a string, got {type(value).__name__}")
        if value.strip("\n"):
            found[name] = value
    if len(set(found.values())) > 1:
        raise MessageError(index, f"conflicting reasoning under {sorted(found)}: send one of them")
    return next(iter(found.values()), None)


@dataclass
class NormalizeWork:
    """Work done by normalization (the heal path's share that must not grow with the history).

    ``messages``: messages normalized in full; ``chars``: characters scanned for lone surrogates.
    """

    messages: int = 0
    chars: int = 0


def normalize_message(index: int, msg: Any, work: NormalizeWork | None = None) -> dict[str, Any]:
    """One message in canonical form; raises MessageError naming ``index``.

    ``work``, when given, is incremented by what this call did (one message, the characters scanned).
    """
    if not isinstance(msg, dict):
        raise MessageError(index, f"expected a dict, got {type(msg).__name__}")
    role = msg.get("role")
    role = ROLE_ALIASES.get(role, role) if isinstance(role, str) else role
    if role not in ROLES:
        raise MessageError(index, f"unknown role {role!r} (expected one of {', '.join(ROLES)})")
    out: dict[str, Any] = {"role": role, "content": _flatten_content(index, msg.get("content"))}
    if role == "assistant":
        reasoning = _reasoning(index, msg)
        if reasoning is not None:
            out["reasoning_content"] = reasoning
        calls = msg.get("tool_calls") or []
        if not isinstance(calls, list):
            raise MessageError(index, "tool_calls must be a list")
        norm_calls = []
        for k, tc in enumerate(calls):
            if not isinstance(tc, dict):
                raise MessageError(index, f"tool call {k} must be a dict")
            fn = tc.get("function", tc)
            if not isinstance(fn, dict):
                raise MessageError(
                    index,
                    f"tool call {k}: 'function' must be an object with 'name' and 'arguments', "
                    f"got {type(fn).__name__}",
                )
            call_id = _optional_str(index, f"tool call {k}: 'id'", tc.get("id"))
            name = fn.get("name")
            if not isinstance(name, str) or not name:
                raise MessageError(index, f"tool call {k} has no function name")
            norm_calls.append(
                {
                    "id": call_id or "",
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": _checked_arguments(index, name, fn.get("arguments")),
                    },
                }
            )
        if norm_calls:
            out["tool_calls"] = norm_calls
    if role == "tool":
        out["tool_call_id"] = _optional_str(index, "tool_call_id", msg.get("tool_call_id")) or ""
        name = _optional_str(index, "name", msg.get("name"))
        if name:
            out["name"] = name
    scanned = _refuse_lone_surrogates(index, out)
    if work is not None:
        work.messages += 1
        work.chars += scanned
    return out


_SURROGATE = re.compile("[\ud800-\udfff]")


def _refuse_lone_surrogates(index: int, value: Any, where: str = "") -> int:
    """A lone surrogate (e.g. JSON ``"\\ud800"`` decoded, or a file name read with
    ``surrogateescape``) cannot be encoded as UTF-8, so it can be neither tokenized nor stored:
    refuse it here with the place it was found, before anything is rendered or recorded.

    Returns the number of characters scanned."""
    if isinstance(value, str):
        if value.isascii():  # no surrogate possible; a word-at-a-time C scan
            return len(value)
        m = _SURROGATE.search(value)
        if m:
            raise MessageError(
                index,
                f"{where or 'text'} holds a lone surrogate U+{ord(m.group()):04X} at character "
                f"{m.start()} (not valid Unicode; replace it, e.g. with U+FFFD)",
            )
        return len(value)
    n = 0
    if isinstance(value, dict):
        for k, v in value.items():
            n += _refuse_lone_surrogates(index, k, where)
            n += _refuse_lone_surrogates(index, v, f"{where}.{k}" if where else str(k))
    elif isinstance(value, list):
        for k, v in enumerate(value):
            n += _refuse_lone_surrogates(index, v, f"{where}[{k}]")
    return n


def normalize_messages(messages: Any) -> list[dict[str, Any]]:
    """Canonical copies of ``messages`` (list[dict]); raises MessageError on the first bad one."""
    if not isinstance(messages, list) or not messages:
        raise MessageError(0, "messages must be a non-empty list")
    return [normalize_message(i, m) for i, m in enumerate(messages)]


_INLINE_THINK = re.compile(r"\s*<think>")


def split_inline_reasoning(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Normalized messages with reasoning echoed inline moved to ``reasoning_content``.

    A harness may send an answer back with its reasoning inline in the content
    (``<think>\nR\n</think>\n\nC``) instead of a reasoning field. For families whose templates
    write reasoning that way (:attr:`ModelFamily.inline_reasoning`: Qwen3, DeepSeek-R1) that is
    the same message as ``{"reasoning_content": R, "content": C}``, split exactly as the templates
    split it (:func:`~strands_art.toolcalls.reasoning.split_reasoning`). Only an assistant message
    without reasoning whose content *starts* with a closed ``<think>`` block is changed (a copy);
    the others are returned as they are.
    """
    from strands_art.toolcalls.reasoning import THINK_CLOSE, split_reasoning

    out = messages
    for i, m in enumerate(messages):
        if m["role"] != "assistant" or m.get("reasoning_content") or not _INLINE_THINK.match(m["content"]):
            continue
        if THINK_CLOSE not in m["content"]:
            continue
        split = split_reasoning(m["content"])
        if out is messages:
            out = list(messages)
        out[i] = {**m, "content": split.content}
        if split.reasoning and split.reasoning.strip("\n"):
            out[i]["reasoning_content"] = split.reasoning
    return out


def message_key(msg: dict[str, Any]) -> str:
    """A comparison key for a normalized message: ignores wire-only ids and argument key order."""
    d: dict[str, Any] = {"role": msg["role"], "content": msg.get("content", "")}
    if msg.get("reasoning_content"):
        d["reasoning_content"] = msg["reasoning_content"]
    if msg.get("tool_calls"):
        d["tool_calls"] = [
            [tc["function"]["name"], parsed_arguments(tc["function"]["arguments"])]
            for tc in msg["tool_calls"]
        ]
    return json.dumps(d, sort_keys=True, ensure_ascii=False)


def tools_key(tools: list[dict[str, Any]] | None) -> str:
    """A comparison key for a tools list: semantically equal lists have equal keys.

    Each tool compares as a JSON object (key order at every level does not matter: JSON-schema
    objects are objects); arrays inside a tool compare in order (``required``, ``enum``); the
    list of tools compares as a multiset (its order does not matter: it offers the same tools,
    and a call names its tool). docs/linear-history.md, "Tool definitions".
    """
    return json.dumps(sorted(json.dumps(t, sort_keys=True, ensure_ascii=False) for t in tools or []))
