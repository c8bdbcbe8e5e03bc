#!/usr/bin/env bash
# The whole test suite (what CI runs): the main suite in .venv, then the verl tests in
# .venv-verl (scripts/test-verl.sh; STRANDS_ART_SKIP_VERL=1 skips them). Extra arguments go to
# the main pytest run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
status=0
.venv/bin/python -m pytest -q -p no:cacheprovider "$@" || status=$?
bash scripts/check-installs.sh || status=$?
if [ "${STRANDS_ART_SKIP_VERL:-0}" != "1" ]; then
  bash scripts/test-verl.sh || status=$?
fi
exit "$status"
