"""Semantically equal message forms are not edits (issue 14, items 1 and 1b).

Real Qwen3 tokenizer and template, scripted backend (the sampled text is fixed, the tokens are
the real tokenizer's). A harness that sends the previous turn's reasoning under ``reasoning``
instead of ``reasoning_content`` (item 1), content as a list of text parts, ``null`` content,
arguments with other key order and spacing: one row in linear mode, the same rows as the
``reasoning_content`` control in tree mode. A harness that drops the sampled reasoning (item 1b):
``reasoning_omitted="heal"`` keeps one row, ``"reset"`` starts a new one with reason code
``reasoning_omitted``.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.history.normalize import MessageError, normalize_message

SHELL = {
    "type": "function",
    "function": {
        "name": "shell",
        "description": "Run a shell command.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
            "required": ["command"],
        },
    },
}
START = [
    {"role": "system", "content": "You migrate Java 8 projects to Java 17."},
    {"role": "user", "content": "Migrate the repository."},
]
THINK = "<think>\nLet me check the build.\n</think>\n\n"
CALL = (
    '<tool_call>\n{"name": "shell", "arguments": {"command": "mvn -q verify", "timeout": 300}}\n</tool_call>'
)
OUTPUTS = [THINK + CALL + "<|im_end|>", THINK + CALL + "<|im_end|>", "Done.<|im_end|>"]


def _same(msg: dict) -> dict:
    return msg


def _alias(msg: dict) -> dict:
    out = {k: v for k, v in msg.items() if k != "reasoning_content"}
    if msg.get("reasoning_content"):
        out["reasoning"] = msg["reasoning_content"]
    return out


def _omit(msg: dict) -> dict:
    return {k: v for k, v in msg.items() if k != "reasoning_content"}


def _loop(qwen3, mode: str, echo, outputs=OUTPUTS, **cfg):
    gw = RolloutGateway(
        qwen3, ScriptedBackend(qwen3, [{"text": t} for t in outputs]), history_mode=mode, **cfg
    )
    sid = gw.open_session("r")

    async def run():
        msgs = list(START)
        for k in range(len(outputs)):
            r = await gw.generate(sid, msgs, [SHELL])
            msgs = msgs + [echo(r.assistant_message)]
            for c in r.tool_calls:
                msgs.append({"role": "tool", "tool_call_id": c.id, "content": f"[INFO] BUILD SUCCESS {k}"})
        return gw.close_session(sid)

    return asyncio.run(run())


def _kinds(traj, kind):
    return [e for e in traj.events if e["kind"] == kind]


@pytest.mark.parametrize("mode", ["linear", "tree"])
def test_issue_input_reasoning_under_the_reasoning_key_is_the_control(qwen3, mode):
    control = _loop(qwen3, mode, _same)
    aliased = _loop(qwen3, mode, _alias)
    assert len(control.rows) == 1
    assert len(aliased.rows) == 1
    assert [t.prompt_ids for t in aliased.turns] == [t.prompt_ids for t in control.turns]
    assert not _kinds(aliased, "reset") and not _kinds(aliased, "fork")


def test_issue_input_omitted_reasoning_heals_by_default(qwen3):
    traj = _loop(qwen3, "linear", _omit)
    assert len(traj.rows) == 1
    heals = _kinds(traj, "heal")
    assert [e.get("reasoning_omitted") for e in heals] == [[2], [2, 4]]
    counters = traj.rows[0].metadata["history"]
    assert counters["reasoning_omitted"] == 2 and counters.get("resets", 0) == 0
    # the row is what the model conditioned on: the sampled reasoning stays in the context
    row = traj.rows[0]
    assert row.input_ids[: len(traj.turns[1].prompt_ids)] == traj.turns[1].prompt_ids
    assert traj.turns[1].prompt_ids[-len(traj.turns[0].output_ids) - 20 :].count(151667) == 1  # <think>


def test_issue_input_omitted_reasoning_resets_under_the_reset_policy(qwen3):
    traj = _loop(qwen3, "linear", _omit, reasoning_omitted="reset")
    resets = _kinds(traj, "reset")
    assert [(e["reason"], e["message"], e["role"]) for e in resets] == [
        ("reasoning_omitted", 2, "assistant"),
        ("reasoning_omitted", 4, "assistant"),
    ]
    assert len(traj.rows) == 3


def test_reasoning_policy_is_validated(qwen3):
    with pytest.raises(ValueError, match="reasoning_omitted"):
        _loop(qwen3, "linear", _same, reasoning_omitted="ignore")


def test_different_reasoning_is_still_an_edit(qwen3):
    traj = _loop(
        qwen3,
        "linear",
        lambda m: {**m, "reasoning_content": "I changed my mind."} if m.get("reasoning_content") else m,
    )
    assert [e["reason"] for e in _kinds(traj, "reset")] == ["message_edited", "message_edited"]


def test_conflicting_reasoning_fields_are_a_clear_error():
    msg = {"role": "assistant", "content": "", "reasoning": "a", "reasoning_content": "b"}
    with pytest.raises(MessageError, match="conflicting reasoning"):
        normalize_message(3, msg)
    same = {"role": "assistant", "content": "", "reasoning": "a", "reasoning_content": "a"}
    assert normalize_message(3, same)["reasoning_content"] == "a"
    with pytest.raises(MessageError, match="reasoning must be a string"):
        normalize_message(3, {"role": "assistant", "content": "", "reasoning": {"effort": "high"}})


# ------------------------------------------------------------------ property: re-encodings


@st.composite
def reencoder(draw):
    """A random semantically equal re-encoding of an assistant message or a tool result."""
    choices = draw(st.lists(st.integers(0, 2**16), min_size=8, max_size=8))

    def encode(msg: dict) -> dict:
        out: dict = {"role": msg["role"]}
        text = msg.get("content") or ""
        form = choices[0] % 4
        if form == 0:
            out["content"] = text
        elif form == 1 and text:  # a list of text parts split at a random point
            cut = choices[1] % (len(text) + 1)
            out["content"] = [{"type": "text", "text": text[:cut]}, {"type": "text", "text": text[cut:]}]
        elif form == 2:
            out["content"] = [{"type": "text", "text": text}]
        else:
            out["content"] = text or None
        if msg["role"] == "tool":
            out["tool_call_id"] = msg["tool_call_id"]
            return out
        if msg.get("reasoning_content"):
            name = ("reasoning_content", "reasoning", "thinking")[choices[2] % 3]
            out[name] = msg["reasoning_content"]
        elif choices[2] % 2:
            out["reasoning_content"] = ["", None, "\n\n"][choices[3] % 3]
        calls = []
        for c in msg.get("tool_calls", []):
            args = c["function"]["arguments"]
            args = json.loads(args) if isinstance(args, str) else args
            items = list(args.items())
            if choices[4] % 2:
                items.reverse()
            style = choices[5] % 4
            rendered = [
                dict(items),
                json.dumps(dict(items)),
                json.dumps(dict(items), separators=(",", ":")),
                json.dumps(dict(items), indent=2, sort_keys=True),
            ][style]
            call = {"id": c["id"], "function": {"name": c["function"]["name"], "arguments": rendered}}
            if choices[6] % 2:
                call["type"] = "function"
            calls.append(call)
        if calls:
            out["tool_calls"] = calls
        return out

    return encode


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(encode=reencoder(), think=st.booleans())
def test_semantically_equal_reencodings_stay_one_linear_row(qwen3, encode, think):
    outputs = OUTPUTS if think else [CALL + "<|im_end|>", CALL + "<|im_end|>", "Done.<|im_end|>"]
    traj = _loop(qwen3, "linear", encode, outputs)
    assert len(traj.rows) == 1, [e for e in traj.events if e["kind"] != "heal"]
    assert not _kinds(traj, "reset")
    row, last = traj.rows[0], traj.turns[-1]
    assert row.input_ids == last.prompt_ids + last.output_ids
    assert sum(row.loss_mask) == sum(len(t.output_ids) for t in traj.turns)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(encode=reencoder())
def test_semantically_equal_reencodings_have_explained_tree_rows(qwen3, encode):
    traj = _loop(qwen3, "tree", encode)
    forks = _kinds(traj, "fork")
    assert len(traj.rows) == len(forks) + 1
    assert all(e.get("reason") for e in forks)
    assert sum(sum(r.loss_mask) for r in traj.rows) == sum(len(t.output_ids) for t in traj.turns)
    for t in traj.turns:  # every row holds what the backend received, then what it sampled
        assert any(r.input_ids[: len(t.prompt_ids)] == t.prompt_ids for r in traj.rows)
