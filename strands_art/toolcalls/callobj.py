"""One rule for a tool call written as a JSON object, shared by every family that writes them.

Models write a call as ``{"name": ..., "arguments": {...}}`` (Hermes/Qwen, Mistral),
``{"name": ..., "parameters": {...}}`` (Llama 3.x's template) or with an OpenAI-style
``"type": "function"`` key, in any key order (Llama 3.1/3.3 checkpoints write
``{"type": "function", "name": ..., "parameters": ...}``; vLLM's ``llama3_json`` parser reads the
object by key). The object is read by key, never by position:

- ``name``: a non-empty string;
- the arguments under ``arguments`` or ``parameters`` (both present with different values is an
  error), an object or a JSON string holding one; absent reads as ``{}``;
- ``type``, when present, is ``"function"``; ``id`` (Mistral's sampled id) is read, but an extra key;
- any other key: :func:`read_call` reports it as extra (an untagged JSON answer with extra keys
  is data, not a call; a tagged call keeps a note).

Whether an *untagged* JSON answer (Llama 3.x without ``<|python_tag|>``, Qwen2.5's bare or
fenced JSON) is a call at all is decided by :func:`classify`: only when it names a tool that was
offered. A JSON answer when no tools were offered, or a record that happens to have a ``"name"``
field, is the assistant's text (structured output).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from strands_art.toolcalls import strictjson

ARGUMENT_KEYS = ("arguments", "parameters")
ALLOWED_KEYS = frozenset({"name", "type", *ARGUMENT_KEYS})


class CallShapeError(ValueError):
    """A JSON value is not a call-shaped object (the message says why)."""


@dataclass(frozen=True)
class CallObject:
    """A call-shaped JSON object, read by key.

    Attributes:
        name: the tool name.
        arguments: the decoded arguments (a dict).
        arguments_key: the key they were under (``"arguments"``/``"parameters"``), or None.
        extra_keys: sorted keys outside :data:`ALLOWED_KEYS`.
        id: the ``id`` value when it is a string, else "".
    """

    name: str
    arguments: dict[str, Any]
    arguments_key: str | None
    extra_keys: tuple[str, ...]
    id: str = ""


def read_call(obj: Any, family: str = "") -> CallObject:
    """Read a decoded JSON value as a tool call (module docstring), whatever its key order.

    Raises:
        CallShapeError: not an object, no/empty ``name``, ``type`` other than ``"function"``,
            conflicting ``arguments``/``parameters``, arguments not an object (or a JSON string
            holding one).
    """
    what = f"a {family} tool call" if family else "a tool call"
    if not isinstance(obj, dict):
        raise CallShapeError(f"{what} must be a JSON object, got {type(obj).__name__}")
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        raise CallShapeError(f'missing or empty "name" in {what}')
    if "type" in obj and obj["type"] != "function":
        raise CallShapeError(f'"type" of {what} is {obj["type"]!r}, not "function"')
    present = [k for k in ARGUMENT_KEYS if k in obj]
    if len(present) == 2 and obj["arguments"] != obj["parameters"]:
        raise CallShapeError(f'{name!r} has both "arguments" and "parameters", with different values')
    key = present[0] if present else None
    args = obj[key] if key else {}
    if isinstance(args, str):
        try:
            args = strictjson.loads(args)
        except json.JSONDecodeError:
            raise CallShapeError(f"{key} of {name!r} is a string that is not JSON") from None
    if not isinstance(args, dict):
        raise CallShapeError(f"{key} of {name!r} is a {type(args).__name__}, not a JSON object")
    sampled = obj.get("id")
    return CallObject(
        name=name,
        arguments=args,
        arguments_key=key,
        extra_keys=tuple(sorted(set(obj) - ALLOWED_KEYS)),
        id=sampled if isinstance(sampled, str) else "",
    )


def classify(value: Any, tool_names: set[str] | None) -> CallObject | str | None:
    """What one *untagged* JSON value is: a call (:class:`CallObject`), an attempted call that is
    broken (a str saying why: ill-formed), or data (None: the answer is text).

    ``tool_names``: the offered tools (None: no check; an empty set: nothing offered, so nothing
    is a call). A value is *call-shaped* when it has a string ``name`` and an arguments key.

    - nothing offered, no ``name`` string, or not an object: data;
    - call-shaped, naming an offered tool: the call, or broken (bad arguments, a ``type`` other
      than ``"function"``, extra keys);
    - call-shaped, with only call keys, naming a tool not offered: broken (the model called a tool
      that does not exist); with other keys too: data (a record with a ``"name"`` field);
    - not call-shaped: a call to a no-argument tool when it names an offered tool and has only call
      keys (``{"name": "now"}``); else data.
    """
    if tool_names is not None and not tool_names:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    shaped = any(k in value for k in ARGUMENT_KEYS)
    offered = tool_names is None or value["name"] in tool_names
    only_call_keys = set(value) <= ALLOWED_KEYS
    try:
        call = read_call(value)
    except CallShapeError as exc:
        return str(exc) if shaped and (offered or only_call_keys) else None
    if not offered:
        return f"{call.name!r} is not an offered tool" if shaped and only_call_keys else None
    if call.extra_keys:
        return f"unexpected keys {list(call.extra_keys)} in tool call {call.name!r}" if shaped else None
    if not shaped and tool_names is None:
        return None
    return call


def untagged_calls(values: list[Any], tool_names: set[str] | None) -> list[CallObject] | str | None:
    """What a sequence of untagged JSON values is: the calls (every value a call), an attempted
    call that is broken (the first problem, a str), or data (None). See :func:`classify`."""
    calls = []
    for value in values:
        found = classify(value, tool_names)
        if not isinstance(found, CallObject):
            return found
        calls.append(found)
    return calls
