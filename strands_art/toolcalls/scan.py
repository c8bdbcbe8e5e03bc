"""The frame both tool-call formats share: ``<tool_call>`` ... ``</tool_call>`` blocks in the content.

A format subclass reads one block (:meth:`TaggedCallParser._read_call`); this module walks the
content, keeps the text around the blocks, and turns the first failure into an ill-formed result
(the whole content stays text, no calls). Order of work for one output:

1. strip the end-of-turn markers from the end;
2. split reasoning (:mod:`strands_art.toolcalls.reasoning`); tool calls are looked for in the
   content only;
3. scan the blocks; text before the first block loses the separator the chat template inserts
   (so re-rendering the parsed message reproduces the sampled text where the template allows it);
   non-blank text between or after blocks is kept as content and noted in ``problems``;
4. flag calls to tools that were not offered (``unknown_tools``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from strands_art.toolcalls.base import (
    DEFAULT_END_MARKERS,
    ParsedOutput,
    ToolCall,
    flag_unknown,
    resolve_tool_names,
    strip_end_markers,
    tool_specs_by_name,
)
from strands_art.toolcalls.reasoning import split_reasoning

logger = logging.getLogger(__name__)

OPEN = "<tool_call>"
CLOSE = "</tool_call>"


class CallSyntaxError(ValueError):
    """One ``<tool_call>`` block could not be read; the message says what failed."""


class TaggedCallParser:
    """Base class for formats that wrap each call in ``<tool_call>`` ... ``</tool_call>``.

    Args:
        end_markers: end-of-turn strings stripped from the end of the output.
    """

    name = "tagged"
    #: separators the chat template puts between content and the first call, longest first
    separators: tuple[str, ...] = ("\n",)
    #: markers that betray a call attempt when they appear outside any block
    stray_markers: tuple[str, ...] = (CLOSE,)

    def __init__(self, end_markers: Sequence[str] = DEFAULT_END_MARKERS) -> None:
        self.end_markers = tuple(end_markers)

    def _read_call(self, content: str, start: int, specs: dict[str, dict]) -> tuple[ToolCall, int, list[str]]:
        """Read the block whose body starts at ``start`` (just after ``<tool_call>``).

        Returns the call (without ``raw``), the index just past ``</tool_call>``, and notes on
        things that were off but did not break the call.

        Raises:
            CallSyntaxError: the block is ill-formed.
        """
        raise NotImplementedError

    def parse(
        self,
        text: str,
        tool_names: set[str] | None = None,
        *,
        tools: Sequence[dict] | None = None,
        think_open: bool = False,
    ) -> ParsedOutput:
        """See :class:`strands_art.toolcalls.base.ToolCallParser`. Never raises on model output."""
        names = resolve_tool_names(tool_names, tools)
        specs = tool_specs_by_name(tools)
        body = strip_end_markers(text, self.end_markers)
        split = split_reasoning(body, think_open=think_open)
        content = split.content
        problems = list(split.problems)
        try:
            calls, kept_text, notes = self._scan(content, specs)
        except CallSyntaxError as exc:
            logger.debug("ill-formed tool call: %s", exc)
            return ParsedOutput(
                text=content,
                reasoning=split.reasoning,
                ill_formed=True,
                problems=problems + [str(exc)],
            )
        out = ParsedOutput(
            text=kept_text, reasoning=split.reasoning, tool_calls=calls, problems=problems + notes
        )
        return flag_unknown(out, names)

    def _check_stray(self, segment: str, where: str) -> None:
        for marker in self.stray_markers:
            if marker in segment:
                raise CallSyntaxError(f"{marker!r} {where} outside a <tool_call> block")

    def _strip_separator(self, lead: str) -> str:
        for sep in self.separators:
            if lead.endswith(sep):
                return lead[: -len(sep)]
        return lead

    def _scan(self, content: str, specs: dict[str, dict]) -> tuple[list[ToolCall], str, list[str]]:
        first = content.find(OPEN)
        if first == -1:
            self._check_stray(content, "in the content")
            return [], content, []
        lead = content[:first]
        self._check_stray(lead, "before the first call")
        calls: list[ToolCall] = []
        extra: list[str] = []
        notes: list[str] = []
        pos = first
        while True:
            k = len(calls) + 1
            try:
                call, end, call_notes = self._read_call(content, pos + len(OPEN), specs)
            except CallSyntaxError as exc:
                raise CallSyntaxError(f"tool call {k}: {exc}") from None
            calls.append(
                ToolCall(
                    name=call.name,
                    arguments=call.arguments,
                    raw=content[pos:end],
                    raw_arguments=call.raw_arguments,
                )
            )
            notes.extend(f"tool call {k}: {note}" for note in call_notes)
            nxt = content.find(OPEN, end)
            gap = content[end:] if nxt == -1 else content[end:nxt]
            self._check_stray(gap, f"after tool call {k}")
            if gap.strip():
                extra.append(gap.strip())
                notes.append(f"text after tool call {k} kept as content: {gap.strip()[:60]!r}")
            if nxt == -1:
                break
            pos = nxt
        kept = self._strip_separator(lead)
        if extra:
            kept = "\n".join([kept, *extra]) if kept else "\n".join(extra)
        return calls, kept, notes
