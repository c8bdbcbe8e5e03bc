"""Prefix sharing: run each group's common prompt once, its rows' continuations on its KV cache.

The ``G`` rows of one GRPO group start with the same tokens (system prompt, tool definitions,
task: about 2.7K of 3K tokens on MigrationBench), and the unshared trainer runs those tokens once
per row. With ``TrainerConfig.share_prefix`` the embedded trainer instead, per group of a
mini-batch (rows sharing a ``group_id``; rows without one: a ``rollout_id``):

1. takes the rows' **longest common token prefix** (computed, never assumed: rows of one group
   that fork after the prompt share only up to their first differing token), capped so every
   row keeps at least one token of its own: ``P = min(lcp, shortest_row - 1)``;
2. runs the prefix once (batch 1) with a KV cache (:class:`transformers.DynamicCache`);
3. runs the rows' continuations ``row[P:]`` (right-padded, position ids ``P, P + 1, ...``,
   attention over the ``P`` cached positions) on that cache, repeated once per row, in chunks
   under ``micro_batch_max_tokens`` counted without the prefix
   (:func:`~strands_art.training.batching.micro_batches` with ``shared=P``);
4. projects the vocabulary only where a loss reads it, as the unshared pass does: in the prefix
   at the positions that predict a sampled token of some row of the unit (and at ``P - 1``,
   which predicts each row's first own token), in the continuations at those of the chunk's
   rows; the prefix's logits go in front of each continuation's, with the positions they
   cover (:data:`~strands_art.training.logprobs.Kept`), so the loss code is unchanged: a
   sampled token inside the prefix (two rows of one rollout after a fork) still counts once
   per row whose loss mask has it, as unshared.

**Exact gradients.** The cache is not cut from the graph: each chunk runs on leaf copies of the
prefix's keys, values and logits; the chunk's loss is backpropagated (the expand over the
chunk's rows sums their gradients into the leaves, chunks accumulate); after the last chunk
:meth:`PrefixPass.backward` sends the leaves' accumulated gradients through the prefix pass once
(``torch.autograd.backward``). By the chain rule this is the gradient of the sum of the rows'
losses, the prefix's activations taking the sum of the ``G`` rows' gradients, while the prefix
graph is kept once rather than once per row. Loss and LoRA gradients equal the unshared
computation up to float rounding (tests/test_shared_prefix.py: 1e-5 on SmolLM2-135M, float32).

Cost: ``P + sum(len - P)`` tokens instead of ``sum(len)``; attention of a continuation token
still spans the whole row. A group of one row, or one whose rows share no token, goes through
the ordinary micro-batches. Models with sliding-window attention layers are refused
(:func:`check_model`): their cache keeps only the window.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from strands_art.training.batching import BatchRow, micro_batches
from strands_art.training.collate import collate
from strands_art.training.logprobs import Kept, kept_logprobs
from strands_art.training.passes import Pass, Passes, TrainPass, sampled_positions, stack_rows

Logits = tuple[torch.Tensor, dict[str, torch.Tensor], Kept]
"""(logits at the positions ``kept``, collated tensors, ``kept``), as :meth:`Passes.logits`."""


def common_prefix_len(seqs: Sequence[Sequence[int]]) -> int:
    """Length of the longest common prefix of ``seqs`` (0 for no sequence or an empty one)."""
    if not seqs:
        return 0
    first, n = seqs[0], min(len(s) for s in seqs)
    for i in range(n):
        tok = first[i]
        if any(s[i] != tok for s in seqs):
            return i
    return n


@dataclass(frozen=True)
class PrefixUnit:
    """Rows whose first ``prefix_len`` tokens are equal and run once.

    Attributes:
        rows: two or more rows (their order in the mini-batch kept).
        prefix_len: ``P``, 1 <= P < the shortest row's length.
    """

    rows: list[BatchRow]
    prefix_len: int


def prefix_units(rows: Sequence[BatchRow]) -> tuple[list[PrefixUnit], list[BatchRow]]:
    """Group ``rows`` by ``group_id`` (rows without one: by ``rollout_id``) and compute each
    group's shared prefix.

    Returns:
        ``(units, plain)``: a unit per group of two or more rows sharing at least one token
        (in order of first appearance), and the other rows (groups of one row, rows sharing no
        token, padding rows), in their order. Together they hold every row exactly once.
    """
    groups: dict[str, list[BatchRow]] = {}
    for br in rows:
        key = f"g:{br.row.group_id}" if br.row.group_id is not None else f"r:{br.row.rollout_id}"
        groups.setdefault(key, []).append(br)
    units: list[PrefixUnit] = []
    shared: set[int] = set()
    for members in groups.values():
        if len(members) < 2 or any(br.padding for br in members):
            continue
        p = min(
            common_prefix_len([br.row.input_ids for br in members]),
            min(br.num_tokens for br in members) - 1,
        )
        if p >= 1:
            units.append(PrefixUnit(members, p))
            shared.update(id(br) for br in members)
    return units, [br for br in rows if id(br) not in shared]


def check_model(model: Any) -> None:
    """Refuse a model with sliding-window attention layers (its cache keeps only the window).

    Raises:
        ValueError: the model's config has a layer type other than ``full_attention``, or a
            sliding window in use.
    """
    config = getattr(model, "config", None)
    types = set(getattr(config, "layer_types", None) or ["full_attention"])
    sliding = getattr(config, "use_sliding_window", False) and getattr(config, "sliding_window", None)
    if types != {"full_attention"} or sliding:
        raise ValueError(
            f"share_prefix needs full attention in every layer; this model has {sorted(types)}"
            f"{' with a sliding window' if sliding else ''}: train it with share_prefix=False"
        )


def _base_forward(model: Any) -> Any:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return inspect.signature(base.forward).parameters


class PrefixPass:
    """One unit's prefix, run once; then its rows' continuations on the prefix's KV cache.

    Use::

        pp = PrefixPass(model, unit, pad_token_id)
        for rows in pp.chunks(max_tokens):
            logits, t, kept = pp.logits(rows)
            ...  # loss of these rows; loss.backward() under grad
        pp.backward()  # under grad: the prefix's share of every row's gradient, once

    Args:
        model: the causal LM (peft or not); run under the caller's grad mode and adapter state.
        unit: the rows and their shared prefix length.
        pad_token_id: token ID of right padding.
    """

    def __init__(self, model: Any, unit: PrefixUnit, pad_token_id: int) -> None:
        from transformers import DynamicCache

        self.model, self.unit, self.pad_token_id = model, unit, pad_token_id
        params = _base_forward(model)
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        p = unit.prefix_len
        # the prefix positions whose logits some row's loss reads (position q predicts token q + 1),
        # and always the last one: it predicts each row's first own token
        wanted = {q for br in unit.rows for q in range(p - 1) if br.row.loss_mask[q + 1]} | {p - 1}
        device = next(model.parameters()).device
        self.kept = torch.tensor(sorted(wanted), dtype=torch.long, device=device)
        ids = torch.tensor([unit.rows[0].row.input_ids[:p]], dtype=torch.long, device=device)
        self._keep_logits = "logits_to_keep" in params
        kwargs = {"logits_to_keep": self.kept} if self._keep_logits else {}
        cache = DynamicCache(config=model.config)
        out = model(input_ids=ids, use_cache=True, **{self._cache_kw: cache}, **kwargs)
        logits = out.logits if self._keep_logits else out.logits[:, self.kept]
        self._outputs = [t for layer in cache.layers for t in (layer.keys, layer.values)] + [logits]
        self._grad = torch.is_grad_enabled()
        # Leaves the continuations run on; their accumulated gradient goes through the prefix
        # pass in backward() (module docstring: the chain rule in two stages, nothing cut).
        self._leaves = [t.detach().requires_grad_(self._grad) for t in self._outputs]

    def chunks(self, max_tokens: int) -> list[list[BatchRow]]:
        """The unit's rows cut into length-sorted chunks under ``max_tokens`` padded tokens,
        the shared prefix not counted."""
        return micro_batches(self.unit.rows, max_tokens, shared=self.unit.prefix_len)

    def logits(self, rows: list[BatchRow]) -> Logits:
        """Logits of ``rows`` (some of the unit's) at the positions that predict a sampled token
        (the prefix's :attr:`kept`, the same for every row, then the continuation's positions of
        :func:`~strands_art.training.passes.sampled_positions`), their collated tensors (full
        rows) and those positions (:data:`~strands_art.training.logprobs.Kept`)."""
        from transformers import DynamicCache

        p = self.unit.prefix_len
        t = {k: v.to(self._leaves[0].device) for k, v in collate(rows, self.pad_token_id).items()}
        ids, n = t["input_ids"], len(rows)
        kv = [x.expand(n, -1, -1, -1) for x in self._leaves[:-1]]
        cache = DynamicCache(list(zip(kv[0::2], kv[1::2], strict=True)), config=self.model.config)
        suffix = ids[:, p:]
        positions = torch.arange(p, ids.shape[1], device=ids.device).unsqueeze(0).expand(n, -1)
        cont = sampled_positions(t["loss_mask"])
        cont = cont[cont >= p] - p  # indices into the continuation
        prefix_logits = self._leaves[-1].expand(n, -1, -1)
        if len(cont) == 0:  # nothing sampled after the prefix: no continuation pass is needed
            return prefix_logits, t, self.kept
        kwargs = {"logits_to_keep": cont} if self._keep_logits else {}
        out = self.model(
            input_ids=suffix,
            attention_mask=t["attention_mask"],
            position_ids=positions,
            use_cache=True,
            **{self._cache_kw: cache},
            **kwargs,
        )
        cont_logits = out.logits if self._keep_logits else out.logits[:, cont]
        return torch.cat([prefix_logits, cont_logits], dim=1), t, torch.cat([self.kept, cont + p])

    def backward(self) -> None:
        """Backpropagate the gradients the chunks left on the prefix's keys, values and logits
        through the prefix pass (once). A no-op without grad or without any gradient."""
        if not self._grad:
            return
        pairs = [
            (o, leaf.grad)
            for o, leaf in zip(self._outputs, self._leaves, strict=True)
            if leaf.grad is not None
        ]
        if pairs:
            torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        self._outputs, self._leaves = [], []


def passes(
    model: Any,
    rows: Sequence[BatchRow],
    pad_token_id: int,
    max_tokens: int,
    plain: Callable[[list[BatchRow]], Logits],
) -> Iterator[Pass]:
    """Every row's logits, prefix-shared where rows share a prefix: yields ``(rows, logits, t,
    kept)`` per chunk of a :class:`PrefixUnit`, then per micro-batch of the other rows (through
    ``plain``, the trainer's unshared pass).

    Under grad the caller must backpropagate each yielded chunk's loss before asking for the
    next item: a unit's prefix gradient is sent on after its last chunk.
    """
    units, rest = prefix_units(rows)
    for unit in units:
        pp = PrefixPass(model, unit, pad_token_id)
        for chunk in pp.chunks(max_tokens):
            yield (chunk, *pp.logits(chunk))
        pp.backward()
    for micro in micro_batches(rest, max_tokens) if rest else []:
        yield (micro, *plain(micro))


class SharedPrefixPasses(Passes):
    """:class:`~strands_art.training.passes.Passes` with each group's prefix run once
    (:func:`passes`); what the trainer uses with ``TrainerConfig.share_prefix``. Padding rows are
    left out (they add nothing to the loss), and the rows that do not train are left out before
    the groups are formed."""

    def forwarded_tokens(self, rows: Sequence[BatchRow]) -> int:
        """Tokens the model runs for ``rows``, as :meth:`passes` runs them: each group's shared
        prefix once (:func:`prefix_units`), then the continuations of each chunk that has a sampled
        token after the prefix (:meth:`PrefixPass.logits` runs no pass for one that has none); rows
        outside a group whole."""
        units, rest = prefix_units([br for br in rows if not br.padding])
        total = sum(br.num_tokens for br in rest)
        for u in units:
            p = u.prefix_len
            total += p
            for chunk in micro_batches(u.rows, self.max_tokens, shared=p):
                if any(any(br.row.loss_mask[p + 1 :]) for br in chunk):
                    total += sum(br.num_tokens - p for br in chunk)
        return total

    def passes(self, rows: Sequence[BatchRow]) -> Iterator[Pass]:
        real = [br for br in rows if not br.padding]
        yield from passes(self.model, real, self.pad_token_id, self.max_tokens, self.logits)

    def train_passes(
        self, shard: Sequence[BatchRow], trains: Callable[[BatchRow], bool], kl: bool
    ) -> Iterator[TrainPass]:
        rows = [br for br in shard if trains(br)]
        refs = self.reference_rows(rows) if kl else None
        for micro, logits, t, kept in self.passes(rows):
            yield micro, logits, t, kept, None if refs is None else stack_rows(micro, refs, t["input_ids"])

    def reference_rows(self, rows: list[BatchRow]) -> dict[int, torch.Tensor]:
        """The reference logprobs of every row (``id(BatchRow)`` -> (num_tokens,)), computed in
        the same prefix-shared chunks as the training pass (adapter disabled, no grad)."""
        out: dict[int, torch.Tensor] = {}
        with torch.no_grad(), self.model.disable_adapter():
            for micro, logits, t, kept in self.passes(rows):
                lp = kept_logprobs(logits, t["input_ids"], kept, self.kl_sampling)
                out.update((id(br), lp[i, : br.num_tokens]) for i, br in enumerate(micro))
        return out
