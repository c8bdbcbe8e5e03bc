"""Cut tails and truncated turns are out of the loss by default (issue 48, U12).

Real tokenizers and templates of every family, the scripted backend, the project's own GRPO step
(:func:`strands_art.training.grpo.compute_advantages`):

- a turn cut at the token limit after complete calls: the tail after its last complete call
  (``row.metadata["cut_tails"]``) gets loss mask 0, the calls before it keep 1;
  ``GRPOConfig(train_cut_tails=True)`` trains the tail;
- an answer sampled to the token limit with no complete call: the turn is tagged ``truncated``
  and counted; ``exclude_turn_tags`` with ``"truncated"`` gives its tokens loss mask 0 (the
  default trains it: the suite's tiny-model training tests truncate every answer);
- the metrics count both (``cut_turns``, ``truncated_turns``, ``loss_excluded_tokens``).
"""

from __future__ import annotations

import pytest
from support.family_cases import WRITERS, one_turn

from strands_art.training.grpo import GRPOConfig, compute_advantages

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
def test_a_truncated_answer_is_tagged_counted_and_a_setting_masks_it(alias):
    writer = WRITERS.get(alias)
    long = "I will think about this at length. " * 40
    text = writer.turn([], long, 0, "R") if writer else f"<think>\n{long}"
    gw, result = one_turn(alias, {"text": text, "finish_reason": "length"})
    assert result.finish_reason == "length" and not result.tool_calls
    traj = gw.close_session("s")
    assert traj.turns[0].tags == ["truncated"]
    assert traj.rows[0].metadata["turn_tags"] == {"0": ["truncated"]}
    assert {"turn": 0, "kind": "turn_tagged", "tag": "truncated", "reason": "length"} in traj.events
    n = len(traj.turns[0].output_ids)
    rows, metrics = _rows(traj, GRPOConfig(exclude_turn_tags=("discarded", "truncated")))
    assert rows == []  # its only turn masked: the row has nothing to train
    assert metrics["truncated_turns"] == 1 and metrics["loss_excluded_tokens"] == n
    assert metrics["loss_excluded_rows"] == 1
    [kept], metrics = _rows(traj)
    assert sum(kept.loss_mask) == n and metrics["loss_excluded_tokens"] == 0
    assert metrics["truncated_turns"] == 1
