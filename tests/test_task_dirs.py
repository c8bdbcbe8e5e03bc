"""A tasks directory that holds no task, one task's own directory, and held-out tasks that are also
training tasks are refused with the reason (``migrate --tasks-dir``, ``train --train-tasks /
--eval-tasks``), before anything runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from strands_art.envs.migrationbench.tasks import TaskError, bundled_tasks_dir, load_tasks
from strands_art.envs.migrationbench.train_env import train_environment
from strands_art.training.environment import EnvOptions


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
    with pytest.raises(TaskError, match=r"held-out tasks are also training tasks: compiler-props, "):
        train_environment(opts)
    shutil.copytree(bundled_tasks_dir() / "jaxb-datatype", tmp_path / "held" / "jaxb-datatype", symlinks=True)
    with pytest.raises(
        TaskError, match=r"also training tasks: jaxb-datatype \(--eval-tasks must be held out"
    ):
        train_environment(EnvOptions(work_dir=tmp_path, eval_tasks=tmp_path / "held"))
    shutil.copytree(bundled_tasks_dir() / "nashorn-eval", tmp_path / "train" / "nashorn-eval", symlinks=True)
    env = train_environment(
        EnvOptions(work_dir=tmp_path, train_tasks=tmp_path / "train", eval_tasks=tmp_path / "held")
    )
    assert [t.name for t in env.train_tasks] == ["nashorn-eval"]
    assert [t.name for t in env.eval_tasks] == ["jaxb-datatype"]
