#!/usr/bin/env bash
# The main job: the MigrationBench agent on Qwen2.5-Coder-1.5B (llama.cpp, CPU), real Maven builds,
# a results table. Extra arguments go to `strands-art migrate` (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/strands-art migrate "$@"
