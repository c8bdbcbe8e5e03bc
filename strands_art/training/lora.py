"""The LoRA adapter the embedded trainer optimizes (peft), with seeded initial weights."""

from __future__ import annotations

from typing import Any

import torch

from strands_art.training.trainer_config import TrainerConfig


def lora_model(model: Any, config: TrainerConfig) -> Any:
    """Wrap ``model`` in a fresh LoRA adapter (dropout 0, bias none); a peft model is returned as is.

    The adapter's initial weights (peft's Kaiming-uniform ``lora_A``, zero ``lora_B``) are drawn
    from a torch generator seeded with ``config.seed`` (the global RNG state is saved and
    restored): the same seed gives the same adapter whatever ran before.
    """
    from peft import LoraConfig, PeftModel, get_peft_model

    if isinstance(model, PeftModel):
        return model
    targets = config.lora_target_modules
    lora = LoraConfig(
        r=config.lora_rank,
        lora_alpha=config.lora_alpha,
        lora_dropout=0.0,
        target_modules=targets if isinstance(targets, str) else list(targets),
        bias="none",
        task_type="CAUSAL_LM",
    )
    with torch.random.fork_rng(devices=[]):  # peft draws on CPU, then moves to the base device
        torch.manual_seed(config.seed)
        return get_peft_model(model, lora)
