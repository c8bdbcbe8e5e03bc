"""``strands-art batching-plan``: the step-stable batching arithmetic, as JSON.

Prints ``{"num_mini_batches": .., "optimizer_steps": .., "rows_after_padding": .., "padding_rows": ..}``
from :func:`strands_art.training.batching.plan`, the function the trainers call.
"""

from __future__ import annotations

import argparse
import json
import sys

from strands_art.training.batching import MODES, BatchingConfig, plan


def add_batching_plan_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``batching-plan`` on a subparsers object; the handler is set as ``func``."""
    p = subparsers.add_parser(
        "batching-plan",
        help="optimizer steps and padding rows for one outer batch (JSON to stdout)",
        description="Step-stable batching arithmetic (docs/variable-row-batching.md).",
    )
    p.add_argument("--rows", type=int, required=True, help="rows in the outer batch")
    p.add_argument("--prompt-batch", type=int, required=True, help="source prompts per outer batch")
    p.add_argument("--ppo-mini-batch", type=int, required=True, help="source prompts per PPO mini-batch")
    p.add_argument("--epochs", type=int, default=1, help="PPO epochs (default 1)")
    p.add_argument("--dp", type=int, default=1, help="data-parallel ranks (default 1)")
    p.add_argument("--mode", choices=MODES, default="fixed_steps", help="default fixed_steps")
    p.add_argument(
        "--rollouts-per-prompt",
        type=int,
        default=1,
        help="rollouts per prompt (GRPO group size); fixed_rows mini-batches hold "
        "ppo-mini-batch x rollouts-per-prompt rows unless --rows-per-mini-batch is given",
    )
    p.add_argument("--rows-per-mini-batch", type=int, default=None, help="fixed_rows mini-batch size in rows")
    p.set_defaults(func=run_batching_plan)
    return p


def run_batching_plan(args: argparse.Namespace) -> int:
    """Handle ``batching-plan``: print the plan as JSON; exit 2 with the reason on bad input."""
    rows_per_mb = args.rows_per_mini_batch
    if args.mode == "fixed_rows" and rows_per_mb is None:
        rows_per_mb = args.ppo_mini_batch * args.rollouts_per_prompt
    try:
        config = BatchingConfig(
            prompt_batch_size=args.prompt_batch,
            ppo_mini_batch_size=args.ppo_mini_batch,
            ppo_epochs=args.epochs,
            dp_size=args.dp,
            mode=args.mode,
            rows_per_mini_batch=rows_per_mb,
        )
        result = plan(args.rows, config)
    except ValueError as exc:
        print(f"strands-art batching-plan: {_flag_names(str(exc))}", file=sys.stderr)
        return 2
    json.dump(result.to_dict(), sys.stdout)
    sys.stdout.write("\n")
    return 0


_FLAGS = {
    "prompt_batch_size": "--prompt-batch",
    "ppo_mini_batch_size": "--ppo-mini-batch",
    "ppo_epochs": "--epochs",
    "dp_size": "--dp",
    "rows_per_mini_batch": "--rows-per-mini-batch",
    "num_rows": "--rows",
}


def _flag_names(message: str) -> str:
    """Name the command-line flags in a BatchingConfig error instead of the config fields."""
    for field, flag in _FLAGS.items():
        message = message.replace(field, flag)
    return message
