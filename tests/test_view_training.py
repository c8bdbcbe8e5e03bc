"""The viewer's reading of a training run (strands_art/view/training.py): the compare totals
are sums over each run's metrics (a property), a batch table from the records and rollouts, the
index of the rows as trained (a torn file is said, not guessed)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strands_art.training.run_store import TRAINED_SCHEMA
from strands_art.view.training import COMPARE_KEYS, TrainedIndex, batches, compare, group_key, run_labels

finite = st.floats(min_value=0, max_value=1e6, allow_nan=False)
record = st.fixed_dictionaries({}, optional={k: finite for k in COMPARE_KEYS})


def run_records(rows: list[dict], evals: list[float]) -> list[dict]:
    out = [{"kind": "train", "outer_batch": b, **r} for b, r in enumerate(rows)]
    out += [{"kind": "eval", "outer_batch": b, "val_reward": v} for b, v in enumerate(evals)]
    return out


@settings(max_examples=60, deadline=None)
@given(
    a=st.lists(record, max_size=6), b=st.lists(record, max_size=6),
    ea=st.lists(finite, max_size=3), eb=st.lists(finite, max_size=3),
)  # fmt: skip
def test_compare_totals_are_sums_and_percentages_against_the_first_run(a, b, ea, eb) -> None:
    got = compare([("A", run_records(a, ea)), ("B", run_records(b, eb))])
    for run, rows, evals in zip(got["runs"], (a, b), (ea, eb), strict=True):
        for k in COMPARE_KEYS:
            if k == "eval_s":  # the evaluations there are: with --eval-every K most batches have none
                got_s = [r[k] for r in rows if k in r]
                unknown = any(
                    k not in r and b + 1 < len(evals) for b, r in enumerate(rows)
                )  # eval, no seconds
                assert run["total"][k] == (pytest.approx(sum(got_s)) if got_s and not unknown else None)
            elif rows and all(k in r for r in rows):
                assert run["total"][k] == pytest.approx(sum(r[k] for r in rows))
            else:  # a key a batch lacks: no total, never a partial sum
                assert run["total"][k] is None
        # the result is the evaluation after training; the one before it is no result
        assert run["total"]["val_reward"] == (evals[-1] if len(evals) > 1 else None)
        assert run["total"]["val_reward_before"] == (evals[0] if evals else None)
        assert [r["outer_batch"] for r in run["batches"]] == list(range(len(rows)))
    base, other = got["runs"][0]["total"], got["runs"][1]["total"]
    for k in COMPARE_KEYS:
        pct = got["runs"][1]["total_pct"][k]
        if base[k] and other[k] is not None:
            assert pct == pytest.approx(100 * (other[k] - base[k]) / base[k])
        else:
            assert pct is None


def test_batches_count_what_was_left_out_and_why() -> None:
    records = [
        {"kind": "eval", "outer_batch": 0, "val_reward": 0.25, "val_rollouts": 2},
        {"kind": "train", "outer_batch": 0, "reward_mean": 0.5, "rows": 3, "optimizer_steps": 2},
        {"kind": "eval", "outer_batch": 1, "val_reward": 0.75, "val_rollouts": 2},
    ]
    items = [
        {"rollout_id": "b0-a-r0", "split": "train", "outer_batch": 0, "group": "b0-a", "zero_variance": True},
        {"rollout_id": "b0-a-r1", "split": "train", "outer_batch": 0, "group": "b0-a", "zero_variance": True},
        {"rollout_id": "b0-b-r0", "split": "train", "outer_batch": 0, "group": "b0-b", "failed": True,
         "excluded": "rollout failed: stale: sampled 3 updates behind"},
        {"rollout_id": "b0-b-r1", "split": "train", "outer_batch": 0, "group": "b0-b", "excluded": "reward is NaN"},
        {"rollout_id": "eval-b1-k-r0", "split": "eval", "outer_batch": 1, "group": "eval-b1-k"},
        {"rollout_id": "b1-a-r0", "split": "train", "outer_batch": 1, "group": "b1-a"},  # sampled, not trained
    ]  # fmt: skip
    got = batches(records, items)
    b0, b1 = got["batches"]
    assert b0["trained"] and not b1["trained"] and b1["reward_mean"] is None
    assert b0["excluded"] == {"stale": 1, "reward is NaN": 1} and b0["stored_failed"] == 1
    assert b0["tied_groups"] == ["b0-a"] and b0["val_reward"] == 0.75 and b0["held_out_stored"] == 1
    assert b0["processed_tokens"] is None  # not recorded: shown as a dash
    assert [(e["outer_batch"], e["stored"]) for e in got["evals"]] == [(0, 0), (1, 1)]
    assert group_key("eval-b3-key7-r2", "key7") == "eval-b3-key7" and group_key("task-r0", "g") == "g"


def test_the_trained_index_reads_advantages_and_says_when_a_file_is_torn(tmp_path) -> None:
    rows = tmp_path / "rows"
    rows.mkdir()
    recs = [
        {"rollout_id": "b0-a-r0", "row_index": 0, "advantage": 0.5, "forwarded": True},
        {"rollout_id": "b0-a-r0", "row_index": 1, "advantage": 0.5, "forwarded": False},
        {
            "rollout_id": "b0-a-r1",
            "row_index": 0,
            "advantage": None,
            "excluded": "no reward",
            "forwarded": False,
        },
    ]
    pq.write_table(pa.Table.from_pylist(recs, schema=TRAINED_SCHEMA), rows / "ob-000000.trained.parquet")
    (rows / "ob-000001.trained.parquet").write_bytes(b"PAR1 torn")
    index = TrainedIndex(tmp_path)
    assert index.refresh() and not index.refresh()  # nothing changed the second time
    assert index.advantage == {"b0-a-r0": 0.5, "b0-a-r1": None}
    assert index.excluded == {"b0-a-r1": "no reward"} and index.forwarded["b0-a-r0"] == (1, 2)
    assert list(index.problems) == ["ob-000001.trained.parquet"]
    assert index.row(0, "b0-a-r0", 1)["forwarded"] is False and index.row(0, "nope", 0) is None
    assert index.row(5, "b0-a-r0", 0) is None
    with pytest.raises(ValueError, match="ob-000001"):
        index.row(1, "b0-a-r0", 0)


def test_the_viewer_server_imports_no_torch() -> None:
    """The viewer reads the rows as trained without the trainer's libraries: torch alone was
    about 230 MB of the server's memory (bench/results/viewer-train-2026-12-03.txt)."""
    import subprocess
    import sys

    code = "import sys, strands_art.view.server, strands_art.view.payloads; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_evaluation_seconds_come_from_the_evaluation_after_each_batch() -> None:
    """The loop writes ``eval_s`` on ``kind: eval`` records: the batch and compare tables show
    the evaluation after each batch (they showed none), and the total sums them, not the one
    before training."""
    records = [
        {"kind": "eval", "outer_batch": 0, "val_reward": 0.5, "eval_s": 10.0},
        {"kind": "train", "outer_batch": 0, "rows": 4},
        {"kind": "eval", "outer_batch": 1, "val_reward": 0.6, "eval_s": 16.5},
        {"kind": "train", "outer_batch": 1, "rows": 4},
        {"kind": "eval", "outer_batch": 2, "val_reward": 0.7, "eval_s": 18.5},
    ]
    assert [b["eval_s"] for b in batches(records, [])["batches"]] == [16.5, 18.5]
    run = compare([("A", records)])["runs"][0]
    assert [b["eval_s"] for b in run["batches"]] == [16.5, 18.5]
    assert run["total"]["eval_s"] == 35.0
    # --eval-every 2: batch 0 has no evaluation after it; the total is still the evaluations' sum
    every2 = [r for r in records if not (r["kind"] == "eval" and r["outer_batch"] == 1)]
    run = compare([("A", every2)])["runs"][0]
    assert [b["eval_s"] for b in run["batches"]] == [None, 18.5]
    assert run["total"]["eval_s"] == 18.5
    assert compare([("A", records[:2])])["runs"][0]["total"]["eval_s"] is None  # no evaluation after a batch
    # an evaluation after a batch without its seconds (an older record): a dash, not 18.5 as if whole
    unknown = [{k: v for k, v in r.items() if not (r["outer_batch"] == 1 and k == "eval_s")} for r in records]
    assert compare([("A", unknown)])["runs"][0]["total"]["eval_s"] is None


def test_a_run_with_only_the_evaluation_before_training_has_no_result_yet() -> None:
    """No outer batch trained yet: the held-out reward before training is not the run's result
    (the compare total showed it as one), and it stays the "before" value."""
    records = [{"kind": "eval", "outer_batch": 0, "val_reward": 0.5, "eval_s": 10.0}]
    other = [
        *records,
        {"kind": "train", "outer_batch": 0},
        {"kind": "eval", "outer_batch": 1, "val_reward": 0.75},
    ]
    a, b = compare([("A", records), ("B", other)])["runs"]
    assert a["total"]["val_reward"] is None and a["total"]["val_reward_before"] == 0.5
    assert a["total"]["outer_batches"] == 0 and a["batches"] == []
    assert b["total"]["val_reward"] == 0.75 and b["total_pct"]["val_reward"] is None
    assert batches(records, [])["batches"] == []


def test_run_labels_tell_runs_with_the_same_name_apart():
    roots = [Path("/r/exp/tree-fixed-steps/seed0"), Path("/r/exp/linear-fixed-steps/seed0"), Path("/r/other")]
    assert run_labels(roots) == ["tree-fixed-steps/seed0", "linear-fixed-steps/seed0", "other"]
    assert run_labels([Path("/a/run"), Path("/a/run")]) == ["/a/run", "/a/run"]  # the same run twice


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(["a", "b", "seed0", "seed1"]), min_size=1, max_size=4),
        max_size=5,
        unique_by=tuple,
    )
)
def test_run_labels_are_distinct_path_suffixes(paths):
    roots = [Path("/", *p) for p in paths]
    labels = run_labels(roots)
    assert len(set(labels)) == len(labels)  # distinct roots, distinct labels
    for root, label in zip(roots, labels, strict=True):
        assert root.parts[-len(Path(label).parts) :] == Path(label).parts or label == str(root)


def test_a_damaged_rows_as_trained_file_is_said_on_the_row_page_never_a_failed_page(tmp_path) -> None:
    """The recorded lookup run with batch 1's file of another schema (rollout_id an integer: the
    row page answered 500) and batch 2's lists holding nulls (a null sampler logprob on a trained
    token, a null in a loss mask: the row page answered 422 "unreadable trajectory"): each row
    page shows its tokens and says what is wrong with the trained file; intact rows keep their
    values."""
    import shutil

    from strands_art.view.payloads import row_payload
    from strands_art.view.reader import RunView

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parent / "data" / "train-lookup", run)
    pq.write_table(
        pa.table({"rollout_id": [1, 2], "advantage": ["x", "y"]}), run / "rows" / "ob-000001.trained.parquet"
    )
    path = run / "rows" / "ob-000002.trained.parquet"
    recs = pq.read_table(path).to_pylist()
    by_id = {r["rollout_id"]: r for r in recs}
    first_on = lambda r: r["loss_mask"].index(1)  # noqa: E731
    a, b = by_id["b2-lookup-heron-r0"], by_id["b2-lookup-heron-r1"]
    a["sampler_logprobs"][first_on(a)] = None
    b["loss_mask"][first_on(b)] = None
    pq.write_table(pa.Table.from_pylist(recs, schema=TRAINED_SCHEMA), path)
    view = RunView(run)
    view.refresh()

    foreign = row_payload(view, "b1-lookup-marble-r0", 0)
    assert foreign["ids"] and foreign["trained"]["error"].startswith("rows/ob-000001.trained.parquet: ")
    got = row_payload(view, "b2-lookup-heron-r0", 0)["trained"]
    assert "error" not in got and got["trained_tokens"] == sum(a["loss_mask"])
    assert first_on(a) not in [g["pos"] for g in got["gaps"]]  # no gap without a sampler logprob
    assert row_payload(view, "b2-lookup-heron-r1", 0)["trained"]["error"] == (
        "the trained loss mask or clip flags hold a null"
    )
    intact = by_id["b2-lookup-quartz-r0"]
    assert row_payload(view, "b2-lookup-quartz-r0", 0)["trained"]["trained_tokens"] == sum(
        intact["loss_mask"]
    )


def test_an_outer_batch_of_true_is_no_batch() -> None:
    """``"outer_batch": true`` in a hand-edited metrics.jsonl is not batch 1 (``isinstance(True,
    int)``: it replaced batch 1's record in the batch table and the compare totals)."""
    records = [
        {"kind": "train", "outer_batch": 0, "rows": 3},
        {"kind": "train", "outer_batch": 1, "rows": 4},
        {"kind": "train", "outer_batch": True, "rows": 99},
        {"kind": "eval", "outer_batch": 2, "val_reward": 0.5},
        {"kind": "eval", "outer_batch": True, "val_reward": 0.0},
    ]
    got = batches(records, [])
    assert [(b["outer_batch"], b["rows"]) for b in got["batches"]] == [(0, 3.0), (1, 4.0)]
    assert [e["outer_batch"] for e in got["evals"]] == [2] and got["batches"][1]["val_reward"] == 0.5
    assert compare([("A", records)])["runs"][0]["total"]["rows"] == 7


def test_a_symlinked_rows_directory_is_said_not_read_as_empty(tmp_path) -> None:
    """rows/ a symlink to a directory outside the run: not followed (as every symlink), and the run
    says so (it listed no rows-as-trained file and showed no advantage, without a word)."""
    import shutil

    from strands_art.view.reader import RunView

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parent / "data" / "train-lookup", run)
    shutil.move(run / "rows", tmp_path / "outside-rows")
    (run / "rows").symlink_to(tmp_path / "outside-rows")
    view = RunView(run)
    view.refresh()
    view.trained.refresh()
    assert view.trained.advantage == {}
    assert view.trained.problems == {
        "": "a symbolic link: not followed, it may lead outside the run directory"
    }


def test_the_trainers_totals_are_also_compared_where_both_runs_ran_a_pass() -> None:
    """bench/seed_tables.py's rule: a batch whose kept group tied trains nothing (0 tokens) in one
    run by the rollouts' luck; the trainer's % compares the batches both trained."""
    tree = [{"processed_tokens": 1000, "actor_update_s": 100.0}, {"processed_tokens": 0, "actor_update_s": 0.01},
            {"processed_tokens": 800, "actor_update_s": 80.0}]  # fmt: skip
    linear = [{"processed_tokens": 400, "actor_update_s": 40.0}, {"processed_tokens": 300, "actor_update_s": 30.0},
              {"processed_tokens": 0, "actor_update_s": 0.02}]  # fmt: skip
    got = compare([("tree", run_records(tree, [])), ("linear", run_records(linear, []))])
    base, other = got["runs"]
    assert other["trained_batches"] == 1  # batch 0 only: batch 1 tied in tree, batch 2 in linear
    assert other["trained_pct"]["processed_tokens"] == pytest.approx(-60.0)  # 400 vs 1000
    assert other["trained_pct"]["actor_update_s"] == pytest.approx(-60.0)
    assert other["total_pct"]["processed_tokens"] == pytest.approx(100 * (700 - 1800) / 1800)  # all batches
    assert base["trained_batches"] == 2 and base["trained_pct"]["processed_tokens"] == 0.0  # itself
    # per batch: no ratio of the trainer's keys where either run ran no pass (0.02 s / 0.01 s is no +100 %)
    assert [b["pct"]["actor_update_s"] for b in other["batches"]] == [pytest.approx(-60.0), None, None]
    assert [b["pct"]["rows"] for b in other["batches"]] == [None, None, None]  # no rows key given here
    none = compare([("a", run_records(tree[1:2], [])), ("b", run_records(linear[1:2], []))])["runs"][1]
    assert none["trained_batches"] == 0 and none["trained_pct"] == {
        "processed_tokens": None,
        "actor_update_s": None,
    }
