"""bench/migration_learning.py: reading a recorded results file back (``--recorded``), so the
over-seed summary of issue 24 can join seeds whose run directories were on another machine."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from strands_art.training.settings import DEFAULTS

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))  # the bench imports its sibling train_lookup
_spec = importlib.util.spec_from_file_location("migration_learning", ROOT / "bench" / "migration_learning.py")
ml = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ml)
import run_settings as rs  # noqa: E402  (a bench module: importable once bench/ is on the path)

ONE = "--extra=--outer-batches 1"  # the runs _run_with_transfer writes have one outer batch
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


def _task(root: Path, name: str) -> None:
    (root / name / "repo").mkdir(parents=True)
    (root / name / "task.json").write_text("{}\n")


def test_transfer_tasks_join_the_evaluation_once_and_a_wrong_set_is_refused(tmp_path):
    ev, tr, out = tmp_path / "eval", tmp_path / "transfer", tmp_path / "root" / "eval-tasks"
    for n in ("profile-1000003", "release-flag-1000004"):
        _task(ev, n)
    _task(tr, "base64-2000000")
    assert ml.combined_eval_tasks(ev, tr, out) == out
    assert sorted(p.name for p in out.iterdir()) == [
        "base64-2000000",
        "profile-1000003",
        "release-flag-1000004",
    ]
    assert (out / "base64-2000000" / "repo").is_dir()
    assert ml.combined_eval_tasks(ev, tr, out) == out  # made once, then checked
    _task(tr, "base64-2000001")
    with pytest.raises(ValueError, match="other tasks than"):
        ml.combined_eval_tasks(ev, tr, out)
    assert json.loads((out.parent / "transfer-kinds.json").read_text()) == ["base64"]
    _task(tr, "profile-1000009")  # a kind the held-out set has: its rollouts could not be split
    with pytest.raises(ValueError, match=r"kinds in both --eval-tasks and --transfer-tasks: \['profile'\]"):
        ml.combined_eval_tasks(ev, tr, tmp_path / "o2")
    trained = tmp_path / "train"
    _task(trained, "base64-0000004")  # a training task of the transfer kind: nothing to transfer
    _task(tmp_path / "transfer1", "base64-2000000")
    with pytest.raises(ValueError, match=r"--transfer-tasks kinds that training tasks have: \['base64'\]"):
        ml.combined_eval_tasks(ev, tmp_path / "transfer1", tmp_path / "o4", trained)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="holds no task"):
        ml.combined_eval_tasks(ev, empty, tmp_path / "o3")


def _run_with_transfer(run_dir: Path, transfer: tuple[str, ...] = ("base64-2000000",)) -> None:
    """A finished 1-update run whose evaluations held 2 trained-kind tasks and the ``transfer`` tasks
    (2 rollouts each; the transfer set's rewards 0,0 then 0.5,0 in all)."""
    run_dir.mkdir(parents=True)
    seed = run_dir.name.removeprefix("seed")
    flags = [*ml.FLAGS.split(), "--outer-batches", "1", "--seed", seed]  # what the bench starts it with
    (run_dir / "train.json").write_text(
        json.dumps({**DEFAULTS, "env": "migrationbench", **rs.given_settings(flags), "run_dir": str(run_dir)})
    )
    before, after = [0.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0]
    rewards = {  # eval batch -> task -> rewards of its 2 rollouts
        0: {"profile-1000003": [0.0, 1.0], "release-flag-1000004": [0.0, 0.0]},
        1: {"profile-1000003": [1.0, 1.0], "release-flag-1000004": [0.5, 1.0]},
    }
    for i, name in enumerate(transfer):
        rewards[0][name] = before[2 * i : 2 * i + 2]
        rewards[1][name] = after[2 * i : 2 * i + 2]
    n = 2 * len(rewards[0])
    metrics = [
        {
            "kind": "eval",
            "outer_batch": b,
            "val_reward": sum(sum(v) for v in t.values()) / n,
            "eval_s": 10.0,
            "val_rollouts": n,
        }  # fmt: skip
        for b, t in rewards.items()
    ]
    metrics.insert(1, {"kind": "train", "outer_batch": 0, "reward_mean": 0.5, "reward_std": 0.5,
                       "zero_advantage_groups": 0, "rows": 8, "sampled_tokens": 100, "rollout_s": 5.0,
                       "train_s": 6.0, "grad_norm": 0.1})  # fmt: skip
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    recs = [
        {"rollout_id": f"eval-b{b}-{task}-r{i}", "task": task, "reward": x,
         "edited_files": {"modified": ["pom.xml"], "added": [], "deleted": [], "truncated": False}}
        for b, t in rewards.items() for task, xs in t.items() for i, x in enumerate(xs)
    ]  # fmt: skip
    (run_dir / "env" / "rollouts").mkdir(parents=True)
    (run_dir / "env" / "rollouts" / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))


def test_the_held_out_kind_is_reported_apart_and_reads_back(tmp_path, capsys):
    root = tmp_path / "root"
    _run_with_transfer(root / "seed2")
    s = ml.summarize_seed(root / "seed2")
    assert s["finished"]
    # held-out counts the trained kinds only: (0+1+0+0)/4 and (1+1+0.5+1)/4; base64 apart
    assert [(b, r) for b, r, *_ in s["evals"]] == [(0, 0.25), (1, 0.875)]
    assert s["transfer"] == [(0, 0.0, 2), (1, 0.25, 2)]
    assert ml.main(["--run-root", str(root), "--seeds", "2", "--table-only", ONE]) == 0
    out = capsys.readouterr().out
    assert "  held-out after 1 updates: reward 0.875 (failed rollouts 0, 10 s)" in out
    assert "  held-out kind base64 after 1 updates: reward 0.250 (2 rollouts)" in out
    assert "    base64               0.00 (2) -> 0.25 (2)" in out
    result = out.strip().splitlines()[-1]
    assert "heldout_before=0.250+-0.000 heldout_after=0.875+-0.000 improved_seeds=1/1" in result
    assert result.endswith("transfer_before=0.000+-0.000 transfer_after=0.250+-0.000 transfer_seeds=1")
    # the printed lines read back as a recorded seed, transfer included
    settings = f"settings: {ml.FLAGS}\n"
    (tmp_path / "rec.txt").write_text(settings + out)
    rec = ml.recorded_seeds(tmp_path / "rec.txt", ml.FLAGS)[2]
    assert rec["evals"][-1][:2] == (1, 0.875) and rec["transfer"] == [(0, 0.0, 2), (1, 0.25, 2)]


def test_real_repositories_as_the_transfer_set_are_reported_apart_and_read_back(tmp_path, capsys):
    # real MigrationBench tasks (make-tasks --from-records) are named owner__repo: each is its own kind
    ev, tr = tmp_path / "eval", tmp_path / "real"
    for n in ("profile-1000003", "release-flag-1000004"):
        _task(ev, n)
    real = ("poetix__ambivalence", "alt236__jacocoxmlparser")
    for n in real:
        _task(tr, n)
    root = tmp_path / "root"
    ml.combined_eval_tasks(ev, tr, root / "eval-tasks")
    assert ml.transfer_kinds(root) == frozenset(real)
    _run_with_transfer(root / "seed1", real)
    assert ml.main(["--run-root", str(root), "--seeds", "1", "--table-only", ONE]) == 0
    out = capsys.readouterr().out
    assert "  held-out after 1 updates: reward 0.875 (failed rollouts 0, 10 s)" in out
    # poetix 0.5,0 after; alt236 0,0: 0.5 / 4 rollouts
    assert "  transfer tasks (2 kinds) after 1 updates: reward 0.125 (4 rollouts)" in out
    assert "    poetix__ambivalence  0.00 (2) -> 0.25 (2)" in out
    assert (
        out.strip()
        .splitlines()[-1]
        .endswith("transfer_before=0.000+-0.000 transfer_after=0.125+-0.000 transfer_seeds=1")
    )
    (tmp_path / "rec.txt").write_text(f"settings: {ml.FLAGS}\n" + out)
    assert ml.recorded_seeds(tmp_path / "rec.txt", ml.FLAGS)[1]["transfer"] == [(0, 0.0, 4), (1, 0.125, 4)]


def test_a_run_without_the_held_out_kind_keeps_the_logged_reward(tmp_path):
    _run_with_transfer(tmp_path / "seed0")
    path = tmp_path / "seed0" / "env" / "rollouts" / "results.jsonl"
    path.write_text("".join(x + "\n" for x in path.read_text().splitlines() if "base64" not in x))
    s = ml.summarize_seed(tmp_path / "seed0")
    assert s["transfer"] == [] and [r for _, r, *_ in s["evals"]] == [1 / 6, 4 / 6]


def test_a_seed_joined_from_another_file_is_not_read_into_the_seed_before_it(tmp_path):
    """A file where seed 0 ran and seed 1 was joined (``seed 1: finished, recorded in ...``): seed 1's
    lines belong to the other file and must not be appended to seed 0's."""
    text = RECORDED.read_text(encoding="utf-8")
    block = text[text.index("seed 0: finished") : text.index("  per kind")]
    joined = block.replace(
        "seed 0: finished", "seed 1: finished, recorded in other.txt (per kind and audit there)"
    )
    joined = joined.replace("reward 0.643", "reward 0.000")
    (tmp_path / "mixed.txt").write_text(
        text.replace("\nheld-out reward before", "\n" + joined + "\nheld-out reward before")
    )
    seeds = ml.recorded_seeds(tmp_path / "mixed.txt")
    assert list(seeds) == [0]
    assert seeds[0]["evals"] == [(0, 0.143, 0, 866.0), (3, 0.643, 0, 1856.0)]
    assert len(seeds[0]["trains"]) == 3


def test_bad_seeds_or_a_missing_task_directory_name_their_flag(tmp_path, capsys):
    base = ["--run-root", str(tmp_path), "--train-tasks", str(tmp_path), "--eval-tasks", str(tmp_path)]
    for argv, flag in (
        ([*base, "--seeds", "a"], "--seeds 'a'"),
        ([*base, "--transfer-tasks", str(tmp_path / "nope")], "--transfer-tasks"),
        (["--run-root", str(tmp_path), "--train-tasks", str(tmp_path / "nope"), "--eval-tasks", str(tmp_path)],
         "--train-tasks"),
    ):  # fmt: skip
        with pytest.raises(SystemExit) as e:
            ml.main(argv)
        assert e.value.code == 2
        assert flag in capsys.readouterr().err


def test_a_run_whose_records_are_missing_is_refused_not_split_wrong(tmp_path, capsys):
    """Held-out reward split by kind comes from results.jsonl: a torn or missing record would change it silently."""
    root = tmp_path / "root"
    _run_with_transfer(root / "seed2")
    path = root / "seed2" / "env" / "rollouts" / "results.jsonl"
    path.write_text(
        "".join(x + "\n" for x in path.read_text().splitlines() if "eval-b1-release-flag" not in x)
    )
    with pytest.raises(
        ValueError,
        match=r"after 1 updates logged 6 rollouts, results.jsonl holds 4 \(held-out kind base64: 2\)",
    ):
        ml.summarize_seed(root / "seed2")
    assert ml.main(["--run-root", str(root), "--seeds", "2", "--table-only", ONE]) == 2
    assert "cannot be split by kind" in capsys.readouterr().err


def test_base64_tasks_in_the_eval_set_are_refused(tmp_path):
    ev, tr = tmp_path / "eval", tmp_path / "transfer"
    _task(ev, "base64-2000005")
    _task(tr, "base64-2000000")
    with pytest.raises(ValueError, match=r"kinds in both --eval-tasks and --transfer-tasks: \['base64'\]"):
        ml.combined_eval_tasks(ev, tr, tmp_path / "out")


def test_the_over_seed_transfer_line_names_the_transfer_set(tmp_path, capsys):
    """The over-seed line named the base64 set ``transfer tasks (3 kinds)`` (the per-kind loop's
    list of the last seed's kinds shadowed the run root's transfer kinds)."""
    root = tmp_path / "root"
    _run_with_transfer(root / "seed2")
    assert ml.main(["--run-root", str(root), "--seeds", "2", "--table-only", ONE]) == 0
    out = capsys.readouterr().out
    assert (
        "\nheld-out kind base64 (no training task of these kinds) before 0.000 +- 0.000, after 0.250" in out
    )


@pytest.mark.parametrize("text", ["[]", '"base64"', "5", "null", '{"base64": 1}', "[1]", '[""]', "not json"])
def test_a_damaged_transfer_kinds_file_is_refused_not_read_as_no_transfer(tmp_path, capsys, text):
    """``"base64"`` read as the kinds b, a, s, e, 6, 4 and ``[]`` as none: the transfer tasks'
    rollouts were counted in the held-out reward (0.667 instead of 0.875); ``5`` was a traceback."""
    root = tmp_path / "root"
    _run_with_transfer(root / "seed2")
    (root / "transfer-kinds.json").write_text(text)
    with pytest.raises(ValueError, match="transfer-kinds.json"):
        ml.transfer_kinds(root)
    assert ml.main(["--run-root", str(root), "--seeds", "2", "--table-only", ONE]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("migration_learning.py: ")
        and "transfer-kinds.json" in err
        and len(err.splitlines()) == 1
    )


def test_a_refused_transfer_set_leaves_the_recorded_kinds(tmp_path):
    """A second call with another transfer set is refused; it used to write its kinds first, so
    the run root's evaluations were then split by the refused set's kinds."""
    ev, tr, real = tmp_path / "eval", tmp_path / "transfer", tmp_path / "real"
    _task(ev, "profile-1000003")
    _task(tr, "base64-2000000")
    _task(real, "poetix__ambivalence")
    out = tmp_path / "root" / "eval-tasks"
    ml.combined_eval_tasks(ev, tr, out)
    with pytest.raises(ValueError, match="other tasks than"):
        ml.combined_eval_tasks(ev, real, out)
    assert ml.transfer_kinds(out.parent) == frozenset({"base64"})


def test_a_real_repository_ending_in_digits_is_its_own_kind():
    assert ml.kind_of("apache__commons-lang-3") == "apache__commons-lang-3"
    assert ml.kind_of("java-level-props-0000007") == "java-level-props"


def test_recorded_seeds_of_another_transfer_set_are_not_averaged_in(tmp_path, capsys):
    """A recorded file whose seed evaluated base64 joined to a run root whose transfer set is real
    repositories: the over-seed transfer mean mixed the two sets under the root's label."""
    root = tmp_path / "root"
    _run_with_transfer(root / "seed2")
    assert ml.main(["--run-root", str(root), "--seeds", "2", "--table-only", ONE]) == 0
    (tmp_path / "rec.txt").write_text(capsys.readouterr().out)  # its settings line: FLAGS --outer-batches 1
    one = f"{ml.FLAGS} --outer-batches 1"
    assert ml.recorded_seeds(tmp_path / "rec.txt", one)[2]["transfer_label"] == "held-out kind base64"
    real_root = tmp_path / "real"
    _run_with_transfer(real_root / "seed1", ("poetix__ambivalence", "alt236__jacocoxmlparser"))
    (real_root / "transfer-kinds.json").write_text('["alt236__jacocoxmlparser", "poetix__ambivalence"]\n')
    argv = [
        "--run-root",
        str(real_root),
        "--seeds",
        "1,2",
        "--table-only",
        "--recorded",
        str(tmp_path / "rec.txt"),
        ONE,
    ]
    assert ml.main(argv) == 2
    assert (
        "seeds with different transfer sets (held-out kind base64, transfer tasks (2 kinds))"
        in capsys.readouterr().err
    )


def test_a_run_of_other_settings_is_refused_and_missing_rollout_records_are_said(tmp_path, capsys):
    """--table-only of runs started with other flags printed this bench's FLAGS as their settings;
    a run directory without rollout records printed empty per-kind rows and "0 successful"."""
    root = tmp_path / "root"
    _run_with_transfer(root / "seed2")

    def table(extra: str) -> int:
        return ml.main(["--run-root", str(root), "--seeds", "2", "--table-only", "--extra", extra])

    assert ml.main(["--run-root", str(root), "--seeds", "2", "--table-only"]) == 2
    assert capsys.readouterr().err == (
        f"migration_learning.py: {root / 'seed2'} was started with other settings than FLAGS and --extra: "
        "--outer-batches 3 (the run has 1); pass the --extra it was started with (its train.json holds every "
        "setting)\n"
    )
    assert table("--outer-batches 1 --lr 1e-3") == 2
    assert "--lr 0.001 (the run has 0.0003)" in capsys.readouterr().err
    # a setting the flags leave out is compared at its default: a run started with more flags is
    # not these settings (the review's case: --autocast bf16 and --history-mode tree went unnoticed)
    saved = json.loads((root / "seed2" / "train.json").read_text())
    (root / "seed2" / "train.json").write_text(
        json.dumps({**saved, "autocast": "bf16", "history_mode": "tree"})
    )
    assert ml.main(["--run-root", str(root), "--seeds", "2", "--table-only", ONE]) == 2
    err = capsys.readouterr().err
    assert (
        "--autocast 'off' (the run has 'bf16')" in err
        and "--history-mode left unset (the run has 'tree')" in err
    )
    assert table("--outer-batches 1 --autocast bf16 --history-mode tree") == 0
    capsys.readouterr()
    # a --history-mode stated for a run that left it to its environment and captured nothing yet:
    # a bench's bare --resume would not adopt it
    (root / "seed2" / "train.json").write_text(json.dumps(saved))
    assert table("--outer-batches 1 --history-mode tree") == 2
    assert (
        "--history-mode 'tree' (the run left it to its environment and has captured nothing yet)"
        in capsys.readouterr().err
    )
    (root / "seed2" / "env" / "rollouts" / "results.jsonl").unlink()
    assert ml.main(["--run-root", str(root), "--seeds", "2", "--table-only", ONE]) == 0
    out = capsys.readouterr().out
    assert (
        f"  per kind and audit: no rollout records ({root / 'seed2'}/env/rollouts/results.jsonl is not there)"
        in out
    )
    assert "successful rollouts" not in out and "per kind, held-out" not in out
    assert out.splitlines()[1] == f"settings: {ml.FLAGS} --outer-batches 1"
