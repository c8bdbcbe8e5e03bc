"""Each front's conversion is proportional to a turn's new messages (issue 26 items 3 and 4): the
messages a client (an HTTP client, or Strands calling ARTModel) re-sends unchanged are taken as
the session's last recorded request left them, not normalized, converted, scanned or compared
again. Counted work, no timing (as tests/test_heal_work.py
counts the gateway's heal). And the reuse changes nothing: the same conversation, with the
reuse switched off, gives the same rows, prompts and events."""

from __future__ import annotations

import copy
import json

import httpx
import pytest
from conftest import ADD_TOOL
from strands import Agent, tool
from strands.agent.conversation_manager import NullConversationManager
from support.serve_helpers import gateway, running_front
from support.strands_tools import add as _add_tool

import strands_art.conversion.canonical as canonical_mod
import strands_art.conversion.openai as openai_mod
import strands_art.conversion.strands as strands_mod
import strands_art.model as model_mod
import strands_art.serve.app as app_mod
from strands_art.conversion.strands import same_data
from strands_art.history.normalize import normalize_message
from strands_art.model import ARTModel

ADD_SPEC = _add_tool.tool_spec

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
            monkeypatch.setattr(app_mod, "known_of", lambda registry, rollout_id: None)
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


# ---------------------------------------------------------------- the Strands front (ARTModel)


def _counting_parse(monkeypatch) -> list[int]:
    """Count the tool-call argument parses of CanonicalHistory's comparison."""
    parsed: list[int] = []

    def counting(args):
        parsed.append(1)
        return parse(args)

    parse = canonical_mod.parsed_arguments
    monkeypatch.setattr(canonical_mod, "parsed_arguments", counting)
    return parsed


@pytest.mark.parametrize("mode", ["linear", "tree"])
async def test_strands_front_work_per_call_does_not_grow_with_the_history(qwen3, monkeypatch, mode) -> None:
    """A Strands Agent's tool loop: call 0 converts its one user message; every later call only
    the 2 new Strands messages (the assistant turn, converted once, and the new tool result),
    and parses only the new turn's tool-call arguments (the produced and the replayed one), not
    every earlier call's again."""
    turns = 6
    parsed = _counting_parse(monkeypatch)
    gw = gateway(qwen3, [{"text": CALL}] * (turns - 1) + [{"text": "3<|im_end|>"}], history_mode=mode)
    model = ARTModel(gateway=gw, session_id="s")
    per_call: list[tuple[int, int, int]] = []  # (Strands messages sent, converted in full, parses)
    stream = model.stream

    async def counted(messages, *args, **kwargs):
        before = (model.conversion.strands_known.work, len(parsed))
        async for event in stream(messages, *args, **kwargs):
            yield event
        work = model.conversion.strands_known.work
        per_call.append((len(messages), work - before[0], len(parsed) - before[1]))

    model.stream = counted
    sizes = iter(range(1, turns + 1))

    @tool
    def add(a: int, b: int) -> str:
        """Add two integers, with a long report."""
        return "x" * (12_000 * next(sizes))

    agent = Agent(
        model=model, tools=[add], callback_handler=None, conversation_manager=NullConversationManager()
    )
    await agent.invoke_async("add")
    assert [n for n, _, _ in per_call] == [1 + 2 * k for k in range(turns)]  # the history grew
    assert [w for _, w, _ in per_call] == [1] + [2] * (turns - 1)
    assert [p for _, _, p in per_call] == [0] + [2] * (turns - 1)
    assert len(gw.trajectory("s").turns) == turns


def _strands_answer(events: list[dict]) -> dict:
    """The Strands assistant message of a CALL turn, from its stream events."""
    (start,) = [
        e["contentBlockStart"]["start"]["toolUse"]
        for e in events
        if "toolUse" in e.get("contentBlockStart", {}).get("start", {})
    ]
    return {
        "role": "assistant",
        "content": [
            {"reasoningContent": {"reasoningText": {"text": "adding"}}},
            {"toolUse": {"toolUseId": start["toolUseId"], "name": "add", "input": {"a": 1, "b": 2}}},
        ],
    }


async def _strands_converse(model, turns: int) -> None:
    """``turns`` calls of a Strands conversation whose harness rewrites in place what it
    re-sends (a conversation manager's way): an old tool result truncated, a JSON tool result's
    keys reordered (equal as dicts, another text for the model), an image added to the first
    message, an assistant message the gateway never produced inserted (everything after it
    moves)."""
    msgs: list[dict] = [{"role": "user", "content": [{"text": "add"}]}]
    for k in range(turns):
        if k == 2:
            msgs[2]["content"][0]["toolResult"]["content"][0]["text"] = "cut"
        if k == 3:
            msgs[4]["content"][0]["toolResult"]["content"][0]["json"] = {"b": 2, "a": 1}
            msgs[0]["content"].append({"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}})
        if k == 4:
            msgs[1:1] = [
                {"role": "assistant", "content": [{"text": "ok"}]},
                {"role": "user", "content": [{"text": "go on"}]},
            ]
        events = [e async for e in model.stream(msgs, [ADD_SPEC], "calc")]
        answer = _strands_answer(events)
        call_id = answer["content"][1]["toolUse"]["toolUseId"]
        msgs.append(answer)
        part = {"json": {"a": 1, "b": 2}} if k == 1 else {"text": "x" * (1000 * (k + 1))}
        result = {"toolUseId": call_id, "status": "success", "content": [part]}
        msgs.append({"role": "user", "content": [{"toolResult": result}]})


@pytest.mark.parametrize("mode", ["linear", "tree"])
async def test_strands_reuse_gives_the_same_rows_prompts_and_events_as_converting_everything(
    qwen3, monkeypatch, mode
) -> None:
    full_request = model_mod.strands_request
    exact = strands_mod.same_data

    async def run(kind: str) -> tuple[dict, int]:
        if kind == "full":  # every call converted in full, as before the reuse
            monkeypatch.setattr(model_mod, "strands_request", lambda m, s, known=None: full_request(m, s))
        # "loose": a reuse that took equal dicts as the same (==) would miss the reordered keys
        monkeypatch.setattr(strands_mod, "same_data", (lambda a, b: a == b) if kind == "loose" else exact)
        gw = gateway(qwen3, [{"text": CALL}] * 6, history_mode=mode)
        model = ARTModel(gateway=gw, session_id="s")
        await _strands_converse(model, 6)
        traj = gw.close_session("s").to_dict()
        for turn in traj["turns"]:  # timings differ run to run
            turn.pop("timings", None)
        return traj, model.conversion.strands_known.work

    reused, work = await run("reuse")
    loose, _ = await run("loose")
    full, _ = await run("full")
    assert reused == full
    assert loose != full  # the test can tell a wrong reuse
    # converted in full: the 2 new messages of each call (1 at first), the changed ones (call 2:
    # the truncated result; call 3: the image, the reordered result) and the 8 moved (call 4)
    assert work == 1 + 2 + (1 + 2) + (2 + 2) + (8 + 2) + 2
    codes = [e.get("code", e["kind"]) for e in reused["events"]]
    for code in ("non_text_content", "tool_result_changed", "unknown_assistant_message"):
        assert code in codes  # the rewrites were seen


def test_same_data_compares_key_order_and_types():
    assert same_data({"a": [1, "x", b"y"], "b": None}, {"a": [1, "x", b"y"], "b": None})
    assert not same_data({"a": 1, "b": 2}, {"b": 2, "a": 1})  # equal dicts, another JSON
    assert not same_data({"a": 1}, {"a": 1.0}) and not same_data([True], [1])
    assert not same_data(float("nan"), float("nan")) and not same_data((1,), (1,))


def test_a_message_nested_past_the_recursion_limit_is_converted_not_reused():
    def nested():
        value: list = []
        for _ in range(5000):
            value = [value]
        return {"role": "user", "content": [{"text": "x", "deep": value}]}

    known = strands_mod.StrandsKnown()
    known.entries = [(nested(), ())]
    assert known.reusable(0, nested()) is None and known.reusable(1, {"role": "user"}) is None
