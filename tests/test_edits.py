"""The audit of what a rollout changed (``edits.edited_files``): real trees on disk, hostile entries."""

from __future__ import annotations

import os
import shutil
import threading

from strands_art.envs.migrationbench.run.edits import edited_files
from strands_art.envs.sandbox.removal import remove_tree


def make_repo(root):
    (root / "src/main/java/a").mkdir(parents=True)
    (root / "pom.xml").write_text("<project><source>1.8</source></project>\n")
    (root / "src/main/java/a/A.java").write_text("class A {}\n")
    (root / "README.md").write_text("hello\n")
    (root / ".git").mkdir()
    (root / ".git/HEAD").write_text("ref: refs/heads/main\n")
    return root


def test_lists_modified_added_deleted_and_skips_git_and_build_outputs(tmp_path):
    orig = make_repo(tmp_path / "orig")
    ws = tmp_path / "ws"
    shutil.copytree(orig, ws, symlinks=True)
    assert edited_files(orig, ws) == {"modified": [], "added": [], "deleted": [], "truncated": False}
    (ws / "pom.xml").write_text("<project><source>17</source></project>\n")
    (ws / "src/main/java/a/B.java").write_text("class B {}\n")
    (ws / "README.md").unlink()
    (ws / ".git/HEAD").write_text("forged\n")  # not audited: the agent may rewrite .git
    (ws / "target/classes").mkdir(parents=True)  # Maven output next to pom.xml
    (ws / "target/classes/A.class").write_bytes(b"\xca\xfe")
    (ws / "src/main/java/a/A.java").write_text("class A {}\n")  # rewritten, same bytes
    assert edited_files(orig, ws) == {
        "modified": ["pom.xml"],
        "added": ["src/main/java/a/B.java"],
        "deleted": ["README.md"],
        "truncated": False,
    }


def test_hostile_entries_are_compared_without_following_or_opening_them(tmp_path):
    orig = make_repo(tmp_path / "orig")
    ws = tmp_path / "ws"
    shutil.copytree(orig, ws, symlinks=True)
    (ws / "pom.xml").unlink()
    os.mkfifo(ws / "pom.xml")  # opening it would block the audit forever
    (ws / "README.md").unlink()
    (ws / "README.md").symlink_to("/etc/passwd")  # same bytes behind a link would not make it equal
    (ws / "src/main/java/a").rename(ws / "src/main/java/b")
    (ws / "src/main/java/a").symlink_to("b")  # a directory link is an entry, never walked into
    result: dict = {}
    t = threading.Thread(target=lambda: result.update(edited_files(orig, ws)), daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "the audit blocked on a FIFO"
    assert result == {
        "modified": ["README.md", "pom.xml"],
        "added": ["src/main/java/a", "src/main/java/b/A.java"],
        "deleted": ["src/main/java/a/A.java"],
        "truncated": False,
    }


def test_a_huge_tree_is_cut_and_says_so(tmp_path):
    orig = make_repo(tmp_path / "orig")
    ws = tmp_path / "ws"
    shutil.copytree(orig, ws, symlinks=True)
    for i in range(50):
        (ws / f"junk{i:02d}").write_text("x")
    out = edited_files(orig, ws, max_entries=20)
    assert out["truncated"] is True
    assert out["deleted"] == []  # the workspace's walk was cut: nothing is claimed deleted
    assert len(out["added"]) <= 20 and all(p.startswith("junk") for p in out["added"])


def test_a_tree_deeper_than_the_limit_is_cut_without_recursion(tmp_path):
    orig = make_repo(tmp_path / "orig")
    ws = tmp_path / "ws"
    shutil.copytree(orig, ws, symlinks=True)
    fd = os.open(ws, os.O_RDONLY)
    for _ in range(1200):  # os.walk recursed once per level: RecursionError at ~1000
        os.mkdir("x", dir_fd=fd)
        fd, old = os.open("x", os.O_RDONLY, dir_fd=fd), fd
        os.close(old)
    os.close(os.open("Deep.java", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
    os.close(fd)
    (ws / "pom.xml").write_text("<project><source>17</source></project>\n")
    out = edited_files(orig, ws, max_depth=5)
    assert out == {"modified": ["pom.xml"], "added": [], "deleted": [], "truncated": True}
    # within the limit, the same tree is walked to the bottom
    shallow = ws / "y/y"
    shallow.mkdir(parents=True)
    (shallow / "S.java").write_text("s")
    remove_tree(ws / "x")  # shutil.rmtree recurses too
    assert edited_files(orig, ws, max_depth=5)["added"] == ["y/y/S.java"]


def test_a_path_longer_than_path_max_cuts_the_walk_instead_of_failing(tmp_path):
    orig = make_repo(tmp_path / "orig")
    ws = tmp_path / "ws"
    shutil.copytree(orig, ws, symlinks=True)
    fd = os.open(ws, os.O_RDONLY)
    for _ in range(20):  # 20 x 255 characters: past PATH_MAX (4096) well before the depth limit
        os.mkdir("n" * 255, dir_fd=fd)
        fd, old = os.open("n" * 255, os.O_RDONLY, dir_fd=fd), fd
        os.close(old)
    os.close(os.open("Deep.java", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
    os.close(fd)
    (ws / "README.md").unlink()
    try:
        out = edited_files(orig, ws)
    finally:
        remove_tree(ws / ("n" * 255))
    assert out == {"modified": [], "added": [], "deleted": [], "truncated": True}
