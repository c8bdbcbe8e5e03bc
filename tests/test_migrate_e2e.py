"""``strands-art migrate`` end to end: the reference migration played through ARTModel and the gateway.

The scripted backend (real Qwen3 tokenizer, Hermes tool calls) plays each task's
``reference.patch`` as ``file_editor`` ``create`` calls, runs ``mvn -q clean verify`` through the
sandboxed offline ``mvn`` wrapper, and answers. Everything else is real: the Strands agent loop,
ARTModel, the gateway's rendering / capture / parsing, the tools, the evaluator's Maven build,
results.jsonl, the trajectory store, the summary table and plot. Needs JDK 17 + Maven + the
Debian Maven repository (``-m maven``); about a minute per rollout on two busy cores.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from rich.console import Console
from support.migrate_script import FINAL_ANSWER, ReferencePlayer, patched_files

from strands_art.backends.scripted import ScriptedBackend
from strands_art.cli import build_parser
from strands_art.envs.migrationbench.run.runner import run_migration
from strands_art.envs.migrationbench.tasks.tasks import load_tasks
from strands_art.store import TrajectoryStore

pytestmark = pytest.mark.maven


@pytest.mark.parametrize(
    ("mode", "names"),
    [("tree", ["compiler-props", "sun-base64"]), ("linear", ["sun-base64"])],
)
async def test_reference_migration_scores_one(mode: str, names: list[str], tmp_path: Path, qwen3) -> None:
    tasks = load_tasks(None, names)
    files = {t.name: patched_files(t, tmp_path / "patched") for t in tasks}
    player = ReferencePlayer(qwen3, {t.name: (t, files[t.name]) for t in tasks})
    backend = ScriptedBackend(qwen3, player)
    run_dir = tmp_path / "run"
    argv = ["migrate", "--tasks", *names, "--history-mode", mode, "--model", "qwen3-scripted"]
    argv += ["--run-dir", str(run_dir), "--max-turns", "10", "--seed", "11", "--concurrency", "2"]
    args = build_parser().parse_args(argv)
    out = io.StringIO()
    results = await run_migration(
        args, Console(file=out, width=200), backend_factory=lambda a: (backend, qwen3)
    )

    assert [r["rollout_id"] for r in results] == [f"{n}-r0" for n in names]
    by_task = {t.name: t for t in tasks}
    for i, rec in enumerate(results):
        task, n_files = by_task[rec["task"]], len(files[rec["task"]])
        assert rec["reward"] == 1.0, rec
        assert rec["build_success"] and rec["java17_bytecode"] and rec["tests_equivalent"]
        assert rec["tests_required"] == task.num_test_cases
        assert rec["tests_run"] >= task.num_test_cases
        assert (rec["stop_reason"], rec["error"]) == ("completed", None)
        assert rec["seed"] == 11 + i
        # cat pom.xml, one create per patched file, mvn, final answer
        assert rec["turns"] == n_files + 3
        assert rec["token_capture"] is True
        assert rec["rows"] == 1 and rec["forks"] == 0 and rec["ill_formed_turns"] == 0
        assert rec["tokens"] > rec["sampled_tokens"] > 0
        # every answer ended with a stop: GRPO trains every sampled token
        assert rec["trained_tokens"] == rec["sampled_tokens"]
        assert rec["truncated_turns"] == rec["cut_turns"] == 0
        stats = rec["tool_stats"]
        assert stats["calls"] == {"shell": 2, "file_editor": n_files} and stats["errors"] == {}
        assert stats["maven_calls"] == 1 and stats["timeouts"] == 0
        times = rec["times"]
        assert set(times) == {
            "tools_s",
            "maven_s",
            "evaluation_s",
            "sampling_s",
            "gateway_s",
            "setup_s",
            "wall_s",
        }
        assert 0 < times["evaluation_s"] < times["maven_s"] < times["wall_s"]
        assert 0 < times["setup_s"] < times["wall_s"] - times["evaluation_s"]
        assert rec["eval_cache_hit"] is False  # each task's tree once: every verdict evaluated
        ed = rec["edited_files"]  # the audit: exactly the reference's files, the build outputs left out
        assert sorted(ed["modified"] + ed["added"]) == sorted(files[rec["task"]]), ed
        assert ed["deleted"] == [] and ed["truncated"] is False
        assert times["sampling_s"] >= 0 and times["gateway_s"] > 0

    # results.jsonl and the trajectory store hold the same rollouts, rewards attached to rows
    lines = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted(x["rollout_id"] for x in lines) == sorted(r["rollout_id"] for r in results)
    trajs = {t.rollout_id: t for t in TrajectoryStore(run_dir / "trajectories")}
    assert set(trajs) == {r["rollout_id"] for r in results}
    for traj in trajs.values():
        assert traj.reward == 1.0 and [row.reward for row in traj.rows] == [1.0]
        assert traj.metadata["evaluation"]["reward"] == 1.0
        kinds = [e["kind"] for e in traj.events]
        assert "fork" not in kinds and "reset" not in kinds and "rewrite" not in kinds, traj.events
        row = traj.rows[0]
        assert row.turns == list(range(len(traj.turns)))
        assert sum(row.loss_mask) == sum(len(t.output_ids) for t in traj.turns)
        if mode == "linear":
            h = row.metadata["history"]  # LinearHistory counters: one lineage, every turn, no reset
            assert (h["lineages"], h["turns"], h.get("resets", 0)) == (1, len(traj.turns), 0), h
        # the final answer is the row's last sampled text
        assert qwen3.decode(traj.turns[-1].output_ids).startswith(FINAL_ANSWER)
    assert (run_dir / "config.json").is_file() and (run_dir / "summary.png").stat().st_size > 0
    # workspaces and build scratch removed, then the emptied workspaces dir (or its link and target)
    assert not os.path.lexists(run_dir / "workspaces")

    # the prompts were real: each tool's result is in the next prompt of that rollout
    mvn_prompts = [
        p
        for (name, step), p in zip(player.steps, player.prompts, strict=True)
        if name and step == len(files[name]) + 2
    ]
    assert len(mvn_prompts) == len(names)
    for p in mvn_prompts:
        last = p.rsplit("<tool_response>", 1)[1]
        assert "[exit code: 0]" in last, last[-2000:]
        assert p.count("<tool_response>") == p.count('<tool_call>\n{"name": "')
    create_prompts = [p for (name, step), p in zip(player.steps, player.prompts, strict=True) if step == 2]
    assert create_prompts and all("Error" not in p.rsplit("<tool_response>", 1)[1] for p in create_prompts)

    text = out.getvalue()
    assert "MigrationBench results" in text and f"mean reward 1.000 over {len(names)} rollouts" in text
