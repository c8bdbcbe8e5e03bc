"""Live progress of the main job: one line per rollout in flight (turn, last tool call, elapsed).

:class:`RolloutProgress` is a Strands hook provider attached to one rollout's agent; it updates
its own row of a shared ``rich.progress.Progress`` (the run's bar sits above the rows):

    compiler-props-r0  turn 3  shell: mvn -q clean verify           0:01:42

The row shows the model call being waited for (``turn N``, counted from 1) and the latest tool
call with a one-line summary of its input (the command, or the editor's command and path), cut
to 60 characters; the row is removed when the rollout ends.
"""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.progress import Progress, TaskID
from strands.hooks import AfterModelCallEvent, BeforeToolCallEvent, HookProvider, HookRegistry

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


class RolloutProgress(HookProvider):
    """One rollout's row in a live ``Progress`` (see the module docstring).

    Args:
        progress: the run's ``rich.progress.Progress`` (its columns show ``{task.description}``
            and the elapsed time).
        rollout_id: the row's label.
    """

    def __init__(self, progress: Progress, rollout_id: str) -> None:
        self.progress = progress
        self.rollout_id = rollout_id
        self.turn = 1
        self.last_call = "(no tool call yet)"
        self.task: TaskID = progress.add_task(self._description(), total=None)

    def _description(self) -> str:
        return escape(f"{self.rollout_id}  turn {self.turn}  {self.last_call}")

    def _refresh(self) -> None:
        self.progress.update(self.task, description=self._description())

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
