"""``strands-art migrate`` run control: the litellm baseline, Ctrl-C + ``--resume``, ``--seed``.

Tasks here are tiny task directories without a ``pom.xml`` (the evaluator scores them 0.0 with
``details.error`` and runs no build), so these tests are fast; the agent, its real tools (the
shell runs in the sandbox), ARTModel, the gateway, results.jsonl and the trajectory store are the
real ones. The hosted model is a local fake OpenAI-compatible server (tests/support/fake_openai.py).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before anything imports litellm

import io
import json
import re
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from support.fake_openai import FakeOpenAI, Reply
from support.migrate_script import ShellThenAnswer

from strands_art.backends.base import turn_seed
from strands_art.backends.scripted import ScriptedBackend
from strands_art.cli import build_parser
from strands_art.envs.migrationbench.agent.agent import RolloutLimits, build_agent, run_agent, user_prompt
from strands_art.envs.migrationbench.run.runner import main_from_args, run_migration
from strands_art.envs.migrationbench.tasks.tasks import RECORD_FIELDS
from strands_art.envs.migrationbench.workspace import Workspace
from strands_art.invocation import strands_art_command
from strands_art.store import TrajectoryStore

pytestmark = pytest.mark.skipif(shutil.which("mvn") is None, reason="the agent's tool env needs Maven")

REPO_PATH_RE = re.compile(r"Please help migrate this repo: (\S+)\. There are")


@pytest.fixture(autouse=True)
def _no_offline_seeding(monkeypatch: pytest.MonkeyPatch) -> None:
    """No Maven runs here: skip seeding each rollout's local repository for offline builds."""
    monkeypatch.setenv("STRANDS_ART_MAVEN_OFFLINE", "0")


@pytest.fixture
def tasks_dir(tmp_path: Path) -> Path:
    """Two task directories whose repos have no pom.xml (evaluation: 0.0, no Maven build)."""
    root = tmp_path / "tasks"
    for name in ("alpha", "beta"):
        d = root / name
        (d / "repo").mkdir(parents=True)
        (d / "repo" / "NOTES.txt").write_text(f"task {name}\n")
        record: dict[str, Any] = dict.fromkeys(RECORD_FIELDS, 0)
        record.update(repo=f"tests/{name}", base_commit="0" * 40, num_test_cases=2, license="Apache-2.0")
        (d / "task.json").write_text(json.dumps(record))
    return root


def _args(*argv: str):
    return build_parser().parse_args(["migrate", "--no-plot", "--max-turns", "4", *argv])


def _results(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


# ---------------------------------------------------------------------------- litellm baseline
def _shell_then_answer(body: dict[str, Any], index: int) -> Reply:
    if not any(m["role"] == "tool" for m in body["messages"]):
        return Reply(tool_calls=[("shell", {"command": "ls"})])
    return Reply(content="Nothing to migrate here.")


async def test_litellm_baseline_runs_real_tools_without_token_capture(
    tasks_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    server = await FakeOpenAI(_shell_then_answer).start()
    try:
        run_dir = tmp_path / "run"
        args = _args(
            "--backend", "litellm", "--model", "openai/fake-model", "--base-url", server.url,
            "--tasks-dir", str(tasks_dir), "--tasks", "alpha", "--run-dir", str(run_dir), "--seed", "21",
            "--max-new-tokens", "300",
        )  # fmt: skip
        out = io.StringIO()
        results = await run_migration(args, Console(file=out, width=200))
    finally:
        await server.stop()

    [rec] = results
    assert rec["rollout_id"] == "alpha-r0" and rec["token_capture"] is False
    assert (rec["stop_reason"], rec["error"], rec["turns"]) == ("completed", None, 2)
    assert rec["reward"] == 0.0 and rec["build_success"] is False  # no pom.xml: scored, not built
    assert "rows" not in rec and "sampling_s" not in rec["times"]
    assert rec["tool_stats"]["calls"] == {"shell": 1} and rec["tool_stats"]["errors"] == {}
    assert _results(run_dir) == results
    assert not (run_dir / "trajectories").exists() or not list(TrajectoryStore(run_dir / "trajectories"))
    assert "no token capture" in out.getvalue()
    assert f"browse it: {strands_art_command()} view {run_dir}" in out.getvalue()  # this run's viewer command

    # what the hosted model was sent: streaming, the agent's tools, the run's sampling, then the
    # real `ls` output of the workspace as the tool result
    first, second = server.requests
    assert first["model"] == "fake-model" and first["stream"] is True
    assert {t["function"]["name"] for t in first["tools"]} == {"shell", "file_editor"}
    assert first["seed"] == 21 and first["temperature"] == 0.7 and first["max_tokens"] == 300
    assert first["messages"][0]["role"] == "system"
    user = json.dumps(first["messages"][1]["content"])
    assert "Please help migrate this repo:" in user and "There are 2 test cases in it." in user
    [tool_msg] = [m for m in second["messages"] if m["role"] == "tool"]
    assert tool_msg["tool_call_id"] == "call_0_0"
    text = json.dumps(tool_msg["content"])
    assert "NOTES.txt" in text and "[exit code: 0]" in text


async def test_litellm_non_streaming_tool_call_round_trip(
    tasks_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fake server's non-streaming answers through LiteLLMModel(stream=False) and the agent."""
    from strands.models.litellm import LiteLLMModel

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    server = await FakeOpenAI(_shell_then_answer).start()
    ws = Workspace.for_task(tasks_dir / "beta")
    try:
        model = LiteLLMModel(client_args={"api_base": server.url}, model_id="openai/fake-model", stream=False)
        limits = RolloutLimits(max_turns=4)
        agent = build_agent(model, ws, {"num_test_cases": 2}, limits=limits)
        end = await run_agent(agent, user_prompt(ws, {"num_test_cases": 2}), limits)
    finally:
        ws.cleanup()
        await server.stop()
    assert end.reason == "completed" and end.model_calls == 2
    assert [r.get("stream", False) for r in server.requests] == [False, False]
    [tool_msg] = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert "NOTES.txt" in json.dumps(tool_msg["content"])


# ---------------------------------------------------------------------------- Ctrl-C and --resume
class InterruptAt(ShellThenAnswer):
    """ShellThenAnswer that sends itself SIGINT (a Ctrl-C) on its ``at``-th call."""

    def __init__(self, tokenizer: Any, at: int | None) -> None:
        super().__init__(tokenizer)
        self.at = at

    def __call__(self, prompt_ids, params, index):  # type: ignore[no-untyped-def]
        if index == self.at:
            signal.raise_signal(signal.SIGINT)
        return super().__call__(prompt_ids, params, index)


def test_ctrl_c_keeps_completed_rollouts_and_resume_runs_only_the_missing(
    tasks_dir: Path, tmp_path: Path, qwen3, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    # a shell runs background jobs (`cmd &`) with SIGINT ignored, and Python keeps an inherited
    # SIG_IGN: restore the default Ctrl-C handler so the test does not depend on how it was started
    signal.signal(signal.SIGINT, signal.default_int_handler)
    run_dir = tmp_path / "run"
    script = InterruptAt(qwen3, at=2)  # rollout 0: calls 0-1; rollout 1: Ctrl-C on its first call
    backend = ScriptedBackend(qwen3, script)
    args = _args(
        "--tasks-dir", str(tasks_dir), "--tasks", "alpha", "--rollouts-per-task", "3",
        "--concurrency", "1", "--run-dir", str(run_dir), "--seed", "40",
    )  # fmt: skip
    code = main_from_args(args, backend_factory=lambda a: (backend, qwen3))
    assert code == 130
    assert "interrupted: completed rollouts are kept" in capsys.readouterr().out
    assert [r["rollout_id"] for r in _results(run_dir)] == ["alpha-r0"]
    assert [t.rollout_id for t in TrajectoryStore(run_dir / "trajectories")] == ["alpha-r0"]
    # the interrupted rollout's workspace copy is gone too
    workspaces = {m.group(1) for p in script.prompts for m in [REPO_PATH_RE.search(p)] if m}
    assert len(workspaces) == 2 and not any(Path(w).exists() for w in workspaces)

    # a crash in the middle of a write leaves a torn last line
    with open(run_dir / "results.jsonl", "a") as f:
        f.write('{"rollout_id": "alpha-r1", "rew')

    resumed = ScriptedBackend(qwen3, ShellThenAnswer(qwen3))
    args = build_parser().parse_args(["migrate", "--resume", str(run_dir)])
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main_from_args(args, backend_factory=lambda a: (resumed, qwen3)) == 0
    results = _results(run_dir)
    # stdout is not a terminal here (a log): lines are not wrapped at 80 columns
    out = capsys.readouterr().out
    assert "1 already done, backend llamacpp" in out, out
    assert max(len(line) for line in out.splitlines()) > 80
    assert [r["rollout_id"] for r in results] == ["alpha-r0", "alpha-r1", "alpha-r2"]
    assert (run_dir / "results.jsonl.torn").read_text() == '{"rollout_id": "alpha-r1", "rew\n'
    # only the two missing rollouts ran, with the seeds the first run would have used
    # (each turn samples with the per-turn seed derived from its rollout's seed)
    expected = sorted(
        turn_seed(seed, turn, rid) for seed, rid in ((41, "alpha-r1"), (42, "alpha-r2")) for turn in (0, 1)
    )
    assert resumed.calls == 4 and sorted(p.seed for p in resumed.params) == expected
    assert [r["seed"] for r in results] == [40, 41, 42]
    ids = [t.rollout_id for t in TrajectoryStore(run_dir / "trajectories")]
    assert sorted(ids) == ["alpha-r0", "alpha-r1", "alpha-r2"]
    saved = json.loads((run_dir / "config.json").read_text())
    assert saved["rollouts_per_task"] == 3 and saved["tasks"] == ["alpha"] and saved["seed"] == 40

    # resuming a finished run runs nothing
    idle = ScriptedBackend(qwen3, [])
    assert main_from_args(args, backend_factory=lambda a: (idle, qwen3)) == 0
    assert idle.calls == 0 and len(_results(run_dir)) == 3


# ---------------------------------------------------------------------------- --seed
async def test_same_seed_same_sampling_params_per_rollout(tasks_dir: Path, tmp_path: Path, qwen3) -> None:
    async def run(seed: int, name: str) -> dict[str, set[int]]:
        script = ShellThenAnswer(qwen3)
        backend = ScriptedBackend(qwen3, script)
        args = _args(
            "--tasks-dir", str(tasks_dir), "--rollouts-per-task", "2", "--concurrency", "2",
            "--run-dir", str(tmp_path / name), "--seed", str(seed), "--temperature", "0.3",
        )  # fmt: skip
        results = await run_migration(
            args, Console(file=io.StringIO()), backend_factory=lambda a: (backend, qwen3)
        )
        assert all(p.temperature == 0.3 and p.top_p == 0.95 for p in backend.params)
        # which seed each rollout's calls carried: the workspace path in the prompt names the rollout
        # (turn t of rollout r seeded s samples with turn_seed(s, t, r): issue 14, item 7; issue 48)
        seeds_by_ws: dict[str, list[int]] = {}
        for prompt, params in zip(script.prompts, backend.params, strict=True):
            ws = REPO_PATH_RE.search(prompt).group(1)  # type: ignore[union-attr]
            seeds_by_ws.setdefault(ws, []).append(params.seed)  # type: ignore[arg-type]
        assert len(seeds_by_ws) == 4
        rollout_seeds = sorted(r["seed"] for r in results)
        ids = {r["seed"]: r["rollout_id"] for r in results}
        matched = sorted(
            next(
                rs for rs in rollout_seeds if seeds == [turn_seed(rs, t, ids[rs]) for t in range(len(seeds))]
            )
            for seeds in seeds_by_ws.values()
        )
        assert matched == rollout_seeds
        return {r["rollout_id"]: r["seed"] for r in results}

    first, again = await run(5, "a"), await run(5, "b")
    assert first == again == {"alpha-r0": 5, "alpha-r1": 6, "beta-r0": 7, "beta-r1": 8}


# ---------------------------------------------------------------------------- backend failure
def test_backend_failure_is_not_scored_and_resume_reruns_it(
    tasks_dir: Path, tmp_path: Path, qwen3, capsys
) -> None:
    run_dir = tmp_path / "run"
    down = ScriptedBackend(qwen3, [{"error": "connection refused: http://127.0.0.1:9"}])
    args = _args("--tasks-dir", str(tasks_dir), "--tasks", "alpha", "--run-dir", str(run_dir))
    assert main_from_args(args, backend_factory=lambda a: (down, qwen3)) == 3
    (rec,) = _results(run_dir)
    assert rec["failed"] is True and rec["reward"] == 0.0 and "connection refused" in rec["error"]
    assert not (run_dir / "logs" / "alpha-r0.eval.json").exists()  # no evaluation build
    assert list(TrajectoryStore(run_dir / "trajectories")) == []
    assert "rerun them with --resume" in capsys.readouterr().out

    up = ScriptedBackend(qwen3, ShellThenAnswer(qwen3))
    assert (
        main_from_args(
            build_parser().parse_args(["migrate", "--resume", str(run_dir)]),
            backend_factory=lambda a: (up, qwen3),
        )
        == 0
    )
    last = _results(run_dir)[-1]
    assert last["rollout_id"] == "alpha-r0" and not last.get("failed") and up.calls == 2


# ---------------------------------------------------------------------------- impossible backend values
def test_a_token_id_beyond_int32_fails_that_rollout_only(tasks_dir: Path, tmp_path: Path, qwen3) -> None:
    run_dir = tmp_path / "run"
    script = ShellThenAnswer(qwen3)

    def answer(prompt_ids, params, index):  # type: ignore[no-untyped-def]
        if index == 0:  # alpha-r0's first turn (one rollout at a time)
            return {"token_ids": [2**31], "finish_reason": "stop"}
        return script(prompt_ids, params, index)

    class Unchecked(ScriptedBackend):  # plays back what a broken server would send
        def __init__(self) -> None:
            super().__init__(qwen3, answer)
            self._vocab = 2**40

    args = _args("--tasks-dir", str(tasks_dir), "--run-dir", str(run_dir), "--concurrency", "1")
    assert main_from_args(args, backend_factory=lambda a: (Unchecked(), qwen3)) == 3
    by_id = {r["rollout_id"]: r for r in _results(run_dir)}
    assert by_id["alpha-r0"]["failed"] is True
    assert (
        "token ID 2147483648 at position 0, outside the vocabulary [0, 151669)" in by_id["alpha-r0"]["error"]
    )
    assert not by_id["beta-r0"].get("failed") and by_id["beta-r0"]["turns"] == 2
    assert [t.rollout_id for t in TrajectoryStore(run_dir / "trajectories")] == ["beta-r0"]
