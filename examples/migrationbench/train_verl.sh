#!/usr/bin/env bash
# GRPO + LoRA on Qwen3-Coder-30B-A3B-Instruct for MigrationBench with verl 0.9.1 (the published
# configuration): 32 prompts x 16 rollouts per step, PPO mini-batch of 32 prompts (-> 1 mini-batch,
# 1 optimizer step per step whatever the row count), linear history mode, step-stable batching
# (trainer.v1.trainer_mode=strands_sync) and the Strands agent loop (verl_agent_loops.yaml).
#
# GPUs: one node of 8x H100 80GB (or 8x H200). Estimate, not a measurement: FSDP over 8 holds the
# bf16 base (61 GB -> 7.6 GB/GPU) and rank-32 LoRA; a 32k-token micro-batch with gradient
# checkpointing and fused logprob kernels fits next to it; during rollout 4 vLLM replicas (TP=2,
# 0.6 of each GPU: ~30 GB weights + ~17 GB KV cache per GPU) serve the 512 agent sessions. See
# docs/setup-verl.md ("GPUs") for the arithmetic and what changes on 4 GPUs.
# CPUs: every rollout runs Maven builds; add CPU-only Ray nodes for the agent-loop workers.
#
#   pip install -e '.[verl-vllm]'     # on every node, CPython 3.11 or 3.12: docs/setup-verl.md
#   python examples/migrationbench/make_verl_dataset.py --tasks-dir /shared/mb-tasks --out data/mb
#   MODEL=/models/Qwen3-Coder-30B-A3B-Instruct DATA=data/mb examples/migrationbench/train_verl.sh
#
# Extra arguments are passed to verl as Hydra overrides (e.g. trainer.total_training_steps=2).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
MODEL=${MODEL:-Qwen/Qwen3-Coder-30B-A3B-Instruct}
DATA=${DATA:-data/migrationbench}
NGPUS=${NGPUS:-8}
NNODES=${NNODES:-1}
TP=${TP:-2}
# verl imports these in every Ray process (verl/__init__.py): they register the trainer mode
# "strands_sync" and the agent loop "strands_agent".
export VERL_USE_EXTERNAL_MODULES=strands_art.verl.trainer,strands_art.verl.agent_loop

python -m verl.trainer.main_ppo \
  "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES='$VERL_USE_EXTERNAL_MODULES'" \
  trainer.use_v1=True \
  trainer.v1.trainer_mode=strands_sync \
  algorithm.adv_estimator=grpo \
  algorithm.norm_adv_by_std_in_grpo=True \
  algorithm.use_kl_in_reward=False \
  algorithm.rollout_correction.bypass_mode=True \
  data.train_files="$DATA/train.parquet" \
  data.val_files="$DATA/val.parquet" \
  data.train_batch_size=32 \
  data.max_prompt_length=2048 \
  data.max_response_length=4096 \
  data.return_raw_chat=True \
  actor_rollout_ref.model.path="$MODEL" \
  actor_rollout_ref.model.lora_rank=32 \
  actor_rollout_ref.model.lora_alpha=32 \
  "actor_rollout_ref.model.target_modules=[q_proj,k_proj,v_proj,o_proj]" \
  actor_rollout_ref.model.use_remove_padding=True \
  actor_rollout_ref.model.enable_gradient_checkpointing=True \
  actor_rollout_ref.model.use_fused_kernels=True \
  actor_rollout_ref.actor.fsdp_config.model_dtype=bfloat16 \
  actor_rollout_ref.actor.optim.lr=1e-5 \
  actor_rollout_ref.actor.ppo_mini_batch_size=32 \
  actor_rollout_ref.actor.ppo_epochs=1 \
  actor_rollout_ref.actor.shuffle=False \
  actor_rollout_ref.actor.use_dynamic_bsz=True \
  actor_rollout_ref.actor.ppo_max_token_len_per_gpu=32768 \
  actor_rollout_ref.actor.loss_agg_mode=token-mean \
  actor_rollout_ref.actor.use_kl_loss=False \
  actor_rollout_ref.actor.entropy_coeff=0 \
  actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.mode=async \
  actor_rollout_ref.rollout.n=16 \
  actor_rollout_ref.rollout.temperature=1.0 \
  actor_rollout_ref.rollout.top_p=1.0 \
  actor_rollout_ref.rollout.calculate_log_probs=True \
  actor_rollout_ref.rollout.logprobs_mode=processed_logprobs \
  actor_rollout_ref.rollout.tensor_model_parallel_size="$TP" \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
  actor_rollout_ref.rollout.max_model_len=32768 \
  actor_rollout_ref.rollout.response_length=4096 \
  actor_rollout_ref.rollout.enable_prefix_caching=True \
  actor_rollout_ref.rollout.load_format=safetensors \
  actor_rollout_ref.rollout.layered_summon=True \
  actor_rollout_ref.rollout.agent.num_workers=8 \
  actor_rollout_ref.rollout.agent.agent_loop_config_path="$HERE/verl_agent_loops.yaml" \
  trainer.critic_warmup=0 \
  trainer.n_gpus_per_node="$NGPUS" \
  trainer.nnodes="$NNODES" \
  trainer.val_before_train=False \
  trainer.test_freq=-1 \
  trainer.save_freq=10 \
  trainer.total_epochs=10 \
  trainer.project_name=strands-art \
  trainer.experiment_name=migrationbench-qwen3-coder-30b-a3b-grpo-lora \
  'trainer.logger=[console]' \
  "$@"
