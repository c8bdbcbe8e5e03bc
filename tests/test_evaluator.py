"""Evaluator rules on bundled tasks, with real Maven builds (JDK 17, Debian repo, offline)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from strands_art.envs.migrationbench.evaluate.evaluator import EvalTask, evaluate, evaluate_command

TASKS_DIR = Path(__file__).resolve().parents[1] / "examples" / "migrationbench" / "tasks"
EVAL_TASKS = ("compiler-props", "legacy-plugins", "multi-module")

pytestmark = [
    pytest.mark.maven,
    pytest.mark.skipif(shutil.which("mvn") is None, reason="mvn not installed (scripts/setup-system.sh)"),
]


def _task_dir(name: str) -> Path:
    task_dir = TASKS_DIR / name
    if not (task_dir / "task.json").is_file():
        pytest.skip(f"bundled task {name} not present")
    return task_dir


def _copy(task_dir: Path, dest: Path, apply_reference: bool) -> Path:
    repo = dest / "repo"
    shutil.copytree(task_dir / "repo", repo, ignore=shutil.ignore_patterns("target"))
    if apply_reference:
        subprocess.run(
            ["git", "apply", "--whitespace=nowarn", str(task_dir / "reference.patch")],
            cwd=repo,
            check=True,
            capture_output=True,
        )
    return repo


def _score(repo: Path, task_dir: Path) -> dict:
    return evaluate(repo, EvalTask.from_dir(task_dir), timeout_s=240, offline=True).to_json()


@pytest.mark.parametrize("name", EVAL_TASKS)
def test_untouched_project_scores_zero(name: str, tmp_path: Path) -> None:
    task_dir = _task_dir(name)
    result = _score(_copy(task_dir, tmp_path, apply_reference=False), task_dir)
    # Most untouched tasks build (to Java 8 bytecode); some fail under JDK 17 by design
    # (e.g. legacy-plugins' -XX:MaxPermSize in surefire's argLine).
    if result["details"]["maven_exit_code"] == 0:
        assert result["details"]["class_major_versions"] == {"52": result["details"]["class_files"]}
    else:
        assert result["details"]["maven_errors"], result["details"]["log_tail"]
    assert result["build_success"] is False and result["java17_bytecode"] is False
    assert result["tests_run"] == 0 and result["tests_equivalent"] is False
    assert result["reward"] == 0.0


@pytest.mark.parametrize("name", EVAL_TASKS)
def test_reference_patch_scores_one(name: str, tmp_path: Path) -> None:
    task_dir = _task_dir(name)
    result = _score(_copy(task_dir, tmp_path, apply_reference=True), task_dir)
    details = result["details"]
    assert result["build_success"] and result["java17_bytecode"], details["log_tail"]
    assert set(details["class_major_versions"]) == {"61"}
    assert result["tests_run"] >= result["tests_required"] > 0
    assert details["missing_tests"] == [] and details["added_tests"] == []
    assert details["newly_skipped"] == [] and details["newly_disabled"] == []
    assert result["tests_equivalent"] is True
    assert result["reward"] == 1.0


@pytest.mark.parametrize("name", EVAL_TASKS)
def test_deleting_a_test_scores_half(name: str, tmp_path: Path) -> None:
    task_dir = _task_dir(name)
    repo = _copy(task_dir, tmp_path, apply_reference=True)
    victim = sorted(repo.rglob("src/test/java/**/*.java"))[0]
    victim.unlink()
    result = _score(repo, task_dir)
    assert result["build_success"] is True, result["details"]["log_tail"]
    assert result["tests_equivalent"] is False
    missing = result["details"]["missing_tests"]
    assert missing and all(key.split("#")[0].endswith(victim.stem) for key in missing)
    assert result["tests_run"] < result["tests_required"]
    assert result["reward"] == 0.5


@pytest.mark.parametrize("name", EVAL_TASKS)
def test_broken_build_scores_zero(name: str, tmp_path: Path) -> None:
    task_dir = _task_dir(name)
    repo = _copy(task_dir, tmp_path, apply_reference=True)
    main_src = sorted(repo.rglob("src/main/java/**/*.java"))[0]
    main_src.write_text(main_src.read_text() + "\nthis is not java;\n")
    result = _score(repo, task_dir)
    assert result["details"]["maven_exit_code"] not in (0, None)
    assert any("COMPILATION ERROR" in line for line in result["details"]["maven_errors"])
    assert any(main_src.name in line for line in result["details"]["maven_errors"])
    assert result["build_success"] is False and result["reward"] == 0.0


def test_disabling_a_test_scores_half(tmp_path: Path) -> None:
    task_dir = _task_dir(EVAL_TASKS[0])
    repo = _copy(task_dir, tmp_path, apply_reference=True)
    test_file = sorted(repo.rglob("src/test/java/**/*Test.java"))[0]
    text = test_file.read_text()
    ignore = "@org.junit.jupiter.api.Disabled" if "org.junit.jupiter" in text else "@org.junit.Ignore"
    test_file.write_text(text.replace("@Test", f"{ignore} @Test", 1))
    result = _score(repo, task_dir)
    assert result["build_success"] is True, result["details"]["log_tail"]
    assert len(result["details"]["newly_disabled"]) == 1
    # the skipped case in the report, and its class in Maven's printed counts
    assert len(result["details"]["newly_skipped"]) == 2
    assert result["details"]["newly_skipped"][1].endswith("(1 skipped, Maven's output)")
    assert result["details"]["missing_tests"] == []
    assert result["reward"] == 0.5


def test_evaluate_command_json_shape_and_missing_pom(tmp_path: Path) -> None:
    task_dir = _task_dir(EVAL_TASKS[0])
    (tmp_path / "empty").mkdir()
    result = evaluate_command(tmp_path / "empty", task_dir, timeout_s=30)
    assert list(result) == [
        "build_success",
        "java17_bytecode",
        "tests_run",
        "tests_required",
        "tests_equivalent",
        "reward",
        "details",
    ]
    assert result["reward"] == 0.0 and "no pom.xml" in result["details"]["error"]
    assert result["tests_required"] == json.loads((task_dir / "task.json").read_text())["num_test_cases"]


def test_module_with_only_package_info_scores_one(tmp_path: Path) -> None:
    """Issue 14 item 6: a correct migration of a multi-module project with a documentation module
    that holds only package-info.java (javac writes no class for it) scores 1.0, as without it."""
    task_dir = _task_dir("multi-module")
    repo = _copy(task_dir, tmp_path, apply_reference=True)
    parent = repo / "pom.xml"
    text = parent.read_text(encoding="utf-8")
    parent.write_text(
        text.replace(
            "<module>ledger-report</module>",
            "<module>ledger-report</module>\n    <module>ledger-docs</module>",
        ),
        encoding="utf-8",
    )
    docs = repo / "ledger-docs"
    (docs / "src/main/java/org/example/ledger/docs").mkdir(parents=True)
    (docs / "src/main/java/org/example/ledger/docs/package-info.java").write_text(
        "/** How the ledger fits together. */\npackage org.example.ledger.docs;\n", encoding="utf-8"
    )
    (docs / "pom.xml").write_text(
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<parent><groupId>org.example.ledger</groupId><artifactId>ledger-parent</artifactId>"
        "<version>2.1.0-SNAPSHOT</version></parent><artifactId>ledger-docs</artifactId></project>",
        encoding="utf-8",
    )
    result = _score(repo, task_dir)
    details = result["details"]
    assert details["modules_without_classes"] == [], details["log_tail"]
    assert result["build_success"] and result["java17_bytecode"], details["log_tail"]
    assert result["reward"] == 1.0
