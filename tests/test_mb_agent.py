"""MigrationBench agent: limits, stop reasons and history policy (strands_art/envs/migrationbench/agent/agent.py).

The model here is a scripted Strands ``Model`` (a test double that emits the Strands stream
events a provider emits); the tools and the agent loop are real.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from strands.agent.conversation_manager import NullConversationManager
from strands.models.model import Model
from strands.tools.executors import SequentialToolExecutor

from strands_art.envs.migrationbench.agent.agent import (
    COMPACT_USER_SUFFIX,
    SYSTEM_PROMPT,
    RolloutLimits,
    build_agent,
    num_tests_of,
    run_agent,
    user_prompt,
)
from strands_art.envs.migrationbench.agent.tools import ToolStats
from strands_art.envs.migrationbench.workspace import Workspace

Step = tuple[str, Any]  # ("tool", (name, input)) or ("text", str)


class ScriptedModel(Model):
    """Plays ``steps`` in order, one per model call; records what it was sent."""

    def __init__(self, steps: list[Step], on_call: Callable[[], None] | None = None) -> None:
        self.steps = list(steps)
        self.calls: list[list[dict]] = []
        self.on_call = on_call

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> dict:
        return {}

    async def structured_output(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError
        yield  # pragma: no cover

    async def stream(
        self, messages, tool_specs=None, system_prompt=None, **kwargs: Any
    ) -> AsyncIterator[dict]:
        self.calls.append(json.loads(json.dumps(messages, default=str)))
        if self.on_call:
            self.on_call()
        kind, payload = self.steps[min(len(self.calls), len(self.steps)) - 1]
        yield {"messageStart": {"role": "assistant"}}
        if kind == "text":
            yield {"contentBlockDelta": {"delta": {"text": payload}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
        else:
            name, tool_input = payload
            tid = f"call-{len(self.calls)}"
            yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": tid, "name": name}}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(tool_input)}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}
        yield {
            "metadata": {
                "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
                "metrics": {"latencyMs": 1},
            }
        }


@pytest.fixture
def ws(tmp_path: Path):
    repo = tmp_path / "task" / "repo"
    repo.mkdir(parents=True)
    (repo / "pom.xml").write_text("<project><source>1.8</source></project>\n")
    w = Workspace.for_task(tmp_path / "task")
    yield w
    w.cleanup()


def _tool_uses(messages: list[dict]) -> list[str]:
    return [c["toolUse"]["toolUseId"] for m in messages for c in m["content"] if "toolUse" in c]


def _tool_results(messages: list[dict]) -> list[str]:
    return [c["toolResult"]["toolUseId"] for m in messages for c in m["content"] if "toolResult" in c]


def test_prompt_and_task_forms(ws: Workspace) -> None:
    assert user_prompt(ws, {"num_test_cases": 7}) == (
        f"Please help migrate this repo: {ws.root}. There are 7 test cases in it."
    )
    assert num_tests_of(type("T", (), {"num_test_cases": 3})()) == 3
    assert num_tests_of(5) == 5
    with pytest.raises(ValueError):
        num_tests_of({"repo": "x"})
    assert "maven.compiler.release" in SYSTEM_PROMPT and "mvn -q clean verify" in SYSTEM_PROMPT


def test_the_user_turn_with_and_without_the_recipe(ws: Workspace) -> None:
    """``compact`` appends the spelled-out shell calls; ``recipe=False`` (``--prompt
    compact-no-recipe``) and the full prompt leave the plain MigrationBench user turn."""
    plain = f"Please help migrate this repo: {ws.root}. There are 4 test cases in it."
    task = {"num_test_cases": 4}
    with_recipe = user_prompt(ws, task, compact=True)
    assert with_recipe == plain + COMPACT_USER_SUFFIX
    for call in ("sed -i 's#>1[.]8<#>17<#g'", "grep -rn '1[.]8' --include=pom.xml .", "mvn -q clean verify"):
        assert call in with_recipe.removeprefix(plain)
    assert user_prompt(ws, task, compact=True, recipe=False) == plain
    assert user_prompt(ws, task, compact=False, recipe=True) == plain
    assert user_prompt(ws, task) == plain


def test_agent_uses_null_conversation_manager_and_sequential_tools(ws: Workspace) -> None:
    agent = build_agent(ScriptedModel([("text", "done")]), ws, {"num_test_cases": 1})
    assert isinstance(agent.conversation_manager, NullConversationManager)
    assert isinstance(agent.tool_executor, SequentialToolExecutor)
    assert sorted(agent.tool_names) == ["file_editor", "shell"]


async def test_rollout_completes_when_model_answers_without_tool(ws: Workspace) -> None:
    model = ScriptedModel(
        [
            (
                "tool",
                (
                    "file_editor",
                    {"command": "str_replace", "path": "pom.xml", "old_str": "1.8", "new_str": "17"},
                ),
            ),
            ("tool", ("shell", {"command": "cat pom.xml"})),
            ("text", "Migrated."),
        ]
    )
    limits, stats = RolloutLimits(max_turns=10), ToolStats()
    agent = build_agent(model, ws, {"num_test_cases": 1}, limits=limits, stats=stats)
    end = await run_agent(agent, user_prompt(ws, {"num_test_cases": 1}), limits)
    assert end.reason == "completed" and end.error is None and end.model_calls == 3
    assert agent.state.get("stop_reason") == "completed"
    assert (ws.root / "pom.xml").read_text() == "<project><source>17</source></project>\n"
    assert stats.calls == {"file_editor": 1, "shell": 1} and stats.errors == {}
    # the shell result the model saw in its third call
    last_user = model.calls[2][-1]["content"][0]["toolResult"]
    assert last_user["status"] == "success" and "<source>17</source>" in last_user["content"][0]["text"]


async def test_turn_limit_stops_cleanly_before_next_model_call(ws: Workspace) -> None:
    model = ScriptedModel([("tool", ("shell", {"command": "echo again"}))])
    limits = RolloutLimits(max_turns=3, time_limit_s=600)
    agent = build_agent(model, ws, {"num_test_cases": 1}, limits=limits)
    end = await run_agent(agent, "go", limits)
    assert end.reason == "turn_limit" and end.model_calls == 3
    assert len(model.calls) == 3  # no fourth sample
    assert agent.state.get("stop_reason") == "turn_limit"
    # history is well formed: every tool use has its result, nothing synthetic appended
    assert _tool_uses(agent.messages) == _tool_results(agent.messages) == ["call-1", "call-2", "call-3"]
    assert [m["role"] for m in agent.messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]


async def test_tool_errors_do_not_end_the_rollout(ws: Workspace) -> None:
    model = ScriptedModel(
        [
            ("tool", ("file_editor", {"command": "view", "path": "/etc/passwd"})),
            ("tool", ("file_editor", {"command": "frobnicate", "path": "x"})),
            ("tool", ("shell", {"command": "exit 7"})),
            ("text", "gave up"),
        ]
    )
    limits = RolloutLimits(max_turns=10)
    agent = build_agent(model, ws, {"num_test_cases": 1}, limits=limits)
    end = await run_agent(agent, "go", limits)
    assert end.reason == "completed" and end.model_calls == 4
    results = [c["toolResult"] for m in agent.messages for c in m["content"] if "toolResult" in c]
    assert [r["status"] for r in results] == ["error", "error", "success"]
    assert "outside the workspace" in results[0]["content"][0]["text"]
    assert results[2]["content"][0]["text"].endswith("[exit code: 7]")


async def test_time_limit_stops_and_skips_late_tools(ws: Workspace) -> None:
    now = [0.0]
    limits = RolloutLimits(max_turns=50, time_limit_s=250, clock=lambda: now[0])

    def advance() -> None:
        now[0] += 100.0  # every model call takes 100 "seconds"

    model = ScriptedModel([("tool", ("shell", {"command": "echo ran"}))], on_call=advance)
    agent = build_agent(model, ws, {"num_test_cases": 1}, limits=limits)
    end = await run_agent(agent, "go", limits)
    assert end.reason == "time_limit" and end.model_calls == 3 and len(model.calls) == 3
    results = [c["toolResult"] for m in agent.messages for c in m["content"] if "toolResult" in c]
    assert [r["status"] for r in results] == ["success", "success", "error"]
    assert "time limit (250 s) was reached" in results[2]["content"][0]["text"]


async def test_model_exception_is_reported_not_raised(ws: Workspace) -> None:
    class Broken(ScriptedModel):
        async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[dict]:
            raise RuntimeError("backend down")
            yield  # pragma: no cover

    limits = RolloutLimits()
    agent = build_agent(Broken([]), ws, {"num_test_cases": 1}, limits=limits)
    end = await run_agent(agent, "go", limits)
    assert end.reason == "error" and "backend down" in end.error


def test_limits_validate() -> None:
    with pytest.raises(ValueError):
        RolloutLimits(max_turns=0)
    with pytest.raises(ValueError):
        RolloutLimits(time_limit_s=0)
