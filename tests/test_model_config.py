"""ARTModel provider conventions (issue 14 item 10), as strands' own providers
(strands/models/openai.py, litellm.py, llamacpp.py): config validated when set, params and
tool_choice either take effect or are refused clearly, session and context-limit updates work."""

from __future__ import annotations

import warnings

import pytest
from strands.types.exceptions import ContextWindowOverflowException
from support.strands_tools import add

from strands_art.backends.scripted import ScriptedBackend
from strands_art.gateway import RolloutGateway
from strands_art.model import ARTModel

HI = [{"role": "user", "content": [{"text": "hi"}]}]


def gateway(tok, n=4, **config):
    return RolloutGateway(tok, ScriptedBackend(tok, [{"text": "ok<|im_end|>"}] * n), **config)


async def run(model, messages=HI, **kw):
    return [ev async for ev in model.stream(messages, [add.tool_spec], None, **kw)]


def test_params_are_refused_at_construction_when_the_gateway_rejects_overrides(qwen3):
    gw = gateway(qwen3, on_sampling_override="reject")
    with pytest.raises(ValueError, match=r"params \['temperature'\] are rejected: the trainer owns sampling"):
        ARTModel(gateway=gw, session_id="s", params={"temperature": 0.9})
    with pytest.raises(ValueError, match=r"params \['temprature'\] are not sampling parameters"):
        ARTModel(gateway=gateway(qwen3), session_id="s", params={"temprature": 0.9})
    with pytest.raises(ValueError, match="params must be a dict"):
        ARTModel(gateway=gateway(qwen3), session_id="s", params=0.9)
    # None values ask for nothing
    assert ARTModel(gateway=gw, session_id="s", params={"temperature": None}).get_config()["params"] == {
        "temperature": None
    }


async def test_ignored_params_warn_once_at_construction_and_are_recorded_per_call(qwen3):
    gw = gateway(qwen3)
    with pytest.warns(UserWarning, match="will not take effect"):
        model = ARTModel(gateway=gw, session_id="s", params={"max_tokens": 5, "temperature": 0.1})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning at call time
        await run(model)
    traj = gw.trajectory("s")
    assert [e["reason"] for e in traj.events if e["kind"] == "sampling_override_ignored"] == [
        "['max_tokens', 'temperature']"
    ]
    assert gw.backend.params[0].max_new_tokens == gw.config["sampling"].max_new_tokens  # not 5


@pytest.mark.parametrize("mode", ["ignore", "reject"])
async def test_an_output_cap_at_or_above_the_trainers_limit_is_no_override(qwen3, mode):
    """As on the HTTP front: ``max_tokens``/``max_new_tokens`` at or above the gateway's
    ``max_new_tokens`` (512) asks for nothing the trainer does not do: no warning, no refusal,
    no event; a lower one still is an override."""
    gw = gateway(qwen3, on_sampling_override=mode)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = ARTModel(gateway=gw, session_id="s", params={"max_tokens": 512, "max_new_tokens": 4096})
        await run(model)
    assert gw.trajectory("s").events == []
    with pytest.raises(ValueError) if mode == "reject" else pytest.warns(UserWarning):
        ARTModel(gateway=gw, session_id="t", params={"max_tokens": 511})


async def test_forcing_tool_choice_is_recorded_or_rejected(qwen3):
    gw = gateway(qwen3)
    model = ARTModel(gateway=gw, session_id="s")
    with pytest.warns(UserWarning, match="is not enforced"):
        await run(model, tool_choice={"tool": {"name": "add"}})
    await run(model, tool_choice={"auto": {}})  # auto is what sampling does anyway: no event
    events = [e for e in gw.trajectory("s").events if e["kind"] == "tool_choice_ignored"]
    assert [e["tool_choice"] for e in events] == [{"tool": {"name": "add"}}]
    strict = ARTModel(gateway=gateway(qwen3), session_id="t", on_tool_choice="reject")
    with pytest.raises(ValueError, match="cannot be enforced"):
        await run(strict, tool_choice={"any": {}})
    assert strict.gateway.trajectory("t").turns == []
    with pytest.raises(ValueError, match="on_tool_choice must be"):
        ARTModel(gateway=gw, session_id="s", on_tool_choice="force")


async def test_update_session_id_switches_session_with_its_own_history(qwen3):
    gw = gateway(qwen3)
    model = ARTModel(gateway=gw, session_id="a", group_id="task-1")
    await run(model)
    model.update_config(session_id="b", group_id="task-2")
    await run(model)
    assert gw.trajectory("a").group_id == "task-1" and gw.trajectory("b").group_id == "task-2"
    assert len(gw.trajectory("a").turns) == 1 and len(gw.trajectory("b").turns) == 1
    assert gw.trajectory("b").rows[0].group_id == "task-2"
    with pytest.raises(ValueError, match="group_id is fixed once the session is open"):
        model.update_config(group_id="task-3")
    model.update_config(session_id="a")
    assert model.session_id == "a" and model.canonical.rollout_id == "a"


async def test_context_window_limit_is_enforced_and_bounded(qwen3):
    gw = gateway(qwen3, max_context_tokens=4096)
    model = ARTModel(gateway=gw, session_id="s")
    with pytest.raises(ValueError, match=r"1\.\.4096"):
        model.update_config(context_window_limit=8192)
    with pytest.raises(ValueError, match="whole number"):
        model.update_config(context_window_limit="big")
    model.update_config(context_window_limit=20)
    assert model.context_window_limit == 20  # what Strands' conversation managers read
    with pytest.raises(ContextWindowOverflowException, match="budget of 20 tokens"):
        await run(model)  # the tool spec alone is longer than 20 tokens
    assert gw.trajectory("s").turns == []
    model.update_config(context_window_limit=None)
    await run(model)
    assert gw.backend.params[-1].max_new_tokens <= 4096 - len(gw.trajectory("s").turns[0].prompt_ids)


def test_history_mode_is_a_gateway_setting(qwen3):
    gw = gateway(qwen3, history_mode="linear")
    assert (
        ARTModel(gateway=gw, session_id="s", history_mode="linear").get_config()["history_mode"] == "linear"
    )
    with pytest.raises(ValueError, match=r"history_mode is a gateway setting \(this gateway is 'linear'\)"):
        ARTModel(gateway=gw, session_id="t", history_mode="tree")
