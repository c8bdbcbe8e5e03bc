"""Streaming a turn's text to Strands while the backend samples it.

The backend hands over token IDs as it produces them (:data:`~strands_art.backends.base.TokenSink`);
:class:`TextStream` turns them into text deltas that are safe to show before the turn ends: the
part of the output that the gateway's own parser (:meth:`RolloutGateway.preview`) already reads
as plain answer text, up to the first character that may open markup (``<``, ``[``, ``{``,
`````) or an unfinished UTF-8 sequence, without trailing whitespace. Reasoning and tool calls are
not streamed: they are sent whole when the turn ends, as before. The streamed text is therefore
always a prefix of the turn's final text (checked by :meth:`TextStream.consistent`; the property
test in tests/test_streaming.py drives it with adversarial text), and what is recorded is the
backend's final result, never the stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from strands_art.formats import text_delta_events

MARKUP_OPENERS = "<[{`\ufffd"
POLL_S = 0.02  # how often a running turn checks the cancel signal and forwards streamed text


def safe_prefix(text: str) -> str:
    """``text`` up to the first character that may start markup, without trailing whitespace."""
    cut = min((i for i in (text.find(c) for c in MARKUP_OPENERS) if i >= 0), default=len(text))
    return text[:cut].rstrip()


class TextStream:
    """Text deltas of one turn, from the token IDs the backend has produced so far.

    Args:
        gateway: the :class:`~strands_art.gateway.RolloutGateway` (its parser is used).
        tools: the turn's OpenAI-format tool specs (the parser needs their names).

    Attributes:
        streamed: the text sent so far (a prefix of the final text).
        frozen: True once the output showed reasoning or a tool call, or the safe prefix stopped
            growing from what was sent; nothing more is streamed after that.
    """

    def __init__(self, gateway: Any, tools: list[dict[str, Any]] | None) -> None:
        self.gateway = gateway
        self.tools = tools
        self.output_ids: list[int] = []
        self.prompt_ids: list[int] | None = None
        self.streamed = ""
        self.frozen = False

    def feed(self, prompt_ids: list[int], new_ids: list[int]) -> str:
        """Add newly sampled IDs; return the new text delta ("" when nothing is safe yet)."""
        self.prompt_ids = prompt_ids
        self.output_ids.extend(new_ids)
        if self.frozen:
            return ""
        parsed = self.gateway.preview(prompt_ids, self.output_ids, self.tools)
        if parsed.reasoning or parsed.tool_calls:
            self.frozen = True
            return ""
        safe = safe_prefix(parsed.text)
        if not safe.startswith(self.streamed):
            self.frozen = True
            return ""
        delta, self.streamed = safe[len(self.streamed) :], safe
        return delta

    def consistent(self, text: str) -> bool:
        """Whether the turn's final text continues what was streamed."""
        return text.startswith(self.streamed)


@dataclass
class Finished:
    """The last item of :func:`streamed_turn`: the turn's result, None when it was cancelled."""

    result: Any


async def streamed_turn(
    generate: Callable[[Callable[[list[int], list[int]], None]], Awaitable[Any]],
    text_stream: TextStream,
    cancel: Any,
    abandon: Callable[[asyncio.Future], Awaitable[None]],
    poll_s: float = POLL_S,
) -> AsyncIterator[dict[str, Any] | Finished]:
    """Run ``generate(on_tokens)`` (one gateway turn) as a task; every ``poll_s`` seconds forward
    the text that streamed in as Strands events and read ``cancel`` (a ``threading.Event`` or
    None). Ends with :class:`Finished`: the result (errors of ``generate`` are raised), or None
    when ``cancel`` was set while the turn ran (then ``abandon(task)`` was awaited). A consumer
    that stops reading also ends in ``abandon(task)``."""
    loop = asyncio.get_running_loop()
    arrived: asyncio.Queue[tuple[list[int], list[int]]] = asyncio.Queue()

    def on_tokens(prompt_ids: list[int], ids: list[int]) -> None:  # any thread
        loop.call_soon_threadsafe(arrived.put_nowait, (prompt_ids, list(ids)))

    task = asyncio.ensure_future(generate(on_tokens))
    try:
        while not task.done():
            if cancel is not None and cancel.is_set():
                await abandon(task)
                yield Finished(None)
                return
            await asyncio.wait({task}, timeout=poll_s)
            if arrived.empty() or task.done():
                continue
            prompt_ids, batch = [], []  # one parse per poll, however many batches came
            while not arrived.empty():
                prompt_ids, ids = arrived.get_nowait()
                batch += ids
            delta = text_stream.feed(prompt_ids, batch)
            if delta:
                for event in text_delta_events(delta, first=len(text_stream.streamed) == len(delta)):
                    yield event
    finally:
        if not task.done():  # the consumer stopped reading: stop sampling, record nothing
            await abandon(task)
    yield Finished(task.result())
