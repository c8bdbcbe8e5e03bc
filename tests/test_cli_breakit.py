"""Break-it findings on the CLIs (issue 28 item 10): each refusal is one line, exit 2, and
nothing written."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from strands_art.cli import main
from strands_art.registry import ModelNotFound, load_tokenizer

TURN = {"messages": [{"role": "user", "content": "hi"}], "output": {"text": "x<|im_end|>"}}
TOOL = {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}


def _one_line(capsys, code: int, *parts: str) -> str:
    out = capsys.readouterr()
    lines = [line for line in out.err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and out.out == "", out.err
    assert "Traceback" not in out.err and all(p in lines[0] for p in parts), lines[0]
    return lines[0]


def _replay(tmp_path: Path, spec: dict, *extra: str) -> int:
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(spec))
    return main(["replay", str(path), *extra])


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ({"token_ids": [1.9, 2]}, "'token_ids' must be a list of integers, got 1.9"),
        ({"token_ids": [True, 2]}, "'token_ids' must be a list of integers, got True"),
        ({"token_ids": 5}, "'token_ids' must be a list of integers, got 5"),
        ({"text": 42}, "'text' must be a string, got a int"),
        ({"text": "x<|im_end|>", "logprobs": -0.5}, "'logprobs' must be a list of numbers, got a float"),
        ({"text": "x<|im_end|>", "logprobs": ["a"]}, "'logprobs' must be a list of numbers"),
        ({"text": "x<|im_end|>", "logprobs": [False]}, "'logprobs' must be a list of numbers"),
    ],
)
def test_replay_refuses_outputs_the_backend_would_misread(tmp_path, capsys, output, message):
    code = _replay(tmp_path, {"turns": [{**TURN, "output": output}]})
    _one_line(capsys, code, "strands-art replay: turn 0:", message)


@pytest.mark.parametrize("where", ["spec", "turn"])
def test_replay_refuses_a_tool_without_a_name(tmp_path, capsys, where):
    nameless = {"type": "function", "function": {"description": "adds", "parameters": {"type": "object"}}}
    spec = (
        {"tools": [TOOL, nameless], "turns": [TURN]}
        if where == "spec"
        else {"turns": [{**TURN, "tools": [nameless]}]}
    )
    code = _replay(tmp_path, spec)
    _one_line(capsys, code, "strands-art replay:", "needs a name")


def test_replay_still_plays_valid_outputs(tmp_path, capsys):
    ids = load_tokenizer("qwen3").encode("x<|im_end|>", add_special_tokens=False)
    spec = {"tools": [TOOL], "turns": [{**TURN, "output": {"token_ids": ids}, "logprobs": [-1] * len(ids)}]}
    assert _replay(tmp_path, spec) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["turns"][0]["output_ids"] == ids and result["rows"][0]["logprobs"][-len(ids) :] == [
        -1.0
    ] * len(ids)


@pytest.mark.parametrize("target", ["missing/out.json", "adir"])
def test_replay_export_into_a_missing_directory_or_onto_a_directory(tmp_path, capsys, target):
    (tmp_path / "adir").mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    code = _replay(tmp_path, {"turns": [TURN]}, "--export", str(tmp_path / target))
    _one_line(capsys, code, "strands-art replay: --export")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*before, "conv.json"])
    assert list((tmp_path / "adir").iterdir()) == []


def test_tokenizer_that_is_not_one_is_model_not_found(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(ModelNotFound, match="cannot load a tokenizer"):
        load_tokenizer(str(tmp_path))
    with pytest.raises(ModelNotFound, match="not a tokenizer directory"):
        load_tokenizer("/etc")


def _migrate(capsys, run_dir: Path, *extra: str) -> str:
    code = main(["migrate", "--run-dir", str(run_dir), "--unsafe-no-sandbox", *extra])
    return _one_line(capsys, code, "strands-art migrate:")


def _migrate_vllm(capsys, run_dir: Path, base_url: str, tokenizer: str) -> str:
    return _migrate(capsys, run_dir, "--backend", "vllm", "--base-url", base_url, "--tokenizer", tokenizer)


def test_migrate_refuses_a_tokenizer_that_is_not_one_before_writing(tmp_path, capsys):
    line = _migrate_vllm(capsys, tmp_path / "run", "http://127.0.0.1:9", "/etc")
    assert "--tokenizer /etc" in line and not (tmp_path / "run").exists()


def test_migrate_refuses_a_run_dir_that_is_a_file(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    line = _migrate(capsys, tmp_path / "f")
    assert "exists and is not a directory" in line and (tmp_path / "f").read_text() == "x"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--tasks-dir", ""], "--tasks-dir is empty (an unset variable?)"),
        (["--records", " "], "--records is empty (an unset variable?)"),
        (["--tasks"], "--tasks names no task"),
        (["--all-tasks", "--tasks", "junit-mix"], "--all-tasks and --tasks both choose tasks"),
        (["--records", "r.csv", "--tasks-dir", "d"], "--records and --tasks-dir are two task sources"),
    ],
)
def test_migrate_refuses_an_empty_or_doubled_task_source(tmp_path, capsys, extra, message):
    """An unset $TASKS must not become the bundled tasks (a run of hours), nor two sources one."""
    line = _migrate(capsys, tmp_path / "run", *extra)
    assert message in line and not (tmp_path / "run").exists()


def test_migrate_refuses_a_run_dir_holding_a_run_without_resume(tmp_path, capsys):
    """Its results.jsonl was made with its config.json's settings: new ones would mix into it."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text('{"tasks": ["junit-mix"], "seed": 0}')
    line = _migrate(capsys, run, "--tasks", "compiler-props", "--seed", "5")
    assert f"--run-dir {run} holds a migrate run already: `--resume {run}` continues it" in line
    assert (run / "config.json").read_text() == '{"tasks": ["junit-mix"], "seed": 0}'
    assert sorted(p.name for p in run.iterdir()) == ["config.json"]


def test_migrate_checks_the_server_before_writing_config(tmp_path, capsys):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    line = _migrate_vllm(capsys, tmp_path / "run", f"http://127.0.0.1:{port}", "qwen3")
    assert "the vLLM server is not usable" in line and not (tmp_path / "run").exists()


def test_evaluate_refuses_an_absurd_test_count(tmp_path, capsys):
    task = tmp_path / "task"
    (task / "repo").mkdir(parents=True)
    (task / "task.json").write_text(json.dumps({"num_test_cases": 10**30}))
    repo = tmp_path / "migrated"
    repo.mkdir()
    code = main(["evaluate", str(repo), "--task", str(task)])
    _one_line(capsys, code, "num_test_cases must be an integer from 0 to 10,000,000")
    assert list(repo.iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["train", "--autocast", "fp16"],
            "strands-art train: error: argument --autocast: invalid choice: 'fp16'",
        ),
        (
            ["train", "--max-draws", "2.5"],
            "strands-art train: error: argument --max-draws: invalid int value: '2.5'",
        ),
        (["migrate", "--no-such-flag"], "strands-art: error: unrecognized arguments: --no-such-flag"),
        (["trian"], "strands-art: error: argument command: invalid choice: 'trian'"),
    ],
)
def test_an_argparse_error_is_one_line_not_the_whole_usage(capsys, argv, said) -> None:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and err.startswith(said)
    assert err.rstrip().endswith("--help` lists the options)") and "usage:" not in err
