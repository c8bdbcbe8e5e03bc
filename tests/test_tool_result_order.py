"""Parallel tool results sent back in completion order are rendered in call order (issue 48).

Templates pair tool results with calls by position (Qwen's ``<tool_response>`` blocks, DeepSeek's
tool outputs, Harmony's messages from ``functions.NAME``, Mistral's ``[TOOL_RESULTS]``), so a
harness that answers parallel calls in completion order would make the model read one call's
result as another's. The gateway puts each run of results in the order of the calls by
``tool_call_id`` and records a ``tool_results_reordered`` event. Real tokenizers and templates
of every family whose template renders several calls in one turn (Llama 3.1's renders one only).
"""

from __future__ import annotations

import asyncio
import functools

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.family_cases import READ_TOOL, RUN_TOOL, WRITERS

from strands_art.backends.base import SamplingParams
from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.history.pairing import order_tool_results
from strands_art.registry import family_of, load_tokenizer

ALIASES = ["qwen3", "qwen3.5", "mistral-v3", "deepseek-r1", "gpt-oss"]
IDS = ["aaaaaaaa1", "bbbbbbbb2", "cccccccc3"]  # Mistral's nine alphanumerics
CALLS = [
    {"id": IDS[0], "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}},
    {"id": IDS[1], "type": "function", "function": {"name": "run", "arguments": '{"command": "ls"}'}},
    {"id": IDS[2], "type": "function", "function": {"name": "read_file", "arguments": '{"path": "c.txt"}'}},
]
RESULTS = {IDS[0]: "contents of a.txt", IDS[1]: "a.txt b.txt c.txt", IDS[2]: "contents of c.txt"}
_tok = functools.lru_cache(maxsize=None)(load_tokenizer)


def _answer(alias: str) -> str:
    writer = WRITERS.get(alias)
    return writer.turn([], "Done.", 1, "ok") if writer else "<think>\nok\n</think>\n\nDone.<|im_end|>"


def _turn(alias: str, order: list[str], turns: int = 1):
    tok = _tok(alias)
    backend = ScriptedBackend(tok, [{"text": _answer(alias)}] * turns)
    gw = RolloutGateway(tok, backend, family=family_of(alias), sampling=SamplingParams(max_new_tokens=64))
    gw.open_session("s")
    messages = [
        {"role": "user", "content": "Look around."},
        {"role": "assistant", "content": "", "tool_calls": CALLS},
        *({"role": "tool", "tool_call_id": i, "content": RESULTS[i]} for i in order),
    ]

    async def run():
        r = await gw.generate("s", messages, [READ_TOOL, RUN_TOOL])
        for _ in range(turns - 1):
            await gw.generate("s", messages + [r.assistant_message, {"role": "user", "content": "More."}])

    asyncio.run(run())
    return backend.prompts, gw.close_session("s")


@pytest.mark.parametrize("alias", ALIASES)
def test_results_in_completion_order_render_as_in_call_order(alias):
    [ordered], traj = _turn(alias, IDS)
    [shuffled, _], traj2 = _turn(alias, [IDS[2], IDS[0], IDS[1]], turns=2)
    assert shuffled == ordered  # token for token
    text = _tok(alias).decode(ordered)
    assert text.index(RESULTS[IDS[0]]) < text.index(RESULTS[IDS[1]]) < text.index(RESULTS[IDS[2]])
    assert not [e for e in traj.events if e["kind"] == "tool_results_reordered"]
    events = [e for e in traj2.events if e["kind"] == "tool_results_reordered"]
    assert [(e["turn"], e["message"]) for e in events] == [(0, 1)]  # reported once, not every turn
    assert [m.get("tool_call_id") for m in traj2.turns[0].messages[2:]] == IDS  # recorded as rendered


def test_runs_that_cannot_be_ordered_by_id_are_left_as_sent():
    call = lambda i: {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}  # noqa: E731
    msgs = [
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "", "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "tool_call_id": "x", "content": "1"},  # an id the harness rewrote
        {"role": "tool", "tool_call_id": "a", "content": "2"},
    ]
    assert order_tool_results(msgs) == (msgs, [])


@given(st.permutations(range(4)), st.integers(0, 2))
def test_ordering_is_a_permutation_into_call_order(perm, extra_users):
    calls = [
        {"id": f"c{k}", "type": "function", "function": {"name": "f", "arguments": "{}"}} for k in range(4)
    ]
    results = [{"role": "tool", "tool_call_id": f"c{k}", "content": str(k)} for k in perm]
    msgs = [{"role": "user", "content": "u"}] * (extra_users + 1) + [
        {"role": "assistant", "content": "", "tool_calls": calls},
        *results,
        {"role": "user", "content": "v"},
    ]
    out, moved = order_tool_results(msgs)
    a = extra_users + 1
    assert [m["content"] for m in out[a + 1 : a + 5]] == ["0", "1", "2", "3"]
    assert out[: a + 1] == msgs[: a + 1] and out[-1] is msgs[-1] and len(out) == len(msgs)
    assert moved == ([] if list(perm) == [0, 1, 2, 3] else [a])
