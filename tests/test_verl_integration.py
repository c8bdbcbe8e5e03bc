"""verl integration on CPU: rollout-server backend, agent loop -> verl outputs, step-stable trainer.

Real verl 0.9.1 code throughout, with test doubles only where verl needs a cluster:

- the backend runs verl's real ``LLMServerClient.generate`` against a fake server replica
  (``_acquire_server`` returns it) that answers like ``vLLMHttpServer.generate`` (a ``TokenOutput``);
- the agent loop is built by ``hydra.utils.instantiate`` from verl's agent-loop registry, drives a
  real Strands ``Agent`` through our gateway (qwen3 tokenizer), and its outputs go through verl's
  real ``AgentLoopWorkerTQ._agent_loop_postprocess`` into a stand-in TransferQueue (a dict) and
  through verl's real GRPO ``compute_advantage_for_multi_trajectories``;
- the trainer's ``_balance_batch`` uses verl's real padding (``upsample_batch_to_divisible_size``
  over the stand-in store) and ``KVBatchMeta.reorder``; its ``_update_actor`` runs verl's real
  ``PPOTrainer._update_actor``; the tagged batch is split rank by rank (TransferQueue's chunk) and run through
  ``TrainingWorker.train_mini_batch`` (stand-in engine from test_verl_adapter.py).
"""

from __future__ import annotations

import inspect
import math

import pytest

pytest.importorskip(
    "verl.trainer.ppo.v1",
    reason="verl==0.9.1 with its V1 trainer is not installed "
    "(pip install 'strands-art[verl]' 'TransferQueue>=0.1.10' cachetools)",
)

import hydra  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from strands import Agent  # noqa: E402
from strands.agent.conversation_manager import NullConversationManager  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from test_model import ADD_CALL, add  # noqa: E402
from test_verl_adapter import _Worker, process_group  # noqa: E402,F401
from transfer_queue import KVBatchMeta  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.experimental.agent_loop.agent_loop import (  # noqa: E402
    AgentLoopOutput,
    AgentLoopWorker,
    DictConfigWrap,
    ToolListWrap,
    _agent_loop_registry,
)
from verl.trainer.ppo import padding_utils  # noqa: E402
from verl.trainer.ppo.core_algos import AdvantageEstimator  # noqa: E402
from verl.trainer.ppo.v1 import agent_loop_tq, get_trainer_cls  # noqa: E402
from verl.trainer.ppo.v1.trainer_base import PPOTrainer  # noqa: E402
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.utils.tensordict_utils import list_of_dict_to_tensordict  # noqa: E402
from verl.workers.engine_workers import TrainingWorker  # noqa: E402
from verl.workers.rollout.llm_server import LLMServerClient  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from strands_art.backends.base import BackendError, SamplingParams  # noqa: E402
from strands_art.model import ARTModel  # noqa: E402
from strands_art.training.grpo import GRPOConfig, group_advantages  # noqa: E402
from strands_art.verl.agent_loop import StrandsAgentLoop, trajectory_outputs  # noqa: E402
from strands_art.verl.backend import (  # noqa: E402
    VerlServerBackend,
    from_verl_sampling_params,
    to_vllm_sampling_params,
)
from strands_art.verl.trainer import TRAINER_NAME, StepStablePPOTrainer, plan_layout  # noqa: E402

IM_END = 151645
VERL_SAMPLING = {"temperature": 0.7, "top_p": 0.95, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


# --------------------------------------------------------------------------- fake rollout server
class FakeReplica:
    """Answers like ``vLLMHttpServer.generate``: a TokenOutput per call, from a script of texts."""

    def __init__(self, tok, texts: list[str], logprob: float = -0.25, global_steps: int = 7):
        self.tok, self.texts, self.logprob, self.global_steps = tok, list(texts), logprob, global_steps
        self.calls: list[dict] = []
        self.generate = self  # ``server.generate.remote(...)`` as on a Ray actor handle

    async def remote(self, prompt_ids, sampling_params, request_id, image_data=None, video_data=None, **kw):
        self.calls.append({"prompt_ids": list(prompt_ids), "sampling_params": dict(sampling_params), **kw})
        item = self.texts[len(self.calls) - 1]
        if isinstance(item, TokenOutput):
            return item
        ids = self.tok.encode(item, add_special_tokens=False)[: sampling_params["max_tokens"]]
        return TokenOutput(
            token_ids=ids,
            log_probs=[self.logprob] * len(ids),
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )


class FakeClient(LLMServerClient):
    """verl's real client; only the load balancer's server choice is replaced by one replica."""

    def __init__(self, replica: FakeReplica):
        cfg = OmegaConf.create(
            {"actor_rollout_ref": {"rollout": {"name": "vllm", "full_determinism": False}}}
        )
        super().__init__(cfg, load_balancer_handle=None)
        self.replica = replica
        self.request_ids: list[str] = []

    async def _acquire_server(self, request_id, **extra):
        self.request_ids.append(request_id)
        return "replica-0", self.replica

    def _release_server(self, server_id, request_id=None):
        pass


def test_fake_client_keeps_verls_generate_signature():
    ours = inspect.signature(FakeClient.generate)
    assert ours == inspect.signature(LLMServerClient.generate)
    assert list(ours.parameters)[:4] == ["self", "request_id", "prompt_ids", "sampling_params"]


# --------------------------------------------------------------------------- backend
def test_sampling_params_both_ways():
    ours = from_verl_sampling_params(VERL_SAMPLING, max_new_tokens=512)
    assert ours == SamplingParams(temperature=0.7, top_p=0.95, top_k=0, max_new_tokens=512)
    d = to_vllm_sampling_params(SamplingParams(temperature=0.7, top_k=20, stop_token_ids=(IM_END,), seed=3))
    assert d == {
        "max_tokens": 512,
        "temperature": 0.7,
        "top_p": 1.0,
        "top_k": 20,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "stop": [],
        "stop_token_ids": [IM_END],
        "include_stop_str_in_output": True,
        "logprobs": True,
        "seed": 3,
    }
    with pytest.raises(ValueError, match="calculate_log_probs=True"):
        from_verl_sampling_params({**VERL_SAMPLING, "logprobs": False}, 8)
    with pytest.raises(ValueError, match="repetition_penalty"):
        from_verl_sampling_params({**VERL_SAMPLING, "repetition_penalty": 1.1}, 8)


async def test_backend_through_verls_client(qwen3):
    replica = FakeReplica(qwen3, ["Hello there.<|im_end|>", "a b c d e f g h"])
    backend = VerlServerBackend(FakeClient(replica), request_id="uid7-3")
    params = SamplingParams(max_new_tokens=4, stop_token_ids=(IM_END,))
    stop = await backend.sample([1, 2, 3], SamplingParams(max_new_tokens=64, stop_token_ids=(IM_END,)))
    assert stop.output_ids == qwen3.encode("Hello there.<|im_end|>", add_special_tokens=False)
    assert stop.output_ids[-1] == IM_END and stop.finish_reason == "stop"
    assert stop.logprobs == [-0.25] * len(stop.output_ids) and stop.info["global_steps"] == 7
    cut = await backend.sample([1, 2, 3, 4], params)
    assert len(cut.output_ids) == 4 and cut.finish_reason == "length"
    assert backend.server.request_ids == ["uid7-3", "uid7-3"]  # sticky session
    assert replica.calls[1]["prompt_ids"] == [1, 2, 3, 4]
    assert replica.calls[1]["sampling_params"] == to_vllm_sampling_params(params)
    assert backend.global_steps == [7, 7]


@pytest.mark.parametrize(
    ("answer", "match"),
    [
        (TokenOutput(token_ids=[], stop_reason="aborted"), "aborted"),
        (TokenOutput(token_ids=[5, 6], log_probs=None, stop_reason="completed"), "no logprobs"),
        (
            TokenOutput(token_ids=[5, 6], log_probs=[-1.0], stop_reason="completed"),
            "2 token IDs but 1 logprobs",
        ),
    ],
)
async def test_backend_bad_answers_raise(qwen3, answer, match):
    backend = VerlServerBackend(FakeClient(FakeReplica(qwen3, [answer])), "r")
    with pytest.raises(BackendError, match=match):
        await backend.sample([1], SamplingParams(max_new_tokens=8))


async def test_backend_server_exception_is_a_backend_error(qwen3):
    backend = VerlServerBackend(FakeClient(FakeReplica(qwen3, [])), "r")  # script empty -> IndexError
    with pytest.raises(BackendError, match="verl rollout server failed for request r"):
        await backend.sample([1], SamplingParams(max_new_tokens=8))


# --------------------------------------------------------------------------- agent loop
EPISODES: dict[str, object] = {}


async def two_question_episode(gateway, sampling, sample):
    """A Strands agent answers two unrelated questions in one rollout: linear mode starts a second
    lineage (row) for the second conversation. Reward 1.0 for session 0, 0.0 otherwise."""
    rid = f"{sample['uid']}-{sample['session_id']}"
    gateway.open_session(rid, sample["uid"], sampling)
    for question in ("What is 17 + 25?", "Say hi."):
        model = ARTModel(gateway=gateway, session_id=rid, group_id=sample["uid"])
        agent = Agent(
            model=model, tools=[add], callback_handler=None, conversation_manager=NullConversationManager()
        )
        await agent.invoke_async(question)
    traj = gateway.close_session(rid, reward=1.0 if sample["session_id"] == 0 else 0.0)
    EPISODES[rid] = traj
    return traj


def verl_config(**rollout):
    return OmegaConf.create(
        {
            "actor_rollout_ref": {"rollout": {"prompt_length": 4096, "response_length": 256, **rollout}},
            "data": {},
        }
    )


def make_loop(
    tok,
    replica,
    history_mode="linear",
    *,
    episode="test_verl_integration.two_question_episode",
    cfg=None,
    hf_model_type="qwen3",
    train_truncated=False,
):
    """As ``AgentLoopWorker._run_agent_loop`` does: hydra-instantiate the registered entry."""
    entry = {
        **_agent_loop_registry["strands_agent"],
        "episode": episode,
        "history_mode": history_mode,
        "train_truncated": train_truncated,
    }
    cfg = verl_config() if cfg is None else cfg
    return hydra.utils.instantiate(
        config=entry,
        trainer_config=DictConfigWrap(config=cfg),
        server_manager=FakeClient(replica),
        tokenizer=tok,
        processor=None,
        hf_model_type=hf_model_type,
        dataset_cls=None,
        data_config=DictConfigWrap(cfg.data),
        tools=ToolListWrap([]),
    )


SCRIPT = [ADD_CALL, "17 + 25 = 42.<|im_end|>", "Hi!<|im_end|>"]


async def run_session(qwen3, session_id: int):
    replica = FakeReplica(qwen3, SCRIPT)
    loop = make_loop(qwen3, replica)
    outputs = await loop.run(dict(VERL_SAMPLING), uid="u1", session_id=session_id, raw_prompt=[], index=0)
    return loop, replica, outputs, EPISODES[f"u1-{session_id}"]


async def test_agent_loop_one_output_per_row(qwen3):
    loop, replica, outputs, traj = await run_session(qwen3, 0)
    assert isinstance(loop, StrandsAgentLoop) and loop.max_new_tokens == 256
    assert len(traj.turns) == 3 and len(traj.rows) == 2  # the 2nd question opens a 2nd lineage
    assert [o.extra_fields["strands_row"] for o in outputs] == [0, 1]
    assert loop.server_manager.request_ids == ["u1-0"] * 3
    sent = replica.calls[0]["sampling_params"]
    assert sent["temperature"] == 0.7 and sent["top_p"] == 0.95 and sent["top_k"] == -1
    assert sent["logprobs"] is True and IM_END in sent["stop_token_ids"] and sent["max_tokens"] == 256
    for out, row in zip(outputs, traj.rows, strict=True):
        assert isinstance(out, AgentLoopOutput)
        assert out.prompt_ids + out.response_ids == row.input_ids
        s = len(out.prompt_ids)
        assert row.loss_mask[:s] == [0] * s and row.loss_mask[s] == 1  # split at the first sampled token
        assert out.response_mask == row.loss_mask[s:] and out.response_logprobs == row.logprobs[s:]
        assert {lp for lp, m in zip(out.response_logprobs, out.response_mask, strict=True) if m} == {-0.25}
        assert out.reward_score == 1.0
        assert (
            out.extra_fields["strands_rollout_id"] == "u1-0" and out.extra_fields["strands_group_id"] == "u1"
        )
        assert out.extra_fields["min_global_steps"] == out.extra_fields["max_global_steps"] == 7
    sampled = [qwen3.encode(t, add_special_tokens=False) for t in SCRIPT]
    assert sum(sum(o.response_mask) for o in outputs) == sum(map(len, sampled))
    # row 0: tool call, tool result (mask 0), answer; row 1: "Hi!"
    assert qwen3.decode(outputs[1].response_ids) == "Hi!<|im_end|>"
    assert "<tool_response>\n42\n</tool_response>" in qwen3.decode(outputs[0].response_ids)


def test_trajectory_without_reward_or_rows_is_rejected():
    from strands_art.trajectory import Trajectory

    with pytest.raises(ValueError, match="no reward"):
        trajectory_outputs(Trajectory("r"))
    with pytest.raises(ValueError, match="no rows"):
        trajectory_outputs(Trajectory("r", reward=1.0))


class StoreTQ:
    """A stand-in TransferQueue in one process, with TransferQueue's key-value semantics: a put adds
    or replaces fields and tags of its keys and returns their ``KVBatchMeta``; a get returns the rows
    as one TensorDict (variable-length fields as jagged nested tensors, verl's own
    ``list_of_dict_to_tensordict``), selected fields that no row holds left out."""

    def __init__(self):
        self.rows: dict[str, dict] = {}
        self.tags: dict[str, dict] = {}

    async def async_kv_batch_put(self, keys, fields, tags=None, partition_id=None):
        return self.kv_batch_put(keys, partition_id, fields, tags)

    def kv_batch_put(self, keys, partition_id=None, fields=None, tags=None):
        for i, k in enumerate(keys):
            if fields is not None:
                row = fields[i]
                if isinstance(row, TensorDict):
                    row = {name: row[name] for name in row.keys()}
                self.rows.setdefault(k, {}).update(row)
            self.tags.setdefault(k, {}).update(tags[i] if tags else {})
        return KVBatchMeta(keys=list(keys), tags=[self.tags[k] for k in keys], partition_id=partition_id)

    def kv_batch_get(self, keys, partition_id=None, select_fields=None):
        if isinstance(select_fields, str):
            select_fields = [select_fields]
        rows = [self.rows[k] for k in keys]
        names = list(rows[0]) if select_fields is None else [f for f in select_fields if f in rows[0]]
        return list_of_dict_to_tensordict([{n: r[n] for n in names} for r in rows])


def verl_postprocess(store: StoreTQ, monkeypatch):
    """verl's real AgentLoopWorkerTQ._agent_loop_postprocess on a worker without Ray."""
    monkeypatch.setattr(agent_loop_tq, "tq", store)
    cls = agent_loop_tq.AgentLoopWorkerTQ.__ray_metadata__.modified_class
    worker = object.__new__(
        type("Post", (AgentLoopWorker,), {"_agent_loop_postprocess": cls._agent_loop_postprocess})
    )
    worker.reward_loop_worker_handles, worker.distillation_enabled, worker.processor = None, False, None
    worker.mm_processor_kwargs = {}
    return worker


async def test_outputs_through_verls_transfer_queue_and_grpo(qwen3, monkeypatch):
    store = StoreTQ()
    worker = verl_postprocess(store, monkeypatch)
    trajs = {}
    for session in (0, 1):
        _, _, outputs, traj = await run_session(qwen3, session)
        trajs[session] = traj
        await worker._agent_loop_postprocess(outputs, False, uid="u1", session_id=session, global_steps=1)
    keys = sorted(store.rows)
    assert keys == ["u1_0_0", "u1_0_1", "u1_1_0", "u1_1_1"]
    for key in keys:
        row = trajs[int(key[3])].rows[int(key[5])]
        f = store.rows[key]
        assert torch.equal(f["input_ids"], torch.tensor(row.input_ids))
        assert f["response_mask"].tolist() == f["loss_mask"].tolist() == row.loss_mask[len(f["prompts"]) :]
        assert f["rollout_log_probs"].tolist() == row.logprobs[len(f["prompts"]) :]
        assert f["rm_scores"][-1].item() == row.reward and f["rm_scores"][:-1].abs().sum() == 0
        assert store.tags[key]["seq_len"] == len(row.input_ids)
    # verl's GRPO over the last output of each session, broadcast to every row of the session
    resp = torch.nn.utils.rnn.pad_sequence([store.rows[k]["response_mask"] for k in keys], batch_first=True)
    scores = torch.nn.utils.rnn.pad_sequence([store.rows[k]["rm_scores"] for k in keys], batch_first=True)
    data = DataProto.from_dict(
        tensors={"response_mask": resp, "token_level_rewards": scores},
        non_tensors={"uid": np.array(["u1"] * 4, dtype=object)},
    )
    data = compute_advantage_for_multi_trajectories(data, keys, AdvantageEstimator.GRPO, num_repeat=2)
    expected = group_advantages([1.0, 0.0], GRPOConfig(scale_by_std=True))
    for i, key in enumerate(keys):
        adv = data.batch["advantages"][i][resp[i].bool()]
        assert torch.allclose(adv, torch.full_like(adv, expected[int(key[3])]), atol=1e-5)
    assert math.isclose(expected[0], 1 / math.sqrt(2), rel_tol=1e-5)


async def one_answer_episode(gateway, sampling, sample):
    """One answer straight through the gateway; reward 1.0 for session 0, 0.0 otherwise."""
    rid = f"{sample['uid']}-{sample['session_id']}"
    gateway.open_session(rid, sample["uid"], sampling)
    await gateway.generate(rid, [{"role": "user", "content": "Say hi."}])
    traj = gateway.close_session(rid, reward=1.0 if sample["session_id"] == 0 else 0.0)
    EPISODES[rid] = traj
    return traj


RUNAWAY = "Let me think about how to say hi. " * 10


@pytest.mark.parametrize("train_truncated", [False, True])
async def test_a_rollout_with_nothing_to_train_keeps_its_reward_in_verls_group(
    qwen3, monkeypatch, train_truncated
):
    """Session 1's only answer is cut at ``response_length`` (truncated): by default it has no token
    to train, yet it still comes out of the agent loop (one output, response mask all 0, its
    reward), so verl's real postprocess and GRPO count its reward in the group: session 0 gets the
    advantage of the group [1.0, 0.0], not the 0 of a group of one. ``train_truncated: true`` in
    the loop's entry trains it as before."""
    store = StoreTQ()
    worker = verl_postprocess(store, monkeypatch)
    cfg = verl_config(response_length=8)
    trajs, outputs = {}, {}
    for session, text in ((0, "Hi!<|im_end|>"), (1, RUNAWAY)):
        replica = FakeReplica(qwen3, [text])
        episode = "test_verl_integration.one_answer_episode"
        loop = make_loop(qwen3, replica, episode=episode, cfg=cfg, train_truncated=train_truncated)
        outputs[session] = await loop.run(
            dict(VERL_SAMPLING), uid="u2", session_id=session, raw_prompt=[], index=0
        )
        trajs[session] = EPISODES[f"u2-{session}"]
        await worker._agent_loop_postprocess(
            outputs[session], False, uid="u2", session_id=session, global_steps=1
        )
    cut = trajs[1].turns[0]
    assert cut.finish_reason == "length" and cut.tags == ["truncated"] and len(cut.output_ids) == 8
    [out] = outputs[1]
    row = trajs[1].rows[0]
    assert out.prompt_ids + out.response_ids == row.input_ids and out.reward_score == 0.0
    assert len(out.prompt_ids) == row.turn_spans[0][0]  # split at its first sampled token
    assert out.response_mask == ([1] * 8 if train_truncated else [0] * 8)
    assert out.extra_fields["strands_untrained"] is not train_truncated
    assert out.extra_fields["strands_loss_excluded"] == (
        [] if train_truncated else [{"turn": 0, "span": row.turn_spans[0], "reason": "truncated"}]
    )
    assert [o.extra_fields["strands_untrained"] for o in outputs[0]] == [False]
    keys = sorted(store.rows)
    assert keys == ["u2_0_0", "u2_1_0"]
    assert store.rows["u2_1_0"]["rm_scores"].tolist() == [0.0] * 8  # reward 0.0 on its last token
    assert store.rows["u2_0_0"]["rm_scores"][-1].item() == 1.0
    resp = torch.nn.utils.rnn.pad_sequence([store.rows[k]["response_mask"] for k in keys], batch_first=True)
    scores = torch.nn.utils.rnn.pad_sequence([store.rows[k]["rm_scores"] for k in keys], batch_first=True)
    data = DataProto.from_dict(
        tensors={"response_mask": resp, "token_level_rewards": scores},
        non_tensors={"uid": np.array(["u2"] * 2, dtype=object)},
    )
    data = compute_advantage_for_multi_trajectories(data, keys, AdvantageEstimator.GRPO, num_repeat=2)
    expected = group_advantages([1.0, 0.0], GRPOConfig(scale_by_std=True))
    adv = data.batch["advantages"]
    trained0 = adv[0][resp[0].bool()]
    assert trained0.numel() == len(trajs[0].turns[0].output_ids) and torch.allclose(
        trained0, torch.full_like(trained0, expected[0]), atol=1e-5
    )
    assert expected[0] > 0.7  # a group of one would have given 0
    if train_truncated:
        trained1 = adv[1][resp[1].bool()]
        assert torch.allclose(trained1, torch.full_like(trained1, expected[1]), atol=1e-5)
    else:
        assert adv[1].abs().sum() == 0  # nothing of it is trained


def test_untrained_stand_in_is_the_last_row_with_every_token_masked():
    from strands_art.trajectory import Row, Trajectory

    def row(tag):
        r = Row(
            [1, 2, 3, 4, 5], [0, 1, 1, 0, 1], [0.0, -0.5, -0.5, 0.0, -0.5], "r", "g", [0, 1], [[1, 3], [4, 5]]
        )
        r.metadata["turn_tags"] = {"0": [tag], "1": [tag]}
        return r

    traj = Trajectory("r", "g", rows=[row("truncated"), row("discarded")])
    traj.set_reward(0.5)
    [out] = trajectory_outputs(traj)
    assert out.prompt_ids == [1] and out.response_ids == [2, 3, 4, 5] and out.response_mask == [0, 0, 0, 0]
    assert out.reward_score == 0.5 and out.extra_fields["strands_untrained"] is True
    assert out.extra_fields["strands_num_rows"] == 1
    assert [e["reason"] for e in out.extra_fields["strands_loss_excluded"]] == ["discarded", "discarded"]
    kept = trajectory_outputs(traj, grpo=GRPOConfig(train_truncated=True))
    assert [o.response_mask for o in kept] == [[1, 1, 0, 1]]  # the discarded row is dropped


# --------------------------------------------------------------------------- trainer extension
def trainer_for(
    store: StoreTQ, monkeypatch, *, prompts: int, mini: int, dp: int, epochs: int = 1, n: int = 16
):
    """A StepStablePPOTrainer with just what _balance_batch / _update_actor touch."""
    monkeypatch.setattr(padding_utils, "tq", store)

    class ActorGroup:
        _dispatch_info = {"actor": list(range(dp))}
        batches: list[KVBatchMeta] = []

        def update_actor(self, batch):
            self.batches.append(batch)
            return {"metrics": {"mfu": 0.5, "pg_loss": [0.1]}}

    t = object.__new__(get_trainer_cls(TRAINER_NAME))
    t.config = OmegaConf.create(
        {
            "data": {"train_batch_size": prompts},
            "actor_rollout_ref": {
                "actor": {
                    "ppo_mini_batch_size": mini,
                    "ppo_epochs": epochs,
                    "ppo_max_token_len_per_gpu": 16384,
                    "calculate_entropy": False,
                    "entropy_coeff": 0.0,
                    "data_loader_seed": 42,
                    "shuffle": False,
                },
                "rollout": {"n": n, "temperature": 1.0},
            },
            "trainer": {"critic_warmup": 0},
        }
    )
    t.use_critic, t.global_steps = False, 1
    t.tokenizer = type("Tok", (), {"eos_token_id": IM_END})()
    t.actor_rollout_wg = ActorGroup()
    return t


def rows_batch(store: StoreTQ, prompts: int, rollouts: int, rows_per_rollout: int) -> KVBatchMeta:
    keys, tags = [], []
    for p in range(prompts):
        for s in range(rollouts):
            for i in range(rows_per_rollout):
                key = f"p{p}_{s}_{i}"
                n = 10 + (p * 7 + s * 3 + i) % 50
                store.kv_batch_put([key], "train", [{"prompts": torch.ones(n - 1, dtype=torch.long)}], [{}])
                keys.append(key)
                tags.append({"seq_len": n, "prompt_len": n - 1, "response_len": 1})
    return KVBatchMeta(keys=keys, tags=tags, partition_id="train")


def run_step(t: StepStablePPOTrainer, batch: KVBatchMeta) -> tuple[KVBatchMeta, list[_Worker], dict]:
    """Our _balance_batch and _update_actor, then verl's dispatch split and train_mini_batch per rank."""
    metrics: dict = {}
    batch = t._balance_batch(batch, metrics)
    t._update_actor(batch, metrics)
    (sent,) = t.actor_rollout_wg.batches[-1:]
    dp = len(t.actor_rollout_wg._dispatch_info["actor"])
    # verl's dispatch (BatchData.chunk) turns the KVBatchMeta into TransferQueue's BatchMeta (same
    # key order; needs a live TQ) and chunks that: contiguous, equal parts, as KVBatchMeta.chunk does
    workers = []
    for rank, meta in enumerate(sent.chunk(dp)):
        # what _async_meta_to_realdata hands the worker: the rows in key order + extra_info
        seq_len = torch.tensor([tag["seq_len"] for tag in meta.tags])
        td = tu.get_tensordict({"seq_len": seq_len, "rollout_id": list(meta.keys)})
        for key, val in meta.extra_info.items():
            tu.assign_non_tensor_data(td, key, val)
        w = _Worker(rank, dp)
        TrainingWorker.train_mini_batch(w, td)
        workers.append(w)
    return sent, workers, metrics


def rollout(key: str) -> str:
    return key.rsplit("_", 1)[0]


@pytest.mark.parametrize("rows_per_rollout", [1, 3])
def test_512_or_1536_rows_one_step(monkeypatch, rows_per_rollout):
    store = StoreTQ()
    t = trainer_for(store, monkeypatch, prompts=32, mini=32, dp=2)
    sent, workers, metrics = run_step(t, rows_batch(store, 32, 16, rows_per_rollout))
    assert len(sent) == 512 * rows_per_rollout and metrics["strands/padding_rows"] == 0
    assert sent.extra_info["num_mini_batch"] == 1 and "mini_batch_size" not in sent.extra_info
    assert sent.extra_info["dataloader_kwargs"] == {"shuffle": False} and sent.extra_info["epochs"] == 1
    assert sent.extra_info["global_batch_size"] == 512  # rollouts per mini-batch (verl's own tag)
    assert [len(w.steps) for w in workers] == [1, 1]
    assert [len(w.steps[0]) for w in workers] == [256 * rows_per_rollout] * 2


def test_513_rows_two_ranks_pad_to_514_not_1024(monkeypatch):
    store = StoreTQ()
    t = trainer_for(store, monkeypatch, prompts=32, mini=32, dp=2)
    batch = rows_batch(store, 27, 19, 1)  # 513 rows
    assert len(batch) == 513
    assert PPOTrainer._get_required_batch_multiple(t, 2) == 512  # verl's stock padding -> 1,024 rows
    sent, workers, metrics = run_step(t, batch)
    assert len(sent) == 514 and metrics["strands/padding_rows"] == 1
    pads = [k for k, tag in zip(sent.keys, sent.tags, strict=True) if tag.get("is_padding")]
    assert len(pads) == 1 and pads[0].startswith("pad") and pads[0].endswith("_0_0")
    assert store.rows[pads[0]]["response_mask"].sum().item() == 0  # verl's no-op row
    assert [len(w.steps) for w in workers] == [1, 1] and [len(w.steps[0]) for w in workers] == [257, 257]


@pytest.mark.parametrize("rows_per_rollout", [1, 3])
def test_300_or_900_rows_three_mini_batches_three_steps(monkeypatch, rows_per_rollout):
    store = StoreTQ()
    t = trainer_for(store, monkeypatch, prompts=3, mini=1, dp=2, n=100)
    sent, workers, metrics = run_step(t, rows_batch(store, 3, 100, rows_per_rollout))
    assert sent.extra_info["num_mini_batch"] == 3 and metrics["strands/num_mini_batches"] == 3
    assert [len(w.steps) for w in workers] == [3, 3]
    for k in range(3):  # step k on both ranks: whole rollouts of one task
        keys = workers[0].steps[k] + workers[1].steps[k]
        assert len(keys) == 100 * rows_per_rollout
        assert len({key.split("_")[0] for key in keys}) == 1
        for other in range(3):
            if other != k:
                assert not {rollout(x) for x in keys} & {
                    rollout(x) for x in workers[0].steps[other] + workers[1].steps[other]
                }


def test_two_epochs_two_mini_batches_four_steps(monkeypatch):
    store = StoreTQ()
    t = trainer_for(store, monkeypatch, prompts=4, mini=2, dp=2, epochs=2, n=4)
    sent, workers, _ = run_step(t, rows_batch(store, 4, 4, 2))
    assert sent.extra_info["num_mini_batch"] == 2 and sent.extra_info["epochs"] == 2
    assert [len(w.steps) for w in workers] == [4, 4]
    assert workers[0].steps[0] == workers[0].steps[2]  # epoch 2 replays the same mini-batches, unshuffled


def test_plan_layout_rejects_bad_rows():
    from strands_art.training.batching import BatchingConfig

    cfg = BatchingConfig(1, 1)
    with pytest.raises(ValueError, match="already padding"):
        plan_layout(["u_0_0"], [{"seq_len": 3, "is_padding": True}], cfg)
    with pytest.raises(ValueError, match="no seq_len"):
        plan_layout(["u_0_0"], [{}], cfg)
    with pytest.raises(ValueError, match="uid_session_index"):
        plan_layout(["nounderscore"], [{"seq_len": 3}], cfg)
    with pytest.raises(ValueError, match="no rows"):
        plan_layout([], [], cfg)


def test_update_actor_needs_a_layout(monkeypatch):
    t = trainer_for(StoreTQ(), monkeypatch, prompts=1, mini=1, dp=1)
    with pytest.raises(RuntimeError, match="before _balance_batch"):
        t._update_actor(KVBatchMeta(keys=["u_0_0"], tags=[{}]), {})


def test_registered_under_its_trainer_mode():
    assert get_trainer_cls("strands_sync") is StepStablePPOTrainer


def test_runs_in_verls_synchronous_mode():
    """verl tests ``trainer_mode == "sync"`` literally: under ``strands_sync`` the trainer must still
    get the synchronous replay buffer and keep whole dataloader fetches."""
    from pathlib import Path

    import verl
    from hydra import compose, initialize_config_dir
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = compose(
            config_name="ppo_trainer",
            overrides=["algorithm.adv_estimator=grpo", f"trainer.v1.trainer_mode={TRAINER_NAME}"],
        )
    trainer = get_trainer_cls(TRAINER_NAME)(cfg)
    assert trainer.trainer_mode == "sync" and type(trainer.replay_buffer) is ReplayBuffer
    assert trainer.replay_buffer.gen_batch_size == cfg.data.train_batch_size  # not forced to 1
