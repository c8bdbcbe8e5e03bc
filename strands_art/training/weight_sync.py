"""On-policy weight sync: the trainer's LoRA adapter, loaded into a running vLLM server.

After an update, :meth:`LoRASync.sync` writes the trainer's adapter with peft's
``save_pretrained`` (``adapter_config.json`` + ``adapter_model.safetensors``, the format vLLM
reads) to ``adapter_dir/v{version}``, loads it into the server under a new versioned name
(``{base}-lora-{run}-v{version}``; ``run`` keeps trainers sharing one server apart) with vLLM's
runtime LoRA API, switches the
:class:`~strands_art.backends.vllm.VLLMBackend` to that name (later samples use it and record
``policy_version``), then unloads the previous adapter and deletes its directory.

vLLM's runtime LoRA API (``vllm/entrypoints/serve/lora/api_router.py``):

- ``POST /v1/load_lora_adapter`` ``{"lora_name", "lora_path"}``: 200 on success; 400
  (``InvalidUserInput``) for a name already loaded; 404 (``NotFoundError``) for a path without
  an adapter; 500 when the worker cannot take it ("Worker failed with error 'LoRA rank 32 is
  greater than max_lora_rank 16.'"; the server keeps serving).
- ``POST /v1/unload_lora_adapter`` ``{"lora_name"}``.

The server must be started with ``--enable-lora --max-lora-rank R`` (R >= the trainer's
``lora_rank``) and the environment variable ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``; without
them the routes answer 404 and :meth:`LoRASync.sync` says so. The adapter path is read by the
server process, so ``adapter_dir`` must be visible to it under the same path (the same machine,
or a shared filesystem; ``server_adapter_dir`` maps a different mount point).

Every failure raises :class:`WeightSyncError` and leaves the backend on the adapter it had, so a
training loop stops instead of sampling on from a stale policy without saying so.

Full-weight sync (no LoRA) is not offered: vLLM 0.32's way to replace full weights in a running
server is its RL weight-transfer API (``/pause``, ``/init_weight_transfer_engine``,
``/update_weights``, ``/finish_weight_update`` with ``--weight-transfer-config``), whose engines
(NCCL, CUDA IPC) need GPUs; the alternative, a server restart on new weights, costs a model load
per step (70-200 s for a 135M model on this project's CPU machines). The embedded trainer always
trains a LoRA adapter, so it always has one to sync.
"""

from __future__ import annotations

import logging
import re
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from strands_art.backends.vllm import error_message

logger = logging.getLogger(__name__)

# vLLM 0.32 CPU LoRA applies to linear layers; these peft features have no vLLM counterpart.
_UNSUPPORTED = {
    "use_dora": "DoRA adapters",
    "modules_to_save": "modules_to_save (fully trained extra modules)",
}


class WeightSyncError(RuntimeError):
    """The new adapter could not be put into the server (refused, unreachable, timed out).

    The backend still samples from the previous adapter; training must stop (the trainer lets
    this propagate out of ``update``).
    """


def check_adapter_config(peft_config: Any, max_lora_rank: int | None = None) -> None:
    """Refuse a peft ``LoraConfig`` vLLM cannot load, before any training step is wasted.

    Args:
        peft_config: the adapter's ``LoraConfig``.
        max_lora_rank: the server's ``--max-lora-rank`` when known.

    Raises:
        WeightSyncError: not a LoRA adapter (vLLM loads no other kind at runtime, and full
            weights cannot be synced, see the module docstring), DoRA, ``modules_to_save``, a
            bias other than "none", or a rank above ``max_lora_rank``.
    """
    kind = str(
        getattr(getattr(peft_config, "peft_type", None), "value", getattr(peft_config, "peft_type", None))
    )
    if kind != "LORA":
        raise WeightSyncError(
            f"only LoRA adapters can be loaded into a running vLLM (got {kind}); full-weight sync "
            "needs vLLM's GPU weight-transfer API or a server restart per step"
        )
    for attr, what in _UNSUPPORTED.items():
        if getattr(peft_config, attr, None):
            raise WeightSyncError(f"vLLM cannot serve {what}; use a plain LoRA adapter")
    bias = getattr(peft_config, "bias", "none")
    if bias != "none":
        raise WeightSyncError(f"vLLM cannot serve a LoRA adapter with bias={bias!r}; use bias='none'")
    rank = int(getattr(peft_config, "r", 0))
    if max_lora_rank is not None and rank > max_lora_rank:
        raise WeightSyncError(
            f"LoRA rank {rank} exceeds the server's --max-lora-rank {max_lora_rank}; "
            f"lower lora_rank or restart vLLM with --max-lora-rank >= {rank}"
        )


class LoRASync:
    """Loads a peft model's adapter into the vLLM server a :class:`VLLMBackend` samples from.

    Args:
        backend: the ``VLLMBackend`` (its server, base model name and API key are used; its
            request model is switched to each new adapter).
        adapter_dir: where adapters are written (``v{version}`` subdirectories; the current one
            is kept, older ones are deleted once unloaded).
        server_adapter_dir: ``adapter_dir`` as the server sees it (default: the same path).
        max_lora_rank: the server's ``--max-lora-rank``, to refuse a too-large rank early.
        timeout_s: seconds one load/unload request may take.
        run: a tag in the adapter names, unique per trainer sharing the server (default: 8
            random hex digits); letters, digits, ``_`` and ``-`` only.
        client: an ``httpx.Client`` to use (default: a new one; tests pass one).

    Attributes:
        current: the adapter name the backend samples from (None: the base model).
        version: its policy version (0: the base model).
        sync_s: seconds the last :meth:`sync` took (save + load + unload).
    """

    def __init__(
        self,
        backend: Any,
        adapter_dir: str | Path,
        *,
        server_adapter_dir: str | Path | None = None,
        max_lora_rank: int | None = None,
        timeout_s: float = 120.0,
        run: str | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        if not hasattr(backend, "use_adapter") or not hasattr(backend, "base_model"):
            raise TypeError("LoRASync needs a VLLMBackend (use_adapter, base_model)")
        run = uuid.uuid4().hex[:8] if run is None else run
        if not re.fullmatch(r"[A-Za-z0-9_-]+", run):
            raise ValueError(f"run must be letters, digits, '_' or '-', got {run!r}")
        self.run = run
        self.backend = backend
        self.adapter_dir = Path(adapter_dir)
        self.server_adapter_dir = Path(server_adapter_dir) if server_adapter_dir else self.adapter_dir
        self.max_lora_rank = max_lora_rank
        self.timeout_s = timeout_s
        headers = dict(getattr(backend, "_headers", {}) or {})
        self._client = client or httpx.Client(timeout=timeout_s, headers=headers)
        self.current: str | None = None
        self.version = 0
        self.sync_s = 0.0

    def adapter_name(self, version: int) -> str:
        """The server-side name of the adapter of policy ``version``."""
        return f"{self.backend.base_model}-lora-{self.run}-v{version}"

    def sync(self, model: Any, version: int) -> str:
        """Save ``model``'s adapter, load it as policy ``version``, switch the backend to it and
        unload the previous one; returns the new adapter name.

        Args:
            model: the trainer's peft model.
            version: the policy version (the trainer's optimizer step count); must grow.

        Raises:
            WeightSyncError: the server refused the adapter, is unreachable or timed out, or the
                adapter's config cannot be served (:func:`check_adapter_config`).
            ValueError: ``version`` not above the current one.
        """
        if version <= self.version and self.current is not None:
            raise ValueError(f"policy version must grow: {version} after {self.version}")
        t0 = time.perf_counter()
        check_adapter_config(model.peft_config["default"], self.max_lora_rank)
        name = self.adapter_name(version)
        local = self.adapter_dir / f"v{version}"
        if local.exists():  # left over from a run that stopped before this version was loaded
            shutil.rmtree(local)
        model.save_pretrained(str(local))
        try:
            self._post("load", {"lora_name": name, "lora_path": str(self.server_adapter_dir / f"v{version}")})
        except WeightSyncError:
            shutil.rmtree(local, ignore_errors=True)
            raise
        previous, previous_version = self.current, self.version
        self.backend.use_adapter(name, version)
        self.current, self.version = name, version
        if previous is not None:
            try:
                self._post("unload", {"lora_name": previous})
            except WeightSyncError as exc:  # the new policy is in place; the old one only costs memory
                logger.warning("could not unload the previous adapter %s: %s", previous, exc)
            shutil.rmtree(self.adapter_dir / f"v{previous_version}", ignore_errors=True)
        self.sync_s = time.perf_counter() - t0
        logger.info("vLLM now samples from %s (policy version %d, %.2f s)", name, version, self.sync_s)
        return name

    def _post(self, action: str, body: dict[str, str]) -> None:
        url = f"{self.backend.base_url}/v1/{action}_lora_adapter"
        try:
            resp = self._client.post(url, json=body)
        except httpx.TimeoutException as exc:
            raise WeightSyncError(
                f"vLLM at {url} did not {action} adapter {body['lora_name']!r} within {self.timeout_s:g} s"
            ) from exc
        except httpx.HTTPError as exc:
            raise WeightSyncError(f"could not reach vLLM at {url} to {action} an adapter: {exc!r}") from exc
        if resp.status_code == 200:
            return
        message = error_message(resp)
        if resp.status_code == 404 and message == "Not Found":
            raise WeightSyncError(
                f"vLLM at {self.backend.base_url} has no runtime LoRA API ({url}: 404): start it with "
                "--enable-lora --max-lora-rank R and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"
            )
        raise WeightSyncError(
            f"vLLM refused to {action} adapter {body['lora_name']!r} (HTTP {resp.status_code}): {message}"
        )

    def close(self, unload: bool = False) -> None:
        """Close the HTTP client. With ``unload``, first unload the current adapter and switch the
        backend back to the base model (policy version 0); otherwise the server keeps serving it.

        Raises:
            WeightSyncError: the unload failed (the client is closed anyway).
        """
        try:
            if unload and self.current is not None:
                self._post("unload", {"lora_name": self.current})
                self.backend.use_adapter(self.backend.base_model, 0)
                shutil.rmtree(self.adapter_dir / f"v{self.version}", ignore_errors=True)
                self.current, self.version = None, 0
        finally:
            self._client.close()
