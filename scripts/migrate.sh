#!/usr/bin/env bash
# The main job: the MigrationBench agent on Qwen2.5-Coder-1.5B (llama.cpp, CPU), real Maven builds,
# a results table. Extra arguments go to `strands-art migrate` (see --help); it runs where you call it
# from, so relative paths (--resume runs/..., --out) and its default ./runs/ are yours.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
(cd "$repo" && bash scripts/bootstrap.sh)
exec "$repo/.venv/bin/strands-art" migrate "$@"
