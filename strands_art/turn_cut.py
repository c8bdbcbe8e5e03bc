"""The length-cut step of a turn: a turn cut at the token limit ends at its last complete call.

The rule and its search are :mod:`strands_art.toolcalls.cut`; this is where the gateway applies
them (:func:`cut_at_calls`, called by the parse step :func:`~strands_art.turn_parse.read_turn`)
and records the tail (:func:`record_cut`: ``trajectory.metadata["cut_turns"]`` and a
``length_cut_at_calls`` event).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from strands_art.render import ChatRenderer
from strands_art.toolcalls.base import ParsedOutput
from strands_art.toolcalls.cut import last_complete_calls
from strands_art.trajectory import Trajectory


def cut_at_calls(
    renderer: ChatRenderer,
    parse: Callable[[list[int], str], ParsedOutput],
    output_ids: list[int],
    finish_reason: str,
    tools: list[dict[str, Any]] | None,
) -> tuple[int, ParsedOutput] | None:
    """``(tail_start, parsed)`` for a sample that ended at the token limit (``finish_reason``
    "length") of a turn with tools, when a prefix of its output ends at complete calls
    (:func:`~strands_art.toolcalls.cut.last_complete_calls`); else None. ``parse(ids, suffix)``
    parses output IDs with text ``suffix`` added (:func:`~strands_art.turn_parse.parse_output`)."""
    if finish_reason != "length" or not tools:
        return None
    return last_complete_calls(
        output_ids,
        parse,
        lambda t: renderer.decode([t]),
        renderer.family.call_list_closers,
    )


def record_cut(traj: Trajectory, turn: int, tail_start: int, num_output: int, num_calls: int) -> None:
    """Mark the tail of a cut turn: output tokens ``[tail_start, num_output)`` of ``turn``."""
    span = [tail_start, num_output]
    traj.metadata.setdefault("cut_turns", []).append({"turn": turn, "tail": span})
    traj.events.append(
        {
            "turn": turn,
            "kind": "length_cut_at_calls",
            "reason": f"cut at the token limit: ended at its last complete call ({num_calls} "
            f"kept); output tokens {span[0]}-{span[1]} are the tail after it",
            "tail": span,
        }
    )
