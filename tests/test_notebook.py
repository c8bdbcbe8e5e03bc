"""examples/train.ipynb executes end to end (nbclient, the venv's python3 kernel) in its small
configuration: real SmolLM2 rollouts through the gateway, GRPO updates, checkpoints, plot, and the
MigrationBench section: generated tasks, the migration agent's rollouts in the sandbox scored by
real Maven builds, one GRPO update, held-out evaluation before and after."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "train.ipynb"


@pytest.mark.slow
@pytest.mark.maven
def test_train_notebook_executes(tmp_path, monkeypatch):
    monkeypatch.setenv("STRANDS_ART_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("STRANDS_ART_NOTEBOOK_MIGRATIONBENCH", "1")
    monkeypatch.setenv("STRANDS_ART_NOTEBOOK_RUN_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb, kernel_name="python3", timeout=900, resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "held-out reward:" in text and "after 4 optimizer steps" in text  # 2 batches x 2 steps
    assert "--env migrationbench" in text and "--prompt compact-no-recipe" in text
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the inline plot
    run = tmp_path / "runs" / "capitals"
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["outer_batch"] for r in records if r["kind"] == "train"] == [0, 1]
    assert [r["outer_batch"] for r in records if r["kind"] == "eval"] == [0, 2]
    assert (run / "checkpoints" / "ob-000002" / "adapter_model.safetensors").exists()
    mb = tmp_path / "runs" / "migrationbench"
    mb_records = [json.loads(line) for line in (mb / "metrics.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["outer_batch"]) for r in mb_records] == [("eval", 0), ("train", 0), ("eval", 1)]
    assert mb_records[1]["optimizer_steps"] == 1 and mb_records[1]["rollouts"] == 2
    rollouts = [json.loads(x) for x in (mb / "env" / "rollouts" / "results.jsonl").read_text().splitlines()]
    assert sorted(r["rollout_id"] for r in rollouts) == [  # 1 group of 2; 1 held-out task before and after
        "b0-java-level-props-0000000-r0",
        "b0-java-level-props-0000000-r1",
        "eval-b0-java-level-props-1000000-r0",
        "eval-b1-java-level-props-1000000-r0",
    ]
    assert all(r["reward"] in (0.0, 0.5, 1.0) and "edited_files" in r for r in rollouts)
    assert sorted(p.name for p in (tmp_path / "runs" / "mb-tasks" / "train").iterdir()) == [
        "java-level-props-0000000",
        "manifest.json",
    ]
