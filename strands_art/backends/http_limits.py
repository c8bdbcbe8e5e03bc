"""Bounded reads of a sampling server's HTTP answers.

A server (or whatever answers at its address) decides how much it sends; httpx reads a whole
body (``resp.json()``, ``resp.text``) or a whole line (``aiter_lines``) into memory whatever its
size, and decompresses ``Content-Encoding: gzip`` as it goes (300 KB on the wire can be 300 MB
in memory). Every read here counts the **decoded** bytes and stops with
:class:`ResponseTooLarge` (a :class:`~strands_art.backends.base.BackendError`) past its cap:

- :func:`read_body` / :func:`read_body_sync`: a whole answer, at most ``limit`` bytes
  (:data:`MAX_RESPONSE_BYTES` by default; the sync one also has a total deadline, so a server
  that drips its answer a byte at a time cannot hold the caller past it);
- :func:`iter_lines`: Server-Sent Event lines, each at most ``max_line`` bytes
  (:data:`MAX_LINE_BYTES`) and all together at most ``limit`` bytes.

The defaults are far above what vLLM sends for one request (a 128K-token prompt echoed as
``prompt_token_ids`` is about 1 MB; 32K sampled tokens with their logprobs about 5 MB).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import httpx

from strands_art.backends.base import BackendError, BackendTimeout

MAX_RESPONSE_BYTES = 64 << 20
MAX_LINE_BYTES = 16 << 20


class ResponseTooLarge(BackendError):
    """An answer (or one line of a stream) over its size cap; reading stopped at the cap."""


def _too_large(url: str, what: str, limit: int) -> ResponseTooLarge:
    return ResponseTooLarge(f"{url} sent {what} larger than {limit:,} bytes (decoded); stopped reading")


async def read_body(resp: httpx.Response, limit: int, url: str) -> bytes:
    """The decoded body of a streamed ``resp`` (``client.stream(...)``), at most ``limit`` bytes.

    Raises:
        ResponseTooLarge: more than ``limit`` bytes (after decompression).
    """
    parts, size = [], 0
    async for part in resp.aiter_bytes():
        size += len(part)
        if size > limit:
            raise _too_large(url, "an answer", limit)
        parts.append(part)
    return b"".join(parts)


def read_body_sync(resp: httpx.Response, limit: int, url: str, deadline_s: float) -> bytes:
    """:func:`read_body` for a sync streamed ``resp``, also within ``deadline_s`` seconds in all.

    Raises:
        ResponseTooLarge: more than ``limit`` bytes.
        BackendTimeout: the body took longer than ``deadline_s`` (checked as each piece arrives;
            the client's read timeout bounds the wait for one piece).
    """
    end = time.monotonic() + deadline_s
    parts, size = [], 0
    for part in resp.iter_bytes():
        size += len(part)
        if size > limit:
            raise _too_large(url, "an answer", limit)
        if time.monotonic() > end:
            raise BackendTimeout(f"{url} did not finish its answer within {deadline_s:g} s")
        parts.append(part)
    return b"".join(parts)


async def iter_lines(resp: httpx.Response, url: str, max_line: int, limit: int) -> AsyncIterator[str]:
    """The lines of a streamed ``resp`` (``\\n``, ``\\r\\n`` or ``\\r`` ended, without the end),
    decoded as UTF-8 (undecodable bytes replaced).

    Raises:
        ResponseTooLarge: a line over ``max_line`` bytes, or more than ``limit`` bytes in all.
    """
    buffer = bytearray()
    total = 0
    async for part in resp.aiter_bytes():
        total += len(part)
        if total > limit:
            raise _too_large(url, "a stream", limit)
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
