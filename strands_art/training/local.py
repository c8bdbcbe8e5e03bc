"""The embedded trainer: GRPO with step-stable batching on a local LoRA model (one machine).

:class:`LocalTrainer` wraps a Hugging Face causal LM in a peft LoRA adapter, optimizes the
adapter with AdamW, and shares the *same* model object with a
:class:`~strands_art.backends.transformers.TransformersBackend`, so the weights it updates are the
weights the next rollouts sample from (no copy, no reload). One :meth:`LocalTrainer.update` per
outer batch of finished trajectories:

1. GRPO advantages per task group (:func:`~strands_art.training.grpo.compute_advantages`);
2. step-stable layout (:func:`~strands_art.training.batching.build_batch`):
   ``num_mini_batches * ppo_epochs`` optimizer steps whatever the row count;
3. for each mini-batch: zero the gradients, fix the loss denominator ``D``
   (:func:`~strands_art.training.loss.loss_denominator`), run length-sorted micro-batches under a
   token budget (gradient accumulation, right-padded, padded fraction reported), backpropagate
   each micro-batch's PPO loss divided by ``D``; clip; one ``optimizer.step()``. Rows with
   advantage 0 add exactly nothing to the loss when there is no KL term (``D`` fixed): their
   forward and backward passes are skipped (``zero_advantage_rows_skipped``), which on CPU saves
   the whole training cost of a group whose rewards are all equal.

**Learning-rate warmup** (``lr_warmup_steps = W``): the ``s``-th optimizer step (1-based)
counted from the first one with a nonzero gradient uses ``learning_rate * min(1, s / W)``.
AdamW's first steps move every LoRA parameter by about the learning rate whatever the gradient's
size; warmup keeps the first update of a run small. The steps before the first
nonzero gradient (a run whose first groups all have equal rewards) skip ``optimizer.step()``
like every zero-gradient step (below), so the first real update is exactly that of a run that
started with it, and they do not use up the warmup (:attr:`LocalTrainer.warmup_offset`, saved
in checkpoints).

**A step whose gradient is exactly zero skips ``optimizer.step()``** (every row of its
mini-batch skipped: GRPO groups whose rewards all tie, padding; never with a KL term). AdamW would
otherwise move every weight on its momentum and its second-moment estimate: from one earlier
gradient ``g``, the next zero-gradient steps move each parameter by about ``0.67, 0.52, 0.42, ...``
times the learning rate along ``sign(g)``, so one group's noisy gradient is applied several times
over (measured on a migration run: two tied groups grew the LoRA ``B`` norm by 26 %). Skipped, the
step is no update and no weight decay, and AdamW's step count (its bias correction) does not
advance; it still counts as a step (the step count and the policy version advance as the
configuration says) and is counted in ``zero_gradient_steps``. verl steps its optimizer on a
zero gradient; there a mini-batch spans many groups, so an all-tied mini-batch is rare.

**Non-finite gradients** (a diverging loss, a huge ``kl_coef``): the step is refused before
``optimizer.step()`` (:class:`NonFiniteGradient`); the adapter keeps the weights of the step before
(earlier steps of the same outer batch stay applied; the message says how many).

**KL penalty** (``loss.kl_coef > 0``, :mod:`strands_art.training.loss`): each micro-batch also
runs a no-grad forward pass with the LoRA adapter disabled (the base model is the reference
policy), and no row is skipped, since a zero-advantage row now has a gradient (toward the base
model). The per-token KL to the reference is reported as ``kl_ref`` whenever it is computed.
The KL term compares both policies on the rollouts' temperature without top-k / top-p
(:attr:`LocalTrainer.kl_sampling`): under the filters a token outside the base model's top-k /
top-p set would have reference logprob ``-inf`` and no pull toward the base.

The trainer's logprobs use the sampling distribution of the rollouts (temperature, top-k, top-p;
:mod:`strands_art.training.logprobs`), so at the first step of a batch the ratio is 1 up to
numerics and the rollout-vs-trainer logprob gap is a real metric. A token the trainer's
top-k/top-p would filter (``-inf``) is left out of the loss and counted. Rows whose backend
recorded **raw** logprobs are moved to the sampling distribution first
(:func:`~strands_art.training.logprobs.move_raw_rollout_logprobs`).

While updating, the trainer holds ``backend.lock``: no generation runs on half-updated weights.
After each optimizer step the backend's ``policy_version`` is the step count, so every turn
records which policy sampled it (``Turn.policy_version``, ``row.metadata["policy_versions"]``).

**vLLM backend** (on-policy sync, :mod:`strands_art.training.weight_sync`): pass
``backend=VLLMBackend(...)`` and ``weight_sync=LoRASync(backend, adapter_dir)``. The trainer
then owns its model (the same weights the server loaded), and at the end of each
:meth:`LocalTrainer.update` (after its last optimizer step, before the next rollouts) loads the
new adapter into the server as policy version ``step``; a failed sync raises
:class:`~strands_art.training.weight_sync.WeightSyncError` out of ``update`` (training stops
rather than sampling on from a stale policy). :meth:`LocalTrainer.resume` syncs the resumed
adapter.

**Which logprobs correct what.** The PPO ratio's denominator is the *recorded* logprob of each
sampled token (``Row.logprobs``, what the backend reported for the policy version that sampled
it), or (``old_logprobs``) the trainer's own logprobs, from a no-grad pass before the update
(``"recompute"``) or detached from the row's first optimizer step of the update
(``"first-pass"``, no extra pass), with the recorded logprob entering the truncated importance
weight ``min(exp(old - recorded), tis_cap)``. Either way a
token's correction uses the policy that produced it, so a row mixing versions (a sync during a
multi-turn rollout) is corrected token by token; the lag is reported (``policy_lag_max``,
``policy_lag_mean`` in optimizer steps per sampled turn, ``mixed_policy_rows``).

**What an update costs** (per outer batch, in the metrics): ``actor_update_s``, the seconds of
its forward, backward and optimizer passes (the ``recompute`` pass included; the advantages, the
batch layout, an ``on_step`` hook and the weight sync after it not), and ``processed_tokens``, the
tokens of the rows each optimizer step trains, every row's context included, counted once per
step that runs it (so once per PPO epoch; with ``share_prefix`` each group's common prefix once,
and ``processed_tokens_unshared`` what the same rows take unshared). Rows skipped for a zero
advantage are not run, so not counted; the KL penalty's reference pass runs the same tokens again
without gradient and is not counted either.

**Forward passes** (:mod:`strands_art.training.passes`): length-sorted micro-batches under the
token budget, or with ``share_prefix`` (:mod:`strands_art.training.shared_prefix`) each group's
longest common token prefix once and its rows' continuations on its KV cache, with the same loss
and gradients (up to float rounding) at a fraction of the tokens. :attr:`LocalTrainer.passes`
picks one; the update code is the same either way.

The trainer reads trajectories only; it never imports the gateway (see
:mod:`strands_art.training.loop` for the rollout loop).

Over 450 lines as one trainer class (score, update, step, save, resume) over one model and
optimizer state; the loss, passes, logprobs and LoRA pieces are modules of their own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from strands_art.backends.base import SamplingParams
from strands_art.training import checkpoint, precision, shared_prefix, token_trace
from strands_art.training.batching import BatchRow, MiniBatch, build_batch
from strands_art.training.grpo import Advantages, compute_advantages
from strands_art.training.logprobs import (
    RAW,
    Kept,
    kept_logprobs,
    move_raw_rollout_logprobs,
    trainer_logprobs,
)
from strands_art.training.lora import lora_model
from strands_art.training.loss import loss_denominator, merge_stats, policy_loss
from strands_art.training.passes import Passes, stack_rows
from strands_art.training.shared_prefix import SharedPrefixPasses
from strands_art.training.trainer_config import TrainerConfig, config_changes
from strands_art.trajectory import Trajectory

logger = logging.getLogger(__name__)


class NonFiniteGradient(FloatingPointError):
    """The gradient norm of a mini-batch is inf or nan: the optimizer step is refused, the adapter
    keeps its weights (a step already taken in the same outer batch stays; resume from the last
    checkpoint to drop it)."""


def policy_lag(rows: Sequence[BatchRow], step: int) -> dict[str, float]:
    """How far behind the trainer's ``step`` the sampled turns of ``rows`` are (optimizer steps).

    Reads ``row.metadata["policy_versions"]`` (``{str(turn): version}``, recorded by the
    gateway); turns without a version are not counted. Returns ``policy_lag_max``,
    ``policy_lag_mean`` (over turns) and ``mixed_policy_rows`` (rows holding turns of more than
    one version); all 0 without versions.
    """
    lags: list[int] = []
    mixed = 0
    for br in rows:
        versions = (br.row.metadata.get("policy_versions") or {}).values()
        lags.extend(step - int(v) for v in versions)
        mixed += len(set(versions)) > 1
    return {
        "policy_lag_max": float(max(lags, default=0)),
        "policy_lag_mean": sum(lags) / len(lags) if lags else 0.0,
        "mixed_policy_rows": float(mixed),
    }


ROWLESS_ZEROS = (
    "rows", "padding_rows", "tokens", "sampled_tokens", "max_mini_batch_tokens", "min_mini_batch_tokens",
    "micro_batches", "padded_token_fraction", "loss", "grad_norm", "approx_kl", "clip_fraction",
    "tis_capped_fraction", "kl_ref", "logprob_gap", "logprob_abs_gap", "filtered_tokens",
    "zero_advantage_rows_skipped", "tokens_per_s", "actor_update_s", "processed_tokens", "fwd_bwd_s", "optimizer_s",
)  # fmt: skip
"""The keys of a trained update's record that an outer batch without a row has as 0 (its
``rollouts``, rewards and exclusions come from GRPO as in any update)."""


class LocalTrainer:
    """GRPO on LoRA for one machine, sharing its model with the sampling backend.

    Args:
        model: a Hugging Face causal LM (wrapped in a new LoRA adapter) or a peft model.
        tokenizer: its tokenizer (for the backend's stop strings and the pad id).
        config: :class:`TrainerConfig`.
        backend: an existing ``TransformersBackend`` over the same model (default: a new one),
            or, with ``weight_sync``, the ``VLLMBackend`` it syncs.
        weight_sync: a :class:`~strands_art.training.weight_sync.LoRASync` to load each new
            adapter into a vLLM server (see the module docstring).

    Attributes:
        model: the peft model (kept in eval mode: no dropout, so trainer = sampler logprobs).
        backend: the backend sampling from ``model`` (or from its synced adapter).
        lock: held for a whole update (the ``TransformersBackend``'s own lock when shared).
        optimizer: AdamW over the LoRA parameters.
        step: optimizer steps taken so far.
        outer_batch: outer batches completed so far.
        warmup_offset: optimizer steps taken before the first one with a nonzero gradient (the
            warmup counts from there); None until that step.
        trace: None (off), or a dict that each :meth:`update` starts empty and fills with the
            rows as trained (:mod:`strands_art.training.token_trace`, keyed by ``id(BatchRow)``).
    """

    skip_zero_advantage_rows = True
    """Skip the forward/backward passes of rows with advantage 0 (exact: they add 0 to the loss)."""

    def __init__(
        self, model: Any, tokenizer: Any, config: TrainerConfig, backend: Any = None, weight_sync: Any = None
    ) -> None:
        from strands_art.backends.transformers import TransformersBackend

        self.config = config
        self.batching = config.batching()
        self.model = lora_model(model, config)
        self.model.eval()
        self.tokenizer = tokenizer
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        if not self.params:
            raise ValueError("the model has no trainable parameters (LoRA target modules matched nothing?)")
        self.optimizer = torch.optim.AdamW(
            self.params, lr=config.learning_rate, betas=config.adam_betas, weight_decay=config.weight_decay
        )
        self.weight_sync = weight_sync
        if weight_sync is not None:
            from strands_art.training.weight_sync import check_adapter_config, default_adapter_config

            if backend is None:
                backend = weight_sync.backend
            elif backend is not weight_sync.backend:
                raise ValueError("weight_sync must sync the trainer's backend")
            check_adapter_config(default_adapter_config(self.model), weight_sync.max_lora_rank)
            self.lock = threading.Lock()
        else:
            if backend is None:
                backend = TransformersBackend(model=self.model, tokenizer=tokenizer)
            elif getattr(backend, "model", None) is not self.model:
                raise ValueError(
                    "backend.model must be the trainer's peft model (share it, do not copy it); "
                    "a vLLM backend needs weight_sync=LoRASync(...)"
                )
            self.lock = backend.lock
        self.backend = backend
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_token_id = int(pad) if pad is not None else 0
        self.step = 0
        self.outer_batch = 0
        self.warmup_offset: int | None = None
        self._phase_s = {"fwd_bwd_s": 0.0, "optimizer_s": 0.0}
        self.trace: dict[int, dict[str, Any]] | None = None
        if config.share_prefix:
            shared_prefix.check_model(self.model.get_base_model())

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def score(self, ids: Sequence[int], start: int, sampling: Any = RAW) -> list[float]:
        """The trainer's logprobs of ``ids[start:]``, each given the tokens before it (no grad),
        under ``sampling``'s distribution (default: temperature 1, unfiltered). Holds :attr:`lock`.

        Raises:
            ValueError: ``start`` out of ``[1, len(ids))``.
        """
        if not 1 <= start < len(ids):
            raise ValueError(f"start must be in [1, {len(ids)}), got {start}")
        t = torch.tensor([list(ids)], dtype=torch.long, device=self.device)
        with self.lock, torch.no_grad():
            lp = trainer_logprobs(self.model(input_ids=t).logits.float(), t, sampling)
        return [float(x) for x in lp[0, start:]]

    # ------------------------------------------------------------------ one outer batch
    def update(
        self, trajectories: Sequence[Trajectory], on_step: Callable[[int], None] | None = None
    ) -> dict[str, float]:
        """Train on one outer batch of finished trajectories (rewards attached); returns metrics.

        Takes :attr:`lock` for the whole update, then (vLLM) syncs the new adapter. The step count is
        ``num_mini_batches * ppo_epochs`` (or the ``fixed_rows`` plan) whatever the rows. An
        outer batch without a single row (every rollout failed, or every turn was left out of the
        loss) is logged with ``skipped=1``: in ``fixed_steps`` mode it still takes the configured
        steps, as zero-gradient steps (no ``optimizer.step()``; the step count, the policy version,
        ``on_step`` and the weight sync as after any update), so the schedule does not depend on
        what arrived; in ``fixed_rows`` mode zero rows are zero mini-batches, so no step.
        ``on_step(k)`` is called after the ``k``-th optimizer step of this update (1-based), in the
        thread that runs the update, holding :attr:`lock` (the asynchronous loop syncs the adapter
        with :meth:`sync_weights` there and launches the next rollouts). An exception it raises
        propagates with ``k`` steps applied, ``outer_batch`` not advanced and no end-of-update sync
        (the state a :class:`NonFiniteGradient` leaves: resume from the last checkpoint).

        Raises:
            ValueError: from GRPO / batching on inconsistent trajectories (duplicate ids, ...).
            WeightSyncError: the server did not take the new adapter (vLLM backend).
        """
        t0 = time.perf_counter()
        if self.trace is not None:
            self.trace = {}
        adv = compute_advantages(trajectories, self.config.grpo)
        metrics: dict[str, float] = dict(adv.metrics)
        metrics.update(policy_lag(adv.rows, self.step))
        if not adv.rows:
            return self._update_without_rows(metrics, adv, on_step, t0)
        batch = build_batch(adv.rows, self.batching, self.pad_token_id)
        metrics.update(batch.metrics)
        self._phase_s = {"fwd_bwd_s": 0.0, "optimizer_s": 0.0}  # wall seconds of this update's steps (_step)
        cfg = self.config
        hook_s = 0.0  # seconds in on_step (a launch's weight sync): not the actor's
        processed = unshared = 0
        with self.lock, self._checkpointing(), precision.autocast(self.model, cfg.autocast):
            t_actor = time.perf_counter()
            old: dict[int, torch.Tensor] | None = None  # "rollout": the recorded logprobs
            if cfg.old_logprobs == "recompute":
                old = self._recompute(batch.mini_batches)
            elif cfg.old_logprobs == "first-pass":
                old = {}  # filled by each row's first optimizer step of this update (_step)
            stats_all: list[dict[str, float]] = []
            first: list[dict[str, float]] = []
            losses, norms = [], []
            filtered = 0
            skipped = 0
            for k, mb in enumerate(batch.steps()):
                if self._skips_zero_advantage:
                    skipped += sum(1 for br in mb.shards[0] if br.advantage == 0.0 and not br.padding)
                trained = [br for br in mb.shards[0] if self._trains(br)]
                processed += self.passes.forwarded_tokens(trained)
                unshared += sum(br.num_tokens for br in trained)
                loss, stats, n_filtered, norm = self._step(mb, old, applied=k)
                losses.append(loss)
                norms.append(norm)
                stats_all.extend(stats)
                filtered += n_filtered
                if not merge_stats(first)["tokens"]:  # the first step that ran a pass (a tied group's
                    first = stats  # rows are skipped; no gradient of this batch has been applied yet)
                if on_step is not None:
                    t_hook = time.perf_counter()
                    on_step(k + 1)
                    hook_s += time.perf_counter() - t_hook
            actor_s = time.perf_counter() - t_actor - hook_s
        if self.weight_sync is not None:
            metrics["sync_s"] = self.sync_weights()
        merged = merge_stats(stats_all)
        gap = merge_stats(first)
        elapsed = time.perf_counter() - t0
        metrics.update(
            loss=sum(losses) / len(losses),
            grad_norm=sum(norms) / len(norms),
            approx_kl=merged.get("approx_kl", 0.0),
            clip_fraction=merged.get("clip_fraction", 0.0),
            tis_capped_fraction=merged.get("tis_capped_fraction", 0.0),
            kl_ref=merged.get("kl_ref", 0.0),
            logprob_gap=gap.get("logprob_gap", 0.0),
            logprob_abs_gap=gap.get("logprob_abs_gap", 0.0),
            filtered_tokens=filtered,
            zero_advantage_rows_skipped=skipped,
            zero_gradient_steps=sum(1 for n in norms if n == 0.0),  # optimizer.step() skipped (module doc)
            step=self.step,
            train_s=elapsed,
            tokens_per_s=metrics["tokens"] * cfg.ppo_epochs / elapsed if elapsed > 0 else 0.0,
            lr=self.optimizer.param_groups[0]["lr"],
            **self._phase_s,
            actor_update_s=actor_s,
            processed_tokens=processed,
        )
        if cfg.share_prefix:  # what the same steps would have run without sharing
            metrics["processed_tokens_unshared"] = unshared
        self.outer_batch += 1
        return metrics

    def _update_without_rows(
        self, metrics: dict[str, float], adv: Advantages, on_step: Callable[[int], None] | None, t0: float
    ) -> dict[str, float]:
        """An outer batch that left no row (:meth:`update`): the configured steps in ``fixed_steps``
        mode, each a zero-gradient step; none in ``fixed_rows`` mode (zero mini-batches). The
        record has the keys of a trained update, its counts and losses 0 (:data:`ROWLESS_ZEROS`).

        Raises:
            WeightSyncError: the server did not take the adapter (vLLM backend), as :meth:`update`.
            Exception: what ``on_step`` raises, with the steps before it applied (as :meth:`update`).
        """
        b = self.batching
        steps = b.num_mini_batches * b.ppo_epochs if b.mode == "fixed_steps" else 0
        logger.warning(
            "outer batch %d: no row to train (%d rollouts failed, %d left with no token to train: "
            "truncated answers are out of the loss unless --train-truncated); %d zero-gradient step(s)",
            self.outer_batch, len(adv.excluded), adv.metrics["untrained_rollouts"], steps,
        )  # fmt: skip
        with self.lock:
            for k in range(steps):
                self._advance(zero=True)
                if on_step is not None:
                    on_step(k + 1)
        if steps and self.weight_sync is not None:
            metrics["sync_s"] = self.sync_weights()
        metrics.update(dict.fromkeys(ROWLESS_ZEROS, 0))  # the keys of a trained update: records read alike
        metrics.update(
            optimizer_steps=steps, zero_gradient_steps=steps, mini_batches=b.num_mini_batches if steps else 0,
            skipped=1, step=self.step, train_s=time.perf_counter() - t0,
            lr=self.optimizer.param_groups[0]["lr"] if steps else 0.0,  # no step: no rate applied
        )  # fmt: skip
        self.outer_batch += 1
        return metrics

    def sync_weights(self) -> float:
        """Hand the current adapter to the sampler as policy version :attr:`step` (vLLM: loaded
        now; :class:`~strands_art.training.local_sync.CopySync`: staged for its ``publish``);
        returns the seconds it took, 0.0 without a ``weight_sync``.

        Raises:
            WeightSyncError: the server did not take the adapter (vLLM backend).
            ValueError: :attr:`step` not above the version the server has (``LoRASync``: versions grow).
            KeyError: the model's LoRA parameters do not match the sampler copy's (``CopySync``).
        """
        if self.weight_sync is None:
            return 0.0
        self.weight_sync.sync(self.model, self.step)
        return float(self.weight_sync.sync_s)

    @property
    def passes(self) -> Passes:
        """The forward passes of the current configuration (:mod:`strands_art.training.passes`;
        each group's prefix once with ``share_prefix``)."""
        kind = SharedPrefixPasses if self.config.share_prefix else Passes
        return kind(self.model, self.pad_token_id, self.batching.micro_batch_max_tokens, self.kl_sampling)

    def _logprobs(
        self,
        micro: list[BatchRow],
        logits: torch.Tensor,
        t: dict[str, torch.Tensor],
        kept: Kept,
        kl: bool = False,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """(B, T) trainer logprobs of a micro-batch from a pass's logits, and its tensors.

        Rows with raw rollout logprobs get theirs moved to the sampling distribution in
        ``rollout_logprobs`` (:func:`~strands_art.training.logprobs.move_raw_rollout_logprobs`).
        With ``kl``, ``kl_logprobs`` holds the trainer's logprobs on the KL penalty's
        distribution (:attr:`kl_sampling`, with grad).
        """
        ids = t["input_ids"]
        lp = kept_logprobs(logits, ids, kept, self.config.sampling)
        if kl:
            same = self.kl_sampling == self.config.sampling
            t["kl_logprobs"] = lp if same else kept_logprobs(logits, ids, kept, self.kl_sampling)
        move_raw_rollout_logprobs([br.row.metadata for br in micro], t, lp, logits, kept)
        return lp, t

    def _recompute(self, mini_batches: list[MiniBatch]) -> dict[int, torch.Tensor]:
        """Trainer logprobs of every row before the update (no grad), keyed by ``id(BatchRow)``."""
        out: dict[int, torch.Tensor] = {}
        passes = self.passes
        with torch.no_grad():
            for mb in mini_batches:
                for micro, logits, t, kept in passes.passes(mb.shards[0]):
                    lp, _ = self._logprobs(micro, logits, t, kept)
                    for i, br in enumerate(micro):
                        out[id(br)] = lp[i, : br.num_tokens].detach()
        return out

    def _step(
        self, mb: MiniBatch, old: dict[int, torch.Tensor] | None, applied: int = 0
    ) -> tuple[float, list[dict[str, float]], int, float]:
        """One optimizer step over one mini-batch (gradient accumulation over micro-batches);
        ``applied``: steps of this outer batch already taken (named if this one is refused)."""
        cfg = self.config
        self.optimizer.zero_grad(set_to_none=False)
        try:
            denom = loss_denominator(mb, cfg.loss.loss_agg_mode)
        except ValueError:  # only padding rows: zero loss, the step still counts
            denom = 1
        for p in self.params:  # an exact zero gradient where every row is skipped (see below)
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        total, stats, filtered = 0.0, [], 0
        kl = cfg.loss.kl_coef > 0
        t_pass = time.perf_counter()
        for micro, logits, t, kept, ref in self.passes.train_passes(mb.shards[0], self._trains, kl):
            lp, t = self._logprobs(micro, logits, t, kept, kl=ref is not None)
            mask = t["loss_mask"]
            if cfg.old_logprobs == "first-pass":  # this row's first step of the update: ratio 1
                for i, br in enumerate(micro):
                    old.setdefault(id(br), lp[i, : br.num_tokens].detach())
            finite = torch.isfinite(lp)
            filtered += int(((~finite) & (mask > 0)).sum())
            mask = mask * finite
            raw = lp
            lp = torch.where(finite, lp, torch.zeros_like(lp))
            rollout = t["rollout_logprobs"]
            if old is None:
                behaviour = rollout
            else:
                behaviour = stack_rows(micro, old, t["input_ids"])
                behaviour = torch.where(torch.isfinite(behaviour), behaviour, rollout)
            if self.trace is not None:  # the rows as trained (strands-art train stores them)
                token_trace.capture(self.trace, micro, raw, behaviour, rollout, mask, cfg.loss, self.step + 1)
            out = policy_loss(
                lp, behaviour, rollout, t["advantages"], mask, denom, cfg.loss, ref, t.get("kl_logprobs")
            )
            out.loss.backward()  # before the next pass: a shared prefix's gradient then goes on
            total += float(out.loss.detach())
            stats.append(out.stats)
        t_opt = time.perf_counter()
        self._phase_s["fwd_bwd_s"] += t_opt - t_pass
        if cfg.max_grad_norm is not None:
            norm = float(torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm))
        else:
            norm = float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in self.params])))
        if not math.isfinite(norm):
            self.optimizer.zero_grad(set_to_none=False)
            raise NonFiniteGradient(
                f"gradient norm {norm} (loss {total}) at optimizer step {self.step + 1}: this step refused, "
                f"the adapter keeps the weights of step {self.step} ({applied} earlier step(s) of this outer "
                "batch applied; resume from the last checkpoint to drop them); lower the learning rate or "
                "kl_coef, or check the rows' logprobs"
            )
        self._advance(zero=norm == 0.0)  # every row skipped (a tied group, padding): no gradient at all
        self._phase_s["optimizer_s"] += time.perf_counter() - t_opt
        return total, stats, filtered, norm

    def _advance(self, zero: bool) -> None:
        """The end of one optimizer step: the learning rate set, ``optimizer.step()`` unless the
        gradient is exactly ``zero`` (module doc), the step count and the policy version advanced."""
        cfg = self.config
        if self.warmup_offset is None and not zero:  # recorded with warmup off too (W may change on resume)
            self.warmup_offset = self.step
        waiting = cfg.lr_warmup_steps > 0 and self.warmup_offset is None
        for group in self.optimizer.param_groups:  # a function of the step counts: resume-safe
            group["lr"] = 0.0 if waiting else self.learning_rate_at(self.step + 1 - (self.warmup_offset or 0))
        if not zero:  # a zero gradient steps nothing: AdamW's momentum would move every weight (module doc)
            self.optimizer.step()
        self.step += 1
        if self.weight_sync is None:  # the shared model now holds policy version `step`
            self.backend.policy_version = self.step

    def _trains(self, br: BatchRow) -> bool:
        """Whether ``br``'s passes run. A row with advantage 0 (a group whose rewards are all
        equal, a padding row) adds exactly 0 to the loss and its gradient without a KL term (D is
        fixed): its forward and backward passes are skipped, and its ratio statistics are not
        reported."""
        return br.advantage != 0.0 if self._skips_zero_advantage else not br.padding

    @contextlib.contextmanager
    def _checkpointing(self) -> Iterator[None]:
        """With ``gradient_checkpointing``: activation checkpointing on and the model in train mode
        (transformers checkpoints only in train mode; LoRA dropout is 0 and the supported models
        have no dropout, so the math is the eval-mode math) for the update, off and eval after."""
        if not self.config.gradient_checkpointing:
            yield
            return
        self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.model.train()
        try:
            yield
        finally:
            self.model.eval()
            self.model.gradient_checkpointing_disable()

    @property
    def _skips_zero_advantage(self) -> bool:
        return self.skip_zero_advantage_rows and self.config.loss.kl_coef == 0

    def learning_rate_at(self, step: int) -> float:
        """The learning rate of the ``step``-th optimizer step (1-based) counted from the first one
        with a nonzero gradient: ``learning_rate * min(1, step / W)`` with ``W = lr_warmup_steps``
        (constant when ``W`` is 0)."""
        cfg = self.config
        if cfg.lr_warmup_steps <= 0:
            return cfg.learning_rate
        return cfg.learning_rate * min(1.0, step / cfg.lr_warmup_steps)

    @property
    def kl_sampling(self) -> SamplingParams:
        """The distribution the KL penalty compares: the rollouts' temperature, no top-k / top-p.

        Under the sampling filters the reference would give ``-inf`` to every token outside the
        base model's top-k / top-p set, i.e. to exactly the tokens the policy has drifted to; the
        clamped KL term then has no gradient there. Unfiltered, every token has a finite logprob
        under both policies (as in verl, whose logprobs are temperature-scaled only).
        """
        return dataclasses.replace(self.config.sampling, top_k=0, top_p=1.0)

    # ------------------------------------------------------------------ checkpoints
    def save(self, run_dir: str | Path, extra: dict[str, Any] | None = None) -> Path:
        """Checkpoint adapter + optimizer + counters + RNG under ``run_dir/checkpoints``."""
        state = {
            "outer_batch": self.outer_batch,
            "step": self.step,
            "warmup_offset": self.warmup_offset,
            "config": self.config.to_dict(),
        }
        state.update(extra or {})
        with self.lock:
            return checkpoint.save_checkpoint(
                run_dir, self.model, self.optimizer, state, keep=self.config.keep_checkpoints
            )

    def resume(self, run_dir: str | Path) -> dict[str, Any] | None:
        """Load the newest checkpoint of ``run_dir`` if there is one; returns its state or None."""
        path = checkpoint.latest_checkpoint(run_dir)
        if path is None:
            return None
        with self.lock:
            state = checkpoint.load_checkpoint(path, self.model, self.optimizer)
            self.outer_batch = int(state["outer_batch"])
            self.step = int(state["step"])
            # checkpoints from before warmup_offset existed counted warmup from step 0
            offset = state.get("warmup_offset", 0 if self.step else None)
            self.warmup_offset = None if offset is None else int(offset)
            if self.weight_sync is None:
                self.backend.policy_version = self.step
        if self.weight_sync is not None and self.step > 0:
            self.weight_sync.sync(self.model, self.step)
        logger.info("resumed from %s: outer batch %d, step %d", path, self.outer_batch, self.step)
        changed = config_changes(state.get("config"), self.config.to_dict())
        if changed:
            logger.warning("resumed %s with a changed configuration: %s", path, "; ".join(changed))
        return state
