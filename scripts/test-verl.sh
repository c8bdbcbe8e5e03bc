#!/usr/bin/env bash
# The verl tests, in their own environment: verl 0.9.1 pins transformers 5.10.x, so it lives in
# .venv-verl beside the main .venv. They run verl's real batch splitting, train_mini_batch and
# agent-loop code on the CPU, and one outer batch of the strands_sync trainer with rollouts from a
# real vLLM server (tests/test_verl_real_vllm.py, marker real_vllm), and the strands_agent loop inside
# verl's own agent-loop manager and worker Ray actors on a local Ray cluster, sampling from the same
# server (tests/test_verl_ray_agent_loop.py, marker real_vllm): that server runs from the vLLM
# environment ($STRANDS_ART_VLLM_PYTHON or .venv-vllm, made by scripts/bootstrap-vllm.sh before this
# script in CI); without one the test skips, or fails under STRANDS_ART_REQUIRE_VLLM=1.
# Called by scripts/test.sh (first with --prepare, in the background while the main suite runs:
# only creates/updates .venv-verl); STRANDS_ART_SKIP_VERL=1 skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv-verl/bin/python ]; then
  echo "test-verl: creating .venv-verl" >&2
  "$PY" -m venv .venv-verl
fi
stamp=.venv-verl/.strands-art-installed
want="$(cat pyproject.toml scripts/test-verl.sh | sha1sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "test-verl: installing verl 0.9.1 and the package (several minutes the first time)" >&2
  .venv-verl/bin/python -m pip install -q --upgrade pip
  .venv-verl/bin/python -m pip install -q "torch==2.13.0"
  .venv-verl/bin/python -m pip install -q -e ".[verl,dev]"
  echo "$want" > "$stamp"
fi
if [ "${1:-}" = "--prepare" ]; then
  echo "test-verl: .venv-verl ready" >&2
  exit 0
fi
exec .venv-verl/bin/python -m pytest -q -p no:cacheprovider tests/test_verl_adapter.py tests/test_verl_integration.py tests/test_verl_yaml.py \
  tests/test_verl_real_vllm.py tests/test_verl_ray_agent_loop.py "$@"
