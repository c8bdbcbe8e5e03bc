"""Host-side file access to a tree a sandboxed process can write (a workspace, a build dir).

Everything that process wrote is hostile: a path component may be swapped for a symlink between
a check and an open, a "file" may be a FIFO (an ``open`` that never returns), a socket, a
device node, or a hard link to a file elsewhere. So every access here:

- walks from an open directory fd of the tree's root, one component at a time, with
  ``O_NOFOLLOW`` (a symlinked component fails with ``ELOOP``/``ENOTDIR``: no race can lead out);
- opens the last component with ``O_NOFOLLOW | O_NONBLOCK`` and checks with ``fstat`` on the open
  file that it is a regular file with one link, before reading or writing a byte;
- reads at most a bound;
- creates files and directories owned by the tree's :class:`~.policy.Identity`.

Source: ``openat(2)`` (``O_NOFOLLOW``, ``O_NONBLOCK``), ``fstat(2)``.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath

from .policy import Identity

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class UnsafeFile(OSError):
    """A path that is not a plain regular file inside the tree (FIFO, socket, device, hard link,
    symlinked component, too large); the message is written for the model to read."""


def _parts(rel: str | os.PathLike[str]) -> list[str]:
    p = PurePosixPath(os.fspath(rel))
    if p.is_absolute():
        raise UnsafeFile(f"{p}: expected a path relative to the tree root")
    parts = [x for x in p.parts if x != "."]
    if any(x == ".." for x in parts):
        raise UnsafeFile(f"{p}: '..' is not allowed")
    return parts


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "not a regular file"


@contextlib.contextmanager
def open_dir(root: str | os.PathLike[str], rel: str | os.PathLike[str] = ".") -> Iterator[int]:
    """An fd of directory ``root/rel``, reached without following any symlink below ``root``.

    Raises:
        UnsafeFile: a component is a symlink or not a directory.
        FileNotFoundError: a component is missing.
    """
    fd = os.open(os.fspath(root), _DIR_FLAGS)
    try:
        for name in _parts(rel):
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (40, 20):  # ELOOP, ENOTDIR
                    raise UnsafeFile(f"{rel}: {name} is a symbolic link or not a directory") from exc
                raise
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def lstat(root: str | os.PathLike[str], rel: str | os.PathLike[str]) -> os.stat_result | None:
    """``lstat`` of ``root/rel`` (the parent reached without symlinks); None when missing."""
    parts = _parts(rel)
    if not parts:
        return os.stat(os.fspath(root), follow_symlinks=False)
    try:
        with open_dir(root, PurePosixPath(*parts[:-1])) as dfd:
            return os.stat(parts[-1], dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _check_regular(fd: int, rel: object) -> os.stat_result:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFile(f"{rel} is {_kind(st.st_mode)}; only regular files are read or written")
    if st.st_nlink > 1:
        raise UnsafeFile(f"{rel} has {st.st_nlink} hard links; files with more than one link are refused")
    return st


def _open_last(
    root: str | os.PathLike[str], rel: str | os.PathLike[str], flags: int, mode: int = 0o644
) -> int:
    parts = _parts(rel)
    if not parts:
        raise UnsafeFile(f"{rel}: not a file")
    with open_dir(root, PurePosixPath(*parts[:-1])) as dfd:
        try:
            return os.open(parts[-1], flags | _FILE_FLAGS, mode, dir_fd=dfd)
        except OSError as exc:
            if exc.errno == 40:  # ELOOP: the last component is a symlink
                raise UnsafeFile(f"{rel} is a symbolic link; it is not followed") from exc
            if exc.errno == 6:  # ENXIO: a FIFO without a reader, or a socket
                raise UnsafeFile(f"{rel} is a FIFO or socket; only regular files are written") from exc
            raise


def read_bytes(
    root: str | os.PathLike[str], rel: str | os.PathLike[str], *, max_bytes: int, prefix: bool = False
) -> bytes:
    """Read the regular file ``root/rel``.

    Args:
        max_bytes: the bound; a larger file raises, unless ``prefix`` (then its first bytes).

    Raises:
        UnsafeFile: not a regular single-link file, a symlinked component, or too large.
        FileNotFoundError: missing.
    """
    fd = _open_last(root, rel, os.O_RDONLY)
    try:
        st = _check_regular(fd, rel)
        if st.st_size > max_bytes and not prefix:
            raise UnsafeFile(f"{rel} is {st.st_size} bytes; the limit is {max_bytes}")
        chunks, left = [], max_bytes
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _mkdirs(dfd: int, parts: list[str], identity: Identity | None) -> int:
    """Walk/create ``parts`` under directory fd ``dfd``; returns a new fd of the last one."""
    fd = os.dup(dfd)
    for name in parts:
        try:
            os.mkdir(name, 0o755, dir_fd=fd)
            if identity is not None and identity.drop:
                os.chown(name, identity.uid, identity.gid, dir_fd=fd, follow_symlinks=False)
        except FileExistsError:
            pass
        try:
            nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (40, 20):
                raise UnsafeFile(f"{name} is a symbolic link or not a directory") from exc
            raise
        os.close(fd)
        fd = nxt
    return fd


def write_bytes(
    root: str | os.PathLike[str],
    rel: str | os.PathLike[str],
    data: bytes,
    *,
    identity: Identity | None = None,
    make_parents: bool = True,
) -> bool:
    """Write ``data`` to ``root/rel`` (replacing the content of an existing regular file).

    A new file (and new parent directories) belong to ``identity``. Returns True when the file
    was created.

    Raises:
        UnsafeFile: the target exists and is not a regular single-link file, or a component is
            a symlink.
    """
    parts = _parts(rel)
    if not parts:
        raise UnsafeFile(f"{rel}: not a file")
    with open_dir(root) as rfd:
        dfd = _mkdirs(rfd, parts[:-1], identity) if make_parents else None
        if dfd is None:
            dfd = _walk_existing(rfd, parts[:-1])
        try:
            created = False
            try:
                fd = os.open(parts[-1], os.O_WRONLY | _FILE_FLAGS, dir_fd=dfd)
            except FileNotFoundError:
                fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | _FILE_FLAGS, 0o644, dir_fd=dfd)
                created = True
            except OSError as exc:
                if exc.errno == 40:
                    raise UnsafeFile(f"{rel} is a symbolic link; it is not followed") from exc
                if exc.errno == 6:
                    raise UnsafeFile(f"{rel} is a FIFO or socket; only regular files are written") from exc
                raise
            try:
                _check_regular(fd, rel)
                if created and identity is not None and identity.drop:
                    os.fchown(fd, identity.uid, identity.gid)
                os.ftruncate(fd, 0)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            return created
        finally:
            os.close(dfd)


def _walk_existing(rfd: int, parts: list[str]) -> int:
    fd = os.dup(rfd)
    for name in parts:
        try:
            nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
        finally:
            os.close(fd)
        fd = nxt
    return fd


def unlink(root: str | os.PathLike[str], rel: str | os.PathLike[str]) -> None:
    """Remove the file ``root/rel`` (a symlink itself, never its target); missing is fine."""
    parts = _parts(rel)
    with open_dir(root, PurePosixPath(*parts[:-1])) as dfd, contextlib.suppress(FileNotFoundError):
        os.unlink(parts[-1], dir_fd=dfd)


#: Directory levels :func:`copy_tree` follows below its source (a real project needs a few dozen;
#: each level holds two open fds while it is copied).
MAX_COPY_DEPTH = 128
#: Entries (files, directories, links, others) :func:`copy_tree` visits before it refuses the tree.
MAX_COPY_ENTRIES = 500_000


def display_path(rel: str) -> str:
    """``rel`` as valid text for messages and JSON: bytes of a non-UTF-8 file name (read with
    ``surrogateescape``) become ``\\xNN`` escapes."""
    return os.fsencode(rel).decode("utf-8", errors="backslashreplace")


def copy_tree(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    identity: Identity | None = None,
    skip_dir: Callable[[str, list[str]], set[str]] | None = None,
    max_total_bytes: int = 2 << 30,
    max_depth: int = MAX_COPY_DEPTH,
    max_entries: int = MAX_COPY_ENTRIES,
    deadline: float | None = None,
) -> list[str]:
    """Copy ``src`` into the new directory ``dst``: directories, regular files, and relative
    symlinks (as links) that resolve inside ``src``. FIFOs, sockets, devices, absolute symlinks
    and symlinks leading out of ``src`` are left out; their relative paths are returned (as
    :func:`display_path` text).

    Iterative (no recursion limit) and fd-relative on both sides (no path length limit): a
    directory is reached from its parent's open fd, so a tree of any shape costs at most
    ``max_entries`` visits, ``max_total_bytes`` copied and ``2 * max_depth`` open fds.
    ``src`` must not change while it is copied (its writers have ended).

    Args:
        identity: owner of everything created (None: the caller).
        skip_dir: ``skip_dir(dirpath_rel, names) -> set`` of names to leave out of a directory.
        max_total_bytes: a tree whose regular files hold more bytes (apparent size: a sparse
            file counts whole) raises :class:`UnsafeFile`.
        max_depth / max_entries: a deeper or larger tree raises :class:`UnsafeFile`.
        deadline: a ``time.monotonic()`` value; a copy still running then raises
            :class:`UnsafeFile` (checked before each entry and each MiB copied).

    Raises:
        UnsafeFile: the tree is over one of the bounds.
        FileExistsError: ``dst`` exists.
    """
    skipped: list[str] = []
    total = listed = 0  # bytes of regular files; entries listed (each visited at most once)
    src_real = Path(os.path.realpath(src))
    chown = identity is not None and identity.drop
    os.mkdir(dst, 0o700)
    if chown:
        os.lchown(dst, identity.uid, identity.gid)

    def listing(fd: int, rel: str) -> Iterator[str]:
        nonlocal listed
        names: list[str] = []
        with os.scandir(fd) as it:
            for entry in it:  # a huge directory is refused before it is held whole
                names.append(entry.name)
                listed += 1
                if listed > max_entries:
                    raise UnsafeFile(f"{src}: more than {max_entries} files and directories")
        names.sort()
        drop = skip_dir(rel, names) if skip_dir is not None else set()
        return iter([n for n in names if n not in drop])

    # (source dir fd, copy dir fd, relative path, names left); a level is pushed before it is
    # listed, so that its fds are closed by the `finally` if listing raises
    stack: list[tuple[int, int, str, Iterator[str]]] = []
    try:
        with open_dir(src) as root_fd:
            sfd = os.dup(root_fd)
        stack.append((sfd, -1, "", iter(())))
        dfd = os.open(dst, _DIR_FLAGS)
        stack[-1] = (sfd, dfd, "", listing(sfd, ""))
        while stack:
            sfd, dfd, rel, names = stack[-1]
            name = next(names, None)
            if deadline is not None and time.monotonic() > deadline:
                raise UnsafeFile(f"{src}: copying it took longer than its time bound")
            if name is None:
                stack.pop()
                os.close(sfd)
                os.close(dfd)
                continue
            st = os.stat(name, dir_fd=sfd, follow_symlinks=False)
            child_rel = f"{rel}/{name}" if rel else name
            if stat.S_ISDIR(st.st_mode):
                if len(stack) > max_depth:
                    raise UnsafeFile(
                        f"{src}: directories nested deeper than {max_depth} levels "
                        f"({display_path(child_rel)[:200]}...)"
                    )
                os.mkdir(name, 0o755, dir_fd=dfd)
                if chown:
                    os.chown(name, identity.uid, identity.gid, dir_fd=dfd, follow_symlinks=False)
                csfd = os.open(name, _DIR_FLAGS, dir_fd=sfd)
                try:
                    cdfd = os.open(name, _DIR_FLAGS, dir_fd=dfd)
                except BaseException:
                    os.close(csfd)
                    raise
                stack.append((csfd, cdfd, child_rel, iter(())))
                stack[-1] = (csfd, cdfd, child_rel, listing(csfd, child_rel))
            elif stat.S_ISLNK(st.st_mode):
                link = os.readlink(name, dir_fd=sfd)
                try:
                    inside = not os.path.isabs(link) and is_under(
                        Path(os.path.realpath(src_real / child_rel)), src_real
                    )
                except OSError:  # a path too long to resolve
                    inside = False
                if not inside:
                    skipped.append(display_path(child_rel))
                    continue
                os.symlink(link, name, dir_fd=dfd)
                if chown:
                    os.chown(name, identity.uid, identity.gid, dir_fd=dfd, follow_symlinks=False)
            elif stat.S_ISREG(st.st_mode):
                total += st.st_size
                if total > max_total_bytes:
                    raise UnsafeFile(f"{src}: more than {max_total_bytes} bytes of files")
                if not _copy_file(sfd, dfd, name, st.st_mode & 0o755, identity if chown else None, deadline):
                    skipped.append(display_path(child_rel))
            else:
                skipped.append(display_path(child_rel))
    finally:
        for sfd, dfd, _, _ in stack:
            os.close(sfd)
            if dfd >= 0:
                os.close(dfd)
    return skipped


def _copy_file(
    sfd: int, dfd: int, name: str, mode: int, identity: Identity | None, deadline: float | None = None
) -> bool:
    """Copy the regular file ``name`` from directory fd ``sfd`` to ``dfd``; False if it is not one.
    Raises :class:`UnsafeFile` when ``deadline`` (``time.monotonic()``) passes while it copies."""
    ifd = os.open(name, os.O_RDONLY | _FILE_FLAGS, dir_fd=sfd)
    try:
        if not stat.S_ISREG(os.fstat(ifd).st_mode):
            return False
        ofd = os.open(
            name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd
        )
        try:
            if identity is not None:
                os.fchown(ofd, identity.uid, identity.gid)
            while chunk := os.read(ifd, 1 << 20):
                if deadline is not None and time.monotonic() > deadline:
                    raise UnsafeFile(f"copying {name!r} took longer than its time bound")
                view = memoryview(chunk)
                while view:
                    view = view[os.write(ofd, view) :]
        finally:
            os.close(ofd)
    finally:
        os.close(ifd)
    return True


def is_under(path: Path, root: Path) -> bool:
    """``path`` is ``root`` or lies below it (lexically)."""
    return path == root or path.is_relative_to(root)
