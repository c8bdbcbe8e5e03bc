"""bench/migration_base.py: the base success table of issue 24 item 3 (the tabulation only; the
runs themselves are recorded in bench/results/migration-base-2026-12-01.txt)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("migration_base", ROOT / "bench" / "migration_base.py")
mb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mb)


def _rec(task: str, reward: float | None, wall: float, **extra) -> dict:
    return {"rollout_id": f"{task}-r0", "task": task, "reward": reward, "times": {"wall_s": wall}, **extra}


def test_summary_per_kind_train_kinds_and_failed_rollouts():
    kinds = {
        "jaxb-0000009": "jaxb",
        "jaxb-0000022": "jaxb",
        "profile-0000004": "profile",
        "base64-0000012": "base64",
    }
    records = [
        _rec("jaxb-0000009", 1.0, 100.0),
        _rec("jaxb-0000022", 0.5, 300.0),
        _rec("profile-0000004", 0.0, 50.0),
        _rec("base64-0000012", 1.0, 10.0),  # the held-out kind: in "all", not in "train"
        _rec("profile-0000004", None, 0.0, failed=True),  # infrastructure: counted apart
    ]
    s = mb.summarize(records, kinds)
    assert s["failed"] == 1
    assert s["kinds"]["jaxb"] == {"n": 2, "mean": 0.75, "p1": 0.5, "p05": 0.5, "p0": 0.0, "wall_s": 200.0}
    assert s["kinds"]["profile"]["n"] == 1 and s["kinds"]["profile"]["p0"] == 1.0
    assert s["train"]["n"] == 3 and s["train"]["mean"] == pytest.approx(0.5)
    assert s["all"]["n"] == 4 and s["all"]["p1"] == 0.5
    assert s["train_tasks_solved"] == pytest.approx(1 / 3)  # jaxb-0000009 only
    assert math.isnan(mb.summarize([], kinds)["train"]["mean"])


def test_runs_parse_and_the_migrate_command(tmp_path: Path):
    import argparse

    assert mb.parse_run("qwen2.5-coder-0.5b:compact-no-recipe") == ("qwen2.5-coder-0.5b", "compact-no-recipe")
    for bad in ("qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b:short", ":full"):
        with pytest.raises(argparse.ArgumentTypeError):
            mb.parse_run(bad)
    args = argparse.Namespace(rollouts_per_task=1, seed=0, concurrency=2)
    run_dir = tmp_path / "m.full"
    cmd = mb.migrate_command(run_dir, tmp_path / "tasks", "m", "full", args)
    assert cmd[3:] == [
        "migrate",
        "--tasks-dir",
        str(tmp_path / "tasks"),
        "--all-tasks",
        "--model",
        "m",
        "--prompt",
        "full",
        "--rollouts-per-task",
        "1",
        "--seed",
        "0",
        "--concurrency",
        "2",
        "--run-dir",
        str(run_dir),
        "--no-plot",
    ]
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({}))
    assert mb.migrate_command(run_dir, tmp_path / "tasks", "m", "full", args)[3:] == [
        "migrate",
        "--resume",
        str(run_dir),
        "--no-plot",
    ]


def test_kinds_come_from_task_json(tmp_path: Path):
    for name, generated in (("a-1", {"kind": "jaxb"}), ("b", None)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "task.json").write_text(json.dumps({"generated": generated} if generated else {}))
    (tmp_path / "notes").mkdir()
    assert mb.task_kinds(tmp_path) == {"a-1": "jaxb", "b": "b"}


def test_rollout_line_names_reward_tests_and_changed_files():
    r = _rec(
        "owner__name",
        0.5,
        94.4,
        build_success=True,
        tests_run=30,
        tests_required=34,
        turns=2,
        stop_reason="completed",
        tool_stats={"calls": {"shell": 3, "file_editor": 1}},
        edited_files={
            "modified": ["pom.xml"],
            "added": ["a/B.java"],
            "deleted": ["c.txt"],
            "truncated": False,
        },
    )
    assert (
        mb.rollout_line(r).split()
        == (
            "owner__name-r0 reward 0.5 build ok tests 30/34 turns 2 calls 4 stop completed wall 94 s "
            "changed pom.xml,+a/B.java,-c.txt"
        ).split()
    )
    bare = mb.rollout_line({"rollout_id": "t-r1", "reward": 0.0})
    assert (
        bare.split()
        == "t-r1 reward 0.0 build fail tests ?/? turns ? calls 0 stop ? wall ? s changed -".split()
    )
    failed = mb.rollout_line({"rollout_id": "t-r2", "failed": True, "error": "backend: connection refused"})
    assert failed.split() == "t-r2 FAILED (backend: connection refused)".split()
