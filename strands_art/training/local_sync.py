"""A sampler that is a second in-process copy of the model: asynchronous rollouts on one machine.

With :class:`~strands_art.backends.transformers.TransformersBackend` sharing the trainer's model,
a rollout cannot sample while the trainer updates (the update holds the model's lock). For the
asynchronous loop (``max_staleness`` >= 1) :class:`CopySync` gives the sampler its own copy of the
model with the same LoRA adapter, and moves the trainer's adapter into it between outer batches,
the way :class:`~strands_art.training.weight_sync.LoRASync` moves it into a vLLM server:

- :meth:`CopySync.sync` (called by :meth:`LocalTrainer.update` after its last optimizer step,
  and with ``launch_after_step = J`` by the loop after step J) *stages* a copy of the new adapter
  tensors (a few MB);
- :meth:`CopySync.publish` (called by the loop before it launches an outer batch's rollouts;
  with ``J``, in the trainer's thread right after the step-J sync, before the next step can
  stage another) copies the staged tensors into the sampler's model under its lock and sets the
  backend's ``policy_version``.

Publishing only between launches means the rollouts of one outer batch all sample from one
policy version: with K = 1, batch ``b + 1`` samples from the weights before update ``b``
(exactly one update behind when it is trained; with ``J``, the weights after step J of update
``b``), whatever the timing, so runs are deterministic for a seed. With K >= 2 a publish can
land while the batch before is still running, so that holds for K = 1 only. The copy costs the model's memory once more (LoRA adapter and base weights).
"""

from __future__ import annotations

import copy
import os
import threading
import time
from collections.abc import Iterable
from typing import Any

import torch


class CopySync:
    """The trainer's LoRA adapter, copied into a sampler model between outer batches.

    Args:
        model: the trainer's peft model (copied once here, adapter included).
        tokenizer: its tokenizer (for the sampler backend).
        cores: CPU cores the sampler's generation thread is pinned to (None: not pinned).

    Attributes:
        backend: the ``TransformersBackend`` over the copy (pass it to the gateway).
        max_lora_rank: None (no server limit).
        sync_s: seconds the last :meth:`sync` took (staging).
        version: the policy version the sampler samples from.
    """

    max_lora_rank = None

    def __init__(self, model: Any, tokenizer: Any, cores: Iterable[int] | None = None) -> None:
        from strands_art.backends.transformers import TransformersBackend

        sampler = copy.deepcopy(model)
        sampler.eval()
        self.backend = TransformersBackend(model=sampler, tokenizer=tokenizer)
        self._params = {n: p for n, p in sampler.named_parameters() if "lora_" in n}
        if not self._params:
            raise ValueError("CopySync needs a peft model with a LoRA adapter")
        self._staged: tuple[int, dict[str, torch.Tensor]] | None = None
        self._stage_lock = threading.Lock()
        self.version = 0
        self.sync_s = 0.0
        if cores is not None:
            self.backend.run_on_sampler_thread(os.sched_setaffinity, 0, set(cores))

    def sync(self, model: Any, version: int) -> None:
        """Stage ``model``'s adapter as policy ``version`` (published by :meth:`publish`).

        Raises:
            KeyError: ``model``'s LoRA parameters do not match the sampler's.
        """
        t0 = time.perf_counter()
        tensors = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}
        if tensors.keys() != self._params.keys():
            raise KeyError("the trainer's LoRA parameters do not match the sampler copy's")
        with self._stage_lock:
            self._staged = (version, tensors)
        self.sync_s = time.perf_counter() - t0

    def publish(self) -> bool:
        """Load the staged adapter into the sampler (waits for a running generation); True if
        there was one to load."""
        with self._stage_lock:
            staged, self._staged = self._staged, None
        if staged is None:
            return False
        version, tensors = staged
        with self.backend.lock, torch.no_grad():
            for name, tensor in tensors.items():
                self._params[name].copy_(tensor)
            self.backend.policy_version = version
        self.version = version
        return True
