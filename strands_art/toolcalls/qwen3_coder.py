"""Qwen3-Coder XML tool calls (also Qwen3.5/3.6 templates)::

    <tool_call>
    <function=NAME>
    <parameter=P>
    VALUE
    </parameter>
    </function>
    </tool_call>

Value handling follows vLLM's ``qwen3_coder`` tool parser (``Qwen3CoderToolParser``): one leading
and one trailing ``\\n`` are removed from each value (the template writes ``<parameter=P>\\n`` +
value + ``\\n</parameter>``), and the value's type comes from the tool's JSON schema. We differ
where vLLM guesses:

- a string-typed (or untyped / unknown) parameter stays the exact string;
- a non-string type is JSON-decoded (Python literals ``True``/``False``/``None`` also accepted,
  since the Qwen3.5 template renders Python values with ``|string``); booleans are
  case-insensitive. A value that does not decode to an allowed type is *kept as the string* and
  noted in ``problems`` (vLLM turns a bad boolean into ``false``, a silent wrong call);
- ``null`` becomes None only when the schema allows null.

Strictness: the block must close (``</function>`` then ``</tool_call>``), start with
``<function=NAME>``, and hold only ``<parameter=P>...</parameter>`` elements; a value ends at the
first ``</parameter>`` that is followed by another ``<parameter=`` or the end of the function, so a
value may itself contain ``</parameter>``. Duplicate parameters, a missing ``</parameter>``, or
stray text are ill-formed. ``<function=`` outside a block is ill-formed too.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from strands_art.toolcalls import strictjson
from strands_art.toolcalls.base import ToolCall
from strands_art.toolcalls.scan import CLOSE, CallSyntaxError, TaggedCallParser

_BLOCK_END = re.compile(r"</function>\s*</tool_call>")
_FUNCTION = re.compile(r"\s*<function=([^>\n]*)>")
_PARAM = re.compile(r"<parameter=([^>\n]*)>")
_PARAM_END = re.compile(r"</parameter>(?=\s*(?:<parameter=|\Z))")
_WS = re.compile(r"\s*")

_PY_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}


class Qwen3CoderParser(TaggedCallParser):
    """Parser for Qwen3-Coder XML tool calls (see the module docstring)."""

    name = "qwen3_coder"
    separators = ("\n\n", "\n")
    stray_markers = (CLOSE, "<function=")

    def _read_call(self, content: str, start: int, specs: dict[str, dict]) -> tuple[ToolCall, int, list[str]]:
        end = _BLOCK_END.search(content, start)
        if end is None:
            if CLOSE in content[start:]:
                raise CallSyntaxError("<tool_call> without a matching </function> before </tool_call>")
            raise CallSyntaxError("unclosed <tool_call> (no </function></tool_call>; output cut off?)")
        inner = content[start : end.start()]
        fm = _FUNCTION.match(inner)
        if fm is None:
            raise CallSyntaxError(f"expected <function=NAME> at the start of the call: {inner[:40]!r}")
        name = fm.group(1).strip()
        if not name:
            raise CallSyntaxError("empty function name in <function=>")
        props = _properties(specs.get(name))
        body = inner[fm.end() :]
        arguments: dict[str, Any] = {}
        notes: list[str] = []
        pos = 0
        while True:
            pos = _WS.match(body, pos).end()
            if pos >= len(body):
                break
            pm = _PARAM.match(body, pos)
            if pm is None:
                raise CallSyntaxError(f"unexpected text in <function={name}>: {body[pos : pos + 40]!r}")
            pname = pm.group(1).strip()
            if not pname:
                raise CallSyntaxError(f"empty parameter name in <function={name}>")
            if pname in arguments:
                raise CallSyntaxError(f"parameter {pname!r} given twice in <function={name}>")
            close = _PARAM_END.search(body, pm.end())
            if close is None:
                raise CallSyntaxError(f"parameter {pname!r} of {name!r} has no closing </parameter>")
            value = body[pm.end() : close.start()]
            if value.startswith("\n"):
                value = value[1:]
            if value.endswith("\n"):
                value = value[:-1]
            converted, note = convert_value(value, props.get(pname) if props is not None else None)
            if note:
                notes.append(f"parameter {pname!r} of {name!r}: {note}")
            arguments[pname] = converted
            pos = close.end()
        return ToolCall(name=name, arguments=arguments), end.end(), notes


def _properties(spec: dict | None) -> dict[str, Any] | None:
    if not spec:
        return None
    params = spec.get("parameters")
    if isinstance(params, dict) and isinstance(params.get("properties"), dict):
        return params["properties"]
    return None


def schema_types(schema: Any) -> set[str] | None:
    """The JSON-schema type names a property allows (``type``, or the union of ``anyOf``/``oneOf``
    branches); None when the schema does not say."""
    if not isinstance(schema, dict):
        return None
    t = schema.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list) and all(isinstance(x, str) for x in t):
        return set(t)
    branches = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(branches, list):
        out: set[str] = set()
        for branch in branches:
            sub = schema_types(branch)
            if sub is None:
                return None
            out |= sub
        return out or None
    return None


def _matches(value: Any, types: set[str]) -> bool:
    for t in types:
        py = _PY_TYPES.get(t)
        if py is None:
            continue
        if isinstance(value, bool) and t in ("integer", "number"):
            continue
        if isinstance(value, py):
            return True
    return False


def convert_value(value: str, schema: Any) -> tuple[Any, str | None]:
    """Convert one parameter string by its property schema.

    Returns:
        (value, note): the converted value and a note when a non-string value could not be read
        (the string is then kept).
    """
    types = schema_types(schema)
    if types is None or ("string" in types and types <= {"string", "null"}):
        return value, None
    text = value.strip()
    if "boolean" in types and text.lower() in ("true", "false"):
        return text.lower() == "true", None
    decoded: Any
    try:
        decoded = strictjson.loads(text)
    except (json.JSONDecodeError, RecursionError):
        try:
            decoded = ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            decoded = _NOT_DECODED
    if decoded is not _NOT_DECODED and _matches(decoded, types):
        return decoded, None
    if "string" in types:
        return value, None
    return value, f"expected {'/'.join(sorted(types))}, got {text[:40]!r}; kept as a string"


_NOT_DECODED = object()
