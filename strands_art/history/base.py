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
    gateway sends it to the backend. Policies never mutate a list they handed out as ``prefix``.

    Attributes:
        prefix: list[int], the leading prompt token IDs (shared, read-only).
        lineage: the linear lineage this turn continues (0 in tree mode).
        events: events to record with the turn if it commits (dicts with ``kind`` and ``reason``).
        explains_fork: True when ``events`` already says why the prompt does not extend a row
            (a linear reset), so the capture need not compute its own explanation.
        state: policy-private data carried from plan() to commit().
        suffix: list[int], the token IDs after ``prefix``.
        deferred: coroutine functions run once by :meth:`finish`, after the prompt went to the
            backend and before ``events`` are recorded (metrics that need not delay the prompt,
            e.g. a heal's drift).
        finish_sync: the same metrics computed synchronously, for :meth:`finish_now` (a turn
            recorded without ``finish()``, e.g. cancelled while it ran).
    """

    prefix: list[int]
    lineage: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    explains_fork: bool = False
    state: Any = None
    suffix: list[int] = field(default_factory=list)
    deferred: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    finish_sync: Callable[[], None] | None = None
    _ids: list[int] | None = field(default=None, init=False, repr=False)

    @property
    def prompt_ids(self) -> list[int]:
        """list[int] of length len(prefix) + len(suffix): the exact token IDs to send to the backend."""
        if self._ids is None:
            self._ids = self.prefix + self.suffix if self.suffix else self.prefix
        return self._ids

    def __len__(self) -> int:
        """Prompt length in tokens, without building the list."""
        return len(self.prefix) + len(self.suffix)

    def finish_now(self) -> None:
        """Complete the deferred metrics synchronously if :meth:`finish` did not (idempotent)."""
        if self.deferred:
            self.deferred.clear()
            if self.finish_sync is not None:
                self.finish_sync()

    async def finish(self) -> None:
        """Run the deferred metrics (once; later calls do nothing)."""
        while self.deferred:  # each removed only once done: a cancelled finish() leaves the rest
            await self.deferred[0]()
            self.deferred.pop(0)


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
