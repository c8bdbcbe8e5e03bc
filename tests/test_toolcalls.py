"""Output parsers against real chat templates: Qwen3 (Hermes JSON) and trl's Qwen3.5 (XML).

The ``qwen3`` fixture (tests/conftest.py) is the real Qwen3 tokenizer. Round trips render an assistant message through the model's own template, cut the assistant
turn out as the model would have sampled it (ending in ``<|im_end|>``), parse it back and compare.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strands_art.toolcalls import (
    HermesParser,
    Qwen3CoderParser,
    format_tool_calls,
    parser_for_template,
    prompt_opens_think,
    render_tools_instruction,
    split_reasoning,
    supports_tools,
)
from strands_art.toolcalls.qwen3_coder import convert_value

ASSISTANT = "<|im_start|>assistant\n"
FORBIDDEN = ("<tool_call>", "</tool_call>", "<think>", "</think>", "<|im_end|>", "<|im_start|>")
FORBIDDEN_XML = FORBIDDEN + ("<parameter=", "</function>", "<function=")


def _trl_template(name: str) -> str:
    spec = importlib.util.find_spec("trl")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("trl (chat templates only) is not installed: pip install trl")
    return (Path(list(spec.submodule_search_locations)[0]) / "chat_templates" / name).read_text()


@pytest.fixture(scope="module")
def qwen35_template():
    return _trl_template("qwen3_5_think.jinja")


def _assistant_turn(rendered: str) -> str:
    """The last assistant turn as sampled: after the role header, up to and incl. <|im_end|>."""
    turn = rendered.rsplit(ASSISTANT, 1)[1]
    assert turn.endswith("<|im_end|>\n")
    return turn[: -len("\n")]


def _clean(s: str, forbidden=FORBIDDEN) -> bool:
    return not any(f in s for f in forbidden)


names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True)
text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)


# ---------------------------------------------------------------- Hermes / Qwen3 JSON


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    content=text.filter(lambda s: _clean(s) and s == s.lstrip("\n")),
    reasoning=text.filter(lambda s: _clean(s) and s == s.strip("\n")),
    calls=st.lists(st.tuples(names, st.dictionaries(text, json_values, max_size=4)), max_size=3),
)
def test_hermes_round_trip_through_qwen3_template(qwen3, content, reasoning, calls):
    msg = {
        "role": "assistant",
        "content": content,
        "reasoning_content": reasoning,
        "tool_calls": [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in calls],
    }
    rendered = qwen3.apply_chat_template([{"role": "user", "content": "go"}, msg], tokenize=False)
    sampled = _assistant_turn(rendered)
    out = HermesParser().parse(sampled, {n for n, _ in calls})
    assert not out.ill_formed, out.problems
    assert out.problems == []
    assert out.reasoning == reasoning
    assert out.text == content
    assert [(c.name, c.arguments) for c in out.tool_calls] == calls
    for call, (_, args) in zip(out.tool_calls, calls, strict=True):
        assert json.loads(call.raw_arguments) == args
        assert call.raw in sampled


def test_hermes_string_arguments_and_several_calls(qwen3):
    msg = {
        "role": "assistant",
        "content": "I will look.",
        "tool_calls": [
            {"type": "function", "function": {"name": "read", "arguments": '{"path": "a.txt"}'}},
            {"type": "function", "function": {"name": "ls", "arguments": {}}},
        ],
    }
    rendered = qwen3.apply_chat_template([{"role": "user", "content": "go"}, msg], tokenize=False)
    out = HermesParser().parse(_assistant_turn(rendered), {"read", "ls"})
    assert out.text == "I will look."
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("read", {"path": "a.txt"}), ("ls", {})]
    assert out.tool_calls[0].raw_arguments == '{"path": "a.txt"}'


def test_hermes_double_encoded_arguments_are_decoded():
    sampled = '<tool_call>\n{"name": "f", "arguments": "{\\"x\\": [1, 2]}"}\n</tool_call><|im_end|>'
    out = HermesParser().parse(sampled)
    assert out.tool_calls[0].arguments == {"x": [1, 2]}
    assert out.tool_calls[0].raw_arguments == '"{\\"x\\": [1, 2]}"'


def test_format_tool_calls_matches_qwen3_template(qwen3):
    calls = [
        {"type": "function", "function": {"name": "f", "arguments": {"a": 1, "b": "é"}}},
        {"type": "function", "function": {"name": "g", "arguments": '{"z":2}'}},
    ]
    rendered = qwen3.apply_chat_template(
        [{"role": "user", "content": "go"}, {"role": "assistant", "content": "", "tool_calls": calls}],
        tokenize=False,
    )
    turn = _assistant_turn(rendered)
    assert turn == "<think>\n\n</think>\n\n" + format_tool_calls(calls) + "<|im_end|>"


HERMES_BAD = [
    ('<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n', "unclosed <tool_call>"),
    ('<tool_call>\n{"name": "f", "arguments": {"a": 1}\n</tool_call>', "invalid JSON"),
    ('<tool_call>\n{"arguments": {"a": 1}}\n</tool_call>', 'missing or empty "name"'),
    ('<tool_call>\n{"name": "", "arguments": {}}\n</tool_call>', 'missing or empty "name"'),
    ('<tool_call>\n{"name": 3, "arguments": {}}\n</tool_call>', 'missing or empty "name"'),
    ('<tool_call>\n{"name": "f", "arguments": [1]}\n</tool_call>', "not a JSON object"),
    ('<tool_call>\n{"name": "f", "arguments": "rm -rf"}\n</tool_call>', "string that is not JSON"),
    ('<tool_call>\n{"name": "f", "arguments": "[1]"}\n</tool_call>', "not a JSON object"),
    ('<tool_call>\n["f", {}]\n</tool_call>', "not an object"),
    ('<tool_call>\n{"name": "f", "arguments": {}} trailing\n</tool_call>', "unexpected text after"),
    ('done.\n{"name": "f", "arguments": {}}\n</tool_call>', "'</tool_call>' in the content"),
    (
        '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>\n<tool_call>\n{"name": "g"',
        "tool call 2: unclosed",
    ),
]


@pytest.mark.parametrize(("content", "problem"), HERMES_BAD)
def test_hermes_ill_formed_keeps_text_and_says_why(content, problem):
    out = HermesParser().parse("<think>\nr\n</think>\n\n" + content + "<|im_end|>", {"f", "g"})
    assert out.ill_formed
    assert out.tool_calls == []
    assert out.text == content
    assert out.reasoning == "r"
    assert len(out.problems) == 1 and problem in out.problems[0], out.problems


def test_hermes_unknown_tool_is_kept_and_flagged():
    sampled = '<tool_call>\n{"name": "rm", "arguments": {"p": "/"}}\n</tool_call><|im_end|>'
    out = HermesParser().parse(sampled, {"ls"})
    assert not out.ill_formed
    assert [c.name for c in out.tool_calls] == ["rm"]
    assert out.unknown_tools == ["rm"]
    assert out.problems == ["unknown tool 'rm' (not among the offered tools)"]
    assert HermesParser().parse(sampled, None).unknown_tools == []


def test_hermes_missing_arguments_and_text_after_calls_are_noted():
    sampled = 'a\n<tool_call>\n{"name": "ls"}\n</tool_call>\nand more<|im_end|>'
    out = HermesParser().parse(sampled, {"ls"})
    assert not out.ill_formed
    assert out.tool_calls[0].arguments == {} and out.tool_calls[0].raw_arguments is None
    assert out.text == "a\nand more"
    assert any('no "arguments"' in p for p in out.problems)
    assert any("text after tool call 1" in p for p in out.problems)


def test_hermes_json_string_may_contain_closing_tag():
    sampled = '<tool_call>\n{"name": "w", "arguments": {"s": "x</tool_call>y"}}\n</tool_call><|im_end|>'
    out = HermesParser().parse(sampled)
    assert out.tool_calls[0].arguments == {"s": "x</tool_call>y"}


def test_plain_text_passes_through_unchanged():
    out = HermesParser().parse("Paris.<|im_end|>", {"f"})
    assert (out.text, out.reasoning, out.tool_calls, out.ill_formed, out.problems) == (
        "Paris.",
        None,
        [],
        False,
        [],
    )


# ---------------------------------------------------------------- Qwen3-Coder XML

XML_TYPES = {
    "string": text.filter(lambda s: _clean(s, FORBIDDEN_XML)),
    "integer": st.integers(-(10**9), 10**9),
    "number": st.floats(allow_nan=False, allow_infinity=False, width=32),
    "boolean": st.booleans(),
    "object": st.dictionaries(names, st.integers() | names, max_size=3),
    "array": st.lists(st.integers() | names, max_size=3),
}
typed_param = st.sampled_from(sorted(XML_TYPES)).flatmap(lambda t: st.tuples(st.just(t), XML_TYPES[t]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    content=text.filter(lambda s: _clean(s, FORBIDDEN_XML) and s == s.strip()),
    reasoning=text.filter(lambda s: _clean(s) and s == s.strip()),
    calls=st.lists(
        st.tuples(names, st.dictionaries(names, typed_param, max_size=4)),
        max_size=3,
        unique_by=lambda c: c[0],
    ),
    template=st.sampled_from(["qwen3_5_think.jinja", "qwen3_6.jinja"]),
)
def test_xml_round_trip_through_qwen35_templates(qwen3, content, reasoning, calls, template):
    tools = [
        {
            "type": "function",
            "function": {
                "name": n,
                "description": "t",
                "parameters": {
                    "type": "object",
                    "properties": {p: {"type": t} for p, (t, _) in params.items()},
                },
            },
        }
        for n, params in calls
    ]
    msg = {
        "role": "assistant",
        "content": content,
        "reasoning_content": reasoning,
        "tool_calls": [
            {"type": "function", "function": {"name": n, "arguments": {p: v for p, (_, v) in params.items()}}}
            for n, params in calls
        ],
    }
    rendered = qwen3.apply_chat_template(
        [{"role": "user", "content": "go"}, msg],
        tools=tools or None,
        chat_template=_trl_template(template),
        tokenize=False,
    )
    out = Qwen3CoderParser().parse(_assistant_turn(rendered), tools=tools)
    assert not out.ill_formed, out.problems
    assert out.problems == []
    assert out.reasoning == reasoning
    assert out.text == content
    got = [(c.name, c.arguments) for c in out.tool_calls]
    want = [(n, {p: v for p, (_, v) in params.items()}) for n, params in calls]
    assert got == want


def test_xml_generation_prompt_opens_think(qwen3, qwen35_template):
    prompt = qwen3.apply_chat_template(
        [{"role": "user", "content": "go"}],
        chat_template=qwen35_template,
        add_generation_prompt=True,
        tokenize=False,
    )
    assert prompt.endswith("<think>\n") and prompt_opens_think(prompt)
    sampled = "Need a file.\n</think>\n\n<tool_call>\n<function=read>\n<parameter=path>\na.txt\n</parameter>\n</function>\n</tool_call><|im_end|>"
    out = Qwen3CoderParser().parse(sampled, {"read"}, think_open=True)
    assert out.reasoning == "Need a file."
    assert out.text == ""
    assert out.tool_calls[0].arguments == {"path": "a.txt"}
    cut = Qwen3CoderParser().parse("Still thinking about it", think_open=True)
    assert cut.reasoning == "Still thinking about it" and cut.text == "" and cut.problems


def test_xml_value_keeps_inner_newlines_and_closing_tag_text():
    sampled = (
        "<tool_call>\n<function=write>\n<parameter=body>\n\nline1\n</parameter>\nline2\n\n</parameter>\n"
        "<parameter=n>\n7\n</parameter>\n</function>\n</tool_call>"
    )
    tools = [
        {
            "name": "write",
            "parameters": {"properties": {"body": {"type": "string"}, "n": {"type": "integer"}}},
        }
    ]
    out = Qwen3CoderParser().parse(sampled, tools=tools)
    assert out.tool_calls[0].arguments == {"body": "\nline1\n</parameter>\nline2\n", "n": 7}


@pytest.mark.parametrize(
    ("value", "schema", "expected", "noted"),
    [
        ("5", {"type": "integer"}, 5, False),
        ("5", {"type": "string"}, "5", False),
        ("5", None, "5", False),
        ("True", {"type": "boolean"}, True, False),
        ("FALSE", {"type": "boolean"}, False, False),
        ("yes", {"type": "boolean"}, "yes", True),
        ("1.5", {"type": "integer"}, "1.5", True),
        ("true", {"type": "integer"}, "true", True),
        ("2.5", {"type": "number"}, 2.5, False),
        ('{"a": [1]}', {"type": "object"}, {"a": [1]}, False),
        ("{'a': None}", {"type": "object"}, {"a": None}, False),
        ("[1, 2", {"type": "array"}, "[1, 2", True),
        ("null", {"type": ["integer", "null"]}, None, False),
        ("null", {"type": "string"}, "null", False),
        ("abc", {"anyOf": [{"type": "integer"}, {"type": "string"}]}, "abc", False),
        ("3", {"anyOf": [{"type": "integer"}, {"type": "string"}]}, 3, False),
    ],
)
def test_xml_value_conversion_by_schema(value, schema, expected, noted):
    got, note = convert_value(value, schema)
    assert got == expected and type(got) is type(expected)
    assert (note is not None) is noted


XML_BAD = [
    ("<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n", "unclosed <tool_call>"),
    (
        "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</tool_call>",
        "without a matching </function>",
    ),
    ("<tool_call>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>", "expected <function=NAME>"),
    ("<tool_call>\n<function=>\n</function>\n</tool_call>", "empty function name"),
    ("<tool_call>\n<function=f>\nhello\n</function>\n</tool_call>", "unexpected text in <function=f>"),
    (
        "<tool_call>\n<function=f>\n<parameter a>\n1\n</parameter>\n</function>\n</tool_call>",
        "unexpected text",
    ),
    ("<tool_call>\n<function=f>\n<parameter=a>\n1\n</function>\n</tool_call>", "no closing </parameter>"),
    (
        "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n<parameter=a>\n2\n</parameter>\n</function>\n</tool_call>",
        "given twice",
    ),
    ("<function=f>\n<parameter=a>\n1\n</parameter>\n</function>", "'<function=' in the content"),
]


@pytest.mark.parametrize(("content", "problem"), XML_BAD)
def test_xml_ill_formed_keeps_text_and_says_why(content, problem):
    out = Qwen3CoderParser().parse(content + "<|im_end|>", {"f"})
    assert out.ill_formed
    assert out.tool_calls == []
    assert out.text == content
    assert len(out.problems) == 1 and problem in out.problems[0], out.problems


def test_xml_unknown_tool_and_untyped_values():
    sampled = "<tool_call>\n<function=g>\n<parameter=n>\n5\n</parameter>\n</function>\n</tool_call>"
    out = Qwen3CoderParser().parse(sampled, tools=[{"name": "f", "parameters": {}}])
    assert out.tool_calls[0].arguments == {"n": "5"}
    assert out.unknown_tools == ["g"]


# ---------------------------------------------------------------- reasoning


@pytest.mark.parametrize(
    ("text", "think_open", "reasoning", "content", "problem"),
    [
        ("<think>\nA\n</think>\n\nB", False, "A", "B", False),
        ("A\n</think>\n\nB", True, "A", "B", False),
        ("A\n</think>\n\nB", False, None, "A\n</think>\n\nB", False),  # no <think> opened: text
        ("x <think>A</think> B", False, None, "x <think>A</think> B", False),  # not at the start: text
        ("\n<think>\nA\n</think>\n\nB", False, "A", "B", False),
        ("<think>\nA still", False, "A still", "", True),
        ("just text", False, None, "just text", False),
        ("just text", True, "just text", "", True),
        ("<think>\n\n</think>\n\nB", False, "", "B", False),
    ],
)
def test_split_reasoning(text, think_open, reasoning, content, problem):
    split = split_reasoning(text, think_open=think_open)
    assert (split.reasoning, split.content, bool(split.problems)) == (reasoning, content, problem)


def test_prompt_opens_think_is_false_for_closed_empty_block(qwen3):
    prompt = qwen3.apply_chat_template(
        [{"role": "user", "content": "go"}], add_generation_prompt=True, enable_thinking=False, tokenize=False
    )
    assert prompt.endswith("<think>\n\n</think>\n\n")
    assert not prompt_opens_think(prompt)


# ---------------------------------------------------------------- selection and tool prompt


def test_parser_for_real_templates(qwen3):
    assert isinstance(parser_for_template(qwen3.chat_template), HermesParser)
    for name in ("qwen3_5_think.jinja", "qwen3_6.jinja", "nemotron_3_nano.jinja"):
        assert isinstance(parser_for_template(_trl_template(name)), Qwen3CoderParser), name
    for name in ("qwen2_5.jinja", "qwen3_instruct_2507.jinja"):
        assert isinstance(parser_for_template(_trl_template(name)), HermesParser), name
    for name in ("llama3.jinja", "glm4moe.jinja", "gemma3.jinja"):
        assert parser_for_template(_trl_template(name)) is None, name
    assert parser_for_template(None) is None
    assert supports_tools(qwen3.chat_template)
    assert not supports_tools(_trl_template("llama3.jinja"))


def test_tools_instruction_matches_qwen3_wording(qwen3):
    tools = [
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        },
        {"type": "function", "function": {"name": "ls", "description": "List", "parameters": {}}},
    ]
    rendered = qwen3.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "go"}],
        tools=tools,
        tokenize=False,
    )
    expected_system = "<|im_start|>system\nBe brief.\n\n" + render_tools_instruction(tools) + "<|im_end|>\n"
    assert rendered.startswith(expected_system)
    with pytest.raises(ValueError):
        render_tools_instruction([])
