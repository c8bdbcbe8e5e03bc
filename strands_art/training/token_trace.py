"""Rows as trained: each row's per-token values at its first optimizer step of an update.

:class:`~strands_art.training.local.LocalTrainer` calls :func:`capture` from every training pass
while its ``trace`` is a dict (``strands-art train`` turns it on); the first pass that forwards a
row records, per token of the row (all aligned with ``row.input_ids``, float32 numpy arrays):

- ``loss_mask``: the mask the loss used (the row's, without tokens the trainer's top-k / top-p
  filters to ``-inf``, which are counted in ``filtered_tokens`` instead);
- ``trainer_logprobs``: the trainer's logprob of the token on the sampling distribution
  (:mod:`strands_art.training.logprobs`), NaN where it is ``-inf``;
- ``sampler_logprobs``: the logprob the rollout engine recorded, as the loss read it (raw
  logprobs moved to the sampling distribution);
- ``old_logprobs``: the denominator of the PPO ratio (the sampler's by default; the trainer's own
  with ``old_logprobs`` ``recompute`` / ``first-pass``);
- ``importance_weight``: ``min(exp(old - sampler), tis_cap)`` (1 without a cap), as in
  :func:`~strands_art.training.loss.policy_loss`;
- ``clipped``: 1 where the PPO clip bound the token (``ratio > 1 + eps_high`` with a positive
  advantage, ``ratio < 1 - eps_low`` with a negative one: where ``policy_loss``'s clipped term
  is the larger), on the mask only;

with ``advantage`` (the row's GRPO advantage) and ``step`` (the 1-based optimizer step of the
run that first forwarded it). Rows never forwarded (advantage 0 and no KL term: skipped exactly)
have no entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported where a trace is captured: the viewer reads TRACE_COLUMNS only
    import torch

TRACE_COLUMNS = (
    "loss_mask",
    "trainer_logprobs",
    "sampler_logprobs",
    "old_logprobs",
    "importance_weight",
    "clipped",
)
"""The per-token arrays of a trace entry, each aligned with the row's ``input_ids``."""


def capture(
    trace: dict[int, dict[str, Any]],
    micro: Sequence[Any],
    logprobs: torch.Tensor,
    old: torch.Tensor,
    sampler: torch.Tensor,
    mask: torch.Tensor,
    loss: Any,
    step: int,
) -> None:
    """Record the rows of one pass not yet in ``trace`` (keyed by ``id(batch_row)``).

    Args:
        trace: the update's trace; entries are added, never replaced.
        micro: the pass's :class:`~strands_art.training.batching.BatchRow` s, in row order.
        logprobs: (B, T) trainer logprobs (``-inf`` / NaN where filtered).
        old: (B, T) the ratio's denominator. sampler: (B, T) the recorded logprobs.
        mask: (B, T) the loss mask the loss uses (filtered tokens already 0).
        loss: the :class:`~strands_art.training.loss.LossConfig` (clip range, TIS cap).
        step: the optimizer step this pass belongs to (1-based, run-wide).
    """
    import torch

    with torch.no_grad():
        lp = logprobs.detach().float()
        finite = torch.isfinite(lp)
        on = mask > 0
        zero = torch.zeros((), dtype=lp.dtype, device=lp.device)
        old_f = torch.where(on, old.detach().float(), zero)
        samp = torch.where(on, sampler.detach().float(), zero)
        ratio = torch.exp(torch.where(on & finite, lp, zero) - old_f)
        if loss.tis_cap is not None:
            weight = torch.exp(old_f - samp).clamp(max=loss.tis_cap)
        else:
            weight = torch.ones_like(lp)
        for i, br in enumerate(micro):
            if id(br) in trace:
                continue
            n = br.num_tokens
            adv = float(br.advantage)
            r = ratio[i, :n]
            bound = (r > 1 + loss.clip_ratio_high) if adv > 0 else (r < 1 - loss.clip_ratio_low)
            m = on[i, :n]
            trace[id(br)] = {
                "row": br.row,
                "advantage": adv,
                "step": step,
                "loss_mask": m.to(torch.int8).cpu().numpy(),
                "trainer_logprobs": torch.where(finite[i, :n], lp[i, :n], torch.nan).cpu().numpy(),
                "sampler_logprobs": samp[i, :n].cpu().numpy(),
                "old_logprobs": old_f[i, :n].cpu().numpy(),
                "importance_weight": torch.where(m, weight[i, :n], zero).cpu().numpy(),
                "clipped": (bound & m & (adv != 0)).to(torch.int8).cpu().numpy(),
            }
