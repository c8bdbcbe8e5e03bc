"""verl's vLLM rollout replica, answered by a real vLLM server over HTTP (verl tests only).

verl 0.9.1 runs vLLM *inside* its rollout replica: ``vLLMHttpServer`` (a Ray actor,
``verl/workers/rollout/vllm_rollout/vllm_async_server.py``) imports ``vllm`` at module level and
drives an in-process ``AsyncLLM``. The verl environment cannot hold vLLM on this machine (verl pins
``transformers<5.11``; the server lives in ``.venv-vllm``), so :class:`VLLMHTTPReplica` stands in
for that actor: it takes the same ``generate.remote(prompt_ids, sampling_params, request_id, ...)``
call, does what ``vLLMHttpServer.generate`` does before and after the engine (cap ``max_tokens``
by the context left, ``logprobs=True`` -> ``logprobs=0``, ``finish_reason`` stop/length ->
``stop_reason="completed"``, abort -> ``"aborted"``, ``extra_fields["global_steps"]``) and samples
on the real server with a token-ID ``/v1/completions`` request. Every exchange is kept, with the
prompt IDs vLLM reports it received and the token IDs and logprobs it returned.

For verl's own Ray actors (``tests/test_verl_ray_agent_loop.py``) the same stand-in runs as a Ray
actor, :class:`VLLMHTTPServer` (``generate(...)`` with ``vLLMHttpServer.generate``'s keyword
arguments), launched by :class:`ExternalVLLMReplica`: a ``RolloutReplica`` that verl's own
``LLMServerManager`` builds in place of ``vLLMReplica`` (its ``rollout_replica_class`` attribute,
which verl leaves open "for recipe to change"), so verl's manager, load balancer actor and
``LLMServerClient`` route the agent-loop workers' requests to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import ray
from verl.workers.rollout.llm_server import LLMServerManager
from verl.workers.rollout.replica import RolloutMode, RolloutReplica, TokenOutput

from strands_art.backends.vllm import completions_url


@dataclass(frozen=True)
class Exchange:
    """One generation: what was sent and what the real server reported."""

    request_id: str
    sent_prompt_ids: list[int]
    sampling: dict[str, Any]
    server_prompt_ids: list[int]
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str


def sampled_runs(mask: list[int]) -> list[tuple[int, int]]:
    """``(start, end)`` of each run of 1s in a row's loss mask: each sampled run is one
    :class:`Exchange` (the row before ``start`` was its prompt)."""
    runs, start = [], None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            runs.append((start, i))
            start = None
    return runs


class VLLMHTTPReplica:
    """The ``server`` object verl's ``LLMServerClient`` awaits ``server.generate.remote(...)`` on.

    Args:
        base_url: the real vLLM server (``http://127.0.0.1:PORT``).
        model: its served model name.
        max_model_len: the server's context length (``actor_rollout_ref.rollout.max_model_len``).
        global_steps: the weight version reported in ``extra_fields`` (verl's ``global_steps``).

    Attributes:
        exchanges: every :class:`Exchange`, in completion order.
    """

    def __init__(self, base_url: str, model: str, max_model_len: int, global_steps: int = 1) -> None:
        self.url = completions_url(base_url)
        self.model = model
        self.max_model_len = max_model_len
        self.global_steps = global_steps
        self.exchanges: list[Exchange] = []
        self.generate = self  # a Ray actor method handle: ``server.generate.remote(...)``

    async def remote(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data: Any = None,
        video_data: Any = None,
        **_: Any,
    ) -> TokenOutput:
        """``vLLMHttpServer.generate`` with the engine call made over HTTP.

        Raises:
            ValueError: the prompt leaves no room to generate (as verl raises).
            httpx.HTTPStatusError: the server refused the request.
        """
        params = dict(sampling_params)
        room = self.max_model_len - len(prompt_ids)
        if room < 1:
            raise ValueError(f"Prompt length ({len(prompt_ids)}) leaves no room to generate")
        max_tokens = max(1, min(int(params.pop("max_tokens", room)), room))
        logprobs = 0 if params.pop("logprobs", False) else None
        params.setdefault("repetition_penalty", 1.0)
        body = {
            "model": self.model,
            "prompt": list(prompt_ids),
            "max_tokens": max_tokens,
            **params,
            "logprobs": logprobs,
            "return_token_ids": True,
            "n": 1,
            "stream": False,
            "echo": False,
        }
        async with httpx.AsyncClient(timeout=httpx.Timeout(600.0)) as client:
            resp = await client.post(self.url, json=body)
        resp.raise_for_status()
        choice = resp.json()["choices"][0]
        token_ids = [int(t) for t in choice["token_ids"]]
        token_logprobs = None
        if logprobs is not None:
            token_logprobs = [float(x) for x in choice["logprobs"]["token_logprobs"]]
        finish = choice["finish_reason"]
        self.exchanges.append(
            Exchange(
                request_id=request_id,
                sent_prompt_ids=list(prompt_ids),
                sampling=body,
                server_prompt_ids=[int(t) for t in choice["prompt_token_ids"]],
                token_ids=token_ids,
                logprobs=list(token_logprobs or []),
                finish_reason=finish,
            )
        )
        stop_reason = {"stop": "completed", "length": "completed", "abort": "aborted"}.get(finish, finish)
        return TokenOutput(
            token_ids=token_ids,
            log_probs=token_logprobs,
            stop_reason=stop_reason,
            extra_fields={"global_steps": self.global_steps},
        )


class VLLMHTTPServer:
    """:class:`VLLMHTTPReplica` as verl's server actor: ``generate`` takes the keyword arguments of
    ``vLLMHttpServer.generate`` (``LLMServerClient`` calls ``server.generate.remote(request_id=...,
    prompt_ids=..., sampling_params=..., image_data=..., video_data=...)``)."""

    def __init__(self, base_url: str, model: str, max_model_len: int, global_steps: int = 1) -> None:
        self.replica = VLLMHTTPReplica(base_url, model, max_model_len, global_steps)

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data: Any = None,
        video_data: Any = None,
        **kwargs: Any,
    ) -> TokenOutput:
        return await self.replica.remote(
            prompt_ids, sampling_params, request_id, image_data, video_data, **kwargs
        )

    def exchanges(self) -> list[Exchange]:
        """Every exchange so far, in completion order."""
        return list(self.replica.exchanges)


class ExternalVLLMReplica(RolloutReplica):
    """A verl rollout replica whose server is an already running vLLM (``base_url``, ``model``:
    class attributes, set by :func:`external_vllm_manager`).

    Only the standalone mode is offered: ``init_standalone`` launches the server actor without the
    GPU resource pool verl's replicas reserve for their engine (the engine runs elsewhere).
    """

    base_url: str = ""
    model: str = ""

    async def init_standalone(self) -> None:
        self.rollout_mode = RolloutMode.STANDALONE
        await self.launch_servers()

    async def launch_servers(self) -> None:
        server = (
            ray.remote(VLLMHTTPServer)
            .options(
                name=f"vllm_http_server_{self.replica_rank}", num_cpus=0, max_concurrency=self.max_concurrency
            )
            .remote(self.base_url, self.model, self.config.max_model_len)
        )
        self.servers = [server]
        self._server_handle = server
        self._server_address = urlsplit(self.base_url).netloc


def external_vllm_manager(config: Any, base_url: str, model: str) -> LLMServerManager:
    """verl's ``LLMServerManager.create`` in standalone mode (``rollout.nnodes`` > 0) with
    :class:`ExternalVLLMReplica` replicas on the server at ``base_url``: verl makes
    ``n_gpus_per_node * nnodes // (tensor * data * pipeline parallel size)`` of them (0 with verl's
    default ``tensor_model_parallel_size=2`` on one device). ``.get_client()`` gives verl's
    ``LLMServerClient`` over verl's load-balancer actor."""
    replica_cls = type("ExternalVLLMReplica", (ExternalVLLMReplica,), {"base_url": base_url, "model": model})
    manager_cls = type(
        "ExternalLLMServerManager", (LLMServerManager,), {"rollout_replica_class": replica_cls}
    )
    return manager_cls.create(config=config)
