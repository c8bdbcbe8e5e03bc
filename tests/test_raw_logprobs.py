"""Rows with raw rollout logprobs (llama.cpp's default kind) are moved to the sampling distribution
before the importance-sampling correction, so the rollout-vs-trainer gap stays a real metric."""

from __future__ import annotations

import pytest
import torch
from test_local_trainer import make, rollouts

from strands_art.registry import load_tokenizer
from strands_art.training.logprobs import RAW, processed_from_raw, trainer_logprobs


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("smollm2")


def _as_raw(trainer, trajs) -> None:
    """Replace each row's recorded logprobs by the raw-distribution ones and mark it raw."""
    for traj in trajs:
        for row in traj.rows:
            ids = torch.tensor([row.input_ids])
            with torch.no_grad():
                raw = trainer_logprobs(trainer.model(input_ids=ids).logits, ids, RAW)[0]
            row.logprobs = [float(raw[i]) if m else 0.0 for i, m in enumerate(row.loss_mask)]
            row.metadata["logprobs_mode"] = "raw"


def test_raw_rows_are_corrected(tok) -> None:
    trainer, gateway = make(tok, ppo_epochs=1)
    trajs = rollouts(trainer, gateway)
    _as_raw(trainer, trajs)
    assert trainer.update(trajs)["logprob_abs_gap"] < 1e-4


def test_raw_rows_left_unmarked_show_the_gap(tok) -> None:
    trainer, gateway = make(tok, ppo_epochs=1)
    trajs = rollouts(trainer, gateway)
    _as_raw(trainer, trajs)
    for traj in trajs:
        for row in traj.rows:
            del row.metadata["logprobs_mode"]  # the same values, read as processed: a real gap
    assert trainer.update(trajs)["logprob_abs_gap"] > 1e-3


def test_processed_from_raw_adds_the_engine_gap() -> None:
    got = processed_from_raw(
        torch.tensor([-1.0, -2.0]), torch.tensor([-0.5, -3.0]), torch.tensor([-0.9, -2.0])
    )
    assert torch.allclose(got, torch.tensor([-0.6, -3.0]))
