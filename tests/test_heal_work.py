"""The heal path stays proportional to a turn's new messages: the messages a harness re-sends
unchanged are not normalized or scanned again (issue 28, item 9: a lone-surrogate scan of the whole
history every turn made the heal grow 2.7x from 10K to 100K tokens). Counted work, no timing."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.strands_tools import ADD_TOOL

import strands_art.history.normalize as normalize_mod
from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.history.known import same_as_normalized
from strands_art.history.normalize import MessageError, normalize_message

CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call><|im_end|>'


def _text_of(msg: dict) -> int:
    """Characters of a raw message's text fields (what a scan of it reads)."""
    n = len(msg.get("content") or "")
    for tc in msg.get("tool_calls") or []:
        n += len(tc["function"]["arguments"])
    return n


@pytest.mark.parametrize("mode", ["linear", "tree"])
def test_turn_work_on_committed_messages_does_not_grow_with_the_history(qwen3, monkeypatch, mode) -> None:
    """Per turn, only the new tool result is normalized (the echoed answer is the one the gateway
    gave and remembered); the committed messages (tool results growing to 72K characters) are
    scanned zero characters."""
    calls: list[tuple[int, int]] = []  # (index, characters) per message normalized in full
    real = normalize_message

    def counting(index, msg, *args, **kwargs):
        calls.append((index, _text_of(msg) if isinstance(msg, dict) else 0))
        return real(index, msg, *args, **kwargs)

    monkeypatch.setattr(normalize_mod, "normalize_message", counting)
    turns = 6
    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, [{"text": CALL}] * turns), history_mode=mode)
    gw.open_session("r")
    msgs: list[dict] = [{"role": "system", "content": "calc"}, {"role": "user", "content": "add"}]
    per_turn = []

    async def run() -> None:
        nonlocal msgs
        for k in range(turns):
            calls.clear()
            request = json.loads(json.dumps(msgs))  # a harness's fresh objects, equal text
            committed = len(msgs) - 2 if k else 0  # messages of the last request (known-good)
            r = await gw.generate("r", request, [ADD_TOOL])
            per_turn.append(
                (
                    len([i for i, _ in calls if i < len(request)]),
                    sum(c for i, c in calls if i < committed),
                )
            )
            echo = json.loads(json.dumps(r.assistant_message))
            msgs = msgs + [
                echo,
                {
                    "role": "tool",
                    "tool_call_id": echo["tool_calls"][0]["id"],
                    "content": "x" * (12_000 * (k + 1)),
                },
            ]

    asyncio.run(run())
    # turn 0 normalizes its 2 messages; every later turn the new tool result only
    assert per_turn == [(2, 0)] + [(1, 0)] * (turns - 1)
    work = gw._session("r").known.work
    assert work.messages == 2 + (turns - 1)
    new_text = len("calc") + len("add") + sum(12_000 * k for k in range(1, turns))
    assert new_text <= work.chars <= new_text + 64 * work.messages  # + keys, role, ids: O(1) each


def test_a_changed_committed_message_is_normalized_and_checked_again(qwen3) -> None:
    """Known-good means *equal*: a re-sent message that changed (here: a lone surrogate slipped
    into an old tool result) is normalized again and refused."""
    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, [{"text": CALL}] * 3), history_mode="linear")
    gw.open_session("r")
    base = [{"role": "system", "content": "calc"}, {"role": "user", "content": "add"}]

    async def run() -> None:
        r = await gw.generate("r", base, [ADD_TOOL])
        echo = json.loads(json.dumps(r.assistant_message))
        tool = {"role": "tool", "tool_call_id": echo["tool_calls"][0]["id"], "content": "3"}
        await gw.generate("r", base + [echo, tool], [ADD_TOOL])
        bad = dict(base[1], content="add \ud800")
        with pytest.raises(MessageError, match="message 1: content holds a lone surrogate"):
            await gw.generate("r", [base[0], bad, echo, tool], [ADD_TOOL])

    asyncio.run(run())
    assert len(gw._session("r").trajectory.turns) == 2


# --- same_as_normalized is exact: True only when normalizing again would give the same message
_texts = st.sampled_from(["", "a", "\n", "b", "\n\n", "<think>"])
_args = st.one_of(
    st.none(), st.sampled_from(["", "{}", '{"a": 1}', '{"a":1}']), st.just({"a": 1}), st.just({"a": True})
)
_call = st.fixed_dictionaries(
    {"function": st.fixed_dictionaries({"name": st.sampled_from(["f", "g"]), "arguments": _args})},
    optional={"id": st.sampled_from([None, "", "c1", "c2"]), "type": st.just("function")},
)
_raw = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system"])},
    optional={
        "content": st.one_of(
            st.none(),
            _texts,
            st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _texts}), max_size=2),
        ),
        "reasoning_content": st.one_of(st.none(), _texts),
        "reasoning": st.one_of(st.none(), _texts),
        "thinking": st.one_of(st.none(), _texts),
        "tool_calls": st.one_of(st.none(), st.lists(_call, max_size=2)),
        "tool_call_id": st.sampled_from([None, "", "c1"]),
        "name": st.sampled_from([None, "", "add"]),
    },
)


def _normalized(msg: dict) -> dict | None:
    try:
        return normalize_message(0, msg)
    except MessageError:
        return None


@given(_raw, _raw)
def test_same_as_normalized_implies_normalizing_gives_the_known_message(raw: dict, other: dict) -> None:
    known = _normalized(other)
    if known is None:
        return
    if same_as_normalized(raw, known):
        assert _normalized(raw) == known


@given(_raw)
def test_a_message_is_the_same_as_its_own_plain_normalized_form(raw: dict) -> None:
    """The common case is recognised: a message re-sent in the normalized form (string content,
    JSON-string arguments) is the same; that is what keeps the heal's work proportional."""
    known = _normalized(raw)
    if known is None:
        return
    resent = json.loads(json.dumps(known))
    if all(isinstance(tc["function"]["arguments"], str) for tc in known.get("tool_calls", [])):
        assert same_as_normalized(resent, known)


def test_a_heal_extends_the_saved_history_in_place_and_takes_it_back_when_not_committed(qwen3) -> None:
    """The heal hands the saved tokens over without a copy and appends the new ones in place;
    a turn that fails is not committed and the next request sees the saved history unchanged;
    recorded prompts never change afterwards."""
    from strands_art.backends.base import BackendError

    script = [{"text": CALL}, {"error": "backend down"}, {"text": CALL}, {"text": "3<|im_end|>"}]
    backend = ScriptedBackend(qwen3, script)
    gw = RolloutGateway(qwen3, backend, history_mode="linear")
    gw.open_session("r")
    base = [{"role": "system", "content": "calc"}, {"role": "user", "content": "add"}]

    async def run():
        r0 = await gw.generate("r", base, [ADD_TOOL])
        saved = list(r0.turn.prompt_ids) + list(r0.turn.output_ids)
        echo = json.loads(json.dumps(r0.assistant_message))
        msgs = base + [echo, {"role": "tool", "tool_call_id": echo["tool_calls"][0]["id"], "content": "3"}]
        with pytest.raises(BackendError):
            await gw.generate("r", msgs, [ADD_TOOL])
        failed = list(backend.prompts[1])
        r1 = await gw.generate("r", msgs, [ADD_TOOL])  # the same request again: the same prompt
        assert r1.turn.prompt_ids == failed and backend.prompts[1] == failed  # nothing was changed
        assert r1.turn.prompt_ids[: len(saved)] == saved
        p1 = list(r1.turn.prompt_ids)
        echo1 = json.loads(json.dumps(r1.assistant_message))
        msgs2 = msgs + [echo1, {"role": "tool", "tool_call_id": echo1["tool_calls"][0]["id"], "content": "6"}]
        r2 = await gw.generate("r", msgs2, [ADD_TOOL])
        assert r1.turn.prompt_ids == p1  # not extended by the next heal
        assert r2.turn.prompt_ids[: len(p1) + len(r1.turn.output_ids)] == p1 + list(r1.turn.output_ids)
        return gw.close_session("r")

    traj = asyncio.run(run())
    assert len(traj.turns) == 3 and len(traj.rows) == 1
    assert [e["kind"] for e in traj.events] == ["heal", "heal"]
