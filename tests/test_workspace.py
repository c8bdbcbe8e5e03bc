"""Workspace copy and path confinement (strands_art/envs/migrationbench/workspace.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from strands_art.envs.migrationbench.workspace import PathOutsideWorkspace, Workspace


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    repo = tmp_path / "task" / "repo"
    (repo / "src" / "main" / "java").mkdir(parents=True)
    (repo / "pom.xml").write_text("<project/>\n")
    (repo / "src" / "main" / "java" / "App.java").write_text("class App {}\n")
    return tmp_path / "task"


@pytest.fixture
def ws(task_dir: Path):
    w = Workspace.for_task(task_dir)
    yield w
    w.cleanup()


def test_for_task_copies_repo_into_fresh_dir(task_dir: Path, ws: Workspace) -> None:
    assert ws.root.name == "repo"
    assert ws.root != (task_dir / "repo").resolve()
    assert (ws.root / "pom.xml").read_text() == "<project/>\n"
    (ws.root / "pom.xml").write_text("changed")
    assert (task_dir / "repo" / "pom.xml").read_text() == "<project/>\n"  # the task stays pristine


def test_two_workspaces_are_independent(task_dir: Path) -> None:
    with Workspace.for_task(task_dir) as a, Workspace.for_task(task_dir) as b:
        assert a.root != b.root
        (a.root / "pom.xml").write_text("a")
        assert (b.root / "pom.xml").read_text() == "<project/>\n"


def test_copy_into_given_dir_and_cleanup(task_dir: Path, tmp_path: Path) -> None:
    dest = tmp_path / "rollout-7"
    w = Workspace.for_task(task_dir, dest)
    assert w.root == dest.resolve()
    aux = w.aux_dir
    assert aux.is_dir() and not w.contains(aux)
    w.cleanup()
    assert not dest.exists() and not aux.exists()
    w.cleanup()  # idempotent


def test_copy_refuses_existing_dest_and_missing_repo(task_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "exists").mkdir()
    with pytest.raises(FileExistsError):
        Workspace.for_task(task_dir, tmp_path / "exists")
    with pytest.raises(FileNotFoundError, match="no repo/"):
        Workspace.for_task(tmp_path / "nothing-here")


def test_attached_workspace_is_not_deleted(tmp_path: Path) -> None:
    w = Workspace(tmp_path)
    w.cleanup()
    assert tmp_path.is_dir()


def test_relative_and_absolute_inside_resolve(ws: Workspace) -> None:
    assert ws.resolve("pom.xml") == ws.root / "pom.xml"
    assert ws.resolve(".") == ws.root
    assert ws.resolve(str(ws.root / "src/main/java/App.java")) == ws.root / "src/main/java/App.java"
    assert ws.resolve("src/../pom.xml") == ws.root / "pom.xml"
    assert ws.resolve("new/dir/File.java") == ws.root / "new/dir/File.java"  # not existing yet: fine


@pytest.mark.parametrize("bad", ["../../etc/passwd", "..", "/etc/passwd", "src/../../x", "/", "/tmp"])
def test_escapes_are_refused(ws: Workspace, bad: str) -> None:
    with pytest.raises(PathOutsideWorkspace, match="outside the workspace") as err:
        ws.resolve(bad)
    assert str(ws.root) in str(err.value)  # the model is told where it may work


def test_sibling_with_common_prefix_is_outside(ws: Workspace) -> None:
    sibling = Path(str(ws.root) + "-evil")
    sibling.mkdir()
    try:
        with pytest.raises(PathOutsideWorkspace):
            ws.resolve(str(sibling / "x"))
    finally:
        sibling.rmdir()


def test_symlinked_file_pointing_outside_is_refused(ws: Workspace) -> None:
    os.symlink("/etc/passwd", ws.root / "passwd")
    with pytest.raises(PathOutsideWorkspace, match="symbolic link") as err:
        ws.resolve("passwd")
    assert "/etc/passwd" in str(err.value)


def test_symlinked_dir_pointing_outside_is_refused(ws: Workspace, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    os.symlink(outside, ws.root / "linkdir")
    for p in ("linkdir/secret.txt", "linkdir/not-yet.txt", "linkdir", str(ws.root / "linkdir/secret.txt")):
        with pytest.raises(PathOutsideWorkspace):
            ws.resolve(p)


def test_symlink_inside_workspace_is_allowed(ws: Workspace) -> None:
    os.symlink("src/main/java", ws.root / "j")
    assert ws.resolve("j/App.java") == ws.root / "src/main/java/App.java"


def test_copy_keeps_symlinks_as_links(tmp_path: Path) -> None:
    repo = tmp_path / "t" / "repo"
    repo.mkdir(parents=True)
    os.symlink("/etc/passwd", repo / "pw")
    with Workspace.for_task(tmp_path / "t") as w:
        assert (w.root / "pw").is_symlink()  # not followed into a copy of /etc/passwd
        with pytest.raises(PathOutsideWorkspace):
            w.resolve("pw")


@pytest.mark.parametrize("bad", ["", "   ", "a\x00b"])
def test_empty_and_nul_paths_are_refused(ws: Workspace, bad: str) -> None:
    with pytest.raises(PathOutsideWorkspace):
        ws.resolve(bad)


def test_copy_leaves_maven_build_outputs_behind(tmp_path):
    src = tmp_path / "src"
    (src / "target" / "classes").mkdir(parents=True)
    (src / "pom.xml").write_text("<project/>")
    (src / "target" / "classes" / "A.class").write_bytes(b"\xca\xfe\xba\xbe")
    (src / "docs" / "target").mkdir(parents=True)  # not next to a pom.xml: kept
    ws = Workspace.copy_of(src, tmp_path / "ws")
    assert (ws.root / "pom.xml").exists() and not (ws.root / "target").exists()
    assert (ws.root / "docs" / "target").is_dir()


def test_base_dir_below_an_untraversable_dir_links_to_the_temp_dir(task_dir: Path, tmp_path: Path) -> None:
    from strands_art.envs.migrationbench.workspace import remove_base_if_empty

    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    base = closed / "run" / "workspaces"
    with Workspace.for_task(task_dir, base_dir=base) as w:
        assert w.root.parent.parent == base.resolve()
        if os.geteuid() == 0:  # the sandbox uid could not walk through `closed`: a link out of it
            assert base.is_symlink() and not base.resolve().is_relative_to(closed)
            assert oct(base.resolve().stat().st_mode & 0o777) == "0o711"
            assert w.root.parent.stat().st_uid == w.identity.uid and w.identity.uid != 0
        remove_base_if_empty(base)
        assert base.exists()  # a workspace is still in it
    target = base.resolve()
    remove_base_if_empty(base)
    assert not base.exists() and not os.path.lexists(base) and not target.exists()
