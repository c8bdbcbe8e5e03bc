"""PPO loss: exact values, and the same loss and gradient for 1 row or 3 tree-fork rows."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from strands_art.training.batching import BatchingConfig, BatchRow, build_batch, micro_batches
from strands_art.training.collate import collate
from strands_art.training.loss import (
    LossConfig,
    loss_denominator,
    merge_stats,
    policy_loss,
    token_logprobs,
)
from strands_art.trajectory import Row

# ---------------------------------------------------------------- exact values on hand tensors


def one_token(logp: float, old: float, rollout: float, adv: float, cfg: LossConfig, denom: float = 1.0):
    t = lambda x: torch.tensor([[0.0, x]], dtype=torch.float64)  # noqa: E731
    lp = t(logp).requires_grad_()
    out = policy_loss(lp, t(old), t(rollout), torch.tensor([adv]), torch.tensor([[0, 1]]), denom, cfg)
    return out, lp


def test_clipped_objective_exact():
    cfg = LossConfig(tis_cap=None)
    # ratio 1.5, A=+1: min(1.5, 1.2) -> loss -1.2, clipped, no gradient through the clipped term
    out, lp = one_token(math.log(1.5), 0.0, 0.0, 1.0, cfg)
    assert out.loss.item() == pytest.approx(-1.2)
    out.loss.backward()
    assert lp.grad[0, 1].item() == 0.0
    assert out.stats["clipped"] == 1.0
    # ratio 1.5, A=-1: max(1.5, 1.2) -> loss 1.5, unclipped; d/dlogp = A * ratio * -1 = 1.5
    out, lp = one_token(math.log(1.5), 0.0, 0.0, -1.0, cfg)
    assert out.loss.item() == pytest.approx(1.5)
    out.loss.backward()
    assert lp.grad[0, 1].item() == pytest.approx(1.5)
    assert out.stats["clipped"] == 0.0
    # ratio 0.5, A=-1: clip at 0.8 -> loss 0.8, clipped; denominator 4 -> 0.2
    out, _ = one_token(math.log(0.5), 0.0, 0.0, -1.0, cfg, denom=4)
    assert out.loss.item() == pytest.approx(0.2)
    # k3 KL at ratio 0.5: 0.5 - 1 - log(0.5)
    assert out.stats["kl"] == pytest.approx(0.5 - 1 - math.log(0.5))


def test_truncated_importance_sampling():
    cfg = LossConfig(tis_cap=2.0)
    # trainer old = log 3 above rollout -> weight min(3, 2) = 2; ratio 1 -> loss -A * 2
    out, _ = one_token(math.log(3), math.log(3), 0.0, 0.5, cfg)
    assert out.loss.item() == pytest.approx(-1.0)
    assert out.stats["tis_capped"] == 1.0
    assert out.stats["gap"] == pytest.approx(math.log(3))
    # weight below the cap: exp(log 1.5) = 1.5
    out, _ = one_token(0.0, math.log(1.5), 0.0, 1.0, cfg)
    # ratio = exp(-log 1.5) = 2/3 -> clipped to 0.8 for A>0? min(2/3, 0.8) = 2/3 -> -2/3 * 1.5
    assert out.loss.item() == pytest.approx(-1.0)
    assert out.stats["tis_capped"] == 0.0


def test_off_mask_values_never_reach_the_loss():
    """Context and left-out turns may hold anything (-inf recorded logprobs, logprobs far below
    exp's range, values a pass never computed): the loss, its gradient and every statistic are
    those of the masked tokens alone."""
    cfg = LossConfig(kl_coef=0.1)
    t = lambda *x: torch.tensor([x], dtype=torch.float32)  # noqa: E731
    lp = t(0.0, -200.0, math.log(1.5), float("-inf")).requires_grad_()
    old, rollout = t(5.0, -500.0, 0.0, 3.0), t(float("-inf"), float("-inf"), 0.0, float("nan"))
    ref = t(float("-inf"), 0.0, 0.0, 1.0)
    out = policy_loss(lp, old, rollout, torch.tensor([-1.0]), t(0, 0, 1, 0), 1.0, cfg, ref)
    clean = torch.tensor([[0.0, 0.0, math.log(1.5), 0.0]], requires_grad=True)
    zero = torch.zeros(1, 4)
    expected = policy_loss(clean, zero, zero, torch.tensor([-1.0]), t(0, 0, 1, 0), 1.0, cfg, zero)
    assert math.isfinite(out.loss.item()) and out.loss.item() == pytest.approx(expected.loss.item())
    out.loss.backward()
    expected.loss.backward()
    assert torch.equal(lp.grad, clean.grad) and lp.grad[0, 2].item() != 0.0
    assert out.stats == pytest.approx(expected.stats)


def test_kl_penalty_toward_the_reference_exact():
    cfg = LossConfig(tis_cap=None, kl_coef=0.1)
    t = lambda x: torch.tensor([[0.0, x]], dtype=torch.float64)  # noqa: E731
    mask = torch.tensor([[0, 1]])
    # current = old = log 0.5, reference = log 0.25, A = 0: only the KL term.
    # d = ref - logp = log 0.5; k3 = exp(d) - d - 1 = 0.5 - log 0.5 - 1; d k3/d logp = 1 - exp(d) = 0.5
    lp = t(math.log(0.5)).requires_grad_()
    out = policy_loss(
        lp, t(math.log(0.5)), t(math.log(0.5)), torch.tensor([0.0]), mask, 2.0, cfg, t(math.log(0.25))
    )
    k3 = 0.5 - math.log(0.5) - 1
    assert out.loss.item() == pytest.approx(0.1 * k3 / 2)
    assert out.stats["ref_kl"] == pytest.approx(k3)
    out.loss.backward()
    assert lp.grad[0, 1].item() == pytest.approx(0.1 * 0.5 / 2)  # positive: lowers logp toward ref
    # at the reference the term and its gradient vanish; with A the PPO part is unchanged
    lp = t(0.0).requires_grad_()
    out = policy_loss(lp, t(0.0), t(0.0), torch.tensor([1.0]), mask, 1.0, cfg, t(0.0))
    assert out.loss.item() == pytest.approx(-1.0) and out.stats["ref_kl"] == 0.0
    # kl_coef 0: the reference is only measured, the loss is the plain PPO loss
    out = policy_loss(t(0.0), t(0.0), t(0.0), torch.tensor([1.0]), mask, 1.0, LossConfig(), t(math.log(0.5)))
    assert out.loss.item() == pytest.approx(-1.0)
    assert merge_stats([out.stats])["kl_ref"] == pytest.approx(0.5 - math.log(0.5) - 1)
    # a filtered reference token (-inf) gives a bounded term, not inf / nan
    out = policy_loss(t(0.0), t(0.0), t(0.0), torch.tensor([0.0]), mask, 1.0, cfg, t(-math.inf))
    assert math.isfinite(out.loss.item()) and out.stats["ref_kl"] <= 10.0
    with pytest.raises(ValueError, match="kl_coef > 0 needs ref_logprobs"):
        policy_loss(t(0.0), t(0.0), t(0.0), torch.tensor([0.0]), mask, 1.0, cfg)
    for bad in (-0.1, math.inf, math.nan):  # inf: inf * a zero KL term would make the loss nan
        with pytest.raises(ValueError, match="kl_coef must be finite and >= 0"):
            LossConfig(kl_coef=bad)
    for bad in (True, "0.1", None):  # True would silently mean 1.0
        with pytest.raises(ValueError, match="kl_coef must be a real number"):
            LossConfig(kl_coef=bad)
    numpy_coef = LossConfig(kl_coef=np.float32(0.5)).kl_coef  # a numpy scalar becomes a float
    assert type(numpy_coef) is float and numpy_coef == 0.5


def test_kl_term_reads_kl_logprobs_when_given():
    """``kl_logprobs`` (the current policy on the reference's distribution) replaces ``logprobs``
    in the KL term only, and carries its gradient; the PPO part still uses ``logprobs``."""
    cfg = LossConfig(tis_cap=None, kl_coef=0.1)
    t = lambda x: torch.tensor([[0.0, x]], dtype=torch.float64)  # noqa: E731
    mask = torch.tensor([[0, 1]])
    lp = t(math.log(0.5)).requires_grad_()
    kl_lp = t(math.log(0.5)).requires_grad_()
    ref = t(math.log(0.25))
    out = policy_loss(lp, t(math.log(0.5)), t(math.log(0.5)), torch.tensor([1.0]), mask, 1.0, cfg, ref, kl_lp)
    k3 = 0.5 - math.log(0.5) - 1
    assert out.loss.item() == pytest.approx(-1.0 + 0.1 * k3) and out.stats["ref_kl"] == pytest.approx(k3)
    out.loss.backward()
    assert lp.grad[0, 1].item() == pytest.approx(-1.0)  # the PPO term only
    assert kl_lp.grad[0, 1].item() == pytest.approx(0.1 * 0.5)  # the KL term only
    with pytest.raises(ValueError, match="shape mismatch: kl"):
        policy_loss(t(0.0), t(0.0), t(0.0), torch.tensor([0.0]), mask, 1.0, cfg, t(0.0), torch.zeros(1, 3))


def test_shape_and_config_errors():
    z = torch.zeros(1, 3)
    with pytest.raises(ValueError, match="shape mismatch"):
        policy_loss(z, torch.zeros(1, 2), z, torch.zeros(1), z, 1, LossConfig())
    with pytest.raises(ValueError, match="denominator must be positive"):
        policy_loss(z, z, z, torch.zeros(1), z, 0, LossConfig())
    with pytest.raises(ValueError, match="loss_agg_mode must be one of"):
        LossConfig(loss_agg_mode="seq-mean-token-mean")  # type: ignore[arg-type]


def test_token_logprobs_alignment():
    logits = torch.log(torch.tensor([[[0.5, 0.5], [0.25, 0.75], [1.0, 1.0]]]))
    lp = token_logprobs(logits, torch.tensor([[0, 1, 0]]))
    assert lp.tolist()[0] == pytest.approx([0.0, math.log(0.5), math.log(0.25)])


# ---------------------------------------------------------------- 1 row vs 3 rows on a real causal LM

# rollout "a": prompt, out1, tool result, out2, tool result, out3; rollout "b": prompt, out1
A_SEGMENTS = [([5, 6, 7], 0), ([8, 9], 1), ([10, 11], 0), ([12], 1), ([13], 0), ([14, 15, 16], 1)]
B_SEGMENTS = [([20, 21], 0), ([22, 23, 24], 1)]
OFFSETS = [0.5, -0.1, 0.3, -0.4, 0.05, 0.25, -0.3, 0.15, 0.0]  # rollout logprob = model logprob + offset


@pytest.fixture(scope="module")
def model():
    """A tiny random GPT-2 in float64. (Llama's RMSNorm computes in float32 even for a float64
    model, which makes float32-level differences in the summed context gradients.)"""
    torch.manual_seed(0)
    cfg = GPT2Config(
        vocab_size=32, n_positions=64, n_embd=16, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0
    )
    return GPT2LMHeadModel(cfg).double().eval()


def trainer_logprobs(model, ids: list[int]) -> list[float]:
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits
    return token_logprobs(logits, torch.tensor([ids]))[0].tolist()


def flat(segments):
    ids, mask = [], []
    for toks, m in segments:
        ids += toks
        mask += [m] * len(toks)
    return ids, mask


def rollout_rows(model, rid: str, segments, adv: float, split: bool, offsets: list[float]) -> list[BatchRow]:
    """The rollout as one row, or as one row per output (tree forks repeating context as mask 0)."""
    ids, mask = flat(segments)
    true_lp = trainer_logprobs(model, ids)
    sampled = [i for i, m in enumerate(mask) if m]
    recorded = [0.0] * len(ids)
    for k, i in enumerate(sampled):
        recorded[i] = true_lp[i] + offsets[k]
    if not split:
        return [BatchRow(Row(ids, mask, recorded, rollout_id=rid, group_id="g"), advantage=adv)]
    rows, end = [], 0
    for toks, m in segments:
        start, end = end, end + len(toks)
        if m:
            row_mask = [0] * start + [1] * len(toks)
            row_lp = [0.0] * start + recorded[start:end]
            rows.append(
                BatchRow(Row(ids[:end], row_mask, row_lp, rollout_id=rid, group_id="g"), advantage=adv)
            )
    return rows


def mini_batch_loss_and_grad(model, rows, loss_cfg: LossConfig, recompute: bool, max_tokens: int):
    batch = build_batch(rows, BatchingConfig(1, 1, micro_batch_max_tokens=max_tokens))
    (mb,) = batch.mini_batches
    denom = loss_denominator(mb, loss_cfg.loss_agg_mode)
    model.zero_grad()
    total, stats = 0.0, []
    for micro in micro_batches(mb.shards[0], max_tokens):
        t = collate(micro)
        logits = model(input_ids=t["input_ids"], attention_mask=t["attention_mask"]).logits
        lp = token_logprobs(logits, t["input_ids"])
        rollout_lp = t["rollout_logprobs"].double()
        old = lp.detach() if recompute else rollout_lp
        out = policy_loss(lp, old, rollout_lp, t["advantages"], t["loss_mask"], denom, loss_cfg)
        out.loss.backward()
        total += out.loss.item()
        stats.append(out.stats)
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    return total, grads, merge_stats(stats), denom, len(batch.metrics) and batch.metrics["micro_batches"]


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum"])
@pytest.mark.parametrize("recompute", [False, True])
def test_one_row_or_three_rows_same_loss_and_gradient(model, mode, recompute):
    cfg = LossConfig(loss_agg_mode=mode, tis_cap=1.2)
    layouts = {}
    for split in (False, True):
        rows = rollout_rows(model, "a", A_SEGMENTS, 1.3, split, OFFSETS[:6]) + rollout_rows(
            model, "b", B_SEGMENTS, -0.7, split, OFFSETS[6:]
        )
        layouts[split] = (rows, mini_batch_loss_and_grad(model, rows, cfg, recompute, max_tokens=24))
    (rows1, (loss1, g1, s1, d1, m1)), (rows3, (loss3, g3, s3, d3, m3)) = layouts[False], layouts[True]
    assert len(rows1) == 2 and len(rows3) == 4  # rollout "a": 1 row vs 3 rows
    assert m3 > m1 >= 1  # more micro-batches with more rows, still one step
    assert d1 == d3 == (9 if mode == "token-mean" else 2)
    assert loss1 != 0.0
    assert loss3 == pytest.approx(loss1, rel=1e-10, abs=1e-12)
    for name in g1:
        torch.testing.assert_close(g3[name], g1[name], rtol=1e-9, atol=1e-12)
    assert any(g.abs().sum() > 0 for g in g1.values())
    for key in ("clip_fraction", "approx_kl", "logprob_gap", "tis_capped_fraction"):
        assert s3[key] == pytest.approx(s1[key], rel=1e-9, abs=1e-12)
    # the offsets make some tokens clip (|offset| > log 1.2) when old = rollout
    if not recompute:
        assert 0 < s1["clip_fraction"] < 1
        assert s1["logprob_gap"] == pytest.approx(-sum(OFFSETS) / 9)


def test_padding_rows_change_nothing(model):
    cfg = LossConfig()
    rows = rollout_rows(model, "a", A_SEGMENTS, 1.3, True, OFFSETS[:6])
    loss, grads, stats, denom, _ = mini_batch_loss_and_grad(model, rows, cfg, False, 10_000)
    # dp=2 with 3 rows pads one row; run rank shards one after the other (what dp all-reduce sums)
    batch = build_batch(rows, BatchingConfig(1, 1, dp_size=2))
    assert batch.plan.padding_rows == 1
    (mb,) = batch.mini_batches
    assert loss_denominator(mb, "token-mean") == denom
    model.zero_grad()
    total, all_stats = 0.0, []
    for shard in mb.shards:
        t = collate(shard)
        lp = token_logprobs(
            model(input_ids=t["input_ids"], attention_mask=t["attention_mask"]).logits, t["input_ids"]
        )
        rl = t["rollout_logprobs"].double()
        out = policy_loss(lp, rl, rl, t["advantages"], t["loss_mask"], denom, cfg)
        out.loss.backward()
        total += out.loss.item()
        all_stats.append(out.stats)
    assert total == pytest.approx(loss, rel=1e-10)
    assert merge_stats(all_stats) == pytest.approx(stats)
    for n, p in model.named_parameters():
        torch.testing.assert_close(p.grad, grads[n], rtol=1e-9, atol=1e-12)
