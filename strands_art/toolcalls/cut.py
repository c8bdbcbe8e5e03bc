"""A turn cut inside a call keeps the tool calls it completed.

A model that writes its calls and then keeps going (more calls, more text) ends with an unclosed
call: at the turn's token limit, or when it samples its end token inside the call (seen: three
complete calls, a fourth without ``</tool_call>``, then ``<|im_end|>``). The parsers then report
the output ill-formed and return no call at all, so a harness drops every call of the turn
(Strands stops the agent on ``max_tokens``, or ends it on the ill-formed text). The rule (the
gateway's, so the Strands provider and the HTTP front both follow it):

- a turn with tools whose sample ended at the token limit (``finish_reason`` "length"), or
  whose whole output parses ill-formed whatever its finish reason (an unclosed or broken call
  after complete ones, then the end token), ends at its last complete call: the output is
  parsed as its **longest prefix that ends at a token boundary and parses well-formed with at
  least one call**; those calls are the turn's calls and its finish reason is ``tool_calls``
  (Strands: ``tool_use``), so the harness runs them;
- the row keeps every sampled token, the tail after that prefix included (it is what the
  policy sampled, with its logprobs); the tail is marked: a ``length_cut_at_calls`` event (with
  the sample's ``finish_reason`` and the whole output's parse problems) and
  ``trajectory.metadata["cut_turns"]`` give its token span ``[tail_start, len(output_ids))``
  within the turn's output, for a trainer that wants to mask it;
- the recorded :class:`~strands_art.trajectory.Turn` keeps ``finish_reason`` "length" for a
  turn cut at the limit (still listed in ``metadata["truncated_turns"]``); one ended by its end
  token records "tool_calls", as any turn with calls;
- a turn whose only call is broken (no complete call before it) is not cut: at the token limit
  it stays a "length" turn, ended by its end token it stays an ill-formed turn (the raw text as
  content, no call, finish reason "stop", listed in ``metadata["ill_formed_turns"]``).

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
