"""One turn through the front, the same for every protocol: sample, write, then record.

:func:`run_turn` calls :meth:`RolloutGateway.generate` with a ``deliver`` hook, so a turn is
recorded only once its whole response was written to the connection (a client gone before
that leaves nothing recorded). What differs per protocol is a :class:`Writer`: the JSON body,
or the Server-Sent Events of the stream.

Streaming never leaves a client waiting in silence: the headers and the protocol's first
event go out as soon as the turn has run :data:`FIRST_BYTE_S` seconds (an error found before
then, while the prompt is rendered and checked, still gets its HTTP status), answer text goes
out as it is sampled (:class:`~strands_art.streaming.TextStream`: the text the gateway's parser
already reads as answer text; reasoning and tool calls are sent whole at the end), and an SSE
comment (``: keep-alive``, which SSE parsers skip) goes out whenever nothing was written for
:data:`KEEPALIVE_S` seconds. A client with a read timeout longer than that keeps a slow turn.
An error after the headers went out is written as the protocol's error event
(:meth:`Writer.failed`) and nothing is recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any, Protocol

from aiohttp import web

from strands_art.gateway import GenerateResult, RolloutGateway
from strands_art.serve.errors import RequestError
from strands_art.serve.failures import error_for
from strands_art.serve.tokens import token_bytes
from strands_art.streaming import TextStream

FIRST_BYTE_S = 0.25  # a stream's headers and first event go out this long after the turn began
KEEPALIVE_S = 1.0  # an SSE comment after this long without a write
POLL_S = 0.05  # how often a streaming turn forwards text and checks the clocks
KEEPALIVE = b": keep-alive\n\n"
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class Writer(Protocol):
    """What one protocol writes for a turn (SSE frames are ``bytes``); ``conversation``: the
    request field that holds the conversation, for error messages (``messages``, ``input``)."""

    conversation: str

    def start(self) -> list[bytes]:
        """The first events of a stream, sent with the headers."""

    def text(self, delta: str) -> list[bytes]:
        """Events for answer text streamed while the turn is sampled."""

    def finish(
        self, result: GenerateResult, streamed: str, logprobs: list[dict[str, Any]] | None
    ) -> list[bytes]:
        """The rest of the stream once the turn is sampled (``streamed``: the text already sent)."""

    def failed(self, err: RequestError, exc: BaseException) -> list[bytes]:
        """The protocol's error event(s), after the headers went out."""

    def body(self, result: GenerateResult, logprobs: list[dict[str, Any]] | None) -> dict[str, Any]:
        """The JSON body of a non-streaming response."""


def turn_logprobs(gateway: RolloutGateway, result: GenerateResult) -> list[dict[str, Any]]:
    """One ``{token, logprob, bytes, top_logprobs: []}`` per sampled token of the turn, with the
    recorded logprob and the token's own raw bytes (:mod:`.tokens`)."""
    ids = result.turn.output_ids
    raw = token_bytes(gateway.renderer.tokenizer, ids)
    return [
        {"token": gateway.renderer.decode([t]), "logprob": lp, "bytes": list(b), "top_logprobs": []}
        for t, lp, b in zip(ids, result.turn.logprobs, raw, strict=True)
    ]


async def run_turn(
    request: web.Request,
    gateway: RolloutGateway,
    rollout_id: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    overrides: dict[str, Any] | None,
    writer: Writer,
    *,
    stream: bool,
    logprobs: bool,
) -> tuple[web.StreamResponse, GenerateResult | None]:
    """Run one turn and write it; returns the response and the result (None when an error was
    written into a stream: nothing was recorded).

    Raises:
        what :meth:`RolloutGateway.generate` raises before a stream's headers went out (the
        front answers it with its HTTP status); ConnectionResetError: the client left while the
        response was written (nothing recorded).
    """
    if not stream:
        response = web.Response(content_type="application/json")

        async def deliver(result: GenerateResult) -> None:
            lps = turn_logprobs(gateway, result) if logprobs else None
            response.body = json.dumps(writer.body(result, lps), ensure_ascii=False).encode()
            await response.prepare(request)
            await response.write_eof()

        result = await gateway.generate(rollout_id, messages, tools, overrides or None, deliver=deliver)
        return response, result
    return await _streamed(request, gateway, rollout_id, messages, tools, overrides, writer, logprobs)


async def _streamed(
    request: web.Request,
    gateway: RolloutGateway,
    rollout_id: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    overrides: dict[str, Any] | None,
    writer: Writer,
    logprobs: bool,
) -> tuple[web.StreamResponse, GenerateResult | None]:
    loop = asyncio.get_running_loop()
    response = web.StreamResponse(headers=SSE_HEADERS)
    arrived: asyncio.Queue[tuple[list[int], list[int]]] = asyncio.Queue()
    delivered: asyncio.Queue[tuple[GenerateResult, asyncio.Future]] = asyncio.Queue()
    text_stream = TextStream(gateway, tools)

    def on_tokens(prompt_ids: list[int], ids: list[int]) -> None:  # any thread
        loop.call_soon_threadsafe(arrived.put_nowait, (prompt_ids, list(ids)))

    async def deliver(result: GenerateResult) -> None:  # written by the handler, below
        written = loop.create_future()
        delivered.put_nowait((result, written))
        await written

    began, last, finished = loop.time(), 0.0, False

    async def write(frames: list[bytes]) -> None:
        nonlocal last
        if not response.prepared:
            await response.prepare(request)
            frames = writer.start() + frames
        for frame in frames:
            await response.write(frame)
        last = loop.time()

    task = asyncio.ensure_future(
        gateway.generate(rollout_id, messages, tools, overrides or None, deliver=deliver, on_tokens=on_tokens)
    )
    try:
        while True:
            await asyncio.wait({task}, timeout=POLL_S)
            if not delivered.empty():
                result, written = delivered.get_nowait()
                try:
                    lps = turn_logprobs(gateway, result) if logprobs else None
                    await write(writer.finish(result, text_stream.streamed, lps))
                    await response.write_eof()
                except BaseException as exc:
                    written.set_exception(exc if isinstance(exc, Exception) else ConnectionResetError())
                    raise
                written.set_result(None)
                finished = True  # the whole response went out: the turn is recorded from here on
                return response, await task
            if task.done():
                exc = task.exception()
                if exc is None:  # not expected: generate() delivers before it returns
                    return response, task.result()
                err = error_for(exc, writer.conversation)
                if not response.prepared or isinstance(exc, ConnectionResetError):
                    raise exc
                if err is None:
                    err = RequestError(
                        500, f"internal error: {type(exc).__name__}: {exc}", type="server_error"
                    )
                await write(writer.failed(err, exc))
                await response.write_eof()
                return response, None
            batch: list[int] = []
            prompt_ids: list[int] = []
            while not arrived.empty():
                prompt_ids, ids = arrived.get_nowait()
                batch += ids
            if batch:
                delta = text_stream.feed(prompt_ids, batch)
                if delta:
                    await write(writer.text(delta))
            now = loop.time()
            if not response.prepared and now - began >= FIRST_BYTE_S:
                await write([])
            elif response.prepared and now - last >= KEEPALIVE_S:
                await write([KEEPALIVE])
    finally:
        if not task.done() and not finished:  # the client left or a write failed: record nothing
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
