"""Command-line arguments of ``strands-art migrate`` (kept apart so ``--help`` imports nothing heavy)."""

from __future__ import annotations

import argparse


def add_migrate_arguments(p: argparse.ArgumentParser) -> None:
    """Add the ``migrate`` options to ``p``; defaults run the bundled tasks on the embedded model."""
    g = p.add_argument_group("tasks")
    g.add_argument(
        "--tasks", nargs="*", default=None, metavar="NAME", help="task names (default: all bundled)"
    )
    g.add_argument("--tasks-dir", default=None, help="directory of task folders (default: the bundled tasks)")
    g.add_argument(
        "--records",
        default=None,
        help="real MigrationBench records (CSV/Parquet); repos are cloned at base_commit (needs network)",
    )
    g.add_argument(
        "--rollouts-per-task", type=int, default=1, help="rollouts per task, i.e. the GRPO group size"
    )
    g.add_argument("--concurrency", type=int, default=2, help="rollouts in flight at once (default 2)")

    g = p.add_argument_group("model")
    g.add_argument(
        "--backend",
        choices=["transformers", "vllm", "litellm"],
        default="transformers",
        help="transformers: local model (default, CPU here); vllm: a vLLM server; litellm: hosted baseline, no token capture",
    )
    g.add_argument(
        "--model",
        default="smollm2",
        help="model alias/dir (transformers), served name (vllm) or PROVIDER/MODEL (litellm)",
    )
    g.add_argument("--tokenizer", default=None, help="tokenizer alias/dir for vllm (default: --model)")
    g.add_argument(
        "--base-url", default=None, help="server URL for vllm (e.g. http://127.0.0.1:8000) or litellm"
    )
    g.add_argument("--history-mode", choices=["tree", "linear"], default="tree", help="row capture mode")
    g.add_argument("--temperature", type=float, default=0.7)
    g.add_argument("--top-p", type=float, default=0.95)
    g.add_argument("--max-new-tokens", type=int, default=512, help="tokens sampled per turn (default 512)")
    g.add_argument(
        "--max-context-tokens", type=int, default=None, help="context budget (default: the model's)"
    )

    g = p.add_argument_group("rollout limits")
    g.add_argument("--max-turns", type=int, default=50, help="model calls per rollout (default 50)")
    g.add_argument("--time-limit", type=float, default=1800.0, help="seconds per rollout (default 1800)")
    g.add_argument(
        "--command-timeout", type=float, default=300.0, help="seconds per shell command (default 300)"
    )
    g.add_argument("--max-output-bytes", type=int, default=16384, help="shell output kept per command")
    g.add_argument(
        "--build-timeout", type=float, default=300.0, help="seconds for the evaluation build (default 300)"
    )

    g = p.add_argument_group("run")
    g.add_argument("--seed", type=int, default=0, help="sampling seed (per rollout: seed + rollout index)")
    g.add_argument("--run-dir", default=None, help="output directory (default: runs/migrate-<timestamp>)")
    g.add_argument(
        "--resume", default=None, metavar="RUN_DIR", help="continue a run; completed rollouts are kept"
    )
    g.add_argument("--no-plot", action="store_true", help="skip the rewards/rows plot")
