"""Exact reasoning and tool-call parsing (issue 14, item 2).

A parser accepts only what the format defines: a ``</think>`` that no ``<think>`` opened is text,
a ``<think>`` after other text is text, and the JSON inside a call is RFC 8259 JSON (no NaN or
Infinity, no duplicate keys). The issue's input runs through the gateway with the real Qwen3
tokenizer and thinking disabled; the property tests put adversarial text (markup look-alikes,
partial tags, escapes, unicode) around and inside well-formed calls.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.toolcalls import HermesParser

WRITE_FILE = {
    "type": "function",
    "function": {
        "name": "write_file",
        "description": "Write a file.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
}
NO_THINKING = {"enable_thinking": False}


def _turn(qwen3, sampled: str):
    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, [{"text": sampled}]), chat_template_kwargs=NO_THINKING)
    sid = gw.open_session("s")
    return asyncio.run(gw.generate(sid, [{"role": "user", "content": "Write the notes."}], [WRITE_FILE]))


def test_issue_input_literal_close_tag_in_a_call_argument(qwen3):
    body = "Models wrap reasoning as <think>...</think>; a bare </think> is just text."
    args = {"path": "NOTES.md", "content": body}
    sampled = f"<tool_call>\n{json.dumps({'name': 'write_file', 'arguments': args})}\n</tool_call><|im_end|>"
    r = _turn(qwen3, sampled)
    assert not r.ill_formed and r.problems == []
    assert [(c.name, c.arguments) for c in r.tool_calls] == [("write_file", args)]
    assert r.reasoning is None
    assert r.assistant_message.get("reasoning_content") is None


def test_issue_input_literal_close_tag_in_an_answer(qwen3):
    answer = "Close the block with </think> and the model stops reasoning."
    r = _turn(qwen3, answer + "<|im_end|>")
    assert r.text == answer
    assert r.reasoning is None
    assert r.tool_calls == [] and not r.ill_formed


def test_thinking_prompt_still_splits_reasoning(qwen3):
    gw = RolloutGateway(
        qwen3, ScriptedBackend(qwen3, [{"text": "<think>\nCheck.\n</think>\n\nDone.<|im_end|>"}])
    )
    r = asyncio.run(gw.generate(gw.open_session("s"), [{"role": "user", "content": "go"}]))
    assert (r.reasoning, r.text) == ("Check.", "Done.")


PARSER = HermesParser(("<|im_end|>",))


@pytest.mark.parametrize(
    "bad_json",
    [
        '{"name": "f", "arguments": {"x": NaN}}',
        '{"name": "f", "arguments": {"x": Infinity}}',
        '{"name": "f", "arguments": {"x": -Infinity}}',
        '{"name": "f", "arguments": {"x": 1, "x": 2}}',
        '{"name": "f", "name": "g", "arguments": {}}',
        '{"name": "f", "arguments": "{\\"x\\": NaN}"}',
    ],
)
def test_call_json_is_strict_rfc8259(bad_json):
    text = f"<tool_call>\n{bad_json}\n</tool_call>"
    out = PARSER.parse(text + "<|im_end|>", {"f", "g"})
    assert out.ill_formed and out.tool_calls == []
    assert out.text == text  # nothing lost: the whole output stays visible as text


# ---------------------------------------------------------------- properties

LOOKALIKES = [
    "<think>",
    "</think>",
    "<think",
    "</think",
    "think>",
    "<tool_call",
    "tool_call>",
    "</tool_call",
    "<|im_end|>",
    "<|im_start|>",
    "<tool_response>",
    "\\",
    '"',
    "\\n",
    "\\u0000",
    "{",
    "}",
    "é",
    "😀",
    "\u202e",
    "\n",
]
fragment = st.one_of(st.sampled_from(LOOKALIKES), st.text(max_size=6))
adversarial = st.lists(fragment, max_size=8).map("".join)
json_scalar = st.one_of(
    adversarial, st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.booleans()
)
arguments = st.dictionaries(adversarial, json_scalar, max_size=4)


def _call_block(name: str, args: dict, ensure_ascii: bool) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args}, ensure_ascii=ensure_ascii)}\n</tool_call>"


def _clean_lead(text: str) -> str:
    """Content before the calls: anything but a real call tag, and not starting a <think> block."""
    text = text.replace("<tool_call>", "").replace("</tool_call>", "").replace("<|im_end|>", "")
    return text if not text.lstrip().startswith("<think>") else "x" + text


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    lead=adversarial,
    calls=st.lists(st.tuples(st.sampled_from(["f", "g"]), arguments), min_size=1, max_size=3),
    ensure_ascii=st.booleans(),
    reasoning=st.one_of(st.none(), adversarial),
)
def test_adversarial_text_around_well_formed_calls(lead, calls, ensure_ascii, reasoning):
    lead = _clean_lead(lead)
    blocks = "\n".join(_call_block(n, a, ensure_ascii) for n, a in calls)
    body = (lead + "\n" if lead else "") + blocks
    if reasoning is not None:
        reasoning = reasoning.replace("</think>", "").strip("\n")
        body = f"<think>\n{reasoning}\n</think>\n\n{body}"
    out = PARSER.parse(body + "<|im_end|>", {"f", "g"})
    assert not out.ill_formed, out.problems
    assert [(c.name, c.arguments) for c in out.tool_calls] == calls
    assert out.reasoning == reasoning
    expected_text = lead if reasoning is None else lead.lstrip("\n")
    assert out.text == expected_text


@settings(max_examples=300)
@given(text=adversarial)
def test_answers_without_an_opening_tag_are_all_content(text):
    text = _clean_lead(text)
    out = PARSER.parse(text + "<|im_end|>", set())
    assert out.reasoning is None
    assert out.text == text
    assert out.tool_calls == [] and not out.ill_formed
