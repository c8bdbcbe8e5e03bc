"""Linear history mode on the real Qwen3 and SmolLM2 tokenizers, plus hand-written templates."""

from __future__ import annotations

import asyncio
import json

import pytest
from support.strands_tools import ADD_TOOL, ECHO_TOOL

from strands_art.backends.base import SamplingParams
from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.history.linear import HistoryDivergence, LinearHistory
from strands_art.history.normalize import normalize_messages
from strands_art.render import ChatRenderer
from strands_art.replay import replay

SYSTEM = {"role": "system", "content": "You are a calculator."}
USER = {"role": "user", "content": "Add some numbers."}
IM_END, NL, NLNL, ENDOFTEXT = 151645, 198, 271, 151643


def call_text(args: str, think: str | None = None) -> str:
    pre = f"<think>\n{think}\n</think>\n\n" if think is not None else ""
    return f'{pre}<tool_call>\n{{"name": "add", "arguments": {args}}}\n</tool_call><|im_end|>'


def enc(tok, text):
    return tok.backend_tokenizer.encode(text, add_special_tokens=False).ids


def harness_echo(assistant: dict, style: int = 0, keep_reasoning: bool = False) -> dict:
    """What a harness sends back: arguments re-serialized (sorted keys / other spacing), ids kept."""
    out = {"role": "assistant", "content": assistant["content"] or None}
    if keep_reasoning and assistant.get("reasoning_content"):
        out["reasoning_content"] = assistant["reasoning_content"]
    if assistant.get("tool_calls"):
        calls = []
        for c in assistant["tool_calls"]:
            args = c["function"]["arguments"]
            args = json.loads(args) if isinstance(args, str) else args
            text = (
                json.dumps(args, sort_keys=True, separators=(",", ":"))
                if style % 2 == 0
                else json.dumps(dict(reversed(list(args.items()))), indent=1)
            )
            calls.append(
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["function"]["name"], "arguments": text},
                }
            )
        out["tool_calls"] = calls
    return out


async def run_loop(
    tok, outputs, mode="linear", turns=None, chat_template=None, kwargs=None, keep_reasoning=False, **cfg
):
    gw = RolloutGateway(
        tok,
        ScriptedBackend(tok, outputs),
        history_mode=mode,
        chat_template_kwargs=kwargs or {},
        **({"chat_template": chat_template} if chat_template else {}),
        **cfg,
    )
    sid = gw.open_session("r")
    msgs = [SYSTEM, USER]
    results = []
    for k in range(turns or len(outputs)):
        r = await gw.generate(sid, msgs, [ADD_TOOL])
        results.append(r)
        echo = harness_echo(r.assistant_message, style=k, keep_reasoning=keep_reasoning)
        msgs = msgs + [echo]
        for c in r.tool_calls:
            msgs.append({"role": "tool", "tool_call_id": c.id, "content": str(k + 3)})
        if not r.tool_calls:
            msgs.append({"role": "user", "content": f"Now add {k} more."})
    return gw, sid, results


def assert_linear_row(traj):
    """One row whose tokens are the concatenation of recorded prompts and outputs."""
    assert len(traj.rows) == 1
    row = traj.rows[0]
    last = traj.turns[-1]
    assert row.input_ids == last.prompt_ids + last.output_ids
    for a, b in zip(traj.turns, traj.turns[1:], strict=False):
        assert b.prompt_ids[: len(a.prompt_ids) + len(a.output_ids)] == a.prompt_ids + a.output_ids
    assert sum(row.loss_mask) == sum(len(t.output_ids) for t in traj.turns)


# ------------------------------------------------------------------ cosmetic drift stays one row
@pytest.mark.parametrize("tokname", ["qwen3", "smollm2_tok"])
async def test_reordered_and_respaced_arguments_stay_one_row(tokname, request):
    tok = request.getfixturevalue(tokname)
    outputs = [{"text": call_text('{"b": 2,   "a": 1}')}] * 3 + [{"text": "The sum is 3.<|im_end|>"}]
    gw, sid, _ = await run_loop(tok, outputs)
    traj = gw.close_session(sid)
    assert_linear_row(traj)
    heals = [e for e in traj.events if e["kind"] == "heal"]
    assert [e["reason"] for e in heals] == ["fast"] * 3
    assert not [e for e in traj.events if e["kind"] in ("reset", "fork")]
    # the sampled argument spacing survives in the context of later turns
    assert '{"b": 2,   "a": 1}' in tok.decode(traj.turns[-1].prompt_ids)
    counters = traj.rows[0].metadata["history"]
    assert counters["healed_turns"] == 3 and counters["turns"] == 4 and counters.get("resets", 0) == 0
    # tree mode splits on the same harness drift (the drift is real)
    gw2, sid2, _ = await run_loop(tok, outputs, mode="tree")
    assert len(gw2.close_session(sid2).rows) > 1


async def test_qwen3_restyled_last_turn_think_wrapper_zero_resets(qwen3):
    """Qwen3 wraps the last assistant turn in <think></think>; empty reasoning is dropped on replay."""
    outputs = [{"text": call_text('{"a": 1, "b": 2}', think="")}] * 3 + [
        {"text": "<think>\n\n</think>\n\nDone.<|im_end|>"}
    ]
    gw, sid, results = await run_loop(qwen3, outputs)
    traj = gw.close_session(sid)
    assert_linear_row(traj)
    assert traj.rows[0].metadata["history"].get("resets", 0) == 0
    assert all(e["kind"] == "heal" for e in traj.events)
    # the template re-renders the turn without the empty think block: 4 tokens of drift per turn
    assert [e["drift_tokens"] for e in traj.events] == [4, 4, 4]


async def test_qwen3_enable_thinking_false_generation_prompt(qwen3):
    outputs = [{"text": call_text('{"a": 1, "b": 2}')}] * 2 + [{"text": "Done.<|im_end|>"}]
    gw, sid, _ = await run_loop(qwen3, outputs, kwargs={"enable_thinking": False})
    traj = gw.close_session(sid)
    assert_linear_row(traj)
    p1 = qwen3.decode(traj.turns[1].prompt_ids)
    assert p1.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    # the served empty think block of turn 0 stays in the context of turn 1
    assert p1.count("<think>\n\n</think>") == 2
    assert [e["drift_tokens"] for e in traj.events] == [4, 4]


async def test_qwen3_dropped_earlier_think_blocks_fall_back_to_full_history(qwen3):
    """A new user query makes Qwen3 drop earlier <think> blocks: the earlier text changes."""
    outputs = [
        {"text": call_text('{"a": 1, "b": 2}', think="I should add.")},
        {"text": "<think>\nDone adding.\n</think>\n\nIt is 3.<|im_end|>"},
        {"text": "<think>\nAgain.\n</think>\n\nStill 3.<|im_end|>"},
    ]
    gw, sid, results = await run_loop(qwen3, outputs, keep_reasoning=True)
    traj = gw.close_session(sid)
    assert_linear_row(traj)
    assert [e["reason"] for e in traj.events] == ["fast", "full_history"]
    t1, t2 = traj.turns[1], traj.turns[2]
    saved = t1.prompt_ids + t1.output_ids
    assert t2.prompt_ids[: len(saved)] == saved
    # full-history path gives: saved + "\n" (closer after the retained <|im_end|>) + new user turn
    expected_tail = "\n<|im_start|>user\nNow add 1 more.<|im_end|>\n<|im_start|>assistant\n"
    assert t2.prompt_ids == saved + [NL] + enc(qwen3, expected_tail[1:])
    assert qwen3.decode(t2.prompt_ids[len(saved) :]) == expected_tail


# ------------------------------------------------------------------ closers
async def test_retained_stop_token_is_not_doubled(qwen3):
    gw, sid, _ = await run_loop(qwen3, [{"text": call_text('{"a": 1, "b": 2}')}, {"text": "3<|im_end|>"}])
    t0, t1 = gw.close_session(sid).turns
    assert t0.output_ids[-1] == IM_END
    seam = t1.prompt_ids[len(t0.prompt_ids) + len(t0.output_ids) - 1 :][:3]
    assert seam == [IM_END, NL, 151644]  # <|im_end|> \n <|im_start|>


async def test_length_truncated_turn_gets_the_full_closer(qwen3):
    outputs = [
        {"text": '<tool_call>\n{"name": "add", "argu', "finish_reason": "length"},
        {"text": "ok<|im_end|>"},
    ]
    gw, sid, results = await run_loop(qwen3, outputs)
    traj = gw.close_session(sid)
    t0, t1 = traj.turns
    assert t0.finish_reason == "length" and results[0].ill_formed
    n = len(t0.prompt_ids) + len(t0.output_ids)
    assert t1.prompt_ids[n : n + 2] == [IM_END, NL]
    assert len(traj.rows) == 1 and traj.rows[0].metadata["history"]["closer_length"] == 1


async def test_different_end_token_gets_the_closer_after_it(qwen3):
    outputs = [{"text": "Hmm.<|endoftext|>", "finish_reason": "stop"}, {"text": "ok<|im_end|>"}]
    gw, sid, _ = await run_loop(qwen3, outputs)
    traj = gw.close_session(sid)
    t0, t1 = traj.turns
    n = len(t0.prompt_ids) + len(t0.output_ids)
    assert t1.prompt_ids[n - 1 : n + 2] == [ENDOFTEXT, IM_END, NL]
    assert traj.rows[0].metadata["history"]["closer_foreign_stop"] == 1


# hand-written template: "### role\ncontent\n\n" — the closer "\n\n" holds no special token
PLAIN_TEMPLATE = (
    "{% for m in messages %}{{ '### ' + m['role'] + '\\n' + m['content'] + '\\n\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '### assistant\\n' }}{% endif %}"
)


async def test_newline_seam_keeps_the_served_prefix_exactly(qwen3):
    r = ChatRenderer(qwen3, PLAIN_TEMPLATE)
    h = LinearHistory(r)
    msgs = normalize_messages([{"role": "user", "content": "hi"}])
    p0 = await h.plan(msgs, None)
    out = enc(qwen3, "Hello there") + [NL]  # stopped on a "\n\n" stop string after one "\n"
    assert out[-1] == NL
    h.commit(p0, out, "stop", {"role": "assistant", "content": "Hello there"})
    msgs2 = msgs + normalize_messages(
        [{"role": "assistant", "content": "Hello there"}, {"role": "user", "content": "x"}]
    )
    p1 = await h.plan(msgs2, None)
    served = p0.prompt_ids + out
    full_text = r.render(msgs2, None, True)
    assert p1.prompt_ids[: len(served)] == served
    assert qwen3.decode(p1.prompt_ids) == full_text
    assert p1.prompt_ids[len(served)] == NL  # the missing half of the closer, not merged into 271
    assert enc(qwen3, full_text) != p1.prompt_ids  # whole-text tokenization merges "\n\n" (271)
    assert NLNL in enc(qwen3, full_text)
    assert p1.events[0]["reason"] == "probe"


# template whose rendering of an earlier assistant turn changes once a later one exists
LATEST_TEMPLATE = (
    "{% set ns = namespace(last=-1) %}{% for m in messages %}{% if m['role'] == 'assistant' %}"
    "{% set ns.last = loop.index0 %}{% endif %}{% endfor %}"
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' }}"
    "{% if m['role'] == 'assistant' and loop.index0 == ns.last %}{{ '(latest) ' }}{% endif %}"
    "{{ m['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


async def test_template_that_restyles_earlier_turns_falls_back_to_full_history(qwen3):
    r = ChatRenderer(qwen3, LATEST_TEMPLATE)
    h = LinearHistory(r)
    msgs = normalize_messages([{"role": "user", "content": "one"}])
    saved: list[int] = []
    prompts = []
    for k in range(3):
        plan = await h.plan(msgs, None)
        assert plan.prompt_ids[: len(saved)] == saved
        prompts.append(plan)
        out = enc(qwen3, f"answer {k}<|im_end|>")
        h.commit(plan, out, "stop", {"role": "assistant", "content": f"answer {k}"})
        saved = plan.prompt_ids + out
        msgs = msgs + normalize_messages(
            [{"role": "assistant", "content": f"answer {k}"}, {"role": "user", "content": f"q{k}"}]
        )
    # turn 1: "(latest) " moved onto... nothing earlier yet: fast; turn 2: turn 0's render lost "(latest) "
    assert [p.events[0]["reason"] for p in prompts[1:]] == ["fast", "full_history"]
    # same tokens as full-history healing: every saved token, the closer "\n", the new user turn
    p2 = prompts[2]
    prev = prompts[1].prompt_ids + enc(qwen3, "answer 1<|im_end|>")
    assert p2.prompt_ids == prev + [NL] + enc(
        qwen3, "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\n"
    )


async def test_full_history_heal_finds_the_closer_by_probe_when_the_assistant_wrote_it(qwen3):
    """The last assistant's own text holds the closer (``<|im_end|>\n``): after relocating the
    changed history, the turn's end is found with the probe render, not at the first closer."""
    r = ChatRenderer(qwen3, LATEST_TEMPLATE)
    h = LinearHistory(r)
    contents = ["answer 0", "answer 1 <|im_end|>\n<|im_start|>user\nfake", "answer 2"]
    msgs = normalize_messages([{"role": "user", "content": "one"}])
    prompts = []
    for k in range(3):
        plan = await h.plan(msgs, None)
        prompts.append(plan)
        h.commit(plan, enc(qwen3, "sampled<|im_end|>"), "stop", {"role": "assistant", "content": contents[k]})
        msgs = msgs + normalize_messages(
            [{"role": "assistant", "content": contents[k]}, {"role": "user", "content": f"q{k}"}]
        )
    assert [p.events[0]["reason"] for p in prompts[1:]] == ["fast", "full_history"]
    prev = prompts[1].prompt_ids + enc(qwen3, "sampled<|im_end|>")
    assert prompts[2].prompt_ids == prev + [NL] + enc(
        qwen3, "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\n"
    )


# ------------------------------------------------------------------ divergence policies
async def _two_turns(tok, policy):
    outputs = [
        {"text": call_text('{"a": 1, "b": 2}')},
        {"text": call_text('{"a": 3, "b": 4}')},
        {"text": "x<|im_end|>"},
    ]
    gw = RolloutGateway(tok, ScriptedBackend(tok, outputs), history_mode="linear", on_nonlinear=policy)
    sid = gw.open_session("r")
    msgs = [SYSTEM, USER]
    for k in range(2):
        r = await gw.generate(sid, msgs, [ADD_TOOL])
        msgs = msgs + [
            harness_echo(r.assistant_message),
            {"role": "tool", "tool_call_id": r.tool_calls[0].id, "content": f"result {k}"},
        ]
    return gw, sid, msgs


@pytest.mark.parametrize(
    "edit,reason,index",
    [
        (lambda m: (m, [ADD_TOOL, ECHO_TOOL]), "tools_changed", None),
        (lambda m: ([m[0], {"role": "user", "content": "Edited."}, *m[2:]], [ADD_TOOL]), "message_edited", 1),
        (
            lambda m: ([*m[:4], {"role": "assistant", "content": "I changed my mind."}, *m[5:]], [ADD_TOOL]),
            "message_edited",
            4,
        ),
    ],
    ids=["tools", "user", "assistant"],
)
async def test_divergence_policies(qwen3, edit, reason, index):
    # error: a clear exception naming the first differing message; nothing recorded
    gw, sid, msgs = await _two_turns(qwen3, "error")
    new_msgs, tools = edit(msgs)
    with pytest.raises(HistoryDivergence) as exc:
        await gw.generate(sid, new_msgs, tools)
    assert exc.value.reason == reason and exc.value.message_index == index
    if index is not None:
        assert f"at message {index}" in str(exc.value)
    assert len(gw.trajectory(sid).turns) == 2

    # reset: a new linear segment, explained by a reset event (no tree fork explanation)
    gw, sid, msgs = await _two_turns(qwen3, "reset")
    new_msgs, tools = edit(msgs)
    await gw.generate(sid, new_msgs, tools)
    traj = gw.close_session(sid)
    resets = [e for e in traj.events if e["kind"] == "reset"]
    assert len(resets) == 1 and resets[0]["reason"] == reason and resets[0]["message"] == index
    assert not [e for e in traj.events if e["kind"] == "fork"]
    assert len(traj.rows) == 2
    t1, t2 = traj.turns[1], traj.turns[2]
    kept = resets[0]["kept_tokens"]
    if reason == "message_edited" and index == 4:
        # partial healing: the saved tokens before the edited assistant message are kept
        assert kept == len(traj.turns[0].prompt_ids) + len(traj.turns[0].output_ids) + 1
        assert t2.prompt_ids[:kept] == (t1.prompt_ids + t1.output_ids)[:kept]
    else:
        assert kept == 0

    # disable: healing stops for the rest of the session
    gw, sid, msgs = await _two_turns(qwen3, "disable")
    new_msgs, tools = edit(msgs)
    await gw.generate(sid, new_msgs, tools)
    traj = gw.trajectory(sid)
    assert [e["kind"] for e in traj.events if e["kind"] != "heal"][:1] == ["linear_disabled"]
    assert traj.rows[-1].metadata["history"]["disabled"] == 1


# ------------------------------------------------------------------ retries, lineages, commits
async def test_retry_branches_from_before_the_last_turn(qwen3):
    outputs = [
        {"text": call_text('{"a": 1, "b": 2}')},
        {"text": "first try<|im_end|>"},
        {"text": "second try<|im_end|>"},
        {"text": "x<|im_end|>"},
    ]
    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, outputs), history_mode="linear")
    sid = gw.open_session("r")
    r0 = await gw.generate(sid, [SYSTEM, USER], [ADD_TOOL])
    msgs = [
        SYSTEM,
        USER,
        harness_echo(r0.assistant_message),
        {"role": "tool", "tool_call_id": r0.tool_calls[0].id, "content": "3"},
    ]
    await gw.generate(sid, msgs, [ADD_TOOL])
    r2 = await gw.generate(sid, msgs, [ADD_TOOL])  # the harness re-sends the same request
    r3 = await gw.generate(sid, msgs + [{"role": "assistant", "content": "second try"}, USER], [ADD_TOOL])
    traj = gw.close_session(sid)
    t1, t2, t3 = traj.turns[1:]
    assert t2.prompt_ids == t1.prompt_ids
    assert [e["kind"] for e in traj.events if e["kind"] != "heal"] == ["retry"]
    assert t3.prompt_ids[: len(t2.prompt_ids) + len(t2.output_ids)] == t2.prompt_ids + t2.output_ids
    assert len(traj.rows) == 2 and t3.row == t2.row != t1.row
    assert r2.text == "second try" and r3.text == "x"
    assert traj.rows[0].metadata["history"]["retries"] == 1


async def test_alternating_subagents_keep_their_own_lineages(smollm2_tok):
    tok = smollm2_tok
    outputs = [{"text": f"reply {k}<|im_end|>"} for k in range(6)]
    gw = RolloutGateway(tok, ScriptedBackend(tok, outputs), history_mode="linear")
    sid = gw.open_session("r")
    convs = {
        "a": [{"role": "system", "content": "You plan."}, {"role": "user", "content": "Plan it."}],
        "b": [{"role": "system", "content": "You code."}, {"role": "user", "content": "Code it."}],
    }
    for k in range(6):
        name = "ab"[k % 2]
        r = await gw.generate(sid, convs[name], None)
        convs[name] = convs[name] + [
            {"role": "assistant", "content": r.text},
            {"role": "user", "content": f"go on {k}"},
        ]
    traj = gw.close_session(sid)
    assert len(traj.rows) == 2
    assert [t.lineage for t in traj.turns] == [0, 1, 0, 1, 0, 1]
    assert [e["kind"] for e in traj.events] == ["new_lineage", "heal", "heal", "heal", "heal"]
    assert traj.rows[0].metadata["history"].get("resets", 0) == 0


async def test_partial_healing_after_compacting_a_tool_result(qwen3):
    outputs = [{"text": call_text(f'{{"a": {k}, "b": 1}}')} for k in range(3)] + [{"text": "x<|im_end|>"}]
    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, outputs), history_mode="linear")
    sid = gw.open_session("r")
    msgs = [SYSTEM, USER]
    for _ in range(3):
        r = await gw.generate(sid, msgs, [ADD_TOOL])
        msgs = msgs + [
            harness_echo(r.assistant_message),
            {"role": "tool", "tool_call_id": r.tool_calls[0].id, "content": "long output " * 20},
        ]
    msgs[5] = {**msgs[5], "content": "[compacted]"}  # the second tool result is compacted
    await gw.generate(sid, msgs, [ADD_TOOL])
    traj = gw.close_session(sid)
    reset = next(e for e in traj.events if e["kind"] == "reset")
    assert reset["reason"] == "message_edited" and reset["message"] == 5 and reset["role"] == "tool"
    t1, t3 = traj.turns[1], traj.turns[3]
    kept = len(t1.prompt_ids) + len(t1.output_ids) + 1  # through turn 1's output and its closer
    assert reset["kept_tokens"] == kept
    assert t3.prompt_ids[:kept] == traj.turns[2].prompt_ids[:kept]
    assert "[compacted]" in qwen3.decode(t3.prompt_ids[kept:])
    assert traj.rows[0].metadata["history"]["partial_heals"] == 1


async def test_uncommitted_turn_does_not_advance(qwen3):
    h = LinearHistory(ChatRenderer(qwen3))
    msgs = normalize_messages([SYSTEM, USER])
    p0 = await h.plan(msgs, None)
    out = enc(qwen3, "Hi.<|im_end|>")
    h.commit(p0, out, "stop", {"role": "assistant", "content": "Hi."})
    nxt = msgs + normalize_messages(
        [{"role": "assistant", "content": "Hi."}, {"role": "user", "content": "More?"}]
    )
    p1 = await h.plan(nxt, None)  # planned, but the generation fails: never committed
    p1b = await h.plan(nxt, None)
    assert p1b.prompt_ids == p1.prompt_ids
    assert h.counters()["turns"] == 1


async def first_tool_turn(renderer, sampled_args: str, args, **policy):
    """A LinearHistory after one committed turn in which the model called add(sampled_args).

    Returns (history, first request's messages, the gateway's assistant message, plan, output IDs).
    """
    h = LinearHistory(renderer, **policy)
    msgs = normalize_messages([SYSTEM, USER])
    plan = await h.plan(msgs, [ADD_TOOL])
    out = enc(renderer.tokenizer, call_text(sampled_args))
    asst = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c", "function": {"name": "add", "arguments": args}}],
    }
    h.commit(plan, out, "stop", asst)
    return h, msgs, asst, plan, out


async def test_measure_drift_reports_distance_from_plain_render(qwen3):
    outputs = [{"text": call_text('{"b": 2,   "a": 1}')}, {"text": "3<|im_end|>"}]
    gw, sid, _ = await run_loop(qwen3, outputs)
    heal = next(e for e in gw.close_session(sid).events if e["kind"] == "heal")
    assert "plain_distance" not in heal
    r = ChatRenderer(qwen3)
    h, msgs, asst, _, _ = await first_tool_turn(r, '{"b": 2,   "a": 1}', {"b": 2, "a": 1}, measure_drift=True)
    sent = msgs + normalize_messages(
        [harness_echo(asst), {"role": "tool", "tool_call_id": "c", "content": "3"}]
    )
    p1 = await h.plan(sent, [ADD_TOOL])
    plain = enc(qwen3, r.render(sent, [ADD_TOOL], True))
    await p1.finish(r.encode)  # the drift metric is computed after the prompt went out
    assert p1.events[0]["plain_distance"] > 0 and plain != p1.prompt_ids
    assert p1.events[0]["drift_tokens"] > 0  # dict args re-render as {"b": 2, "a": 1}: spacing differs


async def test_replay_linear_mode(qwen3):
    spec = {
        "tokenizer": "qwen3",
        "tools": [ADD_TOOL],
        "turns": [
            {"messages": [SYSTEM, USER], "output": {"text": call_text('{"b": 2, "a": 1}')}},
            {
                "messages": [
                    SYSTEM,
                    USER,
                    {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [
                            {
                                "id": "x",
                                "type": "function",
                                "function": {"name": "add", "arguments": '{"a":1,"b":2}'},
                            }
                        ],
                    },
                    {"role": "tool", "tool_call_id": "x", "content": "3"},
                ],
                "output": {"text": "3<|im_end|>"},
            },
        ],
    }
    tree = await replay(spec, mode="tree")
    linear = await replay(spec, mode="linear")
    assert len(tree["rows"]) == 2 and len(linear["rows"]) == 1
    assert linear["events"][0]["kind"] == "heal"


async def test_heal_hands_over_the_saved_tokens_uncopied_and_never_mutates_them(qwen3):
    h, msgs, asst, p0, out = await first_tool_turn(
        ChatRenderer(qwen3), '{"a": 1, "b": 2}', '{"a": 1, "b": 2}'
    )
    sent = msgs + normalize_messages(
        [harness_echo(asst), {"role": "tool", "tool_call_id": "c", "content": "3"}]
    )
    p1 = await h.plan(sent, [ADD_TOOL])
    saved = p0.prompt_ids + out
    assert p1.prefix == saved and p1.prefix is h.lineages[0].tokens  # no copy while planning
    assert len(p1) == len(saved) + len(p1.suffix) and p1.prompt_ids == saved + p1.suffix
    assert p1.suffix[0] == NL  # the closer's "\n" after the retained <|im_end|>
    snapshot = list(p1.prefix)
    h.commit(p1, enc(qwen3, "3<|im_end|>"), "stop", {"role": "assistant", "content": "3"})
    assert p1.prefix == snapshot  # commit built a new list
    assert h.lineages[0].tokens == p1.prompt_ids + enc(qwen3, "3<|im_end|>")
    # commit without awaiting finish() computed the deferred drift metric
    assert "drift_tokens" in p1.events[0] and h.counters()["healed_turns"] == 1
    assert h.counters()["drift_tokens"] == p1.events[0]["drift_tokens"]


async def test_a_sample_that_came_back_is_recorded_even_if_cancelled_during_the_drift_metric(qwen3):
    """The drift of a long turn is tokenized with async_encode after sampling: a cancel arriving
    then must not lose the sample, and the drift is still reported."""
    long_answer = "first answer " + "step by step. " * 900 + "<|im_end|>"  # > SYNC_ENCODE_CHARS

    class CancelAfterSecond(ScriptedBackend):
        async def sample(self, prompt_ids, params):
            res = await super().sample(prompt_ids, params)
            if self.calls == 2:  # the sample is back; a timeout / cancel arrives right after
                task = asyncio.current_task()
                asyncio.get_running_loop().call_soon(task.cancel)
            return res

    backend = CancelAfterSecond(qwen3, [{"text": long_answer}, {"text": "second answer<|im_end|>"}])
    gw = RolloutGateway(qwen3, backend, history_mode="linear", sampling=SamplingParams(max_new_tokens=8192))
    sid = gw.open_session("s")
    msgs = [{"role": "user", "content": "q1"}]
    first = await gw.generate(sid, msgs)
    msgs = msgs + [first.assistant_message, {"role": "user", "content": "q2"}]
    with pytest.raises(asyncio.CancelledError):
        await gw.generate(sid, msgs)
    traj = gw.close_session(sid)
    assert backend.calls == 2 and len(traj.turns) == 2
    assert sum(sum(row.loss_mask) for row in traj.rows) == sum(len(t.output_ids) for t in traj.turns)
    heal = next(e for e in traj.events if e["kind"] == "heal")
    assert (
        heal["drift_tokens"] >= 0 and traj.rows[0].metadata["history"]["drift_tokens"] == heal["drift_tokens"]
    )
