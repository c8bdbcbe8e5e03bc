"""Property tests of linear mode over random append-only conversations with cosmetic drift.

Over random tool-using conversations (one or two interleaved sub-agents sharing a session) whose
harness re-serializes tool arguments (key order, spacing, indentation), drops empty reasoning and
sends empty content as None, linear mode must give exactly one row per lineage, each row's tokens
must be the concatenation of its recorded prompts and outputs, and the capture invariants of the
gateway issue must hold (every sampled token in exactly one row, mask 1, its logprob; every
context token equal to what the backend received).
"""

from __future__ import annotations

import asyncio
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.strands_tools import ADD_TOOL, ECHO_TOOL
from test_capture_properties import check_invariants

from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.history.boundary import relocate_segments
from strands_art.history.closers import TemplateShape
from strands_art.history.lineage import Lineage, Segment
from strands_art.registry import load_tokenizer

words = st.text(alphabet="abcdefghij XYZ.,", min_size=1, max_size=20).map(str.strip).filter(bool)
DRIFTS = ["none", "sorted_compact", "reversed_keys", "indent", "spaced"]


@st.composite
def turn_plans(draw, think: bool):
    kind = draw(st.sampled_from(["text", "add", "echo"]))
    if kind == "add":
        args = {"a": draw(st.integers(-50, 50)), "b": draw(st.integers(-50, 50))}
    elif kind == "echo":
        args = {"text": draw(words)}
    else:
        args = None
    return {
        "kind": kind,
        "body": draw(words),
        "args": args,
        "spacing": draw(st.sampled_from([None, (",", ":"), (", ", ": "), (" , ", " : ")])),
        "think": draw(st.booleans()) if think else False,
        "drift": draw(st.sampled_from(DRIFTS)),
        "agent": draw(st.integers(0, 1)),
    }


def output_text(plan) -> str:
    pre = "<think>\n\n</think>\n\n" if plan["think"] else ""
    if plan["kind"] == "text":
        return pre + plan["body"] + "<|im_end|>"
    args = (
        json.dumps(plan["args"], separators=plan["spacing"]) if plan["spacing"] else json.dumps(plan["args"])
    )
    return pre + f'<tool_call>\n{{"name": "{plan["kind"]}", "arguments": {args}}}\n</tool_call><|im_end|>'


def harness_replay(assistant: dict, drift: str) -> dict:
    """The assistant message as a harness sends it back: cosmetic re-serialization only."""
    msg = {"role": "assistant", "content": assistant.get("content") or None}
    calls = []
    for call in assistant.get("tool_calls", []):
        fn = call["function"]
        args = fn["arguments"] if isinstance(fn["arguments"], dict) else json.loads(fn["arguments"])
        text = {
            "none": json.dumps(args),
            "sorted_compact": json.dumps(args, sort_keys=True, separators=(",", ":")),
            "reversed_keys": json.dumps(dict(reversed(list(args.items())))),
            "indent": json.dumps(args, indent=2),
            "spaced": json.dumps(args, separators=(" , ", " : ")),
        }[drift]
        calls.append(
            {"id": call["id"], "type": "function", "function": {"name": fn["name"], "arguments": text}}
        )
    if calls:
        msg["tool_calls"] = calls
    return msg  # empty reasoning_content dropped


async def play(plans, tok):
    outputs = []
    for i, p in enumerate(plans):
        n = len(tok.backend_tokenizer.encode(output_text(p), add_special_tokens=False).ids)
        outputs.append(
            {"text": output_text(p), "logprobs": [-(0.01 * (i + 1) + 0.001 * k) for k in range(n)]}
        )
    backend = ScriptedBackend(tok, outputs)
    gw = RolloutGateway(tok, backend, history_mode="linear")
    sid = gw.open_session("p")
    convs = [
        [{"role": "system", "content": "You are agent A."}, {"role": "user", "content": "start A"}],
        [{"role": "system", "content": "You are agent B."}, {"role": "user", "content": "start B"}],
    ]
    agents = []
    for i, p in enumerate(plans):
        a = p["agent"]
        agents.append(a)
        result = await gw.generate(sid, convs[a], [ADD_TOOL, ECHO_TOOL])
        convs[a] = convs[a] + [harness_replay(result.assistant_message, p["drift"])]
        for call in result.tool_calls:
            convs[a].append({"role": "tool", "tool_call_id": call.id, "content": f"result {i}"})
        if not result.tool_calls:
            convs[a].append({"role": "user", "content": f"next {i}"})
    return gw.close_session(sid), backend.prompts, agents


def check_linear(traj, prompts, agents):
    check_invariants(traj, prompts)
    assert not [e for e in traj.events if e["kind"] in ("reset", "fork", "linear_disabled")], traj.events
    assert len(traj.rows) == len(set(agents))
    for row in traj.rows:
        turns = [traj.turns[i] for i in row.turns]
        assert len({t.lineage for t in turns}) == 1
        expected: list[int] = []
        for t in turns:
            assert t.prompt_ids[: len(expected)] == expected
            expected = t.prompt_ids + t.output_ids
        assert row.input_ids == expected
    counters = traj.rows[0].metadata["history"]
    assert counters["turns"] == len(traj.turns)
    assert counters.get("healed_turns", 0) == len(traj.turns) - len(set(agents))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(turn_plans(think=True), min_size=1, max_size=6))
def test_qwen3_append_only_with_drift_is_one_row_per_lineage(plans):
    tok = load_tokenizer("qwen3")
    check_linear(*asyncio.run(play(plans, tok)))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(turn_plans(think=False), min_size=1, max_size=5))
def test_smollm2_append_only_with_drift_is_one_row_per_lineage(plans):
    tok = load_tokenizer("smollm2")
    check_linear(*asyncio.run(play(plans, tok)))


# ------------------------------------------------------------------ end-only texts (relocation)
SHAPE = TemplateShape(
    closer="<E>",
    generation_prompt="",
    closer_ids=(),
    generation_prompt_ids=(),
    closer_is_marked=True,
    end_only=("<X>",),
)
seg_texts = st.text(alphabet="ab", min_size=1, max_size=6)
asst_texts = st.text(alphabet="cd", min_size=0, max_size=6)


def _lineage(segs: list[str], assistants: list[str]) -> Lineage:
    """A lineage whose render is seg0 a0<E> seg1 a1<E> ... seg_n (the last assistant not rendered)."""
    text, segments = "", []
    for j, seg in enumerate(segs):
        if j:
            text += assistants[j - 1] + "<E>"
        segments.append(Segment(j, j + 1, 0, 0, len(text), len(text) + len(seg)))
        text += seg
    return Lineage(id=0, tools_key="", tools=None, text=text, segments=segments)


@given(
    st.lists(seg_texts, min_size=1, max_size=4),
    st.lists(asst_texts, min_size=5, max_size=5),
    st.lists(asst_texts, min_size=5, max_size=5),
    st.integers(0, 3),
)
def test_relocation_drops_a_declared_end_only_text_from_the_last_segment_only(segs, old_a, new_a, bad):
    """The segment that ended the previous render may lose the end-only text ``<X>`` (assistant
    renders may change freely); any other segment losing it is ``template_prefix_unstable``."""
    n = len(segs)
    stored = [s + "<X>" for s in segs]  # every segment once ended its render with <X>
    lin = _lineage([*(s for s in segs[:-1]), stored[-1]], old_a)
    new = "".join((new_a[j - 1] + "<E>" if j else "") + s for j, s in enumerate(segs))
    new += new_a[n - 1] + "<E>" + "zz<X>"  # the last assistant, then the new messages
    out = relocate_segments(SHAPE, lin, new)
    assert not isinstance(out, int)
    assert out.dropped == ("<X>",)
    assert [new[s.char_start : s.char_end] for s in out.segments] == segs
    assert new[out.offsets[0] :] == "zz<X>" and new[out.offsets[1] : out.offsets[0]] == new_a[n - 1] + "<E>"
    # an earlier segment that kept <X> in the stored render but lost it in the new one: rejected
    if n > 1:
        k = bad % (n - 1)
        earlier = _lineage(
            [s + "<X>" if j == k else s for j, s in enumerate(segs[:-1])] + [stored[-1]], old_a
        )
        assert relocate_segments(SHAPE, earlier, new) == k
