"""The settings of one ``strands-art train`` run: one frozen object, defaults in one place.

Built by the command line (:mod:`strands_art.training.train_cli`), the notebook and the async
bench alike. A value is taken, in this order, from the command line (or the caller), from the
environment's recommended ``defaults`` (:class:`~strands_art.training.environment.TrainEnvironment`),
then from :data:`DEFAULTS`. The resolved settings are saved as ``RUN_DIR/train.json``; ``--resume``
reads them back, so a resumed run trains with exactly the settings it started with.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from strands_art.backends.base import SamplingParams

if TYPE_CHECKING:  # torch behind them: imported where a config is built (``strands-art --help`` stays light)
    from strands_art.training.trainer_config import TrainerConfig

DEFAULTS: dict[str, Any] = {
    "model": "smollm2",
    "backend": "transformers",
    "vllm_url": None,
    "trainer": "embedded",
    "outer_batches": 10,
    "prompt_batch": 2,
    "rollouts_per_prompt": 4,
    "ppo_mini_batch": 1,
    "epochs": 1,
    "lr": 1e-4,
    "warmup_steps": 0,
    "kl_coef": 0.0,
    "max_grad_norm": 1.0,
    "lora_rank": 16,
    "micro_batch_tokens": 1024,
    "temperature": 1.0,
    "max_new_tokens": 64,
    "max_turns": None,
    "eval_temperature": 0.0,
    "eval_samples": 1,
    "eval_every": 0,
    "checkpoint_every": 1,
    "concurrency": 8,
    "seed": 0,
    "threads": None,
    "max_staleness": 1,
    "train_tasks": None,
    "eval_tasks": None,
    "wandb": False,
    "ray": None,
}
"""Every setting's default, unless the environment recommends another."""


@dataclass(frozen=True)
class TrainSettings:
    """One run's settings (the command's options, ``-`` spelled ``_``). See ``strands-art train --help``."""

    env: str
    run_dir: str
    model: str
    backend: str
    vllm_url: str | None
    trainer: str
    outer_batches: int
    prompt_batch: int
    rollouts_per_prompt: int
    ppo_mini_batch: int
    epochs: int
    lr: float
    warmup_steps: int
    kl_coef: float
    max_grad_norm: float | None
    lora_rank: int
    micro_batch_tokens: int
    temperature: float
    max_new_tokens: int
    max_turns: int | None
    eval_temperature: float
    eval_samples: int
    eval_every: int
    checkpoint_every: int
    concurrency: int
    seed: int
    threads: int | None
    max_staleness: int
    train_tasks: str | None
    eval_tasks: str | None
    wandb: bool
    ray: str | None = None

    @classmethod
    def resolve(
        cls, env: str, run_dir: str, given: Mapping[str, Any], env_defaults: Mapping[str, Any] = {}
    ) -> TrainSettings:
        """Settings from ``given`` (None = not given), else ``env_defaults``, else :data:`DEFAULTS`.

        Raises:
            ValueError: an unknown key, or settings :class:`TrainerConfig` refuses.
        """
        unknown = (set(given) | set(env_defaults)) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"unknown settings: {sorted(unknown)}")
        values = {}
        for key, default in DEFAULTS.items():
            value = given.get(key)
            values[key] = value if value is not None else env_defaults.get(key, default)
        settings = cls(env=env, run_dir=str(run_dir), **values)
        settings.trainer_config()  # validate now, before any model is loaded
        if settings.max_staleness < 0:
            raise ValueError(f"--max-staleness must be >= 0, got {settings.max_staleness}")
        return settings

    def trainer_config(self) -> TrainerConfig:
        """The :class:`TrainerConfig` of these settings (LoRA alpha = 2 x rank)."""
        from strands_art.training.loss import LossConfig
        from strands_art.training.trainer_config import TrainerConfig

        return TrainerConfig(
            prompt_batch_size=self.prompt_batch,
            rollouts_per_prompt=self.rollouts_per_prompt,
            ppo_mini_batch_size=self.ppo_mini_batch,
            ppo_epochs=self.epochs,
            learning_rate=self.lr,
            lr_warmup_steps=self.warmup_steps,
            loss=LossConfig(kl_coef=self.kl_coef),
            max_grad_norm=self.max_grad_norm,
            lora_rank=self.lora_rank,
            lora_alpha=2 * self.lora_rank,
            micro_batch_max_tokens=self.micro_batch_tokens,
            sampling=SamplingParams(temperature=self.temperature, max_new_tokens=self.max_new_tokens),
            eval_sampling=SamplingParams(
                temperature=self.eval_temperature, max_new_tokens=self.max_new_tokens
            ),
            eval_samples=self.eval_samples,
            eval_every=self.eval_every,
            checkpoint_every=self.checkpoint_every,
            concurrency=self.concurrency,
            seed=self.seed,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrainSettings:
        """Inverse of :meth:`to_dict`; keys a newer version added take their defaults."""
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown keys in train.json: {sorted(unknown)}")
        return cls(**{**DEFAULTS, **d})

    def command(self) -> str:
        """The ``strands-art train`` command line that gives these settings (every option spelled out)."""
        parts = ["strands-art", "train", "--env", self.env, "--run-dir", self.run_dir]
        for key, value in self.to_dict().items():
            if key in ("env", "run_dir") or value is None or value is False:
                continue
            flag = "--" + key.replace("_", "-")
            parts += [flag] if value is True else [flag, str(value)]
        return shlex.join(parts)

    def save(self, run_dir: str | Path) -> None:
        path = Path(run_dir) / "train.json"
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, run_dir: str | Path) -> TrainSettings:
        """The settings a run was started with (``RUN_DIR/train.json``).

        Raises:
            FileNotFoundError: the directory holds no ``train.json`` (not a ``train`` run).
        """
        path = Path(run_dir) / "train.json"
        if not path.exists():
            raise FileNotFoundError(f"{path} not found: {run_dir} is not a `strands-art train` run directory")
        return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))
