"""``strands-art train`` end to end in subprocesses (real SmolLM2, capitals task, smallest settings):
a run killed at a random point and resumed with ``--resume`` ends with the same adapter (bit for
bit), metrics and rows as an uninterrupted run, and writes TensorBoard events a reader lists.
Also the command's refusals (lose nothing) and the verl launch it writes."""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from strands_art.cli import main
from strands_art.training.metrics import TIMING_KEYS

ROOT = Path(__file__).resolve().parents[1]
SMALL = [
    "--env", "capitals", "--model", "smollm2", "--outer-batches", "3", "--prompt-batch", "2",
    "--rollouts-per-prompt", "4", "--max-new-tokens", "10", "--eval-samples", "1", "--max-staleness", "0",
    "--threads", "1", "--seed", "5", "--lr", "2e-2", "--no-progress",
]  # fmt: skip


def _start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "strands_art.cli", "train", *argv],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )


def tensorboard_tags(logdir: Path) -> dict[str, list[tuple[int, float]]]:
    """Scalars of the TFRecord event files under ``logdir`` (read with tensorboardX's protobuf)."""
    from tensorboardX.proto.event_pb2 import Event

    out: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(logdir.glob("events.out.tfevents.*")):
        data = path.read_bytes()
        pos = 0
        while pos < len(data):
            (n,) = struct.unpack("<Q", data[pos : pos + 8])
            ev = Event.FromString(data[pos + 12 : pos + 12 + n])
            pos += 12 + n + 4
            for v in ev.summary.value:
                out.setdefault(v.tag, []).append((ev.step, v.simple_value))
    return out


def _state(run: Path) -> dict:
    from safetensors.torch import load_file

    adapter = run / "checkpoints" / "ob-000003" / "adapter_model.safetensors"
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return {
        "adapter_bytes": adapter.read_bytes(),
        "adapter": load_file(str(adapter)),
        "records": [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in records],
        "rows": {p.name: p.read_text() for p in sorted((run / "rows").glob("*.jsonl"))},
    }


@pytest.mark.slow
def test_killed_and_resumed_run_equals_an_uninterrupted_one(tmp_path):
    whole = tmp_path / "whole"
    proc = _start([*SMALL, "--run-dir", str(whole)], tmp_path / "whole.log")
    assert proc.wait(timeout=900) == 0, (tmp_path / "whole.log").read_text()[-3000:]
    out = (tmp_path / "whole.log").read_text()
    assert f"run: {whole}" in out and "--resume --run-dir" in out  # where the run is
    # --no-progress (and a pipe): a line per phase change, from the first phase on, in order (and
    # lines of the same phase as its rollouts end: counted once here)
    phases = [x for x in out.splitlines() if re.match(r"\[ *\d+s\] ", x)]
    assert phases[0] == "[    0s] starting: loading smollm2 and the transformers sampler"
    labels = [re.sub(r"^\[ *\d+s\] |:.*$", "", x) for x in phases]
    changes = [x for i, x in enumerate(labels) if i == 0 or x != labels[i - 1]]
    assert "evaluating after 0 outer batches: 8 / 8 held-out rollouts done, 0 in flight" in out
    assert changes[1:5] == [
        "evaluating after 0 outer batches", "sampling outer batch 0", "updating outer batch 0",
        "checkpointing after 1 outer batch",
    ]  # fmt: skip
    assert phases[-1].split("] ", 1)[1].startswith("evaluating after 3 outer batches")
    clocks = [int(re.match(r"\[ *(\d+)s\]", x).group(1)) for x in phases]
    assert clocks == sorted(clocks) and clocks[-1] > 0  # the clock runs

    killed = tmp_path / "killed"
    log = tmp_path / "killed.log"
    rng = random.Random(int(os.environ.get("STRANDS_ART_KILL_SEED", "23")))
    proc = _start([*SMALL, "--run-dir", str(killed)], log)
    # a random point after the first checkpoint exists (before it the run simply starts over): a
    # phase of the run's own log picked at random, then a random fraction of a second into it. A
    # point in seconds would depend on the machine's load (a first run slowed by a neighbour and
    # a fast second one let the kill land after the end).
    phase = rng.choice([
        "sampling outer batch 1", "updating outer batch 1", "checkpointing after 2 outer batches",
        "sampling outer batch 2", "updating outer batch 2",
    ])  # fmt: skip
    deadline = time.monotonic() + 900
    while f"] {phase}" not in log.read_text() and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(rng.uniform(0.0, 0.5))
    finished_first = proc.poll() is not None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = (
        len((killed / "metrics.jsonl").read_text().splitlines()) if (killed / "metrics.jsonl").exists() else 0
    )
    before = len(log.read_text().splitlines())
    proc = _start(["--resume", "--run-dir", str(killed), "--no-progress"], log)
    assert proc.wait(timeout=900) == 0, log.read_text()[-3000:]
    assert not finished_first and done < 5, "the kill landed after the run finished: nothing was tested"
    resumed = log.read_text().splitlines()[before:]
    at = [
        re.fullmatch(r"resumed at outer batch (\d) \(of 3\): batches before it are kept", x) for x in resumed
    ]
    (k,) = [int(m.group(1)) for m in at if m]  # the resume line, once, naming the batch it goes on from
    first = next(x for x in resumed if re.match(r"\[ *\d+s\] (sampling|evaluating after [1-3])", x))
    assert first.split("] ", 1)[1].startswith(f"sampling outer batch {k}:") or k == 3

    a, b = _state(whole), _state(killed)
    assert a["adapter_bytes"] == b["adapter_bytes"]  # the same final adapter, bit for bit
    assert a["adapter"].keys() == b["adapter"].keys() and len(a["adapter"]) > 0
    assert a["records"] == b["records"]
    assert a["rows"] == b["rows"] and len(a["rows"]) == 3
    train = [r for r in a["records"] if r["kind"] == "train"]
    assert [r["optimizer_steps"] for r in train] == [2, 2, 2]
    assert any(r["grad_norm"] > 0 for r in train)  # a real update happened

    # TensorBoard: the resumed run's events hold each metrics record exactly once
    for run in (whole, killed):
        tags = tensorboard_tags(run / "tensorboard")
        assert [s for s, _ in tags["train/reward_mean"]] == [1, 2, 3]
        assert [v for _, v in tags["train/reward_mean"]] == pytest.approx([r["reward_mean"] for r in train])
        assert [s for s, _ in tags["eval/val_reward"]] == [0, 3]
    settings = json.loads((killed / "train.json").read_text())
    assert settings["outer_batches"] == 3 and settings["max_staleness"] == 0
    # code.jsonl: one line per process that trained the run, the resume's naming where it went on
    code = [json.loads(x) for x in (killed / "code.jsonl").read_text().splitlines()]
    assert [(c["resume"], c["from_batch"]) for c in code] == [(False, 0), (True, k)]
    assert [json.loads(x)["resume"] for x in (whole / "code.jsonl").read_text().splitlines()] == [False]


def test_train_refuses_to_overwrite_or_change_a_run(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"kind": "eval", "outer_batch": 0}\n')
    assert main(["train", "--env", "capitals", "--run-dir", str(run)]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert (run / "metrics.jsonl").read_text() == '{"kind": "eval", "outer_batch": 0}\n'  # nothing lost
    assert main(["train", "--resume", "--run-dir", str(tmp_path / "none")]) == 2
    assert "is not a `strands-art train` run directory" in capsys.readouterr().err
    (run / "train.json").write_text(json.dumps({"env": "capitals", "run_dir": str(run), "lr": 1e-3}))
    assert main(["train", "--resume", "--run-dir", str(run), "--lr", "5e-4"]) == 2
    assert "--lr 0.0005 (the run has 0.001)" in capsys.readouterr().err
    assert main(["train", "--env", "nosuch", "--run-dir", str(tmp_path / "x")]) == 2
    assert "unknown environment 'nosuch'" in capsys.readouterr().err
    assert main(["train", "--env", "os:path", "--run-dir", str(tmp_path / "m")]) == 2
    assert (
        "environment 'os:path': os:path is a module, not a function of EnvOptions" in capsys.readouterr().err
    )
    assert (
        main(
            [
                "train",
                "--env",
                "capitals",
                "--prompt-batch",
                "3",
                "--ppo-mini-batch",
                "2",
                "--run-dir",
                str(tmp_path / "y"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "--prompt-batch=3 is not divisible by --ppo-mini-batch=2" in err and "_size" not in err  # flags
    argv = [
        "train",
        "--env",
        "capitals",
        "--share-prefix",
        "--gradient-checkpointing",
        "--run-dir",
        str(tmp_path / "g"),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "use one of --share-prefix and --gradient-checkpointing" in err and "share_prefix" not in err
    assert main(["train", "--env", "capitals", "--trainer", "verl", "--run-dir", str(tmp_path / "z")]) == 2
    assert "only --env migrationbench" in capsys.readouterr().err
    assert main(["train", "--env", "lookup", "--prompt", "compact", "--run-dir", str(tmp_path / "p")]) == 2
    assert "--env lookup has its own keys and prompt" in capsys.readouterr().err
    assert not (tmp_path / "p" / "metrics.jsonl").exists()
    # a factory that raises: one line naming it, not a traceback
    assert main(["train", "--env", "os.path:join", "--run-dir", str(tmp_path / "j")]) == 2
    assert "environment factory os.path:join raised TypeError" in capsys.readouterr().err
    # a model that cannot load: the flag named, and the directory it made removed again
    bad = ["train", "--env", "capitals", "--model", "doesnotexist", "--run-dir", str(tmp_path / "b")]
    for _ in range(2):  # the same command again gets the same answer, not "already holds a run"
        assert main(bad) == 2
        err = capsys.readouterr().err
        assert "--model doesnotexist: unknown tokenizer/model 'doesnotexist'" in err, err
        assert not (tmp_path / "b").exists()
    # a --vllm-url nobody answers: refused before any rollout, the flag named, nothing kept
    dead = ["train", "--env", "capitals", "--model", "smollm2", "--vllm-url", "http://127.0.0.1:9"]
    assert main([*dead, "--run-dir", str(tmp_path / "u")]) == 2
    err = capsys.readouterr().err
    assert "--vllm-url http://127.0.0.1:9: the vLLM server is not usable: could not list models" in err, err
    assert not (tmp_path / "u").exists()


@pytest.mark.parametrize("resume", [False, True])
def test_a_symlinked_or_mistyped_env_is_refused_before_the_environment_writes_through_it(
    tmp_path, capsys, resume
):
    """A fresh ``--env migrationbench`` run whose ``env`` is a symlink made ``elsewhere/rollouts``
    before the run directory was checked (and ``env`` a file was a bare ``[Errno 20]``); now both
    are one line naming the entry, nothing written. No model is loaded (refused first)."""
    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    if resume:
        shutil.copytree(ROOT / "tests" / "data" / "train-lookup", run)
    else:
        run.mkdir()
    elsewhere.mkdir()
    (run / "env").symlink_to(elsewhere)
    argv = ["train", "--resume"] if resume else ["train", "--env", "migrationbench"]
    assert main([*argv, "--run-dir", str(run), "--no-progress"]) == 2
    assert f"{run / 'env'} is a symlink: a run directory's files must be inside it" in capsys.readouterr().err
    assert list(elsewhere.iterdir()) == []
    (run / "env").unlink()
    (run / "env").write_text("")
    assert main([*argv, "--run-dir", str(run), "--no-progress"]) == 2
    assert f"{run / 'env'} is a regular file, not a directory: move it out" in capsys.readouterr().err


def test_migrationbench_prompt_sets_the_rollout_config_as_migrate_does():
    from strands_art.envs.migrationbench.config import RolloutConfig
    from strands_art.envs.migrationbench.run.train_env import rollout_config
    from strands_art.validation import UsageError

    assert rollout_config(None, None) == RolloutConfig(max_turns=20)  # full: the class defaults
    compact = rollout_config(12, "compact-no-recipe")
    assert (compact.max_turns, compact.time_limit, compact.max_output_bytes) == (12, 600.0, 4000)
    assert (compact.compact_prompt, compact.user_recipe) == (True, False)
    assert (
        rollout_config(None, "compact").user_recipe is True
        and rollout_config(None, "compact").max_turns == 20
    )
    with pytest.raises(
        UsageError, match="--prompt must be one of compact, compact-no-recipe, full, got 'short'"
    ):
        rollout_config(None, "short")


def test_train_verl_writes_the_launch_for_the_same_settings(tmp_path, capsys):
    from strands_art.envs.migrationbench.tasks.tasks import bundled_tasks_dir

    run = tmp_path / "mb"
    argv = ["train", "--env", "migrationbench", "--trainer", "verl", "--run-dir", str(run)]
    argv += ["--train-tasks", str(bundled_tasks_dir()), "--prompt-batch", "4", "--ppo-mini-batch", "2"]
    argv += ["--rollouts-per-prompt", "8", "--lr", "3e-5", "--kl-coef", "0.01", "--epochs", "2"]
    assert main(argv) == 0
    script = (run / "verl" / "launch.sh").read_text()
    assert "verl launch written" in capsys.readouterr().out
    # a second launch into the same run directory is refused, the first one kept as written
    assert main([*argv, "--old-logprobs", "recompute"]) == 2
    assert (run / "verl" / "launch.sh").read_text() == script
    assert "exists: --trainer verl writes a new launch into another --run-dir" in capsys.readouterr().err
    assert "trainer.test_freq=-1" in script  # no --eval-tasks: nothing to validate
    for override in (
        "data.train_batch_size=4",
        "actor_rollout_ref.actor.ppo_mini_batch_size=2",
        "actor_rollout_ref.actor.ppo_epochs=2",
        "actor_rollout_ref.rollout.n=8",
        "actor_rollout_ref.actor.optim.lr=3e-05",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.kl_loss_coef=0.01",
        "trainer.v1.trainer_mode=strands_sync",
    ):
        assert override in script, override
    assert f"make_verl_dataset.py --tasks-dir {bundled_tasks_dir()} --out" in script  # no held-out set
    assert "MODEL=${MODEL:-Qwen/Qwen2.5-Coder-0.5B-Instruct}" in script  # the alias's HF model
    assert subprocess.run(["bash", "-n", str(run / "verl" / "launch.sh")]).returncode == 0
    assert "algorithm.rollout_correction.bypass_mode=True" in script  # default: the recorded logprobs
    argv[argv.index(str(run))] = str(tmp_path / "mb2")
    assert main([*argv, "--prompt", "compact"]) == 2
    assert "verl's agent loop runs the full prompt" in capsys.readouterr().err
    assert not (tmp_path / "mb2").exists()  # the refusal leaves nothing behind (no env/rollouts/)
    assert main([*argv, "--old-logprobs", "recompute"]) == 0  # verl recomputes them before the update
    recompute = (tmp_path / "mb2" / "verl" / "launch.sh").read_text()
    assert "bypass_mode=False" in recompute and "bypass_mode=True" not in recompute
    assert "rollout_correction.rollout_is=token" in recompute  # the recorded ones: truncated IS weight
    assert "rollout_correction.rollout_is_threshold=2.0" in recompute and "rollout_is=" not in script
    argv[argv.index(str(tmp_path / "mb2"))] = str(tmp_path / "mb3")
    assert main([*argv, "--old-logprobs", "first-pass"]) == 2
    assert "has no verl counterpart" in capsys.readouterr().err
    assert main([*argv, "--max-staleness", "1"]) == 2
    assert "trains synchronously" in capsys.readouterr().err
    assert not (tmp_path / "mb3" / "verl").exists()  # refused before anything is written


def test_live_progress_and_tensorboard_sink(tmp_path):
    """The live panel counts rollouts in flight and done, shows the last update; the TensorBoard
    sink's replay starts the event files over with exactly the records given."""
    import io

    from rich.console import Console

    from strands_art.training.progress import LiveProgress, TensorBoardSink

    buf = io.StringIO()
    live = LiveProgress(3, 4, console=Console(file=buf, width=200))
    with live:
        live.on_event("start", "b0-capital-france-r0")
        live.on_event("start", "b0-capital-france-r1")
        live.on_event("end", "b0-capital-france-r0")
        assert live.in_flight == {"b0-capital-france-r1"} and live.done == {"b0": 1}
        live.on_record({"kind": "train", "outer_batch": 0, "reward_mean": 0.25, "approx_kl": 1e-3,
                        "grad_norm": 0.5, "optimizer_steps": 2, "step": 2, "rollout_s": 3.0, "train_s": 4.0})  # fmt: skip
    out = buf.getvalue()
    assert "batch 0: reward 0.250" in out and "1 / 3 trained" in out and "1 in flight" in out

    from strands_art.training.progress import record_line

    line = record_line({"kind": "eval", "outer_batch": 5, "val_reward": 0.75, "val_reward_std": 0.25,
                        "val_success": 0.5, "val_rollouts": 8, "eval_s": 12.4})  # fmt: skip
    assert (
        line == "eval after 5 outer batches: held-out reward 0.750 ± 0.250, success 0.500 (8 rollouts, 12s)"
    )
    line = record_line(
        {
            "kind": "train",
            "outer_batch": 1,
            "reward_mean": 0.5,
            "stale_dropped": 2,
            "step": 4,
            "failed_rollouts": 5,
        }
    )  # the 2 stale drops are among the 5 failed rollouts
    assert line.startswith("batch 1: reward 0.500") and line.endswith(", 2 stale dropped, 3 rollouts failed")

    sink = TensorBoardSink(tmp_path)
    sink.write({"kind": "train", "outer_batch": 5, "reward_mean": 9.0})
    sink.replay(
        [
            {"kind": "eval", "outer_batch": 0, "val_reward": 0.5},
            {"kind": "train", "outer_batch": 0, "reward_mean": 0.25},
        ]
    )
    sink.close()
    tags = tensorboard_tags(tmp_path / "tensorboard")
    assert tags == {"eval/val_reward": [(0, 0.5)], "train/reward_mean": [(1, 0.25)]}


def test_the_vllm_server_gets_the_environments_context_budget(tmp_path, monkeypatch):
    """--backend vllm starts the server with the environment's context (MigrationBench: the
    gateway's 16,384 tokens), not vLLM's 4,096 default the short tasks use."""
    import contextlib

    from strands_art.backends import vllm_server
    from strands_art.envs.migrationbench.tasks.tasks import bundled_tasks_dir
    from strands_art.training import run
    from strands_art.training.environment import EnvOptions, resolve_environment
    from strands_art.training.settings import TrainSettings

    env = resolve_environment(
        "migrationbench", EnvOptions(train_tasks=bundled_tasks_dir(), work_dir=tmp_path)
    )
    assert env.max_context_tokens == 16384
    assert resolve_environment("lookup", EnvOptions()).max_context_tokens is None

    seen: dict = {}

    class Started(Exception):
        pass

    def server(*args, **kwargs):
        seen.update(kwargs)
        raise Started  # the arguments are what is checked; no server process is started

    monkeypatch.setattr(vllm_server, "VLLMServer", server)
    settings = TrainSettings.resolve("capitals", str(tmp_path / "run"), {"backend": "vllm"})
    with contextlib.ExitStack() as stack, pytest.raises(Started):
        run._load(settings, tmp_path, stack, env.max_context_tokens)
    assert seen["max_model_len"] == 16384 and seen["dtype"] == "float32"
    seen.clear()
    bf16 = TrainSettings.resolve(
        "capitals", str(tmp_path / "run"), {"backend": "vllm", "sampler_dtype": "bfloat16"}
    )
    with contextlib.ExitStack() as stack, pytest.raises(Started):
        run._load(bf16, tmp_path, stack, None)
    assert seen["dtype"] == "bfloat16"  # --sampler-dtype is the server's --dtype
    seen.clear()
    with contextlib.ExitStack() as stack, pytest.raises(Started):
        run._load(settings, tmp_path, stack, None)
    assert "max_model_len" not in seen  # VLLMServer's own default


def test_train_verl_validates_on_the_held_out_tasks(tmp_path, capsys):
    """--eval-tasks becomes verl's val.parquet (not the training tasks again), made by the launch's
    own dataset step; a held-out set holding a training task is refused there too."""
    import shlex

    import pyarrow.parquet as pq

    from strands_art.envs.migrationbench.tasks.tasks import bundled_tasks_dir

    src = bundled_tasks_dir()
    for split, names in (("train", ["compiler-props", "junit-mix"]), ("held", ["jaxb-datatype"])):
        for name in names:
            shutil.copytree(src / name, tmp_path / split / name, symlinks=True)
    run = tmp_path / "run"
    argv = ["train", "--env", "migrationbench", "--trainer", "verl", "--run-dir", str(run)]
    argv += [
        "--train-tasks",
        str(tmp_path / "train"),
        "--eval-tasks",
        str(tmp_path / "held"),
        "--model",
        "smollm2",
    ]
    assert main(argv) == 0
    script = (run / "verl" / "launch.sh").read_text()
    assert "trainer.val_before_train=True" in script
    # --eval-every 0 is "before and after": verl validates at its last step (4 outer batches) too
    assert "trainer.test_freq=4" in script
    assert "MODEL=${MODEL:-HuggingFaceTB/SmolLM2-135M-Instruct}" in script
    step = next(line for line in script.splitlines() if "make_verl_dataset.py" in line)
    assert f"--val-tasks-dir {tmp_path / 'held'}" in step
    cmd = shlex.split(step)  # run the dataset step as the launch would, from the checkout
    proc = subprocess.run([sys.executable, *cmd[1:]], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    data = run / "verl" / "data"

    def task(split: str) -> list[str]:
        return [r["task"] for r in pq.read_table(data / f"{split}.parquet").column("extra_info").to_pylist()]

    assert (task("train"), task("val")) == (["compiler-props", "junit-mix"], ["jaxb-datatype"])
    shutil.copytree(src / "junit-mix", tmp_path / "held" / "junit-mix", symlinks=True)
    proc = subprocess.run([sys.executable, *cmd[1:]], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and "--val-tasks-dir holds training tasks: junit-mix" in proc.stderr


@pytest.mark.parametrize("flag", ["--train-tasks", "--eval-tasks"])
def test_an_empty_tasks_path_is_refused_not_read_as_the_default(tmp_path, capsys, flag):
    argv = ["train", "--env", "migrationbench", "--run-dir", str(tmp_path / "r"), flag, ""]
    assert main(argv) == 2
    assert f"{flag} is empty (an unset variable?)" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_train_verl_task_paths_work_from_any_directory(tmp_path, monkeypatch, capsys):
    from strands_art.envs.migrationbench.tasks.tasks import bundled_tasks_dir

    shutil.copytree(bundled_tasks_dir(), tmp_path / "tasks", symlinks=True)
    monkeypatch.chdir(tmp_path)
    argv = [
        "train",
        "--env",
        "migrationbench",
        "--trainer",
        "verl",
        "--run-dir",
        "mb",
        "--train-tasks",
        "tasks",
    ]
    assert main(argv) == 0, capsys.readouterr().err
    step = next(
        line
        for line in (tmp_path / "mb" / "verl" / "launch.sh").read_text().splitlines()
        if "make_verl_dataset" in line
    )
    assert f"--tasks-dir {tmp_path / 'tasks'} --out {tmp_path / 'mb' / 'verl' / 'data'}" in step


def test_resume_with_more_outer_batches_extends_the_run(tmp_path, capsys):
    from strands_art.training.settings import TrainSettings
    from strands_art.training.train_cli import _settings, add_train_parser, warmup_warning

    run = tmp_path / "run"
    run.mkdir()
    TrainSettings.resolve("capitals", str(run), {"outer_batches": 3}, {}).save(run)
    parser = argparse.ArgumentParser()
    add_train_parser(parser.add_subparsers())
    extended = _settings(
        parser.parse_args(["train", "--resume", "--run-dir", str(run), "--outer-batches", "5"])
    )
    # train.json is rewritten once the run directory's lock is held (run_training), not here
    assert extended.outer_batches == 5 and TrainSettings.load(run).outer_batches == 3
    with pytest.raises(ValueError, match="--outer-batches 2 \\(the run has 3\\)"):  # never shortened
        _settings(parser.parse_args(["train", "--resume", "--run-dir", str(run), "--outer-batches", "2"]))
    with pytest.raises(ValueError, match="--lr"):  # another change is refused, train.json kept
        _settings(
            parser.parse_args(
                ["train", "--resume", "--run-dir", str(run), "--outer-batches", "9", "--lr", "1"]
            )
        )
    assert TrainSettings.load(run).outer_batches == 3
    short = TrainSettings.resolve("capitals", str(run), {"outer_batches": 1, "warmup_steps": 4}, {})
    assert warmup_warning(short) == (
        "--warmup-steps 4 exceeds the run's 2 optimizer steps (1 outer batches x 2): the learning rate "
        "never reaches --lr 0.0001 (its last step uses 5e-05); pass --warmup-steps 2 or fewer"
    )
    assert warmup_warning(TrainSettings.resolve("capitals", str(run), {"outer_batches": 3}, {})) is None


def _recorded_run(dest: Path, model: str) -> Path:
    """The recorded ``train --env lookup`` run (3 outer batches) with ``model`` in its train.json."""
    shutil.copytree(ROOT / "tests" / "data" / "train-lookup", dest)
    saved = json.loads((dest / "train.json").read_text())
    (dest / "train.json").write_text(json.dumps({**saved, "model": model}, indent=2))
    return dest


def test_an_extending_resume_writes_train_json_only_under_the_run_lock(tmp_path, capsys):
    """``--resume --outer-batches N`` on a run another process is training is refused with
    train.json untouched (it was rewritten before the lock was tried); with the lock free the
    extension is saved under it, before the model loads (here a model that cannot, exit 2)."""
    from strands_art.training.run import hold_run_dir

    run = _recorded_run(tmp_path / "run", str(tmp_path / "no-model"))
    before = (run / "train.json").read_bytes()
    argv = ["train", "--resume", "--outer-batches", "5", "--run-dir", str(run), "--no-progress"]
    with hold_run_dir(run):  # another train process holds the run
        assert main(argv) == 2
        assert "is being trained by another process" in capsys.readouterr().err
    assert (run / "train.json").read_bytes() == before
    assert main(argv) == 2
    assert "no-model" in capsys.readouterr().err  # it got as far as loading the model
    saved = json.loads((run / "train.json").read_text())
    assert (saved["outer_batches"], saved["model"], saved["seed"]) == (5, str(tmp_path / "no-model"), 3)


def test_a_resume_connects_to_the_ray_cluster_train_json_names_only_when_told_to(tmp_path):
    """A (copied, hostile) train.json naming a Ray cluster: ``--resume`` alone is refused before
    anything connects (a cluster's answers are unpickled on this machine); with ``--ray`` naming
    the same address it resumes with it. A local cluster (``--ray`` alone, ``auto``) needs no
    restating."""
    from strands_art.training.settings import TrainSettings
    from strands_art.training.train_cli import _settings, add_train_parser

    run = tmp_path / "run"
    run.mkdir()
    TrainSettings.resolve("capitals", str(run), {"outer_batches": 3}, {}).save(run)
    parser = argparse.ArgumentParser()
    add_train_parser(parser.add_subparsers())
    saved = json.loads((run / "train.json").read_text())
    for address, refused in (("198.51.100.7:6379", True), ("local", False), ("auto", False)):
        (run / "train.json").write_text(json.dumps({**saved, "ray": address}))
        resume = ["train", "--resume", "--run-dir", str(run)]
        if refused:
            with pytest.raises(ValueError, match=f"names the Ray cluster '{address}'.*pass --ray {address}"):
                _settings(parser.parse_args(resume))
            assert _settings(parser.parse_args([*resume, "--ray", address])).ray == address
        else:
            assert _settings(parser.parse_args(resume)).ray == address


def test_a_resume_sends_to_the_vllm_server_train_json_names_only_when_told_to(tmp_path):
    """A (copied, hostile) train.json naming a vLLM server: ``--resume`` alone is refused before
    anything is sent (prompts and the adapter's weights go to that server); with ``--vllm-url``
    naming the same server it resumes with it."""
    from strands_art.training.settings import TrainSettings
    from strands_art.training.train_cli import _settings, add_train_parser

    run = tmp_path / "run"
    run.mkdir()
    TrainSettings.resolve("capitals", str(run), {"outer_batches": 3}, {}).save(run)
    parser = argparse.ArgumentParser()
    add_train_parser(parser.add_subparsers())
    url = "http://198.51.100.7:8000"
    saved = json.loads((run / "train.json").read_text())
    (run / "train.json").write_text(json.dumps({**saved, "backend": "vllm", "vllm_url": url}))
    resume = ["train", "--resume", "--run-dir", str(run)]
    with pytest.raises(ValueError, match=f"names the vLLM server '{url}'.*pass --vllm-url {url}"):
        _settings(parser.parse_args(resume))
    assert _settings(parser.parse_args([*resume, "--vllm-url", url])).vllm_url == url


@pytest.mark.parametrize("command", ["train", "migrate"])
@pytest.mark.parametrize(
    ("var", "value", "said"),
    [
        ("STRANDS_ART_EVAL_CACHE", "{afile}", "STRANDS_ART_EVAL_CACHE={afile}: evaluation cache {afile}: exists and is not a directory"),
        ("STRANDS_ART_EVAL_CACHE", "{shared}", "an existing directory open to others (mode 1777)"),
        ("STRANDS_ART_MAVEN_MEMO", "of", "STRANDS_ART_MAVEN_MEMO must be one of off, 0, no, false (off) or on"),
    ],
)  # fmt: skip
def test_a_bad_cache_or_memo_setting_is_refused_before_a_model_loads(
    tmp_path, capsys, monkeypatch, command, var, value, said
):
    """A bad value would otherwise fail every rollout of the run after its model loaded; the
    shared directory keeps its mode (nothing is changed)."""
    (tmp_path / "afile").write_text("x")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    places = {"afile": tmp_path / "afile", "shared": shared}
    monkeypatch.setenv(var, value.format(**places))
    argv = [command, "--run-dir", str(tmp_path / "r")] + (
        ["--env", "migrationbench"] if command == "train" else []
    )
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said.format(**places) in err and "Traceback" not in err
    assert not (tmp_path / "r").exists() and oct(shared.stat().st_mode & 0o7777) == oct(0o1777)
