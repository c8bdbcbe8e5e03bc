"""Rows -> verl 0.9.1 actor-update input, with the mini-batch *count* (step-stable batching).

verl's engine worker ``TrainingWorker.train_mini_batch`` (verl/workers/engine_workers.py)
takes either ``mini_batch_size`` (rows; more rows = more optimizer steps) or
``num_mini_batch`` (the count; each rank cuts its share into that many equal contiguous pieces
with ``tensordict_utils.make_iterator``). We pass the count, with ``shuffle=False`` so that the
session-aware layout survives, and lay the rows out rank-major because the worker group's
dispatch (``make_nd_compute_dataproto_dispatch_fn`` -> ``chunk_tensordict``) hands each rank a
contiguous, equal chunk.

Each row becomes verl's usual left/right-padded layout: ``prompts`` = the tokens before the
row's first sampled token (left-padded), ``responses`` = the rest (right-padded; tool results
inside it have ``response_mask`` 0), ``input_ids = prompts ++ responses``, ``attention_mask``,
``position_ids`` (``compute_position_id_with_mask``), ``response_mask``, ``old_log_probs`` and
``rollout_log_probs`` (the recorded sampling logprobs) and ``advantages`` (the rollout's
advantage on sampled tokens). :func:`to_actor_tensordict` then applies verl's own
``left_right_2_no_padding`` as ``RayPPOTrainer._update_actor`` does.

Normalization: verl's ``token-mean`` divides by the mini-batch's all-reduced loss-mask token
count (row-count independent, like ours); for ``seq-mean-token-sum`` we set verl's
``global_batch_size`` to the rollouts per mini-batch, a constant (see loss.py).

Needs the ``verl`` extra (``pip install strands-art[verl]``); importing this module without it
raises ImportError with that hint.
"""

from __future__ import annotations

from typing import Any

try:
    import numpy as np
    import torch
    from tensordict import TensorDict
    from verl import DataProto
    from verl.utils import tensordict_utils as tu
    from verl.utils.model import compute_position_id_with_mask
    from verl.workers.utils.padding import left_right_2_no_padding
except ImportError as exc:  # pragma: no cover - exercised only without verl
    raise ImportError("strands_art.verl.adapter needs verl==0.9.1: pip install 'strands-art[verl]'") from exc

from strands_art.training.batching import BatchRow, OuterBatch


def split_point(br: BatchRow) -> int:
    """Where the row's prompt ends: the index of its first sampled token (>= 1), or, for a row
    without one (a padding row), its last token. ``prompts`` = ``input_ids[:split]``, ``responses``
    = the rest; :mod:`.agent_loop` splits its ``AgentLoopOutput`` at the same point.

    Raises:
        ValueError: the row starts with a sampled token (no prompt).
    """
    mask = br.row.loss_mask
    first = mask.index(1) if 1 in mask else len(mask) - 1
    if first == 0:
        raise ValueError(f"row of rollout {br.row.rollout_id!r} starts with a sampled token (no prompt)")
    return first


def _padded(br: BatchRow, pad_token_id: int) -> BatchRow:
    """verl needs a prompt and a response: a padding row becomes two pad tokens, both mask 0."""
    if br.num_tokens >= 2:
        return br
    row = br.row
    ids = [pad_token_id, pad_token_id]
    return BatchRow(
        row=type(row)(ids, [0, 0], [0.0, 0.0], rollout_id=row.rollout_id, metadata=dict(row.metadata)),
        advantage=0.0,
        padding=br.padding,
    )


def rows_to_dataproto(
    rows: list[BatchRow], pad_token_id: int = 0, meta_info: dict[str, Any] | None = None
) -> DataProto:
    """Build verl's ``DataProto`` (left-padded prompts, right-padded responses) from rows.

    Args:
        rows: rows in the order verl should see them (use ``OuterBatch.rows_in_order()``).
        pad_token_id: token ID used for padding positions and padding rows.
        meta_info: copied into ``DataProto.meta_info``.

    Returns:
        A DataProto with tensors ``prompts`` (B, P), ``responses`` (B, R), ``input_ids`` and
        ``attention_mask`` and ``position_ids`` (B, P + R), ``response_mask``,
        ``old_log_probs``, ``rollout_log_probs`` and ``advantages`` (B, R) (float32), and
        non-tensors ``uid`` (group id), ``rollout_id``, ``is_padding``.

    Raises:
        ValueError: if ``rows`` is empty or a row starts with a sampled token.
    """
    if not rows:
        raise ValueError("no rows")
    rows = [_padded(br, pad_token_id) for br in rows]
    splits = [split_point(br) for br in rows]
    p_len = max(splits)
    r_len = max(br.num_tokens - s for br, s in zip(rows, splits, strict=True))
    b = len(rows)
    prompts = torch.full((b, p_len), pad_token_id, dtype=torch.long)
    responses = torch.full((b, r_len), pad_token_id, dtype=torch.long)
    attention = torch.zeros((b, p_len + r_len), dtype=torch.long)
    response_mask = torch.zeros((b, r_len), dtype=torch.long)
    logprobs = torch.zeros((b, r_len), dtype=torch.float32)
    advantages = torch.zeros((b, r_len), dtype=torch.float32)
    for i, (br, s) in enumerate(zip(rows, splits, strict=True)):
        row = br.row
        n_resp = len(row.input_ids) - s
        prompts[i, p_len - s :] = torch.tensor(row.input_ids[:s])
        responses[i, :n_resp] = torch.tensor(row.input_ids[s:])
        attention[i, p_len - s : p_len + n_resp] = 1
        response_mask[i, :n_resp] = torch.tensor(row.loss_mask[s:])
        logprobs[i, :n_resp] = torch.tensor(row.logprobs[s:], dtype=torch.float32)
        advantages[i, :n_resp] = br.advantage * response_mask[i, :n_resp].float()
    tensors = {
        "prompts": prompts,
        "responses": responses,
        "input_ids": torch.cat([prompts, responses], dim=1),
        "attention_mask": attention,
        "position_ids": compute_position_id_with_mask(attention),
        "response_mask": response_mask,
        "old_log_probs": logprobs,
        "rollout_log_probs": logprobs.clone(),
        "advantages": advantages,
    }
    non_tensors = {
        "uid": np.array([br.row.group_id or br.row.rollout_id for br in rows], dtype=object),
        "rollout_id": np.array([br.row.rollout_id for br in rows], dtype=object),
        "is_padding": np.array([br.padding for br in rows], dtype=bool),
    }
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors, meta_info=dict(meta_info or {}))


def actor_update_meta(batch: OuterBatch, rollouts_per_mini_batch: int, seed: int = 42) -> dict[str, Any]:
    """The non-tensor keys ``train_mini_batch`` / ``train_batch`` read for this batch.

    ``fixed_steps``: ``num_mini_batch`` (the count) and no ``mini_batch_size``;
    ``fixed_rows``: ``mini_batch_size`` = rows per mini-batch (verl's default behaviour).
    Always ``shuffle=False`` (keeps rollouts in their mini-batch), ``global_batch_size`` =
    ``rollouts_per_mini_batch`` (the fixed ``seq-mean-token-sum`` denominator), dynamic
    micro-batches under ``micro_batch_max_tokens`` per GPU.
    """
    cfg = batch.config
    meta: dict[str, Any] = {
        "epochs": cfg.ppo_epochs,
        "seed": seed,
        "dataloader_kwargs": {"shuffle": False},
        "global_batch_size": rollouts_per_mini_batch,
        "use_dynamic_bsz": True,
        "max_token_len_per_gpu": cfg.micro_batch_max_tokens,
        "compute_loss": True,
    }
    if cfg.mode == "fixed_rows":
        meta["mini_batch_size"] = cfg.rows_per_mini_batch
    else:
        meta["num_mini_batch"] = batch.plan.num_mini_batches
    return meta


def to_actor_tensordict(
    batch: OuterBatch, rollouts_per_mini_batch: int, pad_token_id: int = 0, seed: int = 42
) -> TensorDict:
    """The TensorDict to pass to verl's ``update_actor`` / ``train_mini_batch`` for one batch.

    Rows are rank-major (:meth:`OuterBatch.rows_in_order`), converted with
    :func:`rows_to_dataproto`, ``DataProto.to_tensordict`` and verl's
    ``left_right_2_no_padding``, then tagged with :func:`actor_update_meta`.
    """
    proto = rows_to_dataproto(batch.rows_in_order(), pad_token_id)
    td = left_right_2_no_padding(proto.to_tensordict())
    tu.assign_non_tensor(td, **actor_update_meta(batch, rollouts_per_mini_batch, seed))
    return td
