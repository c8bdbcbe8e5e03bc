"""bench/update_cost.py's arithmetic on run directories written here (no model, no Maven)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))  # the bench imports its siblings
_spec = importlib.util.spec_from_file_location("update_cost", ROOT / "bench" / "update_cost.py")
uc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(uc)


def _run(d: Path, trains: list[dict], evals: list[tuple[int, float, float]], hits: list[bool]) -> None:
    d.mkdir(parents=True)
    (d / "train.json").write_text(json.dumps({"outer_batches": len(trains)}))
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
    summary = uc.summarize(tmp_path, [0])
    b, a = summary["arms"]["before"], summary["arms"]["after"]
    assert (b["s_per_update"], b["s_per_eval"], b["useful_steps"]) == (650, 800, 1)
    assert b["useful_steps_per_hour"] == 1 / (1300 / 3600)
    assert (a["s_per_update"], a["useful_steps"], a["rollouts_per_update"]) == (250, 3, 10)
    assert summary["runs"]["after-seed0"]["finished"] is True
    assert (a["memo_hits"], a["memo_saved_s"], b["memo_hits"]) == (0 + 1 + 2 + 3, 60.0, 0)
    assert "Maven memo 6 builds / 60 s saved" in uc.report(summary)
    line = uc.report(summary).splitlines()[-1]
    ratio = (3 / (500 / 3600)) / (1 / (1300 / 3600))
    assert line == (
        f"RESULT s_per_update_before=650 s_per_update_after=250 s_per_eval_before=800 s_per_eval_after=250 "
        f"useful_steps_per_hour_ratio={ratio:.2f} cache_hit_rate=0.75 heldout_before=0.500+-0.000 "
        f"heldout_after=0.600+-0.000"
    )


def test_arms_alternate_and_each_run_takes_the_lock(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("STRANDS_ART_EVAL_CACHE", "off")
    monkeypatch.setenv("STRANDS_ART_MAVEN_MEMO", "off")
    args = uc.parse_args(
        ["--run-root", str(tmp_path), "--train-tasks", "T", "--eval-tasks", "E", "--lock", "L"]
    )
    cmd, env = uc.command(args, "before", 0, tmp_path / "before-seed0")
    assert cmd[:2] == ["flock", "L"] and "--max-draws" not in cmd
    assert env["STRANDS_ART_EVAL_CACHE"] == env["STRANDS_ART_MAVEN_MEMO"] == "off"
    cmd, env = uc.command(args, "after", 0, tmp_path / "after-seed0")
    assert (
        "STRANDS_ART_EVAL_CACHE" not in env
        and "STRANDS_ART_MAVEN_MEMO" not in env
        and cmd[cmd.index("--max-draws") + 1] == "4"
    )
