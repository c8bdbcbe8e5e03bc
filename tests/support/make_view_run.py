"""Record the small ``strands-art migrate`` run directory the viewer tests open (tests/data/view-run).

Everything is the real pipeline: the Strands agent, ARTModel, the gateway (tree capture, Qwen3
chat template), the sandboxed tools, the evaluator's Maven builds, results.jsonl and the
trajectory store. Only the policy is scripted (:class:`ViewerPolicy`, one rollout at a time):

- ``compiler-props-r0`` plays the task's reference patch (reward 1.0);
- ``compiler-props-r1`` and ``alpha-r0`` are *hostile*: a tool call written with compact JSON
  (``{"name":"shell",...}``; the chat template re-renders it with spaces, so the next turn
  forks) whose command prints XSS payloads and ANSI escapes, then a final answer holding them
  (reward 0.0);
- ``alpha-r1`` runs ``ls`` and answers (alpha has no pom.xml: 0.0, a zero-variance group).

Run (about two minutes: three Maven builds)::

    STRANDS_ART_MAVEN_OFFLINE=1 python -m tests.support.make_view_run tests/data/view-run
"""

from __future__ import annotations

import asyncio
import io
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console

from strands_art.backends.base import SamplingParams
from strands_art.backends.scripted import ScriptedBackend
from strands_art.cli import build_parser
from strands_art.envs.migrationbench.run.runner import run_migration
from strands_art.envs.migrationbench.tasks.tasks import RECORD_FIELDS, load_tasks
from strands_art.registry import load_tokenizer

from .migrate_script import ReferencePlayer, ShellThenAnswer, patched_files

XSS = [
    "<script>alert('xss-script')</script>",
    "<img src=x onerror=alert('xss-img')>",
    "javascript:alert('xss-url')",
]
ANSI = "\x1b[31mRED\x1b[0m"
HOSTILE_COMMAND = "printf '%s\\n' " + " ".join(f'"{p}"' for p in XSS) + "; printf '\\033[31mRED\\033[0m\\n'"
HOSTILE_ANSWER = "Done. " + " ".join(XSS) + " " + ANSI


def compact_call(name: str, arguments: dict[str, Any]) -> str:
    """A Hermes tool call with compact JSON: the template re-renders it with spaces (a fork)."""
    body = json.dumps({"name": name, "arguments": arguments}, separators=(",", ":"))
    return f"<tool_call>\n{body}\n</tool_call><|im_end|>"


class ViewerPolicy:
    """The scripted policy of the recorded run (see the module docstring); rollouts run one at
    a time, in the order compiler-props-r0, compiler-props-r1, alpha-r0, alpha-r1."""

    def __init__(self, tokenizer: Any, reference: ReferencePlayer) -> None:
        self.tokenizer = tokenizer
        self.reference = reference
        self.plain = ShellThenAnswer(tokenizer)
        self.rollout = -1

    def __call__(self, prompt_ids: list[int], params: SamplingParams, index: int) -> dict[str, Any]:
        prompt = self.tokenizer.decode(prompt_ids)
        step = prompt.count("<tool_response>")
        if step == 0:
            self.rollout += 1
        if self.rollout == 0:
            return self.reference(prompt_ids, params, index)
        if self.rollout == 3:
            return self.plain(prompt_ids, params, index)
        if step == 0:
            return {"text": compact_call("shell", {"command": HOSTILE_COMMAND})}
        return {"text": f"<think>\nThe payloads printed. {XSS[0]}\n</think>\n\n{HOSTILE_ANSWER}<|im_end|>"}


async def record(out: Path) -> None:
    qwen3 = load_tokenizer("qwen3")
    with tempfile.TemporaryDirectory(prefix="view-run-") as tmp:
        tasks_dir = Path(tmp) / "tasks"
        [cp] = load_tasks(None, ["compiler-props"])
        shutil.copytree(cp.dir, tasks_dir / cp.name)
        alpha = tasks_dir / "alpha"
        (alpha / "repo").mkdir(parents=True)
        (alpha / "repo" / "NOTES.txt").write_text("task alpha: no pom.xml\n")
        rec: dict[str, Any] = dict.fromkeys(RECORD_FIELDS, 0)
        rec.update(repo="tests/alpha", base_commit="0" * 40, num_test_cases=2, license="Apache-2.0")
        (alpha / "task.json").write_text(json.dumps(rec))
        [task] = load_tasks(tasks_dir, ["compiler-props"])
        files = patched_files(task, Path(tmp) / "patched")
        policy = ViewerPolicy(qwen3, ReferencePlayer(qwen3, {task.name: (task, files)}))
        backend = ScriptedBackend(qwen3, policy)
        run_dir = Path(tmp) / "run"
        argv = ["migrate", "--tasks-dir", str(tasks_dir), "--tasks", "compiler-props", "alpha"]
        argv += ["--rollouts-per-task", "2", "--concurrency", "1", "--model", "qwen3", "--no-plot"]
        argv += ["--run-dir", str(run_dir), "--max-turns", "10", "--seed", "3", "--history-mode", "tree"]
        args = build_parser().parse_args(argv)
        await run_migration(
            args, Console(file=io.StringIO(), width=200), backend_factory=lambda a: (backend, qwen3)
        )
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        for name in ("config.json", "results.jsonl", "trajectories", "logs"):
            src = run_dir / name
            (shutil.copytree if src.is_dir() else shutil.copy)(src, out / name)
        # no paths of the recording machine in the committed config
        cfg = json.loads((out / "config.json").read_text())
        for key in ("run_dir", "tasks_dir", "resume"):
            if cfg.get(key):
                cfg[key] = f"$TMP/{Path(cfg[key]).name}"
        (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(record(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/view-run")))
