"""Tree history: the true inference history, re-rendered and re-tokenized every turn.

Every request is rendered with the chat template and tokenized whole; the capture
(:mod:`strands_art.capture`) extends a row when these tokens extend it exactly, and otherwise
forks a new row. :func:`explain_fork` says why, for the fork event.
"""

from __future__ import annotations

from typing import Any

from strands_art.history.base import PromptPlan
from strands_art.render import ChatRenderer, TemplateError


class TreeHistory:
    """History policy for ``history_mode="tree"`` (the default)."""

    mode = "tree"

    def __init__(self, renderer: ChatRenderer) -> None:
        self.renderer = renderer
        self._turns = 0

    async def plan(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> PromptPlan:
        text = await self.renderer.arender(messages, tools, add_generation_prompt=True)
        return PromptPlan(await self.renderer.encode(text))

    def commit(
        self, plan: PromptPlan, output_ids: list[int], finish_reason: str, assistant: dict[str, Any]
    ) -> None:
        self._turns += 1

    def counters(self) -> dict[str, int]:
        return {"turns": self._turns}


def first_difference(a: list[int], b: list[int]) -> int:
    """Index of the first position where ``a`` and ``b`` differ (len of the shorter if one is a prefix)."""
    n = min(len(a), len(b))
    i = 0
    # compare in chunks first: list slices compare in C
    step = 256
    while i + step <= n and a[i : i + step] == b[i : i + step]:
        i += step
    while i < n and a[i] == b[i]:
        i += 1
    return i


def explain_fork(
    renderer: ChatRenderer,
    previous_ids: list[int],
    prompt_ids: list[int],
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    window: int = 3,
) -> dict[str, Any]:
    """Why ``prompt_ids`` does not extend ``previous_ids`` (the last row's tokens).

    Returns a dict with ``position`` (first differing token index), ``message`` (index of the
    message whose rendering holds that position, or None), ``previous``/``incoming`` (the token
    strings around the position) and a human-readable ``reason``.
    """
    pos = first_difference(previous_ids, prompt_ids)
    prev_win = renderer.token_strings(previous_ids[max(0, pos - window) : pos + window])
    new_win = renderer.token_strings(prompt_ids[max(0, pos - window) : pos + window])
    msg_index = _message_at(renderer, prompt_ids, pos, messages, tools)
    if pos >= len(prompt_ids):
        reason = f"the prompt ({len(prompt_ids)} tokens) is shorter than the row ({len(previous_ids)} tokens)"
    else:
        where = f" in message {msg_index}" if msg_index is not None else ""
        reason = (
            f"token {pos}{where} differs: row has {renderer.token_strings(previous_ids[pos : pos + 1])} "
            f"but the prompt has {renderer.token_strings(prompt_ids[pos : pos + 1])}"
        )
    return {
        "position": pos,
        "message": msg_index,
        "previous": prev_win,
        "incoming": new_win,
        "reason": reason,
    }


def _message_at(
    renderer: ChatRenderer,
    prompt_ids: list[int],
    pos: int,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
) -> int | None:
    """Index of the message whose rendered text covers token ``pos`` (approximate: by text length)."""
    char = len(renderer.decode(prompt_ids[:pos]))
    for k in range(1, len(messages) + 1):
        try:
            text = renderer.render(messages[:k], tools, add_generation_prompt=False)
        except TemplateError:
            continue
        if len(text) > char:
            return k - 1
    return None
