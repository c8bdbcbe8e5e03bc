"""Rows that can be rebuilt later (issue 28, item 4): every input of a render (template variables
such as the pinned date, ``chat_template_kwargs``, tokenizer and template hashes) is recorded with
the trajectory and used by ``replay --from-run``; a stored run rebuilds to the same rows with the
clock moved."""

from __future__ import annotations

import asyncio
import json
import types

import pytest

import strands_art.families.harmony as harmony_mod
import strands_art.families.llama3 as llama3_mod
from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.registry import family_of, load_tokenizer
from strands_art.render_inputs import tokenizer_sha256
from strands_art.replay import ReplayInputError, replay, spec_from_run
from strands_art.store import TrajectoryStore

T1 = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hi."}]
T2 = T1 + [{"role": "assistant", "content": "Hi."}, {"role": "user", "content": "Again."}]
OUTS = {
    "llama3.2": ["Hi.<|eot_id|>", "Hi again.<|eot_id|>"],
    "gpt-oss": ["<|channel|>final<|message|>Hi.<|return|>", "<|channel|>final<|message|>Hi again.<|return|>"],
}
DATES = {"llama3.2": ("28 Feb 2026", "03 Mar 2026"), "gpt-oss": ("2026-02-28", "2026-03-03")}


def _clock(monkeypatch, alias: str, day: str) -> None:
    """Every clock read of the families returns ``day`` (in the family's own format)."""
    fake = types.SimpleNamespace(strftime=lambda fmt, t=None: day)
    monkeypatch.setattr(llama3_mod if alias == "llama3.2" else harmony_mod, "time", fake)


def _record(alias: str, mode: str, kwargs: dict | None = None):
    tok = load_tokenizer(alias)
    gw = RolloutGateway(
        tok,
        ScriptedBackend(tok, [{"text": t} for t in OUTS[alias]]),
        history_mode=mode,
        family=family_of(alias),
        chat_template_kwargs=kwargs or {},
    )
    gw.open_session("r0")
    asyncio.run(gw.generate("r0", T1))
    asyncio.run(gw.generate("r0", T2))
    return gw, gw.close_session("r0")


@pytest.mark.parametrize("mode", ["tree", "linear"])
@pytest.mark.parametrize("alias", ["llama3.2", "gpt-oss"])
def test_a_stored_run_rebuilds_the_same_rows_with_the_clock_moved(tmp_path, monkeypatch, alias, mode) -> None:
    before, later = DATES[alias]
    _clock(monkeypatch, alias, before)
    gw, traj = _record(alias, mode)
    render = traj.metadata["render"]
    assert before in json.dumps(render["template_vars"])
    assert render["family"] == family_of(alias) and len(render["chat_template_sha256"]) == 64
    assert render["tokenizer_sha256"] == tokenizer_sha256(gw.renderer.tokenizer)
    TrajectoryStore(tmp_path / "trajectories").append(traj)
    (tmp_path / "config.json").write_text(json.dumps({"tokenizer": alias, "history_mode": mode}))

    _clock(monkeypatch, alias, later)  # days later, another gateway
    spec = spec_from_run(tmp_path, "r0")
    res = asyncio.run(replay(spec))
    assert [r["input_ids"] for r in res["rows"]] == [r.input_ids for r in traj.rows]
    text = gw.renderer.decode(res["turns"][0]["prompt_ids"])
    assert before in text and later not in text


def test_user_chat_template_kwargs_are_recorded_and_replayed(tmp_path, monkeypatch) -> None:
    """kwargs given to the gateway (not in the run's config.json) still reach the replay."""
    _clock(monkeypatch, "gpt-oss", "2026-02-28")
    _, traj = _record("gpt-oss", "tree", {"reasoning_effort": "high"})
    assert traj.metadata["render"]["template_vars"]["reasoning_effort"] == "high"
    TrajectoryStore(tmp_path / "trajectories").append(traj)
    (tmp_path / "config.json").write_text(json.dumps({"tokenizer": "gpt-oss"}))
    res = asyncio.run(replay(spec_from_run(tmp_path, "r0")))
    assert [r["input_ids"] for r in res["rows"]] == [r.input_ids for r in traj.rows]


def test_replay_refuses_another_template_or_tokenizer(tmp_path) -> None:
    _, traj = _record("llama3.2", "tree")
    traj.metadata["render"]["chat_template_sha256"] = "0" * 64
    TrajectoryStore(tmp_path / "trajectories").append(traj)
    (tmp_path / "config.json").write_text(json.dumps({"tokenizer": "llama3.2"}))
    with pytest.raises(ReplayInputError, match="another chat template"):
        asyncio.run(replay(spec_from_run(tmp_path, "r0")))
    spec = spec_from_run(tmp_path, "r0")
    spec["render"]["chat_template_sha256"] = traj.metadata["render"]["chat_template_sha256"] = None
    spec["render"]["tokenizer_sha256"] = "f" * 64
    with pytest.raises(ReplayInputError, match="another tokenizer"):
        asyncio.run(replay(spec))
