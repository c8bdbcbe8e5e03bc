"""One linear token history (a *lineage*) and how a request is matched to one.

A lineage holds the canonical messages of one append-only conversation (the harness's
non-assistant messages as received, the gateway's own assistant messages), the exact token
history the backend saw plus what it sampled, and the text of the latest render. Its history is a
sequence of *segments*: the new non-assistant messages of one request, rendered and tokenized at
that request; between segments sit the sampled assistant tokens and their closer. The segment
offsets are the per-message token spans used for retries and partial healing.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import Any

from strands_art.history.normalize import message_key
from strands_art.history.tree import first_difference


@dataclass
class Segment:
    """The new non-assistant messages of one request, as spliced into the lineage.

    ``messages[msg_start:msg_end]`` are the messages; ``tokens[tok_start:tok_end]`` their tokens
    plus the generation prompt (``tok_end`` is the request's prompt length);
    ``text[char_start:char_end]`` their rendered text without the generation prompt.
    ``tok_start``/``char_start`` sit right after the previous assistant's closer (0 for the first).
    """

    msg_start: int
    msg_end: int
    tok_start: int
    tok_end: int
    char_start: int
    char_end: int


@dataclass
class Lineage:
    """One linear history.

    Attributes:
        id: lineage number within the session (0, 1, ...).
        tools_key: comparison key of the tool specs it was rendered with.
        tools: the tool specs.
        messages / keys: canonical messages and their :func:`comparison_key` keys.
        tokens: the saved token history (last prompt + its sampled output), list[int].
        text: the latest render (with generation prompt) of ``messages`` minus the last assistant.
        segments: see :class:`Segment`, oldest first.
        closer_ids: closer tokens the last output still needs (appended on the next request).
        last_used: a counter value for least-recently-used eviction.
    """

    id: int
    tools_key: str
    tools: list[dict[str, Any]] | None
    messages: list[dict[str, Any]] = field(default_factory=list)
    keys: list[tuple[str, str]] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    text: str = ""
    segments: list[Segment] = field(default_factory=list)
    closer_ids: list[int] = field(default_factory=list)
    last_used: int = 0

    @property
    def stable(self) -> int:
        """Length of ``text`` without the generation prompt (where the last assistant begins)."""
        return self.segments[-1].char_end if self.segments else 0

    @property
    def last_output(self) -> list[int]:
        """The sampled tokens of the last committed turn."""
        return self.tokens[self.segments[-1].tok_end :] if self.segments else []

    def truncated(self, new_id: int, n_segments: int, n_tokens: int, n_messages: int) -> Lineage:
        """A new lineage holding this one's first ``n_segments`` segments (for retries and resets)."""
        return Lineage(
            id=new_id,
            tools_key=self.tools_key,
            tools=self.tools,
            messages=self.messages[:n_messages],
            keys=self.keys[:n_messages],
            tokens=self.tokens[:n_tokens],
            text=self.text,
            segments=[replace(s) for s in self.segments[:n_segments]],
        )


def comparison_key(msg: dict[str, Any]) -> tuple[str, str]:
    """A cheap equality key for a normalized message, equal exactly when :func:`message_key` is.

    Non-assistant messages compare by (role, content): a string comparison in C, no JSON
    serialization of long tool results every turn. Assistant messages use :func:`message_key`
    (tool-call arguments parsed, so key order and spacing do not matter; ids ignored), memoized
    on the message's text fields, since a harness re-sends the same history every turn.
    """
    if msg["role"] != "assistant":
        return (msg["role"], msg.get("content", ""))
    calls = msg.get("tool_calls") or []
    if all(isinstance(c["function"]["arguments"], str) for c in calls):
        fingerprint = (
            msg.get("content", ""),
            msg.get("reasoning_content") or "",
            tuple((c["function"]["name"], c["function"]["arguments"]) for c in calls),
        )
        return ("assistant", _assistant_key(fingerprint))
    return ("assistant", message_key(msg))


@functools.lru_cache(maxsize=4096)
def _assistant_key(fingerprint: tuple[str, str, tuple[tuple[str, str], ...]]) -> str:
    content, reasoning, calls = fingerprint
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning:
        msg["reasoning_content"] = reasoning
    if calls:
        msg["tool_calls"] = [{"function": {"name": n, "arguments": a}} for n, a in calls]
    return message_key(msg)


def omits_reasoning(stored: dict[str, Any], key: tuple[str, str]) -> bool:
    """True when ``key`` is the comparison key of ``stored`` (an assistant message with non-empty
    reasoning) without its reasoning: the harness echoed the turn but dropped the reasoning."""
    if stored["role"] != "assistant" or not stored.get("reasoning_content") or key[0] != "assistant":
        return False
    return comparison_key({k: v for k, v in stored.items() if k != "reasoning_content"}) == key


def common_prefix(
    lin: Lineage, keys: list[tuple[str, str]], reasoning_omitted_ok: bool
) -> tuple[int, list[int]]:
    """Leading messages ``keys`` shares with ``lin``, and the indices among them where only the
    stored reasoning was omitted (accepted as equal when ``reasoning_omitted_ok``)."""
    n = first_difference(lin.keys, keys)
    omitted: list[int] = []
    while (
        reasoning_omitted_ok
        and n < min(len(lin.keys), len(keys))
        and omits_reasoning(lin.messages[n], keys[n])
    ):
        omitted.append(n)
        n += 1 + first_difference(lin.keys[n + 1 :], keys[n + 1 :])
    return n, omitted


@dataclass
class Match:
    """How a request relates to the stored lineages.

    ``kind``: "continue" (a lineage's messages are a prefix of the request), "retry" (the request
    repeats one a lineage already answered), "tools_changed", "edited" (shares ``common`` leading
    messages, then differs), or "new" (shares nothing with any lineage). ``segment`` is the
    retried segment's index for "retry". ``omitted``: the stored assistant messages (indices)
    whose reasoning the request left out, accepted as equal (see :func:`match_request`).
    """

    kind: str
    lineage: Lineage | None = None
    common: int = 0
    segment: int = -1
    omitted: list[int] = field(default_factory=list)


def match_request(
    lineages: list[Lineage], keys: list[tuple[str, str]], tools_key: str, reasoning_omitted_ok: bool = False
) -> Match:
    """Pick the lineage a request continues: the one whose stored messages are its longest prefix.

    Ties and partial matches go to the most recently used lineage. With ``reasoning_omitted_ok``
    an assistant message equal to the stored one but without its reasoning counts as equal
    (``Match.omitted`` lists them).
    """
    best: Match | None = None
    partial: Match | None = None
    for lin in sorted(lineages, key=lambda x: -x.last_used):
        n, omitted = common_prefix(lin, keys, reasoning_omitted_ok)
        if n == len(lin.keys) and lin.tools_key == tools_key:
            if best is None or best.kind != "continue" or n > best.common:
                best = Match("continue", lin, n, omitted=omitted)
            continue
        if best is None or best.kind != "continue":
            if n == len(keys) and lin.tools_key == tools_key:
                for j, seg in enumerate(lin.segments):
                    if seg.msg_end == n:
                        best = Match("retry", lin, n, j, omitted=omitted)
                        break
        if n and (partial is None or n > partial.common):
            kind = "edited" if lin.tools_key == tools_key else "tools_changed"
            if n == len(lin.keys):
                kind = "tools_changed"
            partial = Match(kind, lin, n)
    if best is not None:
        return best
    return partial or Match("new")
