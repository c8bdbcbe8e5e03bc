"""The sampling distribution (strands_art.backends.sampling): exact values, properties, and
agreement with transformers' own logits warpers (Temperature/TopK/TopP)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers.generation.logits_process import (
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from strands_art.backends.base import SamplingParams
from strands_art.backends.sampling import (
    filter_logits,
    sample_next,
    sampling_logprobs,
    token_logprobs,
    top_k_mask,
    top_p_mask,
)

NEG_INF = float("-inf")
PROBS = [0.5, 0.3, 0.15, 0.05]
LOGITS = torch.tensor([math.log(p) for p in PROBS])


def test_top_k_mask_exact():
    z = torch.tensor([[1.0, 3.0, 2.0, 0.0]])
    assert top_k_mask(z, 2).tolist() == [[True, False, False, True]]
    assert top_k_mask(z, 0).tolist() == [[False] * 4]  # disabled
    assert top_k_mask(z, 4).tolist() == [[False] * 4]  # k >= V keeps all
    assert top_k_mask(torch.tensor([2.0, 2.0, 1.0]), 1).tolist() == [False, False, True]  # ties kept


@pytest.mark.parametrize(
    ("p", "removed"),
    [
        (0.9, [False, False, False, True]),  # tail 0.05 <= 0.1
        (0.75, [False, False, True, True]),  # 0.05 + 0.15 = 0.2 <= 0.25, kept mass 0.8
        (0.4, [False, True, True, True]),  # only the top token (0.5) is needed
        (1.0, [False, False, False, False]),
    ],
)
def test_top_p_mask_exact(p, removed):
    assert top_p_mask(LOGITS, p).tolist() == removed


def test_sampling_logprobs_exact_values():
    lp = sampling_logprobs(LOGITS, SamplingParams(temperature=1.0, top_p=0.75))
    assert lp[:2].tolist() == pytest.approx([math.log(0.5 / 0.8), math.log(0.3 / 0.8)], abs=1e-6)
    assert lp[2:].tolist() == [NEG_INF, NEG_INF]
    # temperature 0.5 doubles the logits: [0, ln 2] -> probs [1/5, 4/5]
    lp = sampling_logprobs(torch.tensor([0.0, math.log(2.0)]), SamplingParams(temperature=0.5))
    assert lp.exp().tolist() == pytest.approx([0.2, 0.8], abs=1e-6)
    # top_k=2 then renormalize: [0.5, 0.3] / 0.8
    lp = sampling_logprobs(LOGITS, SamplingParams(temperature=1.0, top_k=2))
    assert lp.exp().tolist() == pytest.approx([0.625, 0.375, 0.0, 0.0], abs=1e-6)


def test_greedy_ignores_temperature_and_filters_like_vllm():
    lp = sampling_logprobs(LOGITS, SamplingParams(temperature=0.0, top_k=1, top_p=0.1))
    assert lp.exp().tolist() == pytest.approx(PROBS, abs=1e-6)
    ids, chosen = sample_next(LOGITS[None], SamplingParams(temperature=0.0))
    assert ids.tolist() == [0] and chosen.tolist() == pytest.approx([math.log(0.5)], abs=1e-6)


def test_token_logprobs_gathers_per_position():
    logits = torch.stack([LOGITS, LOGITS.flip(0)])  # [2, V]
    got = token_logprobs(logits, torch.tensor([1, 1]), SamplingParams(temperature=1.0))
    assert got.tolist() == pytest.approx([math.log(0.3), math.log(0.15)], abs=1e-6)


def test_gradient_flows_only_through_kept_tokens():
    z = LOGITS.clone().requires_grad_(True)
    lp = token_logprobs(z[None], torch.tensor([0]), SamplingParams(temperature=1.0, top_k=2))
    lp.sum().backward()
    # d/dz log softmax over kept {0,1}: [1 - 0.625, -0.375, 0, 0]
    assert z.grad.tolist() == pytest.approx([0.375, -0.375, 0.0, 0.0], abs=1e-6)


def test_sample_next_matches_distribution_and_seed():
    params = SamplingParams(temperature=1.0, top_p=0.75)
    batch = LOGITS.expand(20000, -1)
    ids, lps = sample_next(batch, params, torch.Generator().manual_seed(0))
    freq = torch.bincount(ids, minlength=4).float() / len(ids)
    assert freq.tolist() == pytest.approx([0.625, 0.375, 0.0, 0.0], abs=0.02)
    assert torch.equal(lps, sampling_logprobs(batch, params).gather(-1, ids[:, None]).squeeze(-1))
    again, _ = sample_next(batch, params, torch.Generator().manual_seed(0))
    assert torch.equal(ids, again)


def _hf_reference(z: torch.Tensor, t: float, k: int, p: float) -> torch.Tensor:
    z = TemperatureLogitsWarper(t)(None, z)
    if k > 0:
        z = TopKLogitsWarper(k)(None, z)
    if p < 1.0:
        z = TopPLogitsWarper(p)(None, z)
    return torch.log_softmax(z, dim=-1)


distinct_logits = st.lists(
    st.floats(-20, 20, allow_nan=False, width=32), min_size=2, max_size=40, unique=True
).map(lambda xs: torch.tensor([xs], dtype=torch.float32))
temps = st.floats(0.05, 3.0)
top_ps = st.floats(0.05, 1.0, exclude_min=True)


@settings(max_examples=200, deadline=None)
@given(z=distinct_logits, t=temps, k=st.integers(0, 45), p=top_ps)
def test_property_normalized_and_equal_to_transformers_warpers(z, t, k, p):
    params = SamplingParams(temperature=t, top_k=k, top_p=p)
    lp = sampling_logprobs(z, params)
    assert lp.exp().sum().item() == pytest.approx(1.0, abs=1e-5)
    ref = _hf_reference(z, t, k, p)
    assert torch.equal(torch.isneginf(lp), torch.isneginf(ref))
    kept = ~torch.isneginf(lp)
    assert torch.allclose(lp[kept], ref[kept], atol=1e-5)


@settings(max_examples=200, deadline=None)
@given(z=distinct_logits, k=st.integers(1, 45))
def test_property_top_k_keeps_exactly_k(z, k):
    kept = ~torch.isneginf(filter_logits(z, 1.0, top_k=k))
    assert kept.sum().item() == min(k, z.shape[-1])
    assert z[kept].min() >= z[~kept].max() if (~kept).any() else True


@settings(max_examples=200, deadline=None)
@given(z=distinct_logits, t=temps, p=top_ps)
def test_property_top_p_keeps_the_smallest_nucleus(z, t, p):
    probs = torch.softmax(z / t, dim=-1)
    kept = ~top_p_mask(z / t, p)
    mass = probs[kept].sum().item()
    assert mass >= p - 1e-5  # the nucleus reaches p ...
    assert mass - probs[kept].min().item() < p + 1e-5  # ... and no kept token is superfluous
    assert probs[kept].min() >= probs[~kept].max() if (~kept).any() else True
