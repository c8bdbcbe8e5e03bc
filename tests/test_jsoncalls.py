"""Qwen2.5 tool calls: tagged JSON first, then unambiguous fenced / bare JSON calls."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from strands_art.toolcalls import parser_for_template
from strands_art.toolcalls.jsoncalls import Qwen25JsonParser

TOOLS = {"shell", "file_editor"}
P = Qwen25JsonParser()
CALL = '{"name": "shell", "arguments": {"command": "cat pom.xml"}}'


def test_fenced_call_with_lead_text_is_recovered() -> None:
    out = P.parse(f"Let me read the pom.\n```json\n{CALL}\n```<|im_end|>", TOOLS)
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("shell", {"command": "cat pom.xml"})]
    assert out.text == "Let me read the pom."
    assert out.recovered == ["fenced_json"]
    assert out.tool_calls[0].raw == f"```json\n{CALL}\n```"
    assert not out.ill_formed and out.problems == []


def test_two_fenced_calls_and_plain_fence() -> None:
    other = '{"name": "file_editor", "arguments": {"command": "view", "path": "pom.xml"}}'
    out = P.parse(f"```json\n{CALL}\n```\n\n```\n{other}\n```", TOOLS)
    assert [c.name for c in out.tool_calls] == ["shell", "file_editor"]
    assert out.recovered == ["fenced_json", "fenced_json"]


def test_fence_with_several_calls_is_recovered() -> None:
    other = '{"name": "shell", "arguments": {"command": "mvn -q clean verify"}}'
    out = P.parse(f"```\n{CALL}\n{other}\n```<|im_end|>", TOOLS)
    assert [c.arguments["command"] for c in out.tool_calls] == ["cat pom.xml", "mvn -q clean verify"]
    assert out.recovered == ["fenced_json", "fenced_json"]
    assert [c.raw for c in out.tool_calls] == [CALL, other]
    half = P.parse(f'```\n{CALL}\n{{"version": 17}}\n```', TOOLS)  # one object is not a call
    assert half.tool_calls == [] and half.ill_formed


def test_bare_call_is_recovered() -> None:
    out = P.parse(f"  {CALL}\n", TOOLS)
    assert [c.arguments for c in out.tool_calls] == [{"command": "cat pom.xml"}]
    assert out.text == "" and out.recovered == ["bare_json"]


def test_bare_calls_then_an_unclosed_one_are_ill_formed_not_content() -> None:
    """A bare call cut off after complete ones is a broken call, never the turn's text: the
    output is ill-formed (no call), so the gateway's cut keeps the complete ones."""
    for tail in (
        '{"name": "file_editor", "arguments": {"',
        '{"name": "shell", "arguments": {"command": "ls"}',
    ):
        out = P.parse(f"{CALL}\n{CALL}\n{tail}", TOOLS)
        assert out.ill_formed and out.tool_calls == [] and out.text == f"{CALL}\n{CALL}\n{tail}", tail
        assert out.problems[-1].startswith("bare tool call 3: invalid JSON after 2 complete call(s) (")
    prose = P.parse(f"{CALL}\n{{ not a call, a brace in prose", TOOLS)  # no "name": text, as before
    assert [c.name for c in prose.tool_calls] == ["shell"] and "text after the tool calls" in prose.problems[
        0
    ]


def test_numbered_list_of_calls_is_recovered() -> None:
    other = '{"name": "shell", "arguments": {"command": "mvn -q clean verify"}}'
    out = P.parse(f"1. {CALL}\n2. {other}<|im_end|>", TOOLS)
    assert [c.arguments["command"] for c in out.tool_calls] == ["cat pom.xml", "mvn -q clean verify"]
    assert out.recovered == ["listed_json", "listed_json"] and out.text == ""
    mixed = P.parse(f"1. {CALL}\n2. then build it", TOOLS)  # a list that is not all calls
    assert mixed.tool_calls == [] and mixed.recovered == []


def test_string_arguments_are_decoded() -> None:
    body = json.dumps({"name": "shell", "arguments": json.dumps({"command": "ls"})})
    out = P.parse(f"```json\n{body}\n```", TOOLS)
    assert out.tool_calls[0].arguments == {"command": "ls"}


def test_leading_call_followed_by_prose_is_a_call_and_keeps_the_prose() -> None:
    for text in (f"{CALL}\n\nIf the build fails, fix it.", f"```json\n{CALL}\n```\nThen I will fix it."):
        out = P.parse(text, TOOLS)
        assert [c.name for c in out.tool_calls] == ["shell"], text
        assert out.text.startswith(("If the build", "Then I will"))
        assert "text after the tool calls" in out.problems[0]


def test_json_example_inside_prose_is_not_a_call() -> None:
    for text in (
        f"To list files you would send:\n```json\n{CALL}\n```\nbut I am done already.",
        f"The call {CALL} reads the pom.",
        f"Done. Example: {CALL}",
    ):
        out = P.parse(text, TOOLS)
        assert out.tool_calls == [] and not out.ill_formed and out.recovered == [], text
        assert out.text == text


def test_look_alikes_are_not_calls() -> None:
    for text in (
        '```json\n{"version": "17", "name": "demo"}\n```',  # extra keys: a config, not a call
        '```json\n{"name": "shell", "arguments": {}, "id": 3}\n```',
        "```xml\n<release>17</release>\n```",
        "```json\n[1, 2, 3]\n```",
        '{"name": "shell", "arguments": {"command": "ls"}, "note": 1} and more',
        '{"name": "mvn", "arguments": {}}',  # not an offered tool
    ):
        out = P.parse(text, TOOLS)
        assert out.tool_calls == [] and out.recovered == [], text


def test_malformed_fenced_call_is_ill_formed_and_kept_as_text() -> None:
    text = '```json\n{"name": "shell", "arguments": {"command": "ls"}\n```'
    out = P.parse(text, TOOLS)
    assert out.ill_formed and out.tool_calls == [] and out.text == text
    assert "invalid JSON" in out.problems[0]
    unknown = P.parse('```json\n{"name": "rm_rf", "arguments": {}}\n```', TOOLS)
    assert unknown.ill_formed and "not an offered tool" in unknown.problems[0]


def test_tagged_calls_win_and_replay_decoded_arguments() -> None:
    text = f'<tool_call>\n{CALL}\n</tool_call>\n```json\n{{"name": "file_editor", "arguments": {{}}}}\n```'
    out = P.parse(text, TOOLS)
    assert [c.name for c in out.tool_calls] == ["shell"]
    assert out.recovered == []
    # Qwen2.5's template applies tojson to arguments: the replay must carry the dict
    assert out.tool_calls[0].raw_arguments is None
    # the tagged form wins even when the tag sits inside a fenced call's argument
    quoted = P.parse('```json\n{"name": "shell", "arguments": {"command": "echo <tool_call>"}}\n```', TOOLS)
    assert quoted.ill_formed and quoted.tool_calls == []
    broken = P.parse('<tool_call>\n{"name": "shell"\n</tool_call>', TOOLS)
    assert broken.ill_formed and broken.tool_calls == [] and broken.recovered == []


def test_selected_for_qwen25_templates_only(qwen3) -> None:
    qwen25 = "{{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }} <tool_call>"
    assert isinstance(parser_for_template(qwen25), Qwen25JsonParser)
    assert not isinstance(parser_for_template(qwen3.chat_template), Qwen25JsonParser)


# no "<" in values: any <tool_call> text sends the output to the tagged parser (tested above)
_args = st.dictionaries(
    st.text("abcxyz", min_size=1, max_size=5),
    st.text(alphabet="ab {}[]\"':\\\n`é", max_size=20) | st.integers(),
    max_size=3,
)


@given(args=_args, lead=st.text(alphabet="ab .:\n", max_size=30))
def test_any_wellformed_fenced_call_round_trips(args: dict, lead: str) -> None:
    body = json.dumps({"name": "shell", "arguments": args})
    text = f"{lead}\n```json\n{body}\n```"
    out = P.parse(text, TOOLS)
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("shell", args)]
    assert out.text == lead.rstrip()
    assert out.tool_calls[0].raw in text  # the raw call is exactly what was sampled


@given(args=_args, tail=st.text(alphabet="abc .", min_size=1, max_size=20).filter(str.strip))
def test_any_fenced_call_inside_prose_stays_text(args: dict, tail: str) -> None:
    text = f"For example\n```json\n{json.dumps({'name': 'shell', 'arguments': args})}\n```\n{tail}"
    out = P.parse(text, TOOLS)
    assert out.tool_calls == [] and out.text == text and not out.ill_formed
