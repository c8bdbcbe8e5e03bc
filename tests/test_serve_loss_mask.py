"""The HTTP front serves rows with the loss mask the trainer trains them with (issue 48, U12).

A real front on loopback (qwen3's tokenizer and template, the scripted backend), one rollout of
two requests: the first answer writes two complete calls and runs on into a third until the
token limit (the gateway ends it at its last complete call: the rest is a cut tail), the second
runs to the token limit with no call (a truncated answer). ``GET /trajectory`` and ``close``
answer with loss mask 0 on the tail and on the truncated answer, each span and why on the row's
``metadata["loss_excluded"]``; ``train_truncated`` (``serve --train-truncated``) serves the
truncated answer with 1; the store keeps the recording (1 on every sampled token).
"""

from __future__ import annotations

import httpx
import pytest
from support.serve_helpers import TOOLS, gateway, running_front

from strands_art.backends.base import SamplingParams
from strands_art.store import TrajectoryStore

CALLS = (
    '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>\n'
    '<tool_call>\n{"name": "add", "arguments": {"a": 3, "b": 4}}\n</tool_call>\n'
)
RUNAWAY_CALL = CALLS + '<tool_call>\n{"name": "add", "arguments": {"a": 5, "b": ' + "9" * 400
RUNAWAY = "Let me add these numbers very carefully, one digit at a time. " * 40
USER = {"role": "user", "content": "Add 1 + 2 and 3 + 4."}


async def one_rollout(qwen3, tmp_path, **config):
    limit = len(qwen3.encode(CALLS, add_special_tokens=False)) + 12
    gw = gateway(
        qwen3, [{"text": RUNAWAY_CALL}, {"text": RUNAWAY}], sampling=SamplingParams(max_new_tokens=limit)
    )
    store = TrajectoryStore(tmp_path / "store")
    async with running_front(gw, store=store, **config) as base, httpx.AsyncClient(base_url=base) as http:
        assert (await http.post("/sessions", json={"rollout_id": "t", "group_id": "g"})).status_code == 201
        url = "/rollouts/t/v1/chat/completions"
        first = (await http.post(url, json={"model": "m", "messages": [USER], "tools": TOOLS})).json()
        message = first["choices"][0]["message"]
        assert [c["function"]["arguments"] for c in message["tool_calls"]] == [
            '{"a": 1, "b": 2}',
            '{"a": 3, "b": 4}',
        ]
        results = [{"role": "tool", "tool_call_id": c["id"], "content": "3"} for c in message["tool_calls"]]
        messages = [USER, {k: v for k, v in message.items() if v is not None}, *results]
        second = (await http.post(url, json={"model": "m", "messages": messages, "tools": TOOLS})).json()
        assert second["choices"][0]["finish_reason"] == "length"
        so_far = (await http.get("/sessions/t/trajectory")).json()
        closed = (await http.post("/sessions/t/close", json={"reward": 1.0})).json()
    [recorded] = list(store)
    return so_far, closed, recorded


@pytest.mark.parametrize("train_truncated", [False, True])
async def test_served_rows_leave_cut_tails_and_truncated_answers_out_of_the_loss(
    qwen3, tmp_path, train_truncated
):
    config = {"train_truncated": True} if train_truncated else {}
    so_far, closed, recorded = await one_rollout(qwen3, tmp_path, **config)
    [cut] = recorded.metadata["cut_turns"]
    assert recorded.turns[1].tags == ["truncated"] and cut["turn"] == 0 and cut["tail"][0] < cut["tail"][1]
    assert so_far["rows"] == [{**r, "reward": None} for r in closed["rows"]]  # the reward set at close
    assert len(closed["rows"]) == len(recorded.rows) and {r["reward"] for r in closed["rows"]} == {1.0}
    trained = 0
    for row, served in zip(recorded.rows, closed["rows"], strict=True):
        spans = dict(zip(row.turns, row.turn_spans, strict=True))
        sampled = {i for s, e in spans.values() for i in range(s, e)}
        assert row.loss_mask == [int(i in sampled) for i in range(len(row.input_ids))]  # the recording
        excluded = []
        if 1 in spans and not train_truncated:
            excluded.append({"turn": 1, "span": spans[1], "reason": "truncated"})
        if 0 in spans:
            excluded.append(
                {"turn": 0, "span": [spans[0][0] + cut["tail"][0], spans[0][1]], "reason": "cut_tail"}
            )
        out = {i for x in excluded for i in range(*x["span"])}
        assert served["input_ids"] == row.input_ids
        assert served["loss_mask"] == [0 if i in out else m for i, m in enumerate(row.loss_mask)]
        assert served["metadata"].get("loss_excluded", []) == excluded
        trained += sum(served["loss_mask"])
    truncated = len(recorded.turns[1].output_ids)
    assert trained == cut["tail"][0] + (truncated if train_truncated else 0)
