"""The embedded trainer's arithmetic precision: float32 throughout, or bfloat16 autocast.

``TrainerConfig.autocast`` (``strands-art train --autocast``):

- ``"off"`` (default): every forward and backward pass in the model's dtype (float32 for the
  supported models): the reference, bit for bit what earlier runs computed.
- ``"bf16"``: the optimizer steps' passes (and the ``recompute`` pass of the old logprobs) run
  under ``torch.autocast(dtype=torch.bfloat16)``: the decoder's matrix products in bfloat16, the
  weights, the LoRA adapter, its gradients and AdamW's state stay float32. The vocabulary
  projection (the output embeddings, applied only before sampled tokens: ``logits_to_keep``) runs
  in float32 on the float32 copy of the hidden state: bfloat16 logits (8 bits of mantissa) would
  put ~0.06 nats of rounding on a logit of 20. On a CPU with AVX512-BF16 or AMX the matrix
  products run faster (bench/update_memory.py ``--variants checkpointed,checkpointed-bf16``
  measures it on a recorded outer batch; docs/training-update.md, "Precision"); elsewhere
  PyTorch emulates bfloat16 and it can be slower.

What it costs: the trainer's logprobs move away from the sampler's float32 ones (measured as the
update's ``logprob_abs_gap``, the mean |trainer - rollout| logprob on the first step's sampled
tokens); the PPO ratio and the truncated importance weight see that gap as if the policy had
moved. Use it with ``old_logprobs="recompute"`` to compare the ratio against the trainer's own
bfloat16 logprobs. :meth:`LocalTrainer.score` (the logprob mismatch the viewer shows) stays float32.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

AUTOCAST_CHOICES: tuple[str, ...] = ("off", "bf16")
"""The values of ``TrainerConfig.autocast`` / ``--autocast``."""


def check_autocast(value: Any) -> str:
    """``value`` if it is one of :data:`AUTOCAST_CHOICES`.

    Raises:
        ValueError: anything else (named with the choices).
    """
    if value not in AUTOCAST_CHOICES:
        raise ValueError(f"autocast must be one of {', '.join(AUTOCAST_CHOICES)}, got {value!r}")
    return value


@contextlib.contextmanager
def autocast(model: Any, mode: str) -> Iterator[None]:
    """Run the block under ``mode`` (see the module docstring); ``"off"`` does nothing.

    With ``"bf16"``, ``model.get_output_embeddings()`` (a ``torch.nn.Linear``: the vocabulary
    projection) computes in float32 for the block and gets its own ``forward`` back after it.

    Raises:
        ValueError: an unknown ``mode``; a model whose output embeddings are not a
            ``torch.nn.Linear`` (the projection could not be kept in float32).
    """
    if check_autocast(mode) == "off":
        yield
        return
    import torch  # here: the settings import this module's choices without torch
    import torch.nn.functional as F

    head = model.get_output_embeddings()
    if not isinstance(head, torch.nn.Linear):
        raise ValueError(f"--autocast bf16 needs a linear output projection, got {type(head).__name__}")
    device_type = next(model.parameters()).device.type

    def float32_forward(hidden: Any) -> Any:  # (B, K, H) -> (B, K, V) float32
        with torch.autocast(device_type, enabled=False):
            bias = None if head.bias is None else head.bias.float()
            return F.linear(hidden.float(), head.weight.float(), bias)

    head.forward = float32_forward  # an instance attribute: nn.Module.__call__ finds it first
    try:
        with torch.autocast(device_type, dtype=torch.bfloat16):
            yield
    finally:
        del head.forward  # the class's forward again
