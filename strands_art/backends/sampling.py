"""The sampling distribution, as pure torch: temperature, top-k and top-p (nucleus) filtering.

Shared by the ``transformers`` backend (to sample and to report logprobs) and by the trainer (to
compute its own logprobs the same way). Every function works on logits of shape ``[..., V]``
(any leading dims, vocabulary last) and returns a tensor of the same shape unless said otherwise.

The distribution (the same as vLLM's sampler, whose ``--logprobs-mode processed_logprobs`` returns
exactly these values; order temperature → top-k → top-p as in vLLM and ``transformers``)::

    greedy (temperature < 1e-5, vLLM's _SAMPLING_EPS):
        logp = log_softmax(z)                          # top-k / top-p ignored, like vLLM
    otherwise:
        z'   = z / temperature
        z'   = -inf where z' < (k-th largest z')        # top_k > 0; ties with the k-th are kept
        z'   = -inf where the token lies in the low tail # top_p < 1, see top_p_mask
        logp = log_softmax(z')                          # renormalized over the kept tokens

Top-p keeps the smallest set of most likely tokens whose probability mass reaches ``p``: sort
ascending, drop every token whose cumulative probability (from the least likely up) is
``<= 1 - p``, always keep the most likely token (vLLM ``apply_top_k_top_p``, ``transformers``
``TopPLogitsWarper``). Masks are computed without gradient; the kept logits keep theirs, so
:func:`sampling_logprobs` is differentiable for the trainer.

A token outside the kept set has logprob ``-inf``. Small numerical differences between two
forward passes (incremental KV-cache decoding vs. one batched pass) can move a token across the
top-k/top-p boundary; such tokens are rare and show up as ``-inf`` in the recomputed logprobs.
"""

from __future__ import annotations

from typing import Any

import torch

GREEDY_EPS = 1e-5  # vLLM's _SAMPLING_EPS: temperatures below it mean greedy


def is_greedy(temperature: float) -> bool:
    """True when ``temperature`` selects greedy argmax decoding."""
    return temperature < GREEDY_EPS


def top_k_mask(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Bool mask (True = removed) of tokens below the ``k``-th largest logit of each row.

    ``k <= 0`` or ``k >= V`` removes nothing. Tokens tied with the k-th value are kept, so more
    than k tokens survive only under exact ties.
    """
    vocab = logits.shape[-1]
    if k <= 0 or k >= vocab:
        return torch.zeros_like(logits, dtype=torch.bool)
    with torch.no_grad():
        kth = torch.topk(logits, k, dim=-1).values[..., -1:]
        return logits < kth


def top_p_mask(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Bool mask (True = removed) of the low-probability tail outside the top-``p`` nucleus.

    ``p >= 1`` removes nothing. Entries already ``-inf`` have probability 0 and are removed.
    """
    if p >= 1.0:
        return torch.isneginf(logits)
    with torch.no_grad():
        sorted_logits, order = torch.sort(logits, dim=-1, descending=False)
        cum = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        drop_sorted = cum <= 1.0 - p
        drop_sorted[..., -1] = False  # always keep the most likely token
        return torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)


def filter_logits(
    logits: torch.Tensor, temperature: float, top_k: int = 0, top_p: float = 1.0
) -> torch.Tensor:
    """Temperature-scaled logits with removed tokens set to ``-inf`` (float32 or wider).

    Greedy temperatures (< ``GREEDY_EPS``) return the logits unscaled and unfiltered.
    """
    z = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    if is_greedy(temperature):
        return z
    z = z / temperature
    if top_k > 0:
        z = z.masked_fill(top_k_mask(z, top_k), float("-inf"))
    if top_p < 1.0:
        z = z.masked_fill(top_p_mask(z, top_p), float("-inf"))
    return z


def _knobs(params: Any) -> tuple[float, int, float]:
    return float(params.temperature), int(params.top_k), float(params.top_p)


def sampling_logprobs(logits: torch.Tensor, params: Any) -> torch.Tensor:
    """Natural-log probabilities ``[..., V]`` of the sampling distribution for ``params``.

    ``params`` is a :class:`~strands_art.backends.base.SamplingParams` (or anything with
    ``temperature``, ``top_k``, ``top_p``). Removed tokens get ``-inf``; the rest sum to 1 in
    probability space. See the module docstring for the formula.
    """
    temperature, top_k, top_p = _knobs(params)
    return torch.log_softmax(filter_logits(logits, temperature, top_k, top_p), dim=-1)


def token_logprobs(logits: torch.Tensor, token_ids: torch.Tensor, params: Any) -> torch.Tensor:
    """Logprob of each given token under the sampling distribution.

    Args:
        logits: ``[..., V]`` logits predicting each token (already shifted: row i predicts token i).
        token_ids: ``[...]`` integer tensor, the leading shape of ``logits``.
        params: as in :func:`sampling_logprobs`.

    Returns:
        ``[...]`` float tensor of natural-log probabilities (``-inf`` for a filtered-out token).
    """
    lp = sampling_logprobs(logits, params)
    return lp.gather(-1, token_ids.long().unsqueeze(-1)).squeeze(-1)


def sample_next(
    logits: torch.Tensor, params: Any, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw one token per row from the sampling distribution.

    Args:
        logits: ``[B, V]`` next-token logits.
        params: as in :func:`sampling_logprobs`.
        generator: the RNG (on ``logits.device``) for reproducible draws; ignored when greedy.

    Returns:
        ``(token_ids [B] long, logprobs [B] float)``: the chosen tokens and their logprobs under
        the distribution of :func:`sampling_logprobs`. Greedy picks the argmax (lowest id on ties).
    """
    lp = sampling_logprobs(logits, params)
    if is_greedy(float(params.temperature)):
        ids = lp.argmax(dim=-1)
    else:
        ids = torch.multinomial(lp.exp(), 1, generator=generator).squeeze(-1)
    return ids, lp.gather(-1, ids.unsqueeze(-1)).squeeze(-1)
