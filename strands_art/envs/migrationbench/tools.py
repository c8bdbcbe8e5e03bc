"""The agent's Strands tools: ``shell`` and ``file_editor``, confined to one workspace.

:func:`make_tools` builds both as Strands ``@tool`` functions bound to a :class:`Workspace`.
Neither ever raises into the agent loop: every failure (a path outside the workspace, a
timeout, a missing argument, a non-unique match, a binary file, an unexpected OS error) comes
back as a tool result with ``status: "error"`` and a message for the model. Time spent in the
tools is added up in a :class:`ToolStats` the runner reads (shell commands that invoke Maven are
also counted as Maven time).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from strands import tool
from strands.types.tools import ToolResult

from .commands import DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TIMEOUT_S, run_command
from .editor import EditorError, FileEditor
from .isolation import Isolation, detect_isolation
from .workspace import PathOutsideWorkspace, Workspace

logger = logging.getLogger(__name__)

# `mvn`, `./mvnw`, `/usr/bin/mvn` as a command word (after start, a separator, or a path).
_MAVEN_RE = re.compile(r"(?:^|[\s;&|(`/])mvnw?(?=$|[\s;&|)`])")


def invokes_maven(command: str) -> bool:
    """True if the shell text runs ``mvn`` or ``mvnw`` as a command word."""
    return _MAVEN_RE.search(command) is not None


@dataclass
class ToolStats:
    """Seconds and call counts per tool for one rollout (all times are wall seconds).

    Attributes:
        calls / seconds / errors: keyed by tool name ("shell", "file_editor").
        maven_calls / maven_s: shell commands that invoked Maven, and their time (a subset
            of ``seconds["shell"]``).
        timeouts: shell commands killed at their time limit.
    """

    calls: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    maven_calls: int = 0
    maven_s: float = 0.0
    timeouts: int = 0

    def record(self, name: str, seconds: float, *, error: bool) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        if error:
            self.errors[name] = self.errors.get(name, 0) + 1

    @property
    def tools_s(self) -> float:
        """Total seconds in all tools (Maven time included)."""
        return sum(self.seconds.values())

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "tools_s": self.tools_s}


def _result(text: str, *, error: bool = False) -> ToolResult:
    # toolUseId is filled in by Strands when the tool runs inside an agent.
    return {"toolUseId": "", "status": "error" if error else "success", "content": [{"text": text}]}


def _shell_description(isolation: Isolation, timeout_s: float, max_output_bytes: int) -> str:
    return (
        "Run a bash command in the repository (the working directory is the repository root). "
        f"Each command times out after {timeout_s:g} s; stdout and stderr are merged and cut to "
        f"{max_output_bytes} bytes (start and end kept). Nothing is interactive: stdin is closed. "
        f"Isolation: {isolation.description}. Maven works offline: `mvn` uses local settings."
    )


def make_tools(
    workspace: Workspace,
    *,
    command_timeout_s: float = DEFAULT_TIMEOUT_S,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    env: Mapping[str, str] | None = None,
    extra_path: Sequence[str] = (),
    writable: Sequence[str] = (),
    isolation: Isolation | None = None,
    stats: ToolStats | None = None,
    time_left: Callable[[], float | None] | None = None,
) -> list[Any]:
    """Build the ``shell`` and ``file_editor`` tools for one rollout.

    Args:
        workspace: the rollout's workspace; both tools are confined to it.
        command_timeout_s: per-command limit in seconds (default 300).
        max_output_bytes: shell output kept per command; also bounds ``view`` output.
        env: variables added to every command's environment (e.g. ``MVN_LOCAL_REPO``).
        extra_path: directories put first on PATH (e.g. the ``mvn`` wrapper's bin dir).
        writable: extra directories that stay writable under a read-only root (the
            workspace, its aux dir and /tmp always are).
        isolation: command isolation; default :func:`detect_isolation` ("auto").
        stats: where time and counts are recorded; pass your own to read it afterwards
            (a private one is used if None).
        time_left: returns the rollout's remaining seconds (or None); a command's timeout is
            capped by it, so no command outlives the rollout's time limit.

    Returns:
        ``[shell, file_editor]``, Strands ``DecoratedFunctionTool`` objects.
    """
    iso = isolation if isolation is not None else detect_isolation()
    st = stats if stats is not None else ToolStats()
    editor = FileEditor(workspace, max_view_chars=max_output_bytes)
    keep = [str(workspace.aux_dir), *writable]

    @tool(name="shell", description=_shell_description(iso, command_timeout_s, max_output_bytes))
    async def shell(command: str) -> ToolResult:
        """Run a bash command in the repository root.

        Args:
            command: The bash command line to run, e.g. `mvn -q clean verify` or `grep -rn javax src`.
        """
        start = time.monotonic()
        maven = invokes_maven(command)
        error = True
        try:
            if not command.strip():
                return _result("Error: empty command.", error=True)
            limit = command_timeout_s
            left = time_left() if time_left is not None else None
            if left is not None:
                if left <= 0:
                    return _result(
                        "Error: the rollout's time limit is reached; no more commands run.", error=True
                    )
                limit = min(limit, left)
            res = await run_command(
                command,
                cwd=workspace.root,
                timeout_s=limit,
                max_output_bytes=max_output_bytes,
                env=env,
                extra_path=extra_path,
                writable=keep,
                isolation=iso,
            )
            if res.timed_out:
                st.timeouts += 1
                return _result(
                    f"Error: command timed out after {limit:g} s and was killed (with every process it "
                    f"started). Output before the kill:\n{res.output}",
                    error=True,
                )
            error = False
            return _result(f"{res.output}\n[exit code: {res.exit_code}]")
        except Exception as e:  # noqa: BLE001 - never crash the rollout; report to the model
            logger.exception("shell tool failed for %r", command)
            return _result(f"Error: could not run the command: {type(e).__name__}: {e}", error=True)
        finally:
            spent = time.monotonic() - start
            st.record("shell", spent, error=error)
            if maven:
                st.maven_calls += 1
                st.maven_s += spent

    @tool(
        name="file_editor",
        description=(
            "View, create and edit files in the repository. Commands: `view` (a file with line numbers, "
            "or a directory listing two levels deep), `create` (write a file, replacing it if it exists), "
            "`str_replace` (replace `old_str`, which must occur exactly once, with `new_str`), `insert` "
            "(insert `new_str` after line `insert_line`; 0 = top of file), `undo_edit` (revert the last "
            "edit of `path`). Paths are relative to the repository root, or absolute inside it."
        ),
    )
    def file_editor(
        command: Literal["view", "create", "str_replace", "insert", "undo_edit"],
        path: str,
        file_text: str | None = None,
        old_str: str | None = None,
        new_str: str | None = None,
        insert_line: int | None = None,
        view_range: list[int] | None = None,
    ) -> ToolResult:
        """View, create and edit files in the repository.

        Args:
            command: One of view, create, str_replace, insert, undo_edit.
            path: File or directory path, relative to the repository root or absolute inside it.
            file_text: Full content of the file (required for create).
            old_str: Exact text to replace; must occur exactly once (required for str_replace).
            new_str: Replacement text (str_replace; empty deletes) or text to insert (required for insert).
            insert_line: Insert after this line number; 0 inserts at the top (required for insert).
            view_range: [start, end] lines to view, 1-based and inclusive; end -1 means to the end.
        """
        start = time.monotonic()
        error = True
        try:
            text = editor.run(
                command,
                path,
                file_text=file_text,
                old_str=old_str,
                new_str=new_str,
                insert_line=insert_line,
                view_range=view_range,
            )
            error = False
            return _result(text)
        except (EditorError, PathOutsideWorkspace) as e:
            return _result(f"Error: {e}", error=True)
        except OSError as e:
            return _result(f"Error: {type(e).__name__}: {e.strerror or e} ({e.filename or path})", error=True)
        except Exception as e:  # noqa: BLE001 - never crash the rollout; report to the model
            logger.exception("file_editor failed: %s %s", command, path)
            return _result(f"Error: {type(e).__name__}: {e}", error=True)
        finally:
            st.record("file_editor", time.monotonic() - start, error=error)

    return [shell, file_editor]
