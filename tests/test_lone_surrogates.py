"""A lone surrogate (JSON ``"\\ud800"`` in a model's tool call, a non-UTF-8 file name) can be
neither tokenized nor stored: the gateway refuses it as bad input, and the agent's tools never
echo one back (seen: a path argument ``"\\ud800"`` came back in the editor's error, and the next
turn crashed the gateway with UnicodeEncodeError)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strands_art.backends.scripted import ScriptedBackend
from strands_art.envs.migrationbench.agent.tools import make_tools, valid_text
from strands_art.envs.migrationbench.workspace import Workspace
from strands_art.envs.sandbox import SandboxUnavailable, require_sandbox
from strands_art.gateway import RolloutGateway
from strands_art.history.normalize import MessageError
from strands_art.registry import load_tokenizer


@given(st.text())
def test_valid_text_encodes_and_keeps_valid_text(text: str) -> None:
    out = valid_text(text)
    out.encode("utf-8")  # never raises
    assert len(out) == len(text)
    assert [a if not 0xD800 <= ord(a) <= 0xDFFF else "\ufffd" for a in text] == list(out)


def _call(args: str) -> dict:
    return {"id": "c1", "type": "function", "function": {"name": "file_editor", "arguments": args}}


@pytest.mark.parametrize(
    ("messages", "where"),
    [
        (
            [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": None, "tool_calls": [_call('{"path": "ok"}')]},
                {"role": "tool", "tool_call_id": "c1", "content": "Error: Path '\ud800' is outside"},
            ],
            "message 2: content holds a lone surrogate U+D800 at character 13",
        ),
        (
            [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": None, "tool_calls": [_call('{"path": "a\udcff"}')]},
            ],
            "message 1: tool_calls[0].function.arguments holds a lone surrogate U+DCFF at character 11",
        ),
    ],
)
def test_gateway_refuses_lone_surrogates_and_records_nothing(messages: list, where: str) -> None:
    tok = load_tokenizer("qwen2.5-coder-0.5b")
    backend = ScriptedBackend(tok, [{"text": "ok"}])
    gw = RolloutGateway("qwen2.5-coder-0.5b", backend, history_mode="tree")
    gw.open_session("r0")
    with pytest.raises(MessageError) as err:
        asyncio.run(gw.generate("r0", messages))
    assert str(err.value).startswith(where)
    assert backend.calls == 0
    assert gw.close_session("r0").rows == []


def test_editor_never_echoes_a_lone_surrogate(tmp_path: Path) -> None:
    try:
        require_sandbox()
    except SandboxUnavailable:
        pytest.skip("bubblewrap sandbox unavailable")
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "pom.xml").write_text("<project/>\n")
    ws = Workspace.copy_of(tmp_path / "repo")
    try:
        _, editor = make_tools(ws)
        (ws.root / "bin\udcff.txt").write_bytes(b"data\n")  # a file name that is not UTF-8
        r = asyncio.run(editor(command="view", path="bin\udcff.txt"))
        text = r["content"][0]["text"]
        assert r["status"] == "success" and f"{ws.root}/bin\ufffd.txt:" in text and "data" in text
        text.encode("utf-8")
    finally:
        ws.cleanup()
