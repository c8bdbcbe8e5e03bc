"""The ``strands-art`` command line.

Subcommands (``strands-art SUBCOMMAND --help`` for each):

- ``migrate``        the main job: the MigrationBench agent over the bundled tasks, real Maven builds;
- ``evaluate``       score a migrated repository against its task (JSON to stdout);
- ``make-tasks``     generate Java 8 MigrationBench tasks from a seed, each verified in the sandbox;
- ``sandbox-check``  prove the command sandbox holds on this machine (one line per check);
- ``replay``         replay a logged conversation, or a stored rollout of a run, through the gateway
                     (JSON to stdout);
- ``demo``           a Strands agent with two small tools on the embedded model;
- ``batching-plan``  step-stable batching arithmetic (JSON to stdout);
- ``train``          GRPO + LoRA training of an environment on one machine (docs/training.md);
- ``serve``          the HTTP front on the gateway: Chat Completions, Anthropic Messages,
                     Responses API (docs/http-front.md).

Each subcommand imports what it needs lazily, so ``--help`` is fast.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import NoReturn

from strands_art.registry import tokenizer_aliases


def _cmd_replay(args: argparse.Namespace) -> int:
    from strands_art.backends.base import BackendError
    from strands_art.replay import ReplayInputError, replay, spec_from_run

    if (args.file is None) == (args.from_run is None) or (args.from_run is None) != (args.rollout is None):
        print("strands-art replay: give FILE, or --from-run RUN_DIR with --rollout ID", file=sys.stderr)
        return 2
    problem = _export_problem(args.export)
    if problem:
        print(f"strands-art replay: --export {args.export}: {problem}", file=sys.stderr)
        return 2
    try:  # ValueError covers invalid UTF-8 and invalid JSON; RecursionError: nesting too deep
        if args.from_run is not None:
            spec = spec_from_run(args.from_run, args.rollout, args.tokenizer)
        else:
            spec = json.loads(Path(args.file).read_text(encoding="utf-8"))
    except ReplayInputError as exc:
        print(f"strands-art replay: {_one_line(exc)}", file=sys.stderr)
        return 2
    except (OSError, ValueError, RecursionError) as exc:
        print(
            f"strands-art replay: cannot read {args.file or args.from_run}: {_one_line(exc)}", file=sys.stderr
        )
        return 2
    if args.export:
        try:
            Path(args.export).write_text(
                json.dumps(spec, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
            )
        except (OSError, UnicodeEncodeError) as exc:
            print(
                f"strands-art replay: cannot write --export {args.export}: {_one_line(exc)}", file=sys.stderr
            )
            return 2
    try:
        result = asyncio.run(replay(spec, mode=args.mode, tokenizer=args.tokenizer))
    except (ReplayInputError, ValueError, FileNotFoundError, BackendError, RecursionError) as exc:
        print(f"strands-art replay: {_one_line(exc)}", file=sys.stderr)
        return 2
    if args.summary:
        print(json.dumps(result["summary"], indent=2, ensure_ascii=False), file=sys.stderr)
    json.dump(result, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


def _export_problem(path: str | None) -> str | None:
    """Why ``--export PATH`` cannot be written (checked before anything is read or written), or None."""
    if not path:
        return None
    target = Path(path)
    if target.is_dir():
        return "is a directory"
    parent = target.parent
    if not parent.is_dir():
        return f"its directory {parent} does not exist"
    return None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _cmd_demo(args: argparse.Namespace) -> int:
    from strands_art.demo import run_demo
    from strands_art.validation import UsageError, check_int

    try:
        check_int("--seed", args.seed, 0, (1 << 31) - 1)
        check_int("--max-new-tokens", args.max_new_tokens, 1, 1 << 20)
    except UsageError as exc:
        print(f"strands-art demo: {exc}", file=sys.stderr)
        return 2

    return run_demo(
        model=args.model, history_mode=args.history_mode, seed=args.seed, max_new_tokens=args.max_new_tokens
    )


def _cmd_evaluate(args: argparse.Namespace) -> int:
    import functools

    from strands_art.envs.migrationbench.evaluate.evalguard import check_task, guarded_evaluation
    from strands_art.envs.migrationbench.evaluate.evaluator import MAX_BUILD_TIMEOUT_S, evaluate_command
    from strands_art.validation import UsageError, check_float

    try:
        check_float("--timeout", args.timeout, 0.0, MAX_BUILD_TIMEOUT_S, lo_open=True)
    except UsageError as exc:
        print(f"strands-art evaluate: {exc}", file=sys.stderr)
        return 2
    if args.unsafe_no_sandbox:
        print("strands-art evaluate: --unsafe-no-sandbox: the build runs WITHOUT a sandbox", file=sys.stderr)
    try:  # a bad task is the task's fault (exit 2); whatever the repository causes is scored
        task = check_task(args.task)
    except (OSError, ValueError) as exc:
        print(f"strands-art evaluate: bad task {args.task}: {_one_line(exc)}", file=sys.stderr)
        return 2
    result, scored = guarded_evaluation(
        functools.partial(
            evaluate_command,
            args.repo_dir,
            args.task,
            timeout_s=args.timeout,
            unsafe_no_sandbox=args.unsafe_no_sandbox,
        ),
        tests_required=task.num_test_cases,
    )
    if not scored:  # the sandbox or the host failed (twice): no score
        print(f"strands-art evaluate: {result['evaluation_error']['message']}", file=sys.stderr)
        return 2
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def _cmd_sandbox_check(args: argparse.Namespace) -> int:
    from strands_art.envs.sandbox.check import main as check_main

    return check_main(maven=args.maven)


def _cmd_migrate(args: argparse.Namespace) -> int:
    from strands_art.envs.migrationbench.run.runner import main_from_args

    return main_from_args(args)


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error: ``strands-art train: error: ...`` and where the options are
    listed, not the subcommand's whole usage (``train``'s is over 30 lines) before it."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` lists the options)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="strands-art",
        description="Token-exact agent RL for Strands agents: rollout gateway, MigrationBench, GRPO.",
    )
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("replay", help="replay a logged conversation through the gateway (scripted backend)")
    p.add_argument(
        "file",
        nargs="?",
        default=None,
        help="replay JSON: {tokenizer, chat_template_kwargs, tools, turns: [...]}",
    )
    p.add_argument(
        "--from-run",
        metavar="RUN_DIR",
        default=None,
        help="replay a stored rollout of a run directory (its trajectories/trajectories.jsonl) instead of FILE",
    )
    p.add_argument("--rollout", metavar="ID", default=None, help="the rollout id to replay (with --from-run)")
    p.add_argument("--export", metavar="OUT.json", default=None, help="also write the replay file used here")
    p.add_argument(
        "--mode",
        choices=["tree", "linear"],
        default=None,
        help="history mode (default: the file's or the run's mode, else tree)",
    )
    p.add_argument(
        "--tokenizer",
        default=None,
        help=f"tokenizer alias ({', '.join(tokenizer_aliases())}) or a local tokenizer directory",
    )
    p.add_argument(
        "--summary",
        action="store_true",
        help="also print a summary to stderr (rows, tokens, events; each turn's decoded text, reasoning and "
        "tool calls; the decoded text around each fork)",
    )
    p.set_defaults(func=_cmd_replay)

    p = sub.add_parser("demo", help="a Strands agent with two small tools on the embedded model")
    p.add_argument(
        "--model",
        default="qwen2.5-coder-1.5b",
        help="model alias or local directory (default: qwen2.5-coder-1.5b on llama.cpp; smollm2 runs "
        "the 135M model on transformers)",
    )
    p.add_argument(
        "--history-mode", choices=["tree", "linear"], default="tree", help="row capture mode (default: tree)"
    )
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default: 0)")
    p.add_argument("--max-new-tokens", type=int, default=96, help="tokens sampled per turn (default: 96)")
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser(
        "evaluate",
        help="score a migrated repository (JSON: build_success, tests, reward)",
        description="Score a migrated repository against its task with the MigrationBench evaluator: "
        "sandboxed Maven builds on a host copy, 0.5 for a Java 17 build and 0.5 when every original "
        "test method passed (docs/migrationbench-evaluator.md).",
        epilog="exit status: 0 scored (the JSON on stdout, 0.0 included; a bad repository - not a "
        "directory, a tree the build copy refuses - is scored 0.0 with evaluation_error); 2 bad task "
        "directory, usage, or the sandbox or host failing twice (no score)",
    )
    p.add_argument("repo_dir", help="the repository to evaluate")
    p.add_argument("--task", required=True, help="task directory (task.json; repo/ holds the original)")
    p.add_argument(
        "--timeout", type=float, default=300.0, help="Maven build timeout in seconds (default 300)"
    )
    p.add_argument(
        "--unsafe-no-sandbox",
        action="store_true",
        help="build WITHOUT the bubblewrap sandbox (the repository's code runs with your privileges)",
    )
    p.set_defaults(func=_cmd_evaluate)

    p = sub.add_parser(
        "sandbox-check",
        help="prove the command sandbox holds here: escape attempts from inside, checked from outside",
    )
    p.add_argument("--maven", action="store_true", help="also run a Maven build inside the sandbox")
    p.set_defaults(func=_cmd_sandbox_check)

    from strands_art.envs.migrationbench.run.runner_args import MIGRATE_DESCRIPTION, add_migrate_arguments

    p = sub.add_parser(
        "migrate",
        help="the main job: migrate Java 8 Maven tasks to Java 17 with a Strands agent",
        description=MIGRATE_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_migrate_arguments(p)
    p.set_defaults(func=_cmd_migrate)

    from strands_art.envs.migrationbench.generate.command import add_make_tasks_parser

    add_make_tasks_parser(sub)

    from strands_art.training.cli import add_batching_plan_parser

    add_batching_plan_parser(sub)

    from strands_art.training.train_cli import add_train_parser

    add_train_parser(sub)

    from strands_art.serve.cli import add_serve_parser

    add_serve_parser(sub)

    from strands_art.view.cli import add_view_parser

    add_view_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
