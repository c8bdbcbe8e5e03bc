"""ARTModel: Strands stream events, a real Agent tool loop, canonical history, error mapping."""

from __future__ import annotations

import json

import pytest
from strands import Agent
from strands.agent.conversation_manager import NullConversationManager
from strands.types.exceptions import ContextWindowOverflowException, ModelThrottledException
from support.strands_tools import add

from strands_art.backends.base import BackendUnavailable
from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.model import ARTModel

ADD_CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 17, "b": 25}}\n</tool_call><|im_end|>'


def make(tok, outputs, **gw):
    gateway = RolloutGateway(tok, ScriptedBackend(tok, outputs), **gw)
    return gateway, ARTModel(gateway=gateway, session_id="s1", group_id="task-a")


async def collect(model, messages, specs=None, system=None, **kw):
    return [ev async for ev in model.stream(messages, specs, system, **kw)]


async def test_stream_events_for_reasoning_text_and_tool_use(qwen3):
    out = "<think>\nneed the tool\n</think>\n\nLet me add." + ADD_CALL[: -len("<|im_end|>")] + "<|im_end|>"
    _, model = make(qwen3, [{"text": out}])
    specs = [add.tool_spec]
    events = await collect(
        model, [{"role": "user", "content": [{"text": "17+25?"}]}], specs, "sys", model_state={}
    )
    kinds = [next(iter(e)) for e in events]
    assert kinds == [
        "messageStart",
        "contentBlockStart",
        "contentBlockDelta",
        "contentBlockStop",
        "contentBlockStart",
        "contentBlockDelta",
        "contentBlockStop",
        "contentBlockStart",
        "contentBlockDelta",
        "contentBlockStop",
        "messageStop",
        "metadata",
    ]
    assert events[2]["contentBlockDelta"]["delta"] == {"reasoningContent": {"text": "need the tool"}}
    assert events[5]["contentBlockDelta"]["delta"] == {"text": "Let me add."}
    start = events[7]["contentBlockStart"]["start"]["toolUse"]
    assert start["name"] == "add" and start["toolUseId"].startswith("call_")
    assert json.loads(events[8]["contentBlockDelta"]["delta"]["toolUse"]["input"]) == {"a": 17, "b": 25}
    assert events[10] == {"messageStop": {"stopReason": "tool_use"}}
    usage = events[11]["metadata"]["usage"]
    assert usage["outputTokens"] > 0 and usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]


async def test_text_only_and_max_tokens_stop_reasons(qwen3):
    _, model = make(qwen3, [{"text": "Hello.<|im_end|>"}, {"text": "a b c d", "finish_reason": "length"}])
    ev = await collect(model, [{"role": "user", "content": [{"text": "hi"}]}])
    assert ev[-2] == {"messageStop": {"stopReason": "end_turn"}}
    ev = await collect(model, [{"role": "user", "content": [{"text": "hi"}]}])
    assert ev[-2] == {"messageStop": {"stopReason": "max_tokens"}}


async def test_agent_tool_loop_end_to_end_is_one_row(qwen3):
    gateway, model = make(qwen3, [{"text": ADD_CALL}, {"text": "17 + 25 = 42.<|im_end|>"}])
    agent = Agent(
        model=model, tools=[add], callback_handler=None, conversation_manager=NullConversationManager()
    )
    result = await agent.invoke_async("What is 17 + 25?")
    assert "42" in str(result)
    tool_results = [b["toolResult"] for m in agent.messages for b in m["content"] if "toolResult" in b]
    assert tool_results[0]["status"] == "success" and tool_results[0]["content"][0]["text"] == "42"
    traj = gateway.close_session("s1", reward=1.0)
    assert len(traj.turns) == 2 and len(traj.rows) == 1 and traj.group_id == "task-a"
    assert [e for e in traj.events if e["kind"] in ("fork", "rewrite")] == []
    assert "<tool_response>\n42\n</tool_response>" in qwen3.decode(traj.turns[1].prompt_ids)


async def test_blank_text_rewrite_maps_back_to_what_the_gateway_produced(qwen3):
    # a tool call with no text: Strands stores the assistant turn, then replays it
    gateway, model = make(qwen3, [{"text": ADD_CALL}, {"text": "42<|im_end|>"}])
    await collect(model, [{"role": "user", "content": [{"text": "17+25?"}]}], [add.tool_spec])
    call_id = gateway.trajectory("s1").turns[0].index
    (tool_use_id,) = model.canonical.produced_tool_ids
    history = [
        {"role": "user", "content": [{"text": "17+25?"}]},
        {
            "role": "assistant",
            "content": [
                {"text": "[blank text]"},
                {"toolUse": {"toolUseId": tool_use_id, "name": "add", "input": {"b": 25, "a": 17}}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": tool_use_id, "status": "success", "content": [{"text": "42"}]}}
            ],
        },
    ]
    await collect(model, history, [add.tool_spec])
    traj = gateway.close_session("s1")
    assert call_id == 0 and len(traj.rows) == 1  # replayed exactly: no fork
    assert [e for e in traj.events if e["kind"] == "rewrite"] == []


async def test_changed_tool_input_is_reported_as_a_rewrite_event(qwen3):
    gateway, model = make(qwen3, [{"text": ADD_CALL}, {"text": "42<|im_end|>"}])
    await collect(model, [{"role": "user", "content": [{"text": "17+25?"}]}], [add.tool_spec])
    (tool_use_id,) = model.canonical.produced_tool_ids
    history = [
        {"role": "user", "content": [{"text": "17+25?"}]},
        {
            "role": "assistant",
            "content": [{"toolUse": {"toolUseId": tool_use_id, "name": "add", "input": {}}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": tool_use_id,
                        "status": "error",
                        "content": [{"text": "bad input"}],
                    }
                }
            ],
        },
    ]
    await collect(model, history, [add.tool_spec])
    traj = gateway.close_session("s1")
    codes = [e["code"] for e in traj.events if e["kind"] == "rewrite"]
    assert codes == ["tool_input_changed"]
    assert len(traj.rows) == 1  # the canonical (produced) call was replayed


async def test_errors_map_to_strands_exceptions(qwen3):
    _, model = make(qwen3, [{"text": "x<|im_end|>"}], max_context_tokens=5)
    with pytest.raises(ContextWindowOverflowException):
        await collect(model, [{"role": "user", "content": [{"text": "a long enough question"}]}])

    class Down:
        name = "down"

        async def sample(self, prompt_ids, params):
            raise BackendUnavailable("connection refused: http://127.0.0.1:9")

        async def aclose(self):
            pass

    model2 = ARTModel(gateway=RolloutGateway(qwen3, Down()), session_id="s2")
    with pytest.raises(ModelThrottledException, match="connection refused"):
        await collect(model2, [{"role": "user", "content": [{"text": "hi"}]}])


def test_config_round_trip_and_unknown_keys_warn(qwen3):
    # issue 14 item 10: as strands' openai/litellm/llamacpp providers, unknown keys warn
    _, model = make(qwen3, [])
    with pytest.warns(UserWarning, match=r"params \['temperature'\] will not take effect"):
        model.update_config(params={"temperature": 0.2})
    cfg = model.get_config()
    assert cfg["params"] == {"temperature": 0.2} and cfg["session_id"] == "s1"
    assert cfg["context_window_limit"] == model.gateway.max_context_tokens
    assert cfg["history_mode"] == "tree"
    with pytest.warns(UserWarning, match=r"unknown config keys \['temprature'\]"):
        model.update_config(temprature=0.2)
    assert "temprature" not in model.get_config()


@pytest.mark.parametrize(
    "messages, match",
    [
        ([{"role": "wizard", "content": [{"text": "hi"}]}], "unknown message role"),
        ([{"role": "user", "content": "hi"}], "must be a list of content blocks"),
        ([None], "must be a dict"),
        ([{"role": "user", "content": [{"hologram": {}}]}], "unsupported user content block"),
    ],
)
async def test_malformed_strands_messages_are_rejected_and_record_nothing(qwen3, messages, match):
    from strands_art.conversion.strands import StrandsFormatError

    gateway, model = make(qwen3, [{"text": "x<|im_end|>"}])
    with pytest.raises(StrandsFormatError, match=match):
        await collect(model, messages)
    assert gateway.trajectory("s1").turns == []


async def test_tool_spec_without_a_name_is_rejected(qwen3):
    from strands_art.conversion.strands import StrandsFormatError

    _, model = make(qwen3, [{"text": "x<|im_end|>"}])
    with pytest.raises(StrandsFormatError, match="needs a name"):
        await collect(model, [{"role": "user", "content": [{"text": "hi"}]}], [{"description": "no name"}])
