"""Calls Strands discards (issue 14 item 11): a hook's ``AfterModelCallEvent.retry``, a cancelled
turn and a ``SummarizingConversationManager`` call are tagged on their turns and rows; the
trainer leaves ``discarded`` turns out of the loss by default (configurable) and counts them.
Real Strands Agent, real Qwen3 tokenizer, scripted backend."""

from __future__ import annotations

import pytest
from strands import Agent
from strands.agent.conversation_manager import NullConversationManager
from strands.hooks import AfterModelCallEvent
from support.strands_tools import add

from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.model import ARTModel
from strands_art.training.grpo import GRPOConfig, compute_advantages
from strands_art.turn_tags import SUMMARIZE_REQUEST, is_summarizer_call

CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 17, "b": 25}}\n</tool_call><|im_end|>'


def agent_on(gw, sid="r", **kw):
    model = ARTModel(gateway=gw, session_id=sid, group_id="g")
    kw.setdefault("conversation_manager", NullConversationManager())
    return Agent(model=model, tools=[add], callback_handler=None, **kw)


async def test_hook_retry_tags_the_discarded_turn_and_training_masks_it(qwen3):
    script = [{"text": "I refuse.<|im_end|>"}, {"text": CALL}, {"text": "42.<|im_end|>"}]
    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, script))
    retried = []

    def retry_refusals(event: AfterModelCallEvent) -> None:
        msg = event.stop_response.message if event.stop_response else None
        if msg and "refuse" in str(msg["content"]) and not retried:
            retried.append(True)
            event.retry = True

    agent = agent_on(gw, hooks=[retry_refusals])
    result = await agent.invoke_async("17+25?")
    assert str(result).strip() == "42."
    traj = gw.close_session("r", reward=1.0)
    assert [t.tags for t in traj.turns] == [["discarded"], [], []]
    tagged = [e for e in traj.events if e["kind"] == "turn_tagged"]
    assert [(e["turn"], e["tag"]) for e in tagged] == [(0, "discarded")]
    assert tagged[0]["reason"].startswith("retry")
    # the discarded turn's row holds only it (the retry's prompt does not extend it)
    assert traj.rows[traj.turns[0].row].metadata["turn_tags"] == {"0": ["discarded"]}
    assert len(traj.rows) == 2

    other = gw.close_session(gw.open_session("r2", "g"), reward=0.0)
    res = compute_advantages([traj, other], GRPOConfig(scale_by_std=False))
    assert res.metrics["discarded_turns"] == 1 and res.metrics["summarizer_turns"] == 0
    assert res.metrics["loss_excluded_turns"] == 1 and res.metrics["loss_excluded_rows"] == 1
    assert res.metrics["loss_excluded_tokens"] == len(traj.turns[0].output_ids)
    assert [r.row.turns for r in res.rows] == [[1, 2]]  # the discarded row is left out
    keep_all = compute_advantages([traj, other], GRPOConfig(scale_by_std=False, exclude_turn_tags=()))
    assert len(keep_all.rows) == 2 and keep_all.metrics["loss_excluded_tokens"] == 0


async def test_cancelled_turn_is_tagged_discarded(qwen3):
    agent_box = []

    def script(prompt_ids, params, index):
        agent_box[0].cancel(message="stopped by the user")
        return {"text": CALL}

    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, script))
    agent = agent_on(gw)
    agent_box.append(agent)
    result = await agent.invoke_async("17+25?")
    assert result.stop_reason == "cancelled"
    traj = gw.close_session("r")
    assert len(traj.turns) == 1 and traj.turns[0].tags == ["discarded"]
    assert traj.rows[0].metadata["turn_tags"] == {"0": ["discarded"]}
    assert "cancel" in next(e["reason"] for e in traj.events if e["kind"] == "turn_tagged")


def test_tagged_span_masking_inside_a_row_keeps_the_other_turns():
    from strands_art.trajectory import Row, Trajectory, Turn

    row = Row([1, 2, 3, 4, 5, 6], [0, 1, 1, 0, 1, 1], [0.0, -0.1, -0.2, 0.0, -0.3, -0.4], rollout_id="a")
    row.turns, row.turn_spans = [0, 1], [[1, 3], [4, 6]]
    row.metadata["turn_tags"] = {"1": ["summarizer"]}
    turns = [Turn(0, [1], [2, 3], [-0.1, -0.2], "stop"), Turn(1, [1, 2, 3, 4], [5, 6], [-0.3, -0.4], "stop")]
    turns[1].tags = ["summarizer"]
    a = Trajectory("a", "g", turns=turns, rows=[row], reward=1.0)
    b = Trajectory("b", "g", rows=[Row([1, 2], [0, 1], [0.0, -0.1], rollout_id="b")], reward=0.0)
    default = compute_advantages([a, b])
    assert default.rows[0].row.loss_mask == [0, 1, 1, 0, 1, 1] and default.metrics["summarizer_turns"] == 1
    strict = compute_advantages([a, b], GRPOConfig(exclude_turn_tags=["discarded", "summarizer"]))
    assert strict.rows[0].row.loss_mask == [0, 1, 1, 0, 0, 0]
    assert strict.metrics["loss_excluded_tokens"] == 2 and row.loss_mask == [0, 1, 1, 0, 1, 1]
    with pytest.raises(ValueError, match="list of tag names"):
        GRPOConfig(exclude_turn_tags="discarded")


def test_summarizer_call_signature():
    ask = {"role": "user", "content": [{"text": SUMMARIZE_REQUEST}]}
    assert is_summarizer_call([ask], None)
    assert not is_summarizer_call([ask], [{"name": "add"}])
    assert not is_summarizer_call(
        [{"role": "user", "content": [{"text": "Please summarize this file."}]}], None
    )
    assert not is_summarizer_call([], None)
