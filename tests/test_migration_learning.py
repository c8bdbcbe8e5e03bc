"""bench/migration_learning.py: reading a recorded results file back (``--recorded``), so the
over-seed summary of issue 24 can join seeds whose run directories were on another machine."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))  # the bench imports its sibling train_lookup
_spec = importlib.util.spec_from_file_location("migration_learning", ROOT / "bench" / "migration_learning.py")
ml = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ml)

RECORDED = ROOT / "bench" / "results" / "migration-learning-2026-12-02-c.txt"


def test_a_committed_results_file_reads_back_to_its_numbers():
    seeds = ml.recorded_seeds(RECORDED)
    assert list(seeds) == [0]
    s = seeds[0]
    assert s["evals"] == [(0, 0.143, 0, 866.0), (3, 0.643, 0, 1856.0)]
    assert [t["outer_batch"] for t in s["trains"]] == [0, 1, 2]
    assert [t["reward_mean"] for t in s["trains"]] == [0.25, 1.0, 0.875]
    assert [t["zero_advantage_groups"] for t in s["trains"]] == [1, 2, 1]
    assert s["trains"][1]["grad_norm"] == 0.0 and s["trains"][1]["train_s"] == 0.0
    assert s["trains"][2]["sampled_tokens"] == 8004


def test_the_over_seed_summary_joins_a_recorded_seed(tmp_path, capsys):
    assert (
        ml.main(["--run-root", str(tmp_path), "--seeds", "0,1", "--table-only", "--recorded", str(RECORDED)])
        == 0
    )
    out = capsys.readouterr().out
    assert "seed 0: finished, recorded in" in out
    assert (
        out.strip()
        .splitlines()[-1]
        .startswith(
            "RESULT seeds=1 updates=3 heldout_before=0.143+-0.000 heldout_after=0.643+-0.000 improved_seeds=1/1"
        )
    )


def test_unfinished_seeds_are_left_out_and_a_foreign_file_is_refused(tmp_path):
    text = RECORDED.read_text(encoding="utf-8")
    stopped = tmp_path / "stopped.txt"
    stopped.write_text(
        text.replace("seed 0: finished", "seed 0: NOT FINISHED (stopped; reported at its last evaluation)")
    )
    with pytest.raises(ValueError, match="no finished seed"):
        ml.recorded_seeds(stopped)
    two = tmp_path / "two.txt"
    block = text[text.index("seed 0: finished") : text.index("  per kind")]
    two.write_text(text + "\n" + block.replace("seed 0:", "seed 5:").replace("reward 0.643", "reward 0.500"))
    assert sorted(ml.recorded_seeds(two)) == [0, 5]
    assert ml.recorded_seeds(two)[5]["evals"][-1][1] == 0.5
    other = tmp_path / "other.txt"
    other.write_text("RESULT seeds=2\n")
    with pytest.raises(ValueError, match="no finished seed"):
        ml.recorded_seeds(other)


def test_a_recorded_file_with_other_settings_or_a_seed_twice_is_refused(tmp_path, capsys):
    text = RECORDED.read_text(encoding="utf-8")
    other = tmp_path / "other-lr.txt"
    other.write_text(text.replace("--lr 3e-4 --warmup-steps", "--lr 1.5e-4 --warmup-steps"))
    with pytest.raises(ValueError, match=r"other settings \(there: --lr=1.5e-4; here: --lr=3e-4\)"):
        ml.recorded_seeds(other, ml.FLAGS)
    base = ["--run-root", str(tmp_path / "root"), "--table-only"]
    assert ml.main([*base, "--recorded", str(other)]) == 2
    assert "other settings" in capsys.readouterr().err
    assert ml.main([*base, "--recorded", str(RECORDED), "--recorded", str(RECORDED)]) == 2
    assert "seed 0 is in both" in capsys.readouterr().err
    (tmp_path / "root" / "seed0").mkdir(parents=True)
    assert ml.main([*base, "--seeds", "0", "--recorded", str(RECORDED)]) == 2
    assert "has a run directory" in capsys.readouterr().err
    assert ml.main([*base, "--seeds", "7"]) == 2  # no run directory, nothing recorded
    assert "nothing to summarize" in capsys.readouterr().err
    assert ml.main([*base, "--recorded", str(tmp_path / "missing.txt")]) == 2
    assert "missing.txt" in capsys.readouterr().err
