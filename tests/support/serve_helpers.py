"""Shared pieces of the HTTP front tests: a 3-turn tool conversation, its in-process reference
through ``ARTModel``, and a running front on loopback."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import Any

from strands import Agent
from strands.agent.conversation_manager import NullConversationManager

from strands_art.backends.scripted import ScriptedBackend
from strands_art.conversion.strands import tool_specs_to_openai
from strands_art.gateway import RolloutGateway
from strands_art.model import ARTModel
from strands_art.registry import family_of, load_tokenizer
from strands_art.serve import create_app, start

from .strands_tools import add

SYSTEM = "You are a careful calculator. Use the add tool for every sum."
QUESTION = "What is 17 + 25, plus 8?"
ROLLOUT = "rollout-7"
SCRIPT = [
    # compact JSON on the first call: a client that re-serializes arguments changes the spacing
    {"text": '<tool_call>\n{"name": "add", "arguments": {"a":17,"b":25}}\n</tool_call><|im_end|>'},
    {
        "text": '<think>\nnow add 8\n</think>\n\n<tool_call>\n{"name": "add", "arguments": {"a": 42, "b": 8}}\n</tool_call><|im_end|>'
    },
    {"text": "17 + 25 + 8 = 50.<|im_end|>"},
]


TOOLS = tool_specs_to_openai([add.tool_spec])


def run_tool(name: str, arguments: str) -> str:
    assert name == "add"
    args = json.loads(arguments)
    return str(args["a"] + args["b"])


def replay_recorded_turn(
    path: Any, model: str = "qwen2.5-coder-0.5b"
) -> tuple[dict, Any, RolloutGateway, Any]:
    """A recorded turn (JSON: ``output_ids``, ``logprobs``, ``finish_reason``, ``messages``,
    ``tools``) played back through a gateway of ``model``'s tokenizer and family, in session "r":
    ``(record, tokenizer, gateway, generate's result)``."""
    import asyncio

    rec = json.loads(path.read_text())
    tok = load_tokenizer(model)
    item = {
        "token_ids": rec["output_ids"],
        "logprobs": rec["logprobs"],
        "finish_reason": rec["finish_reason"],
    }
    gw = RolloutGateway(tok, ScriptedBackend(tok, [item]), family=family_of(model))
    gw.open_session("r")
    return rec, tok, gw, asyncio.run(gw.generate("r", rec["messages"], rec["tools"]))


def gateway(tok: Any, script: list[dict[str, Any]] | None = None, **config: Any) -> RolloutGateway:
    return RolloutGateway(tok, ScriptedBackend(tok, list(script or SCRIPT)), **config)


async def reference_rows(
    tok: Any, **config: Any
) -> tuple[list[list[int]], list[tuple[list[int], list[int], list[float]]]]:
    """(prompt IDs per turn, rows) of the conversation through a Strands Agent and ARTModel
    in-process (gateway ``config`` keys, e.g. ``history_mode``)."""
    gw = gateway(tok, **config)
    await run_agent(ARTModel(gateway=gw, session_id=ROLLOUT, group_id="task-a"))
    return summary(gw.close_session(ROLLOUT))


async def run_agent(model: Any) -> None:
    """The conversation as a Strands Agent with ``model`` (ARTModel or OpenAIModel) runs it."""
    agent = Agent(
        model=model,
        tools=[add],
        system_prompt=SYSTEM,
        callback_handler=None,
        conversation_manager=NullConversationManager(),
    )
    result = await agent.invoke_async(QUESTION)
    assert "50" in str(result)


def summary(traj: Any) -> tuple[list[list[int]], list[tuple[list[int], list[int], list[float]]]]:
    """Turns' prompt IDs and rows (input IDs, loss mask, logprobs) of a Trajectory or its dict."""
    d = traj if isinstance(traj, dict) else traj.to_dict()
    return (
        [t["prompt_ids"] for t in d["turns"]],
        [(r["input_ids"], r["loss_mask"], r["logprobs"]) for r in d["rows"]],
    )


@asynccontextmanager
async def running_front(gw: RolloutGateway, **config: Any):
    """Serve ``gw`` on 127.0.0.1 (free port); yields the base URL ``http://127.0.0.1:PORT``."""
    app = create_app(gw, **config)
    runner = await start(app, "127.0.0.1", 0)
    try:
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}"
    finally:
        await runner.cleanup()
