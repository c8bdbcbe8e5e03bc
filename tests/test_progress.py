"""The live per-rollout line of the main job: turn, last tool call, elapsed."""

from __future__ import annotations

import json
from types import SimpleNamespace

from rich.console import Console
from rich.progress import Progress, TextColumn

from strands_art.envs.migrationbench.run.progress import LiveBoard, RolloutProgress, summarize_call


def test_summarize_call() -> None:
    assert summarize_call("shell", {"command": "mvn -q\n  clean verify"}) == "shell: mvn -q clean verify"
    assert (
        summarize_call("file_editor", {"command": "view", "path": "pom.xml"}) == "file_editor: view pom.xml"
    )
    assert summarize_call("shell", None) == "shell"
    long = summarize_call("shell", {"command": "x" * 200})
    assert len(long) == 60 and long.endswith("…")


def test_row_follows_turns_and_calls() -> None:
    progress = Progress(TextColumn("{task.description}"), console=Console(file=None, width=120))
    row = RolloutProgress(progress, "compiler-props-r0")
    (task,) = progress.tasks
    assert task.description == "compiler-props-r0  turn 1  (no tool call yet)"
    row._on_tool_call(SimpleNamespace(tool_use={"name": "shell", "input": {"command": "cat pom.xml"}}))
    row._on_model_call(SimpleNamespace(stop_response=object()))
    assert progress.tasks[0].description == "compiler-props-r0  turn 2  shell: cat pom.xml"
    row._on_model_call(SimpleNamespace(stop_response=None))  # a failed call is not a turn
    assert "turn 2" in progress.tasks[0].description
    row.close()
    assert progress.tasks == []


def test_live_board_mirrors_the_rows_for_the_viewer(tmp_path) -> None:
    import json

    board = LiveBoard(tmp_path / "live.json")
    progress = Progress(TextColumn("{task.description}"), console=Console(file=None, width=120))
    a = RolloutProgress(progress, "alpha-r0", board)
    RolloutProgress(progress, "beta-r0", board)  # stays in flight
    a._on_tool_call(SimpleNamespace(tool_use={"name": "shell", "input": {"command": "mvn -q verify"}}))
    a._on_model_call(SimpleNamespace(stop_response=object()))
    rows = {r["rollout_id"]: r for r in json.loads((tmp_path / "live.json").read_text())["rollouts"]}
    assert rows["alpha-r0"]["turn"] == 2 and rows["alpha-r0"]["last_call"] == "shell: mvn -q verify"
    assert rows["beta-r0"]["turn"] == 1 and rows["beta-r0"]["last_call"] == "(no tool call yet)"
    assert isinstance(rows["alpha-r0"]["started"], float)
    a.close()
    assert [r["rollout_id"] for r in json.loads((tmp_path / "live.json").read_text())["rollouts"]] == [
        "beta-r0"
    ]
    board.close()
    assert not (tmp_path / "live.json").exists()


def test_the_live_board_never_writes_through_a_planted_temporary(tmp_path) -> None:
    """live.json.tmp a symlink to an outside file (a copied run directory): the board's file is
    the run's own and the outside file is untouched (it was overwritten with the board)."""
    victim = tmp_path / "victim"
    victim.write_text("PRECIOUS\n")
    (tmp_path / "live.json.tmp").symlink_to(victim)
    board = LiveBoard(tmp_path / "live.json")
    board.update("r0", turn=1)
    assert victim.read_text() == "PRECIOUS\n" and not (tmp_path / "live.json").is_symlink()
    assert [r["rollout_id"] for r in json.loads((tmp_path / "live.json").read_text())["rollouts"]] == ["r0"]
