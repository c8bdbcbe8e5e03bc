"""Bad input to every subcommand: one clear error line, exit 2, no traceback, nothing written."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from strands_art.cli import main
from strands_art.envs.migrationbench.evaluate.evaluator import EvalTask, _original_tests
from strands_art.envs.migrationbench.tasks.tasks import TaskError, load_task, materialize_record
from strands_art.envs.sandbox import SandboxUnavailable, require_sandbox
from strands_art.envs.sandbox.policy import Identity
from strands_art.validation import UsageError

try:
    require_sandbox()
    SANDBOX_OK = True
except SandboxUnavailable:
    SANDBOX_OK = False


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    assert out.out == ""
    return code, out.err


def _one_error_line(code: int, err: str, *parts: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert "Traceback" not in err and all(p in lines[0] for p in parts), lines[0]


def _replay_spec(**top: object) -> dict:
    turn = {"messages": [{"role": "user", "content": "hi"}], "output": {"text": "x<|im_end|>"}}
    return {"turns": [turn], **top}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe{", "can't decode byte 0xff"),
        (b"[" * 100_000 + b"]" * 100_000, "maximum recursion depth exceeded"),
        (json.dumps(_replay_spec(tools="add")).encode(), "'tools' must be a list of objects, got a str"),
        (json.dumps(_replay_spec(tools=["add"])).encode(), "'tools' must be a list of objects, got a list"),
        (
            json.dumps({"turns": [{"messages": "hi", "output": {"text": "x"}}]}).encode(),
            "turn 0: 'messages' must be a list, got a str",
        ),
        (json.dumps(_replay_spec(chat_template_kwargs=[1])).encode(), "'chat_template_kwargs' must be"),
    ],
)
def test_replay_malformed_files(tmp_path: Path, capsys, content: bytes, message: str) -> None:
    path = tmp_path / "replay.json"
    path.write_bytes(content)
    code, err = _run(capsys, "replay", str(path))
    _one_error_line(code, err, "strands-art replay:", message)


def _task(tmp_path: Path, meta: object, with_repo: bool = True) -> Path:
    d = tmp_path / "task"
    d.mkdir()
    if with_repo:
        (d / "repo").mkdir()
    (d / "task.json").write_text(json.dumps(meta))
    return d


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ([], "must hold a JSON object, got list"),
        (None, "must hold a JSON object, got NoneType"),
        ({"num_test_cases": True}, "num_test_cases must be an integer from 0 to 10,000,000, got True"),
        ({"num_test_cases": "3"}, "num_test_cases must be an integer from 0 to 10,000,000, got '3'"),
        ({"num_test_cases": 10**30}, "num_test_cases must be an integer from 0 to 10,000,000, got 1000000"),
    ],
)
def test_evaluate_malformed_task_json(tmp_path: Path, capsys, meta: object, message: str) -> None:
    repo = tmp_path / "migrated"
    (repo / "src").mkdir(parents=True)
    code, err = _run(capsys, "evaluate", str(repo), "--task", str(_task(tmp_path, meta)))
    _one_error_line(code, err, "strands-art evaluate: bad task", message)
    assert [p.name for p in repo.iterdir()] == ["src"]  # nothing built or written


@pytest.mark.parametrize("value", ["-5", "0", "nan", "inf", "1e9"])
def test_evaluate_timeout_out_of_range(tmp_path: Path, capsys, value: str) -> None:
    task = _task(tmp_path, {"num_test_cases": 1})
    code, err = _run(capsys, "evaluate", str(tmp_path), "--task", str(task), f"--timeout={value}")
    _one_error_line(code, err, "--timeout must be a finite number in (0, 86400]")


def test_base_commit_is_never_read_as_an_option_by_git(tmp_path: Path, capsys) -> None:
    victim = tmp_path / "PWNED"
    repo = tmp_path / "migrated"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "pom.xml").write_text("<project/>")
    task = _task(tmp_path, {"num_test_cases": 1, "base_commit": f"--output={victim}"}, with_repo=False)
    code, err = _run(capsys, "evaluate", str(repo), "--task", str(task))
    _one_error_line(code, err, "base_commit must be a hex git commit id", "--output=")
    assert not victim.exists()
    # and below the check, a short id never reaches git (an abbreviation could name an object
    # the agent made; unsandboxed here: the sandboxed reader is tested in test_sandbox_attacks.py)
    me = Identity(os.getuid(), os.getgid(), drop=False)
    sneaky = EvalTask("t", 1, original_dir=None, base_commit=f"--output={victim}")
    with pytest.raises(ValueError, match="hex git commit id"):
        _original_tests(repo, sneaky, me, True, tmp_path)
    with pytest.raises(ValueError, match="'abcdef0' is not a full commit id"):
        _original_tests(repo, EvalTask("t", 1, base_commit="abcdef0"), me, True, tmp_path)
    assert not victim.exists()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("base_commit", "--output=/x", "base_commit must be a hex git commit id"),
        ("repo", "../../etc", "repo must be OWNER/NAME"),
        ("repo", "--upload-pack=touch /x/y", "repo must be OWNER/NAME"),
        ("num_test_cases", True, "num_test_cases must be an integer from 0 to 10,000,000"),
        ("num_test_cases", -1, "num_test_cases must be an integer from 0 to 10,000,000"),
        ("num_test_cases", None, "num_test_cases must be an integer from 0 to 10,000,000"),
    ],
)
def test_task_records_are_checked_before_git_sees_them(tmp_path: Path, field, value, message) -> None:
    record = {"repo": "owner/name", "base_commit": "a" * 40, "num_test_cases": 3, field: value}
    with pytest.raises(TaskError, match=message):
        materialize_record(record, tmp_path / "tasks", git_base="file:///nonexistent")
    assert not (tmp_path / "tasks").exists()
    d = tmp_path / "task"
    (d / "repo").mkdir(parents=True, exist_ok=True)
    full = dict.fromkeys(
        ["num_java_files", "num_loc", "num_pom_xml", "num_src_test_java_files", "license"], 0
    )
    (d / "task.json").write_text(json.dumps({**full, **record}))
    with pytest.raises(TaskError, match=message):
        load_task(d)


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--temperature", "-1", "--temperature must be a finite number in [0, 100], got -1.0"),
        ("--temperature", "nan", "--temperature must be a finite number"),
        ("--top-p", "0", "--top-p must be a finite number in (0, 1]"),
        ("--time-limit", "nan", "--time-limit must be a finite number in (0, 604800], got nan"),
        ("--time-limit", "inf", "--time-limit must be a finite number"),
        ("--command-timeout", "0", "--command-timeout must be a finite number in (0, 86400], got 0.0"),
        ("--build-timeout", "-3", "--build-timeout must be a finite number"),
        ("--max-new-tokens", "0", "--max-new-tokens must be an integer from 1 to 1,048,576"),
        ("--max-output-bytes", "1", "--max-output-bytes must be an integer from 2"),
        ("--rollouts-per-task", str(10**30), "--rollouts-per-task must be an integer from 1 to 10,000"),
        ("--concurrency", "0", "--concurrency must be an integer from 1 to 1,024"),
        ("--max-turns", "-1", "--max-turns must be an integer"),
        ("--seed", "-1", "--seed must be an integer from 0"),
        ("--max-context-tokens", "1", "--max-context-tokens must be an integer from 2"),
        ("--backend", "vllm", "--backend vllm needs --base-url"),
        ("--base-url", "ftp://127.0.0.1:1/", "--base-url must be an http:// or https:// URL with a host"),
        ("--base-url", "http://", "--base-url must be an http:// or https:// URL with a host"),
        ("--base-url", "http://h:99999", "--base-url must be an http:// or https:// URL with a host"),
    ],
)
def test_migrate_refuses_bad_values_before_writing(tmp_path: Path, capsys, flag, value, message) -> None:
    run_dir = tmp_path / "run"
    code, err = _run(capsys, "migrate", "--run-dir", str(run_dir), flag, value)
    _one_error_line(code, err, "strands-art migrate:", message)
    assert not run_dir.exists()


def test_migrate_resume_checks_the_saved_config_too(tmp_path: Path, capsys) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"temperature": -1.0}))
    before = sorted(p.name for p in run_dir.iterdir())
    code, err = _run(capsys, "migrate", "--resume", str(run_dir))
    _one_error_line(code, err, "--temperature must be a finite number in [0, 100], got -1.0")
    for bad, message in (("[1]", "must hold a JSON object, got list"), ("{", "cannot read")):
        (run_dir / "config.json").write_text(bad)
        code, err = _run(capsys, "migrate", "--resume", str(run_dir))
        _one_error_line(code, err, message)
    assert sorted(p.name for p in run_dir.iterdir()) == before


@pytest.mark.parametrize("value", ["yes", 1, None, [True]])
def test_migrate_resume_refuses_a_sandbox_opt_out_that_is_not_a_boolean(
    tmp_path: Path, capsys, value
) -> None:
    """The opt-out is read back from config.json on --resume: only a real true/false counts, and a
    bad one stops before anything is written (never taken as "on" or "off" by truthiness)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"unsafe_no_sandbox": value}))
    before = sorted((p.name, p.stat().st_mtime_ns) for p in run_dir.iterdir())
    code, err = _run(capsys, "migrate", "--resume", str(run_dir))
    _one_error_line(code, err, "strands-art migrate:", "--unsafe-no-sandbox must be true or false, got")
    assert sorted((p.name, p.stat().st_mtime_ns) for p in run_dir.iterdir()) == before


@pytest.mark.parametrize("value", ["short", 1, ["compact"]])
def test_migrate_resume_refuses_an_unknown_prompt(tmp_path: Path, capsys, value) -> None:
    """``--prompt`` is read back from config.json on --resume: an unknown one stops before
    anything is written."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"prompt": value}))
    before = sorted((p.name, p.stat().st_mtime_ns) for p in run_dir.iterdir())
    code, err = _run(capsys, "migrate", "--resume", str(run_dir))
    _one_error_line(
        code, err, "strands-art migrate:", "--prompt must be one of compact, compact-no-recipe, full, got"
    )
    assert sorted((p.name, p.stat().st_mtime_ns) for p in run_dir.iterdir()) == before


def test_rollouts_run_directly_check_the_sandbox_opt_out() -> None:
    """Trainers call run_rollout with their own Namespace: the same check runs there."""
    from strands_art.cli import build_parser
    from strands_art.envs.migrationbench.run.runner_args import resolve_defaults, validate_rollout_limits

    args = build_parser().parse_args(["migrate", "--backend", "transformers"])
    resolve_defaults(args)
    assert args.unsafe_no_sandbox is False
    validate_rollout_limits(args)
    args.unsafe_no_sandbox = "false"  # truthy: must not pass as an opt-out (or as the default)
    with pytest.raises(UsageError, match="--unsafe-no-sandbox must be true or false, got 'false'"):
        validate_rollout_limits(args)
    del args.unsafe_no_sandbox  # absent: the sandbox stays on
    validate_rollout_limits(args)


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--dp", str(10**30), "--dp must be a positive integer of at most 1,048,576"),
        ("--rows", str(2**31), "--rows must be a positive integer of at most 2,147,483,647"),
        ("--epochs", "0", "--epochs must be a positive integer"),
    ],
)
def test_batching_plan_refuses_absurd_sizes(capsys, flag: str, value: str, message: str) -> None:
    argv = {"--rows": "8", "--prompt-batch": "4", "--ppo-mini-batch": "2", flag: value}
    code, err = _run(capsys, "batching-plan", *[x for kv in argv.items() for x in kv])
    _one_error_line(code, err, "strands-art batching-plan:", message)


@pytest.mark.parametrize(("flag", "value"), [("--seed", "-1"), ("--max-new-tokens", "0")])
def test_demo_refuses_bad_values_before_loading_a_model(capsys, flag: str, value: str) -> None:
    code, err = _run(capsys, "demo", flag, value)
    _one_error_line(code, err, f"strands-art demo: {flag} must be an integer")


def _git_repo(path: Path) -> str:
    """A repository with one JUnit test class; returns its HEAD commit."""
    test_dir = path / "src" / "test" / "java" / "p"
    test_dir.mkdir(parents=True)
    (test_dir / "ATest.java").write_text(
        "package p;\nimport org.junit.Test;\npublic class ATest {\n  @Test public void one() {}\n}\n"
    )
    git = ["git", "-C", str(path), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    return subprocess.run(
        [*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def test_valid_commit_ids_still_reach_git(tmp_path: Path) -> None:
    commit = _git_repo(tmp_path / "src")
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(tmp_path / "src"), str(tmp_path / "srv/owner/name.git")],
        check=True,
    )
    task = materialize_record(
        {"repo": "owner/name", "base_commit": commit, "num_test_cases": 1},
        tmp_path / "tasks",
        git_base=(tmp_path / "srv").as_uri(),
    )
    head = subprocess.run(
        ["git", "-C", str(task.repo_dir), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    assert head.stdout.strip() == commit and task.num_test_cases == 1
    me = Identity(os.getuid(), os.getgid(), drop=False)  # git in the sandbox when it works here
    unsafe = not SANDBOX_OK
    original, _poms = _original_tests(
        tmp_path / "src", EvalTask("t", 1, base_commit=commit), me, unsafe, tmp_path
    )
    assert sorted(original.keys()) == ["p.ATest#one"]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (
            "r.csv",
            b"repo,base_commit,num_test_cases\nowner/name,--output=/x,1\n",
            "row 0: base_commit must be",
        ),
        ("r.csv", b"repo,num_test_cases\nowner/name,1\n", "missing columns ['base_commit']"),
        ("r.parquet", b"PAR1 but not parquet", "cannot read the records"),
    ],
)
def test_migrate_records_are_checked_before_writing(tmp_path: Path, capsys, name, content, message) -> None:
    records = tmp_path / name
    records.write_bytes(content)
    run_dir = tmp_path / "run"
    code, err = _run(capsys, "migrate", "--records", str(records), "--run-dir", str(run_dir))
    _one_error_line(code, err, "strands-art migrate:", message)
    assert not run_dir.exists()


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--temperature", "-1", "--temperature must be a finite number in [0, 100]"),
        ("--top-p", "nan", "--top-p must be a finite number in (0, 1]"),
        ("--max-new-tokens", "0", "--max-new-tokens must be an integer from 1"),
        ("--port", "99999", "--port must be an integer from 0 to 65,535"),
        ("--max-open-sessions", "0", "--max-open-sessions must be an integer from 1"),
        ("--max-body-bytes", "-1", "--max-body-bytes must be an integer from 1"),
    ],
)
def test_serve_refuses_bad_values_before_starting(tmp_path: Path, capsys, flag, value, message) -> None:
    script = tmp_path / "script.json"
    script.write_text('[{"text": "hi<|im_end|>"}]')
    code, err = _run(capsys, "serve", "--backend", "scripted", "--script", str(script), flag, value)
    _one_error_line(code, err, "strands-art serve:", message)


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"\xff[", "can't decode byte 0xff"), (b"[" * 100_000, "maximum recursion depth"), (b"{}", "JSON list")],
)
def test_serve_malformed_script(tmp_path: Path, capsys, content: bytes, message: str) -> None:
    script = tmp_path / "script.json"
    script.write_bytes(content)
    code, err = _run(
        capsys, "serve", "--backend", "scripted", "--tokenizer", "qwen3", "--script", str(script)
    )
    _one_error_line(code, err, "strands-art serve:", message)
