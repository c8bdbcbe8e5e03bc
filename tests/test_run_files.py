"""A refused ``strands-art train`` start leaves its ``--run-dir`` as it found it
(strands_art/training/run_files.py): the environment's ``env/`` (MigrationBench makes
``env/rollouts`` as it is built) and a directory the command made are removed again, whatever
refused the start (a setting, the tasks, the model); a directory that was there, a previous run's
and a resumed run's files are never touched. No model loads: each start is refused first."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from strands_art.cli import main
from strands_art.envs.migrationbench.tasks.tasks import bundled_tasks_dir
from strands_art.training.run_files import LOCK_FILE, before, undo_start

ROOT = Path(__file__).resolve().parents[1]


def _snapshot(d: Path) -> dict[str, str]:
    return {
        str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(d.rglob("*"))
        if p.name != LOCK_FILE
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--eval-tasks", "HELD"], "held-out tasks are also training tasks: compiler-props"),
        (["--prompt-batch", "3", "--ppo-mini-batch", "2"], "--prompt-batch=3 is not divisible by --ppo-mini-batch=2"),
        (["--launch-after-step", "1"], "--launch-after-step must be below the optimizer steps of one update (1: "),
        (["--share-prefix", "--gradient-checkpointing"], "use one of --share-prefix and --gradient-checkpointing"),
        (["--prompt-batch", "2", "--max-draws", "1"], "--max-draws must be at least --prompt-batch (2)"),
        (["--stop-after", "0"], "--stop-after must be an integer from 1 to 1,000,000, got 0"),
        (["--prompt-batch", "10"], "--prompt-batch 10 but --env migrationbench has only 9 training tasks"),
        (["--model", "nosuch"], "--model nosuch: unknown tokenizer/model 'nosuch'"),
    ],
)  # fmt: skip
def test_a_refused_start_leaves_the_run_dir_as_it_was(tmp_path, capsys, argv, message):
    held = tmp_path / "held"
    shutil.copytree(bundled_tasks_dir() / "compiler-props", held / "compiler-props", symlinks=True)
    base = [
        "train",
        "--env",
        "migrationbench",
        "--no-progress",
        *(str(held) if a == "HELD" else a for a in argv),
    ]
    new = tmp_path / "new"
    assert main([*base, "--run-dir", str(new)]) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert not new.exists()  # made by the command (env/rollouts in it): removed again
    mine = tmp_path / "mine"  # there before: kept, with nothing of the refused start in it
    mine.mkdir()
    (mine / "notes.txt").write_text("mine\n")
    assert main([*base, "--run-dir", str(mine)]) == 2
    assert message in capsys.readouterr().err
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    assert (mine / "notes.txt").read_text() == "mine\n"


def test_a_run_dir_holding_a_run_gets_no_env_from_a_new_start(tmp_path, capsys):
    """``--env migrationbench`` without ``--resume`` into another run's directory: refused before
    the environment is built (it wrote ``env/rollouts`` into the other run's directory)."""
    run = tmp_path / "run"
    shutil.copytree(ROOT / "tests" / "data" / "train-lookup", run)
    was = _snapshot(run)
    assert main(["train", "--env", "migrationbench", "--run-dir", str(run), "--no-progress"]) == 2
    assert "already holds a run: pass --resume to continue it" in capsys.readouterr().err
    assert _snapshot(run) == was and not (run / "env").exists()


def test_a_refused_resume_removes_nothing(tmp_path, capsys):
    """A resumed run refused after its environment was built (here: a train.json whose
    ``--prompt-batch`` exceeds the bundled training tasks) keeps every file, ``env/`` included."""
    run = tmp_path / "run"
    shutil.copytree(ROOT / "tests" / "data" / "train-migrationbench", run)
    saved = json.loads((run / "train.json").read_text())
    changed = {"prompt_batch": 12, "train_tasks": None, "eval_tasks": None, "model": str(tmp_path / "no")}
    (run / "train.json").write_text(
        json.dumps({**saved, **changed})
    )  # no model: reached, it would fail there
    (run / "env").mkdir(exist_ok=True)
    was = _snapshot(run)
    assert main(["train", "--resume", "--run-dir", str(run), "--no-progress"]) == 2
    assert "--prompt-batch 12 but --env migrationbench has only 9 training tasks" in capsys.readouterr().err
    assert _snapshot(run) == was


def test_undo_start_removes_only_what_the_start_made(tmp_path):
    fresh = tmp_path / "fresh"
    was = before(fresh)
    (fresh / "env" / "rollouts").mkdir(parents=True)
    undo_start(fresh, was)
    assert not fresh.exists()
    kept = tmp_path / "kept"  # an env/ that was there stays, and so the directory
    (kept / "env").mkdir(parents=True)
    was = before(kept)
    (kept / "env" / "rollouts").mkdir()
    undo_start(kept, was)
    assert sorted(p.name for p in kept.rglob("*")) == ["env", "rollouts"]
    for standing in ("train.json", "metrics.jsonl", LOCK_FILE):  # a run stands, or another process holds it
        d = tmp_path / f"standing-{standing}"
        was = before(d)
        (d / "env").mkdir(parents=True)
        (d / standing).write_text("")
        undo_start(d, was)
        assert sorted(p.name for p in d.iterdir()) == sorted(["env", standing])


def test_ctrl_c_while_a_fresh_run_loads_its_model_leaves_the_run_dir_as_it_was(tmp_path, capsys, monkeypatch):
    """A newcomer's Ctrl-C during the minutes a model loads left train.json behind and told them to
    ``--resume`` a run that never began; now the directory is as the command found it and the
    same command starts it again. A resumed run's Ctrl-C keeps every file and names --resume."""
    import strands_art.training.run as run_mod

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_mod, "_load", interrupted)
    base = ["train", "--env", "migrationbench", "--no-progress"]
    new = tmp_path / "new"
    assert main([*base, "--run-dir", str(new)]) == 130
    assert capsys.readouterr().err.endswith(
        "strands-art train: interrupted before the run began; nothing of it is kept: the same command starts it again\n"
    )
    assert not new.exists()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine\n")
    assert main([*base, "--run-dir", str(mine)]) == 130
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    capsys.readouterr()
    run = tmp_path / "run"  # a resumed run: its settings stay, the resume command named
    shutil.copytree(ROOT / "tests" / "data" / "train-migrationbench", run)
    saved = json.loads((run / "train.json").read_text())
    (run / "train.json").write_text(json.dumps({**saved, "train_tasks": None, "eval_tasks": None}))
    was = _snapshot(run)
    assert main(["train", "--resume", "--run-dir", str(run), "--no-progress"]) == 130
    err = capsys.readouterr().err
    assert f"strands-art train: interrupted; {run} keeps every outer batch up to its newest checkpoint" in err
    assert "--resume" in err
    now = _snapshot(run)
    assert [now[k] for k in ("train.json", "command.txt")] == [was[k] for k in ("train.json", "command.txt")]


def test_a_run_dir_that_is_a_file_is_refused_and_kept(tmp_path, capsys):
    file = tmp_path / "notes.txt"
    file.write_text("mine\n")
    assert main(["train", "--env", "capitals", "--no-progress", "--run-dir", str(file)]) == 2
    assert capsys.readouterr().err == (
        f"strands-art train: --run-dir {file}: not a directory (a file is there); give a new or existing directory\n"
    )
    assert file.read_text() == "mine\n"
