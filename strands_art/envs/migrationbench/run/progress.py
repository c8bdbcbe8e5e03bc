"""Live progress of the main job: one line per rollout in flight (turn, last tool call, elapsed).

:class:`RolloutProgress` is a Strands hook provider attached to one rollout's agent; it updates
its own row of a shared ``rich.progress.Progress`` (the run's bar sits above the rows):

    compiler-props-r0  turn 3  shell: mvn -q clean verify           0:01:42

The row shows the model call being waited for (``turn N``, counted from 1) and the latest tool
call with a one-line summary of its input (the command, or the editor's command and path), cut
to 60 characters; the row is removed when the rollout ends.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.progress import Progress, TaskID
from strands.hooks import AfterModelCallEvent, BeforeToolCallEvent, HookProvider, HookRegistry

from strands_art.store import open_new

SUMMARY_CHARS = 60


def summarize_call(name: str, tool_input: Any) -> str:
    """``name: detail`` for a tool call: the shell command, or the editor's ``command path``;
    newlines folded, cut to :data:`SUMMARY_CHARS` characters (with an ellipsis)."""
    detail = ""
    if isinstance(tool_input, dict):
        if "command" in tool_input and name == "shell":
            detail = str(tool_input["command"])
        else:
            detail = " ".join(str(tool_input[k]) for k in ("command", "path") if k in tool_input)
    text = " ".join(f"{name}: {detail}".split()) if detail else name
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


class LiveBoard:
    """The rollouts in flight as a small JSON file (``run_dir/live.json``), for ``strands-art
    view``: ``{"rollouts": [{"rollout_id", "turn", "last_call", "started" (Unix seconds)}]}``,
    replaced atomically on every change and removed by :meth:`close`."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._rows: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def update(self, rollout_id: str, **fields: Any) -> None:
        with self._lock:
            row = self._rows.setdefault(
                rollout_id, {"rollout_id": rollout_id, "started": round(time.time(), 3)}
            )
            row.update(fields)
            self._write()

    def remove(self, rollout_id: str) -> None:
        with self._lock:
            self._rows.pop(rollout_id, None)
            self._write()

    def close(self) -> None:
        with self._lock:
            self._rows.clear()
            self.path.unlink(missing_ok=True)

    def _write(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open_new(tmp) as f:  # never through a symlink a copied run directory holds there
            f.write(json.dumps({"rollouts": list(self._rows.values())}).encode("utf-8"))
        os.replace(tmp, self.path)


class RolloutProgress(HookProvider):
    """One rollout's row in a live ``Progress`` (see the module docstring).

    Args:
        progress: the run's ``rich.progress.Progress`` (its columns show ``{task.description}``
            and the elapsed time).
        rollout_id: the row's label.
        board: also show the rollout on this :class:`LiveBoard` (for ``strands-art view``).
    """

    def __init__(self, progress: Progress, rollout_id: str, board: LiveBoard | None = None) -> None:
        self.progress = progress
        self.rollout_id = rollout_id
        self.board = board
        self.turn = 1
        self.last_call = "(no tool call yet)"
        self.task: TaskID = progress.add_task(self._description(), total=None)
        self._post()

    def _description(self) -> str:
        return escape(f"{self.rollout_id}  turn {self.turn}  {self.last_call}")

    def _refresh(self) -> None:
        self.progress.update(self.task, description=self._description())
        self._post()

    def _post(self) -> None:
        if self.board is not None:
            self.board.update(self.rollout_id, turn=self.turn, last_call=self.last_call)

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(AfterModelCallEvent, self._on_model_call)
        registry.add_callback(BeforeToolCallEvent, self._on_tool_call)

    def _on_model_call(self, event: AfterModelCallEvent) -> None:
        if event.stop_response is not None:
            self.turn += 1
            self._refresh()

    def _on_tool_call(self, event: BeforeToolCallEvent) -> None:
        self.last_call = summarize_call(str(event.tool_use.get("name", "?")), event.tool_use.get("input"))
        self._refresh()

    def close(self) -> None:
        """Remove the row (the rollout ended)."""
        self.progress.remove_task(self.task)
        if self.board is not None:
            self.board.remove(self.rollout_id)
