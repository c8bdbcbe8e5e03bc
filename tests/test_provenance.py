"""RUN_DIR/code.jsonl: which code trained a run (strands_art.training.provenance)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from strands_art.training.provenance import (
    CODE_FILE,
    SOURCE_ROOT,
    code_provenance,
    read_code,
    record_start,
    start_line,
)


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture()
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    root.mkdir()
    git(root, "init", "-q")
    (root / "a.py").write_text("x = 1\n")
    git(root, "add", "a.py")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    return root


def test_a_checkout_s_commit_and_whether_its_tracked_files_changed(checkout: Path) -> None:
    head = git(checkout, "rev-parse", "HEAD")
    assert len(head) == 40
    got = code_provenance(checkout)
    assert (got["commit"], got["dirty"]) == (head, False)
    (checkout / "new.txt").write_text("untracked\n")  # untracked files are not the code that ran
    assert code_provenance(checkout)["dirty"] is False
    (checkout / "a.py").write_text("x = 2\n")
    assert (code_provenance(checkout)["commit"], code_provenance(checkout)["dirty"]) == (head, True)


def test_an_installed_package_has_no_commit(tmp_path: Path) -> None:
    got = code_provenance(tmp_path)  # no .git: a wheel in site-packages
    assert (got["commit"], got["dirty"]) == (None, None)
    assert got["python"].count(".") == 2 and got["strands_art"]


def test_each_start_appends_a_line_and_a_torn_line_is_skipped(checkout: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    assert read_code(run) == []  # a run from before code.jsonl
    first = start_line(False, 0, checkout)
    record_start(run, first)
    (checkout / "a.py").write_text("x = 3\n")
    second = start_line(True, 2, checkout)
    record_start(run, second)
    lines = (run / CODE_FILE).read_text().splitlines()
    assert [json.loads(x) for x in lines] == [first, second]
    assert [(x["resume"], x["from_batch"], x["dirty"]) for x in (first, second)] == [
        (False, 0, False),
        (True, 2, True),
    ]
    assert first["at"].endswith("Z") and first["commit"] == git(checkout, "rev-parse", "HEAD")
    with open(run / CODE_FILE, "a") as f:
        f.write('{"at": "2026-')  # a write cut short
    assert read_code(run) == [first, second]


def test_this_checkout_is_found_where_there_is_one() -> None:
    if not (SOURCE_ROOT / ".git").exists():
        pytest.skip("strands-art is not imported from a git checkout here")
    out = subprocess.run(["git", "-C", str(SOURCE_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    # git may refuse a checkout another user owns ("dubious ownership"): then no commit, not a wrong one
    assert code_provenance()["commit"] == (out.stdout.strip() if out.returncode == 0 else None)


def test_a_git_that_answers_the_commit_but_not_the_status_leaves_dirty_unknown(
    checkout, tmp_path, monkeypatch
):
    """Not "clean": a status that failed is None, and GIT_DIR of the caller names no other repository."""
    head = git(checkout, "rev-parse", "HEAD")
    real = subprocess.run(["which", "git"], capture_output=True, text=True, check=True).stdout.strip()
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "git").write_text(
        f'#!/bin/sh\nfor a in "$@"; do [ "$a" = status ] && exit 1; done\nexec {real} "$@"\n'
    )
    (fake / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    got = code_provenance(checkout)
    assert (got["commit"], got["dirty"]) == (head, None)
