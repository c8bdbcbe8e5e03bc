"""A tree's content digest: what the evaluation cache keys its verdicts on and what the agent's
Maven memo checks before it answers a repeated build (one definition for both).

Computed by the host, from the tree itself: never from anything written about the tree.
"""

from __future__ import annotations

import hashlib
import os
import stat


class TreeTooLarge(OSError):
    """The tree holds more file bytes or entries than the digest's ``max_bytes`` / ``max_entries`` allow."""


def tree_digest(
    root: str | os.PathLike[str], *, max_bytes: int | None = None, max_entries: int | None = None
) -> str:
    """SHA-256 (hex) of the tree under ``root``: every entry's relative path, its type
    (directory, regular file, symlink, other), its permission bits, a file's content and a
    link's target, in sorted order, symlinks never followed. Two trees have the same digest
    only if they are equal in all of these (a one-byte difference anywhere is another digest);
    where ``root`` lies does not count.

    Args:
        root: the tree's top directory.
        max_bytes: stop with :class:`TreeTooLarge` once the regular files' sizes (``lstat``)
            add up to more than this many bytes, before reading past it (None: no bound).
        max_entries: stop with :class:`TreeTooLarge` once the tree holds more than this many
            entries (files, directories, links, others), before digesting past it (None: no
            bound; each entry costs about 10 us, so a million empty files cost seconds).

    Raises:
        TreeTooLarge: over ``max_bytes`` or ``max_entries``.
        OSError: the tree cannot be read (a file that is not readable, an entry that vanished, a
            file that grew while it was read).
    """
    h = hashlib.sha256(b"tree\0")
    stack = [b""]
    base = os.fsencode(os.fspath(root))
    total = entries = 0
    while stack:
        rel = stack.pop()
        names = []
        with os.scandir(os.path.join(base, rel) if rel else base) as it:
            for e in it:  # counted while listed: one huge directory is not read whole first
                entries += 1
                if max_entries is not None and entries > max_entries:
                    raise TreeTooLarge(f"{os.fsdecode(base)}: more than {max_entries} entries")
                names.append(e.name)
        names.sort()
        subdirs = []
        for name in names:
            child = rel + b"/" + name if rel else name
            path = os.path.join(base, child)
            st = os.lstat(path)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISDIR(st.st_mode):
                kind, body = b"d", b""
                subdirs.append(child)
            elif stat.S_ISLNK(st.st_mode):
                kind, body = b"l", os.readlink(path)
            elif stat.S_ISREG(st.st_mode):
                total += st.st_size
                if max_bytes is not None and total > max_bytes:
                    raise TreeTooLarge(f"{os.fsdecode(base)}: more than {max_bytes} bytes of files")
                kind, body = b"f", _file_sha256(path, st.st_size)
            else:
                kind, body = b"o", b""
            for part in (kind, child, str(mode).encode(), body):
                h.update(len(part).to_bytes(8, "big"))
                h.update(part)
        stack.extend(reversed(subdirs))
    return h.hexdigest()


def _file_sha256(path: bytes, size: int) -> bytes:
    """SHA-256 of the file's bytes; reads at most ``size`` (its ``lstat`` size) plus one byte, so a
    file that something keeps writing cannot hold the digest (OSError: it changed size); opened
    without blocking, so a FIFO put in its place after ``lstat`` cannot either (OSError)."""
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{os.fsdecode(path)}: no longer a regular file")
        left = size
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            h.update(chunk)
            left -= len(chunk)
        if left or os.read(fd, 1):
            raise OSError(f"{os.fsdecode(path)}: changed size while it was read")
    finally:
        os.close(fd)
    return h.digest()
