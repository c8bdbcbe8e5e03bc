"""task.json fields from a project directory."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from strands_art.envs.migrationbench.tasks.taskinfo import git_tree_id, update_task
from strands_art.envs.migrationbench.tasks.tasks import RECORD_FIELDS as FIELDS


def _project(root: Path) -> None:
    (root / "src/main/java/p").mkdir(parents=True)
    (root / "src/test/java/p").mkdir(parents=True)
    (root / "lib/src/test/java/q").mkdir(parents=True)
    (root / "pom.xml").write_text("<project/>\n")
    (root / "lib/pom.xml").write_text("<project/>\n")
    (root / "src/main/java/p/A.java").write_text("package p;\n\nclass A {\n  int x;\n}\n")
    (root / "src/test/java/p/ATest.java").write_text(
        "package p;\nclass ATest {\n  @Test void a() {}\n  @Ignore @Test void b() {}\n}\n"
    )
    (root / "lib/src/test/java/q/QTest.java").write_text("package q;\nclass QTest { @Test void q() {} }\n")
    (root / "target/classes").mkdir(parents=True)
    (root / "target/Gen.java").write_text("class Gen {}\n")


def test_fields_and_write_keeps_other_keys(tmp_path: Path) -> None:
    task = tmp_path / "my-task"
    _project(task / "repo")
    (task / "task.json").write_text(json.dumps({"repo": "acme/thing", "hazards": ["jaxb"]}))
    merged = update_task(task, write=True)
    assert {k: merged[k] for k in FIELDS if k != "base_commit"} == {
        "repo": "acme/thing",
        "num_java_files": 3,
        "num_loc": 4 + 5 + 2,
        "num_pom_xml": 2,
        "num_src_test_java_files": 2,
        "num_test_cases": 2,  # b is @Ignore'd
        "license": "Apache-2.0",
    }
    assert merged["hazards"] == ["jaxb"]
    assert json.loads((task / "task.json").read_text()) == merged


def test_git_tree_id_matches_git(tmp_path: Path) -> None:
    _project(tmp_path)
    (tmp_path / "run.sh").write_text("#!/bin/sh\n")
    (tmp_path / "run.sh").chmod(0o755)
    (tmp_path / "empty-dir").mkdir()
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    expected = subprocess.run(["git", "write-tree"], cwd=tmp_path, check=True, capture_output=True, text=True)
    assert git_tree_id(tmp_path) == expected.stdout.strip()
