"""Property: check_sample accepts a sample exactly when every ID is an int in [0, vocab), every
logprob a number in [-FLOAT32_MAX, 0] (finite as the float32 the store keeps), and there are at most
max_new_tokens tokens."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strands_art.backends.base import FLOAT32_MAX, InvalidSample, SampleResult, check_sample

VOCAB = 1000
ids_st = st.lists(
    st.one_of(st.integers(-5, VOCAB + 5), st.integers(2**31 - 2, 2**33), st.booleans()), max_size=12
)
lp_st = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([-FLOAT32_MAX, -FLOAT32_MAX * (1 + 2**-52), -1e300]),
    st.integers(-3, 3),
    st.booleans(),
)


@given(ids_st, st.data(), st.integers(1, 12))
def test_check_sample_accepts_exactly_the_valid_samples(ids, data, max_new_tokens) -> None:
    lps = data.draw(st.lists(lp_st, min_size=len(ids), max_size=len(ids)))
    valid = (
        len(ids) <= max_new_tokens
        and all(not isinstance(t, bool) and 0 <= t < VOCAB for t in ids)
        and all(not isinstance(x, bool) and math.isfinite(x) and -FLOAT32_MAX <= x <= 0 for x in lps)
    )
    sample = SampleResult(ids, lps, "stop")
    if valid:
        check_sample(sample, VOCAB, max_new_tokens)
    else:
        with pytest.raises(InvalidSample):
            check_sample(sample, VOCAB, max_new_tokens)
