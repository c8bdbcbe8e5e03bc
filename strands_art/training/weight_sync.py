"""On-policy weight sync: the trainer's LoRA adapter, loaded into a running vLLM server.

After an update (and, with the loop's ``launch_after_step = J``, after its step J),
:meth:`LoRASync.sync` writes the trainer's adapter with peft's
``save_pretrained`` (``adapter_config.json`` + ``adapter_model.safetensors``, the format vLLM
reads) to ``adapter_dir/{run}/v{version}-{digest}``, loads it into the server under the name
``{base}-lora-{run}-v{version}-{digest}`` with vLLM's runtime LoRA API, switches the
:class:`~strands_art.backends.vllm.VLLMBackend` to that name (later samples use it and record
``policy_version``), then unloads the previous adapter and deletes its directory.

Isolation (trainers sharing one server and one ``adapter_dir``): vLLM keeps a bounded number of
adapters in memory and re-reads an evicted one from its ``lora_path`` when a request names it
again, so the files behind a loaded name must never change. Each run writes only under
``adapter_dir/{run}`` (``run``: a tag unique per trainer), which it holds with an exclusive lock
(``.lock``, ``fcntl.flock``) from its first sync to :meth:`LoRASync.close`: a second trainer with
the same tag is refused (:class:`WeightSyncError`) instead of overwriting the first one's files.
``digest`` is the first 12 hex digits of the SHA-256 of the adapter's files, so an adapter name
never stands for two different weights (a resumed run re-syncing a version with other weights
gets another name and another directory).

vLLM's runtime LoRA API (``vllm/entrypoints/serve/lora/api_router.py``):

- ``POST /v1/load_lora_adapter`` ``{"lora_name", "lora_path"}``: 200 on success; 400
  (``InvalidUserInput``) for a name already loaded; 404 (``NotFoundError``) for a path without
  an adapter; 500 when the worker cannot take it ("Worker failed with error 'LoRA rank 32 is
  greater than max_lora_rank 16.'"; the server keeps serving).
- ``POST /v1/unload_lora_adapter`` ``{"lora_name"}``.

The server must be started with ``--enable-lora --max-lora-rank R`` (R >= the trainer's
``lora_rank``) and the environment variable ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``; without
the variable the routes answer 404 and :meth:`LoRASync.sync` says so; without ``--enable-lora``
the load answers 500 ("LoRA is not enabled. Use --enable-lora to enable LoRA."), passed on.
The adapter path is read by the server process, so ``adapter_dir`` must be visible to it under
the same path (the same machine, or a shared filesystem; ``server_adapter_dir`` maps a
different mount point).

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

import fcntl
import hashlib
import logging
import re
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from strands_art.backends.base import BackendError, BackendTimeout
from strands_art.backends.http_limits import ACCEPT_ENCODING, read_body_sync
from strands_art.backends.vllm import error_message

logger = logging.getLogger(__name__)

#: the most bytes of a load/unload answer read (vLLM sends one sentence or an error object)
MAX_ANSWER_BYTES = 1 << 20

# peft features vLLM 0.32 refuses when it loads an adapter (``vllm/lora/peft_helper.py``,
# ``PEFTHelper._validate_features``); checked here so no optimizer step is spent first.
_UNSUPPORTED = {
    "use_dora": "DoRA adapters",
    "modules_to_save": "modules_to_save (fully trained extra modules)",
    "lora_bias": "LoRA bias (lora_bias)",
    "alora_invocation_tokens": "Activated LoRA (aLoRA)",
    "layer_replication": "layer_replication",
    "use_qalora": "QALoRA",
    "use_bdlora": "block-diagonal LoRA (BD-LoRA)",
}
# string inits vLLM accepts (they only set the initial adapter weights); PiSSA, OLoRA, CorDA,
# LoftQ, ... change the base weights, which the server does not have
_SERVABLE_INITS = ("gaussian", "eva", "orthogonal", "mica", "lora_ga")


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
            weights cannot be synced, see the module docstring), a feature vLLM 0.32 refuses
            (DoRA, ``modules_to_save``, ``lora_bias``, aLoRA, QALoRA, BD-LoRA,
            ``layer_replication``, an init that changes base weights such as PiSSA), a bias
            other than "none", or a rank (``r`` or any ``rank_pattern`` entry) above
            ``max_lora_rank``.
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
    init = getattr(peft_config, "init_lora_weights", True)
    if isinstance(init, str) and init.lower() not in _SERVABLE_INITS:
        raise WeightSyncError(
            f"vLLM cannot serve an adapter with init_lora_weights={init!r}: that init changes the "
            "base weights, which the server does not have; use the default init"
        )
    rank = max(
        [int(getattr(peft_config, "r", 0)), *(getattr(peft_config, "rank_pattern", None) or {}).values()]
    )
    if max_lora_rank is not None and rank > max_lora_rank:
        raise WeightSyncError(
            f"LoRA rank {rank} exceeds the server's --max-lora-rank {max_lora_rank}; "
            f"lower lora_rank (and rank_pattern) or restart vLLM with --max-lora-rank >= {rank}"
        )


def default_adapter_config(model: Any) -> Any:
    """The ``LoraConfig`` of ``model``'s adapter named "default", the one :meth:`LoRASync.sync`
    writes (peft's ``save_pretrained`` puts any other adapter in a subdirectory, where vLLM
    finds no ``adapter_config.json``).

    Raises:
        WeightSyncError: the peft model has no adapter named "default".
    """
    configs = getattr(model, "peft_config", None) or {}
    if "default" not in configs:
        raise WeightSyncError(
            f"the peft model's adapter must be named 'default' to be synced (it has {sorted(configs)}); "
            "save_pretrained writes other adapters to a subdirectory vLLM does not read"
        )
    return configs["default"]


def adapter_digest(directory: Path) -> str:
    """The first 12 hex digits of the SHA-256 of an adapter directory's files (names and bytes,
    in name order): equal digests, equal adapters."""
    h = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        h.update(path.relative_to(directory).as_posix().encode() + b"\0")
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        h.update(b"\0")
    return h.hexdigest()[:12]


class LoRASync:
    """Loads a peft model's adapter into the vLLM server a :class:`VLLMBackend` samples from.

    Args:
        backend: the ``VLLMBackend`` (its server, base model name and API key are used; its
            request model is switched to each new adapter).
        adapter_dir: where adapters are written, in ``{run}/v{version}-{digest}`` subdirectories
            (the current one is kept, older ones are deleted once unloaded); several trainers may
            share it (see the module docstring); made absolute (``~`` expanded), since the
            server would resolve a relative path against its own working directory.
        server_adapter_dir: ``adapter_dir`` as the server sees it (default: the same path);
            must be absolute.
        max_lora_rank: the server's ``--max-lora-rank``, to refuse a too-large rank early.
        timeout_s: seconds one load/unload request may take.
        run: a tag in the adapter names, unique per trainer sharing the server (default: 8
            random hex digits); letters, digits, ``_`` and ``-`` only.
        client: an ``httpx.Client`` to use (default: a new one; tests pass one).

    Attributes:
        run_dir: ``adapter_dir/{run}``, this run's own directory (locked while it syncs).
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
        # absolute: vLLM resolves a relative lora_path against the server's working directory
        # and, when nothing is there, takes it for a Hugging Face repo id to download
        self.adapter_dir = Path(adapter_dir).expanduser().resolve()
        if server_adapter_dir is not None and not Path(server_adapter_dir).is_absolute():
            raise ValueError(
                f"server_adapter_dir must be an absolute path as the server sees it, got {str(server_adapter_dir)!r}"
            )
        self.server_adapter_dir = Path(server_adapter_dir) if server_adapter_dir else self.adapter_dir
        self.run_dir = self.adapter_dir / run
        self._lock: Any = None
        self._current_dir: str | None = None
        self.max_lora_rank = max_lora_rank
        self.timeout_s = timeout_s
        headers = dict(getattr(backend, "_headers", {}) or {})
        # a new connection per request: syncs are minutes apart, and a pooled connection the
        # server closed when idle (uvicorn: 5 s) can take the next request and drop it unanswered
        # ("Server disconnected without sending a response"), failing a sync the server would take
        no_reuse = httpx.Limits(max_keepalive_connections=0)
        self._client = client or httpx.Client(timeout=timeout_s, headers=headers, limits=no_reuse)
        self.current: str | None = None
        self.version = 0
        self.sync_s = 0.0

    def adapter_name(self, version: int, digest: str = "") -> str:
        """The server-side name of the adapter of policy ``version`` with files of SHA-256
        ``digest`` (its first 12 hex digits; without it: the name's version prefix)."""
        base = f"{self.backend.base_model}-lora-{self.run}-v{version}"
        return f"{base}-{digest}" if digest else base

    def _hold_run_dir(self) -> None:
        """Create and lock ``run_dir`` (once); WeightSyncError when another trainer holds it."""
        if self._lock is not None:
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        lock = open(self.run_dir / ".lock", "a")  # noqa: SIM115 - held until close()
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise WeightSyncError(
                f"adapter directory {self.run_dir} is held by another trainer with run tag {self.run!r}: "
                "give each trainer its own run tag (or its own adapter_dir)"
            ) from None
        self._lock = lock

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
        check_adapter_config(default_adapter_config(model), self.max_lora_rank)
        self._hold_run_dir()
        staging = self.run_dir / f".v{version}.partial"
        if staging.exists():  # left over from a sync that stopped midway
            shutil.rmtree(staging)
        model.save_pretrained(str(staging))
        digest = adapter_digest(staging)
        name, dirname = self.adapter_name(version, digest), f"v{version}-{digest}"
        local = self.run_dir / dirname
        if local.exists():  # the same files already there (same name): keep them as they are
            shutil.rmtree(staging)
        else:
            staging.rename(local)
        try:
            self._post(
                "load", {"lora_name": name, "lora_path": str(self.server_adapter_dir / self.run / dirname)}
            )
        except WeightSyncError:
            shutil.rmtree(local, ignore_errors=True)
            raise
        previous, previous_dir = self.current, self._current_dir
        self.backend.use_adapter(name, version)
        self.current, self.version, self._current_dir = name, version, dirname
        if previous is not None:
            try:
                self._post("unload", {"lora_name": previous})
            except WeightSyncError as exc:  # the new policy is in place; the old one only costs memory
                logger.warning("could not unload the previous adapter %s: %s", previous, exc)
            if previous_dir != dirname:
                shutil.rmtree(self.run_dir / str(previous_dir), ignore_errors=True)
        self.sync_s = time.perf_counter() - t0
        logger.info("vLLM now samples from %s (policy version %d, %.2f s)", name, version, self.sync_s)
        return name

    def _post(self, action: str, body: dict[str, str]) -> None:
        """One load/unload request; its answer read within :data:`MAX_ANSWER_BYTES` and
        ``timeout_s`` in all (:mod:`strands_art.backends.http_limits`)."""
        url = f"{self.backend.base_url}/v1/{action}_lora_adapter"
        try:
            with self._client.stream(
                "POST", url, json=body, headers={"Accept-Encoding": ACCEPT_ENCODING}
            ) as streamed:
                content = read_body_sync(streamed, MAX_ANSWER_BYTES, url, self.timeout_s)
            resp = httpx.Response(streamed.status_code, content=content, request=streamed.request)
        except (httpx.TimeoutException, BackendTimeout) as exc:
            raise WeightSyncError(
                f"vLLM at {url} did not {action} adapter {body['lora_name']!r} within {self.timeout_s:g} s"
            ) from exc
        except BackendError as exc:  # over the size cap, or a coding that cannot be read
            raise WeightSyncError(f"could not {action} adapter {body['lora_name']!r}: {exc}") from exc
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
                shutil.rmtree(self.run_dir / str(self._current_dir), ignore_errors=True)
                self.current, self.version, self._current_dir = None, 0, None
        finally:
            self._client.close()
            if self._lock is not None:  # another trainer may take this run tag now
                self._lock.close()
                self._lock = None
