"""PPO clipped policy loss with a row-count-independent normalization.

Per sampled token ``t`` (loss mask 1) with advantage ``A`` (its rollout's), current logprob
``logp``, behaviour logprob ``old`` and the rollout engine's recorded logprob ``rollout``:

    ratio   = exp(logp - old)
    pg_t    = max(-A * ratio, -A * clip(ratio, 1 - eps_low, 1 + eps_high))     (Schulman et al. 2017)
    w_t     = min(exp(old - rollout), tis_cap)    (truncated importance sampling, detached;
                                                   Yao et al. 2025, "off-policy RL training")
    kl_t    = exp(ref - logp) - (ref - logp) - 1      (k3 estimator of KL(current || reference),
                                                   Schulman 2020; verl's "low_var_kl"; clamped to 10)
    loss    = sum_t mask_t * (w_t * pg_t + beta * kl_t) / D

``old`` is the recorded rollout logprob by default (then ``w_t = 1``); a trainer that recomputes
old logprobs with its own forward pass passes them as ``old`` and keeps the recorded ones as
``rollout`` so that ``w_t`` corrects the rollout/trainer mismatch.

``ref`` is the reference policy's logprob (the base model: the LoRA adapter disabled) and
``beta`` is ``kl_coef`` (default 0: no KL term, ``ref`` not needed). The KL term pulls every
sampled token, whatever its advantage, back toward the reference policy (the GRPO objective
of Shao et al. 2024, beta 0.04 there), so a group whose rewards are all equal still has a
gradient: toward the base model. In ``kl_t`` both logprobs may come from a distribution other
than the sampling one (``kl_logprobs``): the trainer uses the temperature-scaled distribution
without top-k / top-p, where the reference gives no token ``-inf``. A token whose ``kl_t`` is
clamped (above 10: ``ref - logp`` above about 2.6 or below about -11 nats) gets no gradient from
the term, as in verl.

The denominator ``D`` is fixed per mini-batch and never depends on how rollouts were cut into
rows, so the row losses are additive and a rollout gives the same gradient as one row or as
several tree-fork rows (which repeat earlier tokens only as mask-0 context):

- ``seq-mean-token-sum``: ``D`` = rollouts in the mini-batch (or a constant such as
  ``ppo_mini_batch_size * rollouts_per_prompt``, Dr.GRPO style); a rollout's token losses are
  summed over all its rows.
- ``token-mean``: ``D`` = sampled (mask-1) tokens in the whole mini-batch, over every
  micro-batch and rank. Splitting a rollout into more rows adds only mask-0 tokens, so ``D``
  does not change.

Each micro-batch's loss is divided by the mini-batch ``D`` (not its own), so summing micro-batch
gradients (gradient accumulation) gives exactly the mini-batch gradient.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import torch

from strands_art.training.batching import MiniBatch
from strands_art.validation import is_real

LossAggMode = Literal["seq-mean-token-sum", "token-mean"]
LOSS_AGG_MODES: tuple[str, ...] = ("seq-mean-token-sum", "token-mean")


@dataclass(frozen=True)
class LossConfig:
    """PPO loss settings.

    Attributes:
        clip_ratio_low / clip_ratio_high: ``eps_low`` / ``eps_high`` of the clipped ratio.
        loss_agg_mode: ``"token-mean"`` or ``"seq-mean-token-sum"`` (see module docstring).
        tis_cap: cap of the truncated importance weight; None disables the weight.
        kl_coef: ``beta`` of the KL penalty toward the reference policy (finite, >= 0; 0 disables
            it).
    """

    clip_ratio_low: float = 0.2
    clip_ratio_high: float = 0.2
    loss_agg_mode: LossAggMode = "token-mean"
    tis_cap: float | None = 2.0
    kl_coef: float = 0.0

    def __post_init__(self) -> None:
        if self.loss_agg_mode not in LOSS_AGG_MODES:
            raise ValueError(f"loss_agg_mode must be one of {LOSS_AGG_MODES}, got {self.loss_agg_mode!r}")
        if not 0 <= self.clip_ratio_low < 1 or self.clip_ratio_high < 0:
            raise ValueError("need 0 <= clip_ratio_low < 1 and clip_ratio_high >= 0")
        if self.tis_cap is not None and self.tis_cap <= 0:
            raise ValueError(f"tis_cap must be positive or None, got {self.tis_cap}")
        if not is_real(self.kl_coef, finite=False):
            raise ValueError(f"kl_coef must be a real number (not a bool), got {self.kl_coef!r}")
        object.__setattr__(self, "kl_coef", float(self.kl_coef))  # numpy scalars -> float (JSON)
        if not (math.isfinite(self.kl_coef) and self.kl_coef >= 0):  # inf * a zero KL term is nan
            raise ValueError(f"kl_coef must be finite and >= 0, got {self.kl_coef}")


def loss_denominator(mini_batch: MiniBatch, mode: LossAggMode) -> int:
    """The fixed ``D`` of a mini-batch: rollouts (``seq-mean-token-sum``) or sampled tokens.

    Raises:
        ValueError: if the mini-batch has no real rollout / no sampled token (D would be 0).
    """
    if mode not in LOSS_AGG_MODES:
        raise ValueError(f"unknown loss_agg_mode {mode!r}")
    d = mini_batch.num_rollouts if mode == "seq-mean-token-sum" else mini_batch.num_sampled_tokens
    if d == 0:
        raise ValueError(
            f"mini-batch has no {'rollouts' if mode == 'seq-mean-token-sum' else 'sampled tokens'}"
        )
    return d


def token_logprobs(logits: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """Logprob of each token given the ones before it, aligned with ``input_ids``.

    Args:
        logits: (B, T, V) causal-LM logits (position t predicts token t + 1).
        input_ids: (B, T) token IDs.

    Returns:
        (B, T) tensor; column 0 is 0 (the first token has no prediction), like ``Row.logprobs``.
    """
    logits = logits[:, :-1].float() if logits.dtype in (torch.float16, torch.bfloat16) else logits[:, :-1]
    target = input_ids[:, 1:].unsqueeze(-1)
    lp = logits.gather(-1, target).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    return torch.nn.functional.pad(lp, (1, 0), value=0.0)


@dataclass
class PolicyLoss:
    """One micro-batch's loss (already divided by the mini-batch ``D``) and metric sums.

    ``stats`` holds sums over sampled tokens (``tokens``, ``clipped``, ``kl``, ``gap``,
    ``abs_gap``, ``tis_capped``, ``ref_kl``) so micro-batches merge exactly with :func:`merge_stats`.
    """

    loss: torch.Tensor
    stats: dict[str, float]


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    rollout_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    denominator: float,
    config: LossConfig,
    ref_logprobs: torch.Tensor | None = None,
    kl_logprobs: torch.Tensor | None = None,
) -> PolicyLoss:
    """PPO clipped loss of one micro-batch (formula in the module docstring).

    Args:
        logprobs: (B, T) current-policy logprobs of the tokens (with grad).
        old_logprobs: (B, T) behaviour-policy logprobs (the recorded ones, or the trainer's).
        rollout_logprobs: (B, T) logprobs recorded by the rollout engine.
        advantages: (B,) per-row or (B, T) per-token advantages.
        loss_mask: (B, T) 1 on sampled tokens, 0 elsewhere (padding rows are all 0).
        denominator: the mini-batch's fixed ``D`` (:func:`loss_denominator`).
        config: clip range, aggregation mode, TIS cap, KL coefficient.
        ref_logprobs: (B, T) reference-policy logprobs (no grad); needed when
            ``config.kl_coef > 0``, else only measured (``ref_kl``) when given.
        kl_logprobs: (B, T) current-policy logprobs on the distribution ``ref_logprobs`` were
            taken from (with grad), for the KL term only; default ``logprobs``. The trainer
            passes both without top-k / top-p filtering, where no token is ``-inf``.

    Returns:
        :class:`PolicyLoss`.

    Raises:
        ValueError: on mismatched shapes, a non-positive denominator, or ``kl_coef > 0``
            without ``ref_logprobs``.
    """
    if not logprobs.shape == old_logprobs.shape == rollout_logprobs.shape == loss_mask.shape:
        raise ValueError(
            f"shape mismatch: logprobs {tuple(logprobs.shape)}, old {tuple(old_logprobs.shape)}, "
            f"rollout {tuple(rollout_logprobs.shape)}, mask {tuple(loss_mask.shape)}"
        )
    if denominator <= 0:
        raise ValueError(f"denominator must be positive, got {denominator}")
    if ref_logprobs is not None and ref_logprobs.shape != logprobs.shape:
        raise ValueError(f"shape mismatch: ref {tuple(ref_logprobs.shape)}, logprobs {tuple(logprobs.shape)}")
    if kl_logprobs is not None and kl_logprobs.shape != logprobs.shape:
        raise ValueError(f"shape mismatch: kl {tuple(kl_logprobs.shape)}, logprobs {tuple(logprobs.shape)}")
    if config.kl_coef > 0 and ref_logprobs is None:
        raise ValueError("kl_coef > 0 needs ref_logprobs (the reference policy's logprobs)")
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1)
    mask = loss_mask.to(logprobs.dtype)
    # Off-mask positions are set to 0 before any arithmetic: they hold context, a turn left out of
    # the loss (its recorded logprobs may be -inf) or values a pass never computed, and inf * 0
    # would make the sums NaN.
    on, zero = mask > 0, torch.zeros((), dtype=logprobs.dtype, device=logprobs.device)
    logprobs = torch.where(on, logprobs, zero)
    old = torch.where(on, old_logprobs.detach().to(logprobs.dtype), zero)
    rollout_logprobs = torch.where(on, rollout_logprobs.to(logprobs.dtype), zero)
    if ref_logprobs is not None:
        ref_logprobs = torch.where(on, ref_logprobs.detach().to(logprobs.dtype), zero)
    if kl_logprobs is not None:
        kl_logprobs = torch.where(on, kl_logprobs.to(logprobs.dtype), zero)
    log_ratio = logprobs - old
    ratio = torch.exp(log_ratio)
    adv = advantages.to(logprobs.dtype)
    unclipped = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1 - config.clip_ratio_low, 1 + config.clip_ratio_high)
    pg = torch.maximum(unclipped, clipped)
    if config.tis_cap is not None:
        weight = torch.exp(old - rollout_logprobs.to(logprobs.dtype)).clamp(max=config.tis_cap).detach()
        pg = pg * weight
        tis_capped = float(((weight >= config.tis_cap) * mask).sum())
    else:
        tis_capped = 0.0
    ref_kl = 0.0
    if ref_logprobs is not None:
        current = logprobs if kl_logprobs is None else kl_logprobs.to(logprobs.dtype)
        d = (ref_logprobs.detach().to(logprobs.dtype) - current).clamp(-20.0, 20.0)
        kl = (torch.exp(d) - d - 1).clamp(max=10.0)
        ref_kl = float((kl.detach() * mask).sum())
        if config.kl_coef > 0:
            pg = pg + config.kl_coef * kl
    loss = (pg * mask).sum() / denominator
    with torch.no_grad():
        lr = log_ratio.detach()
        gap = logprobs.detach() - rollout_logprobs.to(logprobs.dtype)
        stats = {
            "tokens": float(mask.sum()),
            "clipped": float(((clipped > unclipped).to(mask.dtype) * mask).sum()),
            # k3 estimator of KL(behaviour || current), Schulman 2020: (r - 1) - log r >= 0
            "kl": float(((torch.exp(lr) - 1 - lr) * mask).sum()),
            "gap": float((gap * mask).sum()),
            "abs_gap": float((gap.abs() * mask).sum()),
            "tis_capped": tis_capped,
            "ref_kl": ref_kl,
        }
    return PolicyLoss(loss=loss, stats=stats)


def merge_stats(stats: Iterable[dict[str, float]]) -> dict[str, float]:
    """Per-token means over micro-batches: clip_fraction, approx_kl, logprob_gap (trainer minus
    rollout, nats), logprob_abs_gap, tis_capped_fraction; plus ``tokens``."""
    total: dict[str, float] = {}
    for s in stats:
        for k, v in s.items():
            total[k] = total.get(k, 0.0) + v
    n = total.get("tokens", 0.0)
    if n == 0:
        return {"tokens": 0.0}
    return {
        "tokens": n,
        "clip_fraction": total["clipped"] / n,
        "approx_kl": total["kl"] / n,
        "logprob_gap": total["gap"] / n,
        "logprob_abs_gap": total["abs_gap"] / n,
        "tis_capped_fraction": total["tis_capped"] / n,
        "kl_ref": total.get("ref_kl", 0.0) / n,
    }
