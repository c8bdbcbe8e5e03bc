"""A 2-outer-batch miniature of bench/seed_experiments.py: the three arms (tree + fixed-rows, tree +
fixed-steps, linear + fixed-steps) through ``strands-art train``'s own run function
(:func:`strands_art.training.run.arun_training`: real gateway capture in both history modes, real
batching, GRPO and LoRA updates of a tiny Llama over Qwen2.5's vocabulary, run directories as the
command writes them) on the lookup tool task, sampled by a scripted backend that plays back the
0.5B's own output forms (a bare JSON call, which tree capture forks on when the harness sends it
back re-rendered). The bench's tables are then checked against the run directories' rows files
and metrics."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import re
import statistics
import sys
from pathlib import Path

import pytest
from test_train_command import tensorboard_tags

from strands_art.backends.scripted import ScriptedBackend
from strands_art.envs.lookup import code_of, train_environment
from strands_art.registry import load_tokenizer
from strands_art.training.environment import EnvOptions
from strands_art.training.local import LocalTrainer
from strands_art.training.run import arun_training, check_history_mode
from strands_art.training.settings import TrainSettings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
_spec = importlib.util.spec_from_file_location("seed_experiments", ROOT / "bench" / "seed_experiments.py")
se = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(se)
import run_settings as rs  # noqa: E402  (bench/, on the path above)
import seed_tables  # noqa: E402

MODEL = "qwen2.5-coder-0.5b"
GIVEN = {
    "outer_batches": 2, "prompt_batch": 2, "rollouts_per_prompt": 4, "ppo_mini_batch": 2, "epochs": 1,
    "lr": 1e-2, "warmup_steps": 0, "kl_coef": 0.0, "lora_rank": 4, "micro_batch_tokens": 4096,
    "max_new_tokens": 64, "max_turns": 2, "eval_every": 1, "eval_samples": 1, "max_staleness": 0,
    "concurrency": 8, "checkpoint_every": 1,
}  # fmt: skip


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(MODEL)


def tiny_qwen_vocab_llama():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=151936, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=2048, tie_word_embeddings=True,
    )  # fmt: skip
    return LlamaForCausalLM(cfg).eval()


def script(tok):
    """The sampler: a bare JSON call first (or, for one seed in three, a guess), then the code (or,
    for one seed in three, the call again), chosen by the turn's sampling seed."""

    def item(prompt_ids, params, index):
        text = tok.decode(prompt_ids)
        key = re.findall(r"key '(\w+)'", text)[-1]
        call = json.dumps({"name": "lookup", "arguments": {"key": key}}) + "<|im_end|>"
        pick = params.seed % 3
        if "<tool_response>" not in text:
            return {"text": f"It is {code_of(key)}.<|im_end|>" if pick == 0 else call}
        return {"text": call if pick == 0 else f"The code stored under '{key}' is {code_of(key)}.<|im_end|>"}

    return item


class ScriptedSync:
    """The trainer's weight sync to a sampler that does not read weights (a script)."""

    max_lora_rank = 64
    sync_s = 0.0

    def __init__(self, backend):
        self.backend = backend

    def sync(self, model, step):
        self.backend.policy_version = step

    def close(self, unload=False):
        pass


def run_arm(tok, root: Path, arm: str, seed: int) -> Path:
    run_dir = root / arm / f"seed{seed}"
    mode = dict(seed_tables.ARMS[arm])
    if mode["batching"] == "fixed-rows":
        mode["rows_per_mini_batch"] = 2  # rows run 8-16 here: 4-8 steps
    options = EnvOptions(history_mode=mode["history_mode"], work_dir=run_dir / "env")
    env = train_environment(options)
    settings = TrainSettings.resolve("lookup", str(run_dir), {**GIVEN, "seed": seed, **mode}, env.defaults)
    backend = ScriptedBackend(tok, script(tok))
    trainer = LocalTrainer(
        tiny_qwen_vocab_llama(), tok, settings.trainer_config(), weight_sync=ScriptedSync(backend)
    )
    asyncio.run(
        arun_training(settings, env=env, progress=False, on_batch=lambda r: None, loaded=(tok, trainer))
    )
    return run_dir


def rows_files(run_dir: Path) -> list[list[dict]]:
    return [
        [json.loads(x) for x in p.read_text().splitlines()]
        for p in sorted((run_dir / "rows").glob("ob-*.jsonl"))
    ]


def trained_tokens(rollouts: list[dict]) -> int:
    """Tokens of the rows whose rollout's advantage is not 0 (reward off its group's mean): what
    the trainer forwards with no KL term."""
    groups: dict[str, list[float]] = {}
    for r in rollouts:
        groups.setdefault(r["group_id"], []).append(r["reward"])
    return sum(
        len(row["input_ids"])
        for r in rollouts
        if statistics.pstdev(groups[r["group_id"]]) > 0
        and r["reward"] != statistics.fmean(groups[r["group_id"]])
        for row in r["rows"]
    )


@pytest.fixture(scope="module")
def bench_root(tok, tmp_path_factory):
    root = tmp_path_factory.mktemp("seed-experiments")
    for seed in (0, 1):
        for arm in seed_tables.ARMS:
            run_arm(tok, root, arm, seed)
    return root


def test_the_runs_record_what_the_tables_need(bench_root):
    for arm in seed_tables.ARMS:
        for seed in (0, 1):
            run_dir = bench_root / arm / f"seed{seed}"
            saved = json.loads((run_dir / "train.json").read_text())
            assert (saved["history_mode"], saved["batching"]) == tuple(seed_tables.ARMS[arm].values())
            assert saved["rows_per_mini_batch"] == (2 if arm == "tree-fixed-rows" else None)
            run = seed_tables.read_run(run_dir)
            assert run.finished and [e[0] for e in run.evals] == [0, 1, 2]
            # the code that trained it: one process, a fresh start (code.jsonl)
            [code] = run.code
            assert code["resume"] is False and code["python"] and len(run.commits) == 1
            assert all(e[2] == 8 for e in run.evals)  # 8 held-out keys x 1 rollout
            for rec, rollouts in zip(run.trains, rows_files(run_dir), strict=True):
                assert rec["history_mode"] == seed_tables.ARMS[arm]["history_mode"]
                assert rec["rows"] == sum(len(r["rows"]) for r in rollouts)
                assert rec["processed_tokens"] == trained_tokens(rollouts)
                assert 0 < rec["actor_update_s"] < rec["e2e_s"] and rec["rollout_s"] < rec["e2e_s"]
            tags = tensorboard_tags(run_dir / "tensorboard")
            for key in (
                "rows",
                "processed_tokens",
                "actor_update_s",
                "optimizer_steps",
                "rollout_s",
                "e2e_s",
            ):
                assert [v for _, v in tags[f"train/{key}"]] == pytest.approx(
                    [r[key] for r in run.trains], rel=1e-6
                )
            assert [s for s, _ in tags["eval/val_reward"]] == [0, 1, 2]


def test_fixed_steps_takes_the_configured_steps_and_fixed_rows_follows_the_rows(bench_root):
    varied = set()
    for seed in (0, 1):
        steps = seed_tables.read_run(bench_root / "tree-fixed-steps" / f"seed{seed}")
        rows = seed_tables.read_run(bench_root / "tree-fixed-rows" / f"seed{seed}")
        linear = seed_tables.read_run(bench_root / "linear-fixed-steps" / f"seed{seed}")
        for run in (steps, linear):  # --prompt-batch 2 / --ppo-mini-batch 2 x 1 epoch, whatever the rows
            assert [r["optimizer_steps"] for r in run.trains] == [1, 1]
            assert [r["step"] for r in run.trains] == [1, 2]
        for r in rows.trains:  # mini-batches of 2 rows
            assert r["optimizer_steps"] == math.ceil(r["rows"] / 2)
            varied.add(r["optimizer_steps"])
        assert [r["step"] for r in rows.trains] == [
            sum(r["optimizer_steps"] for r in rows.trains[: i + 1]) for i in range(2)
        ]
        # the same seed samples the same rollouts in every arm (a script): only the capture differs
        for a, b, c in zip(rows_files(steps.dir), rows_files(rows.dir), rows_files(linear.dir), strict=True):
            assert [r["reward"] for r in a] == [r["reward"] for r in b] == [r["reward"] for r in c]
            assert all(len(r["rows"]) == 1 for r in c)  # linear: one row per rollout
            # tree: a rollout whose bare JSON call came back re-rendered forks a second row
            assert [len(r["rows"]) for r in a] == [2 if r["reward"] > 0 else 1 for r in a]
    assert len(varied) > 1 and max(varied) > 1  # fixed-rows' step count moved with the rows


def test_the_tables_add_up_to_the_run_directories(bench_root, capsys):
    out = bench_root / "report.txt"
    assert se.main(["--run-root", str(bench_root), "--seeds", "0,1", "--table-only", "--out", str(out)]) == 0
    text = out.read_text()
    assert capsys.readouterr().out == text and "PARTIAL" not in text
    # the settings line is what the runs used (their train.json), not FLAGS (--max-turns 12)
    settings = next(x for x in text.splitlines() if x.startswith("# settings (the runs' train.json): "))
    assert " lr=0.01 " in settings and " max_turns=2 " in settings and " outer_batches=2 " in settings
    assert "max_turns=12" not in text and " seed=" not in settings and "history_mode" not in settings
    assert (
        "# settings per run: tree-fixed-rows seed 0: rows_per_mini_batch=2; tree-fixed-rows seed 1: " in text
    )
    assert "tree-fixed-steps seed 0: rows_per_mini_batch=null" in text
    assert (bench_root / "report-figure1.png").stat().st_size > 0 and (
        bench_root / "report-figure2.png"
    ).exists()
    runs = se.read_runs(bench_root, se.order([0, 1], list(seed_tables.ARMS)))
    _, t2 = seed_tables.table2(runs)
    expect = {}
    for arm in ("tree-fixed-steps", "linear-fixed-steps"):
        files = [rows_files(bench_root / arm / f"seed{s}") for s in (0, 1)]
        expect[arm] = {
            "rows": sum(len(r["rows"]) for f in files for batch in f for r in batch),
            "processed_tokens": sum(trained_tokens(batch) for f in files for batch in f),
            "actor_update_s": sum(
                json.loads(x).get("actor_update_s", 0)
                for s in (0, 1)
                for x in (bench_root / arm / f"seed{s}" / "metrics.jsonl").read_text().splitlines()
            ),
        }
    tree, linear = expect["tree-fixed-steps"], expect["linear-fixed-steps"]
    for key in ("rows", "processed_tokens", "actor_update_s"):
        assert t2["sums"]["tree"][key] == pytest.approx(tree[key])
        assert t2["sums"]["linear"][key] == pytest.approx(linear[key])
        assert t2["reduction"][key] == pytest.approx(100 * (1 - linear[key] / tree[key]))
    assert linear["rows"] < tree["rows"] and t2["reduction"]["rows"] > 0
    line = text.strip().splitlines()[-1]
    assert line.startswith("RESULT seeds=2 outer_batches=2 ")
    assert f"rows_reduction={t2['reduction']['rows']:.2f}%" in line
    assert f"tokens_reduction={t2['reduction']['processed_tokens']:.2f}%" in line
    assert "steps_per_batch_fixed_steps=1" in line and re.search(
        r"steps_per_batch_fixed_rows=[\d.]+\(\d-\d\)", line
    )
    keys = re.findall(r" (\w+)=", line)
    assert keys == [
        "seeds", "outer_batches", "rows_reduction", "tokens_reduction", "actor_s_reduction", "e2e_reduction",
        "best_tree", "best_linear", "best_fixed_rows", "best_fixed_steps", "steps_per_batch_fixed_rows",
        "steps_per_batch_fixed_steps", "seeds_per_arm",
    ]  # fmt: skip
    assert line.endswith(" seeds_per_arm=tree-fixed-rows:2/tree-fixed-steps:2/linear-fixed-steps:2")
    # a run still going is reported as such, over the outer batches both runs of its seed have
    partial = bench_root / "linear-fixed-steps" / "seed1" / "metrics.jsonl"
    kept = [x for x in partial.read_text().splitlines() if json.loads(x)["outer_batch"] == 0]
    partial.write_text("\n".join(kept) + "\n")
    assert se.main(["--run-root", str(bench_root), "--seeds", "0,1", "--table-only", "--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# PARTIAL: 5 of 6 runs finished")
    # seeds=: the seeds finished in every arm (seed 1's linear run is not); outer_batches=: the
    # fewest of a finished run (the unfinished one's 1 is not a run's length)
    assert "2 seed(s) x 2/1 outer batches" in text and "RESULT seeds=1 outer_batches=2 " in text
    assert "seeds_per_arm=tree-fixed-rows:2/tree-fixed-steps:2/linear-fixed-steps:1" in text
    assert "| tree-fixed-steps | 2 |" in text  # both finished
    partial = bench_root / "tree-fixed-steps" / "seed1" / "metrics.jsonl"
    partial.write_text(
        "\n".join(x for x in partial.read_text().splitlines() if json.loads(x)["outer_batch"] == 0) + "\n"
    )
    assert se.main(["--run-root", str(bench_root), "--seeds", "0,1", "--table-only", "--out", str(out)]) == 0
    assert "| tree-fixed-steps | 1 (+1 unfinished) |" in out.read_text()


def tables(text: str) -> str:
    return text[text.index("Table 1.") :]


def test_archived_runs_are_read_back_on_a_machine_without_the_run_root(bench_root, tmp_path, monkeypatch):
    import shutil

    monkeypatch.setattr(
        se, "FLAGS", "--max-staleness 0"
    )  # the miniature's runs: their settings are not FLAGS'

    root, tasks = tmp_path / "runs", tmp_path / "tasks"
    for arm in seed_tables.ARMS:  # seed 0: finished in every arm (the test above cuts seed 1 short)
        shutil.copytree(bench_root / arm / "seed0", root / arm / "seed0")
    (tasks / "train").mkdir(parents=True)
    records = root / "tree-fixed-steps" / "seed0" / "env" / "rollouts" / "results.jsonl"
    records.parent.mkdir(parents=True, exist_ok=True)  # the rollout records migration_learning.py reads
    records.write_text(
        json.dumps({"rollout_id": "eval-b0-profile-0000001-r0", "task": "profile-0000001", "reward": 1.0})
        + "\n"
    )
    archive, out = tmp_path / "archive", tmp_path / "report.txt"
    base = ["--seeds", "0", "--archive", str(archive), "--lock", "", "--out", str(out)]
    assert se.main(["--run-root", str(root), *base, "--table-only"]) == 0
    assert not archive.exists()  # --table-only runs nothing and writes no archive
    before = out.read_text()
    # a run (every run finished: no chunk) archives them
    assert se.main(["--run-root", str(root), "--train-tasks", str(tasks / "train"), *base]) == 0
    assert tables(out.read_text()) == tables(before)
    for arm in seed_tables.ARMS:
        kept = archive / arm / "seed0"
        logs = (
            ["code.jsonl", "env", "metrics.jsonl", "train.json"]
            if arm == "tree-fixed-steps"
            else ["code.jsonl", "metrics.jsonl", "train.json"]
        )
        assert sorted(p.name for p in kept.iterdir()) == logs
        assert (kept / "code.jsonl").read_text() == (root / arm / "seed0" / "code.jsonl").read_text()
        saved = json.loads((kept / "train.json").read_text())
        assert (
            saved["run_dir"] == f"$RUN_ROOT/{arm}/seed0"
            and str(tmp_path) not in (kept / "train.json").read_text()
        )
        assert (kept / "metrics.jsonl").read_bytes() == (root / arm / "seed0" / "metrics.jsonl").read_bytes()
    assert (
        archive / "tree-fixed-steps" / "seed0" / "env" / "rollouts" / "results.jsonl"
    ).read_bytes() == records.read_bytes()
    # a fresh machine: no run root; the finished runs are read back, none is run again (a run would
    # fail: the task directory is empty)
    shutil.rmtree(root)
    assert se.main(["--run-root", str(root), "--train-tasks", str(tasks / "train"), *base]) == 0
    assert not root.exists() or not any(root.rglob("train.json"))
    assert tables(out.read_text()) == tables(before) and "PARTIAL" not in out.read_text()
    # an unfinished archived run is run again; a run directory wins over its archived copy
    metrics = archive / "linear-fixed-steps" / "seed0" / "metrics.jsonl"
    metrics.write_text(metrics.read_text().splitlines()[0] + "\n")
    assert se.main(["--run-root", str(root), *base, "--table-only"]) == 0
    assert out.read_text().startswith("# PARTIAL: 2 of 3 runs finished")
    shutil.copytree(bench_root / "linear-fixed-steps" / "seed0", root / "linear-fixed-steps" / "seed0")
    assert se.main(["--run-root", str(root), *base, "--table-only"]) == 0
    assert tables(out.read_text()) == tables(before)


def test_an_archive_is_refused_a_metrics_log_that_names_the_run_root(
    bench_root, tmp_path, capsys, monkeypatch
):
    import shutil

    monkeypatch.setattr(se, "FLAGS", "--max-staleness 0")  # the miniature's run: its settings are not FLAGS'

    run = tmp_path / "runs" / "linear-fixed-steps" / "seed0"
    shutil.copytree(bench_root / "linear-fixed-steps" / "seed0", run)
    with (run / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"kind": "note", "path": str(run)}) + "\n")
    argv = [
        "--run-root",
        str(tmp_path / "runs"),
        "--seeds",
        "0",
        "--arms",
        "linear-fixed-steps",
        "--lock",
        "",
    ]
    assert se.main([*argv, "--archive", str(tmp_path / "a"), "--train-tasks", str(tmp_path)]) == 2
    assert f"{run / 'metrics.jsonl'} names the run root" in capsys.readouterr().err
    assert not (tmp_path / "a" / "linear-fixed-steps" / "seed0" / "metrics.jsonl").exists()
    # the rollout records too, and a task directory's path as well as the run root's
    shutil.copy(bench_root / "linear-fixed-steps" / "seed0" / "metrics.jsonl", run / "metrics.jsonl")
    records = run / "env" / "rollouts" / "results.jsonl"
    records.parent.mkdir(parents=True, exist_ok=True)
    records.write_text(json.dumps({"workspace": str(tmp_path / "tasks" / "profile-0000001")}) + "\n")
    (tmp_path / "tasks").mkdir()
    assert se.main([*argv, "--archive", str(tmp_path / "a"), "--train-tasks", str(tmp_path / "tasks")]) == 2
    assert f"{records} names the directory {tmp_path / 'tasks'}: not archived" in capsys.readouterr().err
    assert not (tmp_path / "a" / "linear-fixed-steps" / "seed0" / "env").exists()


def test_runs_with_other_settings_are_refused(bench_root, tmp_path):
    import shutil

    for arm in ("tree-fixed-steps", "linear-fixed-steps"):
        shutil.copytree(bench_root / arm / "seed0", tmp_path / arm / "seed0")
    saved = json.loads((tmp_path / "linear-fixed-steps" / "seed0" / "train.json").read_text())
    (tmp_path / "linear-fixed-steps" / "seed0" / "train.json").write_text(json.dumps({**saved, "lr": 0.5}))
    assert se.main(["--run-root", str(tmp_path), "--seeds", "0", "--table-only"]) == 2


def test_a_gateway_in_another_history_mode_is_refused(tok):
    from strands_art.gateway import RolloutGateway

    gateway = RolloutGateway(tok, ScriptedBackend(tok, []), history_mode="linear")
    check_history_mode(None, gateway)
    check_history_mode("linear", gateway)
    with pytest.raises(
        ValueError, match="--history-mode tree: the environment's gateway captures in linear mode"
    ):
        check_history_mode("tree", gateway)


def test_the_bench_commands_run_each_chunk_under_the_lock(tmp_path):
    args = se.parse_args(
        ["--run-root", str(tmp_path), "--train-tasks", str(tmp_path), "--eval-tasks", str(tmp_path)]
    )
    cmd = se.train_command(args, "tree-fixed-rows", 3, tmp_path / "r")
    assert cmd[:2] == ["flock", "/tmp/strands-art-heavy.lock"]
    assert cmd[-7:] == ["--seed", "3", "--run-dir", str(tmp_path / "r"), "--stop-after", "1", "--no-progress"]
    assert cmd[cmd.index("--history-mode") + 1] == "tree" and cmd[cmd.index("--batching") + 1] == "fixed-rows"
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "train.json").write_text("{}")
    assert se.train_command(args, "tree-fixed-rows", 3, tmp_path / "r")[3:7] == [
        "train", "--resume", "--run-dir", str(tmp_path / "r"),
    ]  # fmt: skip
    assert se.order([0, 1], list(seed_tables.ARMS))[:3] == [
        ("tree-fixed-steps", 0), ("linear-fixed-steps", 0), ("tree-fixed-rows", 0),
    ]  # fmt: skip


def test_without_held_out_tasks_the_runs_have_no_evaluation(tmp_path):
    (tmp_path / "train").mkdir()
    args = se.parse_args(["--run-root", str(tmp_path / "runs"), "--train-tasks", str(tmp_path / "train")])
    cmd = se.train_command(args, "linear-fixed-steps", 0, tmp_path / "r")
    assert "--eval-tasks" not in cmd and cmd[cmd.index("--train-tasks") + 1] == str(tmp_path / "train")
    assert "$TASKS/train" in se.shown(args, ["--train-tasks", str(tmp_path / "train")])
    notes = tmp_path / "repo" / "bench" / "results" / "runs" / "NOTES.txt"
    args.notes, args.out = str(notes), str(tmp_path / "elsewhere" / "report.txt")
    assert se.shown(args, ["--notes", str(notes), "--out", args.out]) == (
        f"--notes bench/results/runs/NOTES.txt --out {tmp_path}/elsewhere/report.txt"
    )
    with pytest.raises(SystemExit):
        se.parse_args(["--run-root", str(tmp_path), "--train-tasks", str(tmp_path), "--eval-tasks", "nope"])


def test_a_run_without_held_out_tasks_is_finished_when_every_outer_batch_trained(tmp_path):
    trains = [{"outer_batch": 0}, {"outer_batch": 1}]
    bare = seed_tables.Run(tmp_path, "tree-fixed-steps", 0, {"outer_batches": 2, "eval_tasks": None}, trains)
    assert bare.finished and bare.best is None
    held = seed_tables.Run(tmp_path, "tree-fixed-steps", 0, {"outer_batches": 2, "eval_tasks": "e"}, trains)
    assert not held.finished
    held.evals.append((2, 0.5, 14, 1.0))
    assert (
        held.finished
        and not seed_tables.Run(tmp_path, "tree-fixed-steps", 0, bare.settings, trains[:1]).finished
    )


def test_a_pair_whose_tree_group_tied_is_left_out_of_the_trainers_reductions(tmp_path):
    def run(arm, seed, rows, processed, actor):
        rec = {"outer_batch": 0, "rows": rows, "processed_tokens": processed, "actor_update_s": actor,
               "e2e_s": actor + 100.0, "tokens": 10 * rows, "rollout_s": 100.0, "optimizer_steps": 1}  # fmt: skip
        return seed_tables.Run(tmp_path, arm, seed, {"outer_batches": 1}, [rec])

    runs = [
        run("tree-fixed-steps", 0, 10, 1000, 100.0), run("linear-fixed-steps", 0, 4, 400, 40.0),
        run("tree-fixed-steps", 1, 8, 0, 0.001), run("linear-fixed-steps", 1, 4, 300, 30.0),
    ]  # fmt: skip
    lines, t2 = seed_tables.table2(runs)
    assert t2["trained_batches"] == (1, 2)
    assert t2["reduction"]["processed_tokens"] == pytest.approx(60.0)  # seed 0 only: 1 - 400 / 1000
    assert t2["reduction"]["actor_update_s"] == pytest.approx(60.0)
    assert t2["per_seed"]["actor_update_s"] == [pytest.approx(60.0)]  # not seed 1's 1 - 30 / 0.001
    assert t2["reduction"]["rows"] == pytest.approx(100 * (1 - 8 / 18))  # rows: every pair
    assert any("over the 1 of 2 outer batch(es)" in line for line in lines)


def test_an_outer_batch_that_tied_in_one_arm_is_left_out_of_the_trainers_reductions(tmp_path):
    """The seed bench's shape: one prompt per outer batch, 6 outer batches per run. A kept group that
    tied in one arm trains nothing there (0 tokens, ~0 s) while the other arm's outer batch trained:
    the rollouts' luck, not the capture's. The trainer's totals compare the outer batches both arms
    trained, as they do for a one-batch pair; rows and end-to-end time count every outer batch."""

    def rec(b, rows, processed, actor):
        return {"outer_batch": b, "rows": rows, "processed_tokens": processed, "actor_update_s": actor,
                "e2e_s": actor + 100.0, "tokens": 1000 * rows, "rollout_s": 100.0, "optimizer_steps": 1}  # fmt: skip

    # tree: 16 rows of 1,000 tokens per outer batch, linear 4 rows; tree tied in batches 1-4,
    # linear in batch 5: 6 outer batches each, both trained in batch 0 only
    tree = (
        [rec(0, 16, 16000, 160.0)] + [rec(b, 16, 0, 0.001) for b in range(1, 5)] + [rec(5, 16, 16000, 160.0)]
    )
    linear = [rec(b, 4, 4000, 40.0) for b in range(5)] + [rec(5, 4, 0, 0.001)]
    runs = [
        seed_tables.Run(tmp_path / "t", "tree-fixed-steps", 0, {"outer_batches": 6}, tree),
        seed_tables.Run(tmp_path / "l", "linear-fixed-steps", 0, {"outer_batches": 6}, linear),
    ]
    lines, t2 = seed_tables.table2(runs)
    # over outer batch 0 alone: 1 - 4,000 / 16,000 (over the whole runs it read 1 - 20,000 / 32,000)
    assert t2["reduction"]["processed_tokens"] == pytest.approx(75.0)
    assert t2["reduction"]["actor_update_s"] == pytest.approx(75.0)
    assert t2["per_seed"]["processed_tokens"] == [pytest.approx(75.0)]
    assert t2["reduction"]["rows"] == pytest.approx(75.0)  # every outer batch: 1 - 24 / 96
    e2e_tree, e2e_linear = 2 * 260.0 + 4 * 100.001, 5 * 140.0 + 100.001  # e2e_s = actor + 100 s
    assert t2["reduction"]["e2e_s"] == pytest.approx(100 * (1 - e2e_linear / e2e_tree))
    assert t2["trained_batches"] == (1, 6)
    assert any("over the 1 of 6 outer batch(es)" in line for line in lines)


def test_a_dynamically_sampled_outer_batch_shows_what_it_drew(tmp_path):
    rec = {"outer_batch": 0, "rows": 4, "optimizer_steps": 1, "zero_advantage_groups": 0,
           "groups_drawn": 2, "rollouts_drawn": 8, "groups_with_signal": 1}  # fmt: skip
    plain = {"outer_batch": 0, "rows": 4, "optimizer_steps": 1}
    settings = {"outer_batches": 1, "eval_tasks": None}
    lines, _t1, _t2 = seed_tables.report([
        seed_tables.Run(tmp_path / "a", "tree-fixed-steps", 0, settings, [rec]),
        seed_tables.Run(tmp_path / "b", "linear-fixed-steps", 0, settings, [plain]),
    ])  # fmt: skip
    batch_lines = [line for line in lines if "outer batch 0:" in line]
    assert batch_lines[0].endswith("tied groups 0, drawn 2 groups / 8 rollouts (1 with signal)")
    assert batch_lines[1].endswith("tied groups 0")  # no --max-draws: nothing about draws


def copy_run(src: Path, dest_root: Path, arm: str, lines: int | None = None) -> Path:
    """What the tables read of ``src``'s seed-0 run of ``arm`` (train.json, the first ``lines`` lines
    of metrics.jsonl) copied to ``dest_root/ARM/seed0``, with held-out task directories named as the
    bench's runs have (a run is finished once the evaluation after its last outer batch is in)."""
    dest = dest_root / arm / "seed0"
    dest.mkdir(parents=True)
    settings = json.loads((src / arm / "seed0" / "train.json").read_text())
    (dest / "train.json").write_text(
        json.dumps({**settings, "eval_tasks": str(dest_root / "tasks" / "eval")})
    )
    kept = (src / arm / "seed0" / "metrics.jsonl").read_text().splitlines(keepends=True)[:lines]
    (dest / "metrics.jsonl").write_text("".join(kept))
    return dest


def chunks_by_copy(monkeypatch, source: Path) -> list[tuple[str, int]]:
    """Make each chunk a process that copies the next outer batch of ``source``'s run into the run
    directory (its first two metrics lines, then two more per chunk: an evaluation and a batch),
    as ``strands-art train --stop-after 1`` would write them; the chunks run are listed. FLAGS is
    emptied: the runs were made with the miniature's settings, which a run's --extra check compares;
    held-out task directories are named, as in copy_run."""
    calls: list[tuple[str, int]] = []
    monkeypatch.setattr(
        se, "FLAGS", "--max-staleness 0"
    )  # the runs copied were made with the miniature's settings
    code = (
        "import json, pathlib, sys; src, dst = map(pathlib.Path, sys.argv[1:]); dst.mkdir(parents=True, exist_ok=True)\n"
        "settings = json.loads((src / 'train.json').read_text()); settings['eval_tasks'] = str(dst / 'eval')\n"
        "(dst / 'train.json').write_text(json.dumps(settings))\n"
        "have = (dst / 'metrics.jsonl').read_text().splitlines(True) if (dst / 'metrics.jsonl').exists() else []\n"
        "lines = (src / 'metrics.jsonl').read_text().splitlines(True)\n"
        "(dst / 'metrics.jsonl').write_text(''.join(lines[: len(have) + 2]))\n"
    )

    def command(args, arm, seed, run_dir):
        calls.append((arm, seed))
        return [sys.executable, "-c", code, str(source / arm / f"seed{seed}"), str(run_dir)]

    monkeypatch.setattr(se, "train_command", command)
    return calls


def test_table_only_writes_no_archive_and_a_copy_behind_a_finished_one_is_refused(
    bench_root, tmp_path, monkeypatch, capsys
):
    """The review's case: a partial run under --run-root, the finished run archived; --table-only
    used to archive the partial copy over the finished one (8 metrics lines became 2)."""
    root, archive, out = tmp_path / "runs", tmp_path / "archive", tmp_path / "report.txt"
    kept = copy_run(bench_root, archive, "tree-fixed-steps")
    copy_run(bench_root, root, "tree-fixed-steps", lines=2)  # evaluation 0, outer batch 0
    out.write_text("an earlier report\n")
    before = (kept / "metrics.jsonl").read_bytes()
    assert len(before.splitlines()) == 5  # evaluation 0, batch 0, evaluation 1, batch 1, evaluation 2
    argv = ["--run-root", str(root), "--archive", str(archive), "--seeds", "0", "--arms", "tree-fixed-steps"]
    calls = chunks_by_copy(monkeypatch, bench_root)
    for mode in (["--table-only"], ["--train-tasks", str(tmp_path), "--lock", ""]):
        assert se.main([*argv, *mode, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert (
            f"the archived copy {kept} (2 of 2 outer batches, 3 evaluation(s), finished) is further than the run "
            f"directory's {root / 'tree-fixed-steps' / 'seed0'} (1 of 2 outer batches, 1 evaluation(s), NOT FINISHED)"
        ) in err
        assert calls == [] and (kept / "metrics.jsonl").read_bytes() == before
        assert out.read_text() == "an earlier report\n"
    # the run directory's copy ahead of the archived one: read, and still not archived by --table-only
    (kept / "metrics.jsonl").write_bytes(b"".join(before.splitlines(keepends=True)[:1]))
    (root / "tree-fixed-steps" / "seed0" / "metrics.jsonl").write_bytes(before)
    assert se.main([*argv, "--table-only", "--out", str(out)]) == 0
    assert "PARTIAL" not in out.read_text() and len((kept / "metrics.jsonl").read_bytes().splitlines()) == 1


def test_an_archived_run_is_never_replaced_by_a_copy_behind_it(bench_root, tmp_path, monkeypatch, capsys):
    """An unfinished archived run with no run directory is run again from its start; its archived
    copy stays until the new run is as far, then follows it."""
    root, archive = tmp_path / "runs", tmp_path / "archive"
    kept = copy_run(bench_root, archive, "linear-fixed-steps", lines=3)  # 1 outer batch, 2 evaluations
    calls = chunks_by_copy(monkeypatch, bench_root)
    argv = ["--run-root", str(root), "--archive", str(archive), "--seeds", "0", "--arms", "linear-fixed-steps",
            "--train-tasks", str(tmp_path), "--lock", ""]  # fmt: skip
    full = (
        (bench_root / "linear-fixed-steps" / "seed0" / "metrics.jsonl").read_text().splitlines(keepends=True)
    )
    assert se.main([*argv, "--max-chunks", "1"]) == 0
    err = capsys.readouterr().err
    assert (
        "the archived copy" in err
        and "is unfinished and has no run directory: run again from its start" in err
    )
    assert f"note: {kept} (1 of 2 outer batches, 2 evaluation(s), NOT FINISHED) kept: " in err
    assert (kept / "metrics.jsonl").read_text() == "".join(full[:3])  # the new run has 1 evaluation
    assert se.main([*argv, "--max-chunks", "1"]) == 0  # 2 outer batches, 2 evaluations: as far, and further
    assert (kept / "metrics.jsonl").read_text() == "".join(full[:4])
    assert "# PARTIAL: 0 of 1 runs finished" in capsys.readouterr().out
    assert se.main(argv) == 0
    assert (kept / "metrics.jsonl").read_text() == "".join(full) and calls == [("linear-fixed-steps", 0)] * 3
    assert "PARTIAL" not in capsys.readouterr().out


def test_copies_of_a_run_with_other_settings_are_refused(bench_root, tmp_path, capsys):
    import seed_archive

    root, archive = tmp_path / "runs", tmp_path / "archive"
    here = copy_run(bench_root, root, "tree-fixed-steps")
    kept = copy_run(bench_root, archive, "tree-fixed-steps", lines=2)
    (kept / "train.json").write_text(json.dumps({**json.loads((kept / "train.json").read_text()), "lr": 0.5}))
    with pytest.raises(
        ValueError, match=f"{here} not archived: its archived copy {kept} differs in lr \\(0.01 vs 0.5\\)"
    ):
        seed_archive.archive_runs({}, root, archive, [("tree-fixed-steps", 0)])
    assert se.main(["--run-root", str(root), "--archive", str(archive), "--seeds", "0", "--table-only"]) == 2
    assert (
        f"{here} and its archived copy {kept} differ in lr (0.01 vs 0.5): two runs, not one"
        in capsys.readouterr().err
    )


def test_a_run_whose_torn_last_line_may_be_its_final_evaluation_is_not_run_again(
    bench_root, tmp_path, monkeypatch, capsys
):
    root, archive, out = tmp_path / "runs", tmp_path / "archive", tmp_path / "report.txt"
    here = copy_run(bench_root, root, "linear-fixed-steps")
    text = (here / "metrics.jsonl").read_text()
    (here / "metrics.jsonl").write_text(
        text[: text.rindex("\n", 0, -1) + 20]
    )  # the final evaluation cut short
    argv = ["--run-root", str(root), "--seeds", "0", "--arms", "linear-fixed-steps", "--out", str(out)]
    assert se.main([*argv, "--table-only"]) == 0
    report = out.read_text()
    assert "linear-fixed-steps seed 0: 2/2 (UNSURE: metrics.jsonl's last line, 5, is cut short" in report
    assert "# UNSURE runs (see their lines)" in report and "NOT FINISHED" not in report
    assert f"warning: {here / 'metrics.jsonl'}:5: the last line has no newline" in capsys.readouterr().err
    calls = chunks_by_copy(monkeypatch, bench_root)
    assert se.main([*argv, "--train-tasks", str(tmp_path), "--lock", "", "--archive", str(archive)]) == 2
    assert (
        f"{here / 'metrics.jsonl'}:5: the last line is cut short and every outer batch trained"
        in capsys.readouterr().err
    )
    assert calls == [] and not archive.exists()
    # the same torn copy archived, no run directory: not run again from its start either
    archive.mkdir()
    (root / "linear-fixed-steps").rename(archive / "linear-fixed-steps")
    assert se.main([*argv, "--train-tasks", str(tmp_path), "--lock", "", "--archive", str(archive)]) == 2
    assert calls == [] and not any(root.iterdir())


@pytest.mark.parametrize("mode", ["table-only", "run"])
def test_run_files_that_cannot_be_read_exit_2_naming_file_and_line(
    bench_root, tmp_path, monkeypatch, capsys, mode
):
    root, archive = tmp_path / "runs", tmp_path / "archive"
    copy_run(bench_root, root, "tree-fixed-steps")
    kept = copy_run(bench_root, archive, "linear-fixed-steps")
    lines = (kept / "metrics.jsonl").read_text().splitlines(keepends=True)
    (kept / "metrics.jsonl").write_text(
        "".join([*lines[:2], '{"kind": "eval", "outer_batch": 1}\n', *lines[3:]])
    )
    calls = chunks_by_copy(monkeypatch, bench_root)
    argv = ["--run-root", str(root), "--archive", str(archive), "--seeds", "0", "--lock", ""]
    argv += ["--table-only"] if mode == "table-only" else ["--train-tasks", str(tmp_path)]
    assert se.main(argv) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"seed_experiments.py: {kept / 'metrics.jsonl'}:3 (eval record): 'val_reward' must be a number (no such key)\n"
    )
    assert calls == [] and not (root / "tree-fixed-rows").exists()
    (kept / "train.json").write_text('{"seed": 0,')
    assert se.main(argv) == 2
    assert f"{kept / 'train.json'}:1: not JSON" in capsys.readouterr().err and calls == []


def test_an_extra_other_than_the_runs_is_refused(tmp_path, capsys):
    from strands_art.training.settings import DEFAULTS

    extra = "--max-turns 4 --outer-batches 3"
    given = rs.given_settings(
        [*se.FLAGS.split(), *extra.split(), *se.ARM_FLAGS["tree-fixed-steps"], "--seed", "0"]
    )
    assert (given["max_turns"], given["outer_batches"], given["lr"], given["batching"]) == (
        4,
        3,
        3e-4,
        "fixed-steps",
    )
    run = tmp_path / "runs" / "tree-fixed-steps" / "seed0"
    run.mkdir(parents=True)
    (run / "train.json").write_text(
        json.dumps({"env": "migrationbench", **DEFAULTS, **given, "run_dir": str(run)})
    )
    argv = ["--run-root", str(tmp_path / "runs"), "--seeds", "0", "--arms", "tree-fixed-steps", "--lock", "",
            "--train-tasks", str(tmp_path), "--max-chunks", "0", "--out", str(tmp_path / "r.txt")]  # fmt: skip
    assert se.main([*argv, "--extra", extra]) == 0  # the run's own settings: nothing refused
    assert "max_turns=4 " in (tmp_path / "r.txt").read_text()
    # compared by meaning, as --resume compares: --max-draws equal to --prompt-batch is the default
    # the run left unset, and --old-logprobs auto is what auto resolves to at --max-staleness 0
    assert given.get("max_draws") is None
    assert se.main([*argv, "--extra", f"{extra} --max-draws 2 --old-logprobs rollout"]) == 0
    assert se.main([*argv, "--extra", f"{extra} --max-draws 3"]) == 2
    assert "--max-draws 3 (the run has 2)" in capsys.readouterr().err
    assert se.main([*argv, "--extra", "--max-turns 5 --outer-batches 3"]) == 2
    assert capsys.readouterr().err == (
        f"seed_experiments.py: --extra '--max-turns 5 --outer-batches 3': {run} was started with other settings: "
        "--max-turns 5 (the run has 4); pass the --extra it was started with (its train.json holds every "
        "setting), or another --run-root and --archive\n"
    )
    assert se.main(argv) == 2  # FLAGS alone: 12 turns, 6 outer batches
    err = capsys.readouterr().err
    assert "--outer-batches 6 (the run has 3)" in err and "--max-turns 12 (the run has 4)" in err
    with pytest.raises(SystemExit):
        se.parse_args([*argv, "--extra=--no-such-flag"])
    assert (
        "--extra '--no-such-flag' with arm tree-fixed-steps: not `strands-art train` flags"
        in capsys.readouterr().err
    )
    # --table-only reads what the runs used: the line does not follow --extra
    assert (
        se.main([*argv[:6], "--table-only", "--extra", "--max-turns 9", "--out", str(tmp_path / "r.txt")])
        == 0
    )
    assert (
        "max_turns=4 " in (tmp_path / "r.txt").read_text()
        and "max_turns=9" not in (tmp_path / "r.txt").read_text()
    )
    assert "note (--table-only reports the runs' own settings): --extra '--max-turns 9': " in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--seeds", "0,0"], "--seeds '0,0': a seed given twice"),
        (["--seeds", "1,2,1"], "--seeds '1,2,1': a seed given twice"),
        (["--arms", "tree-fixed-steps,tree-fixed-steps"], "--arms 'tree-fixed-steps,tree-fixed-steps': an arm given twice"),
        (["--arms", "tree-fixed-steps,linear"], "--arms: unknown ['linear']"),
        (["--seeds", "0,x"], "--seeds '0,x': comma-separated non-negative integers"),
    ],
)  # fmt: skip
def test_seeds_and_arms_given_twice_are_refused(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as exc:
        se.parse_args(["--run-root", str(tmp_path), "--table-only", *flags])
    assert exc.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--table-only", "--archive", "{root}"], "the run root, or a folder in or around it"),
        (["--table-only", "--archive", "{root}/kept"], "the run root, or a folder in or around it"),
        ([], "--train-tasks is needed to run (--table-only runs nothing)"),
    ],
)
def test_an_archive_around_the_run_root_and_a_run_without_tasks_are_refused(tmp_path, capsys, argv, message):
    root = tmp_path / "runs"
    with pytest.raises(SystemExit) as exc:
        se.parse_args(["--run-root", str(root), *(a.format(root=root) for a in argv)])
    assert exc.value.code == 2 and message in capsys.readouterr().err and not root.exists()


def test_the_result_line_counts_the_seeds_finished_in_every_arm_asked_for(bench_root, tmp_path, capsys):
    root = tmp_path / "runs"
    for arm in ("tree-fixed-steps", "linear-fixed-steps"):
        copy_run(bench_root, root, arm)
    copy_run(bench_root, root, "tree-fixed-rows", lines=2)
    argv = ["--run-root", str(root), "--seeds", "0", "--table-only"]

    def result(arms: str) -> dict[str, str]:
        assert se.main([*argv, "--arms", arms]) == 0
        return dict(re.findall(r" (\w+)=(\S+)", capsys.readouterr().out.strip().splitlines()[-1]))

    pair = result("tree-fixed-steps,linear-fixed-steps")
    assert pair["seeds"] == "1" and pair["outer_batches"] == "2"
    assert pair["best_fixed_rows"] == pair["steps_per_batch_fixed_rows"] == "n/a"
    assert (
        re.fullmatch(r"-?\d+\.\d\d%", pair["rows_reduction"]) and pair["steps_per_batch_fixed_steps"] == "1"
    )
    assert re.fullmatch(r"[\d.]+\+-0\.000", pair["best_tree"]) and re.fullmatch(
        r"[\d.]+\+-0\.000", pair["best_linear"]
    )
    alone = result("tree-fixed-steps")
    assert alone["seeds"] == "1" and alone["best_fixed_steps"] == pair["best_tree"]
    assert [
        alone[k] for k in ("rows_reduction", "tokens_reduction", "actor_s_reduction", "e2e_reduction")
    ] == ["n/a"] * 4
    assert (
        alone["best_tree"] == pair["best_tree"] and alone["best_linear"] == alone["best_fixed_rows"] == "n/a"
    )
    everything = result(",".join(seed_tables.ARMS))  # tree-fixed-rows: 1 of 2 outer batches
    # no seed finished in every arm; outer_batches= is the finished runs' length, not the unfinished one's
    assert everything["seeds"] == "0" and everything["outer_batches"] == "2"
    assert (
        everything["steps_per_batch_fixed_rows"] != "n/a"
        and everything["rows_reduction"] == pair["rows_reduction"]
    )


def test_nothing_to_report_and_bad_paths_are_refused_before_anything_runs(tmp_path, capsys):
    out = tmp_path / "report.txt"
    out.write_text("the last report\n")
    typo = tmp_path / "runz"
    assert se.main(["--run-root", str(typo), "--seeds", "0", "--table-only", "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"seed_experiments.py: no run of --seeds 0 --arms {','.join(seed_tables.ARMS)} in {typo}: nothing to report "
        f"(--out {out} left as it is)\n"
    )
    assert out.read_text() == "the last report\n" and not typo.exists()
    run = ["--run-root", str(typo), "--train-tasks", str(tmp_path), "--lock", ""]
    for flags, message in (
        (["--notes", str(tmp_path / "NOTES.txt")], f"--notes {tmp_path / 'NOTES.txt'}: no such file"),
        (["--out", str(tmp_path / "no" / "r.txt")], f"--out {tmp_path / 'no' / 'r.txt'}: not a file in a writable directory"),
        (["--out", str(tmp_path)], f"--out {tmp_path}: not a file in a writable directory"),
    ):  # fmt: skip
        with pytest.raises(SystemExit):
            se.main([*run, *flags])
        assert message in capsys.readouterr().err and not typo.exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            "--lr -1",
            "--extra '--lr -1' with arm tree-fixed-rows: --lr must be a finite number in (0, 1000], got -1.0",
        ),
        ("--max-draws 0", "--max-draws"),
        ("--bogus 1", "not `strands-art train` flags"),
        ("--max-staleness 1", "--extra '--max-staleness 1' with arm tree-fixed-rows: --batching fixed-rows"),
        ("--seed 5 --env lookup", "--env, --seed: the bench sets these itself"),
    ],
)
def test_flags_train_would_refuse_are_refused_before_anything_runs(tmp_path, capsys, extra, message):
    """Values out of range or sizes that do not fit are refused as `strands-art train` refuses
    them, before the run root, a lock or a run (it used to parse the flags only)."""
    (tmp_path / "tasks").mkdir()
    root = tmp_path / "runs"
    argv = ["--run-root", str(root), "--train-tasks", str(tmp_path / "tasks"), "--lock", "", "--extra", extra]
    with pytest.raises(SystemExit) as exc:
        se.main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err and not root.exists()


def test_a_file_as_run_root_and_negative_max_chunks_are_refused(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    for argv, message in (
        (["--run-root", str(tmp_path / "f"), "--table-only"], "not a directory (a file is there)"),
        (
            ["--run-root", str(tmp_path / "r"), "--train-tasks", str(tmp_path), "--max-chunks", "-1"],
            "--max-chunks must be >= 0",
        ),
    ):
        with pytest.raises(SystemExit) as exc:
            se.main(argv)
        assert exc.value.code == 2 and message in capsys.readouterr().err


def test_runs_of_more_than_one_commit_are_marked():
    """A series whose runs ran other code (or did not record it) says so in the report's header."""

    def run(*code: dict) -> seed_tables.Run:
        return seed_tables.Run(Path("r"), "tree-fixed-steps", 0, {"outer_batches": 1}, code=list(code))

    a, b = {"commit": "a" * 40, "dirty": False, "from_batch": 0}, {"commit": "b" * 40, "dirty": False}
    assert seed_tables.code_note([r.commits for r in [run(a), run(a, a)]]) is None
    assert run(a, b, a).commits == ["a" * 12, "b" * 12]
    assert seed_tables.code_note([r.commits for r in [run(a), run(a, b)]]) == (
        f"# CODE: the runs ran 2 commit(s): {'a' * 12}, {'b' * 12} (each run's line names its own)"
    )
    assert seed_tables.code_note([r.commits for r in [run(a), run()]]) == (
        f"# CODE: 1 run(s) did not record their code (started before code.jsonl); the others ran {'a' * 12}"
    )
    assert "+dirty" in seed_tables.code_note([r.commits for r in [run({**a, "dirty": True})]])
    assert (
        seed_tables.code_note([r.commits for r in [run(), run()]]) is None
    )  # nothing recorded: each line says "not recorded"
    assert run({"commit": None, "dirty": None}).commits == ["?"]
    # a run resumed under recorded code after batches that ran unrecorded code: not one known commit
    resumed = run({**a, "resume": True, "from_batch": 2})
    assert resumed.commits == ["?", "a" * 12] and seed_tables.code_note(
        [r.commits for r in [resumed]]
    ).startswith("# CODE: the runs ran 2")
    assert run({**a, "dirty": None}).commits == ["a" * 12 + "+dirty?"]  # status unknown: not clean
