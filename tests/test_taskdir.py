"""Hostile task directories are refused as bad tasks (trusted input, but malformed): a FIFO
task.json, a name too long for a file name or not a string, a repo/ deeper than the build copy
accepts; and the published records are read with their unparsed rows skipped."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from strands_art.envs.migrationbench.evaluate import evaluator
from strands_art.envs.migrationbench.evaluate.evaluator import BadTask, EvalTask
from strands_art.envs.migrationbench.tasks.taskdir import (
    MAX_TASK_NAME,
    TaskDirError,
    check_task_name,
    check_task_tree,
)
from strands_art.envs.migrationbench.tasks.tasks import TaskError, load_task, load_tasks, read_records
from strands_art.envs.sandbox.removal import remove_tree


def _real_dir() -> Path:
    """``$STRANDS_ART_REAL_DIR``, else ``../shared/real`` beside the checkout (a worktree's one
    level further up)."""
    if os.environ.get("STRANDS_ART_REAL_DIR"):
        return Path(os.environ["STRANDS_ART_REAL_DIR"])
    root = Path(__file__).resolve().parents[1]
    return next(
        (p for p in (root.parent / "shared/real", root.parents[1] / "shared/real") if p.is_dir()), root
    )


PUBLISHED = _real_dir() / "records-java-selected.csv"

RECORD = {
    "repo": "demo/x",
    "base_commit": "0" * 40,
    "num_java_files": 1,
    "num_loc": 1,
    "num_pom_xml": 1,
    "num_src_test_java_files": 0,
    "num_test_cases": 0,
    "license": "MIT",
}


def make_task(root: Path, meta: dict | None = None) -> Path:
    (root / "repo").mkdir(parents=True)
    (root / "repo" / "pom.xml").write_text("<project/>")
    (root / "task.json").write_text(json.dumps(RECORD if meta is None else meta))
    return root


def in_thread(fn, timeout_s: float = 10.0):
    """Run ``fn`` in a thread; fail (instead of hanging the suite) if it does not return in time."""
    out: dict = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            out["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout_s)
    assert not t.is_alive(), "blocked: the task loader hung"
    return out


def test_a_fifo_task_json_is_refused_without_blocking(tmp_path: Path) -> None:
    task = tmp_path / "fifo-task"
    (task / "repo").mkdir(parents=True)
    os.mkfifo(task / "task.json")
    out = in_thread(lambda: EvalTask.from_dir(task))
    assert isinstance(out.get("error"), BadTask) and "not a regular file" in str(out["error"])
    out = in_thread(lambda: load_tasks(tmp_path))  # listed, then refused: not silently skipped
    assert isinstance(out.get("error"), TaskError) and "not a regular file" in str(out["error"])
    out = in_thread(lambda: evaluator.main([str(task / "repo"), "--task", str(task)]))
    assert out.get("value") == 2


def test_a_250_character_task_name_is_refused_at_load(tmp_path: Path) -> None:
    long = make_task(tmp_path / ("t" * 250))
    with pytest.raises(TaskError, match="250 characters; 1 to 150"):
        load_task(long)
    with pytest.raises(BadTask, match="250 characters"):
        EvalTask.from_dir(long)
    named = make_task(tmp_path / "short", RECORD | {"name": "n" * 250})
    with pytest.raises(BadTask, match="250 characters"):
        EvalTask.from_dir(named)
    # the longest allowed name still makes a rollout's file names (logs/<name>-r<k>.eval.json)
    ok = "o" * MAX_TASK_NAME
    assert check_task_name(ok, "x") == ok
    (tmp_path / f"b12-{ok}-r999.eval.json").write_text("{}")


@pytest.mark.parametrize("name", [["a"], 7, None, "", "../x", ".hidden", "a/b", "a\nb"])
def test_a_task_name_that_is_not_a_plain_string_is_refused(tmp_path: Path, name) -> None:
    task = make_task(tmp_path / "t", RECORD | {"name": name})
    with pytest.raises(BadTask, match="task name"):
        EvalTask.from_dir(task)
    with pytest.raises(TaskError, match="task name"):
        load_task(task)


def _nest(root: Path, levels: int) -> None:
    """``levels`` nested directories under ``root``, made fd-relative (no path-length limit)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            new = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = new
    finally:
        os.close(fd)


def test_a_repo_1200_levels_deep_is_a_bad_task_not_a_score(tmp_path: Path) -> None:
    task = make_task(tmp_path / "deep")
    try:
        _nest(task / "repo", 1200)
        with pytest.raises(BadTask, match="nested more than 128 levels"):
            EvalTask.from_dir(task)
        with pytest.raises(TaskError, match="nested more than 128 levels"):
            load_task(task)
        assert evaluator.main([str(task / "repo"), "--task", str(task)]) == 2  # bad task, not 0.0
    finally:  # pytest's own clean-up (shutil.rmtree) raises RecursionError on 1,200 levels
        remove_tree(task)


def test_tree_check_counts_entries_and_accepts_a_shallow_repo(tmp_path: Path) -> None:
    _nest(tmp_path, 10)
    assert check_task_tree(tmp_path) == 10
    with pytest.raises(TaskDirError, match="more than 5 entries"):
        check_task_tree(tmp_path, max_entries=5)


@pytest.mark.skipif(not PUBLISHED.is_file(), reason="../shared/real/records-java-selected.csv not here")
def test_read_records_reads_the_published_file_skipping_unparsed_rows(tmp_path: Path) -> None:
    skipped: list = []
    records = read_records(PUBLISHED, skipped)
    assert len(records) == 287 and len(skipped) == 13
    assert all(r["num_test_cases"] >= 0 for r in records)
    assert skipped[0][:2] == (38, "BlueObelisk/chemicaltagger")
    assert {s[2].split(" (")[0] for s in skipped} == {"num_test_cases -1", "num_test_cases -2"}
    ambivalence = next(r for r in records if r["repo"] == "poetix/ambivalence")
    assert ambivalence["base_commit"] == "09b34ccdb07541449588804031c8415d4a80c046"
    assert ambivalence["num_test_cases"] == 16 and ambivalence["license"] == "MIT"
    # the same rows as JSON and JSONL
    rows = [dict(r) for r in records[:5]] + [RECORD | {"repo": "a/unparsed", "num_test_cases": -2}]
    (tmp_path / "r.json").write_text(json.dumps(rows))
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for name in ("r.json", "r.jsonl"):
        assert read_records(tmp_path / name) == records[:5]
    (tmp_path / "bad.json").write_text(json.dumps([RECORD | {"repo": "no-slash"}]))
    with pytest.raises(TaskError, match="repo must be OWNER/NAME"):
        read_records(tmp_path / "bad.json")


def test_read_records_names_the_jsonl_line_of_an_error(tmp_path: Path) -> None:
    """A JSONL error names its line number (from 1, blank lines counted as lines), whether the
    line is not JSON, not an object, or a record that fails its checks."""
    good = json.dumps(RECORD)
    cases = [
        (f"{good}\n\n{{not json\n", r"line 3: not JSON \(Expecting property name"),
        (f"{good}\n[1, 2]\n", "line 2: expected a JSON object"),
        (
            f"{good}\n{good}\n" + json.dumps(RECORD | {"base_commit": "--output=x"}) + "\n",
            "line 3: base_commit",
        ),
        (f"{good}\n" + json.dumps(RECORD | {"num_test_cases": "7"}) + "\n", "line 2: num_test_cases"),
        ("[" * 100_000 + "\n", "line 1: not JSON"),
    ]
    for text, message in cases:
        (tmp_path / "r.jsonl").write_text(text)
        with pytest.raises(TaskError, match=message):
            read_records(tmp_path / "r.jsonl")
    (tmp_path / "r.jsonl").write_text(f"\n{good}\n\n{good}\n")
    assert read_records(tmp_path / "r.jsonl") == [RECORD, RECORD]


def test_read_records_needs_exactly_the_fields_its_docstring_names(tmp_path: Path) -> None:
    """repo, base_commit and num_test_cases are required (a file without one of them is refused
    as a whole, naming it); every other field is optional and kept as read."""
    minimal = {"repo": "demo/x", "base_commit": "a" * 40, "num_test_cases": 3}
    (tmp_path / "min.jsonl").write_text(json.dumps(minimal | {"extra": 1}) + "\n")
    assert read_records(tmp_path / "min.jsonl") == [minimal | {"extra": 1}]
    (tmp_path / "min.csv").write_text("repo,base_commit,num_test_cases\ndemo/x," + "a" * 40 + ",3\n")
    assert read_records(tmp_path / "min.csv") == [minimal]
    for field in ("repo", "base_commit", "num_test_cases"):
        row = {k: v for k, v in minimal.items() if k != field}
        (tmp_path / "r.json").write_text(json.dumps([row]))
        with pytest.raises(
            TaskError,
            match=rf"missing columns \['{field}'\] \(every record needs repo, base_commit, num_test_cases\)",
        ):
            read_records(tmp_path / "r.json")
    # a column present in the file but empty in one row is that row's error, named by its line
    (tmp_path / "r.jsonl").write_text(
        json.dumps(minimal) + "\n" + json.dumps({"repo": "demo/y", "base_commit": "b" * 40}) + "\n"
    )
    with pytest.raises(TaskError, match="line 2: num_test_cases must be an integer"):
        read_records(tmp_path / "r.jsonl")
