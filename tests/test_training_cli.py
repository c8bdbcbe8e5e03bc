"""``strands-art batching-plan`` prints the plan the trainers use."""

from __future__ import annotations

import argparse
import json

import pytest

from strands_art.training.cli import add_batching_plan_parser


def run(argv: list[str], capsys) -> tuple[int, dict | None, str]:
    parser = argparse.ArgumentParser()
    add_batching_plan_parser(parser.add_subparsers())
    args = parser.parse_args(["batching-plan", *argv])
    rc = args.func(args)
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if out else None), err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            "--rows 513 --prompt-batch 32 --ppo-mini-batch 32 --epochs 1 --dp 2",
            {"num_mini_batches": 1, "optimizer_steps": 1, "rows_after_padding": 514, "padding_rows": 1},
        ),
        (
            "--rows 900 --prompt-batch 3 --ppo-mini-batch 1 --epochs 2",
            {"num_mini_batches": 3, "optimizer_steps": 6, "rows_after_padding": 900, "padding_rows": 0},
        ),
        (
            "--rows 1536 --prompt-batch 32 --ppo-mini-batch 32 --rollouts-per-prompt 16 --mode fixed_rows",
            {"num_mini_batches": 3, "optimizer_steps": 3, "rows_after_padding": 1536, "padding_rows": 0},
        ),
    ],
)
def test_batching_plan_json(argv, expected, capsys):
    rc, out, _ = run(argv.split(), capsys)
    assert rc == 0
    assert out == expected


def test_batching_plan_rejects_bad_config(capsys):
    rc, out, err = run("--rows 10 --prompt-batch 32 --ppo-mini-batch 12".split(), capsys)
    assert rc == 2 and out is None
    assert "--prompt-batch=32 is not divisible by --ppo-mini-batch=12" in err
