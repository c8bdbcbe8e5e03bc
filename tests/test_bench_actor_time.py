"""bench/actor_time.py: the recorded rows of a real ``train --env migrationbench`` run
(tests/data/train-migrationbench) replayed side by side on a tiny random-weight model of the
same vocabulary (``--random-weights``: the bench's mode for a machine without the weights)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "tests" / "data" / "train-migrationbench"
_spec = importlib.util.spec_from_file_location("actor_time", ROOT / "bench" / "actor_time.py")
at = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(at)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import Qwen2Config

    from strands_art.registry import load_tokenizer

    d = tmp_path_factory.mktemp("tiny")
    Qwen2Config(vocab_size=151936, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True).save_pretrained(d)  # fmt: skip
    load_tokenizer("qwen2.5-coder-0.5b").save_pretrained(d)
    return d


def test_two_row_sets_replay_alternated_with_their_counts(tiny: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "replays.json"
    argv = ["--rows", f"ob0={RUN}:0", "--rows", f"ob2={RUN}:2", "--reps", "2", "--threads", "1",
            "--variants", "recorded,plain-bf16", "--random-weights", str(tiny), "--out", str(out)]  # fmt: skip
    assert at.main(argv) == 0
    got = json.loads(out.read_text())
    # rep 0: ob0 then ob2; rep 1: ob2 then ob0 (alternated), each variant in turn
    assert [(g["rep"], g["variant"], g["label"]) for g in got] == [
        (0, "recorded", "ob0"), (0, "recorded", "ob2"), (0, "plain-bf16", "ob0"), (0, "plain-bf16", "ob2"),
        (1, "recorded", "ob2"), (1, "recorded", "ob0"), (1, "plain-bf16", "ob2"), (1, "plain-bf16", "ob0"),
    ]  # fmt: skip
    rows = {
        ob: [json.loads(x) for x in (RUN / "rows" / f"ob-00000{ob}.jsonl").read_text().splitlines()]
        for ob in (0, 2)
    }
    for g in got:
        trajs = rows[int(g["label"][2:])]
        assert g["rows"] == sum(len(t["rows"]) for t in trajs) == 4
        assert g["tokens"] == sum(len(r["input_ids"]) for t in trajs for r in t["rows"])
        # each rollout is one linear row of one group with differing rewards: every row is forwarded
        assert g["processed_tokens"] == g["tokens"] and g["optimizer_steps"] == 1 and g["s"] > 0
    result = capsys.readouterr().out.strip().splitlines()[-1]
    tok0, tok2 = (got[0]["tokens"], got[1]["tokens"])
    assert f"tokens_reduction={100 * (1 - tok2 / tok0):.2f}%" in result
    assert result.startswith("RESULT s_recorded_ob0=") and "actor_s_reduction_plain-bf16=" in result


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rows", "nolabel"], "LABEL=RUN_DIR[:OUTER_BATCH]"),
        (["--rows", f"a={RUN}:x"], "the outer batch after ':' must be an integer"),
        (["--rows", f"a={RUN}", "--variants", "shared"], "--variants: unknown ['shared']"),
        (["--rows", f"a={RUN}", "--rows", f"a={RUN}:1"], "--rows: each label once"),
        # each of these was a traceback (the reps after loading the model)
        (["--rows", f"a={RUN}", "--reps", "0"], "--reps 0: at least 1"),
        (["--rows", f"a={RUN}", "--threads", "-2"], "--threads -2: 0 (torch's default) or more"),
        (["--rows", f"a={RUN}", "--device", "gpu"], "--device 'gpu': cpu, cuda or cuda:N"),
        (["--rows", f"a={RUN}:7"], f"--rows a={RUN}:7: [Errno 2] No such file or directory"),
        (["--rows", "a=no/such:run/dir"], "--rows a=no/such:run/dir:0: [Errno 2] No such file or directory"),
        (["--rows", "a=NORUN:0"], "NORUN/train.json not found"),
        (["--rows", "a=EMPTY:0"], "rows/ob-000000.jsonl holds no trajectory"),
        (
            ["--rows", "a=BADROW:0"],
            "rows/ob-000000.jsonl line 1: not a trajectory of rows (KeyError: 'rows')",
        ),
    ],
)
def test_bad_arguments_are_named(argv: list[str], message: str, capsys, tmp_path: Path) -> None:
    for name, rows in (("NORUN", None), ("EMPTY", ""), ("BADROW", '{"rollout_id": "r", "group_id": "g"}\n')):
        (tmp_path / name / "rows").mkdir(parents=True)
        if rows is None:  # good rows, no train.json
            shutil.copy(RUN / "rows" / "ob-000000.jsonl", tmp_path / name / "rows" / "ob-000000.jsonl")
        else:
            (tmp_path / name / "rows" / "ob-000000.jsonl").write_text(rows)
            shutil.copy(RUN / "train.json", tmp_path / name / "train.json")
    argv = [x.replace("=NORUN", f"={tmp_path}/NORUN").replace("=EMPTY", f"={tmp_path}/EMPTY") for x in argv]
    argv = [x.replace("=BADROW", f"={tmp_path}/BADROW") for x in argv]
    with pytest.raises(SystemExit) as exc:
        at.main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and message in err and "Traceback" not in err, err


def test_a_run_directory_with_a_colon_in_its_path_is_read_whole() -> None:
    assert at.parse_rows("a=runs/12:30/seed0") == ("a", Path("runs/12:30/seed0"), 0)
    assert at.parse_rows("a=runs/12:30/seed0:2") == ("a", Path("runs/12:30/seed0"), 2)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))
