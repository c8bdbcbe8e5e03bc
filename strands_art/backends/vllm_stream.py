"""vLLM's streaming completions: ``"stream": true`` on ``/v1/completions``, read as server-sent events.

vLLM (``serving_completion.completion_stream_generator``, 0.10.2+) answers with ``data: {json}``
lines, one ``CompletionStreamResponse`` per step: ``choices[0]`` carries the step's ``text``,
``token_ids`` (with ``return_token_ids``; ``prompt_token_ids`` on the first chunk only), ``logprobs``
(``tokens``/``token_logprobs``/``top_logprobs``/``text_offset`` for the new tokens) and, on the
last chunk of the choice, ``finish_reason``/``stop_reason``. With ``stream_options.include_usage``
a final chunk has no choices and the ``usage``. ``data: [DONE]`` ends the stream. An error
after the 200 was sent arrives as ``data: {"error": {...}}`` (older: ``{"object": "error",
"message": ...}``) followed by ``[DONE]``.

:class:`StreamAssembler` joins the chunks back into one ``CompletionResponse``-shaped body, so the
streamed turn goes through the same value checks (:func:`~strands_art.backends.vllm.parse_response`)
as a non-streamed one, and hands each chunk's new token IDs to the caller's sink as they arrive.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from strands_art.backends.base import BackendError, BackendTimeout, BackendUnavailable, TokenSink
from strands_art.backends.http_limits import MAX_LINE_BYTES, MAX_RESPONSE_BYTES, iter_lines
from strands_art.backends.vllm_ids import check_ids, token_ids_from_strings

DONE = "[DONE]"
_LOGPROB_LISTS = ("tokens", "token_logprobs", "top_logprobs", "text_offset")


class StreamAssembler:
    """Joins vLLM's completion stream chunks (dicts) into one completion body.

    :meth:`feed` returns the chunk's new token IDs (``token_ids``, or ``logprobs.tokens`` as
    ``token_id:N`` strings on servers without ``return_token_ids``), which are exactly the next
    slice of the joined body's IDs. :meth:`body` gives the joined body for ``parse_response``.

    Raises:
        BackendError: a chunk that is not a completion chunk, an error chunk, or a choice other
            than index 0 (the request asks for ``n=1``).
    """

    def __init__(self) -> None:
        self.chunks = 0
        self._id: Any = None
        self._usage: Any = None
        self._text: list[str] = []
        self._ids: list[int] | None = None
        self._logprobs: dict[str, list] | None = None
        self._choice: dict[str, Any] = {"finish_reason": None, "stop_reason": None}

    def feed(self, chunk: Any) -> list[int]:
        if not isinstance(chunk, dict):
            raise BackendError(f"vLLM stream chunk is not a JSON object: {str(chunk)[:80]}")
        if "error" in chunk or chunk.get("object") == "error":
            err = chunk.get("error") if isinstance(chunk.get("error"), dict) else chunk
            raise BackendError(
                f"vLLM failed mid-stream after {self.chunks} chunks: {str(err.get('message', err))[:300]}"
            )
        self.chunks += 1
        self._id = self._id if self._id is not None else chunk.get("id")
        if chunk.get("usage") is not None:
            self._usage = chunk["usage"]
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            raise BackendError(f"vLLM stream chunk has no choices list: {str(chunk)[:120]}")
        new: list[int] = []
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                raise BackendError(f"vLLM stream chunk has an unexpected choice: {str(choice)[:120]}")
            self._text.append(str(choice.get("text") or ""))
            if choice.get("prompt_token_ids") is not None:
                self._choice["prompt_token_ids"] = choice["prompt_token_ids"]
            for key in ("finish_reason", "stop_reason"):
                if choice.get(key) is not None:
                    self._choice[key] = choice[key]
            lp = choice.get("logprobs")
            from_strings = None
            if lp is not None:
                if not isinstance(lp, dict):
                    raise BackendError(f"vLLM stream chunk has malformed logprobs: {str(lp)[:80]}")
                if self._logprobs is None:
                    self._logprobs = {key: [] for key in _LOGPROB_LISTS}
                for key in _LOGPROB_LISTS:
                    part = lp.get(key)
                    if isinstance(part, list):
                        self._logprobs[key].extend(part)
                    elif key == "token_logprobs":
                        raise BackendError("vLLM stream chunk has no logprobs.token_logprobs")
                from_strings = token_ids_from_strings(lp.get("tokens"))
            if choice.get("token_ids") is not None:
                ids = check_ids(choice["token_ids"], "choices[0].token_ids")
                self._ids = (self._ids or []) + ids
                new.extend(ids)
            elif from_strings is not None:
                new.extend(from_strings)
        return new

    def body(self) -> dict[str, Any]:
        """The joined ``CompletionResponse``-shaped body (``choices`` empty when no choice came)."""
        if self.chunks == 0 or (self._logprobs is None and self._ids is None and not self._text):
            return {"id": self._id, "choices": [], "usage": self._usage}
        choice: dict[str, Any] = {"index": 0, "text": "".join(self._text), "logprobs": self._logprobs}
        choice.update(self._choice)
        if self._ids is not None:
            choice["token_ids"] = self._ids
        return {"id": self._id, "object": "text_completion", "choices": [choice], "usage": self._usage}


async def read_stream(
    resp: httpx.Response,
    on_tokens: TokenSink,
    url: str,
    *,
    max_line: int = MAX_LINE_BYTES,
    limit: int = MAX_RESPONSE_BYTES,
) -> dict[str, Any]:
    """Read a 200 streaming answer to its ``[DONE]``, calling ``on_tokens`` with each chunk's new
    token IDs, and return the joined body. No line may exceed ``max_line`` bytes, nor the whole
    stream ``limit`` bytes (:mod:`strands_art.backends.http_limits`).

    A transport failure here is not retried (tokens may already have been handed out).

    Raises:
        BackendTimeout: a read timed out mid-stream.
        BackendUnavailable: the connection broke or the stream ended without ``[DONE]``.
        BackendError: a chunk that is not JSON, or an error chunk (see :class:`StreamAssembler`);
            ResponseTooLarge (a BackendError) past a cap.
    """
    assembler = StreamAssembler()
    try:
        async for line in iter_lines(resp, url, max_line, limit):
            if not line.startswith("data:"):
                continue  # blank separators, comments (": ping"), event names
            data = line[len("data:") :].strip()
            if data == DONE:
                return assembler.body()
            try:
                chunk = json.loads(data)
            except ValueError as exc:
                raise BackendError(
                    f"vLLM at {url} streamed a chunk that is not JSON: {data[:120]!r}"
                ) from exc
            new = assembler.feed(chunk)
            if new:
                on_tokens(new)
    except httpx.TimeoutException as exc:
        raise BackendTimeout(
            f"vLLM at {url} stalled mid-stream after {assembler.chunks} chunks: {exc!r}"
        ) from exc
    except httpx.HTTPError as exc:
        raise BackendUnavailable(
            f"vLLM at {url} broke the stream after {assembler.chunks} chunks: {exc!r}"
        ) from exc
    raise BackendUnavailable(f"vLLM at {url} ended the stream without [DONE] after {assembler.chunks} chunks")
