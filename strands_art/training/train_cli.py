"""``strands-art train``: GRPO + LoRA on one machine (or, with ``--trainer verl``, a verl launch).

Options left out take the environment's recommended value, then the default of
:data:`strands_art.training.settings.DEFAULTS`. ``--resume`` continues the run in ``--run-dir``
with the settings saved there (``train.json``); other options must then be left out or say what
the run used (:mod:`strands_art.training.resume_settings`), except a larger ``--outer-batches``,
which extends the run (``train.json`` is updated).
At the end the command prints where the run is (metrics, TensorBoard, checkpoints).
"""

from __future__ import annotations

import argparse
import importlib.util
import shlex
import sys
from pathlib import Path
from typing import Any

from strands_art.invocation import strands_art_command
from strands_art.training.old_logprobs import OLD_LOGPROBS_CHOICES
from strands_art.training.precision import AUTOCAST_CHOICES
from strands_art.training.settings import BATCHING_CHOICES, DEFAULTS, SAMPLER_DTYPE_CHOICES

DESCRIPTION = """\
Train a policy with GRPO + LoRA on one machine: tasks -> rollouts through the gateway ->
step-stable GRPO updates -> next rollouts, with held-out evaluation, checkpoints, metrics.jsonl
and TensorBoard event files in --run-dir.

  strands-art train --env capitals --run-dir runs/capitals        # SmolLM2, minutes on a CPU
  strands-art train --env lookup --run-dir runs/lookup            # the multi-turn tool task
  strands-art train --env migrationbench --train-tasks DIR --eval-tasks DIR --run-dir runs/mb
  strands-art train --env mypkg.myenv:make_env --run-dir runs/mine
  strands-art train --resume --run-dir runs/lookup                # continue a killed run
  strands-art train --resume --outer-batches 10 --run-dir runs/lookup   # extend a run to 10 batches
  strands-art train --env migrationbench --trainer verl --train-tasks DIR --run-dir runs/mb-verl   # a verl launch

Each --env's default sizes, and what they cost on a 2-core CPU with no GPU (bench/results/):
  capitals        SmolLM2-135M; 10 outer batches x 2 tasks x 6 rollouts of 10 tokens, 8 held-out
                  x 4: 5 such runs side by side took 14.6 min (learning-2026-11-30.txt)
  lookup          Qwen2.5-Coder-0.5B; 5 x 2 keys x 8 rollouts of 2 turns x 64 tokens, 8 held-out
                  x 4: ~24 min a run with --backend vllm (train-lookup-2026-12-01.txt); the
                  default --backend transformers samples on the trainer's model: not measured
  migrationbench  Qwen2.5-Coder-0.5B; 4 x 1 task x 4 rollouts of up to 20 turns x 512 tokens,
                  real Maven builds: not measured; 3 updates of 2 tasks x 4 rollouts took
                  ~1.5 h with two evaluations (migration-learning-2026-12-02-e.txt); 6 updates of
                  1 task x 4 rollouts of up to 4 turns with --autocast bf16 --max-draws 2 took
                  ~1 h with two 28-rollout evaluations (seed-experiments-2026-12-04-r2.txt)
Quick try (the smallest run that trains and evaluates):
  strands-art train --env capitals --outer-batches 2 --eval-samples 1 --run-dir runs/try

--env module:function names a factory (EnvOptions) -> TrainEnvironment (docs/training.md,
"Your own environment"). --max-staleness K (default 1) overlaps the rollouts of the next outer
batch with the update on this one; 0 is the synchronous loop.
"""


def add_train_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``train`` on a subparsers object; the handler is set as ``func``."""
    p = subparsers.add_parser(
        "train",
        help="GRPO + LoRA training of an environment on one machine (or write a verl launch)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d = DEFAULTS
    p.add_argument("--env", default=None, help="capitals, lookup, migrationbench or module:function")
    p.add_argument("--run-dir", required=True, help="where the run's files go")
    p.add_argument(
        "--resume", action="store_true", help="continue the run in --run-dir from its newest checkpoint"
    )
    g = p.add_argument_group("model and sampler")
    g.add_argument(
        "--model", help=f"model alias or local directory (default: the environment's, else {d['model']})"
    )
    g.add_argument(
        "--backend", choices=("transformers", "vllm"), help="what samples rollouts (default transformers)"
    )
    g.add_argument("--vllm-url", help="a running vLLM server (LoRA enabled) instead of starting one")
    g.add_argument(
        "--trainer", choices=("embedded", "verl"), help="embedded (default) or verl: write its launch"
    )
    g.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    g = p.add_argument_group("GRPO and step-stable batching")
    g.add_argument("--outer-batches", type=int, help="outer batches (updates) of the run")
    g.add_argument("--prompt-batch", type=int, help="tasks per outer batch")
    g.add_argument("--rollouts-per-prompt", type=int, help="rollouts per task (the GRPO group)")
    g.add_argument("--ppo-mini-batch", type=int, help="tasks per PPO mini-batch (one optimizer step each)")
    g.add_argument("--epochs", type=int, help="PPO epochs per outer batch")
    g.add_argument(
        "--batching",
        choices=BATCHING_CHOICES,
        help="fixed-steps (default): --prompt-batch / --ppo-mini-batch x --epochs optimizer steps per outer "
        "batch whatever the row count; fixed-rows: mini-batches of --rows-per-mini-batch rows, so more rows "
        "take more steps (the baseline step-stable batching fixes, for comparison; needs --max-staleness 0)",
    )
    g.add_argument(
        "--rows-per-mini-batch",
        type=int,
        metavar="N",
        help="rows per mini-batch with --batching fixed-rows (default --ppo-mini-batch x --rollouts-per-prompt)",
    )
    g.add_argument("--lr", type=float, help="AdamW learning rate (after warmup)")
    g.add_argument("--warmup-steps", type=int, help="linear learning-rate warmup, optimizer steps")
    g.add_argument("--kl-coef", type=float, help="KL penalty toward the base model (0: none)")
    g.add_argument("--max-grad-norm", type=float, help="gradient clipping norm")
    g.add_argument("--lora-rank", type=int, help="LoRA rank (alpha = 2 x rank)")
    g.add_argument("--micro-batch-tokens", type=int, help="padded tokens per micro-batch (memory)")
    g.add_argument(
        "--max-staleness", type=int, help="K: rollouts may be K updates behind (0: synchronous; default 1)"
    )
    g.add_argument(
        "--launch-after-step",
        type=int,
        metavar="J",
        help="with --max-staleness >= 1: launch the rollouts ahead after optimizer step J of the current "
        "update, its adapter synced to the sampler first (0, default: before the update; J below the "
        "steps of one update, --prompt-batch / --ppo-mini-batch x --epochs: J steps less lag, less overlap)",
    )
    g.add_argument(
        "--max-draws",
        type=int,
        metavar="N",
        help="dynamic sampling: roll out up to N groups per update, in waves, until --prompt-batch of them "
        "have rewards that differ; the update still trains on --prompt-batch groups (default: --prompt-batch, "
        "no extra draws)",
    )
    g.add_argument(
        "--skip-tied",
        type=float,
        metavar="Q",
        help="skip, before its rollouts and with probability Q, a task whose last group's rewards all tied "
        "(0, default: never)",
    )
    g.add_argument(
        "--old-logprobs",
        choices=("auto", *OLD_LOGPROBS_CHOICES),
        help="the PPO ratio's old logprobs: the recorded ones (rollout), a no-grad trainer pass before "
        "the update (recompute), or the trainer's own at each row's first step (first-pass); auto "
        "(default): rollout when synchronous (always with --trainer verl: its bypass mode), else first-pass",
    )
    g.add_argument(
        "--share-prefix",
        action="store_true",
        default=None,
        help="run each GRPO group's common prompt once and its rows on its KV cache (same loss and "
        "gradients; faster when the prompt dominates, e.g. migrationbench)",
    )
    g.add_argument(
        "--gradient-checkpointing",
        action="store_true",
        default=None,
        help="recompute activations in the backward pass (same loss and gradients, one more forward "
        "pass, far less memory: long agent rows on a small machine); not with --share-prefix",
    )
    g.add_argument(
        "--autocast",
        choices=AUTOCAST_CHOICES,
        help="the optimizer steps' forward and backward passes in bfloat16 autocast (bf16: faster on a CPU "
        "with AVX512-BF16/AMX, weights, adapter and optimizer state stay float32, the logits float32; the "
        "trainer's logprobs move ~0.03 nats from the sampler's: see docs/training-update.md) or not "
        "(off, default)",
    )
    g.add_argument(
        "--sampler-dtype",
        choices=SAMPLER_DTYPE_CHOICES,
        help="the --dtype of the vLLM server train starts (--backend vllm, no --vllm-url): float32 "
        "(default: recorded logprobs equal a float32 recomputation) or bfloat16 (2.5x the prefill and 1.4x "
        "the decode on a Xeon with AMX; its recorded logprobs ~0.0015 nats from float32's: with "
        "--old-logprobs rollout the PPO ratio sees that gap; docs/setup-vllm.md)",
    )
    g.add_argument(
        "--train-truncated",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also train answers sampled to the token limit (--max-new-tokens or the context) with no "
        "complete tool call, at their rollout's advantage; default: the environment's (capitals: trained, "
        "its reward scores a cut reply 0; migrationbench and lookup: left out of the loss, DAPO's overlong "
        "filtering, the rollout's reward still in its group); counted as truncated_turns either way",
    )
    g = p.add_argument_group("rollouts and evaluation")
    g.add_argument("--temperature", type=float, help="rollout sampling temperature")
    g.add_argument("--max-new-tokens", type=int, help="tokens per model turn")
    g.add_argument("--max-turns", type=int, help="model calls per rollout (multi-turn environments)")
    g.add_argument(
        "--history-mode",
        choices=("tree", "linear"),
        help="how the environment's gateway captures rollouts: tree (a new row where a re-rendered history "
        "stops being a prefix) or linear (one row per append-only conversation); default: the environment's "
        "(linear for the bundled multi-turn ones)",
    )
    g.add_argument("--concurrency", type=int, help="rollouts in flight at once")
    g.add_argument(
        "--train-tasks",
        help="training tasks directory (migrationbench): one directory per task with task.json, as "
        "make-tasks writes; default: the 9 bundled tasks",
    )
    g.add_argument(
        "--eval-tasks",
        help="held-out tasks directory (migrationbench), none of them a training task; default: no "
        "held-out evaluation",
    )
    g.add_argument(
        "--prompt",
        help="migrationbench: compact, compact-no-recipe or full, as `migrate --prompt` (default full; "
        "the compact ones also take the small-model limits: 600 s and 4,000 bytes of shell output)",
    )
    g.add_argument("--eval-every", type=int, help="evaluate every N outer batches (0: before and after only)")
    g.add_argument("--eval-samples", type=int, help="rollouts per held-out task")
    g.add_argument("--eval-temperature", type=float, help="held-out sampling temperature")
    g.add_argument("--checkpoint-every", type=int, help="checkpoint every N outer batches")
    g.add_argument("--seed", type=int, help="seed of tasks, sampling and the LoRA initialization")
    g.add_argument(
        "--wandb", action="store_true", default=None, help="also log to Weights & Biases (needs wandb)"
    )
    g.add_argument("--no-progress", action="store_true", help="no live panel (log lines only)")
    g.add_argument(
        "--stop-after",
        type=int,
        metavar="N",
        help="stop after N outer batches of this call, checkpointed (the run continues with --resume; "
        "for long runs taken in chunks, e.g. under a shared lock); not a setting of the run",
    )
    g.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="run each rollout as a Ray task: auto (this machine's cluster), HOST:PORT or ray://...; "
        "alone: a local cluster. Needs --backend vllm and --max-staleness 0 (docs/scale-out.md)",
    )
    p.set_defaults(func=run_train)
    return p


def _given(args: argparse.Namespace) -> dict[str, Any]:
    return {k: getattr(args, k) for k in DEFAULTS if getattr(args, k, None) is not None}


def _settings(args: argparse.Namespace) -> Any:
    """A resumed run's settings (:func:`~strands_art.training.resume_settings.resume_settings`), or
    for a new run the settings the command line gives (resolved once the environment is built)."""
    from strands_art.training.resume_settings import resume_settings
    from strands_art.training.settings import TrainSettings, check_ranges

    given = _given(args)
    if args.resume:
        saved = TrainSettings.load(args.run_dir)
        check_ranges(given)  # each restated number in range first: `--skip-tied 2` is not a difference
        # an extension is saved once the run's lock is held (run_training)
        return resume_settings(saved, given, args.env)
    if args.env is None:
        raise ValueError("--env is required (capitals, lookup, migrationbench or module:function)")
    return given


def warmup_warning(settings: Any) -> str | None:
    """Why the run never reaches ``--lr`` (``--warmup-steps`` at or above its optimizer steps:
    outer batches x steps per update, :func:`~strands_art.training.batching.plan`), else None."""
    from strands_art.training.batching import plan

    cfg = settings.trainer_config()
    per = plan(cfg.prompt_batch_size * cfg.rollouts_per_prompt, cfg.batching()).optimizer_steps
    total = settings.outer_batches * per
    if cfg.lr_warmup_steps <= total:
        return None
    return (
        f"--warmup-steps {cfg.lr_warmup_steps} exceeds the run's {total} optimizer steps "
        f"({settings.outer_batches} outer batches x {per}): the learning rate never reaches --lr "
        f"{cfg.learning_rate:g} (its last step uses {cfg.learning_rate * total / cfg.lr_warmup_steps:.3g}); "
        f"pass --warmup-steps {total} or fewer"
    )


def _resume_command(run_dir: str | Path) -> str:
    return f"{strands_art_command()} train --resume --run-dir {shlex.quote(str(run_dir))}"


def run_train(args: argparse.Namespace) -> int:
    """Handle ``train``: exit 2 with one line on bad input, a damaged run directory or a
    checkpoint that cannot be written; 1 when the sampler stopped answering (the run stands at
    its last checkpoint, the ``--resume`` command printed); 130 on Ctrl-C; 0 after a finished run."""
    from strands_art.training.checkpoint import CheckpointWriteError
    from strands_art.training.environment import EnvironmentSpecError, resolve_environment
    from strands_art.training.loop import SamplerUnavailable
    from strands_art.training.run import check_tasks, env_options, run_training
    from strands_art.training.run_files import (
        RunDirError,
        before,
        check_run_dir,
        check_run_entries,
        undo_start,
    )
    from strands_art.training.settings import TrainSettings
    from strands_art.validation import check_int

    run_dir = Path(args.run_dir)
    was = before(run_dir)
    try:
        if args.stop_after is not None:
            check_int("--stop-after", args.stop_after, 1, 10**6)
        check_run_entries(run_dir)  # before the environment writes env/ (through a symlink)
        got = _settings(args)
        if isinstance(got, TrainSettings):
            settings, env = got, None
        else:
            check_run_dir(run_dir, resume=False)  # a run there: refused before env/ is written into it
            # the environment's options; sizes are checked once its recommended values are in
            probe = TrainSettings.resolve(args.env, args.run_dir, got, cross_checks=False)
            env = resolve_environment(args.env, env_options(probe))
            settings = TrainSettings.resolve(args.env, args.run_dir, got, env.defaults)
            check_tasks(settings, env)
        if settings.trainer == "verl":
            from strands_art.training.verl_launch import write_verl_launch

            path = write_verl_launch(settings)
            print(f"verl launch written: {path} (run it on the cluster: bash {path})")
            return 0
        warning = warmup_warning(settings)
        if warning:
            print(f"strands-art train: warning: {warning}", file=sys.stderr)
        result = run_training(
            settings, resume=args.resume, env=env, progress=not args.no_progress, stop_after=args.stop_after
        )
    except SamplerUnavailable as exc:
        print(
            f"strands-art train: {exc}; the run stopped at its last checkpoint: once the sampler answers "
            f"again, {_resume_command(args.run_dir)}",
            file=sys.stderr,
        )
        return 1
    except CheckpointWriteError as exc:
        print(
            f"strands-art train: {exc}: free the space, then {_resume_command(args.run_dir)}", file=sys.stderr
        )
        return 2
    except (ValueError, OSError, RunDirError, EnvironmentSpecError, RuntimeError) as exc:
        if not args.resume:  # a refused start leaves the directory as it was (a resume: untouched)
            undo_start(run_dir, was)
        print(f"strands-art train: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if not args.resume:  # stopped before it trained: leave the directory as the command found it
            undo_start(run_dir, was)
        if not args.resume and not (run_dir / "train.json").exists():
            print(
                "strands-art train: interrupted before the run began; nothing of it is kept: "
                "the same command starts it again",
                file=sys.stderr,
            )
            return 130
        print(
            f"strands-art train: interrupted; {run_dir} keeps every outer batch up to its newest checkpoint: "
            f"{_resume_command(run_dir)}",
            file=sys.stderr,
        )
        return 130
    evals = [r for r in result.records if r.get("kind") == "eval"]
    run_dir = Path(settings.run_dir)
    cmd, where = strands_art_command(), shlex.quote(str(run_dir))
    board = f"tensorboard --logdir {shlex.quote(str(run_dir / 'tensorboard'))}"
    if importlib.util.find_spec("tensorboard") is None:  # the reader; the run writes with tensorboardX
        board = f"{run_dir / 'tensorboard'} (to browse: pip install tensorboard, then {board})"
    if result.outer_batch < settings.outer_batches:  # --stop-after: a chunk of the run, not its end
        print(f"stopped after {result.outer_batch} of {settings.outer_batches} outer batches (--stop-after)")
    if len(evals) >= 2:
        print(f"held-out reward {evals[0]['val_reward']:.3f} -> {evals[-1]['val_reward']:.3f}")
        if "val_success" in evals[0] and "val_success" in evals[-1]:
            print(f"held-out success {evals[0]['val_success']:.3f} -> {evals[-1]['val_success']:.3f}")
    print(
        f"run: {run_dir} ({result.outer_batch} outer batches, {result.step} optimizer steps)\n"
        f"  metrics      {run_dir / 'metrics.jsonl'}\n"
        f"  tensorboard  {board}\n"
        f"  adapter      {result.adapter}\n"
        f"  rows         {run_dir / 'rows'}\n"
        f"  view         {cmd} view {where}\n"
        f"  resume       {cmd} train --resume --run-dir {where}"
    )
    return 0


def _one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line (a library's error may span several)."""
    return " ".join(str(exc).split())[:1000]
