"""Family conventions under a harness (issue 28, item 5), every family on its real tokenizer:

- the harness replaces the model's tool-call ids with its own (``call_0x0abc123``): every family
  renders the next turn (Mistral's template refuses ids that are not nine characters: they are
  mapped, results by position back to the id the model sampled), and linear mode keeps one row;
- every end token the model can emit (its ``generation_config.json`` ``eos_token_id`` list) is a
  stop ID, and a turn sampled to any of them is a stop, not a truncation (Qwen's
  ``<|endoftext|>`` was recorded as ``length``).
"""

from __future__ import annotations

import asyncio

import pytest
from support.family_cases import WRITERS, tool_loop

from strands_art.backends.scripted import ScriptedBackend
from strands_art.families.mistral import mistral_ids
from strands_art.gateway import RolloutGateway
from strands_art.registry import family_of, load_tokenizer
from strands_art.render import ChatRenderer

TURNS = [([("run", {"command": "mvn -v"})], "", "plan", None), ([], "done", "ok", None)]


def _turns(alias: str):
    writer = WRITERS[alias]
    return [(c, t, r if writer.think else None, writer.ends[0]) for c, t, r, _ in TURNS]


@pytest.mark.parametrize("alias", list(WRITERS))
def test_harness_assigned_ids_render_and_keep_one_linear_row(alias) -> None:
    loop = asyncio.run(tool_loop(alias, _turns(alias), "linear", harness_ids=True))
    traj = loop.trajectory
    assert [r.finish_reason for r in loop.results] == ["tool_calls", "stop"]
    assert not [e for e in traj.events if e["kind"] in ("reset", "fork", "linear_disabled")], traj.events
    assert len(traj.rows) == 1


@pytest.mark.parametrize("alias", list(WRITERS))
def test_harness_assigned_ids_render_in_tree_mode(alias) -> None:
    loop = asyncio.run(tool_loop(alias, _turns(alias), "tree", harness_ids=True))
    assert [r.finish_reason for r in loop.results] == ["tool_calls", "stop"]
    forks = [e for e in loop.trajectory.events if e["kind"] == "fork"]
    assert len(loop.trajectory.rows) == 1 + len(forks)  # every extra row explained


def test_mistral_results_follow_the_sampled_id_by_position() -> None:
    """Linear mode renders the stored assistant (sampled id); the harness's relabelled result
    gets that id, so the prompt says what the model saw."""
    tok = load_tokenizer("mistral-v3")
    renderer = ChatRenderer(tok, family="mistral")
    messages = [
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "a1B2c3D4e", "type": "function", "function": {"name": "w", "arguments": "{}"}},
                {"id": "call_abc123", "type": "function", "function": {"name": "w", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_zzz", "content": "-3C"},
        {"role": "tool", "tool_call_id": "call_abc123", "content": "-4C"},
    ]
    out = mistral_ids(messages)
    second = out[1]["tool_calls"][1]["id"]
    assert len(second) == 9 and second.isalnum() and second != "a1B2c3D4e"
    assert [m["tool_call_id"] for m in out[2:]] == ["a1B2c3D4e", second]
    assert messages[2]["tool_call_id"] == "call_zzz"  # the caller's messages are not changed
    assert mistral_ids(messages) == out  # the same mapping every turn (renders stay stable)
    text = renderer.render(out, None, True)
    assert '"call_id": "a1B2c3D4e"' in text and f'"call_id": "{second}"' in text


#: every end token each model can emit: its generation_config.json eos_token_id list
MODEL_END_TOKENS = {
    "qwen3": ["<|im_end|>", "<|endoftext|>"],
    "qwen2.5-coder-0.5b": ["<|im_end|>", "<|endoftext|>"],
    "qwen3.5": ["<|im_end|>", "<|endoftext|>"],
    "smollm2": ["<|im_end|>"],
    "llama3.1": ["<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"],
    "llama3.2": ["<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"],
    "mistral-v3": ["</s>"],
    "deepseek-r1": ["<｜end▁of▁sentence｜>"],
    "deepseek-v3.1": ["<｜end▁of▁sentence｜>"],
    "gpt-oss": ["<|return|>", "<|endoftext|>", "<|call|>"],
}
ANSWER = {"gpt-oss": "<|channel|>final<|message|>It is done."}


@pytest.mark.parametrize(("alias", "end"), [(a, e) for a, ends in MODEL_END_TOKENS.items() for e in ends])
def test_every_end_token_the_model_can_emit_is_a_stop(alias, end) -> None:
    tok = load_tokenizer(alias)
    end_id = tok.convert_tokens_to_ids(end)
    fam = family_of(alias)
    gw = RolloutGateway(
        tok, ScriptedBackend(tok, [{"text": ANSWER.get(alias, "It is done.") + end}]), family=fam
    )
    assert end_id in gw.renderer.end_of_turn_ids
    gw.open_session("s")
    r = asyncio.run(gw.generate("s", [{"role": "user", "content": "Is it done?"}]))
    assert r.turn.output_ids[-1] == end_id
    assert r.finish_reason == "stop"
    assert end not in r.text
    assert "truncated_turns" not in gw.close_session("s").metadata
