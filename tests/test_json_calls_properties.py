"""JSON tool calls, every family that writes them (issue 28, item 2): a JSON answer is a call only
when it names an offered tool, and a call's key order never matters.

Families: Llama 3.x (bare JSON, ``<|python_tag|>``), Qwen2.5 (``<tool_call>``, fenced, bare),
Qwen3/Hermes (``<tool_call>``), Mistral (``[TOOL_CALLS]``). Property tests on the real parsers,
and the two reported shapes through the gateway on the real Llama 3.x tokenizers.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strands_art.backends.scripted import ScriptedBackend
from strands_art.families.llama3 import Llama3JsonParser
from strands_art.families.mistral import MistralParser
from strands_art.gateway import RolloutGateway
from strands_art.toolcalls.hermes import HermesParser
from strands_art.toolcalls.jsoncalls import Qwen25JsonParser

OFFERED = {"run_shell", "read_file"}
names = st.sampled_from(sorted(OFFERED))
scalars = st.one_of(st.integers(-5, 5), st.text("abc xyz./", max_size=8), st.booleans(), st.none())
args_st = st.dictionaries(st.sampled_from(["command", "path", "n", "flag"]), scalars, max_size=3)


@st.composite
def call_objects(draw, arg_keys=("arguments", "parameters"), with_id=False):
    """(name, args, JSON text of the call with its keys in a drawn order)."""
    name, args = draw(names), draw(args_st)
    items = [("name", name), (draw(st.sampled_from(arg_keys)), args)]
    if draw(st.booleans()):
        items.append(("type", "function"))
    if with_id:
        items.append(("id", "a1B2c3D4e"))
    order = draw(st.permutations(items))
    return name, args, json.dumps(dict(order), indent=draw(st.sampled_from([None, 1])))


def _wrap_llama_bare(body):
    return body + "<|eot_id|>"


def _wrap_llama_tag(body):
    return "<|python_tag|>" + body + "<|eom_id|>"


def _wrap_hermes(body):
    return f"<tool_call>\n{body}\n</tool_call><|im_end|>"


def _wrap_fenced(body):
    return f"```json\n{body}\n```<|im_end|>"


def _wrap_bare(body):
    return body + "<|im_end|>"


TAGGED_OR_UNTAGGED = [
    ("llama3 bare", Llama3JsonParser(), _wrap_llama_bare),
    ("llama3 python_tag", Llama3JsonParser(), _wrap_llama_tag),
    ("qwen3 hermes", HermesParser(), _wrap_hermes),
    ("qwen2.5 tagged", Qwen25JsonParser(), _wrap_hermes),
    ("qwen2.5 fenced", Qwen25JsonParser(), _wrap_fenced),
    ("qwen2.5 bare", Qwen25JsonParser(), _wrap_bare),
]


@pytest.mark.parametrize(
    ("form", "parser", "wrap"), TAGGED_OR_UNTAGGED, ids=[f for f, _, _ in TAGGED_OR_UNTAGGED]
)
@settings(max_examples=60, deadline=None)
@given(call=call_objects())
def test_a_call_is_read_whatever_its_key_order(form, parser, wrap, call) -> None:
    name, args, body = call
    out = parser.parse(wrap(body), OFFERED)
    assert not out.ill_formed, out.problems
    assert [(c.name, c.arguments) for c in out.tool_calls] == [(name, args)]


@settings(max_examples=60, deadline=None)
@given(call=call_objects(arg_keys=("arguments",), with_id=True))
def test_mistral_calls_are_read_whatever_their_key_order(call) -> None:
    name, args, body = call
    out = MistralParser().parse(f"[TOOL_CALLS] [{body}]</s>", OFFERED)
    assert not out.ill_formed, out.problems
    assert [(c.name, c.arguments, c.id) for c in out.tool_calls] == [(name, args, "a1B2c3D4e")]


UNTAGGED = [f for f in TAGGED_OR_UNTAGGED if f[0] in ("llama3 bare", "qwen2.5 fenced", "qwen2.5 bare")]


@st.composite
def json_answers(draw):
    """(JSON answer with tool-like keys that is not a call, the tools offered): a record (data
    keys beside "name"), a call shape with no tool offered, or a "name" that is not a string."""
    keys = draw(st.lists(st.sampled_from(["parameters", "arguments", "type", "id"]), unique=True))
    obj = {k: draw(st.one_of(args_st, scalars)) for k in keys}
    kind = draw(st.sampled_from(["record", "no_tools", "name_not_str"]))
    offered = set() if kind == "no_tools" else OFFERED
    obj["name"] = draw(st.sampled_from(["Ada Lovelace", "run_shell", "read", ""]))
    if kind == "record":
        obj[draw(st.sampled_from(["born", "items", "note"]))] = draw(scalars)
        obj["name"] = draw(st.sampled_from(["Ada Lovelace", "read", ""]))
    if kind == "name_not_str":
        obj["name"] = draw(st.one_of(st.integers(), st.none(), args_st))
    return json.dumps(dict(draw(st.permutations(list(obj.items()))))), offered


@pytest.mark.parametrize(("form", "parser", "wrap"), UNTAGGED, ids=[f for f, _, _ in UNTAGGED])
@settings(max_examples=80, deadline=None)
@given(case=json_answers())
def test_a_json_answer_that_is_no_offered_call_is_text(form, parser, wrap, case) -> None:
    body, offered = case
    out = parser.parse(wrap(body), offered)
    assert out.tool_calls == [] and not out.ill_formed, out.problems
    assert body in out.text


@pytest.mark.parametrize(("form", "parser", "wrap"), UNTAGGED, ids=[f for f, _, _ in UNTAGGED])
@settings(max_examples=30, deadline=None)
@given(call=call_objects())
def test_a_call_to_a_tool_not_offered_is_no_call(form, parser, wrap, call) -> None:
    """A call-shaped answer naming a tool that was not offered: never a call; the text is kept
    (ill-formed when a fenced block or a Llama answer spells it: the model called a tool that
    does not exist)."""
    _, _, body = call
    out = parser.parse(wrap(body.replace("run_shell", "rm_rf").replace("read_file", "rm_rf")), OFFERED)
    assert out.tool_calls == []
    assert "rm_rf" in out.text


@pytest.mark.parametrize(("form", "parser", "wrap"), UNTAGGED, ids=[f for f, _, _ in UNTAGGED])
@settings(max_examples=30, deadline=None)
@given(call=call_objects())
def test_a_call_shaped_answer_is_text_when_no_tool_was_offered(form, parser, wrap, call) -> None:
    _, _, body = call
    out = parser.parse(wrap(body), set())
    assert out.tool_calls == [] and not out.ill_formed
    assert body in out.text


# --- the reported shapes, through the gateway on the real Llama 3.x templates
RUN_SHELL = {
    "type": "function",
    "function": {
        "name": "run_shell",
        "description": "run a command",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    },
}


def _turn(alias: str, text: str, tools):
    from strands_art.registry import family_of, load_tokenizer

    tok = load_tokenizer(alias)
    gw = RolloutGateway(tok, ScriptedBackend(tok, [{"text": text}]), family=family_of(alias))
    gw.open_session("s")
    return asyncio.run(gw.generate("s", [{"role": "user", "content": "go"}], tools))


@pytest.mark.parametrize("alias", ["llama3.1", "llama3.2"])
def test_llama_json_record_without_tools_is_the_answer(alias) -> None:
    answer = '{"name": "Ada Lovelace", "born": 1815}'
    r = _turn(alias, answer + "<|eot_id|>", None)
    assert r.tool_calls == [] and r.text == answer and not r.ill_formed


@pytest.mark.parametrize("alias", ["llama3.1", "llama3.2"])
def test_llama_call_with_type_first_is_one_call(alias) -> None:
    body = '{"type": "function", "name": "run_shell", "parameters": {"command": "mvn -q -v"}}'
    r = _turn(alias, body + "<|eot_id|>", [RUN_SHELL])
    assert [(c.name, c.arguments) for c in r.tool_calls] == [("run_shell", {"command": "mvn -q -v"})]
    assert r.text == "" and r.finish_reason == "tool_calls"
