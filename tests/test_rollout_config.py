"""One rollout configuration (issue 26 item 4): ``RolloutConfig`` is frozen, checked when built
(errors name the field, or the flag on the command line), and every way of running the
MigrationBench agent builds it: ``migrate``'s flags, the embedded loop, ``train --env
migrationbench`` and verl's episode."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strands_art.cli import build_parser
from strands_art.envs.migrationbench.agent.agent import RolloutLimits
from strands_art.envs.migrationbench.agent.commands import DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TIMEOUT_S
from strands_art.envs.migrationbench.config import LIMIT_FIELDS, SMALL_MODEL_LIMITS, RolloutConfig
from strands_art.envs.migrationbench.run.episodes import episode_config
from strands_art.envs.migrationbench.run.runner import RolloutSpec, run_rollout
from strands_art.envs.migrationbench.run.runner_args import resolve_defaults, rollout_config
from strands_art.validation import UsageError

BAD = [
    ("max_turns", 0, "max_turns must be an integer from 1 to 100,000, got 0"),
    ("max_turns", True, "max_turns must be an integer from 1 to 100,000, got True"),
    ("max_turns", 2.0, "max_turns must be an integer"),
    ("max_turns", "50", "max_turns must be an integer"),
    ("time_limit", 0.0, "time_limit must be a finite number in (0, 604800], got 0.0"),
    ("time_limit", math.nan, "time_limit must be a finite number in (0, 604800], got nan"),
    ("time_limit", False, "time_limit must be a finite number"),
    ("command_timeout", -1, "command_timeout must be a finite number in (0, 86400], got -1"),
    ("command_timeout", math.inf, "command_timeout must be a finite number"),
    ("max_output_bytes", 1, "max_output_bytes must be an integer from 2 to 1,073,741,824, got 1"),
    ("build_timeout", "300", "build_timeout must be a finite number in (0, 86400], got '300'"),
    ("unsafe_no_sandbox", "false", "unsafe_no_sandbox must be true or false, got 'false'"),
    ("unsafe_no_sandbox", 1, "unsafe_no_sandbox must be true or false, got 1"),
    ("compact_prompt", None, "compact_prompt must be true or false, got None"),
    ("user_recipe", "no", "user_recipe must be true or false, got 'no'"),
]


@pytest.mark.parametrize(("field", "value", "message"), BAD)
def test_a_bad_value_is_refused_naming_the_field(field, value, message):
    with pytest.raises(UsageError) as err:
        RolloutConfig(**{field: value})
    assert str(err.value).startswith(message)
    with pytest.raises(UsageError, match=f"^{field} must"):
        RolloutConfig.from_mapping({field: value})
    with pytest.raises(UsageError, match=f"^{field} must"):
        RolloutConfig().replace(**{field: value})


@pytest.mark.parametrize(("field", "value", "message"), BAD)
def test_on_the_command_line_the_error_names_the_flag(field, value, message):
    args = build_parser().parse_args(["migrate", "--backend", "transformers"])
    resolve_defaults(args)
    if field in ("compact_prompt", "user_recipe"):  # not flags: derived from --prompt and --backend
        assert (rollout_config(args).compact_prompt, rollout_config(args).user_recipe) == (False, True)
        return
    setattr(args, field, value)
    flag = "--" + field.replace("_", "-")
    with pytest.raises(UsageError) as err:
        rollout_config(args)
    assert str(err.value).startswith(message.replace(field, flag, 1))


def test_unknown_settings_are_named_and_nothing_else_is_read():
    with pytest.raises(UsageError, match="unknown rollout setting.s. max_turn, sandbox; known: max_turns"):
        RolloutConfig.from_mapping({"max_turn": 3, "sandbox": False})


def test_frozen_and_normalized():
    config = RolloutConfig(time_limit=120, max_turns=3)
    assert config.time_limit == 120.0 and isinstance(config.time_limit, float)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.max_turns = 4  # type: ignore[misc]
    assert config.replace(max_turns=4) == RolloutConfig(time_limit=120.0, max_turns=4)
    assert hash(config) == hash(RolloutConfig(time_limit=120.0, max_turns=3))


@given(
    max_turns=st.integers(1, 100_000),
    time_limit=st.floats(1e-3, 7 * 86400.0),
    max_output_bytes=st.integers(2, 1 << 30),
    unsafe=st.booleans(),
)
def test_valid_values_round_trip_through_a_mapping(max_turns, time_limit, max_output_bytes, unsafe):
    config = RolloutConfig(
        max_turns=max_turns,
        time_limit=time_limit,
        max_output_bytes=max_output_bytes,
        unsafe_no_sandbox=unsafe,
    )
    assert RolloutConfig.from_mapping(dataclasses.asdict(config)) == config


@given(st.one_of(st.integers(max_value=0), st.integers(min_value=100_001), st.booleans()))
def test_max_turns_outside_its_range_is_always_refused(value):
    with pytest.raises(UsageError, match="^max_turns must be an integer"):
        RolloutConfig(max_turns=value)


def test_the_defaults_have_one_home():
    """The CLI, the agent's hook and the shell tool take their defaults from RolloutConfig."""
    default = RolloutConfig()
    assert (default.max_turns, default.time_limit) == (50, 1800.0)
    assert (RolloutLimits().max_turns, RolloutLimits().time_limit_s) == (
        default.max_turns,
        default.time_limit,
    )
    assert (DEFAULT_TIMEOUT_S, DEFAULT_MAX_OUTPUT_BYTES) == (
        default.command_timeout,
        default.max_output_bytes,
    )
    for backend, expected in (
        ("transformers", default),
        ("vllm", default),
        ("llamacpp", RolloutConfig(**SMALL_MODEL_LIMITS, compact_prompt=True)),
    ):
        argv = ["migrate", "--backend", backend, "--base-url", "http://127.0.0.1:8000"]
        args = build_parser().parse_args(argv)
        resolve_defaults(args)
        assert rollout_config(args) == expected == RolloutConfig.for_backend(backend), backend
    assert RolloutConfig.for_backend("llamacpp", max_turns=30, time_limit=None).max_turns == 30
    assert RolloutConfig.for_backend("llamacpp", time_limit=None).time_limit == 600.0


def test_flags_given_on_the_command_line_reach_the_config():
    argv = ["migrate", "--backend", "llamacpp", "--max-turns", "7", "--build-timeout", "90"]
    argv += ["--unsafe-no-sandbox"]
    args = build_parser().parse_args(argv)
    resolve_defaults(args)
    config = rollout_config(args)
    assert (config.max_turns, config.build_timeout, config.time_limit) == (7, 90.0, 600.0)
    assert config.unsafe_no_sandbox is True and config.compact_prompt is True


@pytest.mark.parametrize(
    ("backend", "prompt", "expected"),
    [
        ("llamacpp", None, (True, True)),  # the default on llama.cpp: the compact recipe
        ("llamacpp", "compact", (True, True)),
        ("llamacpp", "compact-no-recipe", (True, False)),
        ("llamacpp", "full", (False, True)),
        ("transformers", None, (False, True)),  # the default elsewhere: the full system prompt
        ("transformers", "compact-no-recipe", (True, False)),
    ],
)
def test_prompt_flag_sets_the_system_prompt_and_the_recipe(backend, prompt, expected):
    argv = ["migrate", "--backend", backend] + (["--prompt", prompt] if prompt else [])
    args = build_parser().parse_args(argv)
    resolve_defaults(args)
    config = rollout_config(args)
    assert (config.compact_prompt, config.user_recipe) == expected
    assert config.max_turns == (SMALL_MODEL_LIMITS["max_turns"] if backend == "llamacpp" else 50)


def test_a_bad_prompt_is_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["migrate", "--prompt", "short"])
    assert exc.value.code == 2 and "invalid choice: 'short'" in capsys.readouterr().err
    args = build_parser().parse_args(["migrate", "--backend", "llamacpp"])
    resolve_defaults(args)
    for bad in ("short", 1, ""):  # e.g. from a hand-edited config.json of a resumed run
        args.prompt = bad
        with pytest.raises(
            UsageError, match=f"^--prompt must be one of compact, compact-no-recipe, full, got {bad!r}"
        ):
            rollout_config(args)


def test_verl_episode_reads_only_the_limits_from_a_sample():
    """A dataset column cannot turn the sandbox off or switch the prompt; a bad limit is named."""
    sample = {"max_turns": 9, "unsafe_no_sandbox": True, "compact_prompt": True, "uid": "g", "prompt": []}
    assert episode_config(sample) == RolloutConfig(max_turns=9)
    assert set(LIMIT_FIELDS) < set(f.name for f in dataclasses.fields(RolloutConfig))
    with pytest.raises(UsageError, match="^time_limit must be a finite number"):
        episode_config({"time_limit": "1800"})


def test_run_rollout_refuses_a_namespace(tmp_path: Path):
    args = argparse.Namespace(max_turns=2, time_limit=60.0)
    with pytest.raises(TypeError, match="run_rollout takes a RolloutConfig.*got Namespace"):
        asyncio.run(run_rollout(RolloutSpec(task=None, index=0, seed=0), args, None, None, tmp_path))  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_train_env_builds_the_same_config(tmp_path: Path, monkeypatch):
    import strands_art.envs.migrationbench.run.train_env as train_env
    from strands_art.training.environment import EnvOptions

    seen = {}

    def fake_rollout(config, model_id="strands-art", *, run_dir=None):
        seen.update(config=config, run_dir=run_dir)
        return "rollout-fn"

    monkeypatch.setattr(train_env, "migrationbench_rollout", fake_rollout)
    env = train_env.train_environment(EnvOptions(work_dir=tmp_path, max_turns=5))
    assert env.rollout == "rollout-fn"
    assert seen == {"config": RolloutConfig(max_turns=5), "run_dir": tmp_path / "rollouts"}


def test_a_huge_integer_for_a_real_field_is_refused_not_overflowed():
    """YAML reads ``time_limit: 1000...0`` (400 digits) as an int that no float holds."""
    with pytest.raises(UsageError, match="^time_limit must be a finite number"):
        RolloutConfig.from_mapping({"time_limit": 10**400})


def test_numpy_bools_from_a_dataset_row_are_bools():
    """A pandas/parquet row gives ``numpy.bool_`` (as it gives ``numpy.int64``, accepted); a
    numpy integer is still not a bool."""
    np = pytest.importorskip("numpy")
    config = RolloutConfig.from_mapping({"compact_prompt": np.bool_(True), "max_turns": np.int64(7)})
    assert config.compact_prompt is True and config.max_turns == 7
    with pytest.raises(UsageError, match="^compact_prompt must be true or false"):
        RolloutConfig.from_mapping({"compact_prompt": np.int64(1)})


def test_resume_of_a_run_made_before_prompt_keeps_its_prompt(tmp_path: Path):
    """docs/migrationbench.md: with --resume the saved options replace the command line's. A
    config.json from before ``--prompt`` has no ``prompt``: the run's rollouts used the backend's
    default (compact on llama.cpp), and ``--resume DIR --prompt full`` must not switch the rest
    of the run to another prompt."""
    import json

    from rich.console import Console

    from strands_art.envs.migrationbench.run.runner import run_migration
    from strands_art.envs.migrationbench.tasks.tasks import TaskError

    old = vars(build_parser().parse_args(["migrate", "--backend", "llamacpp", "--tasks", "no-such-task"]))
    old = {k: v for k, v in old.items() if k not in ("prompt", "resume", "func") and not k.startswith("ray")}
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(old, default=str))
    args = build_parser().parse_args(["migrate", "--resume", str(run), "--prompt", "full"])
    with pytest.raises(TaskError):  # stops at the tasks, after the options are resolved
        asyncio.run(run_migration(args, Console(quiet=True)))
    assert rollout_config(args).compact_prompt is True
