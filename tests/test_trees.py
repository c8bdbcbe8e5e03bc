"""Copy and removal of hostile trees (issue 22, item 2): any depth, non-UTF-8 names, FIFOs,
sockets, device nodes, sparse files; iterative, with bounded cost.

Trees are built with fd-relative calls (``mkdir``/``open`` with ``dir_fd``), as a process in the
sandbox builds them: 1,200 levels of 40-character names is a path of 49,000 bytes, far past
PATH_MAX, which only fd-relative code can walk.
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strands_art.envs.sandbox.files import UnsafeFile, copy_tree, display_path
from strands_art.envs.sandbox.removal import remove_tree

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
LEVEL = "d" * 40


def _deep(root: Path, levels: int, leaf: bytes = b"bottom") -> None:
    """``root/LEVEL/LEVEL/.../leaf.txt`` (``levels`` directories), built fd-relatively."""
    fd = os.open(root, DIR_FLAGS)
    try:
        for _ in range(levels):
            os.mkdir(LEVEL, dir_fd=fd)
            nxt = os.open(LEVEL, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
        out = os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, leaf)
        os.close(out)
    finally:
        os.close(fd)


def _read_deep(root: Path, levels: int) -> bytes:
    fd = os.open(root, DIR_FLAGS)
    try:
        for _ in range(levels):
            nxt = os.open(LEVEL, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
        leaf = os.open("leaf.txt", os.O_RDONLY, dir_fd=fd)
        data = os.read(leaf, 100)
        os.close(leaf)
        return data
    finally:
        os.close(fd)


def test_remove_tree_removes_1200_nested_directories(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    _deep(root, 1200)
    assert len(LEVEL) * 1200 > os.pathconf("/", "PC_PATH_MAX")  # beyond any path-based removal
    remove_tree(root)
    assert not root.exists() and list(tmp_path.iterdir()) == []


def test_copy_tree_refuses_1200_levels_and_copies_them_when_allowed(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "pom.xml").write_text("<project/>")
    _deep(src, 1200, leaf=b"deepest")
    with pytest.raises(UnsafeFile, match="nested deeper than 128 levels"):
        copy_tree(src, tmp_path / "refused")
    remove_tree(tmp_path / "refused")  # what was copied before the refusal goes too
    copy_tree(src, tmp_path / "dst", max_depth=1300)  # iterative: no recursion limit either
    assert _read_deep(tmp_path / "dst", 1200) == b"deepest"
    remove_tree(tmp_path / "dst")
    remove_tree(src)
    assert list(tmp_path.iterdir()) == []


def test_copy_bounds_files_and_sparse_bytes(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    with open(src / "sparse.bin", "wb") as f:
        f.truncate(3 << 30)  # 3 GiB apparent, no block written
    assert os.stat(src / "sparse.bin").st_blocks == 0
    with pytest.raises(UnsafeFile, match="more than 2147483648 bytes"):
        copy_tree(src, tmp_path / "big")
    (src / "sparse.bin").unlink()
    with open(src / "small-sparse.bin", "wb") as f:
        f.seek(1 << 20)
        f.write(b"end")
    for i in range(20):
        (src / f"f{i}").write_text(str(i))
    with pytest.raises(UnsafeFile, match="more than 10 files and directories"):
        copy_tree(src, tmp_path / "many", max_entries=10)
    copy_tree(src, tmp_path / "ok")
    data = (tmp_path / "ok" / "small-sparse.bin").read_bytes()
    assert len(data) == (1 << 20) + 3 and data.endswith(b"end") and data.count(0) == 1 << 20
    for d in ("big", "many", "ok", "src"):
        remove_tree(tmp_path / d)
    assert list(tmp_path.iterdir()) == []


def _special_files(root: Path) -> list[str]:
    """A FIFO, a socket and (as root) a device node, with non-UTF-8 names; returns the names."""
    names = [os.fsdecode(b"fifo-\xff"), os.fsdecode(b"sock-\xfe")]
    os.mkfifo(root / names[0])
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(os.fsencode(root / names[1]))
    try:
        os.mknod(root / os.fsdecode(b"null-\xfd"), stat.S_IFCHR | 0o600, os.makedev(1, 3))
        names.append(os.fsdecode(b"null-\xfd"))
    except PermissionError:
        pass  # not root: no device node
    return names


def test_non_utf8_names_fifos_sockets_devices(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / os.fsdecode(b"dir-\xc3\x28")).mkdir(parents=True)
    (src / os.fsdecode(b"dir-\xc3\x28") / os.fsdecode(b"\xff\xfe.java")).write_bytes(b"class A {}")
    special = _special_files(src)
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    os.symlink(outside, src / "link-out")
    skipped = copy_tree(src, tmp_path / "dst")
    assert sorted(skipped) == sorted([display_path(n) for n in special] + ["link-out"])
    assert all(s.encode("utf-8") for s in skipped)  # valid text: JSON- and store-safe
    assert "fifo-\\xff" in skipped
    copied = tmp_path / "dst" / os.fsdecode(b"dir-\xc3\x28") / os.fsdecode(b"\xff\xfe.java")
    assert copied.read_bytes() == b"class A {}"
    assert sorted(os.listdir(tmp_path / "dst")) == [os.fsdecode(b"dir-\xc3\x28")]
    # removal: every kind of entry goes, a symlink's target stays
    os.symlink(outside, src / "link-again")
    (src / "locked").mkdir()
    (src / "locked" / "f").write_text("x")
    os.chmod(src / "locked", 0)
    remove_tree(src)
    remove_tree(tmp_path / "dst")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside.txt"]
    assert outside.read_text() == "keep me"


def test_remove_tree_of_a_file_a_link_and_nothing(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep").write_text("k")
    os.symlink(target, tmp_path / "link")
    remove_tree(tmp_path / "link")  # the link, never what it points to
    assert not (tmp_path / "link").is_symlink() and (target / "keep").read_text() == "k"
    remove_tree(tmp_path / "missing")
    remove_tree(target / "keep")
    assert list(target.iterdir()) == []


_NAME = st.binary(min_size=1, max_size=6).filter(
    lambda b: b"/" not in b and b"\x00" not in b and b not in (b".", b"..")
)
_TREE = st.recursive(
    st.one_of(st.binary(max_size=40), st.just("fifo")),
    lambda children: st.dictionaries(_NAME, children, max_size=4),
    max_leaves=12,
)


def _build(root: Path, tree: dict) -> None:
    for name, node in tree.items():
        path = os.path.join(os.fsencode(root), name)
        if isinstance(node, dict):
            os.mkdir(path)
            _build(Path(os.fsdecode(path)), node)
        elif node == "fifo":
            os.mkfifo(path)
        else:
            with open(path, "wb") as f:
                f.write(node)


def _expected(tree: dict) -> dict:
    return {n: _expected(v) if isinstance(v, dict) else v for n, v in tree.items() if v != "fifo"}


def _fifos(tree: dict) -> int:
    return sum(_fifos(v) if isinstance(v, dict) else v == "fifo" for v in tree.values())


def _read(root: bytes) -> dict:
    out = {}
    for name in os.listdir(root):
        path = os.path.join(root, name)
        out[name] = _read(path) if os.path.isdir(path) else open(path, "rb").read()
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=st.dictionaries(_NAME, _TREE, max_size=5))
def test_copy_then_remove_any_tree(tmp_path_factory: pytest.TempPathFactory, tree: dict) -> None:
    """Property: every directory and regular file arrives byte for byte under its (byte) name,
    FIFOs are left out, and removing both trees leaves their parent empty."""
    base = tmp_path_factory.mktemp("tree")
    src, dst = base / "src", base / "dst"
    src.mkdir()
    _build(src, tree)
    skipped = copy_tree(src, dst)
    assert _read(os.fsencode(dst)) == _expected(tree)
    assert len(skipped) == _fifos(tree)
    remove_tree(src)
    remove_tree(dst)
    assert list(base.iterdir()) == []
