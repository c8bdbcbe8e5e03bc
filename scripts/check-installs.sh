#!/usr/bin/env bash
# Resolves every install line the docs give (marked blocks in README.md, docs/*.md,
# bench/README.md) for each CPython version they claim, at metadata level with `uv pip compile`
# (no wheel is downloaded), against the sources pip is configured with here; fails when a line
# does not resolve. Called by scripts/test.sh. Arguments go to scripts/check_installs.py
# (--pypi-only, --only NAME, --list). STRANDS_ART_SKIP_INSTALL_CHECK=1 skips it (no network).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${STRANDS_ART_SKIP_INSTALL_CHECK:-0}" = "1" ]; then
  echo "check-installs: skipped (STRANDS_ART_SKIP_INSTALL_CHECK=1)"
  exit 0
fi
exec "${STRANDS_ART_PYTHON:-.venv/bin/python}" scripts/check_installs.py "$@"
