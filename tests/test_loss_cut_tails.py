"""Cut tails and truncated turns are out of the loss by default (issue 48, U12).

Real tokenizers and templates of every family, the scripted backend, the project's own GRPO step
(:func:`strands_art.training.grpo.compute_advantages`):

- a turn cut at the token limit after complete calls: the tail after its last complete call
  (``row.metadata["cut_tails"]``) gets loss mask 0, the calls before it keep 1;
  ``GRPOConfig(train_cut_tails=True)`` trains the tail;
- an answer sampled to the token limit with no complete call: the turn is tagged ``truncated``,
  counted, and its tokens get loss mask 0 by default (the row, left with nothing, is dropped and
  counted; the rollout stays in its group); ``GRPOConfig(train_truncated=True)`` trains it;
- the metrics count both (``cut_turns``, ``truncated_turns``, ``loss_excluded_tokens``);
- property: for any mix of truncated and complete turns in a group, the trained tokens are the
  complete answers' and the group's advantages are computed over every rollout.
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.family_cases import WRITERS, one_turn

from strands_art.backends.base import SamplingParams
from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.registry import load_tokenizer
from strands_art.training.grpo import GRPOConfig, compute_advantages, group_advantages, rows_as_trained

CUT_FAMILIES = [alias for alias, w in WRITERS.items() if w.write_turn is None and w.max_calls > 1]
CALLS = [("read_file", {"path": "a.txt"}), ("run", {"command": "ls -la"}), ("read_file", {"path": "b.txt"})]


def _cut_text(alias: str) -> str:
    writer = WRITERS[alias]
    done, more = writer.write_calls(CALLS[:2], 0), writer.write_calls(CALLS, 0)
    shared = next((i for i, (x, y) in enumerate(zip(done, more, strict=False)) if x != y), len(done))
    return ("R</think>\n\n" if writer.think else "") + more[: shared + (len(more) - len(done)) // 2]


def _rows(traj, config=None):
    traj.set_reward(1.0)
    adv = compute_advantages([traj], config)
    return [b.row for b in adv.rows], adv.metrics


@pytest.mark.parametrize("alias", CUT_FAMILIES)
def test_a_cut_tail_is_out_of_the_loss_and_a_setting_keeps_it(alias):
    gw, result = one_turn(alias, {"text": _cut_text(alias), "finish_reason": "length"})
    assert len(result.tool_calls) == 2 and result.tail_start is not None
    traj = gw.close_session("s")
    turn, [row] = traj.turns[0], traj.rows
    n = len(turn.output_ids)
    start, end = row.turn_spans[0]
    assert row.metadata["cut_tails"] == {"0": [result.tail_start, n]}
    assert "truncated" not in turn.tags  # the calls before the cut are trained
    [masked], metrics = _rows(traj)
    assert masked.loss_mask[start : start + result.tail_start] == [1] * result.tail_start
    assert masked.loss_mask[start + result.tail_start : end] == [0] * (n - result.tail_start)
    assert sum(masked.loss_mask) == result.tail_start
    assert metrics["loss_excluded_tokens"] == n - result.tail_start and metrics["cut_turns"] == 1
    assert row.loss_mask[start:end] == [1] * n  # the recorded row itself is unchanged
    [kept], metrics = _rows(traj, GRPOConfig(train_cut_tails=True))
    assert sum(kept.loss_mask) == n and metrics["loss_excluded_tokens"] == 0


@pytest.mark.parametrize("alias", ["qwen3", *WRITERS])
def test_a_truncated_answer_is_out_of_the_loss_by_default_and_a_setting_keeps_it(alias):
    writer = WRITERS.get(alias)
    long = "I will think about this at length. " * 40
    text = writer.turn([], long, 0, "R") if writer else f"<think>\n{long}"
    gw, result = one_turn(alias, {"text": text, "finish_reason": "length"})
    assert result.finish_reason == "length" and not result.tool_calls
    traj = gw.close_session("s")
    assert traj.turns[0].tags == ["truncated"]
    assert traj.rows[0].metadata["turn_tags"] == {"0": ["truncated"]}
    # the script ends "length" below the 4,096-token limit: the backend's own window stopped it
    tagged = {
        "turn": 0,
        "kind": "turn_tagged",
        "tag": "truncated",
        "reason": "length",
        "limit": "backend_context",
    }
    assert tagged in traj.events
    n = len(traj.turns[0].output_ids)
    rows, metrics = _rows(traj)
    assert rows == []  # its only turn masked: the row has nothing to train
    assert metrics["truncated_turns"] == 1 and metrics["loss_excluded_tokens"] == n
    assert metrics["loss_excluded_rows"] == 1
    [kept], metrics = _rows(traj, GRPOConfig(train_truncated=True))
    assert sum(kept.loss_mask) == n and metrics["loss_excluded_tokens"] == 0
    assert metrics["truncated_turns"] == 1


@pytest.mark.parametrize(
    ("max_new_tokens", "context", "limit", "n_out"),
    [(20, 4096, "max_new_tokens", 20), (400, None, "context_budget", None)],
)
def test_the_limit_that_truncated_a_turn_is_recorded(max_new_tokens, context, limit, n_out):
    """The truncated turn's event says which limit cut it: the session's ``max_new_tokens``, or the
    smaller limit the context budget left (the prompt + 25 tokens of room)."""
    tok = load_tokenizer("qwen3")
    backend = ScriptedBackend(tok, [{"text": "I will think about this at length. " * 40}])
    messages = [{"role": "user", "content": "go"}]
    prompt = len(tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)["input_ids"])
    gw = RolloutGateway(
        tok,
        backend,
        sampling=SamplingParams(max_new_tokens=max_new_tokens),
        max_context_tokens=context or prompt + 25,
    )
    gw.open_session("s")
    asyncio.run(gw.generate("s", messages))
    traj = gw.close_session("s")
    [event] = [e for e in traj.events if e["kind"] == "turn_tagged"]
    assert event["limit"] == limit and len(traj.turns[0].output_ids) == (n_out or 25)


def test_what_is_masked_is_recorded_on_the_row_as_trained():
    """The trained row says which spans got loss mask 0 and why (``metadata["loss_excluded"]``);
    the recorded row does not change."""
    alias = CUT_FAMILIES[0]
    gw, result = one_turn(alias, {"text": _cut_text(alias), "finish_reason": "length"})
    traj = gw.close_session("s")
    start, end = traj.rows[0].turn_spans[0]
    [masked], _ = _rows(traj)
    assert masked.metadata["loss_excluded"] == [
        {"turn": 0, "span": [start + result.tail_start, end], "reason": "cut_tail"}
    ]
    assert "loss_excluded" not in traj.rows[0].metadata
    gw, _ = one_turn("qwen3", {"text": "<think>\n" + "More. " * 900, "finish_reason": "length"})
    traj = gw.close_session("s")
    [masked] = rows_as_trained(traj.rows)
    assert masked.metadata["loss_excluded"] == [
        {"turn": 0, "span": traj.rows[0].turn_spans[0], "reason": "truncated"}
    ]
    assert sum(masked.loss_mask) == 0 and sum(
        rows_as_trained(traj.rows, GRPOConfig(train_truncated=True))[0].loss_mask
    )


def test_train_truncated_contradicting_the_excluded_tags_is_refused():
    with pytest.raises(ValueError, match="train_truncated contradicts"):
        GRPOConfig(train_truncated=True, exclude_turn_tags=("discarded", "truncated"))
    assert GRPOConfig().masked_tags == {"discarded", "truncated"}
    assert GRPOConfig(exclude_turn_tags=(), train_truncated=True).masked_tags == frozenset()


QWEN3 = load_tokenizer("qwen3")
COMPLETE = "<think>\nok\n</think>\n\nDone.<|im_end|>"
RUNAWAY = "<think>\n" + "Let me think about this at length. " * 20


def _rollout(rid: str, truncated: list[bool], reward: float):
    """A rollout of ``len(truncated)`` turns through the real gateway (qwen3, scripted backend,
    12 new tokens a turn, linear history): turn k is a runaway answer cut at the limit when
    ``truncated[k]``, else a complete one; a user message after each."""
    script = [{"text": RUNAWAY} if cut else {"text": COMPLETE} for cut in truncated]
    gw = RolloutGateway(
        QWEN3,
        ScriptedBackend(QWEN3, script),
        history_mode="linear",
        sampling=SamplingParams(max_new_tokens=12),
    )
    gw.open_session(rid, "g")
    messages = [{"role": "user", "content": "Go."}]

    async def turns():
        for k in range(len(truncated)):
            result = await gw.generate(rid, messages)
            messages.extend([result.assistant_message, {"role": "user", "content": f"And {k}?"}])

    asyncio.run(turns())
    return gw.close_session(rid, reward)


@settings(max_examples=15, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(st.booleans(), min_size=1, max_size=3), st.sampled_from([0.0, 0.5, 1.0])),
        min_size=2,
        max_size=4,
    )
)
def test_trained_tokens_are_the_complete_answers_and_every_rollout_stays_in_its_group(group):
    """For any mix of truncated and complete turns in a GRPO group: the tokens trained (the loss
    masks of the rows GRPO returns) are exactly the complete answers' sampled tokens, and the
    group's advantages are computed over every rollout, those left with nothing to train too."""
    trajs = [_rollout(f"r{i}", cuts, reward) for i, (cuts, reward) in enumerate(group)]
    for traj, (cuts, _) in zip(trajs, group, strict=True):
        assert [t.finish_reason == "length" for t in traj.turns] == cuts
        assert [t.tags == ["truncated"] for t in traj.turns] == cuts
    adv = compute_advantages(trajs)
    complete = sum(len(t.output_ids) for traj in trajs for t in traj.turns if "truncated" not in t.tags)
    assert sum(sum(b.row.loss_mask) for b in adv.rows) == complete
    expected = group_advantages([reward for _, reward in group], GRPOConfig())
    assert adv.advantages == {traj.rollout_id: a for traj, a in zip(trajs, expected, strict=True)}
    assert adv.metrics["rollouts"] == len(group) and adv.metrics["groups"] == 1
    assert adv.metrics["untrained_rollouts"] == sum(1 for cuts, _ in group if all(cuts))
    assert adv.metrics["truncated_turns"] == sum(sum(cuts) for cuts, _ in group)
    assert all(b.advantage == adv.advantages[b.row.rollout_id] for b in adv.rows)
    kept = compute_advantages(trajs, GRPOConfig(train_truncated=True))  # the opt-in trains them all
    assert sum(sum(b.row.loss_mask) for b in kept.rows) == sum(
        len(t.output_ids) for r in trajs for t in r.turns
    )
    assert kept.advantages == adv.advantages
