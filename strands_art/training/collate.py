"""Rows -> right-padded tensors for one micro-batch (the embedded trainer's input)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from strands_art.training.batching import BatchRow


def collate(rows: Sequence[BatchRow], pad_token_id: int = 0) -> dict[str, torch.Tensor]:
    """Right-pad rows to the longest one.

    Returns:
        ``input_ids`` (B, T) long, ``attention_mask`` (B, T) long (1 on real tokens),
        ``loss_mask`` (B, T) float (the rows' masks; 0 on padding), ``rollout_logprobs``
        (B, T) float32 (recorded logprobs, 0 off-mask), ``advantages`` (B,) float32.

    Raises:
        ValueError: if ``rows`` is empty or a row's aligned lists differ in length.
    """
    if not rows:
        raise ValueError("collate needs at least one row")
    width = max(r.num_tokens for r in rows)
    b = len(rows)
    input_ids = torch.full((b, width), pad_token_id, dtype=torch.long)
    attention = torch.zeros((b, width), dtype=torch.long)
    mask = torch.zeros((b, width), dtype=torch.float32)
    logprobs = torch.zeros((b, width), dtype=torch.float32)
    for i, br in enumerate(rows):
        br.row.check()
        n = br.num_tokens
        input_ids[i, :n] = torch.tensor(br.row.input_ids, dtype=torch.long)
        attention[i, :n] = 1
        mask[i, :n] = torch.tensor(br.row.loss_mask, dtype=torch.float32)
        logprobs[i, :n] = torch.tensor(br.row.logprobs, dtype=torch.float32)
    advantages = torch.tensor([br.advantage for br in rows], dtype=torch.float32)
    return {
        "input_ids": input_ids,
        "attention_mask": attention,
        "loss_mask": mask,
        "rollout_logprobs": logprobs,
        "advantages": advantages,
    }
