"""A scripted sampling backend: pre-written completions, tokenized with the real tokenizer.

For tests, demos and ``strands-art replay``: each :meth:`ScriptedBackend.sample` call returns the
next item of a script (or asks a callable for one) instead of running a model. Token IDs come
from the real tokenizer, so everything downstream (capture, parsing, rows) sees what a real
backend would produce.

Script items (dicts):

- ``{"text": "raw text incl. special tokens"}``: encoded without adding special tokens (no BOS);
  special tokens written in the text, e.g. ``<|im_end|>``, map to their single IDs.
- ``{"token_ids": [...]}``: used as given (checked against the vocabulary size).
- optional ``"logprobs": [...]`` (one float per token; ``None`` means "use the default"),
- optional ``"finish_reason": "stop" | "length"``,
- ``{"error": "message"}``: the call raises :class:`BackendError` with that message (to test
  failure paths).

Defaults: each token's logprob is the constant ``logprob`` given to the constructor (-0.5).
The finish reason, unless given, is ``"stop"`` when the last token is one of the request's
``stop_token_ids`` or the tokenizer's EOS token, else ``"length"``. If the item is longer than
``params.max_new_tokens`` it is truncated to that many tokens (and logprobs) and the finish reason
becomes ``"length"``. Stop tokens and stop strings inside an item do not truncate it: the script
is played back exactly (it records what some real backend sampled).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from strands_art.backends.base import BackendError, SampleResult, SamplingParams, TokenSink

logger = logging.getLogger(__name__)

ScriptItem = dict[str, Any]
ScriptFn = Callable[[list[int], SamplingParams, int], ScriptItem]


def _encode(tokenizer: Any, text: str) -> list[int]:
    """Token IDs of ``text`` without added special tokens, for a transformers or tokenizers object."""
    enc = tokenizer.encode(text, add_special_tokens=False)
    return list(getattr(enc, "ids", enc))


def _vocab_size(tokenizer: Any) -> int:
    if hasattr(tokenizer, "get_vocab_size"):  # tokenizers.Tokenizer
        return int(tokenizer.get_vocab_size(with_added_tokens=True))
    return len(tokenizer)


class ScriptedBackend:
    """A :class:`~strands_art.backends.base.SamplingBackend` that plays back a script.

    Args:
        tokenizer: the real tokenizer (transformers fast tokenizer or ``tokenizers.Tokenizer``).
        outputs: a list of script items (see the module docstring), consumed one per call in
            order, or a callable ``(prompt_ids, params, call_index) -> item`` for dynamic scripts.
        logprob: the constant natural-log probability used when an item gives none.
        delay: seconds each call takes (``asyncio.sleep``), to simulate latency. With an
            ``on_tokens`` sink the delay is spread evenly over the tokens and each token is
            streamed after its share (a model producing tokens one by one); without one the call
            sleeps the whole delay, then answers. Cancelling the call stops it at once.

    Attributes:
        prompts: every prompt received, in call order (also for calls that then failed).
        params: the :class:`SamplingParams` of every call, aligned with ``prompts``.
        calls: number of calls so far.

    Raises (from :meth:`sample`):
        BackendError: the script is exhausted, an item is malformed (no ``text``/``token_ids``,
            logprob count mismatch, token ID outside the vocabulary) or is an ``error`` item.
    """

    name = "scripted"
    streams_tokens = True

    def __init__(
        self,
        tokenizer: Any,
        outputs: Sequence[ScriptItem] | ScriptFn,
        *,
        logprob: float = -0.5,
        delay: float = 0.0,
    ) -> None:
        self.tokenizer = tokenizer
        self._script: ScriptFn | list[ScriptItem] = outputs if callable(outputs) else list(outputs)
        self.logprob = float(logprob)
        self.delay = float(delay)
        self.prompts: list[list[int]] = []
        self.params: list[SamplingParams] = []
        self.calls = 0
        self._vocab = _vocab_size(tokenizer)
        eos = getattr(tokenizer, "eos_token_id", None)
        self._eos: set[int] = {eos} if isinstance(eos, int) else set()

    def _next_item(self, prompt_ids: list[int], params: SamplingParams, index: int) -> ScriptItem:
        if callable(self._script):
            item = self._script(prompt_ids, params, index)
        elif index < len(self._script):
            item = self._script[index]
        else:
            raise BackendError(
                f"scripted backend exhausted: call {index + 1} but the script has {len(self._script)} item(s)"
            )
        if not isinstance(item, dict):
            raise BackendError(f"script item {index} must be a dict, got {type(item).__name__}")
        return item

    def _resolve(self, item: ScriptItem, params: SamplingParams, index: int) -> SampleResult:
        if "error" in item:
            raise BackendError(str(item["error"]))
        if item.get("token_ids") is not None:
            ids = [int(t) for t in item["token_ids"]]
        elif item.get("text") is not None:
            ids = _encode(self.tokenizer, str(item["text"]))
        else:
            raise BackendError(f"script item {index} has neither 'text' nor 'token_ids': {sorted(item)}")
        bad = [t for t in ids if not 0 <= t < self._vocab]
        if bad:
            raise BackendError(
                f"script item {index}: token IDs {bad[:5]} outside the vocabulary (size {self._vocab})"
            )
        lps = item.get("logprobs")
        logprobs = [self.logprob] * len(ids) if lps is None else [float(x) for x in lps]
        if len(logprobs) != len(ids):
            raise BackendError(f"script item {index}: {len(ids)} tokens but {len(logprobs)} logprobs")
        finish = item.get("finish_reason")
        if len(ids) > params.max_new_tokens:
            ids, logprobs, finish = ids[: params.max_new_tokens], logprobs[: params.max_new_tokens], "length"
        if finish is None:
            stops = self._eos | set(params.stop_token_ids)
            finish = "stop" if ids and ids[-1] in stops else "length"
        return SampleResult(output_ids=ids, logprobs=logprobs, finish_reason=finish, info={"call": index})

    async def sample(
        self, prompt_ids: list[int], params: SamplingParams, *, on_tokens: TokenSink | None = None
    ) -> SampleResult:
        """Return the next scripted completion for ``prompt_ids`` (see the class docstring);
        ``on_tokens`` gets its token IDs one at a time, paced by ``delay``."""
        index = self.calls
        self.calls += 1
        self.prompts.append(list(prompt_ids))
        self.params.append(params)
        if self.delay and on_tokens is None:
            await asyncio.sleep(self.delay)
        item = self._next_item(list(prompt_ids), params, index)
        result = self._resolve(item, params, index)
        if on_tokens is not None:
            step = self.delay / max(1, len(result.output_ids))
            for token in result.output_ids:
                if step:
                    await asyncio.sleep(step)
                on_tokens([token])
        logger.debug(
            "scripted call %d: %d prompt -> %d output tokens", index, len(prompt_ids), len(result.output_ids)
        )
        return result

    async def aclose(self) -> None:
        """Nothing to release."""
