"""Configuration of the embedded (one-machine) GRPO trainer.

One frozen dataclass holds everything :class:`~strands_art.training.local.LocalTrainer` and the
outer loop (:mod:`strands_art.training.loop`) need: the step-stable batching sizes (counted in
source prompts, see docs/variable-row-batching.md), LoRA, AdamW, the PPO loss, GRPO advantages,
sampling for rollouts and for evaluation, and the loop's cadence (checkpoints, evaluation).
It round-trips through JSON (``to_dict`` / ``from_dict``) so a checkpoint records the run it
belongs to.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from strands_art.backends.base import SamplingParams
from strands_art.training.batching import BatchingConfig, Mode
from strands_art.training.grpo import GRPOConfig
from strands_art.training.loss import LossConfig
from strands_art.training.old_logprobs import OLD_LOGPROBS_CHOICES
from strands_art.training.precision import check_autocast
from strands_art.validation import is_int, is_real

_INT_FIELDS = (
    "prompt_batch_size",
    "rollouts_per_prompt",
    "ppo_mini_batch_size",
    "ppo_epochs",
    "micro_batch_max_tokens",
    "lr_warmup_steps",
    "lora_rank",
    "lora_alpha",
    "seed",
    "concurrency",
    "checkpoint_every",
    "keep_checkpoints",
    "eval_every",
    "eval_samples",
)

_REAL_FIELDS = ("learning_rate", "weight_decay", "max_grad_norm")


@dataclass(frozen=True)
class TrainerConfig:
    """Embedded-trainer settings.

    Attributes:
        prompt_batch_size: tasks (source prompts) per outer batch, ``P``.
        rollouts_per_prompt: rollouts per task, the GRPO group size.
        ppo_mini_batch_size: tasks per PPO mini-batch, ``M`` (one optimizer step each).
        ppo_epochs: passes over an outer batch, ``E``; optimizer steps per outer batch = P/M*E.
        batching_mode / rows_per_mini_batch: ``"fixed_steps"`` (default) or ``"fixed_rows"``
            (the old behaviour, for comparison; needs ``rows_per_mini_batch``).
        micro_batch_max_tokens: padded-token budget of one micro-batch (gradient accumulation).
        learning_rate / weight_decay / adam_betas: AdamW over the LoRA parameters.
        lr_warmup_steps: linear warmup, the ``s``-th optimizer step (1-based) counted from the
            first one with a nonzero gradient uses ``learning_rate * min(1, s / lr_warmup_steps)``
            (steps before it take learning rate 0); 0 (default): constant.
        max_grad_norm: clip the mini-batch gradient to this L2 norm (None: no clipping).
        lora_rank / lora_alpha / lora_target_modules: peft ``LoraConfig`` (dropout is always 0,
            so the trainer's logprobs match the sampler's).
        loss: PPO clip range, aggregation mode, TIS cap, KL penalty toward the base model.
        grpo: advantage settings (std scaling or Dr.GRPO).
        sampling: rollout sampling (the trainer computes its logprobs under the same
            temperature / top-k / top-p, :mod:`strands_art.backends.sampling`).
        eval_sampling: evaluation sampling (default greedy).
        old_logprobs: the ``old`` logprobs of the PPO ratio (the proximal policy; the recorded
            ones always enter the truncated importance weight ``min(exp(old - recorded), tis_cap)``):
            ``"rollout"`` (default): the recorded ones (then the weight is 1);
            ``"recompute"``: a no-grad trainer pass over the outer batch before its first
            optimizer step (decoupled PPO, Fu et al. 2025 "AReaL"; one extra forward pass);
            ``"first-pass"``: the trainer's own logprobs, detached, from the first optimizer step
            that trains the row in this update (no extra pass; the ratio is 1 there, so with one
            PPO epoch the clip never binds and the weight alone corrects a stale rollout; later
            epochs clip against it). See docs/training-update.md, "Asynchronous rollouts".
        share_prefix: run the longest common token prefix of each group's rows once and the
            rows' continuations on its KV cache (:mod:`strands_art.training.shared_prefix`):
            the same loss and gradients up to float rounding, with far fewer tokens when the
            prompt dominates (MigrationBench). Default False: the unshared pass stays the
            reference (bit for bit what earlier runs and checkpoints computed), and with short
            prompts sharing saves little while giving up batching rows of different groups.
        gradient_checkpointing: keep only each decoder layer's input during the optimizer steps'
            forward passes and recompute the rest in the backward pass (transformers'
            non-reentrant activation checkpointing, the model in train mode for the update only):
            the same loss and gradients, one more forward pass of compute, activation memory of
            one layer instead of all of them. Default False. Measured on MigrationBench rows
            (Qwen2.5-Coder-0.5B float32, 8 rows up to 2,948 tokens): without it one update peaked
            at 16.5 GiB resident. It drops the KV cache, so it cannot be combined with
            ``share_prefix`` (refused).
        autocast: ``"off"`` (default: float32 throughout) or ``"bf16"``: the optimizer steps'
            passes under bfloat16 autocast, weights, adapter and optimizer state float32, the
            vocabulary projection float32 (:mod:`strands_art.training.precision`).
        seed: base seed for task sampling, rollout sampling seeds and torch.
        concurrency: rollouts in flight at once.
        checkpoint_every: save a checkpoint every this many outer batches (0: never).
        keep_checkpoints: how many recent checkpoints to keep on disk.
        eval_every: evaluate every this many outer batches (0: only before and after training).
        eval_samples: rollouts per evaluation task.

    Raises:
        ValueError: from :class:`BatchingConfig` for inconsistent sizes, a count that is not an
            int (``lr_warmup_steps=2.5`` or ``True``; numpy ints are taken), a learning rate /
            weight decay / max_grad_norm that is not a finite real (``True``, ``"1e-3"``, nan), a
            non-positive rollouts_per_prompt / learning rate / LoRA rank / max_grad_norm, a
            negative weight decay, or negative cadences, an unknown ``autocast``.
    """

    prompt_batch_size: int = 4
    rollouts_per_prompt: int = 4
    ppo_mini_batch_size: int = 2
    ppo_epochs: int = 1
    batching_mode: Mode = "fixed_steps"
    rows_per_mini_batch: int | None = None
    micro_batch_max_tokens: int = 1024
    learning_rate: float = 1e-3
    lr_warmup_steps: int = 0
    weight_decay: float = 0.0
    adam_betas: tuple[float, float] = (0.9, 0.99)
    max_grad_norm: float | None = 1.0
    lora_rank: int = 16
    lora_alpha: int = 32
    lora_target_modules: str | tuple[str, ...] = "all-linear"
    loss: LossConfig = field(default_factory=LossConfig)
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    sampling: SamplingParams = field(
        default_factory=lambda: SamplingParams(temperature=1.0, max_new_tokens=32)
    )
    eval_sampling: SamplingParams = field(
        default_factory=lambda: SamplingParams(temperature=0.0, max_new_tokens=32)
    )
    old_logprobs: str = "rollout"
    share_prefix: bool = False
    gradient_checkpointing: bool = False
    autocast: str = "off"
    seed: int = 0
    concurrency: int = 8
    checkpoint_every: int = 1
    keep_checkpoints: int = 2
    eval_every: int = 0
    eval_samples: int = 1

    def __post_init__(self) -> None:
        for name in _INT_FIELDS:  # 2.0 or True would pass the range checks and mislead
            value = getattr(self, name)
            if not is_int(value):
                raise ValueError(f"{name} must be an int, got {value!r}")
            object.__setattr__(self, name, int(value))  # numpy ints -> int (JSON)
        for name in _REAL_FIELDS:
            value = getattr(self, name)
            if value is None and name == "max_grad_norm":
                continue
            if not is_real(value):
                raise ValueError(f"{name} must be a finite real number (not a bool), got {value!r}")
            object.__setattr__(self, name, float(value))
        if self.weight_decay < 0 or (self.max_grad_norm is not None and self.max_grad_norm <= 0):
            raise ValueError(
                f"need weight_decay >= 0 and max_grad_norm > 0 or None, got {self.weight_decay}, {self.max_grad_norm}"
            )
        if self.old_logprobs not in OLD_LOGPROBS_CHOICES:
            raise ValueError(
                f"old_logprobs must be one of {', '.join(OLD_LOGPROBS_CHOICES)}, got {self.old_logprobs!r}"
            )
        for name in ("share_prefix", "gradient_checkpointing"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        check_autocast(self.autocast)
        if self.share_prefix and self.gradient_checkpointing:
            raise ValueError(
                "share_prefix runs the rows' continuations on the prefix's KV cache, which activation "
                "checkpointing drops: use one of share_prefix and gradient_checkpointing"
            )
        self.batching()  # validates the batching sizes
        if self.rollouts_per_prompt < 1:
            raise ValueError(f"rollouts_per_prompt must be >= 1, got {self.rollouts_per_prompt}")
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate}")
        if self.lora_rank < 1:
            raise ValueError(f"lora_rank must be >= 1, got {self.lora_rank}")
        for name in (
            "checkpoint_every",
            "eval_every",
            "lr_warmup_steps",
            "concurrency",
            "keep_checkpoints",
            "eval_samples",
        ):
            value = getattr(self, name)
            low = 1 if name in ("concurrency", "keep_checkpoints", "eval_samples") else 0
            if value < low:
                raise ValueError(f"{name} must be >= {low}, got {value}")

    def batching(self) -> BatchingConfig:
        """The :class:`BatchingConfig` of one outer batch (one data-parallel rank)."""
        return BatchingConfig(
            prompt_batch_size=self.prompt_batch_size,
            ppo_mini_batch_size=self.ppo_mini_batch_size,
            ppo_epochs=self.ppo_epochs,
            dp_size=1,
            mode=self.batching_mode,
            rows_per_mini_batch=self.rows_per_mini_batch,
            micro_batch_max_tokens=self.micro_batch_max_tokens,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (nested configs as dicts, tuples as lists)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainerConfig:
        """Inverse of :meth:`to_dict`; unknown keys raise ValueError. A config saved before
        ``old_logprobs`` existed spelled it ``recompute_old_logprobs`` (a bool); one saved before
        ``grpo.train_truncated`` existed trained truncated turns (True)."""
        d = dict(d)
        if "recompute_old_logprobs" in d and "old_logprobs" not in d:
            d["old_logprobs"] = "recompute" if d.pop("recompute_old_logprobs") else "rollout"
        grpo = d.get("grpo")
        if isinstance(grpo, dict) and "train_truncated" not in grpo:
            d["grpo"] = {**grpo, "train_truncated": "truncated" not in (grpo.get("exclude_turn_tags") or ())}
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown TrainerConfig keys: {sorted(unknown)}")
        kw = dict(d)
        nested = {
            "loss": LossConfig,
            "grpo": GRPOConfig,
            "sampling": SamplingParams,
            "eval_sampling": SamplingParams,
        }
        for key, typ in nested.items():
            if isinstance(kw.get(key), dict):
                sub = dict(kw[key])
                for k in ("stop", "stop_token_ids"):
                    if k in sub:
                        sub[k] = tuple(sub[k])
                kw[key] = typ(**sub)
        if "adam_betas" in kw:
            kw["adam_betas"] = tuple(kw["adam_betas"])
        if isinstance(kw.get("lora_target_modules"), list):
            kw["lora_target_modules"] = tuple(kw["lora_target_modules"])
        return cls(**kw)

    def replace(self, **changes: Any) -> TrainerConfig:
        """A copy with ``changes`` applied (validated again)."""
        return replace(self, **changes)


def config_changes(
    saved: dict[str, Any] | None, current: dict[str, Any], defaults: dict[str, Any] | None = None
) -> list[str]:
    """``"key: saved -> current"`` for each configuration entry (nested ones dotted) that differs
    between a checkpoint's saved ``TrainerConfig.to_dict()`` and the current one; [] when equal or
    when the checkpoint saved none. A key the checkpoint lacks (written before the option existed)
    is reported only if the current value is not the option's default (``(absent)`` then). JSON
    turns tuples into lists and NaN into NaN; those compare equal."""
    if not isinstance(saved, dict):
        return []
    if defaults is None:
        defaults = TrainerConfig().to_dict()
    out: list[str] = []
    for key in sorted(set(saved) | set(current)):
        new, default = current.get(key), defaults.get(key)
        if key not in saved:
            if _same(new, default):
                continue
            out.append(f"{key}: (absent) -> {new!r}")
            continue
        old = saved[key]
        if isinstance(old, dict) and isinstance(new, dict):
            sub = default if isinstance(default, dict) else {}
            out.extend(f"{key}.{c}" for c in config_changes(old, new, sub))
        elif not _same(old, new):
            out.append(f"{key}: {old!r} -> {new!r}")
    return out


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=repr) == json.dumps(b, sort_keys=True, default=repr)
