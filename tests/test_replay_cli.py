"""`strands-art replay`: the JSON contract users and tools rely on."""

from __future__ import annotations

import asyncio
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


def test_replay_reports_parsed_turns_and_accepts_tool_calls_finish(tmp_path, capsys):
    # issue 14 item 13: "tool_calls" (what stored trajectories hold) is accepted; each turn's
    # parsed text / reasoning / tool calls are in the output; the summary is decoded text
    spec = json.loads(json.dumps(SPEC))
    spec["turns"][0]["finish_reason"] = "tool_calls"
    spec["turns"][1]["output"] = {"text": "<think>\nsum is 3\n</think>\n\nThe answer is 3.<|im_end|>"}
    code, out = run_cli(tmp_path, spec, "--summary", capsys=capsys)
    assert code == 0, out.err
    turns = json.loads(out.out)["turns"]
    assert turns[0]["finish_reason"] == "tool_calls" and turns[0]["text"] == ""
    assert [(c["name"], c["arguments"]) for c in turns[0]["tool_calls"]] == [("add", {"a": 1, "b": 2})]
    assert turns[1]["reasoning"] == "sum is 3" and turns[1]["text"] == "The answer is 3."
    assert turns[1]["tool_calls"] == [] and turns[1]["ill_formed"] is False
    summary = json.loads(out.err)
    assert summary["conversation"][0]["tool_calls"] == ['add({"a": 1, "b": 2})']
    assert summary["conversation"][1]["text"] == "The answer is 3."
    (fork,) = summary["forks"]  # the harness reordered the arguments: one fork at turn 1
    assert fork["turn"] == 1
    assert '{"a": 1, "b": 2}' in fork["row_text"] and '{"b": 2, "a": 1}' in fork["prompt_text"]
    for text in (out.err, fork["row_text"]):
        assert "Ġ" not in text and "Ċ" not in text


def test_replay_rejects_an_unknown_finish_reason(tmp_path, capsys):
    spec = json.loads(json.dumps(SPEC))
    spec["turns"][0]["finish_reason"] = "done"
    code, out = run_cli(tmp_path, spec, capsys=capsys)
    assert code == 2 and "turn 0: finish_reason must be one of" in out.err


async def _stored_run(tmp_path, qwen3, mode):
    from strands import Agent
    from strands.agent.conversation_manager import NullConversationManager
    from support.strands_tools import add

    from strands_art.backends.scripted import ScriptedBackend
    from strands_art.gateway import RolloutGateway
    from strands_art.model import ARTModel
    from strands_art.store import TrajectoryStore

    script = [
        {
            "text": '<think>\nuse the tool\n</think>\n\n<tool_call>\n{"name": "add", "arguments": {"a": 17, "b": 25}}\n</tool_call><|im_end|>'
        },
        {"text": "42.<|im_end|>"},
    ]
    gw = RolloutGateway(qwen3, ScriptedBackend(qwen3, script, logprob=-0.25), history_mode=mode)
    agent = Agent(
        model=ARTModel(gateway=gw, session_id="task-r0", group_id="task"),
        tools=[add],
        callback_handler=None,
        conversation_manager=NullConversationManager(),
    )
    await agent.invoke_async("17+25?")
    traj = gw.close_session("task-r0", reward=1.0)
    run = tmp_path / "run"
    TrajectoryStore(run / "trajectories").append(traj)
    (run / "config.json").write_text(json.dumps({"model": "qwen3", "history_mode": mode}))
    return run, traj


@pytest.mark.parametrize("mode", ["tree", "linear"])
def test_replay_from_run_reproduces_the_stored_rows(tmp_path, capsys, qwen3, mode):
    run, traj = asyncio.run(_stored_run(tmp_path, qwen3, mode))
    export = tmp_path / "replay.json"
    code = main(["replay", "--from-run", str(run), "--rollout", "task-r0", "--export", str(export)])
    out = capsys.readouterr()
    assert code == 0, out.err
    result = json.loads(out.out)
    assert [(r["input_ids"], r["loss_mask"], r["logprobs"]) for r in result["rows"]] == [
        (r.input_ids, r.loss_mask, r.logprobs) for r in traj.rows
    ]
    assert [t["tool_calls"][0]["name"] if t["tool_calls"] else t["text"] for t in result["turns"]] == [
        "add",
        "42.",
    ]
    spec = json.loads(export.read_text())
    assert spec["tokenizer"] == "qwen3" and spec["mode"] == mode and len(spec["turns"]) == 2
    assert spec["turns"][0]["finish_reason"] == "tool_calls"
    # the exported file replays the same way on its own
    assert main(["replay", str(export)]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == result["rows"]


def test_replay_from_run_errors_are_clear(tmp_path, capsys, qwen3):
    run, _ = asyncio.run(_stored_run(tmp_path, qwen3, "tree"))
    assert main(["replay", "--from-run", str(run), "--rollout", "nope"]) == 2
    assert "no rollout 'nope'" in (err := capsys.readouterr().err) and "task-r0" in err
    assert main(["replay", "--from-run", str(tmp_path / "missing"), "--rollout", "x"]) == 2
    assert "not a strands-art run directory" in capsys.readouterr().err
    assert main(["replay", "--from-run", str(run)]) == 2
    assert "--rollout ID" in capsys.readouterr().err
    assert main(["replay"]) == 2


def test_a_turn_over_the_size_bound_is_refused_at_once(tmp_path, capsys):
    """Issue 48: a 10 MB user message is refused before the tokenizer loads (it ran past 4 minutes);
    a turn at the bound still replays."""
    import time

    from strands_art.replay import MAX_TURN_CHARS

    big = {
        "turns": [{"messages": [{"role": "user", "content": "word " * 2_000_000}], "output": {"text": "x"}}]
    }
    t = time.perf_counter()
    code, out = run_cli(tmp_path, {**big, "tokenizer": "no-such"}, capsys=capsys)
    assert code == 2 and out.out == ""
    assert (
        "turn 0: its messages and tools hold 10,000,015 characters of text" in out.err
    )  # keys and role count
    assert f"more than the {MAX_TURN_CHARS:,}" in out.err
    assert time.perf_counter() - t < 60  # not a speed claim: it never reached the tokenizer ("no-such")
    fits = "w" * (MAX_TURN_CHARS - len("role") - len("user") - len("content"))
    spec = {
        "tokenizer": "qwen3",
        "turns": [{"messages": [{"role": "user", "content": fits}], "output": {"text": "x"}}],
    }
    code, out = run_cli(tmp_path, spec, capsys=capsys)
    assert code == 0 and json.loads(out.out)["summary"]["turns"] == 1


def test_replay_from_a_training_run_reproduces_its_stored_rows(capsys):
    """A ``strands-art train`` run (tests/data/train-lookup): the model from its train.json, the
    history mode (linear, its heals) from the rollout; every row as stored."""
    from pathlib import Path

    from strands_art.store import TrajectoryStore

    run = Path(__file__).parent / "data" / "train-lookup"
    stored = {t.rollout_id: t for t in TrajectoryStore(run / "trajectories")}
    rid = "b2-lookup-quartz-r1"
    assert main(["replay", "--from-run", str(run), "--rollout", rid]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [(r["input_ids"], r["loss_mask"]) for r in result["rows"]] == [
        (r.input_ids, r.loss_mask) for r in stored[rid].rows
    ]
    assert result["summary"]["events"] == {"heal": 1, "length_cut_at_calls": 1}
