"""``strands-art train --trainer verl``: the same settings as a verl 0.9.1 launch, written, not run.

Writes ``RUN_DIR/verl/launch.sh``: the dataset step (``examples/migrationbench/make_verl_dataset.py``
on ``--train-tasks``; verl's validation set from ``--eval-tasks`` when given, else the training
tasks as in the published recipe) and ``python -m verl.trainer.main_ppo`` with the Hydra overrides of
``examples/migrationbench/train_verl.sh`` (the published configuration: step-stable batching via
``trainer.v1.trainer_mode=strands_sync``, the Strands agent loop) where the run's settings replace
the batch sizes, group size, epochs, learning rate and warmup, KL, the PPO ratio's old logprobs
(``--old-logprobs``: verl's bypass mode), LoRA rank, sampling, seed and
the number of steps. ``MODEL``, ``NGPUS``, ``NNODES`` and ``TP`` come from the environment as in
that script; ``MODEL`` defaults to the Hugging Face id of ``--model`` (:data:`HF_MODEL`), and must be
set for an alias without one. Only ``--env migrationbench`` has a verl agent loop.

``--train-truncated``: the agent loop's ``train_truncated`` option, in a copy of
``examples/migrationbench/verl_agent_loops.yaml`` written beside the launch (``RUN_DIR/verl/agent_loops.yaml``,
:func:`agent_loops_yaml`); without it the launch uses the published file, whose loop leaves
truncated answers out of the loss.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from strands_art.training.loss import LossConfig
from strands_art.training.settings import TrainSettings

AGENT_LOOPS = Path("examples") / "migrationbench" / "verl_agent_loops.yaml"
"""The published agent-loop file, relative to the checkout the launch runs from."""

HF_MODEL = {
    "qwen2.5-coder-0.5b": "Qwen/Qwen2.5-Coder-0.5B-Instruct",
    "qwen2.5-coder-1.5b": "Qwen/Qwen2.5-Coder-1.5B-Instruct",
    "smollm2": "HuggingFaceTB/SmolLM2-135M-Instruct",
}
"""The Hugging Face model each ``--model`` alias is (verl loads ``actor_rollout_ref.model.path``
from the hub or a path; the aliases are strands-art's names for the GGUF or cached copies)."""

_FIXED = [
    "trainer.use_v1=True",
    "trainer.v1.trainer_mode=strands_sync",
    "algorithm.adv_estimator=grpo",
    "algorithm.norm_adv_by_std_in_grpo=True",
    "algorithm.use_kl_in_reward=False",
    "data.return_raw_chat=True",
    "actor_rollout_ref.model.use_remove_padding=True",
    "actor_rollout_ref.model.enable_gradient_checkpointing=True",
    "actor_rollout_ref.actor.shuffle=False",
    "actor_rollout_ref.actor.use_dynamic_bsz=True",
    "actor_rollout_ref.actor.loss_agg_mode=token-mean",
    "actor_rollout_ref.actor.entropy_coeff=0",
    "actor_rollout_ref.rollout.name=vllm",
    "actor_rollout_ref.rollout.mode=async",
    "actor_rollout_ref.rollout.top_p=1.0",
    "actor_rollout_ref.rollout.calculate_log_probs=True",
    "actor_rollout_ref.rollout.logprobs_mode=processed_logprobs",
    "actor_rollout_ref.rollout.enable_prefix_caching=True",
    "trainer.critic_warmup=0",
    "trainer.project_name=strands-art",
    "'trainer.logger=[console,tensorboard]'",
]


OLD_LOGPROBS = {
    "rollout": ["algorithm.rollout_correction.bypass_mode=True"],
    "recompute": [
        "algorithm.rollout_correction.bypass_mode=False",
        "algorithm.rollout_correction.rollout_is=token",
        f"algorithm.rollout_correction.rollout_is_threshold={LossConfig().tis_cap}",
    ],
}
"""``--old-logprobs`` -> verl 0.9.1's ``algorithm.rollout_correction`` (``RolloutCorrectionConfig``).
``rollout``: bypass mode, the recorded rollout logprobs are the PPO ratio's old ones (no extra
forward pass; the published configuration). ``recompute``: decoupled mode, the actor recomputes
them before the update (the proximal policy) and the recorded ones enter a token-level truncated
importance weight capped like the embedded trainer's (``LossConfig.tis_cap``; verl's yaml leaves
``rollout_is`` null, i.e. no weight). ``first-pass`` has no verl counterpart."""


def verl_overrides(s: TrainSettings) -> list[str]:
    """The Hydra overrides of these settings (after the fixed ones of the published configuration).

    Raises:
        ValueError: ``--old-logprobs first-pass`` (no verl counterpart, :data:`OLD_LOGPROBS`).
    """
    if s.old_logprobs not in OLD_LOGPROBS:
        raise ValueError(
            f"--trainer verl: --old-logprobs {s.old_logprobs} has no verl counterpart; "
            "use rollout (bypass mode, the default) or recompute (verl recomputes them before the update)"
        )
    kl = s.kl_coef > 0
    return [
        *_FIXED,
        *OLD_LOGPROBS[s.old_logprobs],
        f"data.train_batch_size={s.prompt_batch}",
        f"data.max_response_length={s.max_new_tokens}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={s.ppo_mini_batch}",
        f"actor_rollout_ref.actor.ppo_epochs={s.epochs}",
        f"actor_rollout_ref.actor.optim.lr={s.lr}",
        f"actor_rollout_ref.actor.optim.lr_warmup_steps={s.warmup_steps or -1}",
        f"actor_rollout_ref.actor.grad_clip={s.max_grad_norm or 0}",
        f"actor_rollout_ref.actor.use_kl_loss={kl}",
        f"actor_rollout_ref.actor.kl_loss_coef={s.kl_coef}",
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
        f"actor_rollout_ref.model.lora_rank={s.lora_rank}",
        f"actor_rollout_ref.model.lora_alpha={2 * s.lora_rank}",
        f"actor_rollout_ref.rollout.n={s.rollouts_per_prompt}",
        f"actor_rollout_ref.rollout.temperature={s.temperature}",
        f"actor_rollout_ref.rollout.response_length={s.max_new_tokens}",
        f"actor_rollout_ref.rollout.val_kwargs.temperature={s.eval_temperature}",
        f"actor_rollout_ref.rollout.val_kwargs.n={s.eval_samples}",
        f"trainer.total_training_steps={s.outer_batches}",
        # --eval-every 0 is "before and after": verl validates before training (val_before_train) and,
        # with test_freq > 0, at its last step; without --eval-tasks there is nothing to validate
        f"trainer.test_freq={(s.eval_every or s.outer_batches) if s.eval_tasks else -1}",
        f"trainer.save_freq={s.checkpoint_every or -1}",
        f"trainer.val_before_train={bool(s.eval_tasks)}",
        f"trainer.default_local_dir={s.run_dir}/verl/checkpoints",
        f"trainer.experiment_name={Path(s.run_dir).name}",
        f"data.seed={s.seed}",
    ]


def agent_loops_yaml(published: str, train_truncated: bool) -> str:
    """The agent-loop file of a launch: ``published`` (the text of :data:`AGENT_LOOPS`) with
    ``train_truncated: true`` added to every entry when ``train_truncated``.

    Raises:
        ValueError: an entry without its ``history_mode:`` line (where the option goes).
    """
    if not train_truncated:
        return published
    lines, out = published.splitlines(), []
    entries = sum(1 for line in lines if line.startswith("- name:"))
    for line in lines:
        out.append(line)
        if line.startswith("  history_mode:"):
            out.append(
                "  train_truncated: true    # --train-truncated: answers cut at the token limit trained"
            )
    if entries == 0 or sum(1 for line in out if line.startswith("  train_truncated:")) != entries:
        raise ValueError(f"{AGENT_LOOPS}: every entry needs a 'history_mode:' line for --train-truncated")
    return "\n".join(out) + "\n"


def write_verl_launch(s: TrainSettings) -> Path:
    """Write ``RUN_DIR/verl/launch.sh`` (executable) and return its path.

    Raises:
        ValueError: an environment other than migrationbench, no ``--train-tasks``, or a
            ``--prompt`` other than ``full`` (verl's agent loop runs the full prompt; its ``episode_kwargs`` set limits only),
            ``--old-logprobs first-pass``; ``RUN_DIR/verl/launch.sh`` exists already;
            ``--train-truncated`` without the published agent-loop file (an installed wheel: run
            from the checkout).
    """
    if s.env != "migrationbench":
        raise ValueError(
            "--trainer verl: only --env migrationbench has a verl agent loop (docs/setup-verl.md)"
        )
    if not s.train_tasks:
        raise ValueError("--trainer verl needs --train-tasks DIR (the verl dataset is made from it)")
    if s.prompt not in (None, "full"):  # "full": the environment's default, recorded in train.json
        raise ValueError(
            "--trainer verl: verl's agent loop runs the full prompt (the episode_kwargs of "
            "examples/migrationbench/verl_agent_loops.yaml set rollout limits only); "
            "--prompt is for the embedded trainer"
        )
    overrides_of_settings = verl_overrides(s)  # refuses before anything is written
    out = Path(s.run_dir) / "verl"
    if (out / "launch.sh").exists():  # never overwrite what a run directory holds
        raise ValueError(
            f"{out / 'launch.sh'} exists: --trainer verl writes a new launch into another --run-dir "
            "(or remove that one)"
        )
    loops = f'"{AGENT_LOOPS}"'
    if s.train_truncated:
        published = Path(__file__).resolve().parents[2] / AGENT_LOOPS
        if not published.is_file():
            raise ValueError(
                f"--trainer verl --train-truncated: {AGENT_LOOPS} not found (run from the checkout)"
            )
        text = agent_loops_yaml(published.read_text(encoding="utf-8"), True)
    out.mkdir(parents=True, exist_ok=True)
    if s.train_truncated:
        (out / "agent_loops.yaml").write_text(text, encoding="utf-8")
        loops = shlex.quote(str(out.resolve() / "agent_loops.yaml"))
    data = str(out.resolve() / "data")  # absolute: the launch runs from any directory
    overrides = " \\\n  ".join(
        [
            *overrides_of_settings,
            f'data.train_files="{data}/train.parquet"',
            f'data.val_files="{data}/val.parquet"',
            'actor_rollout_ref.model.path="$MODEL"',
            'trainer.n_gpus_per_node="$NGPUS"',
            'trainer.nnodes="$NNODES"',
            'actor_rollout_ref.rollout.tensor_model_parallel_size="$TP"',
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loops}",
            "\"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES='$VERL_USE_EXTERNAL_MODULES'\"",
            '"$@"',
        ]
    )
    hf = HF_MODEL.get(s.model)
    model_line = (
        f"MODEL=${{MODEL:-{hf}}}  # --model {s.model}"
        if hf
        else f'MODEL=${{MODEL:?"set MODEL to the Hugging Face id or path of --model {s.model}"}}'
    )
    val = f" --val-tasks-dir {shlex.quote(str(Path(s.eval_tasks).resolve()))}" if s.eval_tasks else ""
    script = f"""#!/usr/bin/env bash
# verl 0.9.1 launch for: {s.command()}
# Written by `strands-art train --trainer verl`; run from the strands-art checkout on the cluster
# (pip install -e '.[verl-vllm]', docs/setup-verl.md). Extra arguments are Hydra overrides.
set -euo pipefail
{model_line}
NGPUS=${{NGPUS:-8}}
NNODES=${{NNODES:-1}}
TP=${{TP:-2}}
export VERL_USE_EXTERNAL_MODULES=strands_art.verl.trainer,strands_art.verl.agent_loop
python examples/migrationbench/make_verl_dataset.py --tasks-dir {shlex.quote(str(Path(s.train_tasks).resolve()))}{val} --out {shlex.quote(data)}
python -m verl.trainer.main_ppo \\
  {overrides}
"""
    path = out / "launch.sh"
    path.write_text(script, encoding="utf-8")
    path.chmod(0o755)
    return path
