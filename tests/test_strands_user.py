"""The provider as a Strands user meets it (issue 14, "Must show"): the README snippet,
``stream_async``, cancellation, structured output, sliding-window and summarizing conversation
managers in both history modes, agents-as-tools and a Swarm sharing one gateway. Every test runs
a real ``strands.Agent`` on the scripted backend with the real Qwen3 tokenizer and asserts the
rows: each turn's sampled tokens sit in its row with loss mask 1 and their logprobs, right after
exactly the prompt the backend received (docs/architecture.md, invariants 1 and 2).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from pydantic import BaseModel
from strands import Agent, tool
from strands.agent.conversation_manager import (
    NullConversationManager,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
)
from strands.multiagent import Swarm
from support.strands_tools import add

from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.model import ARTModel

README = Path(__file__).resolve().parents[1] / "README.md"
LOGPROB = -0.25


def call(name: str, args: str) -> dict:
    return {"text": f'<tool_call>\n{{"name": "{name}", "arguments": {args}}}\n</tool_call><|im_end|>'}


def answer(text: str) -> dict:
    return {"text": f"{text}<|im_end|>"}


def assert_rows(traj, n_turns: int, n_rows: int) -> None:
    """Every turn's sampled tokens are in its row, mask 1, with their logprobs, right after the
    prompt the backend received; nothing else has mask 1."""
    assert len(traj.turns) == n_turns and len(traj.rows) == n_rows
    for turn in traj.turns:
        row = traj.rows[turn.row]
        start, end = row.turn_spans[row.turns.index(turn.index)]
        assert row.input_ids[:start] == turn.prompt_ids
        assert row.input_ids[start:end] == turn.output_ids
        assert row.loss_mask[start:end] == [1] * len(turn.output_ids)
        assert row.logprobs[start:end] == turn.logprobs
    assert sum(sum(r.loss_mask) for r in traj.rows) == sum(len(t.output_ids) for t in traj.turns)


def test_readme_snippet_runs_as_written(qwen3):
    """The README's "Use it in your agent" block, with the scripted backend for the embedded model."""
    block = re.search(r"## Use it in your agent\n\n```python\n(.*?)```", README.read_text(), re.S).group(1)
    backend_line = next(line for line in block.splitlines() if line.startswith("backend = "))
    code = block.replace(backend_line, "backend = SCRIPTED").replace("tools=[...]", "tools=[add]")
    backend = ScriptedBackend(qwen3, [call("add", '{"a": 17, "b": 25}'), answer("42.")], logprob=LOGPROB)
    backend.tokenizer = qwen3
    scope = {"SCRIPTED": backend, "add": add}
    exec(compile(code, str(README), "exec"), scope)  # noqa: S102 - our own README
    traj = scope["trajectory"]
    assert traj.reward == 1.0 and traj.group_id == "task-0"
    assert_rows(traj, 2, 1)  # tree mode: the tool loop is one row
    assert [r.reward for r in traj.rows] == [1.0]


async def test_stream_async_delivers_text_deltas_while_the_turn_is_sampled(qwen3):
    """Issue 14 item 8: tokens stream as the backend produces them (scripted backend, 0.6 s per
    turn spread over its tokens): the final answer arrives as several deltas, each before its
    turn is recorded, their concatenation is the turn's text, and the row holds exactly the
    sampled IDs. The tool call (not streamed) arrives whole before turn 2 is sampled."""
    final = "The sum of 17 and 25 is 42."
    backend = ScriptedBackend(qwen3, [call("add", '{"a": 17, "b": 25}'), answer(final)], delay=0.6)
    gw = RolloutGateway(qwen3, backend)
    agent = Agent(model=ARTModel(gateway=gw, session_id="s"), tools=[add], callback_handler=None)
    seen = []
    async for event in agent.stream_async("17+25?"):
        if "data" in event:
            seen.append(("text", event["data"], backend.calls, len(gw.trajectory("s").turns)))
        elif event.get("current_tool_use", {}).get("name") == "add":
            seen.append(("tool", "add", backend.calls, len(gw.trajectory("s").turns)))
    tool_events = [s for s in seen if s[0] == "tool"]
    assert tool_events and all(calls == 1 for _, _, calls, _ in tool_events)  # before turn 2 was sampled
    deltas = [(text, recorded) for kind, text, _, recorded in seen if kind == "text"]
    assert "".join(text for text, _ in deltas) == final
    streamed = [text for text, recorded in deltas if recorded == 1]  # turn 2 still being sampled
    assert len(streamed) >= 5 and "".join(streamed) == final[: len("".join(streamed))]
    traj = gw.close_session("s")
    assert_rows(traj, 2, 1)
    assert traj.turns[1].output_ids == qwen3.encode(final + "<|im_end|>", add_special_tokens=False)


async def test_cancel_during_sampling_stops_promptly_and_records_nothing(qwen3):
    """agent.cancel() while the backend is still producing tokens (a 30 s turn): the stream ends
    within a fraction of that, Strands reports the turn cancelled, no turn or row is recorded."""
    final = "word " * 60
    backend = ScriptedBackend(qwen3, [answer(final)], delay=30.0)
    gw = RolloutGateway(qwen3, backend)
    agent = Agent(model=ARTModel(gateway=gw, session_id="s"), callback_handler=None)
    deltas, results = [], []
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    async for event in agent.stream_async("Say words."):
        if "data" in event:
            deltas.append(event["data"])
            if len(deltas) == 2:
                agent.cancel()
        if "result" in event:
            results.append(event["result"])
    assert [r.stop_reason for r in results] == ["cancelled"]
    assert loop.time() - t0 < 10  # the whole turn would take 30 s
    assert len(deltas) == 2 and "".join(deltas).split() == ["word", "word"]
    traj = gw.close_session("s")
    assert traj.turns == [] and traj.rows == []


async def test_cancelled_invocation_records_the_turn_tagged_discarded(qwen3):
    agent_box: list = []

    def script(prompt_ids, params, index):
        if index == 0:
            agent_box[0].cancel()
        return call("add", '{"a": 1, "b": 2}')

    # no delay: the sample comes back before the cancel is seen, so it is recorded and tagged
    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, script))
    agent = Agent(model=ARTModel(gateway=gw, session_id="s"), tools=[add], callback_handler=None)
    agent_box.append(agent)
    result = await agent.invoke_async("1+2?")
    assert result.stop_reason == "cancelled"
    traj = gw.close_session("s")
    assert_rows(traj, 1, 1)
    assert traj.turns[0].tags == ["discarded"]
    assert traj.rows[0].metadata["turn_tags"] == {"0": ["discarded"]}


class Total(BaseModel):
    total: int


async def test_structured_output(qwen3):
    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, [call("Total", '{"total": 42}')]))
    agent = Agent(model=ARTModel(gateway=gw, session_id="s"), callback_handler=None)
    result = await agent.invoke_async("17+25?", structured_output_model=Total)
    assert result.structured_output == Total(total=42)
    traj = gw.close_session("s")
    assert_rows(traj, 1, 1)
    assert '"name": "Total"' in qwen3.decode(traj.turns[0].prompt_ids)  # the schema reached the model


@tool
def note(text: str) -> str:
    """Write a note.

    Args:
        text: the note
    """
    return f"noted {len(text)} chars"


@pytest.mark.parametrize(("mode", "restart"), [("tree", "fork"), ("linear", "new_lineage")])
async def test_sliding_window_manager(qwen3, mode, restart):
    """A window of 4 messages drops the oldest ones from turn 2 on: each prompt that no longer
    starts with the row's tokens begins a new row, explained by an event (tree: ``fork``;
    linear: ``new_lineage``)."""
    script = [call("note", f'{{"text": "n{k}"}}') for k in range(3)] + [answer("done")]
    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, script, logprob=LOGPROB), history_mode=mode)
    agent = Agent(
        model=ARTModel(gateway=gw, session_id="s"),
        tools=[note],
        callback_handler=None,
        conversation_manager=SlidingWindowConversationManager(window_size=4, per_turn=True),
    )
    await agent.invoke_async("Take three notes.")
    traj = gw.close_session("s")
    assert_rows(traj, 4, 3)
    assert [t.row for t in traj.turns] == [0, 0, 1, 2]
    assert [e["turn"] for e in traj.events if e["kind"] == restart] == [2, 3]
    assert "Take three notes." not in qwen3.decode(traj.turns[-1].prompt_ids)  # trimmed away


@pytest.mark.parametrize("mode", ["tree", "linear"])
async def test_summarizing_manager(qwen3, mode):
    """The fourth turn overflows the 285-token budget: nothing is recorded for it, Strands'
    SummarizingConversationManager asks the same model for a summary (tagged ``summarizer``),
    and the agent goes on from the summary in a new row."""
    main_calls = []

    def script(prompt_ids, params, index):
        if "Please summarize this conversation." in qwen3.decode(prompt_ids[-40:]):
            return answer("Summary: two numbers were added.")
        main_calls.append(index)
        return call("add", f'{{"a": {len(main_calls)}, "b": 1}}') if len(main_calls) <= 3 else answer("Done.")

    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, script, logprob=LOGPROB), history_mode=mode)
    agent = Agent(
        model=ARTModel(gateway=gw, session_id="s", context_window_limit=285),
        tools=[add],
        callback_handler=None,
        conversation_manager=SummarizingConversationManager(
            summary_ratio=0.5, preserve_recent_messages=2, summarization_system_prompt="Summarize."
        ),
    )
    result = await agent.invoke_async("Add things.")
    assert str(result).strip() == "Done."
    traj = gw.close_session("s")
    assert_rows(traj, 5, 3)
    assert [t.tags for t in traj.turns] == [[], [], [], ["summarizer"], []]
    assert max(len(t.prompt_ids) for t in traj.turns) < 285
    assert "Summary: two numbers were added." in qwen3.decode(traj.turns[4].prompt_ids)
    assert traj.rows[traj.turns[3].row].metadata["turn_tags"] == {"3": ["summarizer"]}


async def test_agents_as_tools_share_one_gateway(qwen3):
    """An orchestrator calls a researcher agent as a tool; each has its own session (rows) on
    the same gateway and backend."""

    def script(prompt_ids, params, index):
        text = qwen3.decode(prompt_ids)
        if "You are the researcher" in text:
            return answer("Paris.")
        if "<tool_response>" in text:
            return answer("The capital is Paris.")
        return call("research", '{"question": "capital of France?"}')

    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, script, logprob=LOGPROB))

    @tool
    async def research(question: str) -> str:
        """Ask the researcher.

        Args:
            question: what to find out
        """
        researcher = Agent(
            model=ARTModel(gateway=gw, session_id="researcher", group_id="task"),
            system_prompt="You are the researcher.",
            callback_handler=None,
        )
        return str(await researcher.invoke_async(question))

    orchestrator = Agent(
        model=ARTModel(gateway=gw, session_id="orchestrator", group_id="task"),
        system_prompt="You are the orchestrator.",
        tools=[research],
        callback_handler=None,
        conversation_manager=NullConversationManager(),
    )
    assert (
        str(await orchestrator.invoke_async("What is the capital of France?")).strip()
        == "The capital is Paris."
    )
    outer, inner = gw.close_session("orchestrator"), gw.close_session("researcher")
    assert_rows(outer, 2, 1)
    assert_rows(inner, 1, 1)
    assert "Paris." in qwen3.decode(outer.turns[1].prompt_ids)  # the sub-agent's answer as tool result
    assert outer.group_id == inner.group_id == "task"


async def test_swarm_shares_one_gateway(qwen3):
    def script(prompt_ids, params, index):
        text = qwen3.decode(prompt_ids)
        if "You are the planner." in text and "<tool_response>" not in text:
            return call("handoff_to_agent", '{"agent_name": "coder", "message": "write it"}')
        return answer("Written." if "You are the coder." in text else "Handed off.")

    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, script, logprob=LOGPROB))
    planner = Agent(
        name="planner",
        system_prompt="You are the planner.",
        model=ARTModel(gateway=gw, session_id="planner", group_id="task"),
        callback_handler=None,
    )
    coder = Agent(
        name="coder",
        system_prompt="You are the coder.",
        model=ARTModel(gateway=gw, session_id="coder", group_id="task"),
        callback_handler=None,
    )
    result = await Swarm([planner, coder]).invoke_async("Build it")
    assert [n.node_id for n in result.node_history] == ["planner", "coder"]
    plan, code = gw.close_session("planner"), gw.close_session("coder")
    assert_rows(plan, 2, 1)
    assert_rows(code, 1, 1)
    assert "write it" in qwen3.decode(code.turns[0].prompt_ids)  # the handoff message reached the coder
