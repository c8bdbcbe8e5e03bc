"""A system/developer message in the middle of a conversation stays at its position (issue 48, U07).

Real tokenizers and templates of every family, the scripted backend, linear mode: a harness's
reminder between an answer and the next user message reaches the model after the earlier turns
and before the new user message; the earlier prompt stays a prefix (one row). Qwen3 and Llama 3.1
render it as a system message there, GPT-OSS as a developer message; Qwen3.5 (whose template
refuses it), DeepSeek-R1 (which hoists it) and Mistral v3 (which moves it) render it as a user
message at its position, with a ``system_as_user`` event.
"""

from __future__ import annotations

import asyncio
import functools

import pytest
from support.family_cases import WRITERS

from strands_art.backends.base import SamplingParams
from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.registry import family_of, load_tokenizer
from strands_art.render_system import mid_system_indices, system_as_user

TREATMENT = {
    "qwen3": "keep",
    "llama3.1": "keep",
    "gpt-oss": "keep",
    "qwen3.5": "user",
    "deepseek-r1": "user",
    "mistral-v3": "user",
}
S = {"role": "system", "content": "You are terse."}
U1 = {"role": "user", "content": "Capital of France?"}
U2 = {"role": "user", "content": "Capital of Italy?"}
NOTE = "REMINDER: answer in French from now on."
_tok = functools.lru_cache(maxsize=None)(load_tokenizer)


def _answer(alias: str, text: str) -> str:
    writer = WRITERS.get(alias)
    return writer.turn([], text, 0, "x") if writer else f"<think>\nx\n</think>\n\n{text}<|im_end|>"


@pytest.mark.parametrize("role", ["system", "developer"])
@pytest.mark.parametrize("alias", TREATMENT)
def test_a_mid_conversation_instruction_stays_at_its_position(alias, role):
    tok = _tok(alias)
    backend = ScriptedBackend(tok, [{"text": _answer(alias, "Paris.")}, {"text": _answer(alias, "Rome.")}])
    gw = RolloutGateway(
        tok,
        backend,
        family=family_of(alias),
        history_mode="linear",
        sampling=SamplingParams(max_new_tokens=64),
    )
    assert gw.renderer.mid_system == TREATMENT[alias]
    gw.open_session("s")

    async def run():
        r1 = await gw.generate("s", [S, U1])
        return await gw.generate("s", [S, U1, r1.assistant_message, {"role": role, "content": NOTE}, U2])

    r2 = asyncio.run(run())
    text = gw.renderer.decode(r2.turn.prompt_ids)
    assert text.index("Paris.") < text.index(NOTE) < text.index("Capital of Italy?")
    assert text.count(NOTE) == 1
    traj = gw.close_session("s")
    moved = [e for e in traj.events if e["kind"] == "system_as_user"]
    assert [(e["turn"], e["message"]) for e in moved] == ([(1, 3)] if TREATMENT[alias] == "user" else [])
    assert traj.turns[1].messages[3]["role"] == "system"  # recorded as the harness sent it
    if alias != "mistral-v3":  # Mistral moves its leading system prompt anyway (docs/model-families.md)
        assert len(traj.rows) == 1 and not [e for e in traj.events if e["kind"] == "reset"]


def test_leading_system_messages_are_not_mid_conversation():
    msgs = [S, S, U1, {"role": "assistant", "content": "a"}, S, U2, S]
    assert mid_system_indices(msgs) == [4, 6]
    out = system_as_user(msgs)
    assert [m["role"] for m in out] == ["system", "system", "user", "assistant", "user", "user", "user"]
    assert out[4]["content"] == S["content"] and out[0] is S and system_as_user([S, U1]) == [S, U1]
