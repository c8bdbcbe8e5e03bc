"""A turn cut at the token limit keeps the tool calls it completed.

A model that writes its calls and then keeps going (more calls, more text) until the turn's
token limit ends with an unclosed call; the parsers then report the output ill-formed and
return no call at all, so a harness drops every call of the turn (Strands stops the agent on
``max_tokens``). The rule (the gateway's, so the Strands provider and the HTTP front both
follow it):

- a turn whose sample ended at the token limit (``finish_reason`` "length") ends at its last
  complete call: the output is parsed as its **longest prefix that ends at a token boundary
  and parses well-formed with at least one call**; those calls are the turn's calls and its
  finish reason is ``tool_calls`` (Strands: ``tool_use``), so the harness runs them;
- the row keeps every sampled token, the tail after that prefix included (it is what the
  policy sampled, with its logprobs); the tail is marked: a ``length_cut_at_calls`` event and
  ``trajectory.metadata["cut_turns"]`` give its token span ``[tail_start, len(output_ids))``
  within the turn's output, for a trainer that wants to mask it;
- the recorded :class:`~strands_art.trajectory.Turn` keeps ``finish_reason`` "length" (the
  turn is still listed in ``metadata["truncated_turns"]``).

Only prefixes ending in a token whose text ends with a character a call can end with (``>``,
``}``, ``]``, ``|``, a newline: every family's closing marker or JSON; or ``,``, the separator
of a JSON list of calls, which is dropped before a closer) are parsed, the longest
first, at most :data:`MAX_PARSES` of them: the cost is a few parses of the turn's output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from strands_art.toolcalls.base import ParsedOutput

BOUNDARY_ENDINGS = (">", "}", "]", "|", "\n", ",")
MAX_PARSES = 128


def last_complete_calls(
    output_ids: Sequence[int],
    parse: Callable[[list[int], str], ParsedOutput],
    token_text: Callable[[int], str],
    closers: Sequence[str] = (),
    max_parses: int = MAX_PARSES,
) -> tuple[int, ParsedOutput] | None:
    """The longest prefix of ``output_ids`` that parses well-formed with at least one call, as
    it is or with one of ``closers`` added (a family's call-list closer:
    :attr:`~strands_art.families.base.ModelFamily.call_list_closers`).

    Args:
        output_ids: the turn's sampled token IDs.
        parse: ``parse(ids, suffix)`` parses output IDs, with text ``suffix`` added to their
            decoded text, as the gateway does.
        token_text: the text of one token ID.
        closers: texts to try after a prefix that does not parse alone.
        max_parses: give up (None) after this many parses.

    Returns:
        ``(k, parsed)``: ``output_ids[:k]`` and its parse, or None when no such prefix was found.
    """
    parses = 0
    for k in range(len(output_ids), 0, -1):
        text = token_text(output_ids[k - 1]).rstrip(" \t")
        if k != len(output_ids) and not text.endswith(BOUNDARY_ENDINGS):
            continue
        for suffix in ("", *closers):
            parsed = parse(list(output_ids[:k]), suffix)
            if parsed.tool_calls and not parsed.ill_formed:
                return k, parsed
            parses += 1
            if parses >= max_parses:
                return None
    return None
