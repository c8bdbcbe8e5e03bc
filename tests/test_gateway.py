"""RolloutGateway: tree capture, forks with reasons, budget, failures, overrides, concurrency."""

from __future__ import annotations

import asyncio
import json

import pytest
from support.strands_tools import ADD_TOOL, ECHO_TOOL

from strands_art.backends.base import BackendError, SampleResult, SamplingParams
from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import ContextBudgetExceeded, RolloutGateway, SamplingOverrideRejected
from strands_art.history.normalize import MessageError

CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call><|im_end|>'
SYSTEM = {"role": "system", "content": "You are a calculator."}
USER = {"role": "user", "content": "What is 1+2?"}


def enc(tok, text):
    return tok.backend_tokenizer.encode(text, add_special_tokens=False).ids


async def tool_loop(gw, sid, tools=(ADD_TOOL,), deliver=None):
    msgs = [SYSTEM, USER]
    r0 = await gw.generate(sid, msgs, list(tools), deliver=deliver)
    msgs = msgs + [
        r0.assistant_message,
        {"role": "tool", "tool_call_id": r0.tool_calls[0].id, "content": "3"},
    ]
    r1 = await gw.generate(sid, msgs, list(tools))
    return r0, r1, msgs


async def test_tool_loop_extends_one_row_with_exact_mask_and_logprobs(qwen3):
    backend = ScriptedBackend(qwen3, [{"text": CALL, "logprobs": None}, {"text": "It is 3.<|im_end|>"}])
    gw = RolloutGateway(qwen3, backend)
    sid = gw.open_session("r")
    r0, r1, _ = await tool_loop(gw, sid)
    assert r0.finish_reason == "tool_calls"
    assert r0.tool_calls[0].name == "add" and r0.tool_calls[0].arguments == {"a": 1, "b": 2}
    assert r1.text == "It is 3." and r1.finish_reason == "stop"
    traj = gw.close_session(sid, reward=1.0)
    assert len(traj.rows) == 1 and traj.events == []
    row = traj.rows[0]
    t0, t1 = traj.turns
    assert t0.output_ids == enc(qwen3, CALL)
    assert t1.prompt_ids[: len(t0.prompt_ids) + len(t0.output_ids)] == t0.prompt_ids + t0.output_ids
    assert row.input_ids == t1.prompt_ids + t1.output_ids
    expected_mask = (
        [0] * len(t0.prompt_ids)
        + [1] * len(t0.output_ids)
        + [0] * (len(t1.prompt_ids) - len(t0.prompt_ids) - len(t0.output_ids))
        + [1] * len(t1.output_ids)
    )
    assert row.loss_mask == expected_mask
    assert [lp for lp, m in zip(row.logprobs, row.loss_mask, strict=True) if m] == t0.logprobs + t1.logprobs
    assert all(lp == 0.0 for lp, m in zip(row.logprobs, row.loss_mask, strict=True) if not m)
    assert row.turn_spans == [
        [len(t0.prompt_ids), len(t0.prompt_ids) + len(t0.output_ids)],
        [len(t1.prompt_ids), len(row)],
    ]
    assert row.reward == 1.0 and traj.reward == 1.0
    # the backend received exactly the recorded prompts
    assert backend.prompts == [t0.prompt_ids, t1.prompt_ids]


async def test_reserialized_tool_arguments_fork_with_a_reason(qwen3):
    backend = ScriptedBackend(qwen3, [{"text": CALL}, {"text": "3<|im_end|>"}])
    gw = RolloutGateway(qwen3, backend)
    sid = gw.open_session("r")
    r0 = await gw.generate(sid, [SYSTEM, USER], [ADD_TOOL])
    drifted = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": "add", "arguments": '{"b":2, "a":1}'}}
        ],
    }
    msgs = [SYSTEM, USER, drifted, {"role": "tool", "tool_call_id": "x", "content": "3"}]
    await gw.generate(sid, msgs, [ADD_TOOL])
    traj = gw.close_session(sid)
    assert len(traj.rows) == 2
    (fork,) = [e for e in traj.events if e["kind"] == "fork"]
    assert fork["turn"] == 1 and fork["message"] == 2
    prompt0_len = len(traj.turns[0].prompt_ids)
    # the first differing token is inside the sampled arguments: after '{"' comes 'a' vs 'b'
    assert prompt0_len < fork["position"] < prompt0_len + len(r0.turn.output_ids)
    assert "differs" in fork["reason"]
    # the forked row repeats the shared context as masked tokens and holds only turn 1's output
    assert traj.rows[1].turns == [1] and sum(traj.rows[1].loss_mask) == len(traj.turns[1].output_ids)


async def test_qwen3_dropping_earlier_think_blocks_forks(qwen3):
    out0 = "<think>\nadd them\n</think>\n\nThe answer is 3.<|im_end|>"
    backend = ScriptedBackend(qwen3, [{"text": out0}, {"text": "4<|im_end|>"}])
    gw = RolloutGateway(qwen3, backend)
    sid = gw.open_session("r")
    r0 = await gw.generate(sid, [USER], None)
    assert r0.reasoning == "add them" and r0.text == "The answer is 3."
    msgs = [USER, r0.assistant_message, {"role": "user", "content": "And 2+2?"}]
    await gw.generate(sid, msgs, None)
    traj = gw.close_session(sid)
    assert len(traj.rows) == 2
    (fork,) = [e for e in traj.events if e["kind"] == "fork"]
    assert fork["message"] == 1  # the assistant message whose <think> block the template dropped
    assert "<think>" in qwen3.decode(traj.rows[0].input_ids)
    assert "add them" not in qwen3.decode(traj.turns[1].prompt_ids)


async def test_context_budget_raises_and_records_nothing(qwen3):
    backend = ScriptedBackend(qwen3, [{"text": "x<|im_end|>"}])
    gw = RolloutGateway(qwen3, backend, max_context_tokens=10)
    sid = gw.open_session("r")
    with pytest.raises(ContextBudgetExceeded) as err:
        await gw.generate(sid, [SYSTEM, USER], None)
    assert err.value.max_context_tokens == 10 and err.value.prompt_tokens > 10
    assert backend.prompts == []
    traj = gw.close_session(sid)
    assert traj.turns == [] and traj.rows == []


async def test_max_new_tokens_is_capped_by_the_remaining_budget(qwen3):
    seen = []

    class Recorder:
        name = "recorder"

        async def sample(self, prompt_ids, params):
            seen.append(params)
            return SampleResult([151645], [-0.1], "stop")

        async def aclose(self):
            pass

    gw = RolloutGateway(qwen3, Recorder(), max_context_tokens=40, sampling=SamplingParams(max_new_tokens=100))
    sid = gw.open_session("r")
    r = await gw.generate(sid, [USER], None)
    assert seen[0].max_new_tokens == 40 - len(r.turn.prompt_ids)
    assert 151645 in seen[0].stop_token_ids  # <|im_end|> from the template


async def test_backend_failure_records_nothing_and_the_session_continues(qwen3):
    calls = {"n": 0}

    class Flaky:
        name = "flaky"

        async def sample(self, prompt_ids, params):
            calls["n"] += 1
            if calls["n"] == 1:
                raise BackendError("connection refused")
            return SampleResult(enc(qwen3, "ok<|im_end|>"), [-0.2, -0.3], "stop")

        async def aclose(self):
            pass

    gw = RolloutGateway(qwen3, Flaky())
    sid = gw.open_session("r")
    with pytest.raises(BackendError):
        await gw.generate(sid, [USER], None)
    assert gw.trajectory(sid).turns == []
    r = await gw.generate(sid, [USER], None)
    traj = gw.close_session(sid)
    assert r.text == "ok" and len(traj.turns) == 1 and traj.turns[0].index == 0 and len(traj.rows) == 1


async def test_a_failed_delivery_records_nothing_and_the_next_turn_extends_the_same_row(qwen3):
    backend = ScriptedBackend(qwen3, [{"text": CALL}, {"text": CALL}, {"text": "It is 3.<|im_end|>"}])
    gw = RolloutGateway(qwen3, backend)
    sid = gw.open_session("r")
    delivered = []

    async def gone(result):
        delivered.append(result.tool_calls[0].id)
        raise ConnectionResetError("the client went away")

    with pytest.raises(ConnectionResetError):
        await gw.generate(sid, [SYSTEM, USER], [ADD_TOOL], deliver=gone)
    traj = gw.trajectory(sid)
    assert traj.turns == [] and traj.rows == [] and traj.events == []

    async def ok(result):
        delivered.append(result.tool_calls[0].id)
        assert gw.trajectory(sid).turns == []  # delivered before it is recorded

    r0, r1, _ = await tool_loop(gw, sid, deliver=ok)
    traj = gw.close_session(sid)
    first = gw.renderer.family.call_id("r", 0, 0)
    assert delivered == [first, first]  # the retry is turn 0 again, same call id
    assert backend.prompts[0] == backend.prompts[1] == traj.turns[0].prompt_ids
    assert len(traj.turns) == 2 and len(traj.rows) == 1 and r1.text == "It is 3."


@pytest.mark.parametrize(
    "messages, problem",
    [
        ([{"role": "wizard", "content": "hi"}], "unknown role"),
        ([{"role": "user", "content": 42}], "content must be"),
        (
            [
                USER,
                {
                    "role": "assistant",
                    "tool_calls": [{"function": {"name": "add", "arguments": "{not json"}}],
                },
            ],
            "not valid JSON",
        ),
        (
            [USER, {"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}],
            "no function name",
        ),
        ([], "non-empty"),
    ],
)
async def test_malformed_messages_are_rejected_before_sampling(qwen3, messages, problem):
    backend = ScriptedBackend(qwen3, [{"text": "x<|im_end|>"}])
    gw = RolloutGateway(qwen3, backend)
    sid = gw.open_session("r")
    with pytest.raises(MessageError, match=problem):
        await gw.generate(sid, messages, None)
    assert backend.prompts == [] and gw.trajectory(sid).turns == []


async def test_sampling_overrides_are_ignored_with_an_event_or_rejected(qwen3):
    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, [{"text": "x<|im_end|>"}]))
    sid = gw.open_session("r")
    await gw.generate(sid, [USER], None, sampling_overrides={"temperature": 0.0})
    assert [e["kind"] for e in gw.trajectory(sid).events] == ["sampling_override_ignored"]
    strict = RolloutGateway(qwen3, ScriptedBackend(qwen3, []), on_sampling_override="reject")
    sid2 = strict.open_session("r2")
    with pytest.raises(SamplingOverrideRejected):
        await strict.generate(sid2, [USER], None, sampling_overrides={"temperature": 0.0})


async def test_one_session_is_serialized_and_sessions_run_concurrently(qwen3):
    state = {"active": 0, "peak": 0}

    class Slow:
        name = "slow"

        async def sample(self, prompt_ids, params):
            state["active"] += 1
            state["peak"] = max(state["peak"], state["active"])
            await asyncio.sleep(0.05)
            state["active"] -= 1
            return SampleResult([151645], [-0.1], "stop")

        async def aclose(self):
            pass

    gw = RolloutGateway(qwen3, Slow())
    a, b = gw.open_session("a"), gw.open_session("b")
    await asyncio.gather(gw.generate(a, [USER], None), gw.generate(a, [USER], None))
    assert state["peak"] == 1
    await asyncio.gather(gw.generate(a, [USER], None), gw.generate(b, [USER], None))
    assert state["peak"] == 2


async def test_botched_and_unknown_tool_calls_are_flagged_not_raised(qwen3):
    botched = '<tool_call>\n{"name": "add", "arguments": {"a": 1,}\n</tool_call><|im_end|>'
    unknown = '<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call><|im_end|>'
    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, [{"text": botched}, {"text": unknown}]))
    sid = gw.open_session("r")
    r0 = await gw.generate(sid, [USER], [ADD_TOOL])
    assert r0.ill_formed and r0.tool_calls == [] and "<tool_call>" in r0.text and r0.finish_reason == "stop"
    r1 = await gw.generate(sid, [USER], [ADD_TOOL])
    assert [c.name for c in r1.tool_calls] == ["rm_rf"]
    assert any("rm_rf" in p for p in r1.problems)
    traj = gw.close_session(sid)
    assert [t["turn"] for t in traj.metadata["ill_formed_turns"]] == [0, 1]
    assert traj.turns[0].ill_formed is True


async def test_template_without_tool_support_uses_the_hermes_convention(smollm2_tok):
    call = '<tool_call>\n{"name": "echo", "arguments": {"text": "hi"}}\n</tool_call><|im_end|>'
    gw = RolloutGateway(
        smollm2_tok, ScriptedBackend(smollm2_tok, [{"text": call}, {"text": "done<|im_end|>"}])
    )
    assert not gw.renderer.supports_tools
    sid = gw.open_session("r")
    r0, r1, msgs = await tool_loop(gw, sid, tools=(ECHO_TOOL,))
    assert r0.tool_calls[0].arguments == {"text": "hi"}
    prompt_text = smollm2_tok.decode(r1.turn.prompt_ids)
    assert "<tools>" in prompt_text and json.dumps(ECHO_TOOL["function"]["name"]) in prompt_text
    assert "<tool_response>\n3\n</tool_response>" in prompt_text
    assert len(gw.close_session(sid).rows) == 1


async def test_length_finish_is_recorded_as_truncation(qwen3):
    gw = RolloutGateway(
        qwen3, ScriptedBackend(qwen3, [{"text": "a b c d e f g"}]), sampling=SamplingParams(max_new_tokens=3)
    )
    sid = gw.open_session("r")
    r = await gw.generate(sid, [USER], None)
    assert r.finish_reason == "length" and len(r.turn.output_ids) == 3
    assert gw.close_session(sid).metadata["truncated_turns"] == [0]


# ---------------------------------------------------------------------------- backend values checked
class RawBackend:
    """Answers each call with the next (ids, logprobs) pair as given, unchecked."""

    name = "raw"

    def __init__(self, answers):
        self.answers = list(answers)

    async def sample(self, prompt_ids, params):
        ids, lps = self.answers.pop(0)
        return SampleResult(output_ids=ids, logprobs=lps, finish_reason="stop")

    async def aclose(self):
        pass


@pytest.mark.parametrize(
    ("ids", "lps", "message"),
    [
        ([2**31], [-0.1], r"token ID 2147483648 at position 0, outside the vocabulary \[0, 151669\)"),
        ([151669], [-0.1], r"token ID 151669 at position 0"),
        ([5, -1], [-0.1, -0.1], r"token ID -1 at position 1"),
        ([5], [float("nan")], r"logprob nan at position 0"),
        ([5], [float("-inf")], r"logprob -inf at position 0"),
        ([5, 6], [-0.1, 0.5], r"logprob 0.5 at position 1; a logprob is a finite number <= 0"),
        ([5] * 9, [-0.1] * 9, r"9 tokens but at most 8 were asked for"),
    ],
)
async def test_impossible_backend_values_are_a_backend_error_and_nothing_is_recorded(
    qwen3, ids, lps, message
):
    good = enc(qwen3, "It is 3.<|im_end|>")
    backend = RawBackend([(ids, lps), (good, [-0.25] * len(good))])
    gw = RolloutGateway(qwen3, backend, sampling=SamplingParams(max_new_tokens=8))
    sid = gw.open_session("r")
    with pytest.raises(BackendError, match=message):
        await gw.generate(sid, [USER])
    assert gw.trajectory(sid).turns == [] and gw.trajectory(sid).rows == []
    # the session goes on: the next turn is recorded normally
    r = await gw.generate(sid, [USER])
    traj = gw.close_session(sid)
    assert r.text == "It is 3." and len(traj.turns) == 1
    assert traj.rows[0].input_ids[-len(good) :] == good and sum(traj.rows[0].loss_mask) == len(good)


async def test_zero_logprob_and_last_vocabulary_id_are_accepted(qwen3):
    eot = enc(qwen3, "<|im_end|>")
    backend = RawBackend([([151668, *eot], [0.0, -0.0])])
    gw = RolloutGateway(qwen3, backend)
    sid = gw.open_session("r")
    r = await gw.generate(sid, [USER])
    assert r.turn.output_ids == [151668, *eot] and r.turn.logprobs == [0.0, -0.0]
