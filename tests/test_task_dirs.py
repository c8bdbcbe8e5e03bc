"""A tasks directory that holds no task, one task's own directory, and held-out tasks that are also
training tasks are refused with the reason (``migrate --tasks-dir``, ``train --train-tasks /
--eval-tasks``), before anything runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from strands_art.envs.migrationbench.tasks.tasks import TaskError, bundled_tasks_dir, load_tasks
from strands_art.training.environment import (
    EnvironmentSpecError,
    EnvOptions,
    TrainEnvironment,
    resolve_environment,
)


def test_a_directory_without_tasks_is_refused(tmp_path: Path):
    (tmp_path / "notes").mkdir()  # a subdirectory without task.json is not a task
    with pytest.raises(TaskError, match=r"holds no task: a tasks directory holds one directory per task"):
        load_tasks(tmp_path)


def test_one_tasks_own_directory_is_refused_naming_its_parent(tmp_path: Path):
    shutil.copytree(bundled_tasks_dir() / "compiler-props", tmp_path / "compiler-props", symlinks=True)
    with pytest.raises(TaskError, match=rf"is one task's directory .* here {tmp_path}$"):
        load_tasks(tmp_path / "compiler-props")
    assert [t.name for t in load_tasks(tmp_path)] == ["compiler-props"]  # its parent is a tasks directory


def test_held_out_tasks_that_are_training_tasks_are_refused(tmp_path: Path):
    opts = EnvOptions(work_dir=tmp_path, eval_tasks=bundled_tasks_dir())  # train: the bundled tasks too
    with pytest.raises(
        EnvironmentSpecError,
        match=r"'migrationbench': held-out tasks are also training tasks: compiler-props, ",
    ):
        resolve_environment("migrationbench", opts)
    shutil.copytree(bundled_tasks_dir() / "jaxb-datatype", tmp_path / "held" / "jaxb-datatype", symlinks=True)
    with pytest.raises(
        EnvironmentSpecError, match=r"also training tasks: jaxb-datatype \(held-out tasks must not"
    ):
        resolve_environment("migrationbench", EnvOptions(work_dir=tmp_path, eval_tasks=tmp_path / "held"))
    shutil.copytree(bundled_tasks_dir() / "nashorn-eval", tmp_path / "train" / "nashorn-eval", symlinks=True)
    env = resolve_environment(
        "migrationbench",
        EnvOptions(work_dir=tmp_path, train_tasks=tmp_path / "train", eval_tasks=tmp_path / "held"),
    )
    assert [t.name for t in env.train_tasks] == ["nashorn-eval"]
    assert [t.name for t in env.eval_tasks] == ["jaxb-datatype"]


def test_every_environment_refuses_held_out_tasks_it_trains_on():
    """The rule is TrainEnvironment's, not MigrationBench's: a user's own environment gets it too."""

    class Task:
        def __init__(self, name: str):
            self.name = name

    def env(train: list[str], held: list[str]) -> TrainEnvironment:
        return TrainEnvironment(
            name="mine",
            train_tasks=[Task(n) for n in train],
            eval_tasks=[Task(n) for n in held],
            rollout=lambda *a: None,
            gateway=lambda tokenizer, backend: None,
        )

    env(["a", "b"], ["c"]).check()
    with pytest.raises(
        EnvironmentSpecError, match=r"^environment 'mine': held-out tasks are also training tasks: b \("
    ):
        env(["a", "b"], ["c", "b"]).check()
    names = [f"t{i}" for i in range(7)]
    with pytest.raises(EnvironmentSpecError, match=r"training tasks: t0, t1, t2, t3, t4 \.\.\. \("):
        env(names, names).check()
