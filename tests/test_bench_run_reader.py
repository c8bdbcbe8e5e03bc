"""bench/run_reader.py: the strict reader of run files that bench/seed_tables.py (seed_experiments.py)
and bench/update_cost.py share: only a torn last line is skipped (and said), every other line
that cannot be read is an error naming the file and line."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import run_reader  # noqa: E402  (bench/, on the path above)
import seed_tables  # noqa: E402

EVAL0 = {"kind": "eval", "outer_batch": 0, "val_reward": 0.25, "val_rollouts": 4, "eval_s": 3.0}
TRAIN0 = {"kind": "train", "outer_batch": 0, "rows": 8, "optimizer_steps": 1, "processed_tokens": 800}
EVAL1 = {"kind": "eval", "outer_batch": 1, "val_reward": 0.75, "val_rollouts": 4, "eval_s": 2.0}


def lines(*records: dict) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def run_dir(tmp_path: Path, metrics: str, **settings) -> Path:
    d = tmp_path / "run"
    d.mkdir(exist_ok=True)
    base = {
        "seed": 3,
        "outer_batches": 1,
        "history_mode": "linear",
        "batching": "fixed-steps",
        "eval_tasks": "e",
    }
    (d / "train.json").write_text(json.dumps({**base, **settings}))
    (d / "metrics.jsonl").write_text(metrics)
    return d


def test_a_torn_last_line_is_skipped_and_said_once(tmp_path, capsys):
    path = tmp_path / "m.jsonl"
    path.write_text(lines(EVAL0, TRAIN0) + json.dumps(EVAL1)[:25])
    got = run_reader.read_jsonl(path)
    assert got.torn == 3 and [n for n, _ in got.records] == [1, 2]
    assert [r for _, r in got.records] == [EVAL0, TRAIN0]
    assert capsys.readouterr().err == (
        f"warning: {path}:3: the last line has no newline (a write the process did not finish): skipped\n"
    )
    run_reader.read_jsonl(path)
    assert capsys.readouterr().err == ""  # once per file and line
    path.write_text(lines(EVAL0))
    assert run_reader.read_jsonl(path).torn is None and capsys.readouterr().err == ""
    assert run_reader.read_jsonl(tmp_path / "missing.jsonl").records == []


@pytest.mark.parametrize(
    "middle, message",
    [
        ("garbage", r"m\.jsonl:2: not a JSON line \(Expecting value"),
        ("", r"m\.jsonl:2: an empty line"),
        ("[1, 2]", r"m\.jsonl:2: a JSON list, not a record"),
        ('{"kind": "train", "outer_batch": 0, "rows"', r"m\.jsonl:2: not a JSON line"),
    ],
)
def test_any_other_bad_line_is_an_error_naming_file_and_line(tmp_path, middle, message):
    path = tmp_path / "m.jsonl"
    path.write_text(lines(EVAL0) + middle + "\n" + lines(TRAIN0))
    with pytest.raises(run_reader.RunFileError, match=message):
        run_reader.read_jsonl(path)
    path.write_text(lines(EVAL0, TRAIN0) + middle + "\n")  # the last line, but whole (newline): an error too
    with pytest.raises(run_reader.RunFileError, match=message.replace(":2:", ":3:")):
        run_reader.read_jsonl(path)


def test_read_run_skips_only_a_torn_last_line(tmp_path, capsys):
    d = run_dir(tmp_path, lines(EVAL0, TRAIN0) + json.dumps(EVAL1)[:30])
    run = seed_tables.read_run(d)
    assert (run.arm, run.seed, run.torn) == ("linear-fixed-steps", 3, 3)
    assert run.trains == [TRAIN0] and run.evals == [(0, 0.25, 4, 3.0)]
    # every outer batch trained, the final evaluation's line cut short: neither finished nor resumable
    assert not run.finished and run.unsure and run.state.startswith("UNSURE: metrics.jsonl's last line, 3,")
    assert f"{d / 'metrics.jsonl'}:3: the last line has no newline" in capsys.readouterr().err
    (d / "metrics.jsonl").write_text(lines(EVAL0, TRAIN0, EVAL1))
    run = seed_tables.read_run(d)
    assert run.finished and not run.unsure and run.state == "finished" and run.progress == (1, 1, 2)
    (d / "metrics.jsonl").write_text(lines(EVAL0) + json.dumps(TRAIN0)[:30])  # torn before the last batch
    run = seed_tables.read_run(d)
    assert not run.unsure and run.state == "NOT FINISHED" and run.progress == (0, 0, 1)


@pytest.mark.parametrize(
    "record, message",
    [
        ({"kind": "eval", "outer_batch": 1, "eval_s": 2.0}, r"\(eval record\): 'val_reward' must be a number \(no such key\)"),
        ({**EVAL1, "val_reward": "0.7"}, r"\(eval record\): 'val_reward' must be a number \('0\.7'\)"),
        ({**EVAL1, "val_rollouts": 4.5}, r"\(eval record\): 'val_rollouts' must be an integer \(4\.5\)"),
        ({"kind": "train", "outer_batch": 1, "rows": 8}, r"\(train record\): 'optimizer_steps' must be an integer \(no such key\)"),
        ({"kind": "train", "rows": 8, "optimizer_steps": 1}, r"\(train record\): 'outer_batch' must be an integer \(no such key\)"),
        ({"kind": "train", "outer_batch": True, "rows": 8, "optimizer_steps": 1}, r"\(train record\): 'outer_batch' must be an integer \(True\)"),
        ({**TRAIN0, "outer_batch": -1}, r": 'outer_batch' must be >= 0 \(-1\)"),
        ({**TRAIN0, "outer_batch": 1, "e2e_s": "9"}, r"\(train record\): 'e2e_s' must be a number \('9'\)"),
        ({"outer_batch": 1, "val_reward": 0.5}, r": 'kind' must be a string \(no such key\)"),
    ],
)  # fmt: skip
def test_a_record_without_what_the_tables_read_is_an_error(tmp_path, record, message):
    d = run_dir(tmp_path, lines(EVAL0, TRAIN0, record, EVAL1))
    with pytest.raises(run_reader.RunFileError, match=re.escape(f"{d / 'metrics.jsonl'}:3") + " ?" + message):
        seed_tables.read_run(d)


def test_a_record_of_another_kind_is_left_out(tmp_path):
    d = run_dir(tmp_path, lines(EVAL0, {"kind": "note", "path": "x"}, TRAIN0, EVAL1))
    assert seed_tables.read_run(d).finished


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"outer_batches": 1, "history_mode": "tree", "batching": "fixed-steps"}', r": 'seed' must be an integer \(no such key\)"),
        ('{"seed": "0", "outer_batches": 1}', r": 'seed' must be an integer \('0'\)"),
        ('{\n  "seed": 0,\n  "outer_batches": \n}', r":4: not JSON \(Expecting value\)"),
        ("[0]", r": a JSON list, not an object of settings"),
        ('{"seed": 0, "outer_batches": 1, "history_mode": "tree", "batching": "x"}', r": settings with --history-mode tree --batching x"),
    ],
)  # fmt: skip
def test_a_train_json_the_tables_cannot_read_is_an_error(tmp_path, text, message):
    d = run_dir(tmp_path, lines(EVAL0))
    (d / "train.json").write_text(text)
    with pytest.raises(run_reader.RunFileError, match=re.escape(str(d / "train.json")) + message):
        seed_tables.read_run(d)
