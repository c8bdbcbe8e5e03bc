"""The conversion path's reuse is exact (issue 26 item 3): converting a request with the session's
last recorded request reused (:class:`~strands_art.conversion.openai.RequestKnown`) gives the same
messages for the gateway and the same events as converting every message again, whatever the
client rewrites between requests (reasoning dropped, arguments re-serialized, text edited,
images added, messages inserted, ``content: null``) and whatever the gateway produced (repeated
answer texts included, which move the text look-up to the newer message)."""

from __future__ import annotations

import copy
import json

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from strands_art.backends.scripted import ScriptedBackend
from strands_art.conversion.openai import openai_request
from strands_art.conversion.session import SessionConversion
from strands_art.gateway import RolloutGateway
from strands_art.history.normalize import MessageError

TEXTS = ["", "ok", "done", "[blank text]"]
PNG = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}

# one produced answer per turn: (calls?, text, reasoning)
_answers = st.lists(
    st.tuples(st.booleans(), st.sampled_from(TEXTS), st.sampled_from([None, "r", "\nthink\n"])),
    min_size=1,
    max_size=6,
)
# one client edit per request: (kind, position seed)
_edits = st.lists(
    st.lists(
        st.tuples(
            st.sampled_from(["drop_reasoning", "respace", "edit_text", "image", "insert", "null_content"]),
            st.integers(0, 50),
        ),
        max_size=3,
    ),
    min_size=6,
    max_size=6,
)


def _produced(k: int, calls: bool, text: str, reasoning: str | None) -> dict:
    msg: dict = {"role": "assistant", "content": text}
    if reasoning is not None:
        msg["reasoning_content"] = reasoning
    if calls:
        msg["tool_calls"] = [
            {"id": f"call_{k}", "type": "function", "function": {"name": "add", "arguments": f'{{"a": {k}}}'}}
        ]
    return msg


def _after(k: int, produced: dict) -> dict:
    """The message the harness adds after answer ``k``: its tool result, or a user message."""
    if produced.get("tool_calls"):
        return {"role": "tool", "tool_call_id": f"call_{k}", "content": f"result {k}"}
    return {"role": "user", "content": f"next {k}"}


def _edit(request: list[dict], kind: str, seed: int) -> None:
    i = seed % len(request)
    m = request[i]
    if kind == "drop_reasoning":
        for m in request:
            m.pop("reasoning_content", None)
    elif kind == "respace":
        for m in request:
            for tc in m.get("tool_calls") or []:
                tc["function"]["arguments"] = json.dumps(json.loads(tc["function"]["arguments"]), indent=1)
    elif kind == "edit_text" and isinstance(m.get("content"), str):
        m["content"] += "!"
    elif kind == "image" and m["role"] == "user" and isinstance(m["content"], str):
        m["content"] = [{"type": "text", "text": m["content"]}, PNG]
    elif kind == "insert" and m["role"] == "user":  # an exchange the gateway never produced
        request[i + 1 : i + 1] = [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"}]
    elif kind == "null_content" and m["role"] == "assistant" and m.get("tool_calls"):
        m["content"] = None


def _convert(conversion: SessionConversion, request: list[dict], reuse: bool):
    try:
        incoming = openai_request(copy.deepcopy(request), conversion.known if reuse else None)
    except MessageError as exc:  # refused: the error is compared
        return None, str(exc)
    return incoming, conversion.canonical(incoming)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(answers=_answers, edits=_edits)
# the same answer text twice, with other reasoning: the echo of the first then maps to the second
@example(answers=[(False, "ok", None), (False, "ok", "r"), (False, "done", None)], edits=[[]] * 6)
def test_reusing_the_last_request_converts_exactly_as_converting_everything(qwen3, answers, edits) -> None:
    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, []))
    reused, full = SessionConversion(gw, gw.open_session("a")), SessionConversion(gw, gw.open_session("b"))
    conversation: list[dict] = [{"role": "system", "content": "calc"}, {"role": "user", "content": "go"}]
    for k, (calls, text, reasoning) in enumerate(answers):
        request = copy.deepcopy(conversation)
        for kind, seed in edits[k]:
            _edit(request, kind, seed)
        incoming, out = _convert(reused, request, reuse=True)
        _, expected = _convert(full, request, reuse=False)
        assert out == expected
        if incoming is None:  # refused by both, nothing to record
            continue
        produced = _produced(k, calls, text, reasoning)  # the turn's answer, recorded
        reused.remember(produced, incoming, out)
        full.remember(produced)
        conversation += [copy.deepcopy(produced), _after(k, produced)]

    def events(rollout_id: str) -> list[dict]:
        return gw.trajectory(rollout_id).events

    assert events("a") == events("b")
