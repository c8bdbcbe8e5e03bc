"""Generated tasks in the real sandbox: untouched 0.0, reference patch 1.0 (real Maven, JDK 17).

A sample of three kinds (a parent POM, a surefire argLine hazard, a Nashorn rewrite); the full
verification of 60 generated tasks is the recorded run in
bench/results/migration-tasks-2026-12-01.txt.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from strands_art.envs.migrationbench.generate import KINDS, generate_task
from strands_art.envs.migrationbench.verify import check_task

pytestmark = [
    pytest.mark.maven,
    pytest.mark.skipif(shutil.which("mvn") is None, reason="mvn not installed (scripts/setup-system.sh)"),
]


@pytest.mark.parametrize(("kind", "seed"), [("parent-pom", 3), ("surefire-argline", 7), ("nashorn", 10)])
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
