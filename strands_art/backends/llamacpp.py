"""llama.cpp in-process through ``xllamacpp``: token IDs in, sampled IDs and their logprobs out.

``xllamacpp`` (a prebuilt wheel, MIT) runs llama.cpp's server loop inside this process; one
:class:`LlamaCppBackend` holds one model with ``parallel`` slots that are batched together, so
``parallel`` rollouts decode at once. Each request sends the prompt **as token IDs**
(``"prompt": [ids]``), so llama.cpp continues exactly the tokens the gateway recorded; the reply
gives every sampled token's ``id`` (and the final chunk's ``usage.prompt_tokens`` is checked
against the number of IDs sent). A slot keeps its KV cache, and the next turn of the same
rollout re-reads only the tokens after the prefix it shares with the cache (see below).

Determinism and the prompt cache: llama.cpp's CPU kernels do not give bit-identical results for
a token evaluated in batches of different shapes, so a prompt whose prefix a slot already holds,
evaluated only from where llama.cpp's cache ends, can sample other tokens than a cold run with the
same seed (issue 28, t10). Three modes (``cache_prompt``):

- ``"aligned"`` (the default with one slot): a prompt reuses the cache only up to the last whole
  ``batch_tokens`` batch it shares with the previous prompt (a batch that prompt evaluated whole,
  at the same positions, after the same tokens), and everything after is evaluated in the same
  batches a cold run uses. Before each request the backend ends the slot's cache at that boundary
  (a 1-token request that differs there). The same prompt, seed and settings then give the same
  tokens and logprobs, bit for bit, whatever the slot held before, and a rollout's next turn
  re-reads at most ``batch_tokens`` - 1 tokens more than its new ones
  (``bench/llamacpp_prompt_cache.py`` measures the cost). One slot only: several slots decode
  together in shared batches, which changes the numerics whatever the cache holds.
- ``"any"`` (the default with several slots): llama.cpp's own reuse of the longest common prefix
  (llama.cpp picks the slot whose cached prompt is most similar); fastest, not reproducible.
- ``"off"``: every prompt evaluated cold.

Each :class:`~strands_art.backends.base.SampleResult` says how many prompt tokens came from the
cache (``info["cached_prompt_tokens"]``, llama.cpp's ``usage.prompt_tokens_details.cached_tokens``)
and which mode (``info["prompt_cache"]``); the gateway records the count on the turn
(``Turn.cached_prompt_tokens``).

Logprobs (measured on Qwen2.5-Coder-0.5B, see docs/setup-llamacpp.md): llama.cpp's default
``logprob`` is taken from the **raw** distribution (``log_softmax`` of the logits: the same value
at temperature 1 and 0.7, and unchanged by top-p). Asked with ``"post_sampling_probs": true`` it
returns the ``prob`` of each sampled token after its sampler chain instead. This backend sets the
chain to ``temperature → top_k → top_p`` (the order of :mod:`strands_art.backends.sampling` and
vLLM; min-p, penalties, DRY, XTC and typical-p are left out of the chain) and records
``log(prob)``: the **processed** logprob of the distribution the token was drawn from, as the
:class:`~strands_art.backends.base.SampleResult` contract asks (``logprobs_mode="processed"``).
``logprobs_mode="raw"`` records llama.cpp's raw values instead; the trainer reads the mode from
each row (``row.metadata["logprobs_mode"]``) and corrects for it. Greedy requests
(``temperature`` < 1e-5) always report the raw distribution, like the other backends.

Stop strings are matched here, on the bytes of the sampled tokens, and the generation is ended
with the matching token kept (llama.cpp's own ``stop`` would drop the tokens of the match).
Cancelling :meth:`LlamaCppBackend.sample` stops llama.cpp at its next token (the request streams
and its callback sees the cancellation flag).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
from pathlib import Path
from typing import Any, Literal

from strands_art.backends.base import (
    BackendContextOverflow,
    BackendError,
    SampleResult,
    SamplingParams,
    TokenSink,
)
from strands_art.backends.sampling import is_greedy

logger = logging.getLogger(__name__)

LogprobsMode = Literal["processed", "raw"]
PromptCache = Literal["aligned", "any", "off"]
SAMPLER_CHAIN = ("temperature", "top_k", "top_p")
_SEED_MAX = 2**32 - 2  # llama.cpp's LLAMA_DEFAULT_SEED (0xFFFFFFFF) means "random"


def default_threads() -> int:
    """Decode threads: ``$STRANDS_ART_LLAMACPP_THREADS`` if set, else half the CPUs (at least 1).

    Half, because on a small shared machine the agent's Maven builds and other processes need the
    rest, and llama.cpp's busy-waiting threads slow everyone down when oversubscribed.
    """
    env = os.environ.get("STRANDS_ART_LLAMACPP_THREADS")
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"STRANDS_ART_LLAMACPP_THREADS must be an integer, got {env!r}") from None
        if n < 1:
            raise ValueError(f"STRANDS_ART_LLAMACPP_THREADS must be >= 1, got {n}")
        return n
    return max(1, (os.cpu_count() or 2) // 2)


def aligned_reuse(evaluated: list[int], prompt_ids: list[int], batch_tokens: int) -> int:
    """Prompt tokens a slot's cache may serve in ``"aligned"`` mode, a multiple of ``batch_tokens``.

    ``evaluated`` is the last prompt the slot evaluated (every part of it after its own reused
    prefix in whole ``batch_tokens`` batches from an aligned position); the result is the whole
    batches from position 0 that it shares with ``prompt_ids``, never including the prompt's last
    token (a cold run evaluates that token inside a batch, so it is always re-read).
    """
    common = len(os.path.commonprefix([evaluated, prompt_ids[:-1]]))
    return common // batch_tokens * batch_tokens


class LlamaCppBackend:
    """A :class:`~strands_art.backends.base.SamplingBackend` on llama.cpp (``xllamacpp``).

    Args:
        model: a GGUF alias (``qwen2.5-coder-1.5b``, ``qwen2.5-coder-0.5b``) or a ``.gguf`` path.
        context_tokens: context per slot in tokens (prompt + generated); the gateway's default
            budget (:attr:`max_context_tokens`). Default: the model's trained context (the GGUF's
            ``context_length``, 32,768 for the Qwen2.5-Coder aliases); the KV cache holds
            ``context_tokens * parallel`` tokens, so pass less on a small machine.
        parallel: slots decoded together (= the rollouts in flight). Default 2.
        threads: CPU threads for decoding and prompt processing; default :func:`default_threads`.
        batch_tokens: prompt tokens processed per step (llama.cpp ``n_batch``). Default 512.
        logprobs_mode: ``"processed"`` (default, after temperature/top-k/top-p) or ``"raw"``.
        cache_prompt: how a prompt reuses a slot's KV cache (see the module docstring):
            ``"aligned"`` (whole batches only: reproducible; one slot only), ``"any"`` (llama.cpp's
            longest-prefix reuse: not reproducible) or ``"off"`` (every prompt cold). ``True`` is
            ``"aligned"``, ``False`` is ``"off"``. Default: ``"aligned"`` with one slot, ``"any"``
            with several.
        verbosity: llama.cpp log verbosity (-1 silences it; default -1).

    Raises:
        ModelNotFound: unknown alias, missing part packages or no such file.
        GGUFIntegrityError: the joined GGUF is not the pinned one.
        BackendError: ``xllamacpp`` is not installed or the model does not load.
        ValueError: a bad option.
    """

    name = "llamacpp"
    streams_tokens = True

    def __init__(
        self,
        model: str,
        *,
        context_tokens: int | None = None,
        parallel: int = 2,
        threads: int | None = None,
        batch_tokens: int = 512,
        logprobs_mode: LogprobsMode = "processed",
        cache_prompt: PromptCache | bool | None = None,
        verbosity: int = -1,
    ) -> None:
        if context_tokens is not None and context_tokens < 16:
            raise ValueError(f"context_tokens must be >= 16, got {context_tokens}")
        if parallel < 1:
            raise ValueError(f"parallel must be >= 1, got {parallel}")
        if logprobs_mode not in ("processed", "raw"):
            raise ValueError(f"logprobs_mode must be 'processed' or 'raw', got {logprobs_mode!r}")
        threads = default_threads() if threads is None else threads
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        try:
            import xllamacpp
        except ImportError:
            raise BackendError(
                "the llamacpp backend needs the xllamacpp package: pip install xllamacpp==2026.10.11549"
            ) from None
        from strands_art.registry import gguf_file

        self.model_path: Path = gguf_file(model)
        if context_tokens is None:
            from strands_art.models_gguf import gguf_context_length

            context_tokens = gguf_context_length(self.model_path) or 4096  # llama.cpp's own default
        self.model = model
        self.max_context_tokens = context_tokens
        self.parallel = parallel
        self.threads = threads
        self.logprobs_mode: LogprobsMode = logprobs_mode
        mode: Any = cache_prompt
        if cache_prompt is None:
            mode = "aligned" if parallel == 1 else "any"
        elif isinstance(cache_prompt, bool):
            mode = "aligned" if cache_prompt else "off"
        if mode not in ("aligned", "any", "off"):
            raise ValueError(
                f"cache_prompt must be 'aligned', 'any', 'off', True or False, got {cache_prompt!r}"
            )
        if mode == "aligned" and parallel != 1:
            raise ValueError(
                f"cache_prompt='aligned' needs parallel=1 (got {parallel}): several slots decode in "
                "shared batches, which are not reproducible; use 'any' or 'off'"
            )
        self.cache_prompt: PromptCache = mode
        self.batch_tokens = batch_tokens
        self._evaluated: list[int] = []  # "aligned": the last prompt the slot evaluated whole
        self._slot: tuple[Any, asyncio.Lock] | None = None  # "aligned": (loop, lock) cut + request
        p = xllamacpp.CommonParams()
        p.model.path = str(self.model_path)
        p.n_ctx = context_tokens * parallel  # llama.cpp splits n_ctx evenly over the slots
        p.n_parallel = parallel
        p.n_batch = batch_tokens
        p.n_ubatch = batch_tokens
        p.cpuparams.n_threads = threads
        p.cpuparams_batch.n_threads = threads
        p.cache_prompt = mode != "off"
        if mode != "any":  # llama.cpp's host-memory prompt cache restores whole saved prompts
            p.cache_ram_mib = 0
            p.cache_idle_slots = False
        p.ctx_shift = False  # never drop tokens from a full context: that would break the row
        p.warmup = False
        p.verbosity = verbosity
        p.n_gpu_layers = 0
        try:
            self._server = xllamacpp.Server(p)
        except Exception as exc:  # noqa: BLE001 - the C++ side raises plain RuntimeErrors
            raise BackendError(f"llama.cpp could not load {self.model_path}: {exc}") from exc
        self._closed = False

    # ------------------------------------------------------------------ protocol
    async def sample(
        self, prompt_ids: list[int], params: SamplingParams, *, on_tokens: TokenSink | None = None
    ) -> SampleResult:
        """Sample a continuation of ``prompt_ids`` (see :class:`SamplingBackend`).

        ``on_tokens`` (optional) is called on llama.cpp's worker thread with the token IDs of each
        streamed chunk, as llama.cpp produces them.

        Raises:
            BackendContextOverflow: the prompt does not fit the slot's context.
            BackendError: llama.cpp rejected the request (e.g. token IDs outside the vocabulary)
                or the backend is closed.
        """
        if self._closed:
            raise BackendError("the llamacpp backend is closed")
        if not prompt_ids:
            raise BackendError("empty prompt")
        if self.cache_prompt != "aligned":
            return await self._sample(prompt_ids, params, on_tokens)
        loop = asyncio.get_running_loop()
        if self._slot is None or self._slot[0] is not loop:  # a lock belongs to one event loop
            self._slot = (loop, asyncio.Lock())
        async with self._slot[1]:
            evaluated, self._evaluated = self._evaluated, []  # unknown until this request ends
            await asyncio.to_thread(
                self._cut_cache, prompt_ids, aligned_reuse(evaluated, prompt_ids, self.batch_tokens)
            )
            result = await self._sample(prompt_ids, params, on_tokens)
            self._evaluated = list(prompt_ids)
            return result

    async def _sample(
        self, prompt_ids: list[int], params: SamplingParams, on_tokens: TokenSink | None
    ) -> SampleResult:
        cancel = threading.Event()
        call = _Call(
            self._request(prompt_ids, params),
            params,
            cancel,
            greedy=is_greedy(params.temperature),
            on_tokens=on_tokens,
        )
        try:
            await asyncio.shield(asyncio.to_thread(call.run, self._server))
        except asyncio.CancelledError:
            cancel.set()  # llama.cpp stops at its next token; the thread then returns
            raise
        result = call.result(len(prompt_ids), self.max_context_tokens, self.logprobs_mode)
        result.info["prompt_cache"] = self.cache_prompt
        return result

    def _cut_cache(self, prompt_ids: list[int], keep: int) -> None:
        """End the slot's cache at ``keep`` tokens: a greedy 1-token request whose prompt is the
        first ``keep`` tokens and one that differs from ``prompt_ids[keep]``, so the next request's
        common prefix with the cache is exactly ``keep`` (llama.cpp has no call to truncate it)."""
        differing = 0 if prompt_ids[keep] != 0 else 1
        params = SamplingParams(temperature=0.0, max_new_tokens=1)
        call = _Call(
            self._request(prompt_ids[:keep] + [differing], params), params, threading.Event(), greedy=True
        )
        call.run(self._server)
        call.result(keep + 1, self.max_context_tokens, self.logprobs_mode)  # raises what llama.cpp said

    async def aclose(self) -> None:
        """Release the model (waits for no request: call it when none is in flight)."""
        if not self._closed:
            self._closed = True
            server, self._server = self._server, None
            del server

    # ------------------------------------------------------------------ helpers
    def _request(self, prompt_ids: list[int], params: SamplingParams) -> dict[str, Any]:
        greedy = is_greedy(params.temperature)
        seed = params.seed if params.seed is not None else int.from_bytes(os.urandom(4), "little")
        return {
            "prompt": [int(t) for t in prompt_ids],
            "n_predict": int(params.max_new_tokens),
            "stream": True,
            "n_probs": 1,
            # greedy: the unscaled distribution (the protocol's convention); else the processed one
            "post_sampling_probs": not greedy and self.logprobs_mode == "processed",
            "temperature": 0.0 if greedy else float(params.temperature),
            "top_k": int(params.top_k),
            "top_p": float(params.top_p),
            "min_p": 0.0,
            "samplers": list(SAMPLER_CHAIN),
            "seed": int(seed) % _SEED_MAX,
            "cache_prompt": self.cache_prompt != "off",
            "return_tokens": True,
        }


class _Call:
    """One streamed request: collects tokens, checks stop conditions and cancellation."""

    def __init__(
        self,
        request: dict,
        params: SamplingParams,
        cancel: threading.Event,
        *,
        greedy: bool,
        on_tokens: TokenSink | None = None,
    ):
        self.request = request
        self.on_tokens = on_tokens
        self.stop_ids = set(params.stop_token_ids)
        self.stop_strings = [s.encode() for s in params.stop if s]
        self.cancel = cancel
        self.post = bool(request["post_sampling_probs"])
        self.ids: list[int] = []
        self.logprobs: list[float] = []
        self.text = b""
        self.finish: str | None = None
        self.error: dict | None = None
        self.prompt_tokens: int | None = None  # as llama.cpp counted them (final chunk's usage)
        self.cached_tokens: int | None = None  # of them, taken from the slot's prompt cache

    def run(self, server: Any) -> None:
        if server is None:
            self.error = {"message": "the llamacpp backend is closed"}
            return
        server.handle_completions(self.request, self._on_chunk)

    def _on_chunk(self, chunk: dict) -> bool:
        """llama.cpp's stream callback; returning True stops the generation."""
        if "error" in chunk:
            self.error = chunk["error"]
            return True
        if "usage" in chunk:
            self.prompt_tokens = int(chunk["usage"].get("prompt_tokens", -1))
            cached = (chunk["usage"].get("prompt_tokens_details") or {}).get("cached_tokens")
            self.cached_tokens = int(cached) if isinstance(cached, int) else None
        choice = (chunk.get("choices") or [{}])[0]
        before = len(self.ids)
        for tok in (choice.get("logprobs") or {}).get("content") or ():
            self.ids.append(int(tok["id"]))
            if self.post:
                prob = float(tok["prob"])
                self.logprobs.append(math.log(prob) if prob > 0 else float("-inf"))
            else:
                self.logprobs.append(float(tok["logprob"]))
            self.text += bytes(tok.get("bytes") or b"")
            if self.ids[-1] in self.stop_ids or any(s in self.text for s in self.stop_strings):
                self.finish = "stop"
        if self.on_tokens is not None and len(self.ids) > before:
            self.on_tokens(self.ids[before:])
        if choice.get("finish_reason") and self.finish is None:
            self.finish = "stop" if choice["finish_reason"] == "stop" else "length"
        return self.finish is not None or self.cancel.is_set()

    def result(self, prompt_len: int, context: int, mode: str) -> SampleResult:
        if self.error is not None:
            message = str(self.error.get("message", self.error))
            if self.error.get("type") == "exceed_context_size_error":
                raise BackendContextOverflow(
                    f"llama.cpp: {message}",
                    prompt_tokens=int(self.error.get("n_prompt_tokens", prompt_len)),
                    context_tokens=int(self.error.get("n_ctx", context)),
                )
            raise BackendError(f"llama.cpp rejected the request: {message}")
        if self.prompt_tokens is not None and self.prompt_tokens != prompt_len:
            raise BackendError(f"llama.cpp read {self.prompt_tokens} prompt tokens, {prompt_len} were sent")
        if self.finish is None:
            # the stream ended without a finish reason: context full (ctx_shift is off)
            self.finish = "length"
        return SampleResult(
            output_ids=self.ids,
            logprobs=self.logprobs,
            finish_reason=self.finish,  # type: ignore[arg-type]
            info={"logprobs_mode": mode}
            | ({"cached_prompt_tokens": self.cached_tokens} if self.cached_tokens is not None else {}),
        )
