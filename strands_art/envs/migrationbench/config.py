"""How one MigrationBench rollout is run: :class:`RolloutConfig`, the single home of its defaults.

Every way of running the migration agent builds one: ``strands-art migrate`` from its flags
(:func:`.runner_args.rollout_config`), the embedded training loop
(:func:`.episodes.migrationbench_rollout`, ``strands-art train --env migrationbench``), verl's
agent loop from the YAML's ``episode_kwargs`` (:func:`.episodes.migrationbench_episode`), and
:func:`.rollout.run_rollout` reads it. The agent's hook (:class:`.agent.RolloutLimits`) and the
shell tool (:mod:`.commands`) take their defaults from here too.

A leaf module: it imports nothing but :mod:`strands_art.validation`, so ``--help`` stays light.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from strands_art.validation import UsageError, check_bool, check_float, check_int

# field -> ("int", lowest, highest) | ("float", lowest, highest, lowest excluded) | ("bool",)
_RANGES: dict[str, tuple[Any, ...]] = {
    "max_turns": ("int", 1, 100_000),
    "time_limit": ("float", 0.0, 7 * 86400.0, True),
    "command_timeout": ("float", 0.0, 86400.0, True),
    "max_output_bytes": ("int", 2, 1 << 30),
    "build_timeout": ("float", 0.0, 86400.0, True),
    "unsafe_no_sandbox": ("bool",),
    "compact_prompt": ("bool",),
    "user_recipe": ("bool",),
}

LIMIT_FIELDS = ("max_turns", "time_limit", "command_timeout", "max_output_bytes", "build_timeout")
"""The per-rollout limits: what ``migrate`` has a flag for and verl's ``episode_kwargs`` may set."""


def check_values(values: Mapping[str, Any], name: Callable[[str], str] = str) -> dict[str, Any]:
    """``values`` (a subset of :class:`RolloutConfig`'s fields) checked and normalized (ints as
    ``int``, reals as ``float``).

    Args:
        values: field -> value.
        name: how an error names a field (default: the field itself; the CLI passes its flag).

    Raises:
        UsageError: an unknown field (the known ones are listed), or the first value of the wrong
            type or out of range, e.g. ``max_turns must be an integer from 1 to 100,000, got 0``.
    """
    unknown = sorted(set(values) - set(_RANGES))
    if unknown:
        raise UsageError(f"unknown rollout setting(s) {', '.join(unknown)}; known: {', '.join(_RANGES)}")
    out: dict[str, Any] = {}
    for field, value in values.items():
        kind, *bounds = _RANGES[field]
        if kind == "int":
            out[field] = check_int(name(field), value, *bounds)
        elif kind == "float":
            lo, hi, lo_open = bounds
            out[field] = check_float(name(field), value, lo, hi, lo_open=lo_open)
        else:
            out[field] = check_bool(name(field), value)
    return out


@dataclass(frozen=True)
class RolloutConfig:
    """The settings of one MigrationBench rollout, checked when built (frozen: share it freely).

    Attributes:
        max_turns: model calls per rollout, 1 … 100,000 (default 50).
        time_limit: wall seconds per rollout, (0, 604,800] (default 1,800).
        command_timeout: seconds per shell command, (0, 86,400] (default 300).
        max_output_bytes: shell output kept per command, bytes, 2 … 2^30 (default 16,384).
        build_timeout: seconds for the evaluation build, (0, 86,400] (default 300).
        unsafe_no_sandbox: run the agent's commands and the evaluation build without the
            bubblewrap sandbox (default False: the sandbox is required). Only a real bool.
        compact_prompt: the short system prompt and user-turn recipe for small models
            (:data:`.agent.COMPACT_SYSTEM_PROMPT`; ``migrate`` sets it on llama.cpp).
        user_recipe: with ``compact_prompt``, append the spelled-out shell calls
            (:data:`.agent.COMPACT_USER_SUFFIX`) to the user turn (default True); False leaves
            the plain user turn (``migrate --prompt compact-no-recipe``). Ignored without
            ``compact_prompt`` (the full system prompt never has the recipe).

    Raises:
        UsageError: a value of the wrong type (``True`` is not an int, ``1`` not a bool) or out of
            range; the message names the field (:func:`check_values`).
    """

    max_turns: int = 50
    time_limit: float = 1800.0
    command_timeout: float = 300.0
    max_output_bytes: int = 16384
    build_timeout: float = 300.0
    unsafe_no_sandbox: bool = False
    compact_prompt: bool = False
    user_recipe: bool = True

    def __post_init__(self) -> None:
        for field, value in check_values({f: getattr(self, f) for f in _RANGES}).items():
            object.__setattr__(self, field, value)

    @classmethod
    def for_backend(cls, backend: str | None, **values: Any) -> RolloutConfig:
        """The defaults for a sampling backend, overridden by ``values`` (``None`` values are
        left out): on ``"llamacpp"`` the small-model limits (:data:`SMALL_MODEL_LIMITS`) and the
        compact prompt, else the class defaults.

        Raises:
            UsageError: as :func:`check_values`.
        """
        base: dict[str, Any] = dict(SMALL_MODEL_LIMITS, compact_prompt=True) if backend == "llamacpp" else {}
        return cls.from_mapping(base | {k: v for k, v in values.items() if v is not None})

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], name: Callable[[str], str] = str) -> RolloutConfig:
        """Build from a mapping of field -> value (YAML, JSON, a Namespace's ``vars``); missing
        fields keep their defaults.

        Raises:
            UsageError: an unknown key or a bad value, named with ``name(field)``.
        """
        return cls(**check_values(values, name))

    def replace(self, **values: Any) -> RolloutConfig:
        """A copy with ``values`` changed (checked like the constructor)."""
        return dataclasses.replace(self, **values)


SMALL_MODEL_LIMITS: dict[str, Any] = {"max_turns": 12, "time_limit": 600.0, "max_output_bytes": 4000}
"""Rollout limits for the llama.cpp aliases when not given: a 4-8K context and ~5 tokens/s."""

PROMPTS: dict[str, dict[str, bool]] = {
    "compact": {"compact_prompt": True, "user_recipe": True},
    "compact-no-recipe": {"compact_prompt": True, "user_recipe": False},
    "full": {"compact_prompt": False, "user_recipe": True},
}
"""``migrate --prompt`` -> the :class:`RolloutConfig` fields it sets: the compact system prompt
with the shell calls spelled out in the user turn (the llama.cpp default), the compact system
prompt alone, or the full system prompt (the default elsewhere)."""
