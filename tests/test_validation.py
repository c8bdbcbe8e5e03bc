"""One integer/real check for the package (issue 26 item 5): ``is_int`` / ``is_real`` accept
Python and numpy numbers and refuse ``bool``; ``check_int`` / ``check_float`` build on them and
keep their messages; configs that take numpy numbers store plain Python numbers (JSON)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from strands_art.backends.base import SamplingParams
from strands_art.training.batching import BatchingConfig
from strands_art.validation import UsageError, check_float, check_int, is_int, is_real

NUMPY_INTS = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32)
NUMPY_FLOATS = (np.float16, np.float32, np.float64)


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1), st.sampled_from(NUMPY_INTS))
def test_integers_of_every_kind_are_ints_and_reals(n, kind):
    assert is_int(n) and is_real(n)
    info = np.iinfo(kind)
    if info.min <= n <= info.max:
        assert is_int(kind(n)) and is_real(kind(n))


@given(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(NUMPY_FLOATS))
def test_floats_are_reals_not_ints_and_finite_only_when_finite(x, kind):
    assert not is_int(x)
    assert is_real(x) == math.isfinite(x)
    assert is_real(x, finite=False)
    with np.errstate(over="ignore"):
        y = kind(x)
    assert not is_int(y) and is_real(y) == bool(np.isfinite(y)) and is_real(y, finite=False)


@pytest.mark.parametrize("value", [True, False, np.bool_(True), "3", None, [1], 1j])
def test_bools_and_non_numbers_are_neither(value):
    assert not is_int(value) and not is_real(value) and not is_real(value, finite=False)


@given(st.integers(min_value=0, max_value=100), st.sampled_from(NUMPY_INTS))
def test_check_int_returns_a_python_int(n, kind):
    got = check_int("--n", kind(n), 0, 100)
    assert type(got) is int and got == n


def test_check_messages_are_unchanged():
    with pytest.raises(UsageError, match=r"^--n must be an integer from 1 to 1,000, got True$"):
        check_int("--n", True, 1, 1000)
    with pytest.raises(UsageError, match=r"^--n must be an integer from 1 to 1,000, got 2.0$"):
        check_int("--n", 2.0, 1, 1000)
    with pytest.raises(UsageError, match=r"^--t must be a finite number in \(0, 1\], got nan$"):
        check_float("--t", float("nan"), 0.0, 1.0, lo_open=True)
    with pytest.raises(UsageError, match=r"got False$"):
        check_float("--t", False, 0.0, 1.0)
    assert check_float("--t", np.float32(0.5), 0.0, 1.0) == 0.5


def test_configs_store_python_numbers_from_numpy_and_refuse_bools():
    cfg = BatchingConfig(
        prompt_batch_size=np.int64(4), ppo_mini_batch_size=np.int32(2), rows_per_mini_batch=None
    )
    assert type(cfg.prompt_batch_size) is int and type(cfg.ppo_mini_batch_size) is int
    json.dumps(cfg.__dict__)
    with pytest.raises(ValueError, match="ppo_epochs must be a positive integer"):
        BatchingConfig(prompt_batch_size=4, ppo_mini_batch_size=2, ppo_epochs=True)
    params = SamplingParams(top_k=np.int64(5), temperature=np.float32(0.5))
    assert params.top_k == 5
    with pytest.raises(TypeError, match="top_k must be an integer, got bool True"):
        SamplingParams(top_k=True)


def test_migrate_and_serve_share_the_sampling_flags_with_their_own_defaults():
    """``add_sampling_args`` defines the four sampling flags of both commands (one definition,
    each command's defaults); ``check_sampling_args`` refuses the same values from either."""
    from strands_art.cli import build_parser
    from strands_art.serve.cli import validate_serve_args

    parser = build_parser()
    migrate = parser.parse_args(["migrate"])
    serve = parser.parse_args(["serve"])
    flags = ("temperature", "top_p", "max_new_tokens", "max_context_tokens")
    assert [getattr(migrate, f) for f in flags] == [0.7, 0.95, 512, None]
    assert [getattr(serve, f) for f in flags] == [1.0, 1.0, 512, None]
    bad = parser.parse_args(["serve", "--top-p", "0"])
    with pytest.raises(UsageError, match=r"--top-p must be a finite number in \(0, 1\], got 0.0"):
        validate_serve_args(bad)


@pytest.mark.parametrize(
    ("backend", "url", "message"),
    [
        ("vllm", None, "--backend vllm needs --base-url"),
        ("vllm", "", "--backend vllm needs --base-url"),
        ("llamacpp", "ftp://host", "--base-url"),
        ("vllm", "http://", "--base-url"),
    ],
)
def test_backend_url_is_checked_alike_for_migrate_and_serve(backend, url, message):
    from strands_art.cli import build_parser
    from strands_art.envs.migrationbench.run.runner_args import resolve_defaults, validate_migrate_args
    from strands_art.serve.cli import validate_serve_args
    from strands_art.validation import check_backend_url

    with pytest.raises(UsageError, match=message):
        check_backend_url(backend, url)
    extra = ["--base-url", url] if url is not None else []
    for command, validate in (("migrate", validate_migrate_args), ("serve", validate_serve_args)):
        args = build_parser().parse_args([command, "--backend", backend, *extra])
        if command == "migrate":
            resolve_defaults(args)
        with pytest.raises(UsageError, match=message):
            validate(args)
    check_backend_url("vllm", "http://127.0.0.1:8000")
    check_backend_url("llamacpp", None)
