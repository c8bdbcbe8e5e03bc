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

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class PromptPlan:
    """What a policy decided for one turn.

    Attributes:
        prompt_ids: list[int], the exact token IDs to send to the backend.
        lineage: the linear lineage this turn continues (0 in tree mode).
        events: events to record with the turn if it commits (dicts with ``kind`` and ``reason``).
        explains_fork: True when ``events`` already says why the prompt does not extend a row
            (a linear reset), so the capture need not compute its own explanation.
        state: policy-private data carried from plan() to commit().
    """

    prompt_ids: list[int]
    lineage: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    explains_fork: bool = False
    state: Any = None


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
