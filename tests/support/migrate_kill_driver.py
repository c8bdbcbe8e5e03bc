"""``python -m tests.support.migrate_kill_driver MIGRATE_ARGS...``: the real ``strands-art migrate`` entry
point (:func:`~strands_art.envs.migrationbench.run.runner.main_from_args`) with a scripted Qwen3
policy, for tests that SIGKILL it at random points.

Each rollout: one ``shell`` call that leaves a background job and runs for a while
(``sleep 31.4159 & sleep 0.7; echo ok``, so a kill often lands while a command runs), then a
final answer. The backend waits ``0.2`` s per call.
"""

from __future__ import annotations

import sys
from typing import Any

from strands_art.backends.base import SamplingParams
from strands_art.backends.scripted import ScriptedBackend
from strands_art.cli import build_parser
from strands_art.envs.migrationbench.run.runner import main_from_args
from strands_art.registry import load_tokenizer

from .migrate_script import tool_call_text

ORPHAN_MARK = "31.4159"
COMMAND = f"sleep {ORPHAN_MARK} & sleep 0.7; echo ok"


class ShellWithBackgroundJob:
    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def __call__(self, prompt_ids: list[int], params: SamplingParams, index: int) -> dict[str, Any]:
        if "<tool_response>" not in self.tokenizer.decode(prompt_ids[-400:]):
            return {"text": tool_call_text("shell", {"command": COMMAND})}
        return {"text": "Nothing to migrate.<|im_end|>"}


def main(argv: list[str]) -> int:
    tok = load_tokenizer("qwen3")
    backend = ScriptedBackend(tok, ShellWithBackgroundJob(tok), delay=0.2)
    args = build_parser().parse_args(["migrate", *argv])
    return main_from_args(args, backend_factory=lambda a: (backend, tok))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
