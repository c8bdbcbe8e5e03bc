"""examples/train.ipynb executes end to end (nbclient, the venv's python3 kernel) in its small
configuration: real SmolLM2 rollouts through the gateway, GRPO updates, checkpoints, plot."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "train.ipynb"


@pytest.mark.slow
def test_train_notebook_executes(tmp_path, monkeypatch):
    monkeypatch.setenv("STRANDS_ART_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("STRANDS_ART_NOTEBOOK_MIGRATIONBENCH", "0")
    monkeypatch.setenv("STRANDS_ART_NOTEBOOK_RUN_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "held-out reward:" in text and "after 4 optimizer steps" in text  # 2 batches x 2 steps
    assert "MigrationBench cell skipped" in text
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the inline plot
    run = tmp_path / "runs" / "capitals"
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["outer_batch"] for r in records if r["kind"] == "train"] == [0, 1]
    assert [r["outer_batch"] for r in records if r["kind"] == "eval"] == [0, 2]
    assert (run / "checkpoints" / "ob-000002" / "adapter_model.safetensors").exists()
