"""Sampling on a vLLM OpenAI-compatible server: token IDs in, token IDs + logprobs out.

Talks to ``POST {base_url}/v1/completions`` with ``prompt`` as a list of token IDs (vLLM accepts
token prompts there and does not re-tokenize them or add a BOS). Targets **vLLM >= 0.10.2**, the
first release that

- returns token IDs (request ``return_token_ids: true`` → ``choices[0].token_ids`` and
  ``choices[0].prompt_token_ids``), and
- offers ``--logprobs-mode processed_logprobs``, whose logprobs are taken after temperature and
  top-k/top-p, i.e. under the distribution the token was sampled from (what the ``transformers``
  backend and the trainer compute). See ``docs/setup-vllm.md``.

Older servers ignore ``return_token_ids``; for them the IDs are read from ``logprobs.tokens``,
which hold ``"token_id:N"`` strings because the request also sets ``return_tokens_as_token_ids``
(vLLM >= 0.5). When both are present they must agree. The response fields used are those of
vLLM's ``CompletionResponse`` / ``CompletionResponseChoice`` / ``CompletionLogProbs``
(``vllm/entrypoints/openai/protocol.py``).

Every sampling knob is sent explicitly, including the neutral ``min_p=0``, ``repetition_penalty=1``
and presence/frequency penalties 0: vLLM otherwise fills unset fields from the model's
``generation_config.json``, which would change the sampling distribution behind our back.

Errors: a refused/failed connection, a 429 or a 5xx answer is retried ``max_retries`` times with
exponential backoff (``retry_backoff_s * 2**attempt``), then raised naming the URL and the cause:
:class:`BackendUnavailable` (retryable upstream: Strands' ``ModelThrottledException``) for a
connection failure, 429, 502, 503 and 504, plain :class:`BackendError` for other 5xx; a connect timeout is retried the same way and ends as
:class:`BackendTimeout`. A read timeout (the server accepted the request but did not answer within
``timeout_s``) raises :class:`BackendTimeout` at once. httpx's timeouts bound each network
operation, so a server that trickles its answer a few bytes at a time would never trip them: a
**total deadline** (``deadline_s``, retries and backoff included) bounds the whole call and ends
it with :class:`BackendTimeout`. A 400 saying the prompt exceeds the model's
context (vLLM's "This model's maximum context length is N tokens. However, ...", or 0.32's "max_tokens
must be at least 1, got 0." for a prompt that fills the context exactly) raises
:class:`BackendContextOverflow` at once (Strands' ``ContextWindowOverflowException``); any other
4xx (but 429) is not retried: it raises :class:`BackendError` with the server's message. ``finish_reason == "abort"`` (the server dropped the request: overloaded or shutting down)
raises :class:`BackendUnavailable`. A malformed body or token IDs and logprobs of different lengths raise :class:`BackendError`. Nothing is returned
on failure, so the gateway records nothing.

Streaming (``sample(..., on_tokens=...)``): the same request with ``"stream": true`` (see
:mod:`strands_art.backends.vllm_stream`); the joined chunks pass the same checks. Failures before
the stream starts are retried and mapped as above; a stream that breaks or sends an error event
after it started is not retried (:class:`BackendUnavailable` / :class:`BackendError`).

Over 450 lines as one backend: the pure request/response and error-mapping functions above
:class:`VLLMBackend` have no other caller.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import math
import re
from collections.abc import Sequence
from typing import Any

import httpx

from strands_art.backends.base import (
    BackendContextOverflow,
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    SampleResult,
    SamplingParams,
    TokenSink,
)
from strands_art.backends.http_limits import (
    ACCEPT_ENCODING,
    MAX_LINE_BYTES,
    MAX_RESPONSE_BYTES,
    read_body,
)
from strands_art.backends.vllm_ids import check_ids, token_ids_from_strings
from strands_art.backends.vllm_stream import read_stream
from strands_art.validation import is_int, is_real

logger = logging.getLogger(__name__)

UNAVAILABLE_STATUS = frozenset({429, 502, 503, 504})  # overloaded/unreachable upstream: retryable
# vLLM's context-overflow message: serving_engine._validate_input (0.5 .. 0.11: "... your request
# has N input tokens") and renderers/params._token_len_check (0.32: "... your prompt contains
# [at least ]N input tokens, which exceeds this limit even without any output tokens")
_OVERFLOW = re.compile(r"maximum context length is (\d+) tokens", re.IGNORECASE)
_OVERFLOW_PROMPT = re.compile(
    r"\((\d+) in the messages|request has (\d+) input tokens|prompt contains (?:at least )?(\d+) input tokens",
    re.IGNORECASE,
)
# vLLM 0.32 clamps max_tokens to the room the context leaves; a prompt that fills the whole
# context leaves none and is refused as "max_tokens must be at least 1, got 0."
_NO_ROOM = re.compile(r"max_tokens must be at least 1, got 0\b")
_RETRYABLE_TRANSPORT = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.RemoteProtocolError,
    httpx.ReadError,
    httpx.WriteError,
)


def completions_url(base_url: str) -> str:
    """``http://host:8000``, ``http://host:8000/`` or ``http://host:8000/v1`` → ``.../v1/completions``."""
    base = base_url.rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    if not base.startswith(("http://", "https://")):
        raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
    return base + "/v1/completions"


def format_request(model: str, prompt_ids: Sequence[int], params: SamplingParams) -> dict[str, Any]:
    """The ``/v1/completions`` JSON body for one generation.

    ``top_k == 0`` (disabled here) is sent as ``-1``, which every vLLM version reads as disabled.
    Stop strings and stop token IDs are kept in the output (``include_stop_str_in_output``; vLLM
    always keeps a sampled stop token ID in ``token_ids``).

    Raises:
        ValueError: empty prompt or a non-integer / negative token ID.
    """
    prompt = list(prompt_ids)
    if not prompt:
        raise ValueError("cannot sample from an empty prompt")
    if any(not is_int(t) or t < 0 for t in prompt):
        raise ValueError("prompt_ids must be non-negative integers")
    body: dict[str, Any] = {
        "model": model,
        "prompt": [int(t) for t in prompt],  # numpy integers -> JSON
        "max_tokens": params.max_new_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k if params.top_k > 0 else -1,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "stop": list(params.stop),
        "stop_token_ids": list(params.stop_token_ids),
        "include_stop_str_in_output": True,
        "skip_special_tokens": False,
        "spaces_between_special_tokens": False,
        "logprobs": 1,
        "return_token_ids": True,
        "return_tokens_as_token_ids": True,
        "n": 1,
        "stream": False,
        "echo": False,
    }
    if params.seed is not None:
        body["seed"] = params.seed
    return body


def parse_response(body: Any, prompt_ids: Sequence[int]) -> SampleResult:
    """Turn a ``/v1/completions`` JSON body into a :class:`SampleResult`.

    Reads ``choices[0]``: ``token_ids`` (vLLM >= 0.10.2) or ``logprobs.tokens`` as ``token_id:N``
    strings, ``logprobs.token_logprobs`` (natural log), ``finish_reason``. ``info`` gets the
    response ``id``, ``stop_reason`` and ``usage``.

    Raises:
        BackendError: not a completion body, no choice, ``finish_reason`` "abort" or unknown, no
            token IDs, missing/non-numeric logprobs, IDs and logprobs of different lengths, the
            two ID sources disagreeing, or ``prompt_token_ids`` differing from what was sent.
    """
    if not isinstance(body, dict):
        raise BackendError(f"vLLM response is not a JSON object: {str(body)[:80]}")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise BackendError(f"vLLM response has no choices: {str(body)[:120]}")
    choice = choices[0]
    finish = choice.get("finish_reason")
    if finish == "abort":
        raise BackendUnavailable(
            "vLLM aborted the request (finish_reason 'abort'; server overloaded or shutting down?)"
        )
    if finish not in ("stop", "length"):
        raise BackendError(f"vLLM response has unknown finish_reason {finish!r}")
    lp = choice.get("logprobs")
    if not isinstance(lp, dict) or not isinstance(lp.get("token_logprobs"), list):
        raise BackendError(
            "vLLM response has no logprobs.token_logprobs (was 'logprobs' dropped by a proxy?)"
        )
    logprobs = []
    for value in lp["token_logprobs"]:
        if not is_real(value, finite=False) or math.isnan(value):
            raise BackendError(f"vLLM response has a non-numeric logprob: {value!r}")
        logprobs.append(float(value))

    from_field = choice.get("token_ids")
    from_strings = token_ids_from_strings(lp.get("tokens"))
    if from_field is not None:
        ids = check_ids(from_field, "choices[0].token_ids")
        if from_strings is not None and from_strings != ids:
            raise BackendError("vLLM response: token_ids and logprobs.tokens name different tokens")
    elif from_strings is not None:
        ids = from_strings
    else:
        raise BackendError(
            "vLLM response carries no token IDs: need vLLM >= 0.10.2 (return_token_ids) or "
            "logprobs.tokens as 'token_id:N' (return_tokens_as_token_ids)"
        )
    if len(ids) != len(logprobs):
        raise BackendError(f"vLLM response has {len(ids)} token IDs but {len(logprobs)} logprobs")

    sent = choice.get("prompt_token_ids")
    if sent is not None and list(sent) != list(prompt_ids):
        raise BackendError(
            f"vLLM saw a different prompt ({len(sent)} tokens) than was sent ({len(prompt_ids)} tokens)"
        )
    info = {"id": body.get("id"), "stop_reason": choice.get("stop_reason"), "usage": body.get("usage")}
    return SampleResult(output_ids=ids, logprobs=logprobs, finish_reason=finish, info=info)


def context_overflow(
    message: str, prompt_tokens: int, max_model_len: int | None = None
) -> BackendContextOverflow | None:
    """A :class:`BackendContextOverflow` when ``message`` (a 400 body's text) is vLLM's
    "maximum context length" error, else None. The prompt's size is read from the message
    ("(N in the messages" / "request has N input tokens" / "prompt contains N input tokens") or
    is ``prompt_tokens``.

    vLLM 0.32 answers a prompt of exactly ``max_model_len`` tokens with "max_tokens must be at
    least 1, got 0." (it clamps ``max_tokens`` to the room left, and we always ask for >= 1):
    that is an overflow too, with ``context_tokens`` = ``max_model_len`` when known, else the
    prompt's size."""
    if _NO_ROOM.search(message):
        return BackendContextOverflow(
            f"vLLM: the prompt ({prompt_tokens} tokens) leaves no room to generate: {message}",
            prompt_tokens=prompt_tokens,
            context_tokens=max_model_len or prompt_tokens,
        )
    found = _OVERFLOW.search(message)
    if found is None:
        return None
    said = _OVERFLOW_PROMPT.search(message)
    prompt = int(next(g for g in said.groups() if g)) if said else prompt_tokens
    return BackendContextOverflow(
        f"vLLM: {message}", prompt_tokens=prompt, context_tokens=int(found.group(1))
    )


def error_message(resp: httpx.Response) -> str:
    """The server's error text: vLLM's ``{"error": {"message"}}``, older ``{"message"}``,
    FastAPI's ``{"detail"}`` (e.g. "Not Found" for a route the server does not have), or the body."""
    try:
        data = resp.json()
    except ValueError:
        return resp.text[:300]
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if data.get("message"):
            return str(data["message"])
        if isinstance(data.get("detail"), str):
            return data["detail"]
    return str(data)[:300]


class _Rejected:
    """A 4xx answer (not retried): its status and the server's message."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message


class _Failed(_Rejected):
    """A 429/5xx answer (retried)."""


class VLLMBackend:
    """A :class:`~strands_art.backends.base.SamplingBackend` on a vLLM OpenAI-compatible server.

    Args:
        base_url: the server, e.g. ``http://127.0.0.1:8000`` (a trailing ``/v1`` is accepted).
        model: the served model name (``--served-model-name``, default the model path).
        timeout_s: seconds any one network operation (read/write/pool) may wait.
        deadline_s: seconds the whole :meth:`sample` call may take, retries included (default
            ``timeout_s + 300``).
        connect_timeout_s: seconds to wait for a connection.
        max_retries: extra attempts after a connection failure or a 5xx answer.
        retry_backoff_s: first backoff; doubles each retry.
        api_key: sent as ``Authorization: Bearer`` (vLLM's ``--api-key``).
        max_connections: size of the shared connection pool.
        max_model_len: the server's context length in tokens; default: read once from
            ``GET /v1/models`` (vLLM's ``max_model_len`` for ``model``) when first asked for
            (:attr:`max_context_tokens`, which the gateway reads for its default budget).
        max_response_bytes: the most bytes (decoded: after gzip) one answer or one whole stream
            may have (default 64 MiB); more is a :class:`~strands_art.backends.http_limits.ResponseTooLarge`
            (a BackendError), and reading stops there (:mod:`strands_art.backends.http_limits`).
        max_line_bytes: the most bytes one line of a stream may have (default 16 MiB).
        models_deadline_s: seconds :meth:`models` and :attr:`max_context_tokens` may take in all
            (default 30): a server that drips ``/v1/models`` cannot hold the caller.

    Policy version (on-policy training, :mod:`strands_art.training.weight_sync`): requests go to
    :attr:`model`, the served base model (:attr:`base_model`, policy version 0) until
    :meth:`use_adapter` switches them to a LoRA adapter loaded into the server; each
    :class:`SampleResult` says which in ``info["model"]`` and ``info["policy_version"]``, read
    when the request is built (a switch while a request is in flight does not relabel it).

    One :class:`httpx.AsyncClient` is shared by all calls; :meth:`sample` is safe to call
    concurrently. Call :meth:`aclose` when done.
    """

    name = "vllm"
    streams_tokens = True

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        timeout_s: float = 600.0,
        deadline_s: float | None = None,
        connect_timeout_s: float = 10.0,
        max_retries: int = 3,
        retry_backoff_s: float = 0.5,
        api_key: str | None = None,
        max_connections: int = 256,
        max_model_len: int | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        max_line_bytes: int = MAX_LINE_BYTES,
        models_deadline_s: float = 30.0,
    ) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        deadline_s = timeout_s + 300.0 if deadline_s is None else deadline_s
        if not (0 < timeout_s < math.inf and 0 < connect_timeout_s < math.inf and 0 < deadline_s < math.inf):
            raise ValueError("timeouts and the deadline must be finite and > 0")
        self.deadline_s = deadline_s
        self.url = completions_url(base_url)
        self.base_url = self.url[: -len("/v1/completions")]
        self.model = model
        self.base_model = model
        self.policy_version = 0
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.retry_backoff_s = retry_backoff_s
        headers = {"Accept-Encoding": ACCEPT_ENCODING}  # the codings http_limits decodes
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            headers=headers,
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
        )
        self._closed = False
        self._max_model_len = max_model_len
        self._connect_timeout_s = connect_timeout_s
        self._headers = headers
        self.max_response_bytes = max_response_bytes
        self.max_line_bytes = max_line_bytes
        self.models_deadline_s = models_deadline_s

    def use_adapter(self, name: str, version: int) -> None:
        """Send later requests to the server's LoRA adapter ``name`` (already loaded there) and
        label their samples with policy ``version`` (optimizer steps behind the weights)."""
        if not name:
            raise ValueError("adapter name must be a non-empty string")
        if not is_int(version) or version < 0:
            raise ValueError(f"policy version must be an integer >= 0, got {version!r}")
        self.model, self.policy_version = name, int(version)

    @property
    def max_context_tokens(self) -> int | None:
        """The server's ``max_model_len`` for :attr:`base_model` (tokens), or None when the server
        does not say (not vLLM, unreachable: logged). Asked once (a blocking ``GET /v1/models``
        with the connect timeout), then cached."""
        if self._max_model_len is None:
            url = self.url[: -len("/completions")] + "/models"
            try:
                body = self._models_body_sync(url)
                cards = [m for m in json.loads(body)["data"] if m.get("id") == self.base_model]
                value = cards[0].get("max_model_len") if cards else None
            except (httpx.HTTPError, BackendError, ValueError, KeyError, TypeError, AttributeError) as exc:
                logger.warning("could not read max_model_len from %s: %r", url, exc)
                return None
            if is_int(value) and value > 0:
                self._max_model_len = value
            else:
                logger.warning("%s names no max_model_len for %r", url, self.model)
        return self._max_model_len

    def _models_body_sync(self, url: str) -> bytes:
        """``GET url`` within :attr:`models_deadline_s` in all, headers included (a server that
        drips its status line or headers cannot hold the caller: the whole exchange runs on its
        own event loop in a helper thread, under ``asyncio.timeout``), callable from sync code
        and from inside a running event loop.

        Raises:
            BackendTimeout: past the deadline; BackendError / httpx.HTTPError: a bad answer.
        """

        async def get() -> bytes:
            async with httpx.AsyncClient(headers=self._headers, timeout=self._connect_timeout_s) as client:
                try:
                    async with asyncio.timeout(self.models_deadline_s):
                        async with client.stream("GET", url) as r:
                            r.raise_for_status()
                            return await read_body(r, self.max_response_bytes, url)
                except TimeoutError as exc:
                    raise BackendTimeout(f"{url} did not answer within {self.models_deadline_s:g} s") from exc

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, get()).result()

    async def sample(
        self, prompt_ids: list[int], params: SamplingParams, *, on_tokens: TokenSink | None = None
    ) -> SampleResult:
        """Sample a continuation of ``prompt_ids`` on the server (see the module docstring).

        With ``on_tokens`` the request is streamed (``"stream": true``, server-sent events, see
        :mod:`strands_art.backends.vllm_stream`): ``on_tokens`` is called on the event loop with
        each chunk's new token IDs, and the result is the same :class:`SampleResult` with the
        same checks. Retries happen only before the stream starts; a stream that breaks or
        reports an error midway raises. Cancelling the awaiting task closes the HTTP stream,
        which makes vLLM abort the request.

        Raises:
            ValueError: empty or invalid prompt.
            BackendError: connection failure after retries, HTTP error, malformed response, abort.
            BackendTimeout: no answer within the timeouts or the total deadline.
        """
        if self._closed:
            raise BackendError("the vLLM backend was closed")
        model, version = self.model, self.policy_version  # what this request samples from
        payload = format_request(model, prompt_ids, params)
        if on_tokens is not None:
            payload["stream"] = True
            payload["stream_options"] = {"include_usage": True}
        try:
            async with asyncio.timeout(self.deadline_s):
                body = await self._post(payload, on_tokens)
        except TimeoutError as exc:
            raise BackendTimeout(
                f"vLLM at {self.url} did not complete the request within its {self.deadline_s:g} s "
                "deadline (retries included)"
            ) from exc
        if isinstance(body, _Rejected):
            overflow = (
                context_overflow(body.message, len(prompt_ids), self._max_model_len)
                if body.status == 400
                else None
            )
            if overflow is not None:
                raise overflow
            raise BackendError(
                f"vLLM at {self.url} rejected the request (HTTP {body.status}): {body.message}"
            )
        result = parse_response(body, prompt_ids)
        result.info.update(model=model, policy_version=version)
        logger.debug(
            "vLLM %s: %d prompt tokens -> %d tokens (%s)",
            result.info.get("id"),
            len(prompt_ids),
            len(result.output_ids),
            result.finish_reason,
        )
        return result

    async def _post(self, payload: dict[str, Any], on_tokens: TokenSink | None = None) -> Any:
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                if on_tokens is None:
                    outcome = await self._answer(payload)
                else:
                    outcome = await self._stream(payload, on_tokens)
            except httpx.ConnectTimeout as exc:
                if last:
                    raise BackendTimeout(
                        f"could not connect to vLLM at {self.url} within the connect timeout "
                        f"({attempts} attempts): {exc!r}"
                    ) from exc
                cause = repr(exc)
            except _RETRYABLE_TRANSPORT as exc:
                if last:
                    raise BackendUnavailable(
                        f"could not reach vLLM at {self.url} after {attempts} attempts: {exc!r}"
                    ) from exc
                cause = repr(exc)
            except httpx.TimeoutException as exc:
                raise BackendTimeout(
                    f"vLLM at {self.url} did not answer within {self.timeout_s} s: {exc!r}"
                ) from exc
            except httpx.HTTPError as exc:
                raise BackendError(f"request to vLLM at {self.url} failed: {exc!r}") from exc
            else:
                if not isinstance(outcome, _Failed):
                    return outcome
                cause = f"HTTP {outcome.status}: {outcome.message}"
                if last:
                    kind = BackendUnavailable if outcome.status in UNAVAILABLE_STATUS else BackendError
                    raise kind(f"vLLM at {self.url} failed after {attempts} attempts: {cause}")
            delay = self.retry_backoff_s * (2**attempt)
            logger.warning(
                "vLLM request failed (%s); retry %d/%d in %.2f s", cause, attempt + 1, self.max_retries, delay
            )
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def _answer(self, payload: dict[str, Any]) -> Any:
        """One non-streamed attempt, its body read within :attr:`max_response_bytes`."""
        async with self._client.stream("POST", self.url, json=payload) as resp:
            body = await read_body(resp, self.max_response_bytes, self.url)
        return self._outcome(httpx.Response(resp.status_code, content=body, request=resp.request))

    def _outcome(self, resp: httpx.Response) -> Any:
        """A read answer → its JSON body, a :class:`_Rejected` 4xx or a retryable :class:`_Failed`."""
        status = resp.status_code
        if status >= 500 or status in UNAVAILABLE_STATUS:
            return _Failed(status, error_message(resp))
        if status >= 400:
            return _Rejected(status, error_message(resp))
        try:
            return resp.json()
        except ValueError as exc:
            raise BackendError(
                f"vLLM at {self.url} answered with a body that is not JSON: {resp.text[:120]!r}"
            ) from exc

    async def _stream(self, payload: dict[str, Any], on_tokens: TokenSink) -> Any:
        """One streamed attempt; leaving the ``async with`` (done, failed or cancelled) closes it."""
        async with self._client.stream("POST", self.url, json=payload) as resp:
            if resp.status_code >= 400:
                body = await read_body(resp, self.max_response_bytes, self.url)
                return self._outcome(httpx.Response(resp.status_code, content=body, request=resp.request))
            return await read_stream(
                resp, on_tokens, self.url, max_line=self.max_line_bytes, limit=self.max_response_bytes
            )

    async def models(self) -> list[str]:
        """The model names the server serves (``GET /v1/models``), to check ``model`` early.

        Raises:
            BackendError: the server cannot be reached or answers badly, or too much
                (:attr:`max_response_bytes`).
            BackendTimeout: no whole answer within :attr:`models_deadline_s`.
        """
        url = self.url[: -len("/completions")] + "/models"
        try:
            async with asyncio.timeout(self.models_deadline_s):
                async with self._client.stream("GET", url) as resp:
                    resp.raise_for_status()
                    body = await read_body(resp, self.max_response_bytes, url)
            return [m["id"] for m in json.loads(body)["data"]]
        except TimeoutError as exc:
            raise BackendTimeout(f"{url} did not answer within {self.models_deadline_s:g} s") from exc
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise BackendError(f"could not list models at {url}: {exc!r}") from exc

    async def aclose(self) -> None:
        """Close the HTTP client; later :meth:`sample` calls raise :class:`BackendError`."""
        if not self._closed:
            self._closed = True
            await self._client.aclose()
