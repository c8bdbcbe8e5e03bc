"""bench/vllm_dtype.py's scored sequence, gap and arguments (the timing itself needs a vLLM server
and the whole machine: the bench is run by hand, its report in bench/results/)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import vllm_dtype as vd  # noqa: E402  (a bench module: importable once bench/ is on the path)

from strands_art.registry import load_tokenizer  # noqa: E402


def test_the_scored_sequence_is_the_prompt_then_java_tokens_scored_from_the_prompts_end() -> None:
    tok = load_tokenizer(vd.MODEL)
    prompt = vd.prompts(tok, 1, 300)[0]
    ids, start = vd.scored_sequence(tok, prompt, 64)
    assert ids[:start] == tok(prompt)["input_ids"] and len(ids) == start + 64
    tail = tok.decode(ids[start:])
    assert "class" in tail or "package" in tail or "import" in tail  # Java source, not the prompt


def test_too_many_scored_tokens_is_said() -> None:
    tok = load_tokenizer(vd.MODEL)
    with pytest.raises(ValueError, match="fewer than --score-tokens 100000000"):
        vd.scored_sequence(tok, "x", 100_000_000)


def test_gap_is_the_mean_and_max_absolute_difference() -> None:
    assert vd.gap([0.0, -1.0, -2.0], [0.1, -1.5, -2.0]) == pytest.approx((0.2, 0.5))
    with pytest.raises(ValueError):
        vd.gap([0.0], [0.0, 1.0])  # unequal lengths are a bug, not a shorter comparison


@pytest.mark.parametrize("flag", ["--rounds", "--group", "--prompt-tokens", "--new-tokens", "--score-tokens"])
def test_sizes_below_one_are_refused(flag: str, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        vd.parse_args([flag, "0"])
    assert stop.value.code == 2 and f"{flag} must be >= 1" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--out", "/nonexistent-dir/x.txt"], "--out /nonexistent-dir/x.txt: its directory does not exist"),
        (["--prompt-tokens", "15000", "--score-tokens", "1000"], "exceed the server's 16384"),
    ],
)
def test_what_would_fail_after_the_servers_ran_is_refused_before(argv: list[str], said: str, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        vd.parse_args(argv)
    assert stop.value.code == 2 and said in capsys.readouterr().err
