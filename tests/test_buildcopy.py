"""The evaluator's host-side copy is measured before a byte is written and bounded in time
(issue 48, part 4): sparse files are refused before any zero is written, and a tree slow to copy
is refused at the build's timeout. No Maven needed."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from strands_art.envs.migrationbench.evaluate.buildcopy import MAX_COPY_BYTES, copy_for_build, measure_tree
from strands_art.envs.sandbox import Identity
from strands_art.envs.sandbox.files import UnsafeFile, copy_tree

ME = Identity(os.getuid(), os.getgid(), drop=False)


def test_sparse_files_over_the_cap_are_refused_before_anything_is_copied(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pom.xml").write_text("<project/>")
    for i in range(3):  # 3 x 1000 MiB of holes: nothing on disk, 3 GB of zeros if copied
        with open(repo / f"sparse{i}.bin", "wb") as f:
            f.truncate(1000 << 20)
    size = measure_tree(repo, max_bytes=1 << 40)
    assert size.bytes == 3 * (1000 << 20) + len("<project/>") and size.allocated < 1 << 20
    build = tmp_path / "build"
    start = time.monotonic()
    with pytest.raises(UnsafeFile, match=f"more than {MAX_COPY_BYTES} bytes of files"):
        copy_for_build(repo, build, ME, timeout_s=60)
    assert not build.exists()  # refused by the measure: the copy never started
    assert time.monotonic() - start < 10


def test_a_tree_slow_to_copy_is_refused_at_the_time_bound(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "many").mkdir(parents=True)
    for i in range(3000):
        (repo / "many" / f"f{i}").touch()
    assert measure_tree(repo).entries == 3001
    with pytest.raises(UnsafeFile, match="longer than its time bound"):
        copy_for_build(repo, tmp_path / "build", ME, timeout_s=1e-6)
    with pytest.raises(UnsafeFile, match="longer than its time bound"):  # the copy's own deadline
        copy_tree(repo, tmp_path / "build2", deadline=time.monotonic() - 1)
    # within the bound it copies, and leaves out target/ next to a pom.xml as before
    (repo / "pom.xml").write_text("<project/>")
    (repo / "target" / "classes").mkdir(parents=True)
    assert copy_for_build(repo, tmp_path / "build3", ME, timeout_s=120) == []
    assert len(os.listdir(tmp_path / "build3" / "many")) == 3000
    assert not (tmp_path / "build3" / "target").exists()


def test_measure_refuses_depth_and_entries(tmp_path: Path) -> None:
    deep = tmp_path / "repo"
    for _ in range(6):
        deep = deep / "d"
    deep.mkdir(parents=True)
    with pytest.raises(UnsafeFile, match="deeper than 5 levels"):
        measure_tree(tmp_path / "repo", max_depth=5)
    with pytest.raises(UnsafeFile, match="more than 3 files and directories"):
        measure_tree(tmp_path / "repo", max_entries=3)
