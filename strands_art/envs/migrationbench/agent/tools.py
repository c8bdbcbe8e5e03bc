"""The agent's Strands tools: ``shell`` and ``file_editor``, confined to one workspace.

:func:`make_tools` builds both as Strands ``@tool`` functions bound to a :class:`Workspace`.
Neither ever raises into the agent loop: every failure (a path outside the workspace, a
timeout, a missing argument, a non-unique match, a binary file, an unexpected OS error) comes
back as a tool result with ``status: "error"`` and a message for the model. Time spent in the
tools is added up in a :class:`ToolStats` the runner reads (shell commands that invoke Maven are
also counted as Maven time).
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, TypeVar

from strands import tool
from strands.types.tools import ToolResult

from strands_art.envs.migrationbench.agent.commands import (
    DEFAULT_MAX_OUTPUT_BYTES,
    DEFAULT_TIMEOUT_S,
    run_command,
)
from strands_art.envs.migrationbench.agent.editor import EditorError, FileEditor
from strands_art.envs.migrationbench.agent.mavenmemo import MavenMemo
from strands_art.envs.migrationbench.agent.mavenmemo import enabled as memo_enabled
from strands_art.envs.migrationbench.agent.toolenv import workspace_sandbox
from strands_art.envs.migrationbench.workspace import PathOutsideWorkspace, Workspace
from strands_art.envs.sandbox import Sandbox, require_sandbox

T = TypeVar("T")

#: Seconds one file-editor operation may take before the tool gives up on it.
DEFAULT_EDITOR_TIMEOUT_S = 30.0

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
        maven_memo_hits / maven_memo_saved_s: repeated clean builds on an unchanged tree answered
            from the last run (:mod:`.mavenmemo`; not in ``maven_calls``), and the seconds that
            run took each time.
    """

    calls: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    maven_calls: int = 0
    maven_s: float = 0.0
    timeouts: int = 0
    maven_memo_hits: int = 0
    maven_memo_saved_s: float = 0.0

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


def valid_text(text: str) -> str:
    """``text`` with lone surrogates (a path the model wrote as JSON ``"\\ud800"``, a file name
    read with ``surrogateescape``) replaced by U+FFFD: a tool result must be valid Unicode, or the
    next turn can neither be tokenized nor stored."""
    return _SURROGATE.sub("\ufffd", text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _result(text: str, *, error: bool = False) -> ToolResult:
    # toolUseId is filled in by Strands when the tool runs inside an agent.
    return {
        "toolUseId": "",
        "status": "error" if error else "success",
        "content": [{"text": valid_text(text)}],
    }


def describe_sandbox(sandbox: Sandbox | None) -> str:
    """One line for the model and the logs: what the shell's sandbox allows."""
    if sandbox is None:
        return "NONE (--unsafe-no-sandbox: commands run unconfined)"
    return (
        "bubblewrap (unprivileged user, no network, read-only system, only the repository and its "
        "Maven files writable, private /tmp, background processes end with the command)"
    )


def _shell_description(sandbox: Sandbox | None, timeout_s: float, max_output_bytes: int) -> str:
    return (
        "Run a bash command in the repository (the working directory is the repository root). "
        f"Each command times out after {timeout_s:g} s; stdout and stderr are merged and cut to "
        f"{max_output_bytes} bytes (start and end kept). Nothing is interactive: stdin is closed. "
        f"Sandbox: {describe_sandbox(sandbox)}. Maven works offline: `mvn` uses local settings."
    )


async def run_with_timeout(fn: Callable[[], T], timeout_s: float) -> T:
    """Run blocking ``fn`` in its own daemon thread; raise TimeoutError after ``timeout_s``.

    A call that never returns (a file operation stuck in the kernel) keeps only its own thread:
    no shared pool (the one the evaluation uses) is starved, and the process can still exit.
    """
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[T] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not fut.done():
            (fut.set_result if ok else fut.set_exception)(value)

    def work() -> None:
        try:
            value = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            loop.call_soon_threadsafe(settle, False, exc)
        else:
            loop.call_soon_threadsafe(settle, True, value)

    threading.Thread(target=work, name="file-editor", daemon=True).start()
    return await asyncio.wait_for(fut, timeout_s)


def make_tools(
    workspace: Workspace,
    *,
    command_timeout_s: float = DEFAULT_TIMEOUT_S,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    env: Mapping[str, str] | None = None,
    extra_path: Sequence[str] = (),
    sandbox: Sandbox | None = None,
    unsafe_no_sandbox: bool = False,
    stats: ToolStats | None = None,
    time_left: Callable[[], float | None] | None = None,
    editor_timeout_s: float = DEFAULT_EDITOR_TIMEOUT_S,
    maven_memo: bool | None = None,
) -> list[Any]:
    """Build the ``shell`` and ``file_editor`` tools for one rollout.

    Args:
        workspace: the rollout's workspace; both tools are confined to it.
        command_timeout_s: per-command limit in seconds (default 300).
        max_output_bytes: shell output kept per command; also bounds ``view`` output.
        env: variables added to every command's environment (e.g. ``MVN_LOCAL_REPO``).
        extra_path: directories put first on PATH (e.g. the ``mvn`` wrapper's bin dir).
        sandbox: the shell's sandbox; default the workspace's
            (:func:`~.toolenv.workspace_sandbox`), after :func:`~strands_art.envs.sandbox.require_sandbox`
            proved it works (fail closed: raises if it does not).
        unsafe_no_sandbox: run commands unconfined (the explicit opt-out; ``sandbox`` ignored).
        editor_timeout_s: seconds one file-editor operation may take (then an error result).
        stats: where time and counts are recorded; pass your own to read it afterwards
            (a private one is used if None).
        time_left: returns the rollout's remaining seconds (or None); a command's timeout is
            capped by it, so no command outlives the rollout's time limit.
        maven_memo: answer a back-to-back repeat of a clean Maven build on the tree it left from
            its last run (:mod:`.mavenmemo`); None: on unless ``STRANDS_ART_MAVEN_MEMO=off``.

    Returns:
        ``[shell, file_editor]``, Strands ``DecoratedFunctionTool`` objects.

    Raises:
        SandboxUnavailable: no sandbox can be set up here (and no opt-out).
    """
    if unsafe_no_sandbox:
        sandbox = None
        logger.warning("UNSAFE: agent commands in %s run without a sandbox", workspace.root)
    elif sandbox is None:
        require_sandbox()
        sandbox = workspace_sandbox(workspace)
    st = stats if stats is not None else ToolStats()
    editor = FileEditor(workspace, max_view_chars=max_output_bytes)
    memo = MavenMemo(workspace.root) if (memo_enabled() if maven_memo is None else maven_memo) else None

    @tool(name="shell", description=_shell_description(sandbox, command_timeout_s, max_output_bytes))
    async def shell(command: str) -> ToolResult:
        """Run a bash command in the repository root.

        Args:
            command: The bash command line to run, e.g. `mvn -q clean verify` or `grep -rn javax src`.
        """
        start = time.monotonic()
        maven = invokes_maven(command)
        error = True
        ran_ok = hit = False  # ran to its end (the memo keeps only such a run); answered by the memo
        text = ""
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
            seen = await asyncio.to_thread(memo.lookup, command) if memo is not None else None
            if seen is not None and seen[1] < limit:  # a real run would have time to end
                text, seconds = seen
                maven, error, hit = False, False, True  # not a Maven run: no maven_calls / maven_s
                st.maven_memo_hits += 1
                st.maven_memo_saved_s += seconds
                return _result(text)
            res = await run_command(
                command,
                cwd=workspace.root,
                timeout_s=limit,
                max_output_bytes=max_output_bytes,
                env=env,
                extra_path=extra_path,
                sandbox=sandbox,
            )
            if res.timed_out:
                st.timeouts += 1
                return _result(
                    f"Error: command timed out after {limit:g} s and was killed (with every process it "
                    f"started). Output before the kill:\n{res.output}",
                    error=True,
                )
            error, ran_ok = False, True
            text = f"{res.output}\n[exit code: {res.exit_code}]"
            return _result(text)
        except Exception as e:  # noqa: BLE001 - never crash the rollout; report to the model
            logger.exception("shell tool failed for %r", command)
            return _result(f"Error: could not run the command: {type(e).__name__}: {e}", error=True)
        finally:
            spent = time.monotonic() - start
            st.record("shell", spent, error=error)
            if maven:
                st.maven_calls += 1
                st.maven_s += spent
            if memo is not None and command.strip() and not hit:
                if ran_ok:  # digest the tree it left (kept only for a memoizable build)
                    await asyncio.to_thread(memo.record, command, text, spent)
                else:
                    memo.forget()

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
    async def file_editor(
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
            text = await run_with_timeout(
                lambda: editor.run(
                    command,
                    path,
                    file_text=file_text,
                    old_str=old_str,
                    new_str=new_str,
                    insert_line=insert_line,
                    view_range=view_range,
                ),
                editor_timeout_s,
            )
            error = False
            return _result(text)
        except TimeoutError:
            return _result(
                f"Error: the file operation on {path} did not finish in {editor_timeout_s:g} s.", error=True
            )
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
