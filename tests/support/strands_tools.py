"""OpenAI-format tool specs and the Strands ``add`` tool that many tests share."""

from __future__ import annotations

from strands import tool

ADD_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two numbers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
}
ECHO_TOOL = {
    "type": "function",
    "function": {
        "name": "echo",
        "description": "Echo a text.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
}


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first
        b: second
    """
    return a + b
