"""``--autocast bf16`` (:mod:`strands_art.training.precision`): the optimizer steps' passes run in
bfloat16 where autocast puts them, the vocabulary projection and everything the optimizer holds
stay float32, the update is the float32 one up to bfloat16 rounding, and the flag travels like
every other setting (checked before anything loads, ``train.json``, refused on ``--resume`` if
changed, refused with ``--trainer verl``)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shlex

import pytest
import torch
from support.fakes import TRAIN_TRUNCATED, LengthTask, tiny_llama

from strands_art.backends.base import SamplingParams
from strands_art.cli import build_parser, main
from strands_art.gateway import RolloutGateway
from strands_art.registry import load_tokenizer
from strands_art.training import loop, precision
from strands_art.training.local import LocalTrainer
from strands_art.training.rollouts import chat_rollout
from strands_art.training.settings import TrainSettings
from strands_art.training.train_cli import _given
from strands_art.training.trainer_config import TrainerConfig
from strands_art.validation import UsageError

SAMPLING = SamplingParams(temperature=0.8, max_new_tokens=6)


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("smollm2")


def trainer(tok, autocast: str) -> LocalTrainer:
    torch.manual_seed(0)
    config = TrainerConfig(
        prompt_batch_size=2, rollouts_per_prompt=3, ppo_mini_batch_size=2, ppo_epochs=1,
        learning_rate=5e-2, lora_rank=4, lora_alpha=8, sampling=SAMPLING, micro_batch_max_tokens=200,
        old_logprobs="recompute", autocast=autocast, grpo=TRAIN_TRUNCATED,  # 6-token answers: truncated
    )  # fmt: skip
    return LocalTrainer(tiny_llama(hidden_size=64), tok, config)


@pytest.fixture(scope="module")
def trajectories(tok):
    t = trainer(tok, "off")
    gateway = RolloutGateway(tok, t.backend)
    tasks = loop.sample_tasks([LengthTask(f"t{i}") for i in range(4)], 2, 0, 0)
    trajs = asyncio.run(
        loop.collect_rollouts(
            gateway, tasks, chat_rollout, SAMPLING, 3, seed=0, outer_batch=0, progress=False
        )
    )
    assert len({tr.reward for tr in trajs}) > 1  # advantages that are not all 0: the passes run
    return trajs


def dtypes_seen(t: LocalTrainer, trajs) -> tuple[dict, set[torch.dtype], set[torch.dtype], torch.Tensor]:
    """The update's metrics, the dtypes the vocabulary projection returned and the dtypes a
    decoder projection (layer 0's q_proj base layer) returned during it, and the LoRA gradient of
    its (one) optimizer step, flattened."""
    head, proj, grads = set(), set(), {}
    base = t.model.get_base_model()
    q = base.model.layers[0].self_attn.q_proj.base_layer
    hooks = [
        base.get_output_embeddings().register_forward_hook(lambda m, i, o: head.add(o.dtype)),
        q.register_forward_hook(lambda m, i, o: proj.add(o.dtype)),
    ]
    for n, p in t.model.named_parameters():
        if p.requires_grad:  # summed over the micro-batches' backward passes
            hooks.append(p.register_hook(lambda g, n=n: grads.__setitem__(n, grads.get(n, 0) + g)))
    try:
        metrics = t.update(trajs)
    finally:
        for h in hooks:
            h.remove()
    return metrics, head, proj, torch.cat([grads[n].flatten() for n in sorted(grads)])


def lora(t: LocalTrainer) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in t.model.named_parameters() if p.requires_grad}


def test_bf16_autocast_runs_the_decoder_in_bf16_and_the_logits_in_float32(tok, trajectories):
    before = lora(trainer(tok, "off"))
    m32, head32, proj32, g32 = dtypes_seen(off := trainer(tok, "off"), trajectories)
    m16, head16, proj16, g16 = dtypes_seen(bf := trainer(tok, "bf16"), trajectories)
    assert proj32 == {torch.float32} and head32 == {torch.float32}
    assert proj16 == {torch.bfloat16}  # autocast was on for the passes
    assert head16 == {torch.float32}  # ... but not for the vocabulary projection
    # what the optimizer holds stays float32
    assert {p.dtype for p in bf.params} == {torch.float32}
    assert {s.dtype for st in bf.optimizer.state.values() for s in st.values() if s.dim()} == {torch.float32}
    # the same update up to bfloat16 rounding: loss, gradient norm and the step's direction (one
    # optimizer step; the PPO ratio against each trainer's own recomputed logprobs: 1)
    assert m16["tokens"] == m32["tokens"] and m16["optimizer_steps"] == m32["optimizer_steps"] == 1
    a, b = lora(off), lora(bf)
    step32 = torch.cat([(a[k] - before[k]).flatten() for k in a])
    step16 = torch.cat([(b[k] - before[k]).flatten() for k in a])
    # (the tiny model's peaked logits put ~0.12 nats of bfloat16 rounding on its logprobs, 4x what
    # Qwen2.5-Coder-0.5B shows: bench/update_memory.py measures the real model; the TIS weight
    # exp(old - recorded) carries that gap into the gradient)
    assert torch.nn.functional.cosine_similarity(g32, g16, dim=0) > 0.85
    assert g16.norm() == pytest.approx(float(g32.norm()), rel=0.3)
    assert m16["grad_norm"] == pytest.approx(m32["grad_norm"], rel=0.3)
    assert step32.norm() > 0 and torch.nn.functional.cosine_similarity(step32, step16, dim=0) > 0.7
    assert not torch.equal(g32, g16)  # bf16 rounding did change something: the passes ran in it
    # the gap to the sampler's float32 logprobs is reported, and bf16's is the larger
    assert 0 <= m32["logprob_abs_gap"] < 1e-4 < m16["logprob_abs_gap"] < 0.5
    # afterwards the model computes as before: the projection's own forward is back
    assert "forward" not in vars(bf.model.get_base_model().get_output_embeddings())
    assert not torch.is_autocast_enabled("cpu")


def test_autocast_choices_are_checked():
    with pytest.raises(ValueError, match="autocast must be one of off, bf16, got 'fp16'"):
        TrainerConfig(autocast="fp16")
    with pytest.raises(ValueError, match="needs a linear output projection, got Embedding"):

        class Odd(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.e = torch.nn.Embedding(3, 2)

            def get_output_embeddings(self):
                return self.e

        with precision.autocast(Odd(), "bf16"):
            pass


def settings_of(argv: list[str]) -> TrainSettings:
    args = build_parser().parse_args(["train", *argv])
    return TrainSettings.resolve(args.env, args.run_dir, _given(args))


def test_the_autocast_flag_travels_like_every_setting(tmp_path, capsys):
    run = tmp_path / "run"
    base = ["--env", "capitals", "--run-dir", str(run)]
    on, off = settings_of([*base, "--autocast", "bf16"]), settings_of(base)
    assert (on.autocast, on.trainer_config().autocast) == ("bf16", "bf16")
    assert (off.autocast, off.trainer_config().autocast) == ("off", "off")
    assert dataclasses.replace(on, autocast="off") == off
    assert settings_of(shlex.split(on.command())[2:]) == on
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", *base, "--autocast", "fp16"])
    capsys.readouterr()
    with pytest.raises(UsageError, match="--autocast must be one of off, bf16, got 'fp8'"):
        dataclasses.replace(on, autocast="fp8").check()
    with pytest.raises(UsageError, match="--autocast: the embedded trainer's precision"):
        settings_of([*base, "--trainer", "verl", "--autocast", "bf16"])
    # train.json: kept; one written before the setting existed means off
    run.mkdir()
    on.save(run)
    assert TrainSettings.load(run) == on
    old = on.to_dict()
    del old["autocast"]
    (run / "train.json").write_text(json.dumps(old))
    assert TrainSettings.load(run) == off
    # --resume refuses to switch it, and leaves train.json as it was
    saved = (run / "train.json").read_text()
    assert main(["train", "--resume", "--run-dir", str(run), "--autocast", "bf16"]) == 2
    assert "--autocast 'bf16' (the run has 'off')" in capsys.readouterr().err
    assert (run / "train.json").read_text() == saved


def test_the_sampler_dtype_flag_travels_like_every_setting_and_only_where_train_starts_the_server(
    tmp_path, capsys
):
    run = tmp_path / "run"
    base = ["--env", "capitals", "--run-dir", str(run), "--backend", "vllm"]
    bf16, f32 = settings_of([*base, "--sampler-dtype", "bfloat16"]), settings_of(base)
    assert (bf16.sampler_dtype, f32.sampler_dtype) == ("bfloat16", "float32")
    assert dataclasses.replace(bf16, sampler_dtype="float32") == f32
    assert settings_of(shlex.split(bf16.command())[2:]) == bf16
    with pytest.raises(UsageError, match="--sampler-dtype must be one of float32, bfloat16, got 'fp16'"):
        dataclasses.replace(bf16, sampler_dtype="fp16").check()
    # nothing to set where train starts no vLLM server
    where = ["--env", "capitals", "--run-dir", str(run), "--sampler-dtype", "bfloat16"]
    with pytest.raises(
        UsageError,
        match=r"^--sampler-dtype bfloat16 .* needs --backend vllm \(this run: --backend transformers\)$",
    ):
        settings_of(where)
    with pytest.raises(UsageError, match=r"^--sampler-dtype bfloat16 .* --vllm-url names one you run"):
        settings_of([*where, "--vllm-url", "http://127.0.0.1:9"])
    with pytest.raises(UsageError, match="^--sampler-dtype bfloat16: .* the verl launch samples"):
        settings_of([*base, "--trainer", "verl", "--sampler-dtype", "bfloat16"])
    with pytest.raises(UsageError, match="the verl launch samples"):  # a hand-edited train.json too
        dataclasses.replace(bf16, trainer="verl", max_staleness=0).check()
    assert settings_of(
        ["--env", "capitals", "--run-dir", str(run), "--sampler-dtype", "float32"]
    ).backend == ("transformers")  # the default spelled out is no change
    # train.json: kept; one written before the setting existed means float32
    run.mkdir()
    bf16.save(run)
    assert TrainSettings.load(run) == bf16
    old = bf16.to_dict()
    del old["sampler_dtype"]
    (run / "train.json").write_text(json.dumps(old))
    assert TrainSettings.load(run) == f32
    # a hand-edited value nobody typed: the error says which file holds it
    (run / "train.json").write_text(json.dumps({**old, "sampler_dtype": "fp16"}))
    with pytest.raises(
        UsageError, match=r"train\.json: --sampler-dtype must be one of float32, bfloat16, got 'fp16'"
    ):
        TrainSettings.load(run)
    (run / "train.json").write_text(json.dumps(old))
    saved = (run / "train.json").read_text()
    assert main(["train", "--resume", "--run-dir", str(run), "--sampler-dtype", "bfloat16"]) == 2
    assert "--sampler-dtype 'bfloat16' (the run has 'float32')" in capsys.readouterr().err
    assert (run / "train.json").read_text() == saved
