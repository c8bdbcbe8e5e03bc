"""The HTTP front's conversion is proportional to a turn's new messages (issue 26 item 3): the
messages a client re-sends unchanged are taken as the session's last recorded request left them,
not normalized, scanned or compared again. Counted work, no timing (as tests/test_heal_work.py
counts the gateway's heal). And the reuse changes nothing: the same conversation, with the
reuse switched off, gives the same rows, prompts and events."""

from __future__ import annotations

import copy
import json

import httpx
import pytest
from conftest import ADD_TOOL
from support.serve_helpers import gateway, running_front

import strands_art.conversion.openai as openai_mod
import strands_art.serve.app as app_mod
from strands_art.history.normalize import normalize_message

CALL = '<think>\nadding\n</think>\n\n<tool_call>\n{"name": "add", "arguments": {"a":1,"b":2}}\n</tool_call><|im_end|>'
PNG = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
CHAT = "/rollouts/r/v1/chat/completions"


def _chars(msg: dict) -> int:
    """Characters of a raw message's text fields (what a scan of it reads)."""
    content = msg.get("content")
    n = len(content) if isinstance(content, str) else 0
    for tc in msg.get("tool_calls") or []:
        args = tc["function"]["arguments"]
        n += len(args) if isinstance(args, str) else 0
    return n


async def _converse(base: str, turns: int, edit=None, after=None) -> list[list[dict]]:
    """``turns`` requests of a growing tool conversation, each answer echoed back as the client
    got it and a tool result growing by 12,000 characters a turn; ``edit(k, messages)`` changes
    request ``k`` (a rewriting client), ``after(k, messages)`` runs once it was answered.
    Returns the requests sent."""
    msgs: list[dict] = [{"role": "system", "content": "calc"}, {"role": "user", "content": "add"}]
    sent = []
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        for k in range(turns):
            request = copy.deepcopy(msgs)
            if edit is not None:
                edit(k, request)
            sent.append(request)
            r = await http.post(CHAT, json={"messages": request, "tools": [ADD_TOOL]})
            assert r.status_code == 200, r.text
            if after is not None:
                after(k, request)
            answer = r.json()["choices"][0]["message"]
            call_id = answer["tool_calls"][0]["id"]
            msgs = msgs + [
                answer,
                {"role": "tool", "tool_call_id": call_id, "content": "x" * (12_000 * (k + 1))},
            ]
    return sent


@pytest.mark.parametrize("mode", ["linear", "tree"])
async def test_front_work_per_request_does_not_grow_with_the_history(qwen3, monkeypatch, mode) -> None:
    """Request 0 converts its 2 messages; every later request only the 2 new ones (the echoed
    answer, converted once, and the new tool result). The re-sent history (tool results growing
    to 72K characters) is scanned zero characters."""
    calls: list[tuple[int, int]] = []  # (index, characters) per message the front normalized in full

    def counting(index, msg, *args, **kwargs):
        calls.append((index, _chars(msg) if isinstance(msg, dict) else 0))
        return normalize_message(index, msg, *args, **kwargs)

    monkeypatch.setattr(openai_mod, "normalize_message", counting)
    turns = 6
    gw = gateway(qwen3, [{"text": CALL}] * turns, history_mode=mode)
    gw.open_session("r")
    per_request: list[tuple[int, int]] = []  # (messages normalized, characters of old ones)
    sizes = []

    def count(k: int, request: list[dict]) -> None:  # request k was answered
        old = len(request) - 2 if k else 0  # the messages of request k - 1 and its answer
        per_request.append((len(calls), sum(c for i, c in calls if i < old)))
        calls.clear()
        sizes.append(sum(_chars(m) for m in request))

    async with running_front(gw) as base:
        await _converse(base, turns, after=count)
    assert sizes[-1] > 180_000  # the history did grow
    # request 0: its 2 messages; then the echoed answer and the new tool result, nothing older
    assert [n for n, _ in per_request] == [2] + [2] * (turns - 1)
    assert [old for _, old in per_request] == [0] * turns
    assert len(gw.trajectory("r").turns) == turns


def _rewriting_client(k: int, request: list[dict]) -> None:
    """A client that rewrites what it re-sends: reasoning dropped and arguments re-serialized
    (LangChain), an image in the user message, an old tool result truncated, an assistant
    message the gateway never produced; the same rewrites every request after they start."""
    for m in request:
        if m["role"] == "assistant":
            m.pop("reasoning_content", None)
            for tc in m.get("tool_calls") or []:
                tc["function"]["arguments"] = json.dumps(json.loads(tc["function"]["arguments"]))
    if k >= 2:
        request[1]["content"] = [{"type": "text", "text": "add"}, PNG]
    if k >= 3:
        request[3]["content"] = request[3]["content"][:100]
    if k >= 4:  # everything after it moves: converted in full once, then reused again
        request[2:2] = [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "go on"}]


@pytest.mark.parametrize("mode", ["linear", "tree"])
async def test_reuse_gives_the_same_rows_prompts_and_events_as_converting_everything(
    qwen3, monkeypatch, mode
) -> None:
    async def run(reuse: bool) -> dict:
        if not reuse:  # every request converted in full, as before the reuse
            monkeypatch.setattr(app_mod, "_known", lambda registry, rollout_id: None)
        gw = gateway(qwen3, [{"text": CALL}] * 6, history_mode=mode)
        gw.open_session("r")
        async with running_front(gw) as base:
            await _converse(base, 6, _rewriting_client)
        return gw.close_session("r").to_dict()

    reused = await run(True)
    full = await run(False)
    for d in (reused, full):  # timings differ run to run
        for turn in d["turns"]:
            turn.pop("timings", None)
    assert reused == full
    kinds = [e.get("code", e["kind"]) for e in reused["events"]]
    for code in ("non_text_content", "tool_result_changed", "unknown_assistant_message"):
        assert code in kinds  # the rewrites were seen
