"""strands-art: agent reinforcement learning that is honest about tokens.

The public surface is the names in ``__all__``; import them from here::

    from strands_art import ARTModel, LlamaCppBackend, RolloutGateway

Every name loads lazily (module-level ``__getattr__``): ``import strands_art`` imports none of
the optional dependencies (torch, transformers, vLLM, verl, xllamacpp, strands); a name pulls in
its own module, and that module's dependencies, the first time it is touched. An unknown name
raises ``AttributeError``; a name whose optional dependency is not installed raises that
dependency's ``ImportError`` when touched.

Layers and where each name lives: docs/architecture.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from strands_art.backends import make_backend
    from strands_art.backends.base import (
        BackendContextOverflow,
        BackendError,
        BackendTimeout,
        BackendUnavailable,
        SampleResult,
        SamplingBackend,
        SamplingParams,
    )
    from strands_art.backends.llamacpp import LlamaCppBackend
    from strands_art.backends.scripted import ScriptedBackend
    from strands_art.backends.transformers import TransformersBackend
    from strands_art.backends.vllm import VLLMBackend
    from strands_art.envs.migrationbench.config import RolloutConfig
    from strands_art.envs.migrationbench.run.episodes import migrationbench_rollout
    from strands_art.gateway import (
        ContextBudgetExceeded,
        GatewayError,
        RolloutGateway,
        SessionClosed,
        UnknownSession,
    )
    from strands_art.model import ARTModel
    from strands_art.store import TrajectoryStore
    from strands_art.training.batching import BatchingConfig
    from strands_art.training.grpo import GRPOConfig
    from strands_art.training.local import LocalTrainer
    from strands_art.training.loop import train
    from strands_art.training.rollouts import chat_rollout
    from strands_art.training.trainer_config import TrainerConfig
    from strands_art.training.weight_sync import LoRASync
    from strands_art.trajectory import Row, Trajectory, Turn
    from strands_art.turn_parse import GenerateResult

# name -> module that defines it (imported on first touch)
_LAZY: dict[str, str] = {
    # the Strands front
    "ARTModel": "strands_art.model",
    # the gateway
    "RolloutGateway": "strands_art.gateway",
    "GenerateResult": "strands_art.turn_parse",  # what generate() returns (its parse step)
    "GatewayError": "strands_art.gateway",
    "UnknownSession": "strands_art.gateway",
    "SessionClosed": "strands_art.gateway",
    "ContextBudgetExceeded": "strands_art.gateway",
    # what the gateway records
    "Trajectory": "strands_art.trajectory",
    "Row": "strands_art.trajectory",
    "Turn": "strands_art.trajectory",
    "TrajectoryStore": "strands_art.store",
    # sampling backends
    "make_backend": "strands_art.backends",
    "SamplingBackend": "strands_art.backends.base",
    "SamplingParams": "strands_art.backends.base",
    "SampleResult": "strands_art.backends.base",
    "BackendError": "strands_art.backends.base",
    "BackendTimeout": "strands_art.backends.base",
    "BackendUnavailable": "strands_art.backends.base",
    "BackendContextOverflow": "strands_art.backends.base",
    "LlamaCppBackend": "strands_art.backends.llamacpp",
    "TransformersBackend": "strands_art.backends.transformers",
    "VLLMBackend": "strands_art.backends.vllm",
    "ScriptedBackend": "strands_art.backends.scripted",
    # training on one machine
    "train": "strands_art.training.loop",
    "LocalTrainer": "strands_art.training.local",
    "TrainerConfig": "strands_art.training.trainer_config",
    "GRPOConfig": "strands_art.training.grpo",
    "BatchingConfig": "strands_art.training.batching",
    "LoRASync": "strands_art.training.weight_sync",
    "chat_rollout": "strands_art.training.rollouts",
    # the MigrationBench environment's rollout for the trainers
    "migrationbench_rollout": "strands_art.envs.migrationbench.run.episodes",
    "RolloutConfig": "strands_art.envs.migrationbench.config",
}

__all__ = [
    "ARTModel",
    "BackendContextOverflow",
    "BackendError",
    "BackendTimeout",
    "BackendUnavailable",
    "BatchingConfig",
    "ContextBudgetExceeded",
    "GRPOConfig",
    "GatewayError",
    "GenerateResult",
    "LlamaCppBackend",
    "LoRASync",
    "LocalTrainer",
    "RolloutConfig",
    "RolloutGateway",
    "Row",
    "SampleResult",
    "SamplingBackend",
    "SamplingParams",
    "ScriptedBackend",
    "SessionClosed",
    "TrainerConfig",
    "Trajectory",
    "TrajectoryStore",
    "TransformersBackend",
    "Turn",
    "UnknownSession",
    "VLLMBackend",
    "chat_rollout",
    "make_backend",
    "migrationbench_rollout",
    "train",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` and return the name (cached in this module).

    Raises:
        AttributeError: ``name`` is not part of the public surface.
        ImportError: the name's optional dependency (torch, xllamacpp, httpx, strands, ...) is
            not installed.
    """
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'strands_art' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
