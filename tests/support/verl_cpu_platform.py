"""A CPU platform for verl 0.9.1, so that verl's own FSDP2 training engine runs in CI without a GPU.

verl picks its accelerator once per process (``verl/plugin/platform/platform_manager.py``):
``$VERL_PLATFORM`` names a registered platform, else it probes CUDA/NPU/ROCm and, finding none,
falls back to ``nvidia``; every ``torch.cuda`` call then fails on a CPU-only torch ("Torch not
compiled with CUDA enabled", first in ``FSDPEngine._build_model_optimizer`` ->
``log_gpu_memory_usage`` -> ``mem_get_info``). verl ships no CPU platform, and its FSDP engines
register for ``device=["cuda", "npu"]`` only (``verl/workers/engine/fsdp/transformer_impl.py``).

This module plugs both gaps through verl's own extension points: :class:`PlatformCPU` is
registered with ``PlatformRegistry.register(platform="cpu")`` (import it and set
``VERL_PLATFORM=cpu`` before verl resolves its platform, i.e. before anything imports
``verl.workers``), and :func:`register_cpu_engines` registers verl's unchanged
``FSDPEngineWithLMHead`` for ``device="cpu"`` with ``EngineRegistry.register``. The process group
is gloo, FSDP2 shards over the CPU mesh, and the model runs in float32.

Test infrastructure: ``tests/conftest.py`` activates it when verl is installed and no CUDA device
is present.
"""

from __future__ import annotations

import os
import types
from contextlib import contextmanager
from typing import Any

import psutil
import torch
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

PLATFORM = "cpu"


def _mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of host memory, as ``torch.cuda.mem_get_info`` reports device memory."""
    vm = psutil.virtual_memory()
    return vm.available, vm.total


def _zero(*_: Any, **__: Any) -> int:
    return 0


def _nothing(*_: Any, **__: Any) -> None:
    return None


# What verl calls on ``get_torch_device()`` (the platform's device module) besides the platform.
cpu_device_module = types.SimpleNamespace(
    is_available=lambda: True,
    current_device=lambda: PLATFORM,
    device_count=lambda: 1,
    set_device=_nothing,
    synchronize=_nothing,
    empty_cache=_nothing,
    manual_seed=torch.manual_seed,
    manual_seed_all=torch.manual_seed,
    get_rng_state=torch.get_rng_state,
    set_rng_state=torch.set_rng_state,
    mem_get_info=_mem_get_info,
    memory_allocated=_zero,
    memory_reserved=_zero,
    max_memory_allocated=_zero,
    max_memory_reserved=_zero,
    reset_peak_memory_stats=_nothing,
    get_device_name=lambda *_: PLATFORM,
)


@PlatformRegistry.register(platform=PLATFORM)
class PlatformCPU(PlatformBase):
    """verl's accelerator abstraction on the host CPU: device ``cpu``, gloo collectives, no IPC."""

    @property
    def device_name(self) -> str:
        return PLATFORM

    @property
    def vendor_name(self) -> str:
        return PLATFORM

    @property
    def device_module(self) -> types.SimpleNamespace:
        return cpu_device_module

    def is_available(self) -> bool:
        return True

    def current_device(self) -> str:
        return PLATFORM

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        pass

    def synchronize(self, device_index: int | None = None) -> None:
        pass

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        pass

    def empty_cache(self) -> None:
        pass

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return (None, None)

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    def ray_resource_name(self) -> str:
        return "CPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        pass

    def profiler_stop(self) -> None:
        pass

    def cudart(self) -> None:
        return None


def activate() -> None:
    """Select this platform for the process (``VERL_PLATFORM=cpu``) unless one is already chosen.

    Raises:
        RuntimeError: verl already resolved another platform (something imported
            ``verl.workers`` first); the choice is made once per process.
    """
    from verl.plugin.platform import platform_manager

    os.environ.setdefault("VERL_PLATFORM", PLATFORM)
    current = platform_manager._current_platform
    if current is not None and current.device_name != os.environ["VERL_PLATFORM"]:
        raise RuntimeError(
            f"verl already resolved platform {current.device_name!r}; import support.verl_cpu_platform "
            "and call activate() before anything imports verl.workers"
        )


def register_cpu_engines() -> None:
    """Register verl's own FSDP engines (actor with LM head, critic with value head) for ``cpu``."""
    from verl.workers.engine import EngineRegistry
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead, FSDPEngineWithValueHead

    EngineRegistry.register(model_type="language_model", backend=["fsdp", "fsdp2"], device=[PLATFORM])(
        FSDPEngineWithLMHead
    )
    EngineRegistry.register(model_type="value_model", backend=["fsdp", "fsdp2"], device=[PLATFORM])(
        FSDPEngineWithValueHead
    )
