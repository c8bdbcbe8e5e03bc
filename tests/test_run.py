"""``strands-art train``'s run function before its model loads (strands_art/training/run.py):
``--prompt-batch`` above the environment's training tasks is refused first, naming the flags
(before: after the model loaded and the first held-out evaluation ran, as
``prompt_batch_size=25 but only 24 tasks``), and resuming a finished run prints its summary from
its files without loading a model. A finished run here is one of the tiny random Llama
(tests/support/fakes.py) on the capitals task, through the command's own run function."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from support.fakes import tiny_llama

from strands_art.cli import main
from strands_art.envs.capitals import train_environment
from strands_art.envs.migrationbench.tasks.tasks import bundled_tasks_dir
from strands_art.registry import load_tokenizer
from strands_art.training.environment import EnvOptions
from strands_art.training.local import LocalTrainer
from strands_art.training.run import arun_training
from strands_art.training.settings import TrainSettings

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # conftest.py


def test_a_prompt_batch_above_the_tasks_is_refused_before_a_model_loads(tmp_path, capsys):
    no_model = str(tmp_path / "no-model")  # reached, the command would stop on it instead
    run = tmp_path / "run"
    argv = ["train", "--env", "capitals", "--eval-samples", "1", "--model", no_model, "--no-progress"]
    assert main([*argv, "--prompt-batch", "25", "--run-dir", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        "strands-art train: --prompt-batch 25 but --env capitals has only 24 training tasks: each outer "
        "batch trains on --prompt-batch distinct tasks; pass --prompt-batch 24 or fewer"
    )
    assert not run.exists()  # nothing written
    tasks = tmp_path / "tasks"
    shutil.copytree(bundled_tasks_dir() / "junit-mix", tasks / "junit-mix", symlinks=True)
    argv = ["train", "--env", "migrationbench", "--train-tasks", str(tasks), "--model", no_model]
    assert main([*argv, "--prompt-batch", "2", "--run-dir", str(run), "--no-progress"]) == 2
    assert f"--prompt-batch 2 but --train-tasks {tasks} has only 1 training task: " in capsys.readouterr().err
    assert not run.exists()


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished one-batch capitals run (checkpoint ob-000001, held-out evaluations after 0 and 1
    batches), its train.json then naming a model that does not exist: loading it fails."""
    run = tmp_path_factory.mktemp("finished") / "run"
    env = train_environment(EnvOptions())
    given = {"outer_batches": 1, "prompt_batch": 1, "rollouts_per_prompt": 2, "max_new_tokens": 2,
             "eval_samples": 1, "max_staleness": 0, "lora_rank": 2, "micro_batch_tokens": 256}  # fmt: skip
    settings = TrainSettings.resolve("capitals", str(run), given, env.defaults)
    tok = load_tokenizer("smollm2")
    trainer = LocalTrainer(tiny_llama(), tok, settings.trainer_config())
    asyncio.run(
        arun_training(settings, env=env, progress=False, on_batch=lambda r: None, loaded=(tok, trainer))
    )
    saved = json.loads((run / "train.json").read_text())
    (run / "train.json").write_text(json.dumps({**saved, "model": str(run.parent / "no-model")}))
    assert (run / "checkpoints" / "latest").read_text() == "ob-000001"
    return run


def _files(d: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(d)): p.read_bytes()
        for p in sorted(d.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def test_resuming_a_finished_run_loads_no_model(finished_run: Path, tmp_path: Path, capsys) -> None:
    run = shutil.copytree(finished_run, tmp_path / "run")
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    (train,) = [r for r in records if r["kind"] == "train"]
    first, last = [r["val_reward"] for r in records if r["kind"] == "eval"]
    was = _files(run)
    assert main(["train", "--resume", "--run-dir", str(run), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"held-out reward {first:.3f} -> {last:.3f}" in out
    assert f"run: {run} (1 outer batches, {train['step']} optimizer steps)" in out and train["step"] == 1
    assert f"adapter      {run / 'checkpoints' / 'ob-000001' / 'adapter_model.safetensors'}" in out
    assert _files(run) == was  # nothing rewritten (TensorBoard's events included)


@pytest.mark.parametrize("left", ["extended", "last-eval-missing"])
def test_a_run_with_work_left_loads_its_model(finished_run: Path, tmp_path: Path, capsys, left: str) -> None:
    """Not finished (one more outer batch asked for, or the last evaluation not recorded): the
    resume goes on to load the model, which here does not exist."""
    run = shutil.copytree(finished_run, tmp_path / "run")
    argv = ["train", "--resume", "--run-dir", str(run), "--no-progress"]
    if left == "extended":
        argv += ["--outer-batches", "2"]
    else:
        lines = (run / "metrics.jsonl").read_text().splitlines()
        assert json.loads(lines[-1])["kind"] == "eval"
        (run / "metrics.jsonl").write_text("".join(x + "\n" for x in lines[:-1]))
    model = json.loads((run / "train.json").read_text())["model"]
    assert main(argv) == 2
    assert f"--model {model}: unknown tokenizer/model" in capsys.readouterr().err
