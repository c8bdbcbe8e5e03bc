"""The history-policy protocol: how a turn's prompt token IDs are built.

A policy is per session. ``plan()`` turns the normalized messages and tools of a request into the
prompt token IDs sent to the backend; ``commit()`` is called only after the generation was
recorded (a failed, cancelled or timed-out generation never advances a policy's state).

- ``tree`` (:mod:`strands_art.history.tree`): render the whole conversation and tokenize it; the
  capture forks a row when the tokens stop extending an earlier row.
- ``linear`` (:mod:`strands_art.history.linear`): continue the saved token history and tokenize
  only the new messages; see docs/linear-history.md.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class PromptPlan:
    """What a policy decided for one turn.

    The prompt is ``prefix + suffix``: a linear heal hands over the saved token history as
    ``prefix`` without copying it and only the closer and new tokens as ``suffix``, so planning a
    turn costs O(new tokens), not O(history). :attr:`prompt_ids` builds the list once, when the
    gateway sends it to the backend. Policies never mutate a list they handed out as ``prefix``,
    except with ``extend_prefix``: the prefix is a list the policy owns and hands over for good,
    so :attr:`prompt_ids` appends the suffix to it in place (no O(history) copy on the way to the
    backend); if the turn is not committed the policy keeps a copy of its saved part instead.

    Attributes:
        prefix: list[int], the leading prompt token IDs (shared, read-only).
        lineage: the linear lineage this turn continues (0 in tree mode).
        events: events to record with the turn if it commits (dicts with ``kind`` and ``reason``).
        explains_fork: True when ``events`` already says why the prompt does not extend a row
            (a linear reset), so the capture need not compute its own explanation.
        state: policy-private data carried from plan() to commit().
        suffix: list[int], the token IDs after ``prefix``.
        extend_prefix: :attr:`prompt_ids` extends ``prefix`` in place (see above).
        max_new_tokens: the output limit the gateway sent with this turn (the session's
            ``max_new_tokens`` or less, when the context budget left less room); None until sent.
        deferred: metrics that need not delay the prompt (e.g. a heal's drift), as (text,
            callback) pairs: the text is tokenized after the prompt went to the backend and the
            callback gets its IDs, before ``events`` are recorded (:meth:`finish`,
            :meth:`finish_now`).
    """

    prefix: list[int]
    lineage: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    explains_fork: bool = False
    state: Any = None
    suffix: list[int] = field(default_factory=list)
    deferred: list[tuple[str, Callable[[list[int]], None]]] = field(default_factory=list)
    extend_prefix: bool = False
    max_new_tokens: int | None = None
    _ids: list[int] | None = field(default=None, init=False, repr=False)

    @property
    def prompt_ids(self) -> list[int]:
        """list[int] of length len(prefix) + len(suffix): the exact token IDs to send to the backend."""
        if self._ids is None:
            if self.extend_prefix and self.suffix:
                self.prefix.extend(self.suffix)
                self._ids = self.prefix
            else:
                self._ids = self.prefix + self.suffix if self.suffix else self.prefix
        return self._ids

    def __len__(self) -> int:
        """Prompt length in tokens, without building the list."""
        return len(self._ids) if self._ids is not None else len(self.prefix) + len(self.suffix)

    async def finish(self, encode: Callable[[str], Awaitable[list[int]]]) -> None:
        """Run the deferred metrics with ``encode`` (e.g. :meth:`ChatRenderer.encode`), each once.

        A metric is removed only once done, so a cancelled ``finish()`` leaves the rest to
        :meth:`finish_now`.
        """
        while self.deferred:
            text, callback = self.deferred[0]
            callback(await encode(text))
            self.deferred.pop(0)

    def finish_now(self, encode_sync: Callable[[str], list[int]]) -> None:
        """Run the deferred metrics :meth:`finish` did not, synchronously (a direct ``commit``, or a
        turn recorded after its ``finish()`` was cancelled)."""
        while self.deferred:
            text, callback = self.deferred.pop(0)
            callback(encode_sync(text))


class HistoryPolicy(Protocol):
    mode: str

    async def plan(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> PromptPlan:
        """Prompt token IDs for this request. Raises MessageError / TemplateError / HistoryDivergence."""
        ...

    def commit(
        self, plan: PromptPlan, output_ids: list[int], finish_reason: str, assistant: dict[str, Any]
    ) -> None:
        """Advance the saved history after the turn was recorded."""
        ...

    def counters(self) -> dict[str, int]:
        """Per-session counters (heals, resets, ...) that ride on each row's metadata."""
        ...
