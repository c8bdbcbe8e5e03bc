"""Command-line arguments of ``strands-art migrate`` (kept apart so ``--help`` imports nothing heavy)."""

from __future__ import annotations

import argparse

from strands_art.envs.migrationbench.config import LIMIT_FIELDS, PROMPTS, SMALL_MODEL_LIMITS, RolloutConfig
from strands_art.validation import (
    UsageError,
    add_sampling_args,
    check_backend_url,
    check_float,
    check_int,
    check_path,
    check_ray_address,
    check_sampling_args,
)

MIGRATE_DESCRIPTION = """\
Run the MigrationBench agent (a Strands agent with a shell and a file editor) on Java 8 Maven
tasks, score each rollout with real sandboxed Maven builds under JDK 17 (a compile build, then
the test build: reward 0 / 0.5 / 1), and
write a run directory: results.jsonl (one line per rollout), trajectories/ (token-exact rows
with rewards), config.json, summary.png, logs/. Defaults: Qwen2.5-Coder-1.5B-Instruct on
llama.cpp (CPU) over 3 of the 9 bundled tasks (10-20 minutes on 2 cores); --all-tasks runs
all nine, --model smollm2 the 135M model on transformers. See docs/migrationbench.md."""

DEFAULT_TASKS = ("compiler-props", "junit-mix", "multi-module")
"""The bundled tasks of a run without --tasks: the ones a 1.5B model can finish in a few turns
(a Java level to raise in one or two poms); see docs/migrationbench-tasks.md for the others."""

_STD = RolloutConfig()


def add_migrate_arguments(p: argparse.ArgumentParser) -> None:
    """Add the ``migrate`` options to ``p``; defaults run the bundled tasks on the embedded model."""
    g = p.add_argument_group("tasks")
    g.add_argument(
        "--tasks",
        nargs="*",
        default=None,
        metavar="NAME",
        help=f"task names (default: {' '.join(DEFAULT_TASKS)} of the bundled tasks, or every task "
        "of --tasks-dir when given)",
    )
    g.add_argument("--all-tasks", action="store_true", help="every task of --tasks-dir (all 9 bundled ones)")
    g.add_argument("--tasks-dir", default=None, help="directory of task folders (default: the bundled tasks)")
    g.add_argument(
        "--records",
        default=None,
        help="real MigrationBench records (CSV/Parquet); repos are cloned at base_commit (needs network)",
    )
    g.add_argument(
        "--rollouts-per-task",
        type=int,
        default=1,
        help="rollouts per task, i.e. the GRPO group size (default 1)",
    )
    g.add_argument("--concurrency", type=int, default=2, help="rollouts in flight at once (default 2)")

    g = p.add_argument_group("model")
    g.add_argument(
        "--backend",
        choices=["llamacpp", "transformers", "vllm", "litellm"],
        default=None,
        help="llamacpp: in-process llama.cpp (default for the qwen2.5-coder aliases); transformers: "
        "local model (default for other models); vllm: a vLLM server; litellm: hosted baseline, "
        "no token capture",
    )
    g.add_argument(
        "--model",
        default="qwen2.5-coder-1.5b",
        help="model alias (qwen2.5-coder-1.5b, qwen2.5-coder-0.5b, smollm2), local dir or .gguf "
        "(llamacpp/transformers), served name (vllm) or PROVIDER/MODEL (litellm); default "
        "qwen2.5-coder-1.5b",
    )
    g.add_argument(
        "--threads",
        type=int,
        default=None,
        help="llamacpp: CPU threads (default: half the CPUs, or $STRANDS_ART_LLAMACPP_THREADS)",
    )
    g.add_argument("--tokenizer", default=None, help="tokenizer alias/dir for vllm (default: --model)")
    g.add_argument(
        "--base-url",
        default=None,
        help="vllm: the server (http://127.0.0.1:8000); litellm: an OpenAI-compatible API base "
        "including /v1 (http://127.0.0.1:8000/v1), the provider's key from its usual environment "
        "variable (e.g. OPENAI_API_KEY)",
    )
    g.add_argument(
        "--history-mode",
        choices=["tree", "linear"],
        default="tree",
        help="row capture mode (default tree; see docs/linear-history.md)",
    )
    add_sampling_args(
        g,
        temperature=0.7,
        top_p=0.95,
        max_new_tokens=512,
        context_default="8192 on llamacpp, else the model's",
    )
    g.add_argument(
        "--prompt",
        choices=list(PROMPTS),
        default=None,
        help="compact: the short system prompt and the shell calls spelled out in the user turn "
        "(default on llamacpp); compact-no-recipe: the short system prompt, plain user turn; "
        "full: the full system prompt, plain user turn (default elsewhere)",
    )

    g = p.add_argument_group("rollout limits")
    g.add_argument(
        "--max-turns",
        type=int,
        default=None,
        help=f"model calls per rollout (default {_STD.max_turns}; {SMALL_MODEL_LIMITS['max_turns']} on llamacpp)",
    )
    g.add_argument(
        "--time-limit",
        type=float,
        default=None,
        help=f"seconds per rollout (default {_STD.time_limit:g}; {SMALL_MODEL_LIMITS['time_limit']:g} on llamacpp)",
    )
    g.add_argument(
        "--command-timeout",
        type=float,
        default=None,
        help=f"seconds per shell command (default {_STD.command_timeout:g})",
    )
    g.add_argument(
        "--max-output-bytes",
        type=int,
        default=None,
        help=f"shell output kept per command (default {_STD.max_output_bytes}; "
        f"{SMALL_MODEL_LIMITS['max_output_bytes']} on llamacpp)",
    )
    g.add_argument(
        "--build-timeout",
        type=float,
        default=None,
        help=f"seconds for the evaluation build (default {_STD.build_timeout:g})",
    )

    g = p.add_argument_group("run")
    g.add_argument(
        "--seed",
        type=int,
        default=0,
        help="sampling seed (default 0); rollout k of the i-th task samples with seed + i * N + k, "
        "N = --rollouts-per-task",
    )
    g.add_argument("--run-dir", default=None, help="output directory (default: runs/migrate-<timestamp>)")
    g.add_argument(
        "--resume",
        default=None,
        metavar="RUN_DIR",
        help="continue a run with its saved config.json (other options are ignored); completed "
        "rollouts are kept, only the missing ones run; a run directory takes one process at a time",
    )
    g.add_argument("--no-plot", action="store_true", help="skip the rewards/rows plot")
    g.add_argument(
        "--unsafe-no-sandbox",
        action="store_true",
        help="run the agent's commands and the evaluation builds WITHOUT the bubblewrap sandbox "
        "(with this process's privileges); only for machines where bwrap cannot run and the "
        "model is trusted. Default: refuse to start when the sandbox is unavailable",
    )

    g = p.add_argument_group("scale-out (Ray; docs/scale-out.md)")
    g.add_argument(
        "--ray",
        nargs="?",
        const="local",
        default=None,
        metavar="ADDRESS",
        help="run each rollout as a Ray task on a cluster node with the strands_art_sandbox resource "
        "(agent, gateway, sandbox and Maven build there; this process alone writes the run "
        "directory): auto = the cluster this machine belongs to, HOST:PORT or ray://... a given "
        "one; --ray alone starts a local cluster. Needs pip install 'strands-art[ray]'",
    )
    g.add_argument("--ray-cpus", type=float, default=1.0, help="CPUs each Ray rollout asks for (default 1)")
    g.add_argument(
        "--ray-memory-gb", type=float, default=2.0, help="memory each Ray rollout asks for, GiB (default 2)"
    )
    g.add_argument(
        "--ray-retries",
        type=int,
        default=3,
        help="times a rollout whose worker or node died runs again elsewhere (default 3)",
    )


def resolve_defaults(args: argparse.Namespace) -> None:
    """Fill the model-dependent defaults left as None: the backend (the alias's preferred one), the
    task list and the rollout limits (:meth:`.config.RolloutConfig.for_backend`: the small-model
    limits on llama.cpp). Mutates ``args``."""
    from strands_art.registry import preferred_backend

    if args.backend is None:
        args.backend = preferred_backend(args.model)
    if args.tasks is None and not getattr(args, "all_tasks", False) and args.tasks_dir is None:
        args.tasks = list(DEFAULT_TASKS)
    base = RolloutConfig.for_backend(args.backend)
    for key in LIMIT_FIELDS:
        if getattr(args, key, None) is None:
            setattr(args, key, getattr(base, key))


_INT_LIMITS = (  # (flag, attribute, lowest, highest): the ranges validate_migrate_args enforces
    ("--rollouts-per-task", "rollouts_per_task", 1, 10_000),
    ("--concurrency", "concurrency", 1, 1024),
    ("--seed", "seed", 0, (1 << 31) - 1),
)


def flag_of(field: str) -> str:
    """``max_turns`` -> ``--max-turns``: how the CLI names a :class:`.config.RolloutConfig` field."""
    return "--" + field.replace("_", "-")


def rollout_config(args: argparse.Namespace) -> RolloutConfig:
    """The :class:`.config.RolloutConfig` of resolved ``migrate`` options (:func:`resolve_defaults`):
    the limits, ``unsafe_no_sandbox`` (absent means False: the sandbox on) and the prompt
    (``--prompt``, :data:`.config.PROMPTS`; absent or None: compact on ``--backend llamacpp``,
    else full).

    Raises:
        UsageError: the first value of the wrong type or out of range, naming its flag
            (``--unsafe-no-sandbox must be true or false, got 'false'``), or an unknown
            ``--prompt`` (e.g. from a resumed run's config.json).
    """
    values = {key: getattr(args, key) for key in LIMIT_FIELDS}
    values["unsafe_no_sandbox"] = getattr(args, "unsafe_no_sandbox", False)
    prompt = getattr(args, "prompt", None)
    if prompt is None:
        prompt = "compact" if getattr(args, "backend", None) == "llamacpp" else "full"
    if not isinstance(prompt, str) or prompt not in PROMPTS:
        raise UsageError(f"--prompt must be one of {', '.join(PROMPTS)}, got {prompt!r}")
    values.update(PROMPTS[prompt])
    return RolloutConfig.from_mapping(values, flag_of)


def validate_rollout_limits(args: argparse.Namespace) -> None:
    """Check the rollout values of ``args`` as :func:`rollout_config` does (kept for callers that
    hold a Namespace).

    Raises:
        UsageError: the first value out of range, naming its flag.
    """
    rollout_config(args)


def validate_migrate_args(args: argparse.Namespace) -> None:
    """Check every ``migrate`` value before anything is written (also those read from a resumed
    run's config.json).

    Raises:
        UsageError: the first value out of range, naming its flag (e.g. ``--time-limit must be a
            finite number in (0, 604800], got nan``), or an inconsistent combination
            (``--backend vllm`` without ``--base-url``; ``--backend litellm`` without
            ``PROVIDER/MODEL``); a ``--base-url`` that is not an http(s) URL with a host; an empty
            ``--tasks-dir`` or ``--records`` (an unset variable would otherwise mean the bundled
            tasks), ``--tasks`` with no name, or two task sources at once (``--all-tasks`` with
            ``--tasks``, ``--records`` with ``--tasks-dir``).
    """
    _validate_task_source(args)
    for flag, name, lo, hi in _INT_LIMITS:
        check_int(flag, getattr(args, name), lo, hi)
    validate_rollout_limits(args)
    check_sampling_args(args)
    if getattr(args, "threads", None) is not None:
        check_int("--threads", args.threads, 1, 1024)
    if args.backend not in ("llamacpp", "transformers", "vllm", "litellm"):
        raise UsageError(f"--backend must be llamacpp, transformers, vllm or litellm, got {args.backend!r}")
    check_backend_url(args.backend, args.base_url)
    _validate_ray_args(args)
    if args.backend == "litellm" and "/" not in str(args.model):
        raise UsageError(
            f"--backend litellm needs --model PROVIDER/MODEL (e.g. openai/gpt-4o), got {args.model!r}"
        )


def _validate_task_source(args: argparse.Namespace) -> None:
    """Where the tasks come from, read one way only (see :func:`validate_migrate_args`)."""
    check_path("--tasks-dir", getattr(args, "tasks_dir", None))
    check_path("--records", getattr(args, "records", None))
    if getattr(args, "tasks", None) == []:
        raise UsageError("--tasks names no task: give names, or leave --tasks out for the default tasks")
    if getattr(args, "all_tasks", False) and args.tasks:
        raise UsageError("--all-tasks and --tasks both choose tasks: give one of them")
    if getattr(args, "records", None) and getattr(args, "tasks_dir", None):
        raise UsageError("--records and --tasks-dir are two task sources: give one of them")


def _validate_ray_args(args: argparse.Namespace) -> None:
    """The ``--ray*`` options (absent in run directories of older versions: no Ray).

    Raises:
        UsageError: an empty or blank address, ``--backend litellm`` (no token capture to ship
            back), ``--records`` (cloned on the driver only), or a resource request out of range.
    """
    address = getattr(args, "ray", None)
    if address is None:
        return
    if not isinstance(address, str):
        raise UsageError(f"--ray must be auto, HOST:PORT or ray://HOST:PORT, got {address!r}")
    check_ray_address(address)
    if args.backend == "litellm":
        raise UsageError("--ray runs token-capturing backends only (llamacpp, transformers, vllm)")
    if getattr(args, "records", None):
        raise UsageError(
            "--ray with --records is not supported: clone the records into a --tasks-dir on a "
            "filesystem every node shares (docs/scale-out.md)"
        )
    check_float("--ray-cpus", getattr(args, "ray_cpus", 1.0), 0.0, 1024.0, lo_open=True)
    check_float("--ray-memory-gb", getattr(args, "ray_memory_gb", 2.0), 0.0, 1 << 20)
    check_int("--ray-retries", getattr(args, "ray_retries", 3), 0, 100)
