"""The error for a malformed chat message, and the tool-call argument parser that raises it.

A leaf module (standard library only): :mod:`strands_art.history.normalize` validates messages
with it, and the families (:func:`strands_art.families.base.arguments_dict`) decode arguments
with the same parser, without a leaf importing ``history/`` (``python -m
strands_art.devtools.layers``). ``strands_art.history.normalize.MessageError`` is this class.
"""

from __future__ import annotations

import json
from typing import Any


class MessageError(ValueError):
    """A malformed chat message (unknown role, bad content, tool-call arguments not an object).

    ``index`` is the position of the offending message.
    """

    def __init__(self, index: int, problem: str) -> None:
        super().__init__(f"message {index}: {problem}")
        self.index = index
        self.problem = problem


def parse_arguments(index: int, name: str, args: Any) -> dict[str, Any]:
    """Tool-call ``args`` as a dict: ``None``, ``""`` and whitespace-only text (``"  "``, as
    Continue sends it) are ``{}``, a dict is itself, any other string is decoded as JSON.

    Args:
        index: the message's position, for the error.
        name: the tool's name, for the error.
        args: what the harness sent as the call's arguments.

    Raises:
        MessageError: not valid JSON, JSON that is not an object, or another type.
    """
    if args is None or (isinstance(args, str) and not args.strip()):
        return {}
    if isinstance(args, dict):
        return args
    if isinstance(args, str):
        try:
            parsed = json.loads(args)
        except json.JSONDecodeError as exc:
            raise MessageError(index, f"tool call {name!r}: arguments are not valid JSON ({exc})") from exc
        if not isinstance(parsed, dict):
            raise MessageError(index, f"tool call {name!r}: arguments must be a JSON object")
        return parsed
    raise MessageError(index, f"tool call {name!r}: arguments must be an object or a JSON string")


def parsed_arguments(args: str | dict[str, Any]) -> dict[str, Any]:
    """Tool-call arguments as a dict (for comparison and for the Strands toolUse input).

    Raises:
        MessageError: as :func:`parse_arguments` (index 0, no name).
    """
    return parse_arguments(0, "", args)
