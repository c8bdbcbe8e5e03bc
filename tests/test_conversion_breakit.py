"""Breaker's attacks on the HTTP front's conversion reuse: clients that edit an earlier message
once (and then restore it), reorder an answer's tool calls, change an old tool result, send the
same history twice, or delete a message. Each conversation's trajectory must equal converting
every request in full."""

from __future__ import annotations

import copy

import httpx
import pytest
from conftest import ADD_TOOL
from support.serve_helpers import gateway, running_front

import strands_art.serve.app as app_mod

TWO = (
    '<tool_call>\n{"name": "add", "arguments": {"a":1,"b":2}}\n</tool_call>\n'
    '<tool_call>\n{"name": "add", "arguments": {"a":3,"b":4}}\n</tool_call><|im_end|>'
)
CHAT = "/rollouts/r/v1/chat/completions"


def _edit_once(k, req):
    if k == 2:
        req[1]["content"] = "add please"


def _reorder(k, req):
    if k >= 2:
        req[2]["tool_calls"] = list(reversed(req[2]["tool_calls"]))


def _change_result(k, req):
    if k == 3:
        req[3]["content"] = "changed"


def _delete(k, req):
    if k == 3:
        del req[0]


CLIENTS = {"edit_once": _edit_once, "reorder": _reorder, "change_result": _change_result, "delete": _delete}


async def _converse(base, edit, repeat_at=None):
    msgs = [{"role": "system", "content": "calc"}, {"role": "user", "content": "add"}]
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        for k in range(5):
            req = copy.deepcopy(msgs)
            if edit:
                edit(k, req)
            for _ in range(2 if k == repeat_at else 1):
                r = await http.post(CHAT, json={"messages": req, "tools": [ADD_TOOL]})
                assert r.status_code == 200, r.text
            answer = r.json()["choices"][0]["message"]
            msgs = (
                msgs
                + [answer]
                + [
                    {"role": "tool", "tool_call_id": tc["id"], "content": f"r{k}{i}"}
                    for i, tc in enumerate(answer["tool_calls"])
                ]
            )


@pytest.mark.parametrize("client", [*CLIENTS, "same_twice"])
@pytest.mark.parametrize("mode", ["linear", "tree"])
async def test_reuse_equals_full_conversion(qwen3, monkeypatch, mode, client) -> None:
    async def run(reuse: bool) -> dict:
        with monkeypatch.context() as m:
            if not reuse:
                m.setattr(app_mod, "known_of", lambda registry, rollout_id: None)
            gw = gateway(qwen3, [{"text": TWO}] * 6, history_mode=mode)
            gw.open_session("r")
            async with running_front(gw) as base:
                await _converse(base, CLIENTS.get(client), repeat_at=2 if client == "same_twice" else None)
            d = gw.close_session("r").to_dict()
        for turn in d["turns"]:
            turn.pop("timings", None)
        return d

    reused = await run(True)
    full = await run(False)
    assert reused == full


# ---------------------------------------------------------------- the Strands front, mutated in place


def _strands_answer(events):
    from test_conversion_work import _strands_answer as answer

    return answer(events)


async def _strands_mutating(model, spec) -> None:
    """A harness that edits in place what it re-sends: an earlier call's input (1 -> 1.0, then
    True), a tool result's nested list, a deleted text block, the same history sent twice."""
    msgs: list[dict] = [{"role": "user", "content": [{"text": "add"}, {"text": "now"}]}]
    for k in range(6):
        if k == 2:
            msgs[1]["content"][1]["toolUse"]["input"]["a"] = 1.0
        if k == 3:
            msgs[1]["content"][1]["toolUse"]["input"]["a"] = True
            msgs[2]["content"][0]["toolResult"]["content"][0]["json"]["v"].append(9)
        if k == 4:
            del msgs[0]["content"][1]
        for _ in range(2 if k == 5 else 1):
            events = [e async for e in model.stream(msgs, [spec], "calc")]
        answer = _strands_answer(events)
        call_id = answer["content"][1]["toolUse"]["toolUseId"]
        msgs.append(answer)
        result = {"toolUseId": call_id, "status": "success", "content": [{"json": {"v": [k]}}]}
        msgs.append({"role": "user", "content": [{"toolResult": result}]})


@pytest.mark.parametrize("mode", ["linear", "tree"])
async def test_strands_in_place_mutations_equal_full_conversion(qwen3, monkeypatch, mode) -> None:
    from test_conversion_work import ADD_SPEC, CALL

    import strands_art.model as model_mod
    from strands_art.model import ARTModel

    full_request = model_mod.strands_request

    async def run(full: bool) -> dict:
        with monkeypatch.context() as m:
            if full:
                m.setattr(model_mod, "strands_request", lambda msgs, s, known=None: full_request(msgs, s))
            gw = gateway(qwen3, [{"text": CALL}] * 8, history_mode=mode)
            await _strands_mutating(ARTModel(gateway=gw, session_id="s"), ADD_SPEC)
            d = gw.close_session("s").to_dict()
        for turn in d["turns"]:
            turn.pop("timings", None)
        return d

    assert await run(False) == await run(True)
