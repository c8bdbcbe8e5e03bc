"""ScriptedBackend: real tokenization, defaults, truncation, dynamic scripts, errors."""

from __future__ import annotations

import pytest

from strands_art.backends import make_backend
from strands_art.backends.base import BackendError, SamplingBackend, SamplingParams
from strands_art.backends.scripted import ScriptedBackend

IM_END = 151645  # Qwen3 <|im_end|>
P = SamplingParams(max_new_tokens=64, stop_token_ids=(IM_END,))


async def test_text_is_tokenized_with_special_tokens_as_single_ids(qwen3):
    b = ScriptedBackend(qwen3, [{"text": "Hello<|im_end|>"}])
    r = await b.sample([1, 2, 3], P)
    assert r.output_ids == qwen3.encode("Hello", add_special_tokens=False) + [IM_END]
    assert r.output_ids[-1] == IM_END and qwen3.decode(r.output_ids) == "Hello<|im_end|>"
    assert r.logprobs == [-0.5] * len(r.output_ids)
    assert r.finish_reason == "stop"
    assert b.prompts == [[1, 2, 3]] and b.params == [P]


async def test_tool_call_tags_map_to_single_ids(qwen3):
    b = ScriptedBackend(qwen3, [{"text": '<tool_call>\n{"name": "add"}\n</tool_call><|im_end|>'}])
    r = await b.sample([1], P)
    assert r.output_ids[0] == 151657  # <tool_call>
    assert r.output_ids.count(151657) == 1 and r.output_ids[-1] == IM_END


async def test_token_ids_logprobs_and_finish_are_used_as_given(qwen3):
    b = ScriptedBackend(
        qwen3, [{"token_ids": [9707, IM_END], "logprobs": [-1.25, -0.125], "finish_reason": "length"}]
    )
    r = await b.sample([5], P)
    assert (r.output_ids, r.logprobs, r.finish_reason) == ([9707, IM_END], [-1.25, -0.125], "length")


async def test_no_stop_token_gives_length_and_none_logprobs_use_default(qwen3):
    b = ScriptedBackend(qwen3, [{"text": "It is 3.", "logprobs": None}], logprob=-2.0)
    r = await b.sample([5], P)
    assert r.finish_reason == "length"
    assert r.output_ids == [2132, 374, 220, 18, 13]  # "It", " is", " ", "3", "." (Qwen3 splits digits)
    assert r.logprobs == [-2.0] * 5


async def test_eos_of_tokenizer_counts_as_stop(smollm2_tok):
    b = ScriptedBackend(smollm2_tok, [{"text": "ok<|im_end|>"}])
    r = await b.sample([1], SamplingParams(max_new_tokens=8))  # no stop_token_ids given
    assert r.output_ids[-1] == smollm2_tok.eos_token_id == 2
    assert r.finish_reason == "stop"


async def test_max_new_tokens_truncates_with_length(qwen3):
    b = ScriptedBackend(qwen3, [{"text": "a b c d e f g<|im_end|>", "logprobs": None}])
    r = await b.sample([1], SamplingParams(max_new_tokens=3, stop_token_ids=(IM_END,)))
    full = qwen3.encode("a b c d e f g", add_special_tokens=False)
    assert r.output_ids == full[:3] and len(r.logprobs) == 3
    assert r.finish_reason == "length"


async def test_exhausted_script_raises_and_records_prompt(qwen3):
    b = ScriptedBackend(qwen3, [{"text": "x"}])
    await b.sample([1], P)
    with pytest.raises(BackendError, match="exhausted: call 2 but the script has 1"):
        await b.sample([1, 2], P)
    assert b.prompts == [[1], [1, 2]]


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"token_ids": [1, 2], "logprobs": [-1.0]}, "2 tokens but 1 logprobs"),
        ({"token_ids": [10**7]}, "outside the vocabulary"),
        ({"logprobs": [0.0]}, "neither 'text' nor 'token_ids'"),
        ({"error": "server on fire"}, "server on fire"),
    ],
)
async def test_bad_items_raise_backend_error(qwen3, item, message):
    with pytest.raises(BackendError, match=message):
        await ScriptedBackend(qwen3, [item]).sample([1], P)


async def test_callable_script_sees_prompt_params_and_index(qwen3):
    seen = []

    def script(prompt_ids, params, index):
        seen.append((prompt_ids, params.max_new_tokens, index))
        return {"token_ids": [100 + index, IM_END]}

    b = ScriptedBackend(qwen3, script)
    r0 = await b.sample([7], P)
    r1 = await b.sample([7, 8], P)
    assert seen == [([7], 64, 0), ([7, 8], 64, 1)]
    assert r0.output_ids == [100, IM_END] and r1.output_ids == [101, IM_END]
    assert b.calls == 2


async def test_make_backend_and_protocol(qwen3):
    b = make_backend("scripted", tokenizer=qwen3, outputs=[{"text": "hi"}])
    assert isinstance(b, ScriptedBackend) and isinstance(b, SamplingBackend)
    with pytest.raises(ValueError, match="unknown backend kind 'nope'"):
        make_backend("nope")
