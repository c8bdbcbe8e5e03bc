"""Prefix sharing (TrainerConfig.share_prefix) on a real model: SmolLM2-135M-Instruct in float32,
real chat-template prompts. The loss, the metrics and the gradient of every LoRA parameter equal
the unshared trainer's to 1e-5 on groups of G rows, rows that fork after a shared sampled turn,
linear rows of several turns, groups of one row, a KL penalty, top-k / top-p, recomputed old
logprobs, raw-mode rollout logprobs and micro-batch budgets that cut a group into chunks; plus
property tests of the prefix grouping."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from strands_art.backends.base import SamplingParams
from strands_art.registry import load_causal_lm, load_tokenizer
from strands_art.training.batching import BatchRow, micro_batches
from strands_art.training.local import LocalTrainer
from strands_art.training.loss import LossConfig
from strands_art.training.shared_prefix import check_model, common_prefix_len, prefix_units
from strands_art.training.trainer_config import TrainerConfig
from strands_art.trajectory import Row, Trajectory

SYSTEM = "You are a careful assistant. Answer with one short sentence, then stop."
TASKS = ["What is the capital of France?", "Name a prime number above ten."]
ANSWERS = [
    "Paris is the capital.",
    "The capital of France is Paris.",
    "It is Paris, on the Seine.",
    "Lyon.",
    "Eleven is prime.",
    "Thirteen.",
    "17 is a prime number above ten.",
]
TOOL = "\n<tool_response>\nlookup: ok\n</tool_response>\n"


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("smollm2")


@pytest.fixture(scope="module")
def trainer(tok):
    """One trainer whose optimizer never steps: each update leaves the step's gradient in
    ``p.grad`` and the weights unchanged, so the shared and unshared passes see the same model."""
    cfg = TrainerConfig(
        prompt_batch_size=4, ppo_mini_batch_size=4, rollouts_per_prompt=4, lora_rank=4, lora_alpha=8,
        max_grad_norm=None, checkpoint_every=0, micro_batch_max_tokens=4096,
    )  # fmt: skip
    t = LocalTrainer(load_causal_lm("smollm2", device="cpu", dtype=torch.float32), tok, cfg)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():  # a nonzero lora_B: lora_A gets gradients, the reference differs
        for n, p in t.model.named_parameters():
            if "lora_B" in n:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    t.optimizer.step = lambda *a, **k: None
    t.fixture_config = cfg  # each case starts from it (gradients)
    return t


def ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def prompt(tok, task: str) -> list[int]:
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]
    return list(tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=False))


def row(segments: list[tuple[list[int], int]], rid: str, gid: str | None, **metadata) -> Row:
    """A row from (tokens, mask) segments; sampled tokens get logprobs near a real model's
    (-0.5 - 0.1 * (position % 7)): ratios away from 1 so clipping and TIS weights take part."""
    toks = [t for seg, _ in segments for t in seg]
    mask = [m for seg, m in segments for _ in seg]
    lps = [(-0.5 - 0.1 * (i % 7)) if m else 0.0 for i, m in enumerate(mask)]
    return Row(toks, mask, lps, rid, gid, metadata=dict(metadata))


def end(tok) -> list[int]:
    return ids(tok, "<|im_end|>\n")


def group_rows(tok, g: int, task: int, answers: list[int]) -> list[Trajectory]:
    """``g`` single-turn rollouts of one task (same prompt, different sampled answers)."""
    p = prompt(tok, TASKS[task])
    return [
        Trajectory(
            f"t{task}-r{i}", f"t{task}", rows=[row([(p, 0), (ids(tok, ANSWERS[a]) + end(tok), 1)], f"t{task}-r{i}", f"t{task}")],
            reward=float(i % 2) + 0.25 * i,
        )
        for i, a in zip(range(g), answers, strict=True)
    ]  # fmt: skip


def fork_rollouts(tok) -> list[Trajectory]:
    """Group "f": rollout f-r0 has two rows that share the prompt *and* its sampled first turn
    (mask 1 in both: the sampled tokens lie inside the common prefix) and differ after it;
    rollout f-r1 answers differently from its first token (the group's prefix is the prompt)."""
    p = prompt(tok, TASKS[0])
    t1 = ids(tok, ANSWERS[1])
    a = row([(p, 0), (t1, 1), (ids(tok, " Yes, Paris."), 1)], "f-r0", "f")
    b = row([(p, 0), (t1, 1), (ids(tok, TOOL), 0), (ids(tok, "Still Paris."), 1)], "f-r0", "f")
    c = row([(p, 0), (ids(tok, ANSWERS[3]) + end(tok), 1)], "f-r1", "f")
    return [Trajectory("f-r0", "f", rows=[a, b], reward=1.0), Trajectory("f-r1", "f", rows=[c], reward=0.0)]


def linear_rollouts(tok, g: int = 3) -> list[Trajectory]:
    """Group "l": one linear row per rollout spanning 1-3 turns (several sampled segments)."""
    p = prompt(tok, TASKS[1])
    out = []
    for i in range(g):
        segs: list[tuple[list[int], int]] = [(p, 0)]
        for k in range(i + 1):
            segs += [(ids(tok, ANSWERS[4 + (i + k) % 3]) + end(tok), 1), (ids(tok, TOOL), 0)]
        segs += [(ids(tok, "<|im_start|>assistant\nDone."), 1)]
        raw = {"logprobs_mode": "raw"} if i == 1 else {}  # recorded on the raw distribution
        out.append(Trajectory(f"l-r{i}", "l", rows=[row(segs, f"l-r{i}", "l", **raw)], reward=float(i)))
    return out


def single(tok) -> list[Trajectory]:
    """Group "s": a group of one rollout (nothing to share; advantage 0 without a KL term)."""
    r = row([(prompt(tok, TASKS[1]), 0), (ids(tok, ANSWERS[5]) + end(tok), 1)], "s-r0", "s")
    return [Trajectory("s-r0", "s", rows=[r], reward=1.0)]


def gradients(trainer, trajs, **cfg) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
    trainer.config = trainer.fixture_config.replace(**cfg)  # not the previous case's settings
    trainer.batching = trainer.config.batching()
    m = trainer.update(trajs)
    return m, {n: p.grad.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}


CASES = {
    "groups": dict(),
    "kl_topk_topp_chunks": dict(
        loss=LossConfig(kl_coef=0.1),
        sampling=SamplingParams(temperature=0.8, top_k=40, top_p=0.9, max_new_tokens=32),
        micro_batch_max_tokens=48,
    ),
    "first_pass_tis_chunks": dict(
        old_logprobs="first-pass",
        loss=LossConfig(tis_cap=1.5),
        micro_batch_max_tokens=30,
    ),
    "recompute_tis_chunks": dict(
        old_logprobs="recompute",
        loss=LossConfig(tis_cap=1.5),
        micro_batch_max_tokens=30,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_shared_prefix_equals_unshared(tok, trainer, case):
    trajs = group_rows(tok, 4, 0, [0, 1, 2, 3]) + fork_rollouts(tok) + linear_rollouts(tok) + single(tok)
    m0, g0 = gradients(trainer, trajs, share_prefix=False, **CASES[case])
    m1, g1 = gradients(trainer, trajs, share_prefix=True, **CASES[case])
    assert m0["optimizer_steps"] == m1["optimizer_steps"] == 1
    assert m0["loss"] != 0.0 and math.isfinite(m0["loss"])
    assert m1["loss"] == pytest.approx(m0["loss"], abs=1e-5)
    for key in ("clip_fraction", "approx_kl", "kl_ref", "logprob_gap", "tis_capped_fraction"):
        assert m1[key] == pytest.approx(m0[key], abs=1e-5), key
    assert m1["filtered_tokens"] == m0["filtered_tokens"]
    assert m1["zero_advantage_rows_skipped"] == m0["zero_advantage_rows_skipped"]
    scale = max(float(g.abs().max()) for g in g0.values())
    assert scale > 1e-3  # real gradients, lora_A and lora_B alike
    assert all(float(g0[n].abs().max()) > 0 for n in g0 if "lora_A" in n)
    worst = max(float((g1[n] - g0[n]).abs().max()) for n in g0)
    assert worst <= 1e-5, f"max |grad diff| {worst:.3g} (largest gradient {scale:.3g})"
    if CASES[case].get("loss", LossConfig()).kl_coef > 0:
        assert m0["kl_ref"] > 0 and m0["zero_advantage_rows_skipped"] == 0


def test_prefix_units_of_real_rows(tok):
    trajs = group_rows(tok, 4, 0, [0, 1, 2, 3]) + fork_rollouts(tok) + linear_rollouts(tok) + single(tok)
    rows = [BatchRow(r, 1.0) for t in trajs for r in t.rows]
    units, plain = prefix_units(rows)
    by_group = {u.rows[0].row.group_id: u for u in units}
    assert sorted(by_group) == ["f", "l", "t0"] and [br.row.group_id for br in plain] == ["s"]
    p0 = len(prompt(tok, TASKS[0]))
    assert by_group["t0"].prefix_len == p0 + common_prefix_len([ids(tok, a) for a in ANSWERS[:4]])
    assert by_group["f"].prefix_len == p0  # f-r1 differs from its first sampled token
    assert by_group["l"].prefix_len >= len(prompt(tok, TASKS[1]))
    # the chunked cases really cut units into several chunks (the leaves' gradients accumulate)
    for budget in (48, 30):
        assert len(micro_batches(by_group["l"].rows, budget, shared=by_group["l"].prefix_len)) >= 2
    # the two rows of f-r0 alone share the prompt and their sampled first turn
    a, b = by_group["f"].rows[:2]
    ((fork,), _) = prefix_units([a, b])
    assert fork.prefix_len > p0 and any(a.row.loss_mask[: fork.prefix_len])


def test_check_model_refuses_sliding_window():
    class Cfg:
        layer_types = ["full_attention", "sliding_attention"]

    class M:
        config = Cfg()

    with pytest.raises(ValueError, match="sliding"):
        check_model(M())
    M.config = type("C", (), {"use_sliding_window": False, "sliding_window": 4096})()
    check_model(M())
    with pytest.raises(ValueError, match="share_prefix must be a bool"):
        TrainerConfig(share_prefix=1)


# ---------------------------------------------------------------- properties of the grouping

tokens = st.lists(st.integers(0, 3), min_size=1, max_size=8)


@st.composite
def batch_rows(draw):
    rows = []
    for g in range(draw(st.integers(1, 4))):
        stem = draw(tokens)
        for r in range(draw(st.integers(1, 4))):
            toks = stem[: draw(st.integers(0, len(stem)))] + draw(tokens)
            gid = None if draw(st.booleans()) and g == 0 else f"g{g}"
            rows.append(BatchRow(Row(toks, [1] * len(toks), [0.0] * len(toks), f"g{g}-r{r}", gid), 1.0))
    return rows


@settings(max_examples=200, deadline=None)
@given(batch_rows())
def test_prefix_units_cover_every_row_once_with_a_true_common_prefix(rows):
    units, plain = prefix_units(rows)
    seen = [id(br) for u in units for br in u.rows] + [id(br) for br in plain]
    assert sorted(seen) == sorted(id(br) for br in rows)
    for u in units:
        seqs = [br.row.input_ids for br in u.rows]
        assert len(u.rows) >= 2 and len({br.row.group_id or br.row.rollout_id for br in u.rows}) == 1
        assert 1 <= u.prefix_len <= common_prefix_len(seqs)
        assert all(len(s) > u.prefix_len for s in seqs)
        assert len({tuple(s[: u.prefix_len]) for s in seqs}) == 1
        # the prefix is the longest possible: one more token is no longer common or leaves a row empty
        p = u.prefix_len
        assert any(len(s) == p + 1 for s in seqs) or len({s[p] for s in seqs}) > 1


@given(st.lists(tokens, min_size=1, max_size=5))
def test_common_prefix_len_is_the_longest_common_prefix(seqs):
    n = common_prefix_len(seqs)
    assert all(s[:n] == seqs[0][:n] for s in seqs)
    assert n == min(map(len, seqs)) or len({s[n] for s in seqs}) > 1


@given(st.lists(st.integers(2, 40), min_size=1, max_size=12), st.integers(0, 1), st.integers(4, 64))
def test_micro_batches_budget_without_the_shared_prefix(lengths, shared, budget):
    rows = [BatchRow(Row([0] * n, [0] * n, [0.0] * n, f"r{i}")) for i, n in enumerate(lengths)]
    cut = micro_batches(rows, budget, shared=shared)
    assert sorted(id(r) for m in cut for r in m) == sorted(id(r) for r in rows)
    for m in cut:
        assert len(m) == 1 or len(m) * (m[0].num_tokens - shared) <= budget


@pytest.fixture(scope="module")
def counted_model():
    """A tiny Llama whose forward calls count the tokens they run (the positions of ``input_ids``
    that the attention mask keeps; a call without a mask runs all of them)."""
    from support.fakes import tiny_llama

    model = tiny_llama()
    model.ran = 0

    def count(module, args, kwargs):
        ids, mask = kwargs["input_ids"], kwargs.get("attention_mask")
        model.ran += int(ids.numel() if mask is None else mask[:, -ids.shape[1] :].sum())

    model.register_forward_pre_hook(count, with_kwargs=True)
    return model


@settings(max_examples=20, deadline=None)
@given(batch_rows(), st.integers(4, 64))
def test_forwarded_tokens_are_the_tokens_the_passes_run(counted_model, rows, budget):
    """``processed_tokens`` of an update: what each pass kind says it runs is what the model ran,
    prefix-shared (each group's prefix once) or not (every row whole)."""
    from strands_art.training.passes import Passes
    from strands_art.training.shared_prefix import SharedPrefixPasses

    for kind in (Passes, SharedPrefixPasses):
        passes = kind(counted_model, 0, budget, SamplingParams())
        counted_model.ran = 0
        with torch.no_grad():
            for _ in passes.passes(rows):
                pass
        assert counted_model.ran == passes.forwarded_tokens(rows)
