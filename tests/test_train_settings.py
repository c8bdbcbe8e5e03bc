"""``strands-art train``'s options -> :class:`TrainSettings` -> :class:`TrainerConfig`, without
loading a model: ``--share-prefix`` reaches the trainer's configuration, the printed command and
``train.json``; every value is checked before anything is written, the message naming the flag,
with the same helpers (and so the same words) as ``serve``."""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strands_art.cli import build_parser, main
from strands_art.training.old_logprobs import AUTO_ASYNC_OLD_LOGPROBS
from strands_art.training.settings import FLAG_OF, INT_RANGES, TrainSettings
from strands_art.training.train_cli import _given
from strands_art.validation import UsageError


def settings_of(argv: list[str]) -> TrainSettings:
    args = build_parser().parse_args(["train", *argv])
    return TrainSettings.resolve(args.env, args.run_dir, _given(args))


def test_share_prefix_flag_reaches_the_trainer_config(tmp_path):
    base = ["--env", "capitals", "--run-dir", str(tmp_path / "run")]
    on, off = settings_of([*base, "--share-prefix"]), settings_of(base)
    assert on.share_prefix is True and on.trainer_config().share_prefix is True
    assert off.share_prefix is False and off.trainer_config().share_prefix is False
    assert dataclasses.replace(on, share_prefix=False) == off  # nothing else changed
    # the printed command gives the same settings back
    assert "--share-prefix" in on.command() and "--share-prefix" not in off.command()
    assert settings_of(shlex.split(on.command())[2:]) == on
    assert settings_of(shlex.split(off.command())[2:]) == off
    # train.json keeps it; a train.json written before the flag existed means off
    on.save(tmp_path)
    assert TrainSettings.load(tmp_path) == dataclasses.replace(on, run_dir=str(tmp_path))  # the dir given
    old = on.to_dict()
    del old["share_prefix"]
    (tmp_path / "train.json").write_text(json.dumps(old))
    assert TrainSettings.load(tmp_path) == dataclasses.replace(off, run_dir=str(tmp_path))  # the dir given
    help_text = build_parser()._subparsers._group_actions[0].choices["train"].format_help()
    assert "--share-prefix" in help_text and "KV cache" in help_text


def test_resume_refuses_to_switch_prefix_sharing(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    settings_of(["--env", "capitals", "--run-dir", str(run)]).save(run)
    saved = (run / "train.json").read_text()
    assert main(["train", "--resume", "--run-dir", str(run), "--share-prefix"]) == 2
    assert "--share-prefix True (the run has False)" in capsys.readouterr().err
    assert (run / "train.json").read_text() == saved


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--lr", "-1e-3", "--lr must be a finite number in (0, 1000], got -0.001"),
        ("--lr", "nan", "--lr must be a finite number in (0, 1000], got nan"),
        ("--temperature", "inf", "--temperature must be a finite number in [0, 100], got inf"),
        ("--max-new-tokens", "0", "--max-new-tokens must be an integer from 1 to 1,048,576, got 0"),
        ("--threads", "0", "--threads must be an integer from 1 to 4,096, got 0"),
        ("--max-staleness", "-1", "--max-staleness must be an integer from 0 to 1,000, got -1"),
        ("--concurrency", "0", "--concurrency must be an integer from 1 to 10,000, got 0"),
        ("--max-grad-norm", "0", "--max-grad-norm must be a finite number in (0, 1e+09], got 0.0"),
        ("--kl-coef", "-0.5", "--kl-coef must be a finite number in [0, 1000], got -0.5"),
        ("--eval-temperature", "nan", "--eval-temperature must be a finite number in [0, 100], got nan"),
        ("--vllm-url", "ftp://host", "--vllm-url must be an http:// or https:// URL with a host"),
    ],
)
def test_bad_values_are_refused_naming_the_flag_before_anything_is_written(
    tmp_path, capsys, flag, value, message
):
    run = tmp_path / "run"
    assert main(["train", "--env", "capitals", "--run-dir", str(run), f"{flag}={value}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("strands-art train: ") and message in err
    assert not run.exists()  # nothing written


def test_train_and_serve_refuse_a_sampling_value_in_the_same_words(tmp_path, capsys):
    assert main(["train", "--env", "capitals", "--run-dir", str(tmp_path / "r"), "--temperature=-1"]) == 2
    train_err = capsys.readouterr().err.removeprefix("strands-art train: ")
    assert main(["serve", "--temperature=-1"]) == 2
    serve_err = capsys.readouterr().err.removeprefix("strands-art serve: ")
    assert train_err == serve_err == "--temperature must be a finite number in [0, 100], got -1.0\n"


def test_vllm_url_implies_the_vllm_backend_and_contradicts_transformers(tmp_path):
    base = ["--env", "capitals", "--run-dir", str(tmp_path / "run")]
    s = settings_of([*base, "--vllm-url", "http://127.0.0.1:8000"])
    assert (s.backend, s.vllm_url) == ("vllm", "http://127.0.0.1:8000")
    assert settings_of([*base, "--backend", "vllm"]).vllm_url is None
    with pytest.raises(UsageError, match="--vllm-url names a vLLM server: it needs --backend vllm"):
        settings_of([*base, "--backend", "transformers", "--vllm-url", "http://127.0.0.1:8000"])


def test_a_hand_edited_train_json_is_checked_on_resume(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    settings_of(["--env", "capitals", "--run-dir", str(run)]).save(run)
    d = json.loads((run / "train.json").read_text())
    (run / "train.json").write_text(json.dumps({**d, "lr": "1e-3"}))
    assert main(["train", "--resume", "--run-dir", str(run)]) == 2
    assert "--lr must be a finite number in (0, 1000], got '1e-3'" in capsys.readouterr().err
    (run / "train.json").write_text(json.dumps({**d, "share_prefix": 1}))
    assert main(["train", "--resume", "--run-dir", str(run)]) == 2
    assert "--share-prefix must be true or false, got 1" in capsys.readouterr().err


BASE = TrainSettings.resolve("capitals", "runs/x", {"prompt_batch": 2, "ppo_mini_batch": 1})
FREE = sorted(
    set(INT_RANGES) - {"ppo_mini_batch", "launch_after_step", "max_draws", "rows_per_mini_batch"}
)  # bounded by other settings too


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(FREE), value=st.integers(-(2**70), 2**70) | st.sampled_from([0, 1, 2, 1000, 4096]))
def test_an_integer_setting_passes_exactly_inside_its_range(key, value):
    lo, hi = INT_RANGES[key]
    s = dataclasses.replace(BASE, **{key: value})
    if lo <= value <= hi:
        s.check()
    else:
        with pytest.raises(UsageError, match=f"^{FLAG_OF[key]} must be an integer from"):
            s.check()


@given(key=st.sampled_from(FREE), value=st.sampled_from([True, 2.0, "3", None]))
def test_an_integer_setting_of_another_kind_is_refused(key, value):
    if value is None and key in ("max_turns", "threads"):
        return  # None: the environment's / torch's default
    with pytest.raises(UsageError, match=f"^{FLAG_OF[key]} must be an integer"):
        dataclasses.replace(BASE, **{key: value}).check()


def test_launch_after_step_is_bounded_by_the_steps_of_one_update_and_needs_asynchrony(tmp_path, capsys):
    base = ["--env", "capitals", "--run-dir", str(tmp_path / "run"), "--prompt-batch", "4"]
    s = settings_of([*base, "--ppo-mini-batch", "2", "--epochs", "2", "--launch-after-step", "3"])
    assert s.launch_after_step == 3 and "--launch-after-step 3" in s.command()  # 2 x 2 steps per update
    assert settings_of(base).launch_after_step == 0
    with pytest.raises(UsageError, match=r"below the optimizer steps of one update \(4: .*got 4"):
        settings_of([*base, "--ppo-mini-batch", "2", "--epochs", "2", "--launch-after-step", "4"])
    with pytest.raises(UsageError, match="--launch-after-step 1 needs --max-staleness >= 1"):
        settings_of([*base, "--max-staleness", "0", "--launch-after-step", "1"])
    with pytest.raises(UsageError, match="--launch-after-step must be an integer from 0"):
        settings_of([*base, "--launch-after-step", "-1"])
    capsys.readouterr()
    verl = ["--env", "migrationbench", "--run-dir", str(tmp_path / "run"), "--trainer", "verl"]
    assert main(["train", *verl, "--launch-after-step", "1"]) == 2
    assert "--launch-after-step: the verl launch trains synchronously" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # nothing written


def test_the_environments_recommended_sizes_bound_launch_after_step():
    """The command's first pass (before the environment's values are known) checks values alone:
    --launch-after-step 3 is refused with the global defaults' 2 steps per update but is right
    with an environment recommending 4 tasks per outer batch."""
    given = {"launch_after_step": 3}
    TrainSettings.resolve("m:f", "runs/x", given, cross_checks=False)
    assert TrainSettings.resolve("m:f", "runs/x", given, {"prompt_batch": 4}).launch_after_step == 3
    with pytest.raises(UsageError, match=r"one update \(2: "):
        TrainSettings.resolve("m:f", "runs/x", given)


def test_old_logprobs_auto_is_saved_resolved_and_old_runs_keep_rollout(tmp_path):
    """``--old-logprobs auto`` (the default) is ``rollout`` when synchronous and first-pass
    otherwise, and train.json keeps the resolved value, so a resumed run trains as it started
    whatever ``auto`` means later; a train.json from before the setting means ``rollout``."""
    base = ["--env", "lookup", "--run-dir", str(tmp_path / "run")]
    sync, lagged = settings_of([*base, "--max-staleness", "0"]), settings_of([*base, "--max-staleness", "1"])
    assert sync.old_logprobs == "rollout" and sync.trainer_config().old_logprobs == "rollout"
    assert lagged.old_logprobs == lagged.trainer_config().old_logprobs == AUTO_ASYNC_OLD_LOGPROBS
    chosen = settings_of([*base, "--old-logprobs", "recompute"])
    assert chosen.trainer_config().old_logprobs == "recompute"
    assert "--old-logprobs recompute" in chosen.command()
    assert settings_of(shlex.split(chosen.command())[2:]) == chosen
    chosen.save(tmp_path)
    assert TrainSettings.load(tmp_path) == dataclasses.replace(chosen, run_dir=str(tmp_path))  # the dir given
    before = lagged.to_dict()
    del before["old_logprobs"]
    (tmp_path / "train.json").write_text(json.dumps(before))
    assert TrainSettings.load(tmp_path).old_logprobs == "rollout"
    with pytest.raises(UsageError, match="--old-logprobs must be one of rollout, recompute, first-pass"):
        dataclasses.replace(chosen, old_logprobs="auto").check()


def test_batching_and_history_mode_flags_reach_the_trainer_and_train_json(tmp_path, capsys):
    base = ["--env", "capitals", "--run-dir", str(tmp_path / "run"), "--prompt-batch", "2"]
    steps = settings_of(base)
    assert (steps.batching, steps.rows_per_mini_batch, steps.history_mode) == ("fixed-steps", None, None)
    assert steps.trainer_config().batching_mode == "fixed_steps"
    rows = settings_of([*base, "--batching", "fixed-rows", "--max-staleness", "0", "--history-mode", "tree"])
    # the fixed-rows size is saved resolved: verl's ppo_mini_batch_size x rollout.n
    assert rows.rows_per_mini_batch == 1 * 4 and rows.history_mode == "tree"
    cfg = rows.trainer_config()
    assert (cfg.batching_mode, cfg.rows_per_mini_batch) == ("fixed_rows", 4)
    assert settings_of(shlex.split(rows.command())[2:]) == rows  # the printed command gives them back
    rows.save(tmp_path)
    assert TrainSettings.load(tmp_path) == dataclasses.replace(rows, run_dir=str(tmp_path))  # the dir given
    six = settings_of(
        [*base, "--batching", "fixed-rows", "--rows-per-mini-batch", "6", "--max-staleness", "0"]
    )
    assert six.trainer_config().rows_per_mini_batch == 6
    for argv, message in (
        (["--rows-per-mini-batch", "6"], "--rows-per-mini-batch is the mini-batch size of --batching fixed-rows"),
        (["--batching", "fixed-rows"], "use it with --max-staleness 0"),
        (["--batching", "fixed-rows", "--max-staleness", "0", "--rows-per-mini-batch", "0"],
         "--rows-per-mini-batch must be an integer from 1 to 1,000,000, got 0"),
    ):  # fmt: skip
        assert main(["train", *base, *argv]) == 2
        assert message in capsys.readouterr().err
        assert not (tmp_path / "run" / "train.json").exists()
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", *base, "--history-mode", "forest"])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", *base, "--batching", "rows"])


def test_resume_refuses_another_batching_or_history_mode(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    settings_of(["--env", "capitals", "--run-dir", str(run), "--history-mode", "tree"]).save(run)
    assert main(["train", "--resume", "--run-dir", str(run), "--history-mode", "linear"]) == 2
    assert "--history-mode 'linear' (the run has 'tree')" in capsys.readouterr().err
    assert main(["train", "--resume", "--run-dir", str(run), "--batching", "fixed-rows"]) == 2
    assert "--batching 'fixed-rows' (the run has 'fixed-steps')" in capsys.readouterr().err


def test_truncated_answers_are_left_out_unless_train_truncated_and_old_runs_keep_training_them(tmp_path):
    """By default GRPO leaves answers sampled to the token limit out of the loss; ``--train-truncated``
    trains them; the capitals environment recommends it (its reward scores a cut reply 0) and
    ``--no-train-truncated`` overrides that; a train.json from before the flag means it was on."""
    from strands_art.envs.capitals import DEFAULTS as CAPITALS
    from strands_art.envs.migrationbench.run.train_env import DEFAULTS as MIGRATIONBENCH

    base = ["--env", "migrationbench", "--run-dir", str(tmp_path / "run")]
    on, off = settings_of([*base, "--train-truncated"]), settings_of(base)
    assert off.train_truncated is False and off.trainer_config().grpo.masked_tags == {
        "discarded",
        "truncated",
    }
    assert on.train_truncated is True and on.trainer_config().grpo.masked_tags == {"discarded"}
    assert dataclasses.replace(on, train_truncated=False) == off  # nothing else changed
    assert "--train-truncated" in on.command() and "--no-train-truncated" in off.command()
    assert (
        settings_of(shlex.split(on.command())[2:]) == on
        and settings_of(shlex.split(off.command())[2:]) == off
    )
    assert "train_truncated" not in MIGRATIONBENCH
    args = build_parser().parse_args(["train", "--env", "capitals", "--run-dir", str(tmp_path / "c")])
    capitals = TrainSettings.resolve("capitals", args.run_dir, _given(args), CAPITALS)
    assert capitals.train_truncated is True and capitals.trainer_config().grpo.train_truncated is True
    args = build_parser().parse_args(["train", *shlex.split(capitals.command())[2:], "--no-train-truncated"])
    assert TrainSettings.resolve("capitals", args.run_dir, _given(args), CAPITALS).train_truncated is False
    before = off.to_dict()
    del before["train_truncated"]
    (tmp_path / "train.json").write_text(json.dumps(before))
    assert TrainSettings.load(tmp_path).train_truncated is True
    help_text = build_parser()._subparsers._group_actions[0].choices["train"].format_help()
    assert "--train-truncated, --no-train-truncated" in help_text and "overlong" in help_text
    serve_help = build_parser()._subparsers._group_actions[0].choices["serve"].format_help()
    assert "--train-truncated" in serve_help


def test_a_trainer_config_saved_before_train_truncated_resumes_training_them():
    from strands_art.training.trainer_config import TrainerConfig

    saved = TrainerConfig().to_dict()
    assert saved["grpo"]["train_truncated"] is False and TrainerConfig.from_dict(saved) == TrainerConfig()
    del saved["grpo"]["train_truncated"]
    assert TrainerConfig.from_dict(saved).grpo.train_truncated is True
    saved["grpo"]["exclude_turn_tags"] = ["discarded", "truncated"]  # it masked them explicitly
    assert TrainerConfig.from_dict(saved).grpo.masked_tags == {"discarded", "truncated"}


def test_verl_launch_with_train_truncated_uses_an_agent_loop_file_that_trains_them(tmp_path):
    """verl's agent loop leaves truncated answers out unless its entry says ``train_truncated: true``:
    ``--train-truncated`` writes the published file with that line beside the launch and points the
    launch at it; without the flag the launch uses the published file."""
    import yaml

    from strands_art.envs.migrationbench.tasks.tasks import bundled_tasks_dir
    from strands_art.training.verl_launch import AGENT_LOOPS, agent_loops_yaml, write_verl_launch

    given = {"train_tasks": str(bundled_tasks_dir()), "old_logprobs": "rollout"}
    on = TrainSettings.resolve("migrationbench", str(tmp_path / "on"), {**given, "train_truncated": True})
    off = TrainSettings.resolve("migrationbench", str(tmp_path / "off"), given)
    script = write_verl_launch(on).read_text()
    written = tmp_path / "on" / "verl" / "agent_loops.yaml"
    assert f"agent_loop_config_path={written.resolve()}" in script and "--train-truncated" in script
    [entry] = yaml.safe_load(written.read_text())
    published = (Path(__file__).resolve().parents[1] / AGENT_LOOPS).read_text()
    [original] = yaml.safe_load(published)
    assert entry == {**original, "train_truncated": True}
    assert f"agent_loop_config_path={AGENT_LOOPS}" in write_verl_launch(off).read_text().replace('"', "")
    assert not (tmp_path / "off" / "verl" / "agent_loops.yaml").exists()
    assert agent_loops_yaml(published, False) == published
    with pytest.raises(ValueError, match="history_mode"):
        agent_loops_yaml("- name: x\n  _target_: y\n", True)
