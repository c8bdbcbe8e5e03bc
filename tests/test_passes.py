"""The embedded trainer's passes project the vocabulary only where the loss reads it
(``Passes.logits``): on SmolLM2-135M-Instruct in float32 with a LoRA adapter, multi-turn rows
whose sampled turns are separated by tool results get logits at exactly the positions that
predict a sampled token, and their logprobs and gradients equal those of the full-sequence
logits at every sampled token (1e-5)."""

from __future__ import annotations

import pytest
import torch
from peft import LoraConfig, get_peft_model

from strands_art.backends.base import SamplingParams
from strands_art.registry import load_causal_lm, load_tokenizer
from strands_art.training.batching import BatchRow, padding_row
from strands_art.training.logprobs import kept_logprobs, trainer_logprobs
from strands_art.training.passes import Passes, sampled_positions
from strands_art.training.shared_prefix import SharedPrefixPasses, prefix_units
from strands_art.trajectory import Row

SAMPLING = SamplingParams(temperature=0.7)
FILTERED = SamplingParams(temperature=0.7, top_k=20, top_p=0.9)  # -inf where the filters remove a token


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("smollm2")


@pytest.fixture(scope="module")
def model():
    base = load_causal_lm("smollm2", device="cpu", dtype=torch.float32)
    m = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():  # a nonzero lora_B: the adapter changes the logits
        for n, p in m.named_parameters():
            if "lora_B" in n:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    return m


def multi_turn(tok, turns: int, rid: str) -> BatchRow:
    """A prompt, then ``turns`` x (sampled answer, tool result): mask 1 only on the answers."""
    ids, mask = [], []

    def add(text: str, m: int) -> None:
        toks = tok(text, add_special_tokens=False)["input_ids"]
        ids.extend(toks)
        mask.extend([m] * len(toks))

    add(
        "<|im_start|>system\nYou look things up.<|im_end|>\n<|im_start|>user\nFind the capital.<|im_end|>\n",
        0,
    )
    for k in range(turns):
        add(f"<|im_start|>assistant\nlookup(country={k})<|im_end|>\n", 1)
        add(
            f"<|im_start|>user\n<tool_response>\nresult {k}: Paris, a long tool output\n</tool_response><|im_end|>\n",
            0,
        )
    lps = [-0.4 if m else 0.0 for m in mask]
    return BatchRow(Row(ids, mask, lps, rid, "g"), advantage=1.0)


def test_logits_cover_only_the_positions_before_sampled_tokens(tok, model):
    rows = [multi_turn(tok, 3, "a"), multi_turn(tok, 2, "b")]
    passes = Passes(model, tok.pad_token_id, 4096, SAMPLING)
    logits, t, kept = passes.logits(rows)
    mask = t["loss_mask"]
    expected = sorted({p - 1 for b in range(len(rows)) for p in range(mask.shape[1]) if mask[b, p] > 0})
    assert kept.tolist() == expected
    assert logits.shape == (2, len(expected), model.config.vocab_size)
    first = int(mask.sum(dim=0).nonzero()[0])
    assert len(expected) < mask.shape[1] - first  # the tool results in between are not projected


def test_logprobs_and_gradients_equal_the_full_logits_at_sampled_tokens(tok, model):
    rows = [multi_turn(tok, 3, "a"), multi_turn(tok, 1, "b")]
    passes = Passes(model, tok.pad_token_id, 4096, SAMPLING)
    params = [p for p in model.parameters() if p.requires_grad]

    def loss_and_grads(full: bool) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        model.zero_grad()
        if full:
            _, t, _ = passes.logits(rows)
            out = model(input_ids=t["input_ids"], attention_mask=t["attention_mask"]).logits
            lp = trainer_logprobs(out, t["input_ids"], SAMPLING)
        else:
            out, t, kept = passes.logits(rows)
            lp = kept_logprobs(out, t["input_ids"], kept, SAMPLING)
        mask = t["loss_mask"]
        loss = (lp * mask).sum() / mask.sum()
        loss.backward()
        return lp.detach(), mask, [p.grad.detach().clone() for p in params]

    full_lp, mask, full_grads = loss_and_grads(full=True)
    kept_lp, _, kept_grads = loss_and_grads(full=False)
    on = mask > 0
    assert torch.isfinite(full_lp[on]).all()
    torch.testing.assert_close(kept_lp[on], full_lp[on], atol=1e-5, rtol=0)
    read = torch.zeros(mask.shape[1], dtype=torch.bool)
    read[on.any(dim=0)] = True  # columns some row samples (a union: one index for the micro-batch)
    assert (kept_lp[:, ~read] == 0).all() and read.sum() < mask.shape[1] / 2
    assert max(float(g.abs().max()) for g in full_grads) > 0
    for a, b in zip(kept_grads, full_grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    with torch.no_grad():  # with top-k / top-p: the same -inf tokens, the same finite values
        out, t, kept = passes.logits(rows)
        filtered = kept_logprobs(out, t["input_ids"], kept, FILTERED)[on]
        full = trainer_logprobs(model(input_ids=t["input_ids"]).logits, t["input_ids"], FILTERED)[on]
    assert (~torch.isfinite(full)).any() and torch.isfinite(full).any()
    torch.testing.assert_close(filtered, full, atol=1e-5, rtol=0)


def test_a_micro_batch_with_nothing_sampled_gives_zero_logprobs(tok, model):
    assert sampled_positions(torch.zeros(2, 5)).numel() == 0
    passes = Passes(model, tok.pad_token_id, 4096, SAMPLING)
    for rows in ([padding_row(0, tok.pad_token_id)], [padding_row(0, tok.pad_token_id), padding_row(1, 0)]):
        with torch.no_grad():
            logits, t, kept = passes.logits(rows)
            lp = kept_logprobs(logits, t["input_ids"], kept, SAMPLING)
        assert lp.shape == t["input_ids"].shape and (lp == 0).all()
    context_only = BatchRow(Row([1, 2, 3, 4], [0, 0, 0, 0], [0.0] * 4, "c", "g"))
    with torch.no_grad():
        logits, t, kept = passes.logits([context_only])
        lp = kept_logprobs(logits, t["input_ids"], kept, SAMPLING)
    assert logits.shape[1] == 1 and lp.shape == (1, 4) and (lp == 0).all()


def test_shared_prefix_passes_project_the_same_positions(tok, model):
    """A group of multi-turn rows through the prefix-shared passes: logits only at the positions
    before sampled tokens (the prefix's last one included), the same logprobs as unshared."""
    rows = [multi_turn(tok, 3, "a"), multi_turn(tok, 2, "b")]
    rows[1].row.input_ids[-3] = rows[1].row.input_ids[-3] + 1  # the rows differ near their ends
    [unit], rest = prefix_units(rows)
    assert not rest and unit.prefix_len > 40  # prompt and two turns, run once
    plain = Passes(model, tok.pad_token_id, 4096, SAMPLING)
    shared = SharedPrefixPasses(model, tok.pad_token_id, 4096, SAMPLING)
    with torch.no_grad():
        [(micro, logits, t, kept)] = list(shared.passes(rows))
        assert sorted(br.row.rollout_id for br in micro) == ["a", "b"]  # one unit, one chunk
        mask = t["loss_mask"]
        assert set(sampled_positions(mask).tolist()) <= set(kept.tolist())
        assert logits.shape[1] == len(kept) <= len(sampled_positions(mask)) + 1
        lp = kept_logprobs(logits, t["input_ids"], kept, SAMPLING)
        p_logits, p_t, p_kept = plain.logits(micro)
        expected = kept_logprobs(p_logits, p_t["input_ids"], p_kept, SAMPLING)
    on = mask > 0
    torch.testing.assert_close(lp[on], expected[on], atol=1e-5, rtol=0)
