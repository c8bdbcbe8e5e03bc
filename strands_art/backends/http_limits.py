"""Bounded reads of a sampling server's HTTP answers.

A server (or whatever answers at its address) decides how much it sends; httpx reads a whole
body (``resp.json()``, ``resp.text``) or a whole line (``aiter_lines``) into memory whatever its
size, and decompresses each piece that arrives in one go (``Content-Encoding: gzip``: 64 KB on
the wire can be 64 MB in memory). Every read here takes the raw bytes and decompresses them
itself, at most as many bytes as the cap leaves (``zlib``'s ``max_length``,
:class:`BoundedDecoder`), so reading stops **at** the cap, counted in decoded bytes, with
:class:`ResponseTooLarge` (a :class:`~strands_art.backends.base.BackendError`):

- :func:`read_body` / :func:`read_body_sync`: a whole answer, at most ``limit`` bytes
  (:data:`MAX_RESPONSE_BYTES` by default; the sync one also has a total deadline, so a server
  that drips its answer a byte at a time cannot hold the caller past it);
- :func:`iter_lines`: Server-Sent Event lines, each at most ``max_line`` bytes
  (:data:`MAX_LINE_BYTES`) and all together at most ``limit`` bytes.

Requests say ``Accept-Encoding: gzip, deflate`` (:data:`ACCEPT_ENCODING`); an answer in another
coding (``br``, ``zstd``, two codings) is refused with a BackendError naming it.

An answer httpx has already read (a transport that answers with bytes, such as
``httpx.MockTransport`` in a user's tests, or an event hook that read it: its raw stream is spent,
``iter_raw`` would raise ``StreamConsumed``) is taken as httpx decoded it: the same codings are
accepted and the same caps refuse it, but httpx holds it whole in memory already (the cap cannot
stop that read; it is the caller's transport or hook that made it). One streamed part-way by
someone else is a BackendError.

The defaults are far above what vLLM sends for one request (a 128K-token prompt echoed as
``prompt_token_ids`` is about 1 MB; 32K sampled tokens with their logprobs about 5 MB).
"""

from __future__ import annotations

import time
import zlib
from collections.abc import AsyncIterator

import httpx

from strands_art.backends.base import BackendError, BackendTimeout

MAX_RESPONSE_BYTES = 64 << 20
MAX_LINE_BYTES = 16 << 20


#: decoded bytes taken from zlib at a time
STEP = 1 << 20
#: the codings requests accept (the ones :class:`BoundedDecoder` decodes)
ACCEPT_ENCODING = "gzip, deflate"


class ResponseTooLarge(BackendError):
    """An answer (or one line of a stream) over its size cap; reading stopped at the cap."""


def _too_large(url: str, what: str, limit: int) -> ResponseTooLarge:
    return ResponseTooLarge(f"{url} sent {what} larger than {limit:,} bytes (decoded); stopped reading")


class BoundedDecoder:
    """Decodes a body's raw bytes (``identity``, ``gzip``/``x-gzip`` or ``deflate``), never more
    decoded bytes than asked for at a time.

    Args:
        resp: the streamed response (its ``Content-Encoding`` header is read).
        url: for messages.

    Raises:
        BackendError: a coding other than those, or more than one.
    """

    def __init__(self, resp: httpx.Response, url: str) -> None:
        header = resp.headers.get("content-encoding", "")
        codings = [c.strip().lower() for c in header.split(",") if c.strip().lower() not in ("", "identity")]
        if len(codings) > 1 or (codings and codings[0] not in ("gzip", "x-gzip", "deflate")):
            raise BackendError(
                f"{url} answered with Content-Encoding {header!r}; accepted: {ACCEPT_ENCODING}"
            )
        # wbits 47: a zlib or a gzip header, detected (servers send either for "deflate")
        self._z = zlib.decompressobj(47) if codings else None
        self.url = url

    def feed(self, raw: bytes, into: bytearray, cap: int, what: str, limit: int) -> None:
        """Append the decoded bytes of ``raw`` to ``into``; ResponseTooLarge (``what`` and
        ``limit`` in its message) as soon as ``into`` would hold more than ``cap`` bytes, having
        decoded at most :data:`STEP` bytes past it."""
        if self._z is None:
            if len(into) + len(raw) > cap:
                raise _too_large(self.url, what, limit)
            into += raw
            return
        data = raw
        try:
            while data:
                into += self._z.decompress(data, min(STEP, cap + 1 - len(into)))
                if len(into) > cap:
                    raise _too_large(self.url, what, limit)
                data = self._z.unconsumed_tail
        except zlib.error as exc:
            raise BackendError(f"{self.url} sent a body that does not decompress: {exc}") from exc


def already_read(resp: httpx.Response, url: str, what: str, limit: int) -> bytes | None:
    """The body httpx has already read and decoded (see the module's docstring), or None for one
    still to stream.

    Raises:
        ResponseTooLarge: an already-read body over ``limit`` bytes (``what`` in the message).
        BackendError: a coding a streamed answer could not have (:class:`BoundedDecoder`), or a
            body streamed part-way by someone else.
    """
    if not resp.is_stream_consumed:
        return None
    BoundedDecoder(resp, url)  # the codings a streamed answer may have, no others
    try:
        content = resp.content
    except httpx.ResponseNotRead:
        raise BackendError(
            f"{url}: the answer was streamed by someone else before it could be read (an httpx event hook?)"
        ) from None
    if len(content) > limit:
        raise _too_large(url, what, limit)
    return content


async def read_body(resp: httpx.Response, limit: int, url: str) -> bytes:
    """The decoded body of a streamed ``resp`` (``client.stream(...)``), at most ``limit`` bytes.

    Raises:
        ResponseTooLarge: more than ``limit`` bytes (after decompression).
    """
    content = already_read(resp, url, "an answer", limit)
    if content is not None:
        return content
    decoder, body = BoundedDecoder(resp, url), bytearray()
    async for raw in resp.aiter_raw():
        decoder.feed(raw, body, limit, "an answer", limit)
    return bytes(body)


def read_body_sync(resp: httpx.Response, limit: int, url: str, deadline_s: float) -> bytes:
    """:func:`read_body` for a sync streamed ``resp``, also within ``deadline_s`` seconds in all.

    Raises:
        ResponseTooLarge: more than ``limit`` bytes.
        BackendTimeout: the body took longer than ``deadline_s`` (checked as each piece arrives;
            the client's read timeout bounds the wait for one piece).
    """
    content = already_read(resp, url, "an answer", limit)
    if content is not None:
        return content
    end = time.monotonic() + deadline_s
    decoder, body = BoundedDecoder(resp, url), bytearray()
    for raw in resp.iter_raw():
        decoder.feed(raw, body, limit, "an answer", limit)
        if time.monotonic() > end:
            raise BackendTimeout(f"{url} did not finish its answer within {deadline_s:g} s")
    return bytes(body)


async def iter_lines(resp: httpx.Response, url: str, max_line: int, limit: int) -> AsyncIterator[str]:
    """The lines of a streamed ``resp`` (``\\n``, ``\\r\\n`` or ``\\r`` ended, without the end),
    decoded as UTF-8 (undecodable bytes replaced).

    Raises:
        ResponseTooLarge: a line over ``max_line`` bytes, or more than ``limit`` bytes in all.
    """
    buffer = bytearray()
    total = 0
    content = already_read(resp, url, "a stream", limit)
    decoder = None if content is not None else BoundedDecoder(resp, url)
    async for raw in _pieces(resp, content):
        part = bytearray()
        if decoder is None:
            part += raw  # decoded by httpx, within the cap (already_read)
        else:
            decoder.feed(raw, part, limit - total, "a stream", limit)
        total += len(part)
        buffer += part.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\n" in buffer:
            *lines, rest = bytes(buffer).split(b"\n")
            buffer = bytearray(rest)
            for line in lines:
                if len(line) > max_line:
                    raise _too_large(url, "a stream line", max_line)
                yield line.decode("utf-8", "replace")
        if len(buffer) > max_line:
            raise _too_large(url, "a stream line", max_line)
    if buffer:
        yield bytes(buffer).decode("utf-8", "replace")


async def _pieces(resp: httpx.Response, content: bytes | None) -> AsyncIterator[bytes]:
    """The raw pieces of a streamed ``resp``, or ``content`` (already read) as one piece."""
    if content is not None:
        yield content
        return
    async for raw in resp.aiter_raw():
        yield raw
