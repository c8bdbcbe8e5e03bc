"""The embedded sampling backend: a local Hugging Face causal LM (CPU here, GPU where present).

Token IDs in, sampled token IDs + logprobs out, with our own decoding loop over the model's KV
cache (``model(input_ids, past_key_values=..., use_cache=True)``) rather than ``model.generate``,
so that every sampled token's logprob is taken from exactly the distribution it was drawn from.

**Logprobs** are the natural-log probability of each sampled token under the *sampling*
distribution, i.e. after temperature scaling, top-k and top-p filtering, renormalized over the
kept tokens (vLLM's ``--logprobs-mode processed_logprobs``)::

    logp_t = log_softmax(filter(z_t / T, top_k, top_p))[y_t]        (T >= 1e-5)
    logp_t = log_softmax(z_t)[y_t],  y_t = argmax z_t                (greedy, T < 1e-5)

where ``z_t`` are the model's next-token logits (float32). The trainer must compute its own
logprobs the same way: :func:`strands_art.backends.sampling.sampling_logprobs` /
:func:`~strands_art.backends.sampling.token_logprobs` implement the formula (see that module).

**Stopping** (as vLLM does): a sampled token in ``params.stop_token_ids`` or the model's EOS
ids ends the generation and is kept in the output; a stop string ends it as soon as the decoded
output (special tokens kept) contains it, keeping all sampled tokens (the last token may carry
text past the stop string, vLLM's ``include_stop_str_in_output``). Both give finish ``"stop"``;
reaching ``max_new_tokens`` or the model's context (``max_position_embeddings``) gives
``"length"``.

**Concurrency**: the torch loop runs on one dedicated worker thread per backend; concurrent
:meth:`TransformersBackend.sample` calls queue there (one generation at a time, no batching)
and never block the event loop. ``backend.lock`` (a ``threading.Lock``) is held for each whole
generation; a trainer sharing ``backend.model`` holds it while it changes the weights
(``with backend.lock: optimizer.step()``, or ``async with backend.exclusive():`` from asyncio).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
import time
from collections.abc import AsyncIterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from strands_art.backends.base import (
    BackendContextOverflow,
    BackendError,
    SampleResult,
    SamplingParams,
    TokenSink,
)
from strands_art.backends.sampling import is_greedy, sample_next

logger = logging.getLogger(__name__)


class _Cancelled(Exception):
    """The awaiting caller went away; stop decoding."""


def _as_id_set(value: Any) -> set[int]:
    if value is None:
        return set()
    if isinstance(value, int):
        return {value}
    return {int(v) for v in value}


class TransformersBackend:
    """A :class:`~strands_art.backends.base.SamplingBackend` over a local ``transformers`` model.

    Args:
        model_name_or_dir: a registry alias (``"smollm2"``) or a local model directory; used to
            load the model and tokenizer when they are not given.
        device: torch device for a model loaded here (default: cuda if available, else cpu);
            a given ``model`` is moved there only if ``device`` is set.
        dtype: torch dtype for a model loaded here (default float32).
        model: an existing causal LM (plain or a peft model) to share with a trainer.
        tokenizer: the matching tokenizer (default: loaded for ``model_name_or_dir``); used for
            stop strings and its EOS id.

    Attributes:
        model: the model sampled from (shared; see :meth:`update_weights`).
        lock: ``threading.Lock`` held for each generation and by weight updates.
        policy_version: optimizer steps behind the weights sampled from (set by the trainer
            that shares the model, under :attr:`lock`); each sample reports it in
            ``info["policy_version"]``.
        max_positions: the model's context length (``max_position_embeddings``) or None.
        max_context_tokens: the same, read by the gateway for its default context budget.

    Raises:
        registry.ModelNotFound: unknown alias/directory (only when loading here).
    """

    name = "transformers"
    streams_tokens = True

    def __init__(
        self,
        model_name_or_dir: str = "smollm2",
        *,
        device: str | torch.device | None = None,
        dtype: torch.dtype | None = None,
        model: Any = None,
        tokenizer: Any = None,
    ) -> None:
        from strands_art import registry

        if model is None:
            model = registry.load_causal_lm(model_name_or_dir, device=device, dtype=dtype)
        elif device is not None:
            model = model.to(device)
        if tokenizer is None:
            tokenizer = registry.load_tokenizer(model_name_or_dir)
        self.tokenizer = tokenizer
        self.lock = threading.Lock()
        self.policy_version = 0
        self._executor: ThreadPoolExecutor | None = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="strands-art-sampler"
        )
        self._set_model(model)

    # -- model / weights ----------------------------------------------------------------------

    def _set_model(self, model: Any) -> None:
        self.model = model
        cfg = model.config
        self.max_positions: int | None = getattr(cfg, "max_position_embeddings", None)
        self.vocab_size = int(model.get_input_embeddings().num_embeddings)
        eos = _as_id_set(getattr(getattr(model, "generation_config", None), "eos_token_id", None))
        eos |= _as_id_set(getattr(cfg, "eos_token_id", None))
        eos |= _as_id_set(getattr(self.tokenizer, "eos_token_id", None))
        self.eos_token_ids = frozenset(eos)
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        accepted = inspect.signature(base.forward).parameters
        self._keep_kw = {"logits_to_keep": 1} if "logits_to_keep" in accepted else {}
        # transformers >= 5.2x renamed the KV-cache argument/output `past_key_values` -> `cache`.
        self._cache_name = "cache" if "cache" in accepted else "past_key_values"

    @property
    def device(self) -> torch.device:
        """The device of the model's first parameter."""
        return next(self.model.parameters()).device

    def update_weights(
        self, weights: Mapping[str, torch.Tensor] | torch.nn.Module, strict: bool = True
    ) -> None:
        """Swap in new weights: a state dict (loaded into ``model``) or a whole new model object.

        Takes :attr:`lock`, so it waits for the running generation and blocks new ones; do not
        call it while holding the lock yourself. Call it from a thread (e.g.
        ``await asyncio.to_thread(backend.update_weights, sd)``) to keep an event loop free.
        A model shared with the trainer and updated in place needs no call at all.

        Raises:
            RuntimeError: from ``load_state_dict`` for missing/unexpected keys (``strict``) or
                mismatched shapes.
        """
        with self.lock:
            if isinstance(weights, torch.nn.Module):
                self._set_model(weights.to(self.device))
            else:
                self.model.load_state_dict(dict(weights), strict=strict)
        logger.info("transformers backend: weights updated")

    @contextlib.asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        """``async with backend.exclusive():`` holds :attr:`lock` without blocking the event loop
        while waiting for a running generation to finish."""
        await asyncio.to_thread(self.lock.acquire)
        try:
            yield
        finally:
            self.lock.release()

    @property
    def max_context_tokens(self) -> int | None:
        """The model's context length in tokens (``max_position_embeddings``), or None."""
        return self.max_positions

    # -- sampling -----------------------------------------------------------------------------

    def _check(self, prompt_ids: list[int], params: SamplingParams) -> None:
        if not prompt_ids:
            raise BackendError("empty prompt: the transformers backend needs at least one token")
        bad = [t for t in prompt_ids if not 0 <= t < self.vocab_size]
        if bad:
            raise BackendError(
                f"prompt token IDs {bad[:5]} outside the model's vocabulary (size {self.vocab_size})"
            )
        if self.max_positions is not None and len(prompt_ids) >= self.max_positions:
            raise BackendContextOverflow(
                f"prompt has {len(prompt_ids)} tokens but the model's context (max_position_embeddings) "
                f"is {self.max_positions}: no room to generate",
                prompt_tokens=len(prompt_ids),
                context_tokens=self.max_positions,
            )
        if params.stop and self.tokenizer is None:
            raise BackendError("stop strings need a tokenizer; pass tokenizer= to TransformersBackend")

    def _stop_string_hit(self, out_ids: list[int], stops: tuple[str, ...]) -> str | None:
        # A stop string of B bytes spans at most B tokens (each token is >= 1 byte), plus one for
        # a token that starts before it; earlier matches would already have stopped the loop.
        width = max(len(s.encode("utf-8")) for s in stops) + 1
        text = self.tokenizer.decode(out_ids[-width:], skip_special_tokens=False)
        return next((s for s in stops if s in text), None)

    def _generate(
        self,
        prompt_ids: list[int],
        params: SamplingParams,
        cancel: threading.Event,
        on_tokens: TokenSink | None = None,
    ) -> SampleResult:
        queued = time.perf_counter()
        with self.lock:
            t0 = time.perf_counter()
            model, version = self.model, self.policy_version
            was_training = model.training
            model.eval()
            try:
                with torch.no_grad():
                    result = self._decode(model, prompt_ids, params, cancel, on_tokens)
            except (_Cancelled, BackendError):
                raise
            except Exception as e:  # torch/transformers failure (OOM, shape errors, ...)
                raise BackendError(f"transformers backend failed: {type(e).__name__}: {e}") from e
            finally:
                if was_training:
                    model.train()
        result.info.update(queued_s=t0 - queued, total_s=time.perf_counter() - t0, policy_version=version)
        return result

    def _decode(
        self,
        model: Any,
        prompt_ids: list[int],
        params: SamplingParams,
        cancel: threading.Event,
        on_tokens: TokenSink | None = None,
    ) -> SampleResult:
        device = self.device
        limit = params.max_new_tokens
        if self.max_positions is not None:
            limit = min(limit, self.max_positions - len(prompt_ids))
        generator = None
        if not is_greedy(params.temperature):
            generator = torch.Generator(device=device)
            if params.seed is not None:
                generator.manual_seed(params.seed)
            else:
                generator.seed()
        stops = self.eos_token_ids | set(params.stop_token_ids)
        next_input = torch.tensor([prompt_ids], dtype=torch.long, device=device)
        past = None
        out_ids: list[int] = []
        out_lps: list[float] = []
        finish = "length"
        stop_hit = None
        t0 = time.perf_counter()
        prefill_s = 0.0
        for step in range(limit):
            if cancel.is_set():
                raise _Cancelled()
            kwargs = {self._cache_name: past, "use_cache": True, **self._keep_kw}
            out = model(input_ids=next_input, **kwargs)
            past = getattr(out, self._cache_name)
            token, logprob = sample_next(out.logits[:, -1, :].float(), params, generator)
            if step == 0:
                prefill_s = time.perf_counter() - t0
            tid = int(token.item())
            out_ids.append(tid)
            out_lps.append(float(logprob.item()))
            if on_tokens is not None:
                on_tokens([tid])
            if tid in stops:
                finish = "stop"
                break
            if params.stop:
                stop_hit = self._stop_string_hit(out_ids, params.stop)
                if stop_hit is not None:
                    finish = "stop"
                    break
            next_input = token.view(1, 1)
        info: dict[str, Any] = {
            "prompt_tokens": len(prompt_ids),
            "prefill_s": prefill_s,
            "decode_s": time.perf_counter() - t0 - prefill_s,
        }
        if stop_hit is not None:
            info["stop_string"] = stop_hit
        if finish == "length" and limit < params.max_new_tokens:
            info["context_limit"] = self.max_positions
        return SampleResult(output_ids=out_ids, logprobs=out_lps, finish_reason=finish, info=info)

    async def sample(
        self, prompt_ids: list[int], params: SamplingParams, *, on_tokens: TokenSink | None = None
    ) -> SampleResult:
        """Sample a continuation of ``prompt_ids`` on the worker thread (see the module docstring).

        ``on_tokens`` (optional) is called on the worker thread with each sampled token ID as a
        one-item list, as it is sampled. Cancelling the awaiting task stops the decoding loop at
        the next token.

        Raises:
            BackendError: empty prompt, token IDs outside the vocabulary, a prompt that fills the
                model's context (names both lengths), a torch failure, or a closed backend.
        """
        if self._executor is None:
            raise BackendError("the transformers backend is closed")
        prompt = [int(t) for t in prompt_ids]
        self._check(prompt, params)
        cancel = threading.Event()
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(
                self._executor, self._generate, prompt, params, cancel, on_tokens
            )
        except asyncio.CancelledError:
            cancel.set()
            raise

    def run_on_sampler_thread(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` on the generation thread and return its result (e.g. pin that thread
        to cores: ``backend.run_on_sampler_thread(os.sched_setaffinity, 0, {1})``).

        Raises:
            BackendError: the backend is closed.
        """
        if self._executor is None:
            raise BackendError("the transformers backend is closed")
        return self._executor.submit(fn, *args).result()

    async def aclose(self) -> None:
        """Stop the worker thread after the running generation; later calls raise BackendError."""
        executor, self._executor = self._executor, None
        if executor is not None:
            await asyncio.to_thread(executor.shutdown, wait=True, cancel_futures=True)
