"""Multi-seed summary and plot of training metrics (strands_art/training/metrics.py)."""

from __future__ import annotations

import importlib.util
import json
import math
import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strands_art.training.metrics import MetricsFile, plot_seeds, read_metrics, scan_metrics, seed_summary
from strands_art.training.tasks_toy import capital_tasks


def run(evals: list[float], train: list[float] | None = None) -> list[dict]:
    """Records of one run: eval records at outer batches 0, 5, 10, ... and train records."""
    recs = [{"kind": "train", "outer_batch": b, "reward_mean": r} for b, r in enumerate(train or [])]
    recs += [{"kind": "eval", "outer_batch": 5 * i, "val_reward": v} for i, v in enumerate(evals)]
    return recs


def test_seed_summary_values():
    runs = {2: run([0.1, 0.3, 0.5]), 0: run([0.2, 0.1]), 1: run([0.1, 0.4])}
    s = seed_summary(runs)
    assert [x["seed"] for x in s["seeds"]] == [0, 1, 2]
    assert [round(x["gain"], 9) for x in s["seeds"]] == [-0.1, 0.3, 0.4]
    assert s["improved"] == 2 and s["n"] == 3
    assert s["reward_start"] == pytest.approx(0.4 / 3)
    assert s["reward_end"] == pytest.approx(1.0 / 3)
    assert s["gain_mean"] == pytest.approx(0.2)
    assert s["gain_std"] == pytest.approx(statistics.stdev([-0.1, 0.3, 0.4]))  # n - 1
    assert s["gain_min"] == pytest.approx(-0.1)


def test_seed_summary_one_seed_and_errors():
    assert seed_summary({7: run([0.2, 0.2])})["gain_std"] == 0.0
    assert seed_summary({7: run([0.2, 0.2])})["improved"] == 0  # equal is not an improvement
    with pytest.raises(ValueError, match="no runs"):
        seed_summary({})
    with pytest.raises(ValueError, match="seed 3: need eval records"):
        seed_summary({3: run([0.5], train=[0.1, 0.2])})


def test_seed_summary_of_another_eval_key():
    runs = {0: run([0.5, 0.9]), 1: run([0.6, 0.7])}
    for recs, success in zip(runs.values(), ([0.25, 0.875], [0.375, 0.5]), strict=True):
        for r, v in zip((r for r in recs if r["kind"] == "eval"), success, strict=True):
            r["val_success"] = v
    s = seed_summary(runs, key="val_success")
    assert [x["gain"] for x in s["seeds"]] == [0.625, 0.125]
    assert s["reward_start"] == pytest.approx(0.3125) and s["reward_end"] == pytest.approx(0.6875)
    assert seed_summary(runs)["reward_end"] == pytest.approx(0.8)  # val_reward, the default
    with pytest.raises(ValueError, match="seed 0: the eval records have no 'val_nope'"):
        seed_summary(runs, key="val_nope")
    fig = plot_seeds(runs, eval_key="val_success")
    assert list(fig.axes[1].lines[-1].get_ydata()) == pytest.approx([0.3125, 0.6875])
    assert fig.axes[1].get_title() == "held-out success (evaluation records)"


rewards = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.integers(0, 50), st.lists(rewards, min_size=2, max_size=4), min_size=1, max_size=6))
def test_seed_summary_properties(evals_by_seed):
    s = seed_summary({seed: run(ev) for seed, ev in evals_by_seed.items()})
    gains = [ev[-1] - ev[0] for _, ev in sorted(evals_by_seed.items())]
    assert math.isclose(s["gain_mean"], s["reward_end"] - s["reward_start"], abs_tol=1e-12)
    assert s["improved"] == sum(g > 0 for g in gains)
    assert s["gain_min"] <= s["gain_mean"] + 1e-12
    assert s["gain_std"] >= 0
    # the order the runs finished in (dict order) does not matter
    rev = seed_summary({seed: run(ev) for seed, ev in reversed(list(evals_by_seed.items()))})
    assert rev == s


def test_plot_seeds_draws_one_line_per_seed_and_the_mean(tmp_path):
    runs = {0: run([0.1, 0.3, 0.6], train=[0.1] * 10), 1: run([0.2, 0.2, 0.4], train=[0.2] * 10)}
    fig = plot_seeds(runs, tmp_path / "seeds.png")
    left, right = fig.axes
    assert len(left.lines) == 3 and len(right.lines) == 3  # 2 seeds + mean
    mean = right.lines[-1]
    assert list(mean.get_xdata()) == [0, 5, 10]
    assert list(mean.get_ydata()) == pytest.approx([0.15, 0.25, 0.5])
    assert (tmp_path / "seeds.png").stat().st_size > 1000


def load_learning_bench():
    path = Path(__file__).resolve().parents[1] / "bench" / "learning.py"
    spec = importlib.util.spec_from_file_location("bench_learning", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_learning_bench_report_and_result_line(capsys):
    bench = load_learning_bench()
    heldout = capital_tasks("heldout")
    sentence = [f"The capital of {t.country} is {t.capital}." for t in heldout]
    bare = [t.capital for t in heldout]
    echo = [f"The answer is {t.country}" for t in heldout]

    def recs(start, end, before, after, greedy_after):
        two = lambda texts: [x for x in texts for _ in range(2)]  # noqa: E731 (2 samples per country)
        return [
            {"kind": "greedy", "when": "before", "val_reward": 0.146, "val_texts": sentence},
            {"kind": "eval", "outer_batch": 0, "val_reward": start, "val_texts": two(before)},
            {"kind": "train", "outer_batch": 0, "reward_mean": 0.2},
            {"kind": "eval", "outer_batch": 1, "val_reward": end, "val_texts": two(after)},
            {"kind": "greedy", "when": "after", "val_reward": greedy_after, "val_texts": after},
        ]

    runs = {
        0: recs(0.15, 0.9, sentence, bare, 1.0),
        1: recs(0.15, 0.0, sentence, echo, 0.0),
        2: recs(0.15, 0.5, sentence[:7], bare, 0.5),
    }
    summary = bench.report(runs, wall=12.0, samples=2)
    out = capsys.readouterr().out
    assert "16/16 -> 16/16" in out  # seed 0: every sampled reply names its capital, before and after
    assert "16/16 -> 0/16" in out  # seed 1: the echo collapse names none
    assert "?/16 -> 16/16" in out  # seed 2: failed evaluation rollouts left 14 replies
    assert "improved 2/3" in out and "greedy 0.146 -> 0.500" in out
    assert bench.result_line(summary) == (
        "RESULT reward_start=0.150 reward_end=0.467 gain_mean=0.317 gain_std=0.451 improved_seeds=2/3 "
        "greedy_start=0.146 greedy_end=0.500"
    )


BAD_LINES = st.sampled_from(
    [
        b"\xff\xfe",
        b"not json",
        b"[1, 2]",
        b"5",
        b"null",
        b'"a string"',
        b"{" * 3,
        b'{"a": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
    ]
)
GOOD = st.dictionaries(
    st.sampled_from(["kind", "outer_batch", "loss"]), st.integers(-5, 5) | st.text(max_size=5)
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), GOOD, BAD_LINES), max_size=12), st.booleans())
def test_scan_metrics_skips_bad_lines_and_counts_them(tmp_path_factory, lines, torn):
    """Every complete line that is a JSON object is read, in order, whatever bad lines (not
    UTF-8, not JSON, not an object, nested too deep) sit between them; each bad line is counted
    by its line number; a torn tail is neither (before: one bad line read as an unreadable file)."""
    path = tmp_path_factory.mktemp("m") / "metrics.jsonl"
    data = b"".join((json.dumps(good).encode() if ok else bad) + b"\n" for ok, good, bad in lines)
    path.write_bytes(data + (b'{"kind": "tr' if torn else b""))
    got = scan_metrics(path)
    assert got.records == [good for ok, good, _ in lines if ok]
    assert got.skipped == [n for n, (ok, _, _) in enumerate(lines, 1) if not ok]
    assert got.torn_tail is torn
    assert read_metrics(path) == got.records


def test_scan_metrics_missing_file_and_directory(tmp_path):
    assert scan_metrics(tmp_path / "none.jsonl") == MetricsFile()
    with pytest.raises(IsADirectoryError):
        scan_metrics(tmp_path)


def test_a_fifo_or_symlink_in_place_of_metrics_is_refused_at_once(tmp_path):
    """A FIFO named metrics.jsonl is refused without waiting for a writer (it blocked
    ``train --resume`` forever); a symlink is not followed."""
    import os

    from strands_art.training.metrics import MetricsError, MetricsLog, NotARegularFile

    fifo = tmp_path / "metrics.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(MetricsError, match="is not a regular file"):
        MetricsLog(fifo).read()
    with pytest.raises(NotARegularFile):
        scan_metrics(fifo)
    target = tmp_path / "elsewhere.jsonl"
    target.write_text(json.dumps({"kind": "train", "outer_batch": 0}) + "\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    with pytest.raises(MetricsError, match="is a symlink"):
        MetricsLog(link).read()


def test_truncate_after_never_writes_through_a_planted_temporary(tmp_path):
    """``metrics.jsonl.tmp`` left as a symlink to a file outside the run: the kept records go
    into a new file in the run, the outside file is untouched (it was overwritten with them, and
    metrics.jsonl became a symlink to it)."""
    from strands_art.training.metrics import MetricsLog

    recs = [{"kind": "eval", "outer_batch": 0}, {"kind": "train", "outer_batch": 0},
            {"kind": "eval", "outer_batch": 1}, {"kind": "train", "outer_batch": 1}]  # fmt: skip
    path = tmp_path / "run" / "metrics.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    victim = tmp_path / "victim.txt"
    victim.write_text("PRECIOUS\n")
    (path.parent / "metrics.jsonl.tmp").symlink_to(victim)
    MetricsLog(path).truncate_after(1)
    assert victim.read_text() == "PRECIOUS\n"
    assert not path.is_symlink() and not (path.parent / "metrics.jsonl.tmp").exists()
    assert MetricsLog(path).read() == recs[:3]
