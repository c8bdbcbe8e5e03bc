"""Remove a tree a sandboxed process wrote (a workspace, a build directory), whatever its shape.

``shutil.rmtree`` recurses once per directory level (Python 3.11): 1,200 nested directories raise
``RecursionError`` and the tree stays. :func:`remove_tree` is iterative, fd-relative and needs
O(1) open fds; non-UTF-8 names, FIFOs, sockets and device nodes are unlinked like any file.

Source: ``openat(2)``, ``unlinkat(2)`` (``AT_REMOVEDIR``).
"""

from __future__ import annotations

import os
import stat

from .files import _DIR_FLAGS


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Remove ``path`` and everything below it; a symlink is removed itself, never followed.

    Iterative and fd-relative (any depth, any path length, O(1) open fds): it walks down with
    ``openat(name)`` and back up with ``openat("..")``, checking that ``..`` is the directory it
    came from (same device and inode; a tree moved under it raises instead of leading out).
    Directories without read/write/search permission for us are made 0700 first. Cost: one
    visit per entry. The tree's writers must have ended. Missing ``path`` is fine.

    Raises:
        OSError: an entry could not be removed, or the tree moved during the removal.
    """
    parent, name = os.path.split(os.path.abspath(os.fspath(path)))
    pfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    fd = -1
    try:
        try:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(name, dir_fd=pfd)
            return
        fd = _open_for_removal(pfd, name)
        frames: list[tuple[str, tuple[int, int], list[str] | None]] = [(name, _ident(fd), None)]
        while frames:
            here, ident, subdirs = frames[-1]
            if subdirs is None:
                subdirs = _clear_files(fd)
                frames[-1] = (here, ident, subdirs)
            if subdirs:
                sub = subdirs.pop()
                try:
                    nfd = _open_for_removal(fd, sub)
                except FileNotFoundError:
                    continue
                except NotADirectoryError:  # changed type: a file now
                    os.unlink(sub, dir_fd=fd)
                    continue
                os.close(fd)
                fd = nfd
                frames.append((sub, _ident(fd), None))
                continue
            frames.pop()
            if frames:
                up = os.open("..", _DIR_FLAGS, dir_fd=fd)
                if _ident(up) != frames[-1][1]:
                    os.close(up)
                    raise OSError(f"{path}: the tree moved while it was removed; stopped")
            else:
                up = pfd
            os.close(fd)
            fd = up
            try:
                os.rmdir(here, dir_fd=fd)
            except PermissionError:
                os.fchmod(fd, 0o700)
                os.rmdir(here, dir_fd=fd)
            if fd == pfd:
                fd = -1
    finally:
        if fd >= 0 and fd != pfd:
            os.close(fd)
        os.close(pfd)


def _ident(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _open_for_removal(dfd: int, name: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dfd)
    except PermissionError:
        os.chmod(name, 0o700, dir_fd=dfd)  # a directory (lstat'ed), its writers ended
        return os.open(name, _DIR_FLAGS, dir_fd=dfd)


def _clear_files(fd: int) -> list[str]:
    """Unlink every non-directory in directory fd ``fd``; returns the names of its subdirectories."""
    fixed = False
    subdirs: list[str] = []
    with os.scandir(fd) as it:
        entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
    for name, is_dir in entries:
        if is_dir:
            subdirs.append(name)
            continue
        try:
            os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            pass
        except PermissionError:
            if fixed:
                raise
            os.fchmod(fd, 0o700)
            fixed = True
            os.unlink(name, dir_fd=fd)
        except IsADirectoryError:
            subdirs.append(name)
    return subdirs
