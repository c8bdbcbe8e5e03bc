"""The same message in another form heals in linear mode (issue 28, item 3):

- reasoning echoed inline in the content (``<think>R</think>C``) instead of a reasoning field, for
  every family whose template writes reasoning inline (Qwen3, Qwen3.5, DeepSeek-R1);
- tool definitions re-sent with their JSON-schema keys in another order, or the tools list in
  another order (docs/linear-history.md, "Tool definitions"): objects compare as objects, the
  list as a multiset; a real change is still ``tools_changed``.
"""

from __future__ import annotations

import asyncio
import copy
import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.history.normalize import normalize_messages, split_inline_reasoning, tools_key
from strands_art.registry import family_of, load_tokenizer

R, A = "Primes: 2, 3, 5, 7.", "7"
#: alias -> (sampled answer with reasoning, as the model writes it after the generation prompt)
THINKERS = {
    "qwen3": f"<think>\n{R}\n</think>\n\n{A}<|im_end|>",
    "qwen3.5": f"{R}\n</think>\n\n{A}<|im_end|>",
    "deepseek-r1": f"{R}\n</think>\n\n{A}<｜end▁of▁sentence｜>",
}
END = {"qwen3": "<|im_end|>", "qwen3.5": "<|im_end|>", "deepseek-r1": "<｜end▁of▁sentence｜>"}


def _run(alias: str, script: list[str], requests, tools_per_turn=None):
    tok = load_tokenizer(alias)
    gw = RolloutGateway(
        tok,
        ScriptedBackend(tok, [{"text": t} for t in script]),
        history_mode="linear",
        family=family_of(alias),
    )
    gw.open_session("s")
    results = []
    for i, make in enumerate(requests):
        tools = tools_per_turn[i] if tools_per_turn else None
        results.append(asyncio.run(gw.generate("s", make(results), tools)))
    return results, gw.close_session("s")


@pytest.mark.parametrize("alias", list(THINKERS))
def test_reasoning_echoed_inline_is_the_same_message(alias) -> None:
    first = [{"role": "user", "content": "Pick a prime below 10."}]

    def second(results):
        r = results[0]
        assert r.reasoning == R and r.text == A
        echo = {"role": "assistant", "content": f"<think>\n{r.reasoning}\n</think>\n\n{r.text}"}
        return first + [echo, {"role": "user", "content": "Now double it."}]

    _, traj = _run(alias, [THINKERS[alias], "14" + END[alias]], [lambda _: first, second])
    assert [e["kind"] for e in traj.events] == ["heal"], traj.events
    assert len(traj.rows) == 1


def test_inline_reasoning_that_differs_is_an_edit() -> None:
    first = [{"role": "user", "content": "Pick a prime below 10."}]

    def second(results):
        echo = {"role": "assistant", "content": f"<think>\nsomething else\n</think>\n\n{A}"}
        return first + [echo, {"role": "user", "content": "Now double it."}]

    _, traj = _run("qwen3", [THINKERS["qwen3"], "14<|im_end|>"], [lambda _: first, second])
    assert [e.get("reason") for e in traj.events if e["kind"] == "reset"] == ["message_edited"]


def test_split_inline_reasoning_is_exact_and_leaves_other_messages_alone() -> None:
    msgs = normalize_messages(
        [
            {"role": "user", "content": "<think>\nuser text\n</think>\n\nx"},
            {"role": "assistant", "content": "<think>\nR\n</think>\n\nC"},
            {"role": "assistant", "content": "answer <think>not at the start</think>"},
            {"role": "assistant", "content": "<think>\nunclosed"},
            {"role": "assistant", "content": "<think>\n\n</think>\n\nC"},
            {"role": "assistant", "content": "<think>\nR2\n</think>\n\nC", "reasoning_content": "kept"},
        ]
    )
    out = split_inline_reasoning(msgs)
    assert out[1] == {"role": "assistant", "content": "C", "reasoning_content": "R"}
    assert out[4] == {"role": "assistant", "content": "C"}  # empty reasoning counts as none
    assert [out[i] is msgs[i] for i in (0, 2, 3, 5)] == [True] * 4
    assert msgs[1]["content"] == "<think>\nR\n</think>\n\nC"  # the input is not changed
    assert split_inline_reasoning(msgs[:1]) is not None and split_inline_reasoning([msgs[0]])[0] is msgs[0]


# --- tool definitions
SHELL = {
    "type": "function",
    "function": {
        "name": "shell",
        "description": "Run a command.",
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "the command"},
                "timeout": {"type": "integer"},
            },
            "required": ["command"],
        },
    },
}
READ = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}


def _shuffled(value, rnd: random.Random):
    """The same JSON value with every object's keys in a random order."""
    if isinstance(value, dict):
        items = [(k, _shuffled(v, rnd)) for k, v in value.items()]
        rnd.shuffle(items)
        return dict(items)
    if isinstance(value, list):
        return [_shuffled(v, rnd) for v in value]
    return value


@given(st.integers(0, 10_000), st.booleans())
def test_tools_key_ignores_object_key_order_and_list_order(seed: int, reverse: bool) -> None:
    rnd = random.Random(seed)
    tools = [SHELL, READ]
    other = [_shuffled(t, rnd) for t in (tools[::-1] if reverse else tools)]
    assert tools_key(other) == tools_key(tools)


@pytest.mark.parametrize(
    "change",
    [
        lambda t: t[0]["function"].update(description="Run a shell command."),
        lambda t: t[0]["function"]["parameters"]["required"].append("timeout"),
        lambda t: t.pop(),
        lambda t: t.append(copy.deepcopy(t[0])),
    ],
)
def test_tools_key_sees_a_real_change(change) -> None:
    tools = copy.deepcopy([SHELL, READ])
    change(tools)
    assert tools_key(tools) != tools_key([SHELL, READ])


CALL = '<tool_call>\n{"name": "shell", "arguments": {"command": "ls"}}\n</tool_call><|im_end|>'


@pytest.mark.parametrize("form", ["keys_reordered", "list_reordered"])
def test_tools_resent_in_another_form_heal_and_keep_the_first_render(form) -> None:
    rnd = random.Random(7)
    first_tools = [SHELL, READ]
    again = [_shuffled(t, rnd) for t in first_tools]
    if form == "list_reordered":
        again = again[::-1]
    assert json.dumps(again) != json.dumps(first_tools)
    base = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "List."},
    ]

    def second(results):
        r = results[0]
        tool = {"role": "tool", "tool_call_id": r.tool_calls[0].id, "content": "a.txt"}
        return base + [json.loads(json.dumps(r.assistant_message)), tool]

    results, traj = _run("qwen3", [CALL, "a.txt<|im_end|>"], [lambda _: base, second], [first_tools, again])
    assert [e["kind"] for e in traj.events] == ["heal"], traj.events
    assert len(traj.rows) == 1
    t0, t1 = traj.turns
    assert t1.prompt_ids[: len(t0.prompt_ids)] == t0.prompt_ids  # the first render (its tool order) kept
