"""The Chat Completions wire format: a stream reassembles into the non-streaming message."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strands_art.gateway import GenerateResult
from strands_art.serve.wire import completion, completion_chunks, parse_chat_request, sse
from strands_art.toolcalls.base import ToolCall
from strands_art.trajectory import Turn

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)
arguments = st.dictionaries(st.text(min_size=1, max_size=5), st.integers() | st.text(max_size=5), max_size=3)


@st.composite
def results(draw):
    calls = []
    for k in range(draw(st.integers(0, 3))):
        args = draw(arguments)
        raw = draw(st.sampled_from([None, json.dumps(args, separators=(",", ":"))]))
        calls.append(
            ToolCall(
                name=draw(st.sampled_from(["add", "shell"])),
                arguments=args,
                raw_arguments=raw,
                id=f"call_{k}",
            )
        )
    content = draw(text)
    reasoning = draw(st.none() | text)
    assistant = {"role": "assistant", "content": content}
    if reasoning is not None:
        assistant["reasoning_content"] = reasoning
    if calls:
        assistant["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.raw_arguments or c.arguments},
            }
            for c in calls
        ]
    finish = (
        draw(st.sampled_from(["tool_calls", "length"]))
        if calls
        else draw(st.sampled_from(["stop", "length"]))
    )
    turn = Turn(
        index=0,
        prompt_ids=[1, 2, 3],
        output_ids=[4] * draw(st.integers(1, 5)),
        logprobs=[],
        finish_reason=finish,
    )
    turn.logprobs = [-0.1] * len(turn.output_ids)
    return GenerateResult(content, reasoning, calls, finish, False, [], turn, assistant)


def reassemble(chunks: list[dict]) -> tuple[dict, str | None, dict | None]:
    """What a streaming client (the OpenAI SDK's accumulation) makes of the chunks."""
    message: dict = {"role": None, "content": ""}
    calls: dict[int, dict] = {}
    finish, usage = None, None
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        for choice in chunk["choices"]:
            delta = choice["delta"]
            message["role"] = delta.get("role") or message["role"]
            message["content"] += delta.get("content") or ""
            if delta.get("reasoning_content"):
                message["reasoning_content"] = (
                    message.get("reasoning_content", "") + delta["reasoning_content"]
                )
            for tc in delta.get("tool_calls") or []:
                entry = calls.setdefault(
                    tc["index"], {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                )
                entry["id"] += tc.get("id") or ""
                entry["function"]["name"] += tc["function"].get("name") or ""
                entry["function"]["arguments"] += tc["function"].get("arguments") or ""
            finish = choice["finish_reason"] or finish
    if calls:
        message["tool_calls"] = [calls[k] for k in sorted(calls)]
    return message, finish, usage


# timing on shared CI cores is not what these check (both flaked there: deadline, too_slow)
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(results(), st.booleans())
def test_stream_reassembles_into_the_non_streaming_message(result, include_usage):
    full = completion(result, "m", "id-1")
    chunks = completion_chunks(result, "m", "id-1", include_usage)
    message, finish, usage = reassemble(chunks)
    expected = dict(full["choices"][0]["message"])
    if expected["content"] is None:
        expected["content"] = ""
    if not expected.get("reasoning_content"):
        expected.pop("reasoning_content", None)
    assert message == expected and finish == full["choices"][0]["finish_reason"] == result.finish_reason
    assert usage == (full["usage"] if include_usage else None)
    for call, produced in zip(message.get("tool_calls", []), result.tool_calls, strict=True):
        # JSON-string arguments: the sampled text when kept, else the dict as JSON
        assert json.loads(call["function"]["arguments"]) == produced.arguments
        if produced.raw_arguments is not None:
            assert call["function"]["arguments"] == produced.raw_arguments
    # every event is one JSON line that survives the SSE framing
    for chunk in chunks:
        frame = sse(chunk)
        assert frame.startswith(b"data: ") and frame.endswith(b"\n\n") and b"\n" not in frame[:-2]
        assert json.loads(frame[6:-2]) == chunk


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(
        st.sampled_from(["temperature", "top_p", "max_tokens", "seed", "stop", "foo"]),
        st.none() | st.integers(0, 3),
    )
)
def test_only_set_sampling_fields_become_overrides(fields):
    req = parse_chat_request({"messages": [{"role": "user", "content": "hi"}], **fields})
    assert req.overrides == {k: v for k, v in fields.items() if k != "foo" and v is not None}
