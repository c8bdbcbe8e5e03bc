"""P(call again): how likely the policy is to call the lookup tool again instead of answering.

Used by ``bench/learning_tool.py``. :func:`decision_contexts` builds, for each task, the exact
turn-2 prompt the agent sends after a correct first call and the tool result (played through
the real agent, gateway and chat template by a scripted backend); :func:`call_again_probability`
is the policy's probability, in one forward pass per context, that its reply there starts with
a call-like token (:func:`call_like_tokens`). A first-token proxy: a learned answer written as
JSON text (``{"text": "4119"}``) also starts with ``{`` and counts as a call.
"""

from __future__ import annotations

import statistics
from typing import Any

CALL_TEXT = '{{"name": "lookup", "arguments": {{"key": "{key}"}}}}<|im_end|>'


async def decision_contexts(tok: Any, tasks: list[Any], max_turns: int) -> list[list[int]]:
    """The turn-2 prompt of each task, exactly as the agent builds it after a correct first call.

    Runs the real agent, gateway (linear mode) and chat template with a scripted backend playing
    the call in the 0.5B's own bare-JSON form, then an answer; returns the prompt IDs the
    backend received for turn 2 (list[int] per task; it ends with the tool result and the
    assistant header). Raises AssertionError if the scripted rollout is not a success.
    """
    from strands_art.backends.base import SamplingParams
    from strands_art.backends.scripted import ScriptedBackend
    from strands_art.envs.lookup import lookup_rollout
    from strands_art.gateway import RolloutGateway

    contexts = []
    for task in tasks:
        script = [{"text": CALL_TEXT.format(key=task.key)}, {"text": f"The code is {task.code}.<|im_end|>"}]
        backend = ScriptedBackend(tok, script)
        gateway = RolloutGateway(tok, backend, history_mode="linear")
        params = SamplingParams(temperature=1.0, max_new_tokens=64)
        traj = await lookup_rollout(max_turns)(gateway, task, f"ctx-{task.key}", task.name, params)
        assert traj.metadata["success"], traj.metadata
        contexts.append(backend.prompts[1])
    return contexts


def call_like_tokens(tok: Any) -> list[int]:
    """Token IDs whose text (leading whitespace stripped) opens a tool call as this model writes
    one: ``{``, ``[``, a code fence, or ``<tool_call>``."""
    out = []
    for i in range(len(tok)):
        text = tok.decode([i]).lstrip()
        if text.startswith(("{", "[", "`", "<tool_call>")):
            out.append(i)
    return out


def call_again_probability(trainer: Any, contexts: list[list[int]], call_ids: list[int]) -> float:
    """Mean over ``contexts`` of the policy's probability (temperature 1, no filtering) that the
    reply after the tool result starts with a call-like token (:func:`call_like_tokens`), i.e.
    calls again instead of answering. One forward pass per context, no gradient."""
    import torch

    index = torch.tensor(call_ids, dtype=torch.long)
    probs = []
    with trainer.lock, torch.no_grad():
        for ctx in contexts:
            logits = trainer.model(input_ids=torch.tensor([ctx], dtype=torch.long)).logits[0, -1].float()
            probs.append(float(torch.softmax(logits, dim=-1)[index].sum()))
    return statistics.fmean(probs)


if __name__ == "__main__":
    raise SystemExit(
        "bench/tool_probe.py is a helper module of bench/learning_tool.py and has no command of its "
        "own: run python bench/learning_tool.py (--help for its options)"
    )
