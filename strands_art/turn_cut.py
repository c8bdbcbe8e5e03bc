"""The cut step of a turn: a turn cut inside a call ends at its last complete call.

A turn cut at the token limit, or one whose text ends inside an unclosed call before its end
token, keeps the calls it completed. The rule and its search are :mod:`strands_art.toolcalls.cut`;
this is where the gateway applies them (:func:`cut_at_calls`, called by the parse step :func:`~strands_art.turn_parse.read_turn`)
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
    whole: ParsedOutput,
) -> tuple[int, ParsedOutput] | None:
    """``(tail_start, parsed)`` for a turn with tools whose sample ended at the token limit
    (``finish_reason`` "length") or whose whole output (``whole``, its parse) is ill-formed
    whatever the finish reason (an unclosed call before the end token), when a prefix of its
    output ends at complete calls (:func:`~strands_art.toolcalls.cut.last_complete_calls`);
    else None. ``parse(ids, suffix)`` parses output IDs with text ``suffix`` added
    (:func:`~strands_art.turn_parse.parse_output`)."""
    if not tools or (finish_reason != "length" and not whole.ill_formed):
        return None
    return last_complete_calls(
        output_ids,
        parse,
        lambda t: renderer.decode([t]),
        renderer.family.call_list_closers,
    )


#: row metadata key: turn index (str) -> [start, end) of the cut tail in that turn's output
CUT_TAILS = "cut_tails"
#: the turn tag of a turn sampled to the token limit with no complete call to end at
TRUNCATED = "truncated"


def truncation_limit(n_out: int, max_new_tokens: int, sent: int | None) -> str:
    """Which limit ended a turn sampled to ``finish_reason`` "length" with ``n_out`` output tokens:
    ``"max_new_tokens"`` (the session's output limit), ``"context_budget"`` (the gateway sent a
    smaller limit, ``sent``, because the context budget left less room) or ``"backend_context"``
    (the backend stopped before either: its own context window was full)."""
    if n_out >= max_new_tokens:
        return "max_new_tokens"
    if sent is not None and n_out >= sent:
        return "context_budget"
    return "backend_context"


def mark_tail(row: Any, turn: int, span: list[int]) -> None:
    """Record a cut tail on the row holding ``turn`` (``row.metadata["cut_tails"]``); the
    trainer leaves it out of the loss (:func:`strands_art.training.grpo.exclude_tagged_turns`)."""
    row.metadata.setdefault(CUT_TAILS, {})[str(turn)] = list(span)


def turn_start_cut(renderer: ChatRenderer, output_ids: list[int]) -> tuple[int, str] | None:
    """``(index, token)`` of the first token in ``output_ids`` that opens another author's turn
    (the family's :attr:`~strands_art.families.base.ModelFamily.turn_start_tokens`, not followed
    by one of its :attr:`~strands_art.families.base.ModelFamily.turn_start_authors`), or None.

    A model that writes ``<|im_start|>user`` (``<|start_header_id|>``, ``<｜User｜>``, ``[INST]``,
    a Harmony ``<|start|>user``) has left its own turn: the answer ends before that token and
    the rest is a tail (issue 48)."""
    starts = renderer.turn_start_ids
    authors = renderer.family.turn_start_authors
    for i, tid in enumerate(output_ids):
        if tid in starts:
            if authors:
                after = renderer.decode(output_ids[i + 1 : i + 4]).lstrip()
                if after.startswith(authors) or (i + 1 == len(output_ids)):
                    continue
            return i, starts[tid]
    return None


def tag_row_turn(row: Any, turn: Any, tag: str) -> None:
    """Put ``tag`` on ``turn`` (``Turn.tags``) and on its row (``row.metadata["turn_tags"]``)."""
    turn.tags.append(tag)
    row.metadata.setdefault("turn_tags", {}).setdefault(str(turn.index), []).append(tag)


def record_cut(
    traj: Trajectory,
    turn: int,
    tail_start: int,
    num_output: int,
    num_calls: int,
    finish_reason: str,
    problems: list[str],
    kind: str = "length_cut_at_calls",
    how: str | None = None,
) -> None:
    """Mark the tail of a cut turn: output tokens ``[tail_start, num_output)`` of ``turn``, the
    sample's ``finish_reason`` ("length", or "stop" for an unclosed call before the end token)
    and ``problems``, what the parser found wrong with the whole output. ``kind`` and ``how``
    name the cut in the event (default: a cut at the last complete call)."""
    span = [tail_start, num_output]
    traj.metadata.setdefault("cut_turns", []).append(
        {"turn": turn, "tail": span, "finish_reason": finish_reason, "kind": kind}
    )
    if how is None:
        how = (
            "cut at the token limit"
            if finish_reason == "length"
            else f"ended inside a call ({finish_reason})"
        )
        how = f"{how}: ended at its last complete call ({num_calls} kept)"
    traj.events.append(
        {
            "turn": turn,
            "kind": kind,
            "reason": f"{how}; output tokens {span[0]}-{span[1]} are the tail after it",
            "tail": span,
            "finish_reason": finish_reason,
            "problems": list(problems),
        }
    )
