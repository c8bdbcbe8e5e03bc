"""The real vLLM server the ``real_vllm`` fixture starts (see ``strands_art.backends.vllm_server``)."""

from __future__ import annotations

import os

import pytest

from strands_art.backends.vllm_server import VLLMServer, VLLMServerError, vllm_python
from strands_art.registry import smollm2_dir

SERVED_NAME = "smollm2"
MAX_LORA_RANK = 16


def required() -> bool:
    """True when a missing vLLM must fail rather than skip (CI sets STRANDS_ART_REQUIRE_VLLM=1)."""
    return os.environ.get("STRANDS_ART_REQUIRE_VLLM") == "1"


def skip_without_vllm() -> None:
    """Skip (or fail, as :func:`required` says) where no vLLM server can run: no vLLM environment,
    or ``STRANDS_ART_SKIP_VLLM=1``."""
    if os.environ.get("STRANDS_ART_SKIP_VLLM") == "1" and not required():
        pytest.skip("STRANDS_ART_SKIP_VLLM=1")
    if vllm_python() is None:
        msg = "no .venv-vllm (scripts/bootstrap-vllm.sh) and no STRANDS_ART_VLLM_PYTHON"
        if required():
            pytest.fail(msg)
        pytest.skip(msg)


def start_real_vllm() -> VLLMServer:
    """Start the shared server or skip/fail as :func:`required` says (``STRANDS_ART_SKIP_VLLM=1``
    skips)."""
    skip_without_vllm()
    server = VLLMServer(
        smollm2_dir(),
        SERVED_NAME,
        extra_args=["--enable-lora", "--max-lora-rank", str(MAX_LORA_RANK), "--max-loras", "2"],
        env={"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"},
    )
    try:
        return server.start()
    except VLLMServerError as exc:
        pytest.fail(str(exc))
