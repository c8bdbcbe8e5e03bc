"""The llama.cpp backend against the real Qwen2.5-Coder-0.5B-Instruct GGUF (installed by the bootstrap).

One model load for the module (a few seconds), short generations only.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time

import pytest
from strands import Agent, tool
from strands.agent.conversation_manager import NullConversationManager
from strands.types.exceptions import MaxTokensReachedException

from strands_art.backends import BackendContextOverflow, BackendError, SamplingParams, make_backend
from strands_art.envs.migrationbench.agent.agent import RolloutLimits
from strands_art.gateway import ContextBudgetExceeded, RolloutGateway
from strands_art.model import ARTModel
from strands_art.registry import load_tokenizer
from strands_art.rowcheck import row_problems

MODEL = "qwen2.5-coder-0.5b"
CONTEXT = 512


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(MODEL)


@pytest.fixture(scope="module")
def backend():
    b = make_backend("llamacpp", model=MODEL, context_tokens=CONTEXT, parallel=2, threads=2)
    yield b
    asyncio.run(b.aclose())


def _prompt(tok, text: str) -> list[int]:
    return tok.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
    )["input_ids"]


def test_token_ids_round_trip_and_stop_token(backend, tok) -> None:
    ids = _prompt(tok, "What is 2+2? Answer with one short sentence.")
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    params = SamplingParams(temperature=0.0, max_new_tokens=40, stop_token_ids=(im_end,))
    out = asyncio.run(backend.sample(ids, params))
    assert out.finish_reason == "stop"
    assert out.output_ids[-1] == im_end  # the stop token is kept, like vLLM
    assert im_end not in out.output_ids[:-1]
    assert len(out.logprobs) == len(out.output_ids)
    assert all(lp <= 0.0 for lp in out.logprobs)
    assert "4" in tok.decode(out.output_ids)
    assert out.info["logprobs_mode"] == "processed"


def test_length_limit_and_logprob_count(backend, tok) -> None:
    ids = _prompt(tok, "Write a long story about a cat.")
    out = asyncio.run(backend.sample(ids, SamplingParams(temperature=0.8, max_new_tokens=6, seed=5)))
    assert out.finish_reason == "length"
    assert len(out.output_ids) == len(out.logprobs) == 6
    assert all(math.isfinite(lp) and lp <= 0.0 for lp in out.logprobs)


def test_seed_reproducible_and_seeds_differ(backend, tok) -> None:
    ids = _prompt(tok, "Name a random animal.")

    def run(seed: int) -> list[int]:
        p = SamplingParams(temperature=1.0, max_new_tokens=8, seed=seed)
        return asyncio.run(backend.sample(ids, p)).output_ids

    a, b = run(7), run(7)
    assert a == b
    assert any(run(s) != a for s in (8, 9, 10))


def test_processed_logprobs_follow_temperature_and_top_p(backend, tok) -> None:
    """Processed logprobs: a nucleus of one token gives logprob 0; raw ones do not move with T."""
    ids = _prompt(tok, "What is 2+2?")
    narrow = asyncio.run(
        backend.sample(ids, SamplingParams(temperature=0.7, top_p=1e-6, max_new_tokens=3, seed=1))
    )
    assert narrow.logprobs == [0.0, 0.0, 0.0]
    wide = asyncio.run(backend.sample(ids, SamplingParams(temperature=1.0, max_new_tokens=1, seed=1)))
    cold = asyncio.run(backend.sample(ids, SamplingParams(temperature=0.3, max_new_tokens=1, seed=1)))
    if wide.output_ids == cold.output_ids:  # the same token is likelier at a lower temperature
        assert cold.logprobs[0] > wide.logprobs[0]


def test_stop_string_keeps_the_matching_token(backend, tok) -> None:
    ids = _prompt(tok, "Count from 1 to 9 separated by commas.")
    out = asyncio.run(backend.sample(ids, SamplingParams(temperature=0.0, max_new_tokens=40, stop=("4",))))
    text = tok.decode(out.output_ids)
    assert out.finish_reason == "stop"
    assert text.rstrip().endswith("4") and "5" not in text


def test_cancellation_stops_generation(backend, tok) -> None:
    ids = _prompt(tok, "Write a very long essay about the sea.")

    async def go() -> float:
        task = asyncio.create_task(backend.sample(ids, SamplingParams(temperature=0.8, max_new_tokens=400)))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # the slot is free again: a short request runs at once, not after 400 tokens
        t0 = time.perf_counter()
        out = await backend.sample(ids, SamplingParams(temperature=0.0, max_new_tokens=2))
        assert len(out.output_ids) == 2
        return time.perf_counter() - t0

    asyncio.run(go())


def test_streamed_ids_are_exactly_the_sampled_ids(backend, tok) -> None:
    ids = _prompt(tok, "Count from one to ten in words.")
    got: list[list[int]] = []
    params = SamplingParams(temperature=0.7, max_new_tokens=24, seed=5)
    out = asyncio.run(backend.sample(ids, params, on_tokens=got.append))  # called on llama.cpp's thread
    assert len(got) >= 2 and [t for batch in got for t in batch] == out.output_ids


def test_strands_stream_async_gets_tokens_before_the_turn_ends(backend, tok) -> None:
    """Issue 14 item 8 on the real model: text deltas arrive while llama.cpp is still sampling
    (the turn is not recorded yet); they add up to the turn's text; the row is token-exact."""
    gw = RolloutGateway(tok, backend, sampling=SamplingParams(temperature=0.0, max_new_tokens=32))
    agent = Agent(
        model=ARTModel(gateway=gw, session_id="s"),
        callback_handler=None,
        conversation_manager=NullConversationManager(),
    )

    async def go() -> list[tuple[str, int]]:
        seen = []
        async for event in agent.stream_async("Name three colours, one per line, plain words only."):
            if "data" in event:
                seen.append((event["data"], len(gw.trajectory("s").turns)))
        return seen

    seen = asyncio.run(go())
    traj = gw.close_session("s")
    (turn,) = traj.turns
    during = [text for text, recorded in seen if recorded == 0]
    assert len(during) >= 2  # several deltas before the turn was recorded
    final = gw.preview(turn.prompt_ids, turn.output_ids, None).text  # the turn's parsed answer
    assert final and "".join(text for text, _ in seen) == final
    assert row_problems(traj) == []


def test_prompt_longer_than_context(backend, tok) -> None:
    ids = _prompt(tok, "word " * (CONTEXT + 50))
    with pytest.raises(BackendContextOverflow) as info:
        asyncio.run(backend.sample(ids, SamplingParams(max_new_tokens=4)))
    assert info.value.prompt_tokens == len(ids)
    assert info.value.context_tokens == CONTEXT
    with pytest.raises(BackendError, match="invalid"):
        asyncio.run(backend.sample([10**9], SamplingParams(max_new_tokens=4)))


def test_gateway_turn_is_token_exact_and_budget_comes_from_backend(backend, tok) -> None:
    gw = RolloutGateway(tok, backend)
    assert gw.max_context_tokens == CONTEXT
    rid = gw.open_session("r", sampling=SamplingParams(temperature=0.7, max_new_tokens=24, seed=3))
    res = asyncio.run(gw.generate(rid, [{"role": "user", "content": "Say hi."}]))
    traj = gw.close_session(rid, 1.0)
    (row,) = traj.rows
    turn = traj.turns[0]
    assert row.input_ids == turn.prompt_ids + turn.output_ids
    assert row.loss_mask == [0] * len(turn.prompt_ids) + [1] * len(turn.output_ids)
    assert row.logprobs[len(turn.prompt_ids) :] == turn.logprobs
    assert row.metadata["logprobs_mode"] == "processed"
    assert res.usage["completion_tokens"] == len(turn.output_ids)
    gw2 = RolloutGateway(tok, backend, max_context_tokens=CONTEXT * 4)  # a budget the slot cannot hold
    rid = gw2.open_session("long")
    with pytest.raises(ContextBudgetExceeded):
        asyncio.run(gw2.generate(rid, [{"role": "user", "content": "word " * (CONTEXT + 50)}]))
    assert gw2.trajectory(rid).turns == []


@tool
def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: the first number
        b: the second number
    """
    return a + b


@pytest.mark.parametrize("mode", ["tree", "linear"])
def test_real_tool_loop_keeps_the_row_invariants(backend, tok, mode: str) -> None:
    """A short real agent loop (Strands → ARTModel → gateway → llama.cpp): the 0.5B calls the
    tool; every row invariant holds; linear mode keeps one row unless it reports a divergence."""
    gw = RolloutGateway(tok, backend, history_mode=mode)
    gw.open_session("r", "g", SamplingParams(temperature=0.7, max_new_tokens=40, seed=1))
    limits = RolloutLimits(max_turns=3, time_limit_s=600)
    agent = Agent(
        model=ARTModel(gateway=gw, session_id="r", group_id="g"),
        tools=[add],
        system_prompt="Use the add tool to add numbers, then answer in one short sentence.",
        callback_handler=None,
        conversation_manager=NullConversationManager(),
        hooks=[limits],
    )
    with contextlib.suppress(MaxTokensReachedException):
        asyncio.run(agent.invoke_async("What is 17 plus 25?"))
    traj = gw.close_session("r")
    assert len(traj.turns) >= 2
    assert traj.turns[0].finish_reason == "tool_calls"
    assert row_problems(traj) == []
    if mode == "linear":
        resets = [e for e in traj.events if e["kind"] in ("reset", "linear_disabled")]
        assert len(traj.rows) == 1 + len(resets)
        assert all(e.get("reason") for e in resets)
