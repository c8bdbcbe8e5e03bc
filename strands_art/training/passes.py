"""The embedded trainer's forward passes over a mini-batch's rows: each micro-batch's logits, and
the reference (base-model) logprobs of the KL penalty.

:class:`Passes` is the ordinary path: length-sorted micro-batches under the token budget
(:func:`~strands_art.training.batching.micro_batches`), every row run whole.
:class:`~strands_art.training.shared_prefix.SharedPrefixPasses` (``TrainerConfig.share_prefix``)
runs each group's common prefix once instead, with the same logits. The trainer
(:class:`~strands_art.training.local.LocalTrainer`) picks one in its ``passes`` property and does
not branch on the choice anywhere else.

A pass yields logits only where the loss reads them. :class:`Passes` projects the vocabulary
only at the positions that predict a sampled token of some row of the micro-batch (``kept``, a
1-D tensor passed as ``logits_to_keep``): ``(B, K, V)``. A tool result or a user turn between
two assistant turns of a multi-turn row needs no projection, and the float32 logits of
Qwen2.5 (151,936 columns: 0.6 MB per position and copy) were the largest tensors of an update
of agent rows (docs/training-update.md, "Memory"). The shared-prefix passes project the same way
(:mod:`~strands_art.training.shared_prefix`). A model whose ``forward`` takes no
``logits_to_keep`` yields the full ``(B, T, V)``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from strands_art.backends.base import SamplingParams
from strands_art.training.batching import BatchRow, micro_batches
from strands_art.training.collate import collate
from strands_art.training.logprobs import Kept, kept_logprobs

Pass = tuple[list[BatchRow], torch.Tensor, dict[str, torch.Tensor], Kept]
"""``(micro, logits, t, kept)``: the rows, their logits at the positions ``kept`` says
(:data:`~strands_art.training.logprobs.Kept`), their collated tensors
(:func:`~strands_art.training.collate.collate`) and ``kept``."""

TrainPass = tuple[list[BatchRow], torch.Tensor, dict[str, torch.Tensor], Kept, "torch.Tensor | None"]
"""A :data:`Pass` and the (B, T) reference logprobs of its rows (None without a KL term)."""


def sampled_positions(loss_mask: torch.Tensor) -> torch.Tensor:
    """(K,) long tensor, sorted: the positions whose logits predict a sampled token of some row
    of ``loss_mask`` (B, T) (``p`` where some row has mask 1 at ``p + 1``); empty when none does."""
    return (loss_mask[:, 1:] > 0).any(dim=0).nonzero().flatten()


def stack_rows(
    micro: Sequence[BatchRow], per_row: dict[int, torch.Tensor], ids: torch.Tensor
) -> torch.Tensor:
    """(B, T) float32 tensor of the rows' ``per_row`` values (keyed by ``id(BatchRow)``, each
    ``(num_tokens,)``), 0 on padding; ``ids`` gives the shape and device."""
    out = torch.zeros(ids.shape, dtype=torch.float32, device=ids.device)
    for i, br in enumerate(micro):
        out[i, : br.num_tokens] = per_row[id(br)]
    return out


class Passes:
    """Forward passes of a (peft) causal LM over rows, in micro-batches.

    Args:
        model: the peft model (run under the caller's grad mode).
        pad_token_id: token ID of right padding.
        max_tokens: the micro-batch budget, padded tokens (``micro_batch_max_tokens``).
        kl_sampling: the distribution of the KL penalty's reference logprobs.
    """

    def __init__(self, model: Any, pad_token_id: int, max_tokens: int, kl_sampling: SamplingParams) -> None:
        self.model, self.pad_token_id, self.max_tokens = model, pad_token_id, max_tokens
        self.kl_sampling = kl_sampling
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        self._keep_logits = "logits_to_keep" in inspect.signature(base.forward).parameters

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def logits(self, micro: list[BatchRow]) -> tuple[torch.Tensor, dict[str, torch.Tensor], Kept]:
        """Logits of a micro-batch at the positions that predict its sampled tokens, its collated
        tensors, and those positions (see the module docstring)."""
        t = {k: v.to(self.device) for k, v in collate(micro, self.pad_token_id).items()}
        ids = t["input_ids"]
        kept: Kept = sampled_positions(t["loss_mask"])
        if not self._keep_logits:  # the whole sequence's logits
            kept, kwargs = 1, {}
        elif len(kept) == 0:  # nothing sampled (padding rows): the last position only, all 0
            kept, kwargs = ids.shape[1], {"logits_to_keep": 1}
        else:
            kwargs = {"logits_to_keep": kept}
        logits = self.model(input_ids=ids, attention_mask=t["attention_mask"], **kwargs).logits
        return logits, t, kept

    def forwarded_tokens(self, rows: Sequence[BatchRow]) -> int:
        """Tokens the model runs for ``rows`` (the rows that train): every row whole, context
        included, right padding not counted."""
        return sum(br.num_tokens for br in rows if not br.padding)

    def passes(self, rows: Sequence[BatchRow]) -> Iterator[Pass]:
        """One :data:`Pass` per micro-batch of ``rows`` (padding rows included)."""
        for micro in micro_batches(rows, self.max_tokens):
            yield (micro, *self.logits(micro))

    def train_passes(
        self, shard: Sequence[BatchRow], trains: Callable[[BatchRow], bool], kl: bool
    ) -> Iterator[TrainPass]:
        """The passes of the rows of ``shard`` that train (``trains``), each with its reference
        logprobs when ``kl``. The micro-batches are cut from the whole shard, then the rows that
        do not train are left out (a micro-batch left empty is skipped).

        Under grad the caller backpropagates each pass's loss before asking for the next one.
        """
        for micro in micro_batches(shard, self.max_tokens):
            micro = [br for br in micro if trains(br)]
            if not micro:
                continue
            ref = self.reference_logprobs(micro) if kl else None
            yield (micro, *self.logits(micro), ref)

    def reference_logprobs(self, micro: list[BatchRow]) -> torch.Tensor:
        """(B, T) logprobs of the reference policy (the base model: adapter disabled) on
        :attr:`kl_sampling`'s distribution, no grad."""
        with torch.no_grad(), self.model.disable_adapter():
            logits, t, kept = self.logits(micro)
            lp = kept_logprobs(logits, t["input_ids"], kept, self.kl_sampling)
        return lp.detach()
