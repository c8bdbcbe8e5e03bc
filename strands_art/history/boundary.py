"""Where a turn's new messages begin in its render: the end of the last assistant turn's closer.

A linear heal renders the stored history plus the new messages once, then needs two character
offsets in that text: where the last assistant turn's render starts (``region_start``, for its
drift metric) and where its closer ends (``end``: everything after it is new and is tokenized).
Three ways to find them, named by the ``reason`` of the turn's ``heal`` event:

- ``fast`` (:func:`fast`): the previous turn's render (without its generation prompt) is a text
  prefix of the new one and the closer holds a special token the assistant did not write, so the
  first closer after the prefix ends the turn;
- ``probe`` (:func:`by_probe`): the closer is plain text or appears in the assistant's own text;
  the stored history followed by a probe message is rendered too, and the turn ends at the last
  closer before the two renders part (also covers templates that restyle the last assistant
  turn, like Qwen3's ``<think>`` wrapper);
- ``full_history`` (:func:`relocate_segments`): the template changed earlier text; every stored
  non-assistant segment is located again, each right after an assistant closer. A segment that
  ended the previous render may lose a trailing text the model family declares end-only
  (:attr:`TemplateShape.end_only`, e.g. DeepSeek-R1's ``<｜tool▁outputs▁end｜>``); nothing else
  may change. Where the closer is ambiguous the turn's end is then found with the probe render
  (:func:`by_probe` from the relocated position).

Each returns offsets or why it failed; the policy (:mod:`strands_art.history.linear`) turns a
failure into a reason-coded divergence. See docs/linear-history.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from strands_art.history.closers import TemplateShape
from strands_art.history.lineage import Lineage, Segment
from strands_art.history.tree import first_difference

#: (end of the last assistant's closer, start of its render), character offsets in the new render
Offsets = tuple[int, int]


def fast(shape: TemplateShape, lin: Lineage, text: str) -> Offsets | str:
    """Offsets, or "prefix_changed" (earlier text changed), "ambiguous" (use the probe) or
    "not_found" (no closer after the stored text)."""
    stable = lin.stable
    if not text.startswith(lin.text if len(lin.text) == stable else lin.text[:stable]):
        return "prefix_changed"
    closer = shape.closer
    if ambiguous(shape, lin.messages[-1]):
        return "ambiguous"
    idx = text.find(closer, stable)
    return (idx + len(closer), stable) if idx >= 0 else "not_found"


def ambiguous(shape: TemplateShape, last_assistant: dict[str, Any]) -> bool:
    """Whether the first closer after the last assistant turn's start may not be its end: the
    closer is plain text, the family has other closers, or the assistant's own text holds it."""
    return not shape.closer_is_marked or bool(shape.other_closers) or holds_closer(shape, last_assistant)


def holds_closer(shape: TemplateShape, msg: dict[str, Any]) -> bool:
    """Whether the closer's marker appears in the message's own text (then it is ambiguous)."""
    marker = shape.closer.strip() or shape.closer
    blob = (msg.get("content") or "") + (msg.get("reasoning_content") or "")
    blob += json.dumps(msg.get("tool_calls") or [], ensure_ascii=False, default=str)
    return marker in blob


def by_probe(shape: TemplateShape, start: int, text: str, probe: str) -> Offsets | str:
    """Offsets from ``probe``: the stored history followed by a probe user message, rendered
    without a generation prompt; or "not_found".

    ``start`` is where the last assistant turn begins in ``text`` (everything before it is the
    stored history, already validated); ``probe`` must agree with ``text`` up to there. Both
    renders hold the last assistant as a non-final message, so they agree through its closer
    (and perhaps the next message's opening); the closer ends at the last closer occurrence
    before they part.
    """
    if not probe.startswith(text[:start]):
        return "not_found"
    lcp = start + first_difference(text[start:], probe[start:])
    idx, closer = max((text.rfind(c, start, lcp), c) for c in shape.closers)
    return (idx + len(closer), start) if idx >= 0 else "not_found"


@dataclass
class Relocated:
    """A render whose earlier text changed, mapped back onto the lineage (:func:`relocate_segments`).

    Attributes:
        offsets: the last assistant's closer end and render start (see :data:`Offsets`).
        segments: the lineage's segments with their character spans in the new render.
        dropped: end-only texts (:attr:`TemplateShape.end_only`) the new render no longer writes
            after the segment that ended the previous render (empty or one item).
    """

    offsets: Offsets
    segments: list[Segment]
    dropped: tuple[str, ...] = ()


def relocate_segments(shape: TemplateShape, lin: Lineage, text: str) -> Relocated | int:
    """Relocate every stored segment's text in a render whose earlier text changed.

    Assistant renders may change (they are replaced by the sampled tokens anyway); the
    non-assistant segments must reappear verbatim, each right after an assistant closer. The one
    exception is a declared end-only text (:attr:`TemplateShape.end_only`): the segment that
    ended the previous render may reappear without it as its suffix (the template writes it only
    after the conversation's last message). Returns a :class:`Relocated` or the index of the
    first segment that could not be found (``len(lin.segments)`` when the last closer is missing).
    """
    closers = shape.closers
    segments: list[Segment] = []
    dropped: tuple[str, ...] = ()
    pos = 0
    last = len(lin.segments) - 1
    for j, seg in enumerate(lin.segments):
        seg_text = lin.text[seg.char_start : seg.char_end]
        start = _locate(closers, text, pos, seg_text, j)
        if start < 0 and j == last:  # it ended the previous render: a declared end-only text may go
            for extra in shape.end_only:
                trimmed = seg_text.removesuffix(extra)
                if len(trimmed) < len(seg_text):
                    start = _locate(closers, text, pos, trimmed, j)
                    if start >= 0:
                        seg_text, dropped = trimmed, (extra,)
                        break
        if start < 0:
            return j
        segments.append(
            Segment(seg.msg_start, seg.msg_end, seg.tok_start, seg.tok_end, start, start + len(seg_text))
        )
        pos = start + len(seg_text)
    if len(closers) == 1:
        idx, closer = text.find(closers[0], pos), closers[0]
    else:  # the turn ends at the last closer before the next message (several messages per turn)
        ends = [(text.find(c, pos), c) for c in closers]
        idx, closer = min(((i, c) for i, c in ends if i >= 0), default=(-1, ""))
    if idx < 0:
        return len(lin.segments)
    return Relocated((idx + len(closer), pos), segments, dropped)


def _locate(closers: tuple[str, ...], text: str, pos: int, seg_text: str, j: int) -> int:
    """Start of segment ``j``'s text in ``text`` (the first segment at 0, the others right after
    a closer at or after ``pos``), or -1."""
    if j == 0:
        return 0 if text.startswith(seg_text) else -1
    return _after_closer(closers, text, pos, seg_text)


def _after_closer(closers: tuple[str, ...], text: str, pos: int, seg_text: str) -> int:
    """Start of ``seg_text`` right after the first closer at or after ``pos`` it follows, or -1."""
    best = -1
    for closer in closers:
        search = pos
        while True:
            idx = text.find(closer, search)
            if idx < 0:
                break
            start = idx + len(closer)
            if text.startswith(seg_text, start):
                best = start if best < 0 else min(best, start)
                break
            search = idx + 1
    return best
