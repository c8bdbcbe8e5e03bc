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
    BackendUnavailable,
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
    "BackendUnavailable",
    "SampleResult",
    "SamplingBackend",
    "SamplingParams",
    "local_backend",
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


def local_backend(
    model: str,
    kind: str | None = None,
    *,
    context_tokens: int = 8192,
    parallel: int = 1,
    threads: int | None = None,
) -> tuple[SamplingBackend, Any]:
    """An in-process backend for a model alias/dir and the tokenizer the gateway should use.

    Args:
        model: a model alias (``qwen2.5-coder-1.5b``, ``smollm2``, ...) or a local directory.
        kind: ``"llamacpp"`` or ``"transformers"``; default: the alias's preferred backend
            (:func:`strands_art.registry.preferred_backend`).
        context_tokens / parallel / threads: llama.cpp only (see
            :class:`~strands_art.backends.llamacpp.LlamaCppBackend`).

    Returns:
        ``(backend, tokenizer)``: the tokenizer object (transformers) or the alias (llama.cpp).

    Raises:
        ValueError: ``kind`` is not an in-process backend.
        ModelNotFound / BackendError: as the backend's constructor.
    """
    from strands_art.registry import preferred_backend

    kind = kind or preferred_backend(model)
    if kind == "llamacpp":
        from strands_art.backends.llamacpp import LlamaCppBackend

        return LlamaCppBackend(
            model, context_tokens=context_tokens, parallel=parallel, threads=threads
        ), model
    if kind == "transformers":
        from strands_art.backends.transformers import TransformersBackend

        backend = TransformersBackend(model)
        return backend, backend.tokenizer
    raise ValueError(f"{kind!r} is not an in-process backend: use llamacpp or transformers")
