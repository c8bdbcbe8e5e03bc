"""bench/vllm_threads.py's settings and requests (the timing itself needs a vLLM server and the
whole machine: the bench is run by hand, its report in bench/results/)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import vllm_threads as vt  # noqa: E402  (a bench module: importable once bench/ is on the path)

from strands_art.registry import load_tokenizer  # noqa: E402


def test_the_all_setting_binds_every_core_and_reserves_none() -> None:
    assert vt.setting_env("auto") == {
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True",
        "VLLM_CPU_OMP_THREADS_BIND": "auto",
    }
    assert vt.setting_env("all") == {
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True",
        "VLLM_CPU_OMP_THREADS_BIND": f"0-{os.cpu_count() - 1}",
        "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
    }


def test_prompts_have_the_length_asked_and_share_no_prefix_beyond_the_system_turn() -> None:
    tok = load_tokenizer(vt.MODEL)
    texts = vt.prompts(tok, 3, 500)
    system = len(
        tok.apply_chat_template([{"role": "system", "content": vt.COMPACT_SYSTEM_PROMPT}], tokenize=False)
    )
    assert len(set(texts)) == 3 and all(t.endswith("<|im_start|>assistant\n") for t in texts)
    assert len(os.path.commonprefix(texts)) <= system + len("<|im_start|>user\nRequest ")
    lengths = [len(tok(t)["input_ids"]) for t in texts]
    assert all(500 < n <= 500 + 400 for n in lengths)  # the user turn cut at 500 tokens, plus the system turn


@pytest.mark.parametrize("flag", ["--rounds", "--group", "--prompt-tokens", "--new-tokens"])
def test_sizes_below_one_are_refused(flag: str, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        vt.parse_args([flag, "0"])
    assert stop.value.code == 2 and f"{flag} must be >= 1" in capsys.readouterr().err
