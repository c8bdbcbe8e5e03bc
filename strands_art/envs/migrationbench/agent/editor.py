"""File-editor operations confined to a :class:`Workspace`, with per-file undo.

The command set and the result texts follow the Anthropic ``str_replace_editor`` / Strands
``file_editor`` convention (``strands.vended_tools.file_editor``, ``strands_tools.editor``):
``view`` (``cat -n`` style, or a two-level directory listing), ``create``, ``str_replace`` (the
old text must occur exactly once), ``insert`` (after line N, 0 = top) and ``undo_edit``. Every
failure raises :class:`EditorError` with a message for the model; the tool layer turns it into
an error tool result.

Files are read and written as UTF-8 with line endings untouched; a file with a NUL byte or
invalid UTF-8 in it is treated as binary and refused.

The workspace is shared with the agent's shell, which can plant anything in it, so every file
access goes through :mod:`strands_art.envs.sandbox.files`: regular files with one link only
(a FIFO, socket, device node or hard link is refused), no symlink followed at any component after
:meth:`Workspace.resolve` (a swap between the check and the open fails instead of leading out),
``O_NONBLOCK`` opens and bounded reads; new files belong to the workspace's sandbox uid.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from strands_art.envs.migrationbench.workspace import Workspace
from strands_art.envs.sandbox import files

SNIPPET_LINES = 4
MAX_FILE_BYTES = 1024 * 1024
_LISTING_DEPTH = 2


class EditorError(ValueError):
    """A file-editor request that cannot be carried out (message written for the model)."""


def _numbered(text: str, first_line: int = 1) -> str:
    lines = text.split("\n")
    return "\n".join(f"{i + first_line:>6}\t{line}" for i, line in enumerate(lines))


class FileEditor:
    """Stateful editor for one workspace (undo stacks per file; thread-safe).

    Args:
        workspace: the confinement root.
        max_view_chars: a ``view`` result longer than this is cut, with a hint to use
            ``view_range``.
    """

    def __init__(self, workspace: Workspace, *, max_view_chars: int = 16 * 1024) -> None:
        self.workspace = workspace
        self.max_view_chars = max_view_chars
        self._history: dict[Path, list[str | None]] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ helpers
    def _rel(self, path: Path) -> Path:
        return path.relative_to(self.workspace.root)

    def _lstat(self, path: Path) -> os.stat_result | None:
        try:
            return files.lstat(self.workspace.root, self._rel(path))
        except files.UnsafeFile as e:
            raise EditorError(f"The path {path} cannot be used: {e}.") from e

    def _is_dir(self, path: Path) -> bool:
        st = self._lstat(path)
        return st is not None and stat.S_ISDIR(st.st_mode)

    def _read(self, path: Path) -> str:
        st = self._lstat(path)
        if st is None:
            raise EditorError(f"The path {path} does not exist.")
        if stat.S_ISDIR(st.st_mode):
            raise EditorError(f"The path {path} is a directory; only `view` works on directories.")
        if st.st_size > MAX_FILE_BYTES and stat.S_ISREG(st.st_mode):
            raise EditorError(
                f"The file {path} is {st.st_size} bytes; the editor handles files up to {MAX_FILE_BYTES}."
            )
        try:
            data = files.read_bytes(self.workspace.root, self._rel(path), max_bytes=MAX_FILE_BYTES)
        except files.UnsafeFile as e:
            raise EditorError(f"Refused: {e}.") from e
        if b"\x00" in data[:8192]:
            raise EditorError(f"The file {path} is binary; the editor only handles text files.")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise EditorError(
                f"The file {path} is not valid UTF-8 text ({e.reason} at byte {e.start})."
            ) from e

    def _put(self, path: Path, text: str) -> None:
        try:
            files.write_bytes(
                self.workspace.root, self._rel(path), text.encode("utf-8"), identity=self.workspace.identity
            )
        except files.UnsafeFile as e:
            raise EditorError(f"Refused: {e}.") from e

    def _write(self, path: Path, text: str, previous: str | None) -> None:
        self._put(path, text)
        self._history.setdefault(path, []).append(previous)

    def _snippet(self, text: str, first: int, last: int, path: Path) -> str:
        """Lines ``first..last`` (0-based, inclusive) plus context, numbered."""
        lines = text.split("\n")
        lo = max(0, first - SNIPPET_LINES)
        hi = min(len(lines), last + SNIPPET_LINES + 1)
        return f"Here is a snippet of {path}:\n" + _numbered("\n".join(lines[lo:hi]), lo + 1)

    # ------------------------------------------------------------------ commands
    def run(
        self,
        command: str,
        path: str,
        *,
        file_text: str | None = None,
        old_str: str | None = None,
        new_str: str | None = None,
        insert_line: int | None = None,
        view_range: list[int] | None = None,
    ) -> str:
        """Carry out one editor command and return the text for the model.

        Raises:
            EditorError: bad command, missing argument, missing/binary file, no unique match.
            PathOutsideWorkspace: ``path`` escapes the workspace.
        """
        target = self.workspace.resolve(path)
        with self._lock:
            if command == "view":
                return self.view(target, view_range)
            if command == "create":
                if file_text is None:
                    raise EditorError("Parameter `file_text` is required for command `create`.")
                return self.create(target, file_text)
            if command == "str_replace":
                if old_str is None:
                    raise EditorError("Parameter `old_str` is required for command `str_replace`.")
                return self.str_replace(target, old_str, new_str or "")
            if command == "insert":
                if insert_line is None or new_str is None:
                    raise EditorError(
                        "Parameters `insert_line` and `new_str` are required for command `insert`."
                    )
                return self.insert(target, insert_line, new_str)
            if command == "undo_edit":
                return self.undo(target)
        raise EditorError(
            f"Unknown command {command!r}. Allowed: view, create, str_replace, insert, undo_edit."
        )

    def view(self, path: Path, view_range: list[int] | None = None) -> str:
        if self._is_dir(path):
            if view_range:
                raise EditorError("`view_range` is not allowed when `path` is a directory.")
            return self._listing(path)
        text = self._read(path)
        lines = text.split("\n")
        first = 1
        if view_range:
            if len(view_range) != 2:
                raise EditorError(f"`view_range` must be [start, end], got {view_range}.")
            start, end = view_range
            n = len(lines)
            if not 1 <= start <= n:
                raise EditorError(f"Invalid `view_range` {view_range}: start must be within [1, {n}].")
            if end != -1 and not start <= end <= n:
                raise EditorError(
                    f"Invalid `view_range` {view_range}: end must be -1 or within [{start}, {n}]."
                )
            lines = lines[start - 1 :] if end == -1 else lines[start - 1 : end]
            first = start
        body = _numbered("\n".join(lines), first)
        if len(body) > self.max_view_chars:
            cut = body[: self.max_view_chars].rsplit("\n", 1)[0]
            shown = cut.count("\n") + 1
            body = (
                f"{cut}\n[... output cut after {shown} lines; the file has {len(text.split(chr(10)))} lines. "
                "Use `view_range` to see the rest ...]"
            )
        return f"Here's the result of running `cat -n` on {path}:\n{body}\n"

    def _listing(self, root: Path) -> str:
        items: list[str] = []

        def walk(rel: Path, depth: int) -> None:
            try:
                with files.open_dir(self.workspace.root, rel) as fd:
                    entries = sorted(os.scandir(fd), key=lambda e: e.name)
                    kinds = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
            except OSError:
                return
            for name, is_dir in kinds:
                if name.startswith("."):
                    continue
                shown = (rel / name).relative_to(start)
                items.append(f"{shown}/" if is_dir else str(shown))
                if is_dir and depth < _LISTING_DEPTH:
                    walk(rel / name, depth + 1)

        start = self._rel(root)
        walk(start, 1)
        return (
            f"Here are the files and directories up to {_LISTING_DEPTH} levels deep in {root}, "
            "excluding hidden items:\n" + "\n".join(items) + "\n"
        )

    def create(self, path: Path, file_text: str) -> str:
        if self._is_dir(path):
            raise EditorError(f"The path {path} is a directory; `create` needs a file path.")
        previous = self._read(path) if self._lstat(path) is not None else None
        self._write(path, file_text, previous)
        verb = "overwritten" if previous is not None else "created"
        return f"File {verb} successfully at: {path}"

    def str_replace(self, path: Path, old_str: str, new_str: str) -> str:
        if old_str == "":
            raise EditorError("`old_str` must not be empty.")
        text = self._read(path)
        count = text.count(old_str)
        if count == 0:
            raise EditorError(
                f"No replacement was performed: `old_str` did not appear verbatim in {path}. "
                "Check whitespace and indentation (view the file first)."
            )
        if count > 1:
            starts, pos = [], text.find(old_str)
            while pos != -1:
                starts.append(text.count("\n", 0, pos) + 1)
                pos = text.find(old_str, pos + 1)
            raise EditorError(
                f"No replacement was performed: `old_str` occurs {count} times in {path} (starting on lines "
                f"{starts}). Include more surrounding lines to make it unique."
            )
        at = text.index(old_str)
        new_text = text.replace(old_str, new_str, 1)
        self._write(path, new_text, text)
        first = text.count("\n", 0, at)
        last = first + new_str.count("\n")
        return (
            f"The file {path} has been edited. {self._snippet(new_text, first, last, path)}\n"
            "Review the changes and make sure they are as expected. Edit the file again if necessary."
        )

    def insert(self, path: Path, insert_line: int, new_str: str) -> str:
        text = self._read(path)
        lines = text.split("\n")
        n = len(lines) if text else 0
        if not 0 <= insert_line <= n:
            raise EditorError(
                f"Invalid `insert_line` {insert_line}: it must be within [0, {n}] (0 = top of file)."
            )
        new_lines = new_str.split("\n")
        merged = new_lines if not text else [*lines[:insert_line], *new_lines, *lines[insert_line:]]
        new_text = "\n".join(merged)
        self._write(path, new_text, text)
        return (
            f"The file {path} has been edited. "
            f"{self._snippet(new_text, insert_line, insert_line + len(new_lines) - 1, path)}\n"
            "Review the changes and make sure they are as expected (indentation, no duplicate lines)."
        )

    def undo(self, path: Path) -> str:
        stack = self._history.get(path)
        if not stack:
            raise EditorError(f"No edit history for {path}; nothing to undo.")
        previous = stack.pop()
        if previous is None:
            files.unlink(self.workspace.root, self._rel(path))
            return f"Undid the creation of {path}; the file was removed."
        self._put(path, previous)
        msg = f"Last edit to {path} undone."
        if len(previous) <= self.max_view_chars:
            msg += f" Here's the result of running `cat -n` on {path}:\n{_numbered(previous)}\n"
        return msg
