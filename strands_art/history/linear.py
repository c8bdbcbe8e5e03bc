"""Linear history: continue the exact token history instead of re-tokenizing a re-serialized one.

For an append-only conversation the prompt of the next turn is::

    saved tokens (last prompt + sampled output) + missing closer + tokens(new messages + opening)

so earlier tool results keep the tokens they had when they entered the context and assistant
turns keep their sampled tokens, however the harness re-serializes them. See
docs/linear-history.md for the design, the policies and a worked example.

Per turn (the fast path) the policy renders the stored canonical messages plus the new ones
*once* (on the event loop, in slices: :meth:`ChatRenderer.arender`), checks that the previous turn's render (without its generation
prompt) is a text prefix of it, finds the end of the last assistant's closer after that point,
and tokenizes only the text after it (off the event loop). No whole-history tokenization.

Slower paths (:mod:`strands_art.history.boundary`), each reason-coded in the turn's ``heal`` event:

- ``probe``: the closer is not a special token or appears in the assistant's own text, so the
  boundary is found by also rendering the stored history followed by a probe message;
- ``full_history``: the template changed earlier text (Qwen3 drops earlier ``<think>`` blocks
  after a new user query); every stored segment of non-assistant text is located again in the new
  render and the saved tokens are kept. If a segment's text changed, it is a divergence
  (``template_prefix_unstable``), except for a trailing text the model family declares the
  template writes only after the conversation's last message (DeepSeek-R1's
  ``<｜tool▁outputs▁end｜>``: :attr:`ModelFamily.end_only_texts`), which the segment that ended
  the previous render may lose (reported as ``end_only_dropped``).

An echoed assistant message that leaves out the reasoning the model sampled is healed
(``reasoning_omitted="heal"``, listed in the heal event) or is a divergence with reason
``reasoning_omitted`` (``"reset"``).

Divergences (``message_edited``, ``reasoning_omitted``, ``tools_changed``, ``template_prefix_unstable``,
``closer_unresolved``) follow ``on_nonlinear``: ``reset`` (new linear segment; the saved tokens
of the messages before the edit are kept when the template allows), ``error``
(:class:`HistoryDivergence`), ``disable`` (plain re-rendering for the rest of the session).
A request that repeats one already answered is a *retry*, not an edit: it branches from the state
before that turn. Several lineages live side by side (sub-agents sharing a session); each request
continues the lineage whose stored messages are its longest prefix.

Over 450 lines as one history policy: its heal, retry and divergence paths share the pending-turn
state of :class:`LinearHistory`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from strands_art.history import boundary
from strands_art.history.base import PromptPlan
from strands_art.history.closers import PROBE_USER, missing_closer, template_shape
from strands_art.history.divergence import HistoryDivergence, describe, token_distance
from strands_art.history.lineage import (
    Lineage,
    Match,
    Segment,
    comparison_key,
    match_request,
    omits_reasoning,
)
from strands_art.history.normalize import normalize_message, split_inline_reasoning, tools_key
from strands_art.render import ChatRenderer

__all__ = ["HistoryDivergence", "LinearHistory", "token_distance"]

logger = logging.getLogger(__name__)

Policy = Literal["reset", "error", "disable"]
OmittedPolicy = Literal["heal", "reset"]

#: fragments up to this many characters are tokenized inline (~1 ms at most with Qwen3's BPE);
#: longer ones in a worker thread, off the event loop
SYNC_ENCODE_CHARS = 2048


@dataclass
class _Pending:
    """What plan() decided, applied by commit() only if the turn is recorded."""

    lineage: Lineage | None
    messages: list[dict[str, Any]]
    keys: list[tuple[str, str]]
    text: str = ""
    segment: Segment | None = None
    segments: list[Segment] | None = None
    is_new: bool = False
    drop: Lineage | None = None
    disable: bool = False
    counters: Counter = field(default_factory=Counter)


class LinearHistory:
    """History policy for ``history_mode="linear"``.

    Args:
        renderer: the gateway's :class:`~strands_art.render.ChatRenderer`.
        on_nonlinear: divergence policy: "reset" (default), "error", "disable".
        measure_drift: also render and tokenize the request as sent on every healed turn and
            report the token edit distance of the healed prompt from that plain re-render
            (``plain_distance``; O(history) per turn, off by default). The cheap per-turn
            ``drift_tokens`` (sampled tokens vs the template's re-render of that assistant turn)
            is always reported.
        max_lineages: lineages kept per session (least recently used evicted).
        reasoning_omitted: what an echoed assistant message that left out the reasoning the model
            sampled means: "heal" (default: the same turn; the saved history, which holds the
            sampled reasoning tokens, continues; the heal event lists the messages under
            ``reasoning_omitted``) or "reset" (an edit, as in the reference system: a divergence
            with reason ``reasoning_omitted``, handled by ``on_nonlinear``). The default was
            chosen by measurement (bench/drift_rows.py; docs/linear-history.md).
    """

    mode = "linear"

    def __init__(
        self,
        renderer: ChatRenderer,
        on_nonlinear: Policy = "reset",
        measure_drift: bool = False,
        max_lineages: int = 16,
        reasoning_omitted: OmittedPolicy = "heal",
    ) -> None:
        if on_nonlinear not in ("reset", "error", "disable"):
            raise ValueError(f"on_nonlinear must be 'reset', 'error' or 'disable', got {on_nonlinear!r}")
        if reasoning_omitted not in ("heal", "reset"):
            raise ValueError(f"reasoning_omitted must be 'heal' or 'reset', got {reasoning_omitted!r}")
        self.reasoning_omitted = reasoning_omitted
        self.renderer = renderer
        self.on_nonlinear = on_nonlinear
        self.measure_drift = measure_drift
        self.max_lineages = max_lineages
        self.shape = template_shape(renderer)
        self.lineages: list[Lineage] = []
        self.disabled = False
        self._counters: Counter = Counter()
        self._ids = itertools.count()
        self._clock = itertools.count(1)
        #: (lineage, its saved length) whose token list the last heal handed over to be extended
        self._handed: tuple[Lineage, int] | None = None

    def abandon(self) -> None:
        """The last plan will not be committed: restore the saved history now (see
        :meth:`_take_back`; :meth:`plan` does it anyway before the next request)."""
        self._take_back()

    def _take_back(self) -> None:
        """Undo the in-place extension of a heal whose turn was not committed (a failed or
        cancelled generation): the lineage's tokens are its saved history again, as a new list
        (O(history), on this rare path only); the extended list is left as it was handed out."""
        if self._handed is not None:
            lin, n = self._handed
            if len(lin.tokens) != n:  # a copy: the extended list may still be held (a failed prompt)
                lin.tokens = lin.tokens[:n]
            self._handed = None

    # ------------------------------------------------------------------ protocol
    async def plan(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> PromptPlan:
        """Prompt token IDs for this request (see module docstring). Raises HistoryDivergence."""
        self._take_back()
        if self.renderer.family.inline_reasoning:  # <think>R</think>C echoed: the same message
            messages = split_inline_reasoning(messages)
        keys = [comparison_key(m) for m in messages]
        if self.disabled:
            return await self._plain(messages, keys, tools, keep=False)
        m = match_request(self.lineages, keys, tools_key(tools), self.reasoning_omitted == "heal")
        if m.omitted:  # the stored messages (with their reasoning) stay the lineage's canonical form
            keys = [m.lineage.keys[i] if i in m.omitted else k for i, k in enumerate(keys)]
        if m.kind == "continue":
            return await self._heal(m.lineage, messages, keys, tools, omitted=m.omitted)
        if m.kind == "retry":
            return self._retry(m, messages, keys)
        if m.kind == "new":
            plan = await self._plain(messages, keys, tools)
            if self.lineages:
                plan.events.append(
                    {
                        "kind": "new_lineage",
                        "reason": "no stored lineage shares a leading message with the request",
                        "lineage": plan.lineage,
                    }
                )
                plan.explains_fork = True
            return plan
        reason = "message_edited" if m.kind == "edited" else "tools_changed"
        k = m.common if m.common < len(m.lineage.keys) else None
        if reason == "message_edited" and k is not None and k < len(keys):
            if omits_reasoning(m.lineage.messages[k], keys[k]):  # policy "reset"
                reason = "reasoning_omitted"
        return await self._diverge(reason, m.lineage, k, messages, keys, tools)

    def commit(
        self, plan: PromptPlan, output_ids: list[int], finish_reason: str, assistant: dict[str, Any]
    ) -> None:
        """Advance the saved history with the recorded turn (only recorded turns are committed)."""
        p: _Pending = plan.state
        self._handed = None  # the handed-over list is this turn's prompt now; lin.tokens is replaced
        plan.finish_now(self.renderer.encode_sync)  # metrics nobody awaited plan.finish() for
        self._counters.update(p.counters)
        self._counters["turns"] += 1
        if p.disable:
            self.disabled = True
            self.lineages.clear()
        if p.drop is not None and p.drop in self.lineages:
            self.lineages.remove(p.drop)
        lin = p.lineage
        if lin is None:
            return
        closing = missing_closer(self.renderer, self.shape, list(output_ids), finish_reason)
        self._counters[f"closer_{closing.code}"] += 1
        amsg = normalize_message(len(p.messages), assistant)
        lin.messages = p.messages + [amsg]
        lin.keys = p.keys + [comparison_key(amsg)]
        lin.tokens = plan.prompt_ids + list(output_ids)  # a new list: handed-out prefixes stay intact
        if p.segments is not None:
            lin.segments = p.segments
        if p.segment is not None:
            lin.segments.append(p.segment)
        lin.text = (p.text or lin.text)[: lin.stable]  # without the generation prompt
        lin.closer_ids = closing.ids
        lin.last_used = next(self._clock)
        if p.is_new:
            self.lineages.append(lin)
            self._counters["lineages_created"] += 1
            if len(self.lineages) > self.max_lineages:
                self.lineages.remove(min(self.lineages, key=lambda x: x.last_used))

    def counters(self) -> dict[str, int]:
        """Per-session counters (turns, healed_turns, heal_fast, resets, drift_tokens, ...)."""
        out = {k: int(v) for k, v in self._counters.items()}
        out["lineages"] = len(self.lineages)
        return out

    # ------------------------------------------------------------------ paths
    async def _plain(
        self,
        messages: list[dict[str, Any]],
        keys: list[tuple[str, str]],
        tools: list[dict[str, Any]] | None,
        keep: bool = True,
        text: str | None = None,
    ) -> PromptPlan:
        """Render and tokenize the whole request: a new lineage (or plain, when disabled)."""
        text = text if text is not None else await self._render(messages, tools, True)
        ids = await self.renderer.encode(text)
        if not keep:
            return PromptPlan(ids, state=_Pending(None, messages, keys, counters=Counter(plain_turns=1)))
        lin = Lineage(id=next(self._ids), tools_key=tools_key(tools), tools=tools)
        seg = Segment(0, len(messages), 0, len(ids), 0, self._stable_end(text))
        state = _Pending(lin, list(messages), keys, text, seg, is_new=True)
        return PromptPlan(ids, lineage=lin.id, state=state)

    async def _render(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, add_generation_prompt: bool
    ) -> str:
        """:meth:`ChatRenderer.arender`: the event loop yields to other tasks between slices."""
        return await self.renderer.arender(messages, tools, add_generation_prompt)

    async def _probe(self, lin: Lineage, tools: list[dict[str, Any]] | None) -> str:
        """The stored history followed by a probe user message, without generation prompt."""
        return await self._render(lin.messages + [{"role": "user", "content": PROBE_USER}], tools, False)

    async def _encode(self, text: str) -> list[int]:
        """Token IDs of a fragment: inline below ``SYNC_ENCODE_CHARS`` (microseconds of Rust, cheaper
        than a hop off the event loop), else in a worker thread off the loop."""
        if len(text) <= SYNC_ENCODE_CHARS:
            return self.renderer.encode_sync(text)
        return await self.renderer.encode(text)

    def _stable_end(self, text: str) -> int:
        gen = self.shape.generation_prompt
        return len(text) - len(gen) if gen and text.endswith(gen) else len(text)

    async def _heal(
        self,
        lin: Lineage,
        messages: list[dict[str, Any]],
        keys: list[tuple[str, str]],
        tools: list[dict[str, Any]] | None,
        omitted: list[int] | None = None,
    ) -> PromptPlan:
        shape = self.shape
        stored = lin.messages
        canonical = stored + messages[len(stored) :]
        if not shape.resolved:
            return await self._diverge("closer_unresolved", lin, None, messages, keys, tools, drop=lin)
        sent_tools, tools = tools, lin.tools  # equal (tools_key); the form the history was rendered with
        text = await self._render(canonical, tools, True)
        segments = None
        dropped: tuple[str, ...] = ()
        path = "fast"
        found = boundary.fast(shape, lin, text)
        if found == "ambiguous":
            path = "probe"
            found = boundary.by_probe(shape, lin.stable, text, await self._probe(lin, tools))
        elif found == "prefix_changed":
            path = "full_history"
            relocated = boundary.relocate_segments(shape, lin, text)
            if isinstance(relocated, int):
                msg_index = lin.segments[relocated].msg_start if relocated < len(lin.segments) else None
                return await self._diverge(
                    "template_prefix_unstable", lin, msg_index, messages, keys, tools, drop=lin, text=text
                )
            found, segments, dropped = relocated.offsets, relocated.segments, relocated.dropped
            if boundary.ambiguous(shape, lin.messages[-1]):  # the first closer may be the assistant's
                found = boundary.by_probe(shape, found[1], text, await self._probe(lin, tools))
        if not isinstance(found, tuple):
            return await self._diverge(
                "closer_unresolved", lin, None, messages, keys, tools, drop=lin, text=text
            )
        end, region_start = found
        await asyncio.sleep(0)  # render and tokenization in separate event-loop slices
        tail_ids = await self._encode(text[end:])
        suffix = lin.closer_ids + tail_ids
        event: dict[str, Any] = {
            "kind": "heal",
            "reason": path,
            "lineage": lin.id,
            "saved_tokens": len(lin.tokens),
            "closer_tokens": len(lin.closer_ids),
            "new_tokens": len(tail_ids),
        }
        counters = Counter({"healed_turns": 1, f"heal_{path}": 1})
        if omitted:  # echoed without the sampled reasoning; the saved tokens keep it
            event["reasoning_omitted"] = list(omitted)
            counters["reasoning_omitted"] += sum(1 for i in omitted if i == len(stored) - 1)
        if dropped:  # a declared end-only text the template no longer writes (docs/linear-history.md)
            event["end_only_dropped"] = list(dropped)
            counters["end_only_dropped"] += 1
        # drift of the last assistant turn (the template's re-render vs what was sampled + closer):
        # a metric, computed after the prompt went out (PromptPlan.finish)
        sampled = list(shape.generation_prompt_ids) + lin.last_output + lin.closer_ids

        def drift(region_ids: list[int]) -> None:
            event["drift_tokens"] = d = token_distance(region_ids, sampled)
            counters["drift_tokens"] += d
            if d:
                counters["drift_turns"] += 1

        if self.measure_drift:
            plain = await self.renderer.encode(await self._render(messages, sent_tools, True))
            event["plain_distance"] = token_distance(lin.tokens + suffix, plain)
            counters["plain_distance"] += event["plain_distance"]
        seg = Segment(
            msg_start=len(stored),
            msg_end=len(messages),
            tok_start=len(lin.tokens) + len(lin.closer_ids),
            tok_end=len(lin.tokens) + len(suffix),
            char_start=end,
            char_end=self._stable_end(text),
        )
        state = _Pending(lin, canonical, keys, text, seg, segments=segments, counters=counters)
        # the saved history is handed over uncopied and extended in place (PromptPlan.extend_prefix):
        # commit replaces lin.tokens with a new list; an uncommitted turn is taken back (_take_back)
        self._handed = (lin, len(lin.tokens))
        return PromptPlan(
            lin.tokens,
            lineage=lin.id,
            events=[event],
            state=state,
            suffix=suffix,
            deferred=[(text[region_start:end], drift)],
            extend_prefix=True,
        )

    def _retry(self, m: Match, messages: list[dict[str, Any]], keys: list[tuple[str, str]]) -> PromptPlan:
        """Branch from the state before the answered request (a retry is not an edit)."""
        lin = m.lineage
        seg = lin.segments[m.segment]
        branch = lin.truncated(next(self._ids), m.segment + 1, seg.tok_end, seg.msg_end)
        prompt = lin.tokens[: seg.tok_end]
        event = {
            "kind": "retry",
            "reason": "retry",
            "lineage": branch.id,
            "from_lineage": lin.id,
            "messages": len(messages),
            "dropped_tokens": len(lin.tokens) - seg.tok_end,
        }
        state = _Pending(
            branch, list(branch.messages), keys, lin.text, is_new=True, counters=Counter(retries=1)
        )
        return PromptPlan(list(prompt), lineage=branch.id, events=[event], explains_fork=True, state=state)

    async def _diverge(
        self,
        reason: str,
        lin: Lineage,
        k: int | None,
        messages: list[dict[str, Any]],
        keys: list[tuple[str, str]],
        tools: list[dict[str, Any]] | None,
        drop: Lineage | None = None,
        text: str | None = None,
    ) -> PromptPlan:
        """Apply ``on_nonlinear`` to a divergence from lineage ``lin`` at message ``k``."""
        detail = describe(reason, lin.messages, messages, k)
        event: dict[str, Any] = {"reason": reason, "message": k, "from_lineage": lin.id, "detail": detail}
        if k is not None and k < len(messages):
            event["role"] = messages[k].get("role")
        counters = Counter({"divergences": 1, f"reason_{reason}": 1})
        if self.on_nonlinear == "error":
            raise HistoryDivergence(reason, k, detail, lin.id)
        if self.on_nonlinear == "disable":
            plan = await self._plain(messages, keys, tools, keep=False)
            plan.state.disable = True
            plan.state.counters.update(counters + Counter(disabled=1))
            plan.events.append({"kind": "linear_disabled", **event})
            plan.explains_fork = True
            logger.warning("linear history disabled for this session: %s", detail)
            return plan
        plan = None
        if reason == "message_edited" and k is not None:
            plan = await self._partial(lin, k, messages, keys, tools)
        if plan is None:
            plan = await self._plain(messages, keys, tools, text=None)
        kept = plan.state.segment.tok_start if plan.state.segment else 0
        counters.update(resets=1, kept_tokens=kept)
        if kept:
            counters["partial_heals"] += 1
        plan.state.counters.update(counters)
        plan.state.drop = drop
        plan.events.append(
            {
                "kind": "reset",
                **event,
                "lineage": plan.lineage,
                "kept_tokens": kept,
                "dropped_tokens": len(lin.tokens) - kept,
            }
        )
        plan.explains_fork = True
        logger.info("linear history reset (%s): %s", reason, detail)
        return plan

    async def _partial(
        self,
        lin: Lineage,
        k: int,
        messages: list[dict[str, Any]],
        keys: list[tuple[str, str]],
        tools: list[dict[str, Any]] | None,
    ) -> PromptPlan | None:
        """Keep the saved tokens of the messages before ``k``; render only from there.

        Uses the deepest segment that starts (right after an assistant closer) at or before
        message ``k`` and whose preceding text the new render reproduces. None if there is none.
        """
        cands = [j for j, s in enumerate(lin.segments) if 0 < j and s.msg_start <= k]
        if not cands:
            return None
        j = cands[-1]
        seg = lin.segments[j]
        tools = lin.tools  # equal to the request's ("edited" matches on tools_key)
        canonical = lin.messages[: seg.msg_start] + messages[seg.msg_start :]
        text = await self._render(canonical, tools, True)
        if not text.startswith(lin.text[: seg.char_start]):
            return None
        tail_ids = await self._encode(text[seg.char_start :])
        prompt = lin.tokens[: seg.tok_start] + tail_ids
        branch = lin.truncated(next(self._ids), j, seg.tok_start, seg.msg_start)
        new_seg = Segment(
            seg.msg_start, len(messages), seg.tok_start, len(prompt), seg.char_start, self._stable_end(text)
        )
        state = _Pending(branch, canonical, keys, text, new_seg, is_new=True)
        return PromptPlan(prompt, lineage=branch.id, state=state)
