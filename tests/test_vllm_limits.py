"""The vLLM client reads bounded answers (issue 28 item 10): a 300 MB body, a gzip bomb, a
200 MB SSE line, 300 MB of token-less stream text, and a drip-fed ``/v1/models`` each end in a
clear error after at most the cap (or the deadline), against a real loopback HTTP server that
sends them."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import zlib

import httpx
import pytest
from aiohttp import web

from strands_art.backends.base import BackendTimeout, SamplingParams
from strands_art.backends.http_limits import MAX_LINE_BYTES, MAX_RESPONSE_BYTES, ResponseTooLarge
from strands_art.backends.vllm import VLLMBackend

MB = 1 << 20
PIECE = b"x" * MB
SENT: dict[str, int] = {}  # bytes each attack handed to the socket before the client left


async def _send(request: web.Request, name: str, pieces, headers: dict[str, str]) -> web.StreamResponse:
    resp = web.StreamResponse(headers=headers)
    await resp.prepare(request)
    SENT[name] = 0
    try:
        for piece in pieces:
            await resp.write(piece)
            SENT[name] += len(piece)
        await resp.write_eof()
    except (ConnectionError, RuntimeError):
        pass  # the client stopped reading: what the test wants
    return resp


async def big_body(request):  # 300 MB of "JSON"
    return await _send(request, "body", [b'{"x": "'] + [PIECE] * 300, {"Content-Type": "application/json"})


async def gzip_bomb(request):
    return await _send(
        request, "gzip", [BOMB], {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    )


async def sse_line(request):  # one 200 MB line
    return await _send(request, "line", [b"data: "] + [PIECE] * 200, {"Content-Type": "text/event-stream"})


async def sse_text(request):  # 300 MB of small chunks with text and no tokens
    chunk = b'data: {"id": "c", "choices": [{"index": 0, "text": "' + b"y" * 4000 + b'"}]}\n\n'
    return await _send(
        request,
        "text",
        [chunk * 256] * (300 * MB // (len(chunk) * 256)),
        {"Content-Type": "text/event-stream"},
    )


async def drip_models(request):
    resp = web.StreamResponse(headers={"Content-Type": "application/json"})
    await resp.prepare(request)
    try:
        for byte in b'{"data": [' * 10_000:
            await resp.write(bytes([byte]))
            await asyncio.sleep(0.05)
    except (ConnectionError, RuntimeError):
        pass
    return resp


def _bomb(megabytes: int) -> bytes:
    """gzip of ``megabytes`` MB of zeros, compressed piece by piece (never 300 MB in memory)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: the gzip container
    zeros = b"0" * MB
    return b"".join(z.compress(zeros) for _ in range(megabytes)) + z.flush()


BOMB = _bomb(300)


@pytest.fixture(scope="module")
def server():
    """The attacks on a loopback aiohttp server in a thread of its own (the sync client too)."""
    app = web.Application()
    app.router.add_post("/body/v1/completions", big_body)
    app.router.add_post("/gzip/v1/completions", gzip_bomb)
    app.router.add_post("/line/v1/completions", sse_line)
    app.router.add_post("/text/v1/completions", sse_text)
    app.router.add_get("/drip/v1/models", drip_models)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box = {}

    async def run():
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        box["port"] = runner.addresses[0][1]
        box["runner"] = runner
        ready.set()

    thread = threading.Thread(
        target=lambda: (loop.run_until_complete(run()), loop.run_forever()), daemon=True
    )
    thread.start()
    assert ready.wait(30)
    yield f"http://127.0.0.1:{box['port']}"
    asyncio.run_coroutine_threadsafe(box["runner"].cleanup(), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)


def _sample(base: str, attack: str, stream: bool):
    async def go():
        backend = VLLMBackend(f"{base}/{attack}", "m", max_retries=0)
        try:
            sink = (lambda ids: None) if stream else None
            return await backend.sample([1, 2, 3], SamplingParams(max_new_tokens=4), on_tokens=sink)
        finally:
            await backend.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("attack", "stream", "what", "cap", "size"),
    [
        ("body", False, "an answer", MAX_RESPONSE_BYTES, 300 * MB),
        ("gzip", False, "an answer", MAX_RESPONSE_BYTES, 300 * MB),
        ("line", True, "a stream line", MAX_LINE_BYTES, 200 * MB),
        ("text", True, "a stream", MAX_RESPONSE_BYTES, 300 * MB),
    ],
)
def test_an_answer_over_its_cap_is_refused_once_the_cap_is_read(server, attack, stream, what, cap, size):
    with pytest.raises(ResponseTooLarge, match=f"sent {what} larger than {cap:,} bytes"):
        _sample(server, attack, stream)
    if attack != "gzip":  # the client stopped reading: the server could not hand it all over
        time.sleep(0.5)
        assert SENT[attack] < size


def test_the_gzip_bomb_is_small_on_the_wire():
    assert len(BOMB) < 1 * MB  # what makes it a bomb: the cap must count decoded bytes
    assert len(zlib.decompress(_bomb(3), 31)) == 3 * MB


def test_models_has_a_total_deadline(server):
    async def go():
        backend = VLLMBackend(f"{server}/drip", "m", models_deadline_s=1.0)
        try:
            await backend.models()
        finally:
            await backend.aclose()

    with pytest.raises(BackendTimeout, match="within 1 s"):
        asyncio.run(go())


def test_max_context_tokens_has_a_total_deadline(server):
    backend = VLLMBackend(f"{server}/drip", "m", models_deadline_s=1.0)
    assert backend.max_context_tokens is None  # logged, not hung on the drip
    asyncio.run(backend.aclose())


def test_a_stream_split_anywhere_gives_the_same_lines():
    from strands_art.backends.http_limits import iter_lines

    text = b'data: {"a": 1}\r\n\r\ndata: [DONE]\n\n'

    async def lines(parts, coding=""):
        return [line async for line in iter_lines(_Raw(parts, coding), "u", 100, 1000) if line]

    want = asyncio.run(lines([text]))
    assert want == ['data: {"a": 1}', "data: [DONE]"]
    for cut in range(1, len(text)):
        assert asyncio.run(lines([text[:cut], text[cut:]])) == want
    assert json.loads(want[0][6:]) == {"a": 1}
    gz = zlib.compress(text, wbits=31)
    for cut in range(1, len(gz)):  # the same through gzip, the compressed bytes split anywhere
        assert asyncio.run(lines([gz[:cut], gz[cut:]], "gzip")) == want


class _Raw:
    """A streamed response's raw side: the pieces as they came off the wire, and its coding."""

    is_stream_consumed = False

    def __init__(self, parts, coding=""):
        self.parts = parts
        self.headers = {"content-encoding": coding} if coding else {}

    async def aiter_raw(self):
        for p in self.parts:
            yield p


def test_a_gzip_bomb_is_decoded_no_further_than_the_cap():
    """Issue 48: the cap stops decompression itself, not a whole decoded piece later (a 64 KB
    piece of the bomb decodes to about 64 MB): the buffer never holds more than the cap plus one
    step of zlib output."""
    from strands_art.backends.http_limits import STEP, BoundedDecoder

    cap = 5 * MB
    decoder, body = BoundedDecoder(_Raw([], "gzip"), "u"), bytearray()
    with pytest.raises(ResponseTooLarge, match="larger than 5,242,880 bytes"):
        for k in range(0, len(BOMB), 1 << 16):
            decoder.feed(BOMB[k : k + (1 << 16)], body, cap, "an answer", cap)
    assert cap < len(body) <= cap + STEP
    assert body[:10] == b"0" * 10


@pytest.mark.parametrize("coding", ["br", "zstd", "gzip, gzip"])
def test_a_coding_the_client_did_not_ask_for_is_refused(coding):
    from strands_art.backends.base import BackendError
    from strands_art.backends.http_limits import BoundedDecoder

    with pytest.raises(BackendError, match="accepted: gzip, deflate"):
        BoundedDecoder(_Raw([], coding), "u")


def test_requests_ask_for_the_codings_the_client_decodes(server):
    async def go():
        backend = VLLMBackend(f"{server}/body", "m")
        try:
            return backend._client.headers["accept-encoding"]
        finally:
            await backend.aclose()

    assert asyncio.run(go()) == "gzip, deflate"


@pytest.fixture(scope="module")
def header_drip():
    """A loopback server that answers any request by dripping its header lines, one byte per
    0.1 s, for ten minutes: the deadline, not the server, must end the exchange."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box = {}

    async def handle(reader, writer):
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nX-Pad: ")
            for _ in range(6000):
                writer.write(b"a")
                await writer.drain()
                await asyncio.sleep(0.1)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def run():
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        box["port"] = server.sockets[0].getsockname()[1]
        box["server"] = server
        ready.set()

    thread = threading.Thread(
        target=lambda: (loop.run_until_complete(run()), loop.run_forever()), daemon=True
    )
    thread.start()
    assert ready.wait(30)
    yield f"http://127.0.0.1:{box['port']}"

    async def stop():
        box["server"].close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run_coroutine_threadsafe(stop(), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)


def test_dripped_headers_are_held_to_the_deadline(header_drip, caplog):
    """Issue 48: a /v1/models that drips its headers (each byte within the read timeout) held
    the blocking max_context_tokens past its deadline (the deadline was checked per body piece);
    models() and max_context_tokens both end at models_deadline_s now."""
    backend = VLLMBackend(header_drip, "m", models_deadline_s=1.0)
    with caplog.at_level("WARNING"):
        assert backend.max_context_tokens is None
    assert "did not answer within 1 s" in caplog.text

    async def go():
        try:
            await backend.models()
        finally:
            await backend.aclose()

    with pytest.raises(BackendTimeout, match="within 1 s"):
        asyncio.run(go())


def _answered_bytes(body: bytes, headers: dict | None = None) -> httpx.MockTransport:
    """A transport answering with bytes (httpx reads them before the caller sees the response)."""
    return httpx.MockTransport(lambda request: httpx.Response(200, headers=headers, content=body))


@pytest.mark.parametrize("size", [10, 100])
def test_an_answer_httpx_already_read_is_taken_under_the_cap(size):
    """``httpx.MockTransport`` (or an event hook that read the body) leaves the raw stream spent:
    the body httpx decoded is taken, held to the same cap."""
    from strands_art.backends.http_limits import iter_lines, read_body, read_body_sync

    body = b"data: " + b"x" * size + b"\n\ndata: [DONE]\n\n"
    with httpx.Client(transport=_answered_bytes(body)) as client, client.stream("GET", "http://u/") as r:
        if size > 50:
            with pytest.raises(ResponseTooLarge, match="larger than 50 bytes"):
                read_body_sync(r, 50, "u", 5.0)
        else:
            assert read_body_sync(r, 50, "u", 5.0) == body

    async def go():
        async with httpx.AsyncClient(transport=_answered_bytes(body)) as client:
            async with client.stream("GET", "http://u/") as r:
                whole = await read_body(r, 1000, "u")
            async with client.stream("GET", "http://u/") as r:
                lines = [line async for line in iter_lines(r, "u", 1000, 1000) if line]
            async with client.stream("GET", "http://u/") as r:
                if size > 50:
                    with pytest.raises(ResponseTooLarge, match="a stream larger than 50 bytes"):
                        [line async for line in iter_lines(r, "u", 1000, 50)]
                else:
                    assert [line async for line in iter_lines(r, "u", 1000, 50) if line] == lines
            return whole, lines

    whole, lines = asyncio.run(go())
    assert whole == body and lines == ["data: " + "x" * size, "data: [DONE]"]


def test_a_gzip_answer_httpx_already_read_is_taken_decoded():
    from strands_art.backends.http_limits import read_body_sync

    body = b'{"ok": true}' * 100
    transport = _answered_bytes(zlib.compress(body, wbits=31), {"content-encoding": "gzip"})
    with httpx.Client(transport=transport) as client, client.stream("GET", "http://u/") as r:
        assert read_body_sync(r, 10_000, "u", 5.0) == body


def test_an_already_read_answer_in_another_coding_or_streamed_elsewhere_is_refused():
    from strands_art.backends.base import BackendError
    from strands_art.backends.http_limits import read_body_sync

    with httpx.Client(transport=_answered_bytes(b"abc", {"content-encoding": "zstd-x"})) as client:
        with (
            client.stream("GET", "http://u/") as r,
            pytest.raises(BackendError, match="accepted: gzip, deflate"),
        ):
            read_body_sync(r, 100, "u", 5.0)

    def hook(response: httpx.Response) -> None:  # takes the first piece and leaves the rest unread
        next(response.iter_raw())

    stream = httpx.MockTransport(lambda request: httpx.Response(200, content=iter([b"ab", b"cd"])))
    with httpx.Client(transport=stream, event_hooks={"response": [hook]}) as client:
        with (
            client.stream("GET", "http://u/") as r,
            pytest.raises(BackendError, match="streamed by someone else"),
        ):
            read_body_sync(r, 100, "u", 5.0)
