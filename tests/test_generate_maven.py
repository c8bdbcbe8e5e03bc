"""Generated tasks in the real sandbox: untouched 0.0, reference patch 1.0 (real Maven, JDK 17).

A sample of three kinds (a parent POM through ``strands-art make-tasks`` itself, a surefire
argLine hazard and a Nashorn rewrite through :func:`check_task`); the full
verification of 60 generated tasks is the recorded run in
bench/results/migration-tasks-2026-12-01.txt.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from strands_art.cli import main as cli_main
from strands_art.envs.migrationbench.evaluate.verify import check_task, record_check
from strands_art.envs.migrationbench.generate.generate import KINDS, generate_task
from strands_art.envs.migrationbench.run.train_env import train_environment
from strands_art.envs.migrationbench.tasks.tasks import TaskError
from strands_art.training.environment import EnvOptions

pytestmark = [
    pytest.mark.maven,
    pytest.mark.skipif(shutil.which("mvn") is None, reason="mvn not installed (scripts/setup-system.sh)"),
]


@pytest.mark.parametrize(("kind", "seed"), [("surefire-argline", 7), ("nashorn", 10)])
def test_generated_task_scores_zero_untouched_and_one_with_its_reference(
    kind: str, seed: int, tmp_path: Path
) -> None:
    task_dir = generate_task(kind, seed, tmp_path / "tasks")
    work = tmp_path / "work"
    work.mkdir()
    res = check_task(task_dir, work, timeout_s=300, untouched_builds=KINDS[kind].untouched_builds)
    assert res.problems == [], res.line()
    assert res.untouched.reward == 0.0 and res.reference.reward == 1.0
    if KINDS[kind].untouched_builds:  # it builds, to Java 8 bytecode only
        assert set(res.untouched.details["class_major_versions"]) == {"52"}
    else:
        assert res.untouched.details["maven_exit_code"] != 0
    assert set(res.reference.details["class_major_versions"]) == {"61"}
    assert res.reference.tests_run >= res.reference.tests_required > 0


def test_make_tasks_records_each_check_and_training_refuses_a_failed_one(
    tmp_path: Path, capsys, caplog
) -> None:
    out = tmp_path / "tasks"
    assert cli_main(["make-tasks", str(out), "--kinds", "parent-pom", "--n", "1", "--seed", "3"]) == 0
    assert "RESULT verified=1 kinds=1 failed=0 tasks=1" in capsys.readouterr().out
    task_dir = out / "parent-pom-0000003"
    check = json.loads((task_dir / "task.json").read_text())["generated"]["check"]
    assert check == {"ok": True, "untouched_reward": 0.0, "reference_reward": 1.0, "problems": []}
    assert [
        t.name for t in train_environment(EnvOptions(work_dir=tmp_path, train_tasks=out)).train_tasks
    ] == ["parent-pom-0000003"]

    # a check that could not run (a reference patch that does not apply) is recorded as failed
    record_check(task_dir, None, "git apply reference.patch failed")
    with pytest.raises(
        TaskError, match=r"^1 task\(s\) failed their make-tasks check .*: parent-pom-0000003$"
    ):
        train_environment(EnvOptions(work_dir=tmp_path, eval_tasks=out))  # train: the bundled tasks

    # one never checked (make-tasks --no-verify) is trained on, with a warning naming it
    assert cli_main(["make-tasks", str(tmp_path / "raw"), "--kinds", "jaxb", "--n", "1", "--no-verify"]) == 0
    with caplog.at_level("WARNING"):
        env = train_environment(EnvOptions(work_dir=tmp_path, train_tasks=tmp_path / "raw"))
    assert [t.name for t in env.train_tasks] == ["jaxb-0000000"]
    assert "1 generated task(s) were never checked" in caplog.text and "jaxb-0000000" in caplog.text
