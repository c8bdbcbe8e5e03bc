"""Scripted policies for ``strands-art migrate`` tests: Qwen3 (Hermes) tool-call completions.

:class:`ReferencePlayer` plays a task's ``reference.patch`` as tool calls: it reads the real
prompt it receives (decoded with the real tokenizer), counts the ``<tool_response>`` blocks in it
to know which step it is at, and recognizes the task from the first tool result (the ``cat
pom.xml`` output must contain the task's original ``pom.xml``). Steps:

1. ``shell`` ``cat pom.xml``;
2. one ``file_editor`` ``create`` per file the patch touches, with the patched content;
3. ``shell`` ``mvn -q clean verify`` (the offline ``mvn`` wrapper inside the sandbox);
4. a final answer without a tool call.

Used with :class:`~strands_art.backends.scripted.ScriptedBackend` (a callable script).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from strands_art.backends.base import SamplingParams
from strands_art.envs.migrationbench.tasks.tasks import RECORD_FIELDS, Task

FINAL_ANSWER = "The project now targets Java 17 and `mvn clean verify` passes."


def tool_call_text(name: str, arguments: dict[str, Any]) -> str:
    """One Hermes tool call as Qwen3 writes it, ending the turn."""
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call><|im_end|>"


def pomless_tasks(root: Path, names: Iterable[str]) -> Path:
    """Task directories ``root/NAME`` with a one-file repository and no ``pom.xml`` (the evaluation
    runs no Maven build and scores 0): for tests of the runner's bookkeeping. Returns ``root``."""
    for name in names:
        d = root / name
        (d / "repo").mkdir(parents=True)
        (d / "repo" / "NOTES.txt").write_text(f"task {name}\n")
        record: dict[str, Any] = dict.fromkeys(RECORD_FIELDS, 0)
        record.update(repo=f"tests/{name}", base_commit="0" * 40, num_test_cases=1, license="Apache-2.0")
        (d / "task.json").write_text(json.dumps(record))
    return root


def patched_files(task: Task, work: Path) -> dict[str, str]:
    """``{relative path: content}`` of every file ``reference.patch`` changes, after applying it.

    The patch is applied with ``git apply`` to a copy of the task's repo under ``work``.
    """
    patch = task.reference_patch
    assert patch is not None, f"{task.name} has no reference.patch"
    copy = work / task.name
    shutil.copytree(task.repo_dir, copy)
    subprocess.run(["git", "apply", str(patch.resolve())], cwd=copy, check=True, capture_output=True)
    paths = re.findall(r"^\+\+\+ b/(\S+)$", patch.read_text(encoding="utf-8"), flags=re.M)
    assert paths, f"no files in {patch}"
    return {p: (copy / p).read_text(encoding="utf-8") for p in dict.fromkeys(paths)}


class ReferencePlayer:
    """A ``ScriptedBackend`` script that migrates each task with its reference patch.

    Args:
        tokenizer: the tokenizer the gateway renders with (decodes the prompts).
        tasks: the tasks it may be asked to play, with ``patched_files`` computed for each.

    Attributes:
        prompts: every decoded prompt, in call order.
        steps: ``(task name, step)`` per call (task None before it is recognized).
    """

    def __init__(self, tokenizer: Any, tasks: dict[str, tuple[Task, dict[str, str]]]) -> None:
        self.tokenizer = tokenizer
        self.tasks = tasks
        self.prompts: list[str] = []
        self.steps: list[tuple[str | None, int]] = []

    def task_of(self, prompt: str) -> str:
        first = prompt.split("<tool_response>")[1].split("</tool_response>")[0]
        hits = [
            name
            for name, (task, _) in self.tasks.items()
            if (task.repo_dir / "pom.xml").read_text(encoding="utf-8").strip() in first
        ]
        assert len(hits) == 1, f"cannot tell the task from the first tool result: {first[:300]!r}"
        return hits[0]

    def __call__(self, prompt_ids: list[int], params: SamplingParams, index: int) -> dict[str, Any]:
        prompt = self.tokenizer.decode(prompt_ids)
        self.prompts.append(prompt)
        step = prompt.count("<tool_response>")
        if step == 0:
            self.steps.append((None, 0))
            return {"text": tool_call_text("shell", {"command": "cat pom.xml"})}
        name = self.task_of(prompt)
        self.steps.append((name, step))
        files = list(self.tasks[name][1].items())
        if step <= len(files):
            path, content = files[step - 1]
            return {
                "text": tool_call_text(
                    "file_editor", {"command": "create", "path": path, "file_text": content}
                )
            }
        if step == len(files) + 1:
            return {"text": tool_call_text("shell", {"command": "mvn -q clean verify"})}
        return {"text": FINAL_ANSWER + "<|im_end|>"}


class PatchThenAnswer(ReferencePlayer):
    """The reference migration without the agent's own ``mvn`` step (the evaluation build scores
    it): ``cat pom.xml``, one ``create`` per patched file, the final answer."""

    def __call__(self, prompt_ids: list[int], params: SamplingParams, index: int) -> dict[str, Any]:
        prompt = self.tokenizer.decode(prompt_ids)
        step = prompt.count("<tool_response>")
        if step and step == len(self.tasks[self.task_of(prompt)][1]) + 1:
            return {"text": FINAL_ANSWER + "<|im_end|>"}
        return super().__call__(prompt_ids, params, index)


class ShellThenAnswer:
    """A script for runner tests: ``shell`` ``ls`` once, then a final answer."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.prompts: list[str] = []

    def __call__(self, prompt_ids: list[int], params: SamplingParams, index: int) -> dict[str, Any]:
        prompt = self.tokenizer.decode(prompt_ids)
        self.prompts.append(prompt)
        if "<tool_response>" not in prompt:
            return {"text": tool_call_text("shell", {"command": "ls"})}
        return {"text": "Nothing to migrate.<|im_end|>"}


class StepsThenAnswer:
    """A script that makes the given tool calls in order (``(tool name, arguments)``, one per
    turn, whatever the tool results say), then answers :data:`FINAL_ANSWER`."""

    def __init__(self, tokenizer: Any, steps: list[tuple[str, dict[str, Any]]]) -> None:
        self.tokenizer = tokenizer
        self.steps = steps
        self.prompts: list[str] = []

    def __call__(self, prompt_ids: list[int], params: SamplingParams, index: int) -> dict[str, Any]:
        prompt = self.tokenizer.decode(prompt_ids)
        self.prompts.append(prompt)
        step = prompt.count("<tool_response>")
        if step < len(self.steps):
            return {"text": tool_call_text(*self.steps[step])}
        return {"text": FINAL_ANSWER + "<|im_end|>"}
