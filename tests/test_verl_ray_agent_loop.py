"""The ``strands_agent`` loop inside verl 0.9.1's own Ray actors on CPU, sampling from a real vLLM.

What runs for real, in a local Ray cluster (``ray.init(address="local")``, 4 logical CPUs):

- **the agent-loop manager and workers**: verl's ``AgentLoopManagerTQ.create`` starts
  ``rollout.agent.num_workers=2`` ``AgentLoopWorkerTQ`` Ray actors (separate processes; each
  loads the tokenizer and our agent-loop entry from ``agent_loop_config_path``, imports
  ``strands_art.verl.agent_loop`` through ``VERL_USE_EXTERNAL_MODULES`` and joins TransferQueue);
  the trainer's own ``_submit_batch_to_rollout`` registers the prompts and dispatches them;
  each worker runs ``rollout.n`` Strands rollouts per prompt (``_run_prompt``), each one
  ``StrandsAgentLoop.run`` hydra-instantiated from the entry, and puts one row per output into
  TransferQueue (``_agent_loop_postprocess``);
- **routing**: verl's ``LLMServerManager`` (standalone mode) and its load-balancer actor
  (``GlobalRequestLoadBalancer``), verl's ``LLMServerClient`` in each worker: sticky per rollout,
  least-loaded otherwise;
- **TransferQueue**: the real one (``tq.init(config.transfer_queue)`` as verl's ``main_ppo``: a
  controller and one storage unit as Ray actors);
- **the step**: verl's ``ReplayBuffer.sample`` waits for the finished groups, then
  ``StepStablePPOTrainer._step_once`` (our ``_balance_batch``, verl's ``_compute_old_log_prob``
  in bypass mode, verl's GRPO ``_compute_advantage``, our ``_update_actor``) over TransferQueue,
  and verl's ``TrainingWorker.train_mini_batch`` on the rows the actor group receives.

Test doubles: the server actor (``VLLMHTTPServer``: verl's ``vLLMHttpServer`` holds vLLM
in-process, which the verl environment cannot import; it forwards each ``generate`` to the real
server and keeps every exchange), the actor worker group (one rank in this process; the FSDP2
update on verl's real engine is ``tests/test_verl_real_vllm.py``), the training engine inside
``train_mini_batch`` (counts optimizer steps, from ``test_verl_adapter``), the reward and
checkpoint managers (rewards come with the rows; no weights to sync into the standalone server).
Where verl's CPU path stops: ``test_where_verl_stops_on_cpu`` and docs/setup-verl.md.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip(
    "verl.trainer.ppo.v1",
    reason="verl==0.9.1 with its V1 trainer is not installed "
    "(pip install 'strands-art[verl]' 'TransferQueue>=0.1.10' cachetools)",
)

import ray  # noqa: E402
import torch  # noqa: E402
import transfer_queue as tq  # noqa: E402
from support.verl_episodes import QUESTIONS  # noqa: E402
from support.verl_vllm_replica import external_vllm_manager, sampled_runs  # noqa: E402
from test_verl_adapter import _Worker, process_group  # noqa: E402,F401
from test_verl_real_vllm import PROMPTS, RESPONSE_LENGTH, N, verl_config  # noqa: E402
from verl.trainer.ppo.v1 import get_trainer_cls  # noqa: E402
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ  # noqa: E402
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.workers.engine_workers import TrainingWorker  # noqa: E402

from strands_art.registry import load_tokenizer  # noqa: E402
from strands_art.verl.trainer import TRAINER_NAME  # noqa: E402

pytestmark = pytest.mark.real_vllm

TESTS = Path(__file__).resolve().parent
AGENT = "strands_two_agents"
WORKERS = 2
AGENT_LOOPS_YAML = f"""\
- name: {AGENT}
  _target_: strands_art.verl.agent_loop.StrandsAgentLoop
  episode: support.verl_episodes.two_agents_episode
  history_mode: linear
  train_truncated: true  # answers cut at 24 tokens: trained, so every exchange backs a row
"""


class RecordingActorGroup:
    """verl's actor worker group with one rank in this process: ``update_actor(KVBatchMeta)`` reads
    the rows from TransferQueue with ``extra_info`` attached (as verl's dispatch does) and runs
    verl's ``TrainingWorker.train_mini_batch`` on them with a step-counting engine."""

    _dispatch_info = {"actor": [0]}

    def __init__(self):
        self.sent, self.received, self.workers = [], [], []

    def update_actor(self, batch):
        self.sent.append(batch)
        td = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id)
        for key, val in batch.extra_info.items():
            tu.assign_non_tensor_data(td, key, val)
        self.received.append(td.clone())
        tu.assign_non_tensor_stack(td, "rollout_id", list(batch.keys))  # per row, as _Worker reads it
        worker = _Worker(0, 1)
        TrainingWorker.train_mini_batch(worker, td)
        self.workers.append(worker)
        return {"metrics": {"mfu": 0.0}}


def prompt_batch(global_steps: int):
    """What ``PPOTrainer._next_train_batch`` hands ``_submit_batch_to_rollout``: the dataset rows
    with a ``uid`` each (verl's keys split on ``_``: the uid holds none) and ``global_steps``."""
    raw = np.empty(len(PROMPTS), dtype=object)
    for i, _ in enumerate(PROMPTS):
        raw[i] = [{"role": "user", "content": q} for q in QUESTIONS]
    batch = tu.get_tensordict(
        {
            "raw_prompt": raw,
            "index": torch.arange(len(PROMPTS)),
            "agent_name": np.array([AGENT] * len(PROMPTS), dtype=object),
            "uid": np.array(list(PROMPTS), dtype=object),
        }
    )
    tu.assign_non_tensor_data(batch, "global_steps", global_steps)
    return batch


@pytest.fixture(scope="module")
def ray_step(real_vllm, process_group, tmp_path_factory):  # noqa: F811
    """Rollouts by verl's agent-loop worker actors on the real server, then one step over TQ."""
    yaml = tmp_path_factory.mktemp("agent-loops") / "agent_loops.yaml"
    yaml.write_text(AGENT_LOOPS_YAML)
    cfg = verl_config(
        f"actor_rollout_ref.rollout.agent.num_workers={WORKERS}",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={yaml}",
        "actor_rollout_ref.rollout.nnodes=1",  # standalone: one replica on the external server
        "actor_rollout_ref.rollout.n_gpus_per_node=1",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",  # verl's default 8: 8 processes
    )
    clock = {"start": time.monotonic()}
    # the worker processes import our agent loop and the CPU platform verl picks (VERL_PLATFORM)
    env = {
        "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)]),
        "VERL_USE_EXTERNAL_MODULES": "support.verl_cpu_platform,strands_art.verl.agent_loop",
        "TOKENIZERS_PARALLELISM": "false",
    }
    ray.init(address="local", num_cpus=4, include_dashboard=False, runtime_env={"env_vars": env})
    try:
        tq.init(cfg.transfer_queue)  # as verl's main_ppo does
        clock["cluster"] = time.monotonic()
        servers = external_vllm_manager(cfg, real_vllm.base_url, real_vllm.served_model_name)
        assert len(servers.server_handles) == 1, "one replica: n_gpus_per_node * nnodes / (tp * dp * pp)"
        manager = AgentLoopManagerTQ.create(cfg, llm_client=servers.get_client())
        clock["workers"] = time.monotonic()

        trainer = get_trainer_cls(TRAINER_NAME)(cfg)
        trainer.global_steps = 1
        trainer.agent_loop_manager = manager
        trainer.tokenizer = load_tokenizer("smollm2")
        trainer.curr_step_profile = False
        trainer.actor_rollout_wg = group = RecordingActorGroup()
        trainer.reward_loop_manager = SimpleNamespace(
            reward_loop_worker_handles=["rewards came with the rows"]
        )
        slept: list[bool] = []
        trainer.checkpoint_manager = SimpleNamespace(sleep_replicas=lambda: slept.append(True))

        submitted = trainer._submit_batch_to_rollout(prompt_batch(trainer.global_steps))
        metrics: dict = {}
        batch = trainer._step_once(metrics, {}, sample_batch_size=len(PROMPTS))
        clock["step"] = time.monotonic()
        rows = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id)
        exchanges = ray.get(servers.server_handles[0].exchanges.remote())
        worker_pids = ray.get(
            [w.__ray_call__.remote(lambda self: os.getpid()) for w in manager.agent_loop_workers]
        )
        marks = list(clock.items())
        print(
            "verl on Ray (s):", {k: round(t - p, 1) for (_, p), (k, t) in zip(marks, marks[1:], strict=False)}
        )
        yield SimpleNamespace(
            cfg=cfg,
            trainer=trainer,
            submitted=submitted,
            batch=batch,
            rows={key: rows[i] for i, key in enumerate(batch.keys)},
            exchanges=exchanges,
            worker_pids=worker_pids,
            group=group,
            metrics=metrics,
            slept=slept,
        )
    finally:
        try:
            tq.close()
        finally:
            ray.shutdown()


def test_agent_loops_ran_in_verls_worker_actors(ray_step):
    rs = ray_step
    assert rs.submitted == len(PROMPTS)
    assert len(set(rs.worker_pids)) == WORKERS and os.getpid() not in rs.worker_pids
    assert type(rs.trainer.replay_buffer) is ReplayBuffer  # verl's sync buffer, not ReplayBufferAsync
    expected = {f"{uid}_{s}_{i}" for uid in PROMPTS for s in range(N) for i in range(len(QUESTIONS))}
    assert set(rs.batch.keys) == expected  # one row per agent (linear mode), every rollout complete
    tags = dict(zip(rs.batch.keys, rs.batch.tags, strict=True))
    assert all(tags[k]["status"] == "success" and tags[k]["global_steps"] == 1 for k in expected)
    assert all(tags[k]["min_global_steps"] == tags[k]["max_global_steps"] == 1 for k in expected)


def test_rows_hold_exactly_what_the_real_server_received_and_returned(ray_step):
    rs = ray_step
    unmatched = list(rs.exchanges)
    for key, row in rs.rows.items():
        prompt, response = row["prompts"].tolist(), row["responses"].tolist()
        ids, mask = prompt + response, [0] * len(prompt) + row["response_mask"].tolist()
        logprobs = [0.0] * len(prompt) + row["rollout_log_probs"].tolist()
        assert row["input_ids"].tolist() == ids and row["loss_mask"].tolist() == mask[len(prompt) :]
        runs = sampled_runs(mask)
        assert runs and runs[0][0] == len(prompt)  # the row is split at its first sampled token
        for s, e in runs:
            ex = next(x for x in unmatched if x.sent_prompt_ids == ids[:s] and x.token_ids == ids[s:e])
            unmatched.remove(ex)  # each exchange backs exactly one sampled run
            assert ex.server_prompt_ids == ids[:s]
            assert torch.equal(torch.tensor(ex.logprobs, dtype=torch.float32), torch.tensor(logprobs[s:e]))
            assert len(ex.token_ids) <= RESPONSE_LENGTH and ex.sampling["max_tokens"] == RESPONSE_LENGTH
            assert ex.sampling["logprobs"] == 0 and ex.sampling["temperature"] == 1.0
        session = int(key.split("_")[1])
        scores = row["rm_scores"].tolist()
        assert scores[-1] == (1.0 if session == 0 else 0.0) and not any(scores[:-1])
    assert not unmatched and len(rs.exchanges) == len(PROMPTS) * N * len(QUESTIONS)


def test_step_over_transfer_queue(ray_step):
    rs = ray_step
    (received,) = rs.group.received
    (sent,) = rs.group.sent
    assert sent.extra_info["num_mini_batch"] == 2 and "mini_batch_size" not in sent.extra_info
    assert rs.metrics["strands/num_mini_batches"] == 2 and rs.metrics["strands/padding_rows"] == 0
    # rank-major, each mini-batch = the whole rollouts of one prompt
    halves = [{k.split("_")[0] for k in sent.keys[:4]}, {k.split("_")[0] for k in sent.keys[4:]}]
    assert all(len(h) == 1 for h in halves) and halves[0] != halves[1]
    (worker,) = rs.group.workers
    assert [sorted(step) for step in worker.steps] == [sorted(sent.keys[:4]), sorted(sent.keys[4:])]
    for i, key in enumerate(sent.keys):
        row = rs.rows[key]
        mask = row["response_mask"].bool()
        # verl's bypass mode: old logprobs = the recorded rollout logprobs, written back into TQ
        assert torch.equal(row["old_log_probs"], row["rollout_log_probs"])
        assert torch.equal(received["old_log_probs"][i], row["rollout_log_probs"])
        expected = 1 / math.sqrt(2) if key.split("_")[1] == "0" else -1 / math.sqrt(2)
        adv = row["advantages"][mask]
        assert torch.allclose(adv, torch.full_like(adv, expected), atol=1e-5)  # verl's GRPO, per rollout
    assert rs.slept == [True]  # verl's on_sample_end asked the replicas to sleep
