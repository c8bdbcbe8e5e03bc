"""`strands-art replay`: the JSON contract users and tools rely on."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from strands_art.cli import main

SPEC = {
    "tokenizer": "qwen3",
    "chat_template_kwargs": {},
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "add",
                "description": "Add.",
                "parameters": {
                    "type": "object",
                    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                },
            },
        }
    ],
    "turns": [
        {
            "messages": [{"role": "user", "content": "1+2?"}],
            "output": {
                "text": '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call><|im_end|>'
            },
            "logprobs": None,
        },
        {
            "messages": [
                {"role": "user", "content": "1+2?"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "add", "arguments": '{"b": 2, "a": 1}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "3"},
            ],
            "output": {"text": "3<|im_end|>"},
        },
    ],
}


def run_cli(tmp_path, spec, *extra, capsys):
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(spec))
    code = main(["replay", str(path), *extra])
    out = capsys.readouterr()
    return code, out


def test_replay_tree_mode_forks_on_reordered_arguments(tmp_path, capsys):
    spec = json.loads(json.dumps(SPEC))
    spec["turns"][0].pop("logprobs")
    code, out = run_cli(tmp_path, spec, "--mode", "tree", capsys=capsys)
    assert code == 0
    result = json.loads(out.out)
    assert len(result["rows"]) == 2 and len(result["turns"]) == 2
    for row in result["rows"]:
        assert len(row["loss_mask"]) == len(row["input_ids"]) == len(row["logprobs"])
    forks = [e for e in result["events"] if e["kind"] == "fork"]
    assert len(forks) == 1 and forks[0]["turn"] == 1 and forks[0]["message"] == 1
    t0 = result["turns"][0]
    assert result["rows"][0]["input_ids"] == t0["prompt_ids"] + t0["output_ids"]


def test_replay_token_ids_output_and_given_logprobs(tmp_path, capsys):
    spec = {
        "tokenizer": "qwen3",
        "turns": [
            {
                "messages": [{"role": "user", "content": "hi"}],
                "output": {"token_ids": [9707, 151645]},
                "logprobs": [-0.25, -0.5],
            }
        ],
    }
    code, out = run_cli(tmp_path, spec, capsys=capsys)
    result = json.loads(out.out)
    row = result["rows"][0]
    assert code == 0 and row["input_ids"][-2:] == [9707, 151645]
    assert row["logprobs"][-2:] == [-0.25, -0.5] and row["loss_mask"][-2:] == [1, 1]
    assert sum(row["loss_mask"]) == 2


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"turns": []}, "non-empty 'turns'"),
        ({"turns": [{"messages": [], "output": {"x": 1}}]}, "'output' must be"),
        (
            {
                "turns": [
                    {"messages": [{"role": "user", "content": "hi"}], "output": {"text": "x"}},
                    {"messages": [{"role": "wizard", "content": "hi"}], "output": {"text": "x"}},
                ]
            },
            "turn 1: message 0: unknown role 'wizard'",
        ),
        ({"tokenizer": "no-such", "turns": [{"messages": [], "output": {"text": "x"}}]}, "unknown tokenizer"),
    ],
)
def test_replay_bad_input_is_a_clear_error(tmp_path, capsys, spec, message):
    code, out = run_cli(tmp_path, spec, capsys=capsys)
    assert code == 2 and message in out.err and out.out == ""


def test_cli_help_lists_subcommands():
    proc = subprocess.run([sys.executable, "-m", "strands_art.cli", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0
    for name in ("migrate", "evaluate", "replay", "demo", "batching-plan"):
        assert name in proc.stdout
