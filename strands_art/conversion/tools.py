"""Checks on the tool specs a request offers, the same for every front (pure; records nothing)."""

from __future__ import annotations

from typing import Any

from strands_art.conversion.incoming import FieldError


def check_tool_names(tools: list[dict[str, Any]] | None, field: str = "tools") -> None:
    """Refuse two tools offered under one name: a call to it cannot be attributed to one of
    them (which schema types its arguments, which tool the harness runs is a guess), so the
    request is refused before anything is sampled, as openai-agents-python does.

    ``tools`` are OpenAI function tools (``{"type": "function", "function": {"name": ...}}``).

    Raises:
        FieldError: naming ``field`` and the duplicated name.
    """
    seen: set[str] = set()
    for tool in tools or []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(name, str):
            continue
        if name in seen:
            raise FieldError(field, f"two tools are named {name!r}: tool names must be unique")
        seen.add(name)
