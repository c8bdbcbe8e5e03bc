"""The trainer's logprobs: the rollouts' sampling distribution, computed from logits.

One job: turn a causal LM's logits into per-token logprobs aligned with ``input_ids`` (column 0
is 0, like ``Row.logprobs``), the way the sampler computed them
(:func:`strands_art.backends.sampling.token_logprobs`: temperature, top-k, top-p), so that at
the first optimizer step of a batch the PPO ratio is 1 up to numerics. A token the sampling
filters remove has logprob ``-inf`` (the trainer leaves it out of the loss and counts it).

**Raw rollout logprobs.** Rows whose backend recorded logprobs of the *raw* distribution
(``row.metadata["logprobs_mode"] == "raw"``, e.g. llama.cpp with ``logprobs_mode="raw"``) are
brought to the sampling distribution before the importance-sampling correction:
``rollout ≈ trainer_processed + (rollout_raw - trainer_raw)`` (:func:`processed_from_raw`), i.e.
the engine's mismatch measured on the raw distribution, where it was recorded. Rows without the
key (transformers, vLLM with ``processed_logprobs``, llama.cpp by default) are used as recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from strands_art.backends.base import SamplingParams
from strands_art.backends.sampling import token_logprobs as sampling_token_logprobs

RAW = SamplingParams()
"""Temperature 1, no top-k / top-p: the unscaled (raw) distribution."""


def trainer_logprobs(logits: torch.Tensor, input_ids: torch.Tensor, sampling: Any) -> torch.Tensor:
    """Logprob of each token under the rollouts' sampling distribution, aligned with ``input_ids``.

    Args:
        logits: (B, T, V) causal-LM logits (position t predicts token t + 1).
        input_ids: (B, T) token IDs.
        sampling: the rollouts' :class:`~strands_art.backends.base.SamplingParams`.

    Returns:
        (B, T) float tensor, natural-log probabilities; column 0 is 0 (like ``Row.logprobs``);
        ``-inf`` where the sampling filters would have removed the token.
    """
    lp = sampling_token_logprobs(logits[:, :-1], input_ids[:, 1:], sampling)
    return torch.nn.functional.pad(lp, (1, 0), value=0.0)


Kept = int | torch.Tensor
"""Which positions a pass's logits cover: an ``int`` ``first`` (positions ``first - 1 .. T - 1``,
the contiguous range from the first sampled token on) or a 1-D long tensor of positions (sorted,
each ``< T - 1``; position ``p``'s logits predict token ``p + 1``), e.g. only the positions
before sampled tokens (:meth:`~strands_art.training.passes.Passes.logits`)."""


def kept_logprobs(logits: torch.Tensor, input_ids: torch.Tensor, kept: Kept, sampling: Any) -> torch.Tensor:
    """:func:`trainer_logprobs` from logits computed only at some positions (``logits_to_keep``).

    Args:
        logits: (B, K, V): with an ``int`` ``kept`` (``first``), the logits of positions
            ``T - K .. T - 1`` with ``K = T - first + 1`` (they predict tokens ``first .. T - 1``);
            with a tensor ``kept`` (K,), the logits of those positions; or the full (B, T, V).
        input_ids: (B, T) token IDs.
        kept: :data:`Kept`.
        sampling: the distribution, as in :func:`trainer_logprobs`.

    Returns:
        (B, T) natural-log probabilities of the tokens the kept positions predict (column
        ``p + 1`` for position ``p``); every other column is 0 (the gradient flows only into the
        kept positions' logits).
    """
    if isinstance(kept, torch.Tensor):
        targets = input_ids[:, kept + 1]
        lp = sampling_token_logprobs(logits, targets, sampling)
        index = (kept + 1).unsqueeze(0).expand_as(lp)
        return torch.zeros(input_ids.shape, dtype=lp.dtype, device=lp.device).scatter(1, index, lp)
    if logits.shape[1] != input_ids.shape[1]:
        lp = trainer_logprobs(logits, input_ids[:, kept - 1 :], sampling)[:, 1:]
        return torch.nn.functional.pad(lp, (kept, 0), value=0.0)
    return trainer_logprobs(logits, input_ids, sampling)


def processed_from_raw(
    rollout_raw: torch.Tensor, trainer_processed: torch.Tensor, trainer_raw: torch.Tensor
) -> torch.Tensor:
    """Rollout logprobs recorded on the raw distribution, moved to the sampling distribution.

    All (B, T). The engine-vs-trainer gap is measured where the engine recorded it (raw) and
    added to the trainer's processed logprobs; no gradient flows. Non-finite trainer values (a
    token the trainer's filters remove) give ``-inf`` and are masked out by the caller as usual.
    """
    return (trainer_processed + (rollout_raw - trainer_raw)).detach()


def move_raw_rollout_logprobs(
    metadata: Sequence[dict[str, Any]],
    tensors: dict[str, torch.Tensor],
    processed: torch.Tensor,
    logits: torch.Tensor,
    kept: Kept,
) -> None:
    """Bring the raw-mode rows' ``tensors["rollout_logprobs"]`` to the sampling distribution, in place.

    Args:
        metadata: one ``row.metadata`` per row of the micro-batch (B); rows with
            ``logprobs_mode == "raw"`` are moved (:func:`processed_from_raw`), the others untouched.
        tensors: the collated micro-batch (``input_ids``, ``loss_mask``, ``rollout_logprobs``; (B, T)).
        processed: (B, T) the trainer's logprobs on the sampling distribution.
        logits: the micro-batch's logits, as in :func:`kept_logprobs`.
        kept: as in :func:`kept_logprobs`.

    Only sampled tokens (loss mask 1) whose moved value is finite change; no gradient flows.
    """
    raw_rows = [i for i, md in enumerate(metadata) if md.get("logprobs_mode") == "raw"]
    if not raw_rows:
        return
    ids = tensors["input_ids"]
    with torch.no_grad():
        raw = kept_logprobs(logits, ids, kept, RAW)
        sel = torch.tensor(raw_rows, device=ids.device)
        recorded = tensors["rollout_logprobs"][sel]
        moved = processed_from_raw(recorded, processed[sel], raw[sel])
        keep = (tensors["loss_mask"][sel] > 0) & torch.isfinite(moved)
        tensors["rollout_logprobs"][sel] = torch.where(keep, moved, recorded)
