"""Issue 14 item 8: streamed text is always a prefix of the turn's final text (property test with
adversarial text around tool calls, the real Qwen3 tokenizer, token-by-token and chunked feeds),
and the backends stream exactly the IDs they return."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strands_art.backends.base import SamplingParams
from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.streaming import TextStream, safe_prefix
from tests.test_parsing_exact import _call_block, adversarial, arguments

TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}}
    for n in ("f", "g")
]


def _gateway(qwen3) -> RolloutGateway:
    return RolloutGateway(qwen3, ScriptedBackend(qwen3, []))


def _prompt(qwen3, think_open: bool) -> list[int]:
    text = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n" + ("<think>\n" if think_open else "")
    return qwen3.encode(text, add_special_tokens=False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lead=adversarial,
    calls=st.lists(st.tuples(st.sampled_from(["f", "g"]), arguments), max_size=2),
    reasoning=st.one_of(st.none(), adversarial),
    think_open=st.booleans(),
    chunk=st.integers(1, 3),
)
def test_streamed_text_is_a_prefix_of_the_final_text(qwen3, lead, calls, reasoning, think_open, chunk):
    body = lead + "".join("\n" + _call_block(n, a, ensure_ascii=False) for n, a in calls)
    if reasoning is not None:
        body = f"<think>\n{reasoning}\n</think>\n\n{body}"
    elif think_open:
        body = f"{lead[:3]}\n</think>\n\n{body}"
    gw = _gateway(qwen3)
    prompt = _prompt(qwen3, think_open)
    ids = qwen3.encode(body + "<|im_end|>", add_special_tokens=False)
    final = gw.preview(prompt, ids, TOOLS)
    stream = TextStream(gw, TOOLS)
    for i in range(0, len(ids), chunk):
        stream.feed(prompt, ids[i : i + chunk])
        assert stream.consistent(final.text)  # at every step
    assert stream.streamed == safe_prefix(stream.streamed)  # never markup, never trailing space
    if not final.reasoning and not final.tool_calls and not stream.frozen:
        assert stream.streamed == safe_prefix(final.text)  # everything safe was streamed


def test_plain_answer_streams_word_by_word(qwen3):
    gw = _gateway(qwen3)
    prompt = _prompt(qwen3, False)
    ids = qwen3.encode("The sum is 42. Done<|im_end|>", add_special_tokens=False)
    stream = TextStream(gw, TOOLS)
    deltas = [stream.feed(prompt, [t]) for t in ids]
    assert "".join(deltas) == "The sum is 42. Done"
    assert [d for d in deltas if d][:3] == ["The", " sum", " is"]


def test_reasoning_and_calls_are_not_streamed(qwen3):
    gw = _gateway(qwen3)
    prompt = _prompt(qwen3, False)
    text = "<think>\nplan\n</think>\n\nok" + _call_block("f", {"x": 1}, ensure_ascii=True)
    stream = TextStream(gw, TOOLS)
    for t in qwen3.encode(text + "<|im_end|>", add_special_tokens=False):
        stream.feed(prompt, [t])
    assert stream.streamed == "" and stream.frozen
    lead = TextStream(gw, TOOLS)  # text before a call streams up to the call's tag
    for t in qwen3.encode(
        "Let me add.\n" + _call_block("f", {}, ensure_ascii=True), add_special_tokens=False
    ):
        lead.feed(prompt, [t])
    assert lead.streamed == "Let me add."


async def test_scripted_backend_streams_exactly_the_ids_it_returns(qwen3):
    backend = ScriptedBackend(qwen3, [{"text": "Hello there, world.<|im_end|>"}], delay=0.05)
    got: list[list[int]] = []
    result = await backend.sample([1, 2, 3], SamplingParams(), on_tokens=got.append)
    assert [t for batch in got for t in batch] == result.output_ids
    assert all(len(batch) == 1 for batch in got)
