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
                m.setattr(app_mod, "_known", lambda registry, rollout_id: None)
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
