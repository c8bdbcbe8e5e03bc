"""The sampling-backend protocol: token IDs in, token IDs + logprobs out.

Every backend implements :class:`SamplingBackend`: ``llamacpp`` (in-process llama.cpp on CPU,
:mod:`.llamacpp`), ``transformers`` (a local Hugging Face model, :mod:`.transformers`), ``vllm``
(a vLLM server, :mod:`.vllm`), ``scripted`` (pre-written outputs for tests and replay,
:mod:`.scripted`), and verl's rollout servers (:mod:`strands_art.verl.backend`, in the verl
front). The gateway owns rendering and tokenization; a backend never sees messages or text.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from strands_art.validation import is_int, is_real

FinishReason = Literal["stop", "length"]
TokenSink = Callable[[list[int]], None]
"""Streaming callback: called with each batch of newly sampled token IDs, in order, possibly from
a backend's worker thread (so it must be thread-safe and cheap). Backends that accept it in
``sample(..., on_tokens=...)`` set ``streams_tokens = True``; the IDs it sees are exactly the
prefix of the :class:`SampleResult`'s ``output_ids`` (the row still comes from the result)."""


class BackendError(RuntimeError):
    """A backend could not produce a sample (connection refused, HTTP error, bad response).

    Raised by :meth:`SamplingBackend.sample`; the gateway records nothing for the turn.
    """


class InvalidSample(BackendError):
    """A backend answered with values that cannot be true (see :func:`check_sample`)."""


class BackendTimeout(BackendError):
    """The backend did not answer within its configured timeout (after all retries).

    Retryable: the Strands provider raises ``ModelThrottledException`` (the HTTP front 429).
    """


class BackendUnavailable(BackendError):
    """The backend is overloaded or unreachable: HTTP 429 / 502 / 503 / 504, a refused
    connection, an aborted request (after the backend's own retries).

    Retryable: the Strands provider raises ``ModelThrottledException`` (the HTTP front 503).
    Any other :class:`BackendError` (a 4xx rejection, a malformed answer, an
    :class:`InvalidSample`) is not: retrying the same request would fail the same way.
    """


class BackendContextOverflow(BackendError):
    """The prompt does not fit the backend's context window; nothing was generated.

    The gateway turns it into its ``ContextBudgetExceeded`` (the provider then raises Strands'
    ``ContextWindowOverflowException``): a policy outcome, not an infrastructure failure.

    Attributes:
        prompt_tokens: tokens in the rejected prompt.
        context_tokens: the backend's context size (per request).
    """

    def __init__(self, message: str, *, prompt_tokens: int, context_tokens: int) -> None:
        super().__init__(message)
        self.prompt_tokens = prompt_tokens
        self.context_tokens = context_tokens


@dataclass(frozen=True)
class SamplingParams:
    """Sampling parameters, owned by the trainer and set per session on the gateway.

    Attributes:
        temperature: softmax temperature (> 0; 0 means greedy argmax, logprobs then come from the
            unscaled distribution).
        top_p: nucleus mass in (0, 1]; 1.0 disables.
        top_k: keep the k most likely tokens; 0 disables.
        max_new_tokens: upper bound on sampled tokens per turn (> 0).
        stop: stop strings (matched on decoded text; the matched text is kept in the output).
            One string is one stop string (as OpenAI's ``stop``), not one per character.
        stop_token_ids: token IDs that end the generation (kept in the output, like vLLM does).
            The gateway adds the template's end-of-turn token automatically.
        seed: optional session seed for reproducible sampling. The gateway does not send it
            unchanged: turn *t* of rollout *r* samples with :func:`turn_seed` (seed, t, r), so
            turns and the rollouts of a group draw different random streams and a rerun of the
            rollout draws the same ones.

    Raises:
        TypeError: a value of the wrong type (a string temperature, a float max_new_tokens,
            a token ID that is not an integer, ...); booleans are not numbers here.
        ValueError: a value out of range.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 512
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    seed: int | None = None

    def __post_init__(self) -> None:
        _check_type("temperature", self.temperature, numbers.Real, "a number")
        _check_type("top_p", self.top_p, numbers.Real, "a number")
        _check_type("top_k", self.top_k, numbers.Integral, "an integer")
        _check_type("max_new_tokens", self.max_new_tokens, numbers.Integral, "an integer")
        if self.seed is not None:
            _check_type("seed", self.seed, numbers.Integral, "an integer")
        stop = (self.stop,) if isinstance(self.stop, str) else self.stop
        if not isinstance(stop, tuple | list) or not all(isinstance(x, str) for x in stop):
            raise TypeError(f"stop must be a string or a sequence of strings, got {self.stop!r}")
        ids = self.stop_token_ids
        if not isinstance(ids, tuple | list) or not all(is_int(x) for x in ids):
            raise TypeError(f"stop_token_ids must be a sequence of token IDs (integers), got {ids!r}")
        if any(x < 0 for x in ids):
            raise ValueError(f"stop_token_ids must be >= 0, got {list(ids)}")
        object.__setattr__(self, "stop", tuple(stop))  # frozen: normalize once, here
        object.__setattr__(self, "stop_token_ids", tuple(int(x) for x in ids))
        if not self.temperature >= 0 or math.isinf(self.temperature):  # NaN fails the first
            raise ValueError(f"temperature must be a finite number >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 disables), got {self.top_k}")
        if self.max_new_tokens <= 0:
            raise ValueError(f"max_new_tokens must be > 0, got {self.max_new_tokens}")

    def to_dict(self) -> dict:
        return asdict(self)


def _check_type(name: str, value: Any, kind: type, what: str) -> None:
    if not (is_int(value) if kind is numbers.Integral else is_real(value, finite=False)):
        raise TypeError(f"{name} must be {what}, got {type(value).__name__} {value!r}")


def turn_seed(session_seed: int, turn_index: int, rollout_id: str | None = None) -> int:
    """The seed sent to the backend for turn ``turn_index`` (0-based) of rollout ``rollout_id``
    seeded with ``session_seed``: the first 31 bits of BLAKE2b over
    ``"{session_seed}/{rollout_id}/{turn_index}"`` (``"{session_seed}/{turn_index}"`` without a
    rollout id), an int in [0, 2**31) that every backend accepts (torch, vLLM, llama.cpp).
    Deterministic across processes and Python versions (no ``hash()``), distinct per turn and
    per rollout: the rollouts of a GRPO group opened with one shared seed still draw different
    samples (issue 48, U08), and a rerun of a rollout (same id, seed and turn) draws the same."""
    import hashlib

    key = (
        f"{int(session_seed)}/{int(turn_index)}"
        if rollout_id is None
        else (f"{int(session_seed)}/{rollout_id}/{int(turn_index)}")
    )
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & 0x7FFFFFFF


@dataclass
class SampleResult:
    """What a backend returns for one generation.

    Attributes:
        output_ids: sampled token IDs, including a terminating stop token if one was sampled.
        logprobs: list[float] of length len(output_ids); natural-log probability of each sampled
            token under the *sampling* distribution (after temperature, top-k, top-p).
        finish_reason: "stop" (stop token or stop string) or "length" (max_new_tokens reached).
        info: backend-specific extras (e.g. the server's request id), never required.
    """

    output_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.output_ids) != len(self.logprobs):
            raise BackendError(
                f"backend returned {len(self.output_ids)} token IDs but {len(self.logprobs)} logprobs"
            )
        if self.finish_reason not in ("stop", "length"):
            raise BackendError(f"unknown finish_reason {self.finish_reason!r}")


#: the largest magnitude a logprob may have: the store keeps logprobs as float32
#: (strands_art/store.py), where anything beyond it becomes -inf
FLOAT32_MAX = 3.4028234663852886e38


def check_sample(sample: SampleResult, vocab_size: int, max_new_tokens: int) -> None:
    """Refuse a sample whose values no correct backend produces, before anything records it.

    Checks: every output ID is an ``int`` in ``[0, vocab_size)`` (so it also fits the int32
    columns of the store); every logprob is a float ``<= 0`` (a log-probability) that is finite
    in the float32 the store keeps (``>= -FLOAT32_MAX``: -1e300 is finite as a Python float but
    -inf in the Parquet column); at most
    ``max_new_tokens`` tokens (what was asked for).

    Raises:
        InvalidSample: the first violation, with the offending position and value.
    """
    ids, lps = sample.output_ids, sample.logprobs
    if (
        len(ids) <= max_new_tokens
        and all(type(t) is int and 0 <= t < vocab_size for t in ids)
        and all(type(x) in (float, int) and -FLOAT32_MAX <= x <= 0 for x in lps)
    ):
        return  # the common case, in one pass each; below: find the first violation for the message
    if len(ids) > max_new_tokens:
        raise InvalidSample(f"backend returned {len(ids)} tokens but at most {max_new_tokens} were asked for")
    for i, t in enumerate(ids):
        if type(t) is not int or not 0 <= t < vocab_size:  # exactly int, as above: rows are JSON
            raise InvalidSample(
                f"backend returned token ID {t!r} at position {i}, outside the vocabulary [0, {vocab_size})"
            )
    for i, x in enumerate(lps):
        if type(x) not in (float, int) or not -FLOAT32_MAX <= x <= 0:
            raise InvalidSample(
                f"backend returned logprob {x!r} at position {i}; a logprob is a finite number <= 0 "
                "(finite as float32, the store's precision)"
            )


@runtime_checkable
class SamplingBackend(Protocol):
    """One generation from token IDs. Implementations must be safe to call concurrently.

    ``sample(prompt_ids, params)`` takes the prompt's token IDs (``list[int]``, length <= the
    backend's context window) and returns a :class:`SampleResult` (output IDs and one logprob per
    output token, natural log); errors are :class:`BackendError` subclasses.
    """

    name: str

    async def sample(self, prompt_ids: list[int], params: SamplingParams) -> SampleResult:
        """Sample a continuation of ``prompt_ids``.

        A backend with ``streams_tokens = True`` also takes ``on_tokens`` (a :data:`TokenSink`)
        as a keyword argument and calls it as tokens are produced. Cancelling the awaiting task
        stops the generation promptly; nothing is returned, so nothing is recorded.

        Raises:
            BackendError: the backend failed; nothing was generated.
            BackendTimeout: no answer within the configured timeout.
        """
        ...

    async def aclose(self) -> None:
        """Release clients, servers or models held by the backend."""
        ...
