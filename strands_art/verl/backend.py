"""verl's rollout servers as a :class:`~strands_art.backends.base.SamplingBackend`.

Inside a verl agent loop the model is reached through ``AgentLoopBase.server_manager``, a
``LLMServerClient`` (verl 0.9.1: ``verl/workers/rollout/llm_server.py``; it replaced
``AsyncLLMServerManager``) whose token-in-token-out call is::

    await server_manager.generate(request_id, *, prompt_ids: list[int], sampling_params: dict,
                                  image_data=None, video_data=None, audio_data=None,
                                  mm_processor_kwargs=None, **kwargs) -> TokenOutput

``TokenOutput`` (``verl/workers/rollout/replica.py``) has ``token_ids``, ``log_probs`` (None
unless ``sampling_params["logprobs"]`` is true), ``stop_reason`` (``"completed"`` for vLLM's
``stop`` and ``length`` alike, ``"aborted"``, or None) and ``extra_fields`` (``global_steps``,
``min_global_steps``, ``max_global_steps``: the weight version that sampled). The request id is
sticky: every turn of one rollout goes to the same server (prefix cache).

``sampling_params`` becomes ``vllm.SamplingParams(max_tokens=..., **sampling_params)`` in
``vLLMHttpServer.generate`` (``verl/workers/rollout/vllm_rollout/vllm_async_server.py``), which
turns ``logprobs=True`` into vLLM ``logprobs=0`` (the sampled token's logprob only) and reads
``max_tokens``. The logprobs are vLLM's ``--logprobs-mode`` of the rollout config
(``actor_rollout_ref.rollout.logprobs_mode``, default ``processed_logprobs``: after temperature,
top-k and top-p, i.e. what our trainer computes; see docs/setup-vllm.md).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from strands_art.backends.base import BackendError, BackendUnavailable, SampleResult, SamplingParams
from strands_art.backends.vllm import format_request

logger = logging.getLogger(__name__)


class TokenServer(Protocol):
    """What :class:`VerlServerBackend` needs of verl's ``LLMServerClient``."""

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs: Any
    ) -> Any: ...


_VLLM_KEYS = (
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
    "stop",
    "stop_token_ids",
    "include_stop_str_in_output",
    "seed",
)


def to_vllm_sampling_params(params: SamplingParams) -> dict[str, Any]:
    """Our :class:`SamplingParams` as the dict verl's server passes to ``vllm.SamplingParams``.

    The same knobs as the HTTP backend sends (:func:`strands_art.backends.vllm.format_request`):
    every one explicit (vLLM would otherwise fill unset ones from the model's
    ``generation_config.json``), ``top_k == 0`` (disabled) as ``-1``, stop strings kept in the
    output; plus ``logprobs=True`` (verl asks vLLM for the sampled token's logprob).
    """
    body = format_request("verl", [0], params)
    out = {k: body[k] for k in _VLLM_KEYS if k in body}
    out["logprobs"] = True
    return out


def from_verl_sampling_params(verl_params: dict[str, Any], max_new_tokens: int) -> SamplingParams:
    """The trainer's sampling dict that verl hands to ``AgentLoopBase.run`` as our SamplingParams.

    verl builds it in ``AgentLoopWorker.generate_sequences`` from ``actor_rollout_ref.rollout``:
    ``temperature``, ``top_p``, ``top_k`` (-1 = off), ``repetition_penalty``, ``logprobs``
    (= ``calculate_log_probs``).

    Raises:
        ValueError: ``logprobs`` is false (set ``actor_rollout_ref.rollout.calculate_log_probs=True``:
            rows need the sampling logprobs) or ``repetition_penalty != 1`` (it changes the sampling
            distribution, which our trainer does not reproduce).
    """
    if not verl_params.get("logprobs"):
        raise ValueError(
            "verl rollout gives no logprobs: set actor_rollout_ref.rollout.calculate_log_probs=True"
        )
    penalty = float(verl_params.get("repetition_penalty", 1.0))
    if penalty != 1.0:
        raise ValueError(f"repetition_penalty={penalty} is not supported (the trainer assumes 1.0)")
    top_k = int(verl_params.get("top_k", -1))
    return SamplingParams(
        temperature=float(verl_params.get("temperature", 1.0)),
        top_p=float(verl_params.get("top_p", 1.0)),
        top_k=max(top_k, 0),
        max_new_tokens=max_new_tokens,
    )


class VerlServerBackend:
    """A :class:`~strands_art.backends.base.SamplingBackend` over verl's ``server_manager``.

    Args:
        server: verl's ``LLMServerClient`` (``AgentLoopBase.server_manager``) or anything with its
            ``generate`` signature.
        request_id: the sticky-session id, one per rollout (all turns hit the same server).

    Attributes:
        global_steps: the ``global_steps`` (weight versions) of every answer, in call order
            (None where the server gave none).

    ``finish_reason``: verl reports vLLM's ``stop`` and ``length`` both as ``"completed"``, so it
    is rebuilt: ``"stop"`` when the last token is one of ``params.stop_token_ids`` or fewer than
    ``max_new_tokens`` tokens came back (a stop string ended it), else ``"length"``.

    Raises (from :meth:`sample`):
        BackendError: the server raised (e.g. prompt longer than ``max_model_len``), aborted the
            request (``stop_reason == "aborted"``), returned no logprobs, or token IDs and
            logprobs of different lengths.
    """

    name = "verl"

    def __init__(self, server: TokenServer, request_id: str) -> None:
        self.server = server
        self.request_id = request_id
        self.global_steps: list[int | None] = []

    async def sample(self, prompt_ids: list[int], params: SamplingParams) -> SampleResult:
        """One generation on verl's rollout server (see the class docstring)."""
        try:
            out = await self.server.generate(
                self.request_id, prompt_ids=list(prompt_ids), sampling_params=to_vllm_sampling_params(params)
            )
        except Exception as exc:  # Ray / server errors arrive as many types
            raise BackendError(f"verl rollout server failed for request {self.request_id}: {exc}") from exc
        if out.stop_reason == "aborted":
            # verl aborts in-flight requests while it syncs weights: retryable (ModelThrottledException)
            raise BackendUnavailable(f"verl rollout server aborted request {self.request_id}")
        ids = [int(t) for t in out.token_ids]
        if out.log_probs is None:
            raise BackendError("verl rollout server returned no logprobs (sampling_params logprobs=True)")
        if ids and ids[-1] in params.stop_token_ids or len(ids) < params.max_new_tokens:
            finish = "stop"
        else:
            finish = "length"
        extra = dict(out.extra_fields or {})
        self.global_steps.append(extra.get("global_steps"))
        info = {"request_id": self.request_id, "global_steps": extra.get("global_steps")}
        return SampleResult(ids, [float(x) for x in out.log_probs], finish, info)

    async def aclose(self) -> None:
        """Nothing to release: verl owns the servers."""
