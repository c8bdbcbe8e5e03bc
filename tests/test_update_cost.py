"""bench/update_cost.py's arithmetic on run directories written here (no model, no Maven)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))  # the bench imports its siblings
_spec = importlib.util.spec_from_file_location("update_cost", ROOT / "bench" / "update_cost.py")
uc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(uc)
import run_settings as rs  # noqa: E402
import update_cost_runs as ucr  # noqa: E402  (a bench module: importable once bench/ is on the path)
from run_reader import RunFileError  # noqa: E402

from strands_art.training.settings import DEFAULTS  # noqa: E402


def settings(d: Path, outer_batches: int) -> dict:
    """The train.json the bench's flags (``--extra "--outer-batches N"``) give run ``d`` (ARM-seedS)."""
    arm, seed = d.name.rsplit("-seed", 1)
    ns = uc.parse_args(
        ["--run-root", str(d.parent), "--table-only", "--extra", f"--outer-batches {outer_batches}"]
    )
    given = rs.given_settings(uc.run_flags(ns, arm, int(seed)))
    return {**DEFAULTS, "env": "migrationbench", **given, "run_dir": str(d)}


def _run(d: Path, trains: list[dict], evals: list[tuple[int, float, float]], hits: list[bool]) -> None:
    d.mkdir(parents=True)
    (d / "train.json").write_text(json.dumps(settings(d, len(trains))))
    recs = [{"kind": "eval", "outer_batch": b, "val_reward": v, "eval_s": s} for b, v, s in evals[:1]]
    recs += [{"kind": "train", "outer_batch": i, **t} for i, t in enumerate(trains)]
    recs += [{"kind": "eval", "outer_batch": b, "val_reward": v, "eval_s": s} for b, v, s in evals[1:]]
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (d / "env" / "rollouts").mkdir(parents=True)
    (d / "env" / "rollouts" / "results.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "rollout_id": f"r{i}",
                    "eval_cache_hit": h,
                    "tool_stats": {"maven_memo_hits": i, "maven_memo_saved_s": 10.0 * i},
                }
            )
            + "\n"
            for i, h in enumerate(hits)
        )  # fmt: skip
    )


def test_summary_and_result_line(tmp_path: Path) -> None:
    step = {"optimizer_steps": 2, "rows": 8}
    _run(tmp_path / "before-seed0",
         [{**step, "rollout_s": 500, "train_s": 100, "zero_gradient_steps": 1},
          {**step, "rollout_s": 700, "train_s": 0, "zero_gradient_steps": 2}],
         [(0, 0.1, 900), (2, 0.5, 700)], [])  # fmt: skip
    _run(tmp_path / "after-seed0",
         [{**step, "rollout_s": 200, "train_s": 100, "zero_gradient_steps": 0, "rollouts_drawn": 12},
          {**step, "rollout_s": 100, "train_s": 100, "zero_gradient_steps": 1, "rollouts_drawn": 8}],
         [(0, 0.1, 300), (2, 0.6, 200)], [True, False, True, True])  # fmt: skip
    summary = ucr.summarize(tmp_path, [0])
    b, a = summary["arms"]["before"], summary["arms"]["after"]
    assert (b["s_per_update"], b["s_per_eval"], b["useful_steps"]) == (650, 800, 1)
    assert b["useful_steps_per_hour"] == 1 / (1300 / 3600)
    assert (a["s_per_update"], a["useful_steps"], a["rollouts_per_update"]) == (250, 3, 10)
    assert summary["runs"]["after-seed0"]["finished"] is True
    assert (a["memo_hits"], a["memo_saved_s"], b["memo_hits"]) == (0 + 1 + 2 + 3, 60.0, 0)
    assert "Maven memo 6 builds / 60 s saved" in uc.report(summary)
    assert uc.report(summary).splitlines()[0].endswith("; code not recorded")  # no code.jsonl
    code = {"resume": False, "from_batch": 0, "dirty": False}
    (tmp_path / "before-seed0" / "code.jsonl").write_text(json.dumps({**code, "commit": "a" * 40}) + "\n")
    (tmp_path / "after-seed0" / "code.jsonl").write_text(json.dumps({**code, "commit": "b" * 40}) + "\n")
    text = uc.report(ucr.summarize(tmp_path, [0])).splitlines()
    assert (
        text[0] == f"CODE: the runs ran 2 commit(s): {'a' * 12}, {'b' * 12} (each run's line names its own)"
    )
    assert text[1].endswith(f"; code {'a' * 12}") and text[2].endswith(f"; code {'b' * 12}")
    line = uc.report(summary).splitlines()[-1]
    ratio = (3 / (500 / 3600)) / (1 / (1300 / 3600))
    assert line == (
        f"RESULT s_per_update_before=650 s_per_update_after=250 s_per_eval_before=800 s_per_eval_after=250 "
        f"useful_steps_per_hour_ratio={ratio:.2f} cache_hit_rate=0.75 heldout_before=0.500+-0.000 "
        f"heldout_after=0.600+-0.000"
    )


def test_arms_alternate_and_each_run_takes_the_lock(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("STRANDS_ART_EVAL_CACHE", "off")
    monkeypatch.setenv("STRANDS_ART_MAVEN_MEMO", "off")
    tasks = ["--train-tasks", str(tmp_path), "--eval-tasks", str(tmp_path)]
    args = uc.parse_args(["--run-root", str(tmp_path), *tasks, "--lock", "L"])
    cmd, env = uc.command(args, "before", 0, tmp_path / "before-seed0")
    assert cmd[:2] == ["flock", "L"] and "--max-draws" not in cmd
    assert env["STRANDS_ART_EVAL_CACHE"] == env["STRANDS_ART_MAVEN_MEMO"] == "off"
    cmd, env = uc.command(args, "after", 0, tmp_path / "after-seed0")
    assert (
        "STRANDS_ART_EVAL_CACHE" not in env
        and "STRANDS_ART_MAVEN_MEMO" not in env
        and cmd[cmd.index("--max-draws") + 1] == "4"
    )
    # the heavy lock by default, as bench/seed_experiments.py; '' for none
    cmd, _ = uc.command(uc.parse_args(["--run-root", str(tmp_path), *tasks]), "before", 0, tmp_path / "b")
    assert cmd[:2] == ["flock", "/tmp/strands-art-heavy.lock"]
    cmd, _ = uc.command(
        uc.parse_args(["--run-root", str(tmp_path), *tasks, "--lock", ""]), "before", 0, tmp_path / "b"
    )
    assert cmd[1:3] == ["train", "--env"] and "flock" not in cmd
    with pytest.raises(SystemExit):
        uc.parse_args(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for text in (
        "--seeds SEEDS comma-separated seeds, each once; one run per arm and seed (default: 0,1,2)",
        "--train-tasks TRAIN_TASKS training task directories",
        "--eval-tasks EVAL_TASKS held-out task directories",
        "('' for none) (default: /tmp/strands-art-heavy.lock)",
    ):
        assert text in help_text


def two_runs(root: Path) -> None:
    """before-seed0 finished (2 outer batches, evaluations before and after), after-seed0 one
    outer batch in."""
    step = {"optimizer_steps": 1, "rows": 8, "zero_gradient_steps": 0}
    _run(root / "before-seed0", [{**step, "rollout_s": 500, "train_s": 100}, {**step, "rollout_s": 300, "train_s": 100}],
         [(0, 0.1, 900), (2, 0.5, 700)], [True])  # fmt: skip
    _run(root / "after-seed0", [{**step, "rollout_s": 200, "train_s": 100}], [(0, 0.1, 300)], [False, True])
    (root / "after-seed0" / "train.json").write_text(json.dumps(settings(root / "after-seed0", 2)))


def test_table_only_needs_no_tasks_and_creates_nothing(tmp_path: Path, capsys) -> None:
    root, out = tmp_path / "runs", tmp_path / "summary.json"
    two_runs(root)
    assert uc.main(["--run-root", str(root), "--seeds", "0", "--table-only", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "before-seed0: finished; updates 600 s (rollouts 500 + training 100), 400 s" in text
    assert "after-seed0: NOT FINISHED; updates 300 s" in text
    assert text.strip().splitlines()[-1].startswith("RESULT s_per_update_before=500 s_per_update_after=300 ")
    assert json.loads(out.read_text())["runs"]["after-seed0"]["finished"] is False
    out.write_text("the last summary\n")
    typo = tmp_path / "runz"
    assert uc.main(["--run-root", str(typo), "--seeds", "0", "--table-only", "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"update_cost.py: no run directory ARM-seedS (before, after; seeds 0) with a train.json in {typo}: "
        "nothing to summarize\n"
    )
    assert not typo.exists() and out.read_text() == "the last summary\n"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--seeds", "0,x", "--table-only"], "--seeds '0,x': comma-separated non-negative integers"),
        (["--seeds", "0,0", "--table-only"], "--seeds '0,0': a seed given twice"),
        ([], "--train-tasks is needed to run (--table-only runs nothing)"),
        (["--train-tasks", "T", "--eval-tasks", "E"], "--train-tasks T: not a directory"),
        (
            ["--train-tasks", ".", "--eval-tasks", ".", "--extra", "--bogus 1"],
            "--extra '--bogus 1': not `strands-art train` flags",
        ),
        (
            ["--train-tasks", ".", "--eval-tasks", ".", "--extra", "--lr -1"],
            "--extra '--lr -1': --lr must be a finite number",
        ),
        (
            ["--train-tasks", ".", "--eval-tasks", ".", "--extra=--lr 1e-4 --seed=3"],
            "--extra '--lr 1e-4 --seed=3': --seed: the bench sets these itself",
        ),
        (
            ["--train-tasks", ".", "--eval-tasks", ".", "--after", "--max-draws 1"],
            "--after '--max-draws 1' (with --extra ''): --max-draws must be at least --prompt-batch (2)",
        ),
    ],
)
def test_bad_arguments_are_argparse_errors(tmp_path: Path, capsys, argv, message) -> None:
    """Refused before the run root, the lock or a run (flags `strands-art train` would refuse too)."""
    with pytest.raises(SystemExit) as exc:
        uc.main(["--run-root", str(tmp_path / "runs"), "--lock", "", *argv])
    assert exc.value.code == 2 and message in capsys.readouterr().err and not (tmp_path / "runs").exists()


def runs_by_script(monkeypatch, tmp_path: Path) -> list[tuple[str, int]]:
    """Each run a process that exits 3 (no training); the runs started are listed."""
    calls: list[tuple[str, int]] = []

    def command(args, arm, seed, run_dir):
        calls.append((arm, seed))
        return [sys.executable, "-c", "raise SystemExit(3)"], {}

    monkeypatch.setattr(uc, "command", command)
    return calls


def seed0_argv(root: Path, tasks: Path) -> list[str]:
    """The bench's arguments for seed 0 of the runs under ``root`` (``tasks`` for both task flags)."""
    return [
        "--run-root", str(root), "--seeds", "0", "--train-tasks", str(tasks), "--eval-tasks", str(tasks),
        "--extra", "--outer-batches 2",
    ]  # fmt: skip


def test_paired_ratios_per_seed_and_their_spread(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    two_runs(root)  # seed 0: before 600 s + 400 s, evaluations 900 + 700 s; after 300 s, evaluation 300 s
    step = {"optimizer_steps": 1, "rows": 8}
    _run(
        root / "before-seed1",
        [{**step, "rollout_s": 100, "train_s": 100, "zero_gradient_steps": 1}],
        [(0, 0.0, 400)],
        [],
    )  # fmt: skip  (no useful step: seed 1's useful-step ratio is undefined)
    _run(root / "after-seed1", [{**step, "rollout_s": 250, "train_s": 50}], [(0, 0.0, 200)], [])
    _run(root / "before-seed2", [{**step, "rollout_s": 100, "train_s": 100}], [(0, 0.0, 100)], [])  # no pair
    pairs = ucr.summarize(root, [0, 1, 2])["paired"]
    assert set(pairs["per_seed"]) == {0, 1}
    s0, s1 = pairs["per_seed"][0], pairs["per_seed"][1]
    assert s0["update_s"] == pytest.approx(300 / 500) and s0["eval_s"] == pytest.approx(300 / 800)
    # useful steps per hour of update time: before 2 in 1,000 s, after 1 in 300 s
    assert s0["useful_steps_per_hour"] == pytest.approx((1 / 300) / (2 / 1000))
    assert s1 == {"update_s": pytest.approx(1.5), "eval_s": pytest.approx(0.5)}
    assert pairs["spread"] == {
        "update_s": "1.05+-0.64",
        "eval_s": "0.44+-0.09",
        "useful_steps_per_hour": "1.67+-0.00",
    }
    text = uc.report(ucr.summarize(root, [0, 1, 2]))
    assert (
        "after / before per seed: seed 0: update_s 0.60, eval_s 0.38, useful_steps_per_hour 1.67; seed 1: "
        in text
    )
    assert (
        "before: 3 runs, 4 updates, 350 s per update" in text
        and "(mean+-std of each run's mean): 300+-173 s" in text
    )


def test_a_damaged_archive_is_said_not_dropped(tmp_path: Path, capsys) -> None:
    root, archive = tmp_path / "runs", tmp_path / "archive"
    two_runs(root)
    ucr.archive_run(root, "before-seed0", archive, [])
    argv = ["--run-root", str(tmp_path / "none"), "--archive", str(archive), "--seeds", "0", "--table-only"]
    assert uc.main(argv) == 0 and "before-seed0 (archived): finished" in capsys.readouterr().out
    metrics = archive / "before-seed0" / "metrics.jsonl"
    kept = metrics.read_text()
    metrics.write_text("".join(kept.splitlines(keepends=True)[:-1]))  # its final evaluation lost
    assert uc.main(argv) == 2
    assert "the archived run has no evaluation after its last outer batch: damaged" in capsys.readouterr().err
    metrics.write_text(kept)
    shutil.move(archive / "before-seed0", tmp_path / "elsewhere")
    (archive / "before-seed0").symlink_to(tmp_path / "elsewhere")
    assert uc.main(argv) == 2
    assert (
        "before-seed0: an archived run must be a directory (not a link or a file)" in capsys.readouterr().err
    )
    with pytest.raises(SystemExit) as stop:
        uc.main([*argv[:2], "--archive", str(tmp_path / "archiv"), *argv[4:]])
    assert stop.value.code == 2
    assert (
        "archiv: no such directory (--table-only reads the archive, never makes it)"
        in capsys.readouterr().err
    )


def test_summary_json_is_strict_with_null_for_an_arm_without_runs(tmp_path: Path) -> None:
    root, out = tmp_path / "runs", tmp_path / "summary.json"
    two_runs(root)
    shutil.rmtree(root / "after-seed0")
    assert uc.main(["--run-root", str(root), "--seeds", "0", "--table-only", "--out", str(out)]) == 0
    text = out.read_text()
    assert "NaN" not in text
    arms = json.loads(text, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))["arms"]
    assert arms["after"]["runs"] == 0 and arms["after"]["s_per_update"] is None
    assert arms["before"]["s_per_update"] == 500.0 and arms["before"]["useful_steps"] == 2
    assert arms["before"]["heldout_first_values"] == [0.1] and arms["before"]["heldout_last_values"] == [0.5]


def test_only_the_unfinished_run_is_run(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "runs"
    two_runs(root)
    calls = runs_by_script(monkeypatch, tmp_path)
    argv = seed0_argv(root, tmp_path)
    assert uc.main([*argv, "--lock", "", "--out", str(tmp_path / "s.json")]) == 3  # the script's exit
    assert (
        calls == [("after", 0)]
        and json.loads((tmp_path / "s.json").read_text())["arms"]["before"]["runs"] == 1
    )


@pytest.mark.parametrize(
    "where, edit, message",
    [
        ("metrics.jsonl", lambda ls: [ls[0], ls[1].replace('"rollout_s": 500, ', ""), *ls[2:]],
         "metrics.jsonl:2 (train record): 'rollout_s' must be a number (no such key)"),
        ("metrics.jsonl", lambda ls: [ls[0], '{"kind": "eval", "outer_batch": 1, "eval_s": 3.0}', *ls[1:]],
         "metrics.jsonl:2 (eval record): 'val_reward' must be a number (no such key)"),
        ("metrics.jsonl", lambda ls: [ls[0], "not json", *ls[1:]],
         "metrics.jsonl:2: not a JSON line (Expecting value: line 1 column 1 (char 0)); only the last line may be cut short"),
        ("env/rollouts/results.jsonl", lambda ls: ['{"eval_cache_hit": true}', *ls],
         "env/rollouts/results.jsonl:1: 'rollout_id' must be a string (no such key)"),
        ("env/rollouts/results.jsonl", lambda ls: ["{", *ls],
         "env/rollouts/results.jsonl:1: not a JSON line (Expecting property name enclosed in double quotes: line 1 column 2 (char 1)); only the last line may be cut short"),
        ("train.json", lambda ls: ['{"outer_batches": "2"}'], "train.json: 'outer_batches' must be an integer ('2')"),
    ],
)  # fmt: skip
def test_run_files_that_cannot_be_read_exit_2_before_any_run(
    tmp_path, monkeypatch, capsys, where, edit, message
):
    root = tmp_path / "runs"
    two_runs(root)
    path = root / "before-seed0" / where
    path.write_text("\n".join(edit(path.read_text().splitlines())) + "\n")
    calls = runs_by_script(monkeypatch, tmp_path)
    tasks = ["--train-tasks", str(tmp_path), "--eval-tasks", str(tmp_path), "--lock", ""]
    for mode in (["--table-only"], tasks):
        assert uc.main(["--run-root", str(root), "--seeds", "0", *mode]) == 2
        assert capsys.readouterr().err == f"update_cost.py: {root / 'before-seed0'}/{message}\n"
    assert calls == []


def test_a_torn_last_line_is_skipped_and_a_possibly_finished_run_not_run_again(tmp_path, monkeypatch, capsys):
    root = tmp_path / "runs"
    two_runs(root)
    results = root / "after-seed0" / "env" / "rollouts" / "results.jsonl"
    results.write_text(results.read_text() + '{"rollout_id": "r9", "eval_')
    metrics = root / "before-seed0" / "metrics.jsonl"
    full = metrics.read_text()
    metrics.write_text(full[: full.rindex("\n", 0, -1) + 15])  # the final evaluation cut short
    assert uc.main(["--run-root", str(root), "--seeds", "0", "--table-only"]) == 0
    out, err = capsys.readouterr()
    assert (
        f"warning: {metrics}:4: the last line has no newline (a write the process did not finish): skipped"
        in err
    )
    assert f"warning: {results}:3: the last line has no newline" in err
    assert "before-seed0: UNSURE (the last line of metrics.jsonl is cut short); updates 600 s" in out
    assert "eval cache 1/2" in out  # after-seed0's two whole results, the torn third left out
    calls = runs_by_script(monkeypatch, tmp_path)
    argv = seed0_argv(root, tmp_path)
    assert uc.main([*argv, "--lock", ""]) == 2
    assert (
        f"update_cost.py: {metrics}:4: the last line is cut short and every outer batch trained"
        in capsys.readouterr().err
    )
    assert calls == []


def test_finished_runs_are_archived_and_read_back_without_the_run_root(tmp_path: Path, monkeypatch, capsys):
    root, archive, tasks = tmp_path / "runs", tmp_path / "archive", tmp_path / "tasks"
    tasks.mkdir()
    two_runs(root)
    saved = {**settings(root / "before-seed0", 2), "train_tasks": str(tasks), "eval_tasks": str(tasks)}
    (root / "before-seed0" / "train.json").write_text(json.dumps(saved))
    calls = runs_by_script(monkeypatch, tmp_path)
    argv = [*seed0_argv(root, tasks), "--lock", "", "--archive", str(archive)]
    assert uc.main(argv) == 3  # after-seed0 run (the script exits 3); before-seed0 archived first
    assert calls == [("after", 0)] and not (archive / "after-seed0").exists()
    kept = archive / "before-seed0"
    assert json.loads((kept / "train.json").read_text()) == {
        **saved, "run_dir": "$RUN_ROOT/before-seed0", "train_tasks": "$TASKS/tasks", "eval_tasks": "$TASKS/tasks"
    }  # fmt: skip
    for log in ("metrics.jsonl", "env/rollouts/results.jsonl"):
        assert (kept / log).read_text() == (root / "before-seed0" / log).read_text()
    table = uc.report(ucr.summarize(root, [0]))
    capsys.readouterr()
    # another machine: no run root; the archived run is read back, not run again
    other = tmp_path / "elsewhere"
    calls.clear()
    assert uc.main([*seed0_argv(other, tasks), "--lock", "", "--archive", str(archive)]) == 3
    assert calls == [("after", 0)]
    out = capsys.readouterr().out
    assert "before-seed0 (archived): finished; updates 600 s (rollouts 500 + training 100), 400 s" in out
    assert table.splitlines()[0].replace("before-seed0:", "before-seed0 (archived):") in out
    assert uc.main(["--run-root", str(other), "--seeds", "0", "--table-only", "--archive", str(archive)]) == 0
    assert "before-seed0 (archived): finished" in capsys.readouterr().out


def test_a_log_naming_a_path_of_this_machine_is_not_archived(tmp_path: Path, monkeypatch, capsys):
    root, archive, tasks = tmp_path / "runs", tmp_path / "archive", tmp_path / "tasks"
    tasks.mkdir()
    two_runs(root)
    results = root / "before-seed0" / "env" / "rollouts" / "results.jsonl"
    results.write_text(results.read_text() + json.dumps({"rollout_id": "r7", "log": f"{tasks}/x"}) + "\n")
    runs_by_script(monkeypatch, tmp_path)
    assert uc.main([*seed0_argv(root, tasks), "--lock", "", "--archive", str(archive)]) == 2
    assert capsys.readouterr().err == (
        f"update_cost.py: {results} names {tasks}: not archived (a path of this machine)\n"
    )
    assert not archive.exists()


def test_copies_with_other_settings_are_refused_never_mixed(tmp_path: Path, monkeypatch, capsys):
    root, archive, tasks = tmp_path / "runs", tmp_path / "archive", tmp_path / "tasks"
    tasks.mkdir()
    two_runs(root)
    calls = runs_by_script(monkeypatch, tmp_path)
    argv = [*seed0_argv(root, tasks), "--lock", "", "--archive", str(archive)]
    assert uc.main(argv) == 3 and (archive / "before-seed0" / "train.json").exists()
    capsys.readouterr()
    # another --extra: a run it would not start is refused, wherever it lies
    calls.clear()
    other = [*argv[:-4], "--extra", "--outer-batches 2 --lr 1e-3", "--lock", "", "--archive", str(archive)]
    assert uc.main(other) == 2 and calls == []
    assert "before-seed0/train.json: this bench's flags would start another run: --lr 0.001 (the run has" in (
        capsys.readouterr().err
    )
    # the archived copy edited: the run root's copy is neither overwritten nor mixed with it
    saved = json.loads((archive / "before-seed0" / "train.json").read_text())
    (archive / "before-seed0" / "train.json").write_text(json.dumps({**saved, "lr": 1.0}))
    for mode in (argv, ["--run-root", str(root), "--seeds", "0", "--table-only", "--archive", str(archive)]):
        assert uc.main(mode) == 2
        assert capsys.readouterr().err == (
            f"update_cost.py: {root / 'before-seed0'} and its archived copy {archive / 'before-seed0'} differ in lr: "
            "not mixed; remove the one that is not this bench's\n"
        )
    assert json.loads((archive / "before-seed0" / "train.json").read_text())["lr"] == 1.0 and calls == []


def test_a_finished_archived_copy_wins_over_an_unfinished_run_root_copy(tmp_path: Path, monkeypatch, capsys):
    root, archive, tasks = tmp_path / "runs", tmp_path / "archive", tmp_path / "tasks"
    tasks.mkdir()
    two_runs(archive)  # before-seed0 finished there, after-seed0 not (never archived by the bench)
    (archive / "after-seed0").rename(tmp_path / "gone")
    two_runs(root)
    metrics = root / "before-seed0" / "metrics.jsonl"
    metrics.write_text(
        "".join(metrics.read_text().splitlines(keepends=True)[:-1])
    )  # its final evaluation gone
    summary = ucr.summarize(root, [0], archive)
    assert (
        summary["runs"]["before-seed0"]["where"] == "archive" and summary["runs"]["before-seed0"]["finished"]
    )
    assert summary["runs"]["after-seed0"]["where"] == "run root"
    calls = runs_by_script(monkeypatch, tmp_path)
    assert uc.main([*seed0_argv(root, tasks), "--lock", "", "--archive", str(archive)]) == 3
    assert calls == [("after", 0)]  # before-seed0 is read back, not run again


def test_an_archive_cut_short_is_not_read_back_and_stale_logs_go(tmp_path: Path, monkeypatch) -> None:
    root, archive, tasks = tmp_path / "runs", tmp_path / "archive", tmp_path / "tasks"
    tasks.mkdir()
    two_runs(root)
    replace = uc.os.replace

    def dies_at_results(src, dst):
        if str(dst).endswith("results.jsonl"):
            raise OSError("the disk is full")
        return replace(src, dst)

    monkeypatch.setattr(uc.os, "replace", dies_at_results)
    with pytest.raises(OSError, match="the disk is full"):
        ucr.archive_run(root, "before-seed0", archive, [])
    monkeypatch.setattr(uc.os, "replace", replace)
    assert not (archive / "before-seed0" / "train.json").exists()  # so never read back as finished
    assert ucr.summarize(root, [0], archive)["runs"]["before-seed0"]["where"] == "run root"  # archived again
    with pytest.raises(RunFileError, match="before-seed0/train.json: missing, and the run root has no copy"):
        ucr.summarize(tmp_path / "none", [0], archive)  # never read back, never dropped quietly
    ucr.archive_run(root, "before-seed0", archive, [])
    assert ucr.read_run(tmp_path / "none", "before-seed0", archive)["cache_lookups"] == 1
    (root / "before-seed0" / "env" / "rollouts" / "results.jsonl").unlink()
    ucr.archive_run(root, "before-seed0", archive, [])
    assert not (archive / "before-seed0" / "env" / "rollouts" / "results.jsonl").exists()


def test_the_run_s_own_task_directories_are_not_archived_either(tmp_path: Path, monkeypatch, capsys):
    root, archive, old = tmp_path / "runs", tmp_path / "archive", tmp_path / "old-tasks"
    two_runs(root)
    saved = {**settings(root / "before-seed0", 2), "train_tasks": str(old)}
    (root / "before-seed0" / "train.json").write_text(json.dumps(saved))
    results = root / "before-seed0" / "env" / "rollouts" / "results.jsonl"
    results.write_text(results.read_text() + json.dumps({"rollout_id": "r8", "log": f"{old}/t1"}) + "\n")
    with pytest.raises(ValueError, match=f"names {old}: not archived"):
        ucr.archive_run(root, "before-seed0", archive, [])
    assert not archive.exists()


@pytest.mark.parametrize("where", ["runs", "runs/kept", "."])
def test_an_archive_in_or_around_the_run_root_is_refused(tmp_path: Path, capsys, where) -> None:
    with pytest.raises(SystemExit):
        uc.parse_args(
            ["--run-root", str(tmp_path / "runs"), "--table-only", "--archive", str(tmp_path / where)]
        )
    assert "the run root, or a folder in or around it" in capsys.readouterr().err
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit):
        uc.parse_args(
            ["--run-root", str(tmp_path / "runs"), "--table-only", "--archive", str(tmp_path / "file")]
        )
    assert f"--archive {tmp_path / 'file'}: not a directory" in capsys.readouterr().err


def test_the_text_report_has_its_header_and_says_partial(tmp_path: Path, capsys) -> None:
    """--report: the printed summary under a header (command with $RUN_ROOT, settings, PARTIAL
    while runs are missing, the notes); a run still before its first record is no CODE line."""
    root = tmp_path / "runs"
    step = {"optimizer_steps": 2, "rows": 8, "zero_gradient_steps": 0}
    _run(
        root / "before-seed0",
        [{**step, "rollout_s": 500, "train_s": 100}],
        [(0, 0.1, 900), (1, 0.5, 700)],
        [],
    )
    (root / "before-seed0" / "code.jsonl").write_text(json.dumps({"commit": "a" * 40, "dirty": False}) + "\n")
    (root / "after-seed0").mkdir()  # started, nothing recorded yet (no code.jsonl either)
    (root / "after-seed0" / "train.json").write_text(json.dumps(settings(root / "after-seed0", 1)))
    notes = tmp_path / "NOTES.txt"
    notes.write_text("what ran beside the runs\n")
    out = tmp_path / "repo" / "bench" / "results" / "update-cost.txt"  # shown from the repository's root
    out.parent.mkdir(parents=True)
    argv = ["--run-root", str(root), "--seeds", "0", "--extra", "--outer-batches 1", "--table-only",
            "--notes", str(notes), "--report", str(out)]  # fmt: skip
    assert uc.main(argv) == 0
    printed = capsys.readouterr().out
    head, _, body = out.read_text().partition("\n\n")
    lines = head.splitlines()
    assert lines[0] == (
        "# PARTIAL: 1 of 2 runs finished; the same command continues (finished runs are read back, stopped ones resumed)"
    )
    assert lines[2].startswith("# command: python bench/update_cost.py --run-root $RUN_ROOT --seeds 0")
    assert str(tmp_path) not in head and lines[2].endswith(
        "--notes $NOTES --report bench/results/update-cost.txt   (this report: the same with --table-only)"
    )
    assert lines[3].startswith(
        f"# settings: FLAGS = {uc.FLAGS} --outer-batches 1; the after arm adds {uc.AFTER_FLAGS}"
    )
    assert lines[-2:] == ["#", "# what ran beside the runs"]
    assert body == printed and not body.startswith("CODE")  # one recorded commit: no CODE line
    (root / "after-seed0" / "train.json").unlink()
    (root / "after-seed0").rmdir()
    for name in ("after-seed0", "after-seed1"):  # finished; before-seed1 not started
        _run(root / name, [{**step, "rollout_s": 200, "train_s": 100}], [(0, 0.1, 300), (1, 0.6, 200)], [])
    argv[argv.index("0")] = "0,1"
    assert uc.main(argv) == 0
    assert out.read_text().startswith("# PARTIAL: 3 of 4 runs finished")
