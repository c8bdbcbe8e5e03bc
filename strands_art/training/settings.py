"""The settings of one ``strands-art train`` run: one frozen object, defaults in one place.

Built by the command line (:mod:`strands_art.training.train_cli`), the notebook and the async
bench alike. A value is taken, in this order, from the command line (or the caller), from the
environment's recommended ``defaults`` (:class:`~strands_art.training.environment.TrainEnvironment`),
then from :data:`DEFAULTS`. The resolved settings are saved as ``RUN_DIR/train.json``; ``--resume``
reads them back, so a resumed run trains with exactly the settings it started with.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from strands_art.backends.base import SamplingParams
from strands_art.training.old_logprobs import OLD_LOGPROBS_CHOICES, resolve_old_logprobs
from strands_art.training.precision import AUTOCAST_CHOICES
from strands_art.validation import (
    UsageError,
    check_bool,
    check_float,
    check_http_url,
    check_int,
    check_path,
    check_sampling,
)

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
    "launch_after_step": 0,
    "max_draws": None,
    "skip_tied": 0.0,
    "share_prefix": False,
    "gradient_checkpointing": False,
    "autocast": "off",
    "sampler_dtype": "float32",
    "train_truncated": False,
    "old_logprobs": "auto",
    "batching": "fixed-steps",
    "rows_per_mini_batch": None,
    "history_mode": None,
    "train_tasks": None,
    "eval_tasks": None,
    "prompt": None,
    "wandb": False,
    "ray": None,
}
"""Every setting's default, unless the environment recommends another. ``history_mode`` None: the
environment's gateway decides (the bundled ones recommend ``linear``)."""

BATCHING_CHOICES: tuple[str, ...] = ("fixed-steps", "fixed-rows")
"""``--batching``: ``fixed-steps`` (``--prompt-batch / --ppo-mini-batch x --epochs`` optimizer steps
per outer batch whatever the row count; the default and the recommendation) or ``fixed-rows``
(mini-batches of ``--rows-per-mini-batch`` rows, default ``--ppo-mini-batch x --rollouts-per-prompt``:
more rows, more optimizer steps; the baseline the design fixed, kept to measure it,
docs/variable-row-batching.md)."""

SAMPLER_DTYPE_CHOICES: tuple[str, ...] = ("float32", "bfloat16")
"""``--sampler-dtype``: the ``--dtype`` of the vLLM server ``train`` starts. ``float32`` (default):
the recorded logprobs equal a float32 recomputation to ~1e-4; ``bfloat16``: faster on a CPU with
AVX512-BF16/AMX, its logprobs ~0.0015 nats from float32 on average (bench/vllm_dtype.py,
docs/setup-vllm.md)."""

FLAG_OF = {key: "--" + key.replace("_", "-") for key in DEFAULTS}
"""The command-line flag of each setting."""

_CONFIG_FLAGS = {
    "prompt_batch_size": "--prompt-batch",
    "ppo_mini_batch_size": "--ppo-mini-batch",
    "ppo_epochs": "--epochs",
    "learning_rate": "--lr",
    "lr_warmup_steps": "--warmup-steps",
    "micro_batch_max_tokens": "--micro-batch-tokens",
    **{
        key: FLAG_OF[key]
        for key in ("rollouts_per_prompt", "share_prefix", "gradient_checkpointing", "lora_rank")
    },
}
""":class:`TrainerConfig` field -> the ``train`` flag it comes from (:meth:`TrainSettings.trainer_config`),
for its error messages."""

INT_RANGES: dict[str, tuple[int, int]] = {
    "outer_batches": (1, 10**6),
    "prompt_batch": (1, 10**6),
    "rollouts_per_prompt": (1, 4096),
    "ppo_mini_batch": (1, 10**6),
    "epochs": (1, 1000),
    "warmup_steps": (0, 10**9),
    "lora_rank": (1, 4096),
    "micro_batch_tokens": (1, 1 << 24),
    "max_turns": (1, 10**4),  # or None: the environment's own limit
    "eval_samples": (1, 10**4),
    "eval_every": (0, 10**9),
    "checkpoint_every": (0, 10**9),
    "concurrency": (1, 10**4),
    "seed": (0, 2**63 - 1),
    "threads": (1, 4096),  # or None: torch's default
    "max_staleness": (0, 1000),
    "launch_after_step": (0, 10**6),
    "max_draws": (1, 10**6),  # or None: --prompt-batch
    "rows_per_mini_batch": (1, 10**6),  # or None: fixed-steps batching
}
"""The integer settings' ranges (inclusive), checked with the flag's name in the message."""

FLOAT_RANGES: dict[str, tuple[float, float, bool]] = {
    "lr": (0.0, 1e3, True),
    "kl_coef": (0.0, 1e3, False),
    "max_grad_norm": (0.0, 1e9, True),  # or None: no clipping
    "eval_temperature": (0.0, 100.0, False),
    "skip_tied": (0.0, 1.0, False),
}
"""The real-valued settings' ranges ``(lo, hi, lo_open)``; ``--temperature`` and
``--max-new-tokens`` are checked by :func:`strands_art.validation.check_sampling`, as in ``serve``."""


def check_ranges(given: Mapping[str, Any]) -> None:
    """Each number of ``given`` (settings by key; None: not given) in its range (:data:`INT_RANGES`,
    :data:`FLOAT_RANGES`), alone: what ``train --resume`` checks of the flags it restates before it
    compares them with the run's (``--skip-tied 2`` is out of range, not a difference).

    Raises:
        UsageError: naming the flag, its range and the value.
    """
    for key, value in given.items():
        if value is None:
            continue
        if key in INT_RANGES:
            check_int(FLAG_OF[key], value, *INT_RANGES[key])
        elif key in FLOAT_RANGES:
            lo, hi, lo_open = FLOAT_RANGES[key]
            check_float(FLAG_OF[key], value, lo, hi, lo_open=lo_open)


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
    share_prefix: bool
    old_logprobs: str
    train_tasks: str | None
    eval_tasks: str | None
    wandb: bool
    prompt: str | None = None
    gradient_checkpointing: bool = False
    ray: str | None = None
    launch_after_step: int = 0
    max_draws: int | None = None
    skip_tied: float = 0.0
    batching: str = "fixed-steps"
    rows_per_mini_batch: int | None = None
    history_mode: str | None = None
    autocast: str = "off"
    sampler_dtype: str = "float32"
    train_truncated: bool = False

    @classmethod
    def resolve(
        cls,
        env: str,
        run_dir: str,
        given: Mapping[str, Any],
        env_defaults: Mapping[str, Any] = {},
        cross_checks: bool = True,
    ) -> TrainSettings:
        """Settings from ``given`` (None = not given), else ``env_defaults``, else :data:`DEFAULTS`.

        ``cross_checks=False`` checks each value alone, not the sizes that depend on each other
        (the command's first pass, before the environment's recommended values are known).

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
        if values["trainer"] == "verl":  # its strands_sync trainer is synchronous
            if given.get("max_staleness") not in (None, 0):
                raise UsageError(
                    "--max-staleness: the verl launch trains synchronously (trainer.v1.trainer_mode="
                    "strands_sync); asynchronous rollouts are the embedded trainer's"
                )
            if given.get("launch_after_step") not in (None, 0):
                raise UsageError(
                    "--launch-after-step: the verl launch trains synchronously (trainer.v1.trainer_mode="
                    "strands_sync); asynchronous rollouts are the embedded trainer's"
                )
            for key in ("max_draws", "skip_tied"):
                if given.get(key) not in (None, 0, 0.0) and not (
                    key == "max_draws" and given[key] == values["prompt_batch"]
                ):
                    raise UsageError(
                        f"{FLAG_OF[key]}: dynamic sampling is the embedded trainer's loop "
                        "(strands_art.training.dynamic_sampling); the verl launch draws its own batches"
                    )
            if given.get("autocast") not in (None, "off"):
                raise UsageError(
                    "--autocast: the embedded trainer's precision; the verl launch trains in verl's own "
                    "(its actor's FSDP mixed-precision settings)"
                )
            values["max_staleness"] = 0  # what the launch does, whatever the default
        # saved resolved: a resumed run keeps what it trained with
        values["old_logprobs"] = resolve_old_logprobs(values["old_logprobs"], values["max_staleness"])
        if values["batching"] == "fixed-rows" and values["rows_per_mini_batch"] is None:
            # verl's ppo_mini_batch_size * rollout.n, saved resolved (train.json says what ran)
            values["rows_per_mini_batch"] = values["ppo_mini_batch"] * values["rollouts_per_prompt"]
        if given.get("vllm_url") is not None and given.get("backend") is None:
            values["backend"] = "vllm"  # a server named is a server to sample from
        settings = cls(env=env, run_dir=str(run_dir), **values)
        settings.check(cross_checks)  # before any model is loaded
        return settings

    def check(self, cross_checks: bool = True) -> None:
        """Check every value, the message naming its flag, as ``serve`` and ``migrate`` do
        (:mod:`strands_art.validation`), then the sizes :class:`TrainerConfig` checks
        (``--prompt-batch`` divisible by ``--ppo-mini-batch``, ...). Also run on a resumed run's
        ``train.json`` (it may have been edited by hand).

        Raises:
            UsageError: a value of the wrong kind or out of range, an empty ``--train-tasks`` or
                ``--eval-tasks``, or ``--vllm-url`` with ``--backend transformers``.
            ValueError: sizes :class:`TrainerConfig` refuses.
        """
        for key, (lo, hi) in INT_RANGES.items():
            value = getattr(self, key)
            if value is not None or key not in ("max_turns", "threads", "max_draws", "rows_per_mini_batch"):
                check_int(FLAG_OF[key], value, lo, hi)
        for key, (lo, hi, lo_open) in FLOAT_RANGES.items():
            value = getattr(self, key)
            if value is not None or key != "max_grad_norm":
                check_float(FLAG_OF[key], value, lo, hi, lo_open=lo_open)
        check_sampling(self.temperature, self.max_new_tokens)
        for key, choices in (
            ("backend", ("transformers", "vllm")),
            ("trainer", ("embedded", "verl")),
            ("old_logprobs", OLD_LOGPROBS_CHOICES),
            ("batching", BATCHING_CHOICES),
            ("autocast", AUTOCAST_CHOICES),
            ("sampler_dtype", SAMPLER_DTYPE_CHOICES),
        ):
            if getattr(self, key) not in choices:
                raise UsageError(
                    f"{FLAG_OF[key]} must be one of {', '.join(choices)}, got {getattr(self, key)!r}"
                )
        self._check_batching_and_history()
        for key in ("train_tasks", "eval_tasks"):  # an unset variable would mean the defaults
            check_path(FLAG_OF[key], getattr(self, key))
        if self.prompt is not None and (not isinstance(self.prompt, str) or not self.prompt):
            raise UsageError(f"--prompt must be a non-empty name, got {self.prompt!r}")
        for key in ("share_prefix", "gradient_checkpointing", "wandb", "train_truncated"):
            check_bool(FLAG_OF[key], getattr(self, key))
        if self.sampler_dtype != "float32":
            self._check_sampler_server()
        if self.vllm_url is not None:
            check_http_url("--vllm-url", self.vllm_url)
            if self.backend != "vllm":
                raise UsageError(
                    "--vllm-url names a vLLM server: it needs --backend vllm, not --backend " + self.backend
                )
        if not cross_checks:
            return
        from strands_art.training.batching import plan

        try:
            config = self.trainer_config()
            steps = plan(self.prompt_batch * self.rollouts_per_prompt, config.batching()).optimizer_steps
        except ValueError as exc:  # TrainerConfig names its fields: the user typed flags
            message = str(exc)
            for field_name, flag in {
                **_CONFIG_FLAGS,
                "num_rows": "--prompt-batch x --rollouts-per-prompt",
            }.items():
                message = re.sub(rf"\b{field_name}\b", flag, message)
            raise ValueError(message) from exc
        self._check_launch(steps)
        if self.max_draws is not None and self.max_draws < self.prompt_batch:
            raise UsageError(
                f"--max-draws must be at least --prompt-batch ({self.prompt_batch}): the groups drawn for one "
                f"update include the ones it trains on; got {self.max_draws}"
            )

    def _check_batching_and_history(self) -> None:
        """``--batching``, ``--rows-per-mini-batch`` and ``--history-mode`` (see :data:`BATCHING_CHOICES`).

        Raises:
            UsageError: a history mode other than tree or linear; ``--rows-per-mini-batch`` without
                ``--batching fixed-rows`` or fixed-rows without it (a hand-edited ``train.json``);
                fixed-rows with ``--max-staleness`` >= 1 (the staleness rule counts updates in a
                fixed number of optimizer steps, which fixed-rows does not have); fixed-rows or a
                history mode with ``--trainer verl`` (its launch takes neither).
        """
        if self.history_mode not in (None, "tree", "linear"):
            raise UsageError(f"--history-mode must be one of tree, linear, got {self.history_mode!r}")
        fixed_rows = self.batching == "fixed-rows"
        if fixed_rows != (self.rows_per_mini_batch is not None):
            raise UsageError(
                "--rows-per-mini-batch is the mini-batch size of --batching fixed-rows: give it with "
                f"fixed-rows only (got --batching {self.batching}, --rows-per-mini-batch {self.rows_per_mini_batch})"
            )
        if fixed_rows and self.max_staleness:
            raise UsageError(
                "--batching fixed-rows takes as many optimizer steps as the rows need, so an update has no "
                "fixed size for the staleness rule to count in: use it with --max-staleness 0"
            )
        if self.trainer == "verl" and (fixed_rows or self.history_mode is not None):
            raise UsageError(
                "--batching fixed-rows and --history-mode are the embedded trainer's: the verl launch trains "
                "with fixed steps (strands_sync) and its agent loop's own history mode"
            )

    def _check_launch(self, steps_per_update: int) -> None:
        """``--launch-after-step J``: 0 <= J < the optimizer steps of one update, and only asynchronous."""
        if self.launch_after_step and self.max_staleness == 0:
            raise UsageError(
                f"--launch-after-step {self.launch_after_step} needs --max-staleness >= 1: the synchronous "
                "loop launches no rollouts while it updates"
            )
        if self.launch_after_step >= steps_per_update:
            raise UsageError(
                f"--launch-after-step must be below the optimizer steps of one update ({steps_per_update}: "
                f"--prompt-batch / --ppo-mini-batch x --epochs), got {self.launch_after_step}; "
                "launching after the last step is --max-staleness 0"
            )

    def _check_sampler_server(self) -> None:
        """A ``--sampler-dtype`` other than float32 needs the vLLM server ``train`` starts itself.

        Raises:
            UsageError: with ``--trainer verl``, a backend other than vllm, or ``--vllm-url``.
        """
        if self.trainer == "verl":
            raise UsageError(
                f"--sampler-dtype {self.sampler_dtype}: the precision of the vLLM server the embedded trainer "
                "starts; the verl launch samples with verl's own rollout settings"
            )
        if self.backend != "vllm":
            raise UsageError(
                f"--sampler-dtype {self.sampler_dtype} sets the vLLM server train starts: it needs --backend "
                f"vllm (this run: --backend {self.backend})"
            )
        if self.vllm_url is not None:
            raise UsageError(
                f"--sampler-dtype {self.sampler_dtype} sets the vLLM server train starts, and --vllm-url names "
                "one you run: that server keeps the --dtype it was started with"
            )

    def trainer_config(self) -> TrainerConfig:
        """The :class:`TrainerConfig` of these settings (LoRA alpha = 2 x rank)."""
        from strands_art.training.grpo import GRPOConfig
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
            share_prefix=self.share_prefix,
            gradient_checkpointing=self.gradient_checkpointing,
            autocast=self.autocast,
            old_logprobs=self.old_logprobs,
            batching_mode="fixed_rows" if self.batching == "fixed-rows" else "fixed_steps",
            rows_per_mini_batch=self.rows_per_mini_batch,
            grpo=GRPOConfig(train_truncated=self.train_truncated),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrainSettings:
        """Inverse of :meth:`to_dict`; keys a newer version added take their defaults, except
        ``old_logprobs``: ``rollout`` and ``train_truncated``: true, what every run saved before
        the setting existed trained with."""
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown keys in train.json: {sorted(unknown)}")
        return cls(**{**DEFAULTS, "old_logprobs": "rollout", "train_truncated": True, **d})

    def command(self) -> str:
        """The ``strands-art train`` command line that gives these settings (every option spelled out)."""
        parts = ["strands-art", "train", "--env", self.env, "--run-dir", self.run_dir]
        for key, value in self.to_dict().items():
            flag = "--" + key.replace("_", "-")
            if key == "train_truncated":  # environments differ in their recommendation: always spelled out
                parts.append(flag if value else "--no-train-truncated")
                continue
            if key in ("env", "run_dir") or value is None or value is False:
                continue
            parts += [flag] if value is True else [flag, str(value)]
        return shlex.join(parts)

    def save(self, run_dir: str | Path) -> None:
        path = Path(run_dir) / "train.json"
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, run_dir: str | Path) -> TrainSettings:
        """The settings a run was started with (``RUN_DIR/train.json``), with ``run_dir`` the
        directory given (the one saved in the file is ignored: a copied run resumes in its copy).

        Raises:
            FileNotFoundError: the directory holds no ``train.json`` (not a ``train`` run).
            ValueError, UsageError: ``train.json`` is not a JSON object of valid settings (named
                with the file).
        """
        path = Path(run_dir) / "train.json"
        if not path.exists():
            raise FileNotFoundError(f"{path} not found: {run_dir} is not a `strands-art train` run directory")
        if path.is_symlink() or not path.is_file():
            raise ValueError(f"{path} is not a regular file (a symlink or a directory)")
        try:
            data = json.loads(path.read_bytes().decode("utf-8"))
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"{path} is not JSON: {str(exc)[:200]}") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path} holds a JSON {type(data).__name__}, not an object of settings")
        if not isinstance(data.get("env"), str) or not data["env"]:
            raise ValueError(f"{path}: 'env' must be a non-empty string, got {data.get('env')!r}"[:300])
        # the directory given is the run: a run_dir saved in train.json (a copied run's original,
        # or a hand-edited one) is ignored, so a resume writes only into run_dir
        settings = cls.from_dict({**data, "run_dir": str(run_dir)})
        try:
            settings.check()
        except UsageError as exc:  # the user typed none of it: say where it is
            raise UsageError(f"{path}: {exc}") from None
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        return settings
