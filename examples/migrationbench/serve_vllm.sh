#!/usr/bin/env bash
# A standalone vLLM server for Qwen3-Coder-30B-A3B-Instruct, for `strands-art migrate --backend vllm`
# (baseline and evaluation rollouts of the base model or of a merged checkpoint). The verl training
# run (train_verl.sh) does NOT need it: verl starts its own vLLM rollout servers.
# Flags and why: docs/setup-vllm.md. GPUs: 2x H100 80GB with TP=2 (61 GB of bf16 weights + KV cache
# for ~30 concurrent 32k-token agent contexts); 1x H200 141GB with TP=1.
#
#   MODEL=/models/Qwen3-Coder-30B-A3B-Instruct TP=2 examples/migrationbench/serve_vllm.sh
#   strands-art migrate --backend vllm --base-url http://127.0.0.1:8000 \
#       --model qwen3-coder-30b-a3b --tokenizer "$MODEL" --history-mode linear
set -euo pipefail
MODEL=${MODEL:-Qwen/Qwen3-Coder-30B-A3B-Instruct}
TP=${TP:-2}
PORT=${PORT:-8000}
MAX_MODEL_LEN=${MAX_MODEL_LEN:-32768}

exec vllm serve "$MODEL" \
  --served-model-name qwen3-coder-30b-a3b \
  --tensor-parallel-size "$TP" \
  --logprobs-mode processed_logprobs \
  --generation-config vllm \
  --max-model-len "$MAX_MODEL_LEN" \
  --enable-prefix-caching \
  --gpu-memory-utilization 0.90 \
  --port "$PORT" \
  "$@"
