"""Reading a run directory without following anything out of it: the viewer's file access.

A run directory holds hostile data: an agent's live workspace sits under ``workspaces/`` while
``strands-art migrate`` runs, and a run directory copied from elsewhere may hold anything. A
check of a path followed by an ``open`` of it is a race (swap a directory for a symlink between
the two and the open reads a host file), so :class:`RunFiles` never opens by path:

- the run directory is opened once (:data:`os.O_DIRECTORY`) and every file is reached from that
  descriptor one component at a time (``openat``): each directory with ``O_DIRECTORY |
  O_NOFOLLOW``, the file with ``O_NOFOLLOW | O_NONBLOCK`` — a symlink at *any* component is
  refused (:class:`Refused`), whatever it points to, and never followed, so swapping one in
  between a check and a read changes nothing;
- ``..``, absolute paths and empty paths are refused before anything is opened;
- what was opened must be a regular file (``fstat`` of the open descriptor): a FIFO, a socket or
  a device is :class:`NotRegular`, and ``O_NONBLOCK`` makes opening a FIFO return at once
  instead of waiting for a writer (a FIFO in place of ``config.json`` never blocks);
- reads are bounded (:class:`TooLarge`), and :meth:`RunFiles.cached` keeps a parsed value per
  file until the file changes (device, inode, size, mtime, ctime), so a 300 MB ``config.json``
  is refused once, not parsed on every request.

The same guarantees as Linux ``openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)``, built from
``openat`` (Python has no ``openat2``); see openat(2), "O_NOFOLLOW" and "O_NONBLOCK".
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

T = TypeVar("T")

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class Refused(PermissionError):
    """The path may lead outside the run directory: ``..``, absolute, or a symlink at some
    component (the viewer answers 403)."""


class NotRegular(FileNotFoundError):
    """The path names no regular file: missing, a directory, a FIFO, a socket, a device (404)."""


class TooLarge(ValueError):
    """The file is larger than the caller's limit (``size`` and ``limit`` in bytes)."""

    def __init__(self, rel: str, size: int, limit: int) -> None:
        super().__init__(f"{rel} is {size} bytes, over the limit of {limit} bytes")
        self.size, self.limit = size, limit


def split_rel(rel: str) -> list[str]:
    """The components of a path relative to the run directory (``.`` and empty ones dropped).

    Raises:
        Refused: ``rel`` is empty, absolute or holds ``..``.
        ValueError: ``rel`` holds a NUL byte or is longer than PATH_MAX.
    """
    if "\x00" in rel or len(os.fsencode(rel)) >= 4096:  # PATH_MAX counts the NUL
        raise ValueError(f"not a usable path: {rel[:200]!r}")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or rel.startswith("/") or ".." in parts:
        raise Refused(errno.EACCES, "outside the run directory", rel[:200])
    return parts


class RunFiles:
    """One run directory, opened once; files under it are read through its descriptor only.

    Args:
        root: the run directory (resolved once, here: a symlink given by the user is followed
            this one time).

    Raises:
        NotADirectoryError, FileNotFoundError: ``root`` is not a directory.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        self._fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._cache: dict[tuple[str, str], tuple[tuple[int, ...], Any]] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the directory descriptor (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass

    # ------------------------------------------------------------------ walking
    def _parent(self, rel: str) -> tuple[int, str]:
        """A new descriptor of the directory holding ``rel``'s last component, and that name.

        Raises:
            Refused: a component is a symlink (or ``rel`` is refused by :func:`split_rel`).
            NotRegular: a component is missing or not a directory.
        """
        parts = split_rel(rel)
        fd = os.dup(self._fd)
        try:
            for name in parts[:-1]:
                try:
                    nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    raise self._why(fd, name, rel, exc) from None
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd, parts[-1]

    @staticmethod
    def _why(dir_fd: int, name: str, rel: str, exc: OSError) -> OSError:
        """The error for a component that could not be opened: :class:`Refused` for a symlink,
        :class:`NotRegular` for a missing name or a non-directory, else ``exc``."""
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT, errno.ENXIO):  # ENXIO: a socket
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                return NotRegular(errno.ENOENT, "no such file in the run directory", rel[:200])
            if stat.S_ISLNK(st.st_mode):
                return Refused(
                    errno.ELOOP,
                    f"{name!r} is a symbolic link: not followed, it may lead outside the run directory",
                    rel[:200],
                )
            return NotRegular(errno.ENOENT, f"{name!r} is {_kind(st.st_mode)}, not a directory", rel[:200])
        return exc

    def open(self, rel: str) -> IO[bytes]:
        """The regular file ``rel`` (relative to the run directory), open for binary reading.

        Raises:
            Refused: ``..``, absolute, or a symlink at any component.
            NotRegular: missing, a directory, a FIFO, a socket or a device.
            OSError: anything else the kernel says (no permission, a name too long).
            ValueError: a NUL byte in ``rel``.
        """
        dir_fd, name = self._parent(rel)
        try:
            try:
                fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
            except OSError as exc:
                raise self._why(dir_fd, name, rel, exc) from None
        finally:
            os.close(dir_fd)
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise NotRegular(errno.ENOENT, f"{_kind(mode)}, not a regular file", rel[:200])
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise

    def stat(self, rel: str) -> os.stat_result | None:
        """``lstat`` of ``rel`` reached without following symlinks; None when it (or a directory
        on the way) is missing, is not a directory, or is a symlink on the way.

        Raises:
            Refused: ``rel`` is empty, absolute or holds ``..``.
        """
        try:
            dir_fd, name = self._parent(rel)
        except (NotRegular, Refused) as exc:
            if isinstance(exc, Refused) and exc.errno == errno.EACCES:
                raise
            return None
        try:
            return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return None
        finally:
            os.close(dir_fd)

    def size(self, rel: str) -> int:
        """Size in bytes of the regular file ``rel``; -1 when there is none (missing, a symlink,
        a FIFO, a directory)."""
        st = self.stat(rel)
        return st.st_size if st is not None and stat.S_ISREG(st.st_mode) else -1

    def is_file(self, rel: str) -> bool:
        """Whether ``rel`` is a regular file reached without following a symlink."""
        return self.size(rel) >= 0

    def exists(self, rel: str) -> bool:
        """Whether ``rel`` names anything (a symlink itself counts)."""
        return self.stat(rel) is not None

    def listdir(self, rel: str) -> list[str]:
        """The names in the directory ``rel`` (reached as :meth:`open` reaches a file); [] when
        it is missing, not a directory or a symlink."""
        try:
            dir_fd, name = self._parent(rel)
        except (NotRegular, Refused):
            return []
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except OSError:
            return []
        finally:
            os.close(dir_fd)
        try:
            return os.listdir(fd)
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ reading
    def read(self, rel: str, limit: int) -> bytes:
        """All of ``rel``'s bytes.

        Raises:
            TooLarge: the file holds more than ``limit`` bytes (nothing is read).
            and what :meth:`open` raises.
        """
        with self.open(rel) as f:
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                raise TooLarge(rel, size, limit)
            data = f.read(limit + 1)
        if len(data) > limit:  # grew since the fstat
            raise TooLarge(rel, len(data), limit)
        return data

    def cached(self, rel: str, limit: int, parse: Callable[[bytes], T], key: str = "") -> T:
        """``parse(bytes of rel)``, computed again only when the file changed (its device, inode,
        size, mtime or ctime); a :class:`TooLarge` answer is remembered the same way, so a huge
        file costs one ``fstat`` per call, never a read. ``key`` tells apart two parsers of one
        file.

        Raises:
            TooLarge, and what :meth:`open` and ``parse`` raise (not cached).
        """
        with self.open(rel) as f:
            st = os.fstat(f.fileno())
            ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, limit)
            with self._lock:
                hit = self._cache.get((rel, key))
            if hit is not None and hit[0] == ident:
                value = hit[1]
            else:
                if st.st_size > limit:
                    value = TooLarge(rel, st.st_size, limit)
                else:
                    data = f.read(limit + 1)
                    value = TooLarge(rel, len(data), limit) if len(data) > limit else parse(data)
                with self._lock:
                    self._cache[(rel, key)] = (ident, value)
        if isinstance(value, TooLarge):
            raise value
        return value


def _kind(mode: int) -> str:
    """What a file of ``mode`` is, in words ("a FIFO", "a directory"...)."""
    for test, words in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                        (stat.S_ISREG, "a regular file"), (stat.S_ISLNK, "a symbolic link")):  # fmt: skip
        if test(mode):
            return words
    return "not a regular file"
