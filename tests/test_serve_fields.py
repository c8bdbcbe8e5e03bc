"""The HTTP front's contract (issue 28 item 1): every field of the OpenAI SDK's chat-completions
request is honoured, refused with a 400 naming it, or recorded on the trajectory as ignored;
the developer role; logprobs in OpenAI's shape; tool results paired with their calls."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import completion_create_params as sdk
from support.serve_helpers import TOOLS, gateway, running_front

from strands_art.history.normalize import MessageError
from strands_art.history.pairing import check_tool_pairing
from strands_art.registry import family_of, load_tokenizer
from strands_art.serve.fields import FIELDS

SDK_FIELDS = (
    set(sdk.CompletionCreateParamsBase.__annotations__)
    | set(sdk.CompletionCreateParamsStreaming.__annotations__)
    | set(sdk.CompletionCreateParamsNonStreaming.__annotations__)
)
USER = [{"role": "user", "content": "What is 2 + 2?"}]
ANSWER = "Four.<|im_end|>"
CHAT = "/rollouts/r/v1/chat/completions"

#: per SDK field: (value sent, what the front must do with it); several values where the
#: decision depends on the value. Its keys must be the SDK's fields: a new one fails below.
SAMPLES: dict[str, list[tuple[object, str]]] = {
    "messages": [([{"role": "developer", "content": "Be brief."}, *USER], "honoured")],
    "model": [("policy", "honoured")],
    "stream": [(True, "honoured")],
    "stream_options": [({"include_usage": True}, "honoured")],
    "tools": [(TOOLS, "honoured")],
    "tool_choice": [("auto", "honoured"), ("required", "ignored")],
    "parallel_tool_calls": [(True, "honoured"), (False, "ignored")],
    "user": [("r", "honoured")],
    "n": [(1, "honoured"), (2, "refused")],
    "logprobs": [(True, "honoured")],
    "top_logprobs": [(0, "honoured"), (3, "refused")],
    "temperature": [(0.2, "sampling")],
    "top_p": [(0.5, "sampling")],
    "max_tokens": [(7, "sampling")],
    "max_completion_tokens": [(7, "sampling")],
    "stop": [(["x"], "sampling")],
    "seed": [(3, "sampling")],
    "frequency_penalty": [(0.5, "sampling")],
    "presence_penalty": [(0.5, "sampling")],
    "logit_bias": [({"5": 10}, "sampling")],
    "reasoning_effort": [("high", "ignored")],  # Qwen3's template has no effort
    "verbosity": [("low", "ignored")],
    "response_format": [({"type": "text"}, "honoured"), ({"type": "json_object"}, "ignored")],
    "modalities": [(["text"], "honoured"), (["text", "audio"], "refused")],
    "audio": [({"voice": "alloy", "format": "wav"}, "refused")],
    "functions": [([{"name": "add", "parameters": {}}], "refused")],
    "function_call": [("none", "refused")],
    "web_search_options": [({}, "refused")],
    "metadata": [({"run": "7"}, "ignored")],
    "store": [(True, "ignored")],
    "service_tier": [("flex", "ignored")],
    "prediction": [({"type": "content", "content": "Four."}, "ignored")],
    "prompt_cache_key": [("k", "ignored")],
    "prompt_cache_options": [({"mode": "auto"}, "ignored")],
    "prompt_cache_retention": [("24h", "ignored")],
    "safety_identifier": [("u-1", "ignored")],
    "moderation": [({"mode": "auto"}, "ignored")],
}
CASES = [(name, value, want) for name, values in SAMPLES.items() for value, want in values]


def test_every_sdk_request_field_is_placed_and_documented():
    assert set(FIELDS) == SDK_FIELDS, "a field of the SDK's request type is missing from serve/fields.py"
    assert set(SAMPLES) == SDK_FIELDS, "a field of the SDK's request type has no case here"
    doc = (Path(__file__).parents[1] / "docs" / "http-front.md").read_text()
    documented = set(re.findall(r"^\| `([a-z_]+)` \| ", doc, re.M))
    assert SDK_FIELDS <= documented, sorted(SDK_FIELDS - documented)


def test_the_table_states_each_fields_policy():
    # a field with one outcome for every value: its line in FIELDS says that outcome
    for name, values in SAMPLES.items():
        outcomes = {want for _, want in values}
        if len(outcomes) == 1 and name not in ("reasoning_effort", "response_format"):
            assert FIELDS[name].startswith(outcomes.pop()), name


@pytest.mark.parametrize(("name", "value", "want"), CASES, ids=[f"{n}={v!r}"[:40] for n, v, _ in CASES])
async def test_each_field_is_honoured_refused_or_recorded(qwen3, name, value, want):
    gw = gateway(qwen3, [{"text": ANSWER}])
    gw.open_session("r")
    body = {"model": "policy", "messages": USER, name: value}
    async with running_front(gw) as base, httpx.AsyncClient(base_url=base) as http:
        r = await http.post(CHAT, json=body)
    events = gw.trajectory("r").events
    naming = [e for e in events if e.get("field") == name or name in e.get("reason", "")]
    if want == "refused":
        assert r.status_code == 400, r.text
        assert r.json()["error"]["param"] == name and name in r.json()["error"]["message"]
        assert gw.backend.calls == 0 and gw.trajectory("r").turns == [] and events == []
        return
    assert r.status_code == 200, r.text
    assert len(gw.trajectory("r").turns) == 1
    if want == "honoured":
        assert naming == []
    elif want == "sampling":
        assert [e["kind"] for e in naming] == ["sampling_override_ignored"]
    else:
        kind = "tool_choice_ignored" if name == "tool_choice" else "request_field_ignored"
        assert [e["kind"] for e in naming] == [kind] and naming[0]["field"] == name
        assert naming[0]["turn"] == 0


async def test_sampling_fields_are_refused_under_reject(qwen3):
    gw = gateway(qwen3, [{"text": ANSWER}], on_sampling_override="reject")
    gw.open_session("r")
    async with running_front(gw) as base, httpx.AsyncClient(base_url=base) as http:
        r = await http.post(CHAT, json={"messages": USER, "presence_penalty": 0.5})
    assert r.status_code == 400 and "presence_penalty" in r.json()["error"]["message"]
    assert gw.backend.calls == 0


async def test_an_unknown_field_is_recorded_as_ignored(qwen3):
    gw = gateway(qwen3, [{"text": ANSWER}])
    gw.open_session("r")
    async with running_front(gw) as base, httpx.AsyncClient(base_url=base) as http:
        r = await http.post(CHAT, json={"messages": USER, "guided_json": {"type": "object"}})
    assert r.status_code == 200
    [event] = gw.trajectory("r").events
    assert event["kind"] == "request_field_ignored" and event["field"] == "guided_json"


# ------------------------------------------------------------------ developer role
def _harmony_gateway(script):
    tok = load_tokenizer("gpt-oss")
    return gateway(tok, script, family=family_of("gpt-oss")), tok


async def test_developer_role_is_the_system_message(qwen3):
    prompts = {}
    for role in ("system", "developer"):
        gw = gateway(qwen3, [{"text": ANSWER}])
        gw.open_session("r")
        messages = [{"role": role, "content": "Reply in one word."}, *USER]
        async with running_front(gw) as base, httpx.AsyncClient(base_url=base) as http:
            r = await http.post(CHAT, json={"messages": messages})
        assert r.status_code == 200, r.text
        prompts[role] = gw.trajectory("r").turns[0].prompt_ids
    assert prompts["developer"] == prompts["system"]
    assert "<|im_start|>system\nReply in one word.<|im_end|>" in qwen3.decode(prompts["developer"])


async def test_developer_role_is_harmonys_developer_message():
    gw, tok = _harmony_gateway([{"text": "<|channel|>final<|message|>Four.<|return|>"}])
    gw.open_session("r")
    messages = [{"role": "developer", "content": "Reply in one word."}, *USER]
    async with running_front(gw) as base, httpx.AsyncClient(base_url=base) as http:
        r = await http.post(CHAT, json={"messages": messages, "reasoning_effort": "medium"})
    assert r.status_code == 200, r.text
    prompt = tok.decode(gw.trajectory("r").turns[0].prompt_ids)
    assert "<|start|>developer<|message|># Instructions\n\nReply in one word.<|end|>" in prompt
    assert gw.trajectory("r").events == []  # the effort it renders: honoured, nothing to record


async def test_reasoning_effort_other_than_the_gateways_is_recorded_not_rendered():
    gw, tok = _harmony_gateway([{"text": "<|channel|>final<|message|>Four.<|return|>"}])
    gw.open_session("r")
    async with running_front(gw) as base, httpx.AsyncClient(base_url=base) as http:
        r = await http.post(CHAT, json={"messages": USER, "reasoning_effort": "high"})
    assert r.status_code == 200
    assert "Reasoning: medium" in tok.decode(gw.trajectory("r").turns[0].prompt_ids)
    [event] = gw.trajectory("r").events
    assert event["field"] == "reasoning_effort" and "'high'" in event["reason"]


# ------------------------------------------------------------------ logprobs
OUT = "<think>\nok\n</think>\n\nSeven.<|im_end|>"


async def test_logprobs_are_the_recorded_ones_in_openais_shape(qwen3):
    lps = [-0.5 - k / 8 for k in range(len(qwen3.encode(OUT, add_special_tokens=False)))]
    gw = gateway(qwen3, [{"text": OUT, "logprobs": lps}, {"text": OUT, "logprobs": lps}])
    for rid in ("a", "b"):
        gw.open_session(rid)
    async with running_front(gw) as base:
        client = openai.AsyncOpenAI(base_url=f"{base}/rollouts/a/v1", api_key="x")
        resp = await client.chat.completions.create(model="p", messages=USER, logprobs=True, top_logprobs=0)
        client = openai.AsyncOpenAI(base_url=f"{base}/rollouts/b/v1", api_key="x")
        streamed = []
        async for chunk in await client.chat.completions.create(
            model="p", messages=USER, logprobs=True, stream=True
        ):
            if chunk.choices and chunk.choices[0].logprobs:
                streamed.extend(chunk.choices[0].logprobs.content)
    turn = gw.trajectory("a").turns[0]
    content = resp.choices[0].logprobs.content
    assert [e.logprob for e in content] == turn.logprobs == lps
    assert "".join(e.token for e in content) == qwen3.decode(turn.output_ids)
    assert content[-1].token == "<|im_end|>" and content[-1].bytes == list(b"<|im_end|>")
    assert [e.top_logprobs for e in content] == [[]] * len(lps)
    assert [(e.token, e.logprob) for e in streamed] == [(e.token, e.logprob) for e in content]


async def test_no_logprobs_unless_asked(qwen3):
    gw = gateway(qwen3, [{"text": OUT}])
    gw.open_session("r")
    async with running_front(gw) as base, httpx.AsyncClient(base_url=base) as http:
        r = await http.post(CHAT, json={"messages": USER, "logprobs": False})
    assert r.json()["choices"][0]["logprobs"] is None


# ------------------------------------------------------------------ tool_call_id pairing
CALLS = (
    '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>\n'
    '<tool_call>\n{"name": "add", "arguments": {"a": 3, "b": 4}}\n</tool_call><|im_end|>'
)


@pytest.mark.parametrize("variant", ["control", "missing", "orphan", "duplicate", "unanswered"])
async def test_unpaired_tool_results_are_400_naming_the_id_and_sample_nothing(qwen3, variant):
    gw = gateway(qwen3, [{"text": CALLS}, {"text": "3 and 7.<|im_end|>"}])
    gw.open_session("r")
    async with running_front(gw) as base, httpx.AsyncClient(base_url=base) as http:
        first = (await http.post(CHAT, json={"messages": USER, "tools": TOOLS})).json()
        msg = first["choices"][0]["message"]
        ids = [c["id"] for c in msg["tool_calls"]]
        results = [{"role": "tool", "tool_call_id": i, "content": v} for i, v in zip(ids, "37", strict=True)]
        if variant == "missing":
            del results[1]["tool_call_id"]
        elif variant == "orphan":
            results[1]["tool_call_id"] = "call_0000"
        elif variant == "duplicate":
            results[1]["tool_call_id"] = ids[0]
        elif variant == "unanswered":
            results = [results[0], {"role": "user", "content": "go on"}]
        r = await http.post(CHAT, json={"messages": [*USER, msg, *results], "tools": TOOLS})
    traj = gw.trajectory("r")
    if variant == "control":
        assert r.status_code == 200 and len(traj.turns) == 2
        return
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_message"
    named = {"missing": "tool_call_id", "orphan": "'call_0000'", "duplicate": repr(ids[0])}
    assert named.get(variant, repr(ids[1])) in error["message"]
    assert gw.backend.calls == 1 and len(traj.turns) == 1 and traj.events == []


def _history(ids: list[str], answers: list[str]) -> list[dict]:
    calls = [{"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids]
    results = [{"role": "tool", "tool_call_id": a, "content": "x"} for a in answers]
    return [*USER, {"role": "assistant", "content": "", "tool_calls": calls}, *results, *USER]


ID_LISTS = st.lists(st.text("abcdef0123", min_size=1, max_size=6), min_size=1, max_size=5, unique=True)


@settings(max_examples=200, deadline=None)
@given(ids=ID_LISTS, data=st.data())
def test_pairing_property(ids, data):
    """Results answering every call once, in any order, pass; one changed id fails naming it."""
    order = data.draw(st.permutations(ids))
    check_tool_pairing(_history(ids, order))
    k = data.draw(st.integers(0, len(ids) - 1))
    wrong = data.draw(st.sampled_from(["drop", "duplicate", "orphan", "missing"]))
    answers = list(order)
    if wrong == "drop":
        del answers[k]
    elif wrong == "duplicate":
        answers.append(answers[k])
    elif wrong == "orphan":
        answers[k] = answers[k] + "Z"
    else:
        answers[k] = ""
    with pytest.raises(MessageError) as err:
        check_tool_pairing(_history(ids, answers))
    if wrong != "missing":
        assert repr(order[k]) in str(err.value) or repr(answers[k]) in str(err.value)


def test_pairing_is_per_assistant_message():
    first = _history(["a"], ["a"])[:-1]
    # a later result naming an id of an earlier assistant message is an orphan there
    later = [*first, {"role": "assistant", "content": "", "tool_calls": _history(["b"], [])[1]["tool_calls"]}]
    with pytest.raises(MessageError, match="'a'"):
        check_tool_pairing([*later, {"role": "tool", "tool_call_id": "a", "content": "x"}])
    check_tool_pairing([*later, {"role": "tool", "tool_call_id": "b", "content": "x"}])
