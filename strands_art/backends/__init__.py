"""Sampling backends: token IDs in, token IDs + logprobs out (see :mod:`.base`).

``make_backend(kind, **options)`` builds one by name; each backend module is imported only when
asked for, so ``scripted`` does not pull in torch and ``vllm`` does not load a model.
"""

from __future__ import annotations

from typing import Any

from strands_art.backends.base import (
    BackendContextOverflow,
    BackendError,
    BackendTimeout,
    SampleResult,
    SamplingBackend,
    SamplingParams,
)

BACKEND_KINDS = ("transformers", "vllm", "llamacpp", "scripted")

__all__ = [
    "BACKEND_KINDS",
    "BackendContextOverflow",
    "BackendError",
    "BackendTimeout",
    "SampleResult",
    "SamplingBackend",
    "SamplingParams",
    "make_backend",
]


def make_backend(kind: str, **options: Any) -> SamplingBackend:
    """Build a sampling backend by name.

    Args:
        kind: ``"transformers"`` (:class:`~strands_art.backends.transformers.TransformersBackend`,
            options e.g. ``model_name_or_dir``, ``device``, ``dtype``, ``model``, ``tokenizer``),
            ``"vllm"`` (:class:`~strands_art.backends.vllm.VLLMBackend`, options e.g. ``base_url``,
            ``model``), ``"llamacpp"`` (:class:`~strands_art.backends.llamacpp.LlamaCppBackend`,
            options ``model``, ``context_tokens``, ``parallel``, ``threads``, ...) or ``"scripted"``
            (:class:`~strands_art.backends.scripted.ScriptedBackend`, options ``tokenizer``,
            ``outputs``, ``logprob``, ``delay``).
        **options: passed to the backend's constructor.

    Raises:
        ValueError: unknown ``kind``.
        TypeError: options the backend does not accept (from its constructor).
    """
    if kind == "transformers":
        from strands_art.backends.transformers import TransformersBackend

        return TransformersBackend(**options)
    if kind == "vllm":
        from strands_art.backends.vllm import VLLMBackend

        return VLLMBackend(**options)
    if kind == "llamacpp":
        from strands_art.backends.llamacpp import LlamaCppBackend

        return LlamaCppBackend(**options)
    if kind == "scripted":
        from strands_art.backends.scripted import ScriptedBackend

        return ScriptedBackend(**options)
    raise ValueError(f"unknown backend kind {kind!r}: use one of {', '.join(BACKEND_KINDS)}")
