"""One hostile rollout never ends a ``strands-art migrate`` run (issue 22, item 2).

Real runs: the scripted policy's tool calls go through ARTModel, the gateway and the agent's real
shell tool, so the hostile files are made by a real command in the real sandbox; the real
evaluator copies the workspace; results.jsonl, the trajectory store and ``--resume`` are the
real ones. Each run has a hostile task and a plain one (``alpha``, no ``pom.xml``: scored 0.0
by the evaluator without a build, no ``evaluation_error``).

For exceptions no workspace can trigger on purpose here (a fork failure on the host, a
``ValueError`` from a report the evaluator cannot read), the evaluator function is replaced by
one that raises them: the runner's handling is what is tested.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.migrate_script import tool_call_text

from strands_art.backends.base import SamplingParams
from strands_art.backends.scripted import ScriptedBackend
from strands_art.cli import build_parser
from strands_art.envs.migrationbench.evaluate import evalguard, evaluator
from strands_art.envs.migrationbench.run.runner import main_from_args
from strands_art.envs.migrationbench.tasks.tasks import RECORD_FIELDS
from strands_art.store import TrajectoryStore

pytestmark = pytest.mark.skipif(shutil.which("mvn") is None, reason="the agent's tool env needs Maven")

#: Shell run by every rollout; it does harm only in a workspace holding ATTACK.sh.
COMMAND = "if [ -f ATTACK.sh ]; then bash ATTACK.sh; fi; echo done"
DEEP = r"""
mkfifo "$(printf 'fifo-\377')"
python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('sock')"
python3 -c "
import os
for _ in range(1200):
    os.mkdir('x'); os.chdir('x')
open(b'\xfe.java', 'w').write('deep'); os.mkfifo('pipe')
"
"""
SPARSE = "for i in 1 2 3; do truncate -s 1000M sparse$i.bin; done\n"


@pytest.fixture(autouse=True)
def _no_offline_seeding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRANDS_ART_MAVEN_OFFLINE", "0")


class ShellOnce:
    """Script: ``shell COMMAND`` once, then a final answer."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.outputs: list[str] = []

    def __call__(self, prompt_ids: list[int], params: SamplingParams, index: int) -> dict[str, Any]:
        prompt = self.tokenizer.decode(prompt_ids)
        if "<tool_response>" not in prompt:
            return {"text": tool_call_text("shell", {"command": COMMAND})}
        self.outputs.append(prompt.rsplit("<tool_response>", 1)[1])
        return {"text": "Done.<|im_end|>"}


def _task(root: Path, name: str, attack: str | None) -> None:
    d = root / name
    (d / "repo").mkdir(parents=True)
    if attack is not None:  # a pom.xml: the evaluator copies the workspace to build it
        (d / "repo" / "pom.xml").write_text("<project><modelVersion>4.0.0</modelVersion></project>\n")
        (d / "repo" / "ATTACK.sh").write_text(attack)
    else:
        (d / "repo" / "NOTES.txt").write_text("nothing here\n")
    record: dict[str, Any] = dict.fromkeys(RECORD_FIELDS, 0)
    record.update(repo=f"tests/{name}", base_commit="0" * 40, num_test_cases=1, license="Apache-2.0")
    (d / "task.json").write_text(json.dumps(record))


def _run(tmp_path: Path, qwen3, tasks: list[str], *extra: str, resume: bool = False) -> tuple[int, ShellOnce]:
    script = ShellOnce(qwen3)
    backend = ScriptedBackend(qwen3, script)
    run_dir = tmp_path / "run"
    if resume:
        args = build_parser().parse_args(["migrate", "--resume", str(run_dir)])
    else:
        args = build_parser().parse_args(
            ["migrate", "--no-plot", "--max-turns", "4", "--tasks-dir", str(tmp_path / "tasks"),
             "--tasks", *tasks, "--run-dir", str(run_dir), "--concurrency", "1", *extra]
        )  # fmt: skip
    return main_from_args(args, backend_factory=lambda a: (backend, qwen3)), script


def _results(run_dir: Path) -> dict[str, dict]:
    return {r["rollout_id"]: r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}


def _assert_plain(rec: dict) -> None:
    assert rec["reward"] == 0.0 and "evaluation_error" not in rec and not rec.get("failed")
    assert rec["stop_reason"] == "completed" and rec["tool_stats"]["calls"] == {"shell": 1}


@pytest.mark.parametrize(
    ("attack", "message"),
    [
        (DEEP, "directories nested deeper than 128 levels"),
        (SPARSE, "more than 2147483648 bytes of files"),
    ],
    ids=["deep-tree-fifo-socket-non-utf8", "sparse-over-copy-cap"],
)
def test_a_hostile_workspace_scores_zero_with_a_reason(
    tmp_path: Path, qwen3, attack: str, message: str
) -> None:
    _task(tmp_path / "tasks", "alpha", None)
    _task(tmp_path / "tasks", "hostile", attack)
    code, script = _run(tmp_path, qwen3, ["hostile", "alpha"], "--rollouts-per-task", "2")
    assert code == 0
    assert all("done" in out for out in script.outputs)  # the attack ran to its end in the sandbox
    run_dir = tmp_path / "run"
    results = _results(run_dir)
    assert sorted(results) == ["alpha-r0", "alpha-r1", "hostile-r0", "hostile-r1"]
    for rid in ("hostile-r0", "hostile-r1"):
        rec = results[rid]
        assert rec["reward"] == 0.0 and rec["build_success"] is False and not rec.get("failed")
        assert rec["evaluation_error"]["reason"] == "unsafe_tree"
        assert message in rec["evaluation_error"]["message"]
        assert "\n" not in rec["evaluation_error"]["message"]
        logged = json.loads((run_dir / "logs" / f"{rid}.eval.json").read_text())
        assert logged["details"]["evaluation_error"] == rec["evaluation_error"]
    _assert_plain(results["alpha-r0"])
    _assert_plain(results["alpha-r1"])
    # every rollout stored once, with its reward; no workspace or build copy left behind
    stored = {t.rollout_id: t for t in TrajectoryStore(run_dir / "trajectories")}
    assert sorted(stored) == sorted(results) and all(t.reward == 0.0 for t in stored.values())
    assert stored["hostile-r0"].metadata["evaluation"]["evaluation_error"]["reason"] == "unsafe_tree"
    assert not (run_dir / "workspaces").exists()
    # --resume of the finished run runs nothing and succeeds
    code, script = _run(tmp_path, qwen3, [], resume=True)
    assert code == 0 and script.outputs == [] and len(_results(run_dir)) == 4


def test_resume_removes_a_dead_runs_1200_level_workspace(tmp_path: Path, qwen3) -> None:
    """A killed run left a workspace 1,200 levels deep with a FIFO and non-UTF-8 names:
    ``--resume`` removes it and completes (``shutil.rmtree`` raised RecursionError here)."""
    _task(tmp_path / "tasks", "alpha", None)
    code, _ = _run(tmp_path, qwen3, ["alpha"], "--rollouts-per-task", "2")
    assert code == 0
    run_dir = tmp_path / "run"
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    (run_dir / "results.jsonl").write_text(lines[0] + "\n")  # alpha-r1 never finished
    fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY)
    for name in ("workspaces", "strands-art-ws-dead", "repo", *["y" * 30] * 1200):
        os.mkdir(name, dir_fd=fd)
        nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    os.mkfifo(os.fsdecode(b"\xff-pipe"), dir_fd=fd)
    os.close(fd)
    code, script = _run(tmp_path, qwen3, [], resume=True)
    assert code == 0 and len(script.outputs) == 1  # only alpha-r1 ran
    assert sorted(_results(run_dir)) == ["alpha-r0", "alpha-r1"]
    assert not (run_dir / "workspaces").exists()
    assert sorted(t.rollout_id for t in TrajectoryStore(run_dir / "trajectories")) == ["alpha-r0", "alpha-r1"]


def _raising(errors: list[BaseException | None]):
    """An evaluator that raises ``errors`` one per call (None: scores like the real one), then
    scores like the real one."""
    real = evaluator.evaluate_command

    def evaluate_command(*args: Any, **kwargs: Any) -> dict:
        error = errors.pop(0) if errors else None
        if error is not None:
            raise error
        return real(*args, **kwargs)

    return evaluate_command


def test_any_evaluation_exception_is_scored_and_the_run_goes_on(
    tmp_path: Path, qwen3, monkeypatch: pytest.MonkeyPatch
) -> None:
    _task(tmp_path / "tasks", "alpha", None)
    errors: list[BaseException | None] = [
        ValueError('TEST-x.xml: tests="abc" is not an integer'),  # alpha-r0: scored 0.0 with a reason
        BlockingIOError(11, "Resource temporarily unavailable"),  # alpha-r1: retried, then scored
        None,
        RecursionError("maximum recursion depth exceeded"),  # alpha-r2
        KeyError("failures"),  # alpha-r3
        OSError(28, "No space left on device"),  # alpha-r4: the workspace filled the disk: scored
        BlockingIOError(11, "Resource temporarily unavailable"),  # alpha-r5: twice -> not scored
        BlockingIOError(11, "Resource temporarily unavailable"),
    ]
    monkeypatch.setattr(evaluator, "evaluate_command", _raising(errors))
    # every rollout's evaluation must reach the evaluator (the six workspaces are alike: a cache would score
    # five of them from the first verdict, tests/test_evalcache.py)
    monkeypatch.setenv("STRANDS_ART_EVAL_CACHE", "off")
    monkeypatch.setattr(evalguard, "RETRY_DELAY_S", 0.0)
    code, _ = _run(tmp_path, qwen3, ["alpha"], "--rollouts-per-task", "6")
    assert code == 3 and errors == []  # 3: a rollout was not scored (host failure)
    run_dir = tmp_path / "run"
    results = _results(run_dir)
    assert results["alpha-r0"]["evaluation_error"] == {
        "reason": "bad_repository",
        "message": 'ValueError: TEST-x.xml: tests="abc" is not an integer',
    }
    _assert_plain(results["alpha-r1"])  # the retry scored it normally
    assert results["alpha-r2"]["evaluation_error"]["reason"] == "too_deep"
    assert results["alpha-r3"]["evaluation_error"]["reason"] == "bad_repository"
    assert results["alpha-r4"]["evaluation_error"]["reason"] == "disk_full"
    r5 = results["alpha-r5"]
    assert r5["failed"] is True and r5["evaluation_error"]["reason"] == "host_failure"
    stored = sorted(t.rollout_id for t in TrajectoryStore(run_dir / "trajectories"))
    assert stored == [f"alpha-r{i}" for i in range(5)]  # the failed one is not stored
    # --resume reruns only the unscored rollout, now with a working host
    code, script = _run(tmp_path, qwen3, [], resume=True)
    assert code == 0 and len(script.outputs) == 1
    results = _results(run_dir)
    _assert_plain(results["alpha-r5"])
    stored = sorted(t.rollout_id for t in TrajectoryStore(run_dir / "trajectories"))
    assert stored == [f"alpha-r{i}" for i in range(6)]


def test_an_exception_outside_the_evaluation_fails_only_that_rollout(
    tmp_path: Path, qwen3, monkeypatch: pytest.MonkeyPatch
) -> None:
    """E.g. the store cannot write: that rollout is recorded as failed (not scored), the others
    finish, and ``--resume`` runs it again."""
    _task(tmp_path / "tasks", "alpha", None)
    real_append = TrajectoryStore.append
    calls = []

    def append(self: TrajectoryStore, t: Any) -> None:
        calls.append(t.rollout_id)
        if len(calls) == 1:
            raise OSError(28, "No space left on device")
        real_append(self, t)

    monkeypatch.setattr(TrajectoryStore, "append", append)
    code, _ = _run(tmp_path, qwen3, ["alpha"], "--rollouts-per-task", "2")
    assert code == 3
    results = _results(tmp_path / "run")
    assert results["alpha-r0"]["failed"] is True
    assert results["alpha-r0"]["rollout_error"]["reason"] == "disk_full"
    _assert_plain(results["alpha-r1"])
    code, script = _run(tmp_path, qwen3, [], resume=True)
    assert code == 0 and len(script.outputs) == 1
    assert not _results(tmp_path / "run")["alpha-r0"].get("failed")


def test_evaluate_cli_tells_a_bad_repository_from_a_bad_task(tmp_path: Path, capsys) -> None:
    """``strands-art evaluate``: a repository the copy refuses scores 0.0 with its reason (exit 0);
    a task without ``repo/`` and a valid ``base_commit`` is a bad task (exit 2, one line)."""
    from strands_art.cli import main as cli_main

    _task(tmp_path / "tasks", "hostile", "")
    repo = tmp_path / "migrated"
    repo.mkdir()
    (repo / "pom.xml").write_text("<project/>")
    for i in range(3):
        with open(repo / f"sparse{i}.bin", "wb") as f:
            f.truncate(1000 << 20)
    assert cli_main(["evaluate", str(repo), "--task", str(tmp_path / "tasks" / "hostile")]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["reward"] == 0.0 and result["evaluation_error"]["reason"] == "unsafe_tree"
    bad = tmp_path / "bad-task"
    bad.mkdir()
    (bad / "task.json").write_text(json.dumps({"num_test_cases": 1}))
    assert cli_main(["evaluate", str(repo), "--task", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"strands-art evaluate: bad task {bad}: ")
    assert "base_commit must be a hex git commit id" in err[0]
