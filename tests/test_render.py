"""ChatRenderer: the direct compiled-template render equals apply_chat_template; encoding."""

from __future__ import annotations

import json

import pytest
from support.strands_tools import ADD_TOOL, ECHO_TOOL

from strands_art.render import ChatRenderer

CONVERSATIONS = [
    [{"role": "user", "content": "hi"}],
    [{"role": "system", "content": "sys"}, {"role": "user", "content": "1+2?"}],
    [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "1+2?"},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "add",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "add", "arguments": {"a": 1, "b": 2}}}
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "3"},
        {"role": "assistant", "content": "It is 3."},
        {"role": "user", "content": "echo x"},
        {
            "role": "assistant",
            "content": "sure",
            "tool_calls": [
                {"id": "b", "type": "function", "function": {"name": "echo", "arguments": '{"text": "x"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "b", "content": "x"},
    ],
]


@pytest.mark.parametrize("tok_fixture", ["qwen3", "smollm2_tok"])
@pytest.mark.parametrize("conv", CONVERSATIONS)
@pytest.mark.parametrize("gen", [True, False])
def test_direct_render_equals_apply_chat_template(request, tok_fixture, conv, gen):
    tok = request.getfixturevalue(tok_fixture)
    renderer = ChatRenderer(tok)
    assert renderer._template is not None
    tools = [ADD_TOOL, ECHO_TOOL]
    fast = renderer.render(conv, tools, add_generation_prompt=gen)
    renderer._template = None  # the reference path
    slow = renderer.render(conv, tools, add_generation_prompt=gen)
    assert fast == slow
    if renderer.supports_tools:
        assert fast == tok.apply_chat_template(conv, tools=tools, tokenize=False, add_generation_prompt=gen)


def test_template_kwargs_reach_the_template(qwen3):
    off = ChatRenderer(qwen3, chat_template_kwargs={"enable_thinking": False})
    text = off.render([{"role": "user", "content": "hi"}])
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert ChatRenderer(qwen3).render([{"role": "user", "content": "hi"}]).endswith("<|im_start|>assistant\n")


async def test_special_tokens_are_single_ids_and_nothing_is_added(qwen3):
    r = ChatRenderer(qwen3)
    ids = await r.encode("<|im_start|>user\nhi<|im_end|>\n")
    assert ids[0] == 151644 and ids[-2:] == [151645, 198]
    assert r.encode_sync("\n\n") == [271] and r.encode_sync("\n") == [198]
    assert r.end_of_turn_ids[0] == 151645
    assert json.loads(json.dumps(r.token_strings(ids[:1]))) == ["<|im_start|>"]
