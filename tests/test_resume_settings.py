"""``strands-art train --resume`` with flags restated (strands_art/training/resume_settings.py):
a flag that says what the run effectively used is accepted (``--old-logprobs auto``, which the
run saved resolved; a ``--history-mode`` the run left to its environment, read from its train
records; ``--max-draws`` equal to ``--prompt-batch``; a tasks path spelled another way), one that
differs is refused with every differing flag named. The invariant: the command that started a
run, or the one ``command.txt`` prints, resumes it with exactly its settings."""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from strands_art.cli import main
from strands_art.training.resume_settings import recorded_history_mode
from strands_art.training.settings import FLAG_OF, TrainSettings
from strands_art.training.train_cli import _settings, add_train_parser

ROOT = Path(__file__).resolve().parents[1]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_train_parser(parser.add_subparsers())
    return parser


PARSER = _parser()


def resume(run: Path, *flags: str) -> TrainSettings:
    return _settings(PARSER.parse_args(["train", "--resume", "--run-dir", str(run), *flags]))


def argv_of(given: dict) -> list[str]:
    """The command-line flags that give ``given`` (settings, ``_`` spelled ``-``)."""
    out: list[str] = []
    for key, value in given.items():
        if key == "train_truncated":
            out.append("--train-truncated" if value else "--no-train-truncated")
        elif value is True:
            out.append(FLAG_OF[key])
        else:
            out += [FLAG_OF[key], str(value)]
    return out


@pytest.fixture
def lookup_run(tmp_path: Path) -> Path:
    """The recorded ``train --env lookup`` run: train.json without a history mode (the
    environment's), its train records captured in linear mode, max staleness 0 (old logprobs
    saved as ``rollout``)."""
    run = tmp_path / "run"
    shutil.copytree(ROOT / "tests" / "data" / "train-lookup", run)
    saved = TrainSettings.load(run)
    assert (saved.history_mode, saved.old_logprobs, saved.max_staleness) == (None, "rollout", 0)
    return run


def test_flags_that_restate_the_run_are_accepted(lookup_run: Path) -> None:
    assert recorded_history_mode(lookup_run) == "linear"
    saved = TrainSettings.load(lookup_run)
    assert resume(lookup_run, "--history-mode", "linear") == saved  # before: "(the run has None)"
    assert resume(lookup_run, "--old-logprobs", "auto") == saved  # before: "(the run has 'rollout')"
    assert resume(lookup_run, "--max-draws", "2", "--prompt-batch", "2", "--env", "lookup") == saved
    assert resume(lookup_run, "--history-mode", "linear").history_mode is None  # train.json's, unchanged


def test_flags_that_change_the_run_are_refused_each_named(lookup_run: Path) -> None:
    with pytest.raises(ValueError) as exc:
        resume(lookup_run, "--history-mode", "tree", "--old-logprobs", "recompute", "--max-draws", "3")
    assert str(exc.value) == (
        "--resume trains with the run's own settings; these differ: --max-draws 3 (the run has 2); "
        "--old-logprobs 'recompute' (the run has 'rollout'); --history-mode 'tree' (the run has 'linear')"
    )
    run = lookup_run.parent / "async"
    run.mkdir()
    TrainSettings.resolve("capitals", str(run), {"max_staleness": 1, "old_logprobs": "recompute"}).save(run)
    with pytest.raises(
        ValueError, match=r"--old-logprobs 'auto' \(= 'first-pass' in this run\) \(the run has 'recompute'\)"
    ):
        resume(run, "--old-logprobs", "auto")


def test_a_history_mode_nothing_recorded_yet_becomes_the_runs(tmp_path: Path) -> None:
    """No train record yet (the run restarts from scratch): the stated mode is taken, and the
    environment's gateway is checked to capture in it when it is built."""
    run = tmp_path / "run"
    run.mkdir()
    TrainSettings.resolve("capitals", str(run), {}).save(run)
    assert recorded_history_mode(run) is None
    assert resume(run, "--history-mode", "tree").history_mode == "tree"
    assert TrainSettings.load(run).history_mode is None  # train.json unchanged here


def test_a_tasks_path_spelled_another_way_is_the_same(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tasks").mkdir()
    run = tmp_path / "run"
    run.mkdir()
    TrainSettings.resolve("migrationbench", str(run), {"train_tasks": "tasks"}).save(run)
    assert resume(run, "--train-tasks", "./tasks/").train_tasks == "tasks"
    assert resume(run, "--train-tasks", str(tmp_path / "tasks")).train_tasks == "tasks"
    with pytest.raises(ValueError, match=r"--train-tasks 'other' \(the run has 'tasks'\)"):
        resume(run, "--train-tasks", "other")


def test_the_command_resumes_past_the_check(lookup_run: Path, capsys) -> None:
    """Through ``strands-art train``: a restating resume gets as far as loading the run's model
    (here one that does not exist), a changing one stops at the check."""
    saved = json.loads((lookup_run / "train.json").read_text())
    (lookup_run / "train.json").write_text(json.dumps({**saved, "model": str(lookup_run / "no-model")}))
    argv = ["train", "--resume", "--run-dir", str(lookup_run), "--no-progress"]
    assert main([*argv, "--history-mode", "linear", "--old-logprobs", "auto"]) == 2
    assert f"--model {lookup_run / 'no-model'}: unknown tokenizer/model" in capsys.readouterr().err
    assert main([*argv, "--history-mode", "tree"]) == 2
    assert "--history-mode 'tree' (the run has 'linear')" in capsys.readouterr().err
    assert main([*argv, "--skip-tied", "2"]) == 2  # out of range first, not "the run has 0.0"
    err = capsys.readouterr().err
    assert "--skip-tied must be a finite number in [0, 1], got 2.0" in err and "these differ" not in err


GIVEN = st.fixed_dictionaries(
    {},
    optional={
        "outer_batches": st.integers(1, 5),
        "prompt_batch": st.sampled_from([1, 2, 4]),
        "max_staleness": st.integers(0, 2),
        "old_logprobs": st.sampled_from(["auto", "rollout", "recompute", "first-pass"]),
        "max_draws": st.integers(1, 6),
        "history_mode": st.sampled_from(["tree", "linear"]),
        "lr": st.sampled_from([1e-4, 5e-4, 2e-2]),
        "skip_tied": st.sampled_from([0.0, 0.5]),
        "train_truncated": st.booleans(),
        "share_prefix": st.just(True),
        "seed": st.integers(0, 9),
    },
)
CHANGES = {  # a value with another meaning than the run's, per setting
    "lr": lambda s: s.lr * 2,
    "seed": lambda s: s.seed + 1,
    "skip_tied": lambda s: 0.25,
    "max_staleness": lambda s: s.max_staleness + 1,
    "outer_batches": lambda s: s.outer_batches - 1 if s.outer_batches > 1 else None,  # larger extends
    "history_mode": lambda s: {"tree": "linear", "linear": "tree"}.get(s.history_mode),
    "old_logprobs": lambda s: "recompute" if s.old_logprobs != "recompute" else "auto",
}


@settings(max_examples=60, deadline=None)
@given(given=GIVEN, change=st.sampled_from(sorted(CHANGES)))
def test_the_starting_command_resumes_and_a_change_is_refused(given: dict, change: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        run = Path(d) / "run"
        run.mkdir()
        try:
            started = TrainSettings.resolve("capitals", str(run), given)
        except ValueError:  # sizes that do not fit each other: not a run
            assume(False)
        started.save(run)
        assert resume(run, *argv_of(given)) == started
        assert resume(run, *shlex.split(started.command())[2:]) == started  # command.txt's line
        value = CHANGES[change](started)
        assume(value is not None)
        with pytest.raises(ValueError, match="these differ: ") as exc:
            resume(run, *argv_of({change: value}))
        assert str(exc.value).split("these differ: ")[1].startswith(f"{FLAG_OF[change]} ")


def test_threads_left_to_torch_and_the_environments_prompt_restate_the_run(tmp_path: Path) -> None:
    """A newcomer's resume with ``--threads N`` (torch's default here) or ``--prompt full`` (the
    migration environment's default) was refused: the run's train.json held None for both."""
    import torch

    from strands_art.envs.migrationbench.run.train_env import DEFAULTS as MIGRATIONBENCH

    args = PARSER.parse_args(["train", "--env", "migrationbench", "--run-dir", str(tmp_path / "run")])
    saved = TrainSettings.resolve("migrationbench", args.run_dir, _settings(args), MIGRATIONBENCH)
    assert (saved.threads, saved.prompt) == (None, "full")
    (tmp_path / "run").mkdir()
    saved.save(tmp_path / "run")
    here = torch.get_num_threads()
    assert resume(tmp_path / "run", "--threads", str(here), "--prompt", "full") == saved
    with pytest.raises(ValueError) as exc:
        resume(tmp_path / "run", "--threads", str(here + 1), "--prompt", "compact")
    assert str(exc.value) == (
        "--resume trains with the run's own settings; these differ: "
        f"--threads {here + 1} (the run left it to torch: {here} here); --prompt 'compact' (the run has 'full')"
    )
