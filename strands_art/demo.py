"""``strands-art demo``: a Strands agent with two small tools on the embedded model.

Shows the whole path on CPU: the agent talks to :class:`~strands_art.model.ARTModel`, every call
goes through the rollout gateway to the sampling backend (default: Qwen2.5-Coder-1.5B-Instruct on
llama.cpp, which calls the tools; ``--model smollm2`` runs the 135M model on ``transformers``),
and the captured rows are printed with their token counts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from rich.console import Console
from rich.table import Table
from strands import Agent, tool
from strands.agent.conversation_manager import NullConversationManager
from strands.hooks import BeforeToolCallEvent, HookProvider, HookRegistry

from strands_art.backends import local_backend
from strands_art.backends.base import SamplingParams
from strands_art.gateway import RolloutGateway
from strands_art.model import ARTModel

logger = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You are a helpful assistant with two tools, add and word_count. To use a tool, answer with "
    "only the tool call and nothing else, for example:\n"
    '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>\n'
    "You may write several calls in one answer. After the tool results, answer in one short "
    "plain sentence."
)
QUESTION = "What is 17 plus 25? Then count the words in 'the quick brown fox'."


@tool
def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: the first number
        b: the second number
    """
    return a + b


@tool
def word_count(text: str) -> int:
    """Count the words in a text.

    Args:
        text: the text to count words in
    """
    return len(text.split())


class LiveToolCalls(HookProvider):
    """Print each tool call the moment the agent makes it, with the seconds since the start."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.t0 = time.monotonic()

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(BeforeToolCallEvent, self._on_tool_call)

    def _on_tool_call(self, event: BeforeToolCallEvent) -> None:
        use = event.tool_use
        self.console.print(
            f"[dim]{time.monotonic() - self.t0:5.1f} s[/dim] [bold]tool call:[/bold] {use['name']}({use['input']})"
        )


async def _run(model: str, history_mode: str, seed: int, max_new_tokens: int, console: Console) -> None:
    with console.status(f"loading {model} (the first load joins/converts and caches it)"):
        backend, tokenizer = local_backend(model, context_tokens=4096)
    gateway = RolloutGateway(
        tokenizer,
        backend,
        history_mode=history_mode,
        sampling=SamplingParams(temperature=0.7, top_p=0.95, max_new_tokens=max_new_tokens, seed=seed),
    )
    art = ARTModel(gateway=gateway, session_id="demo")
    agent = Agent(
        model=art,
        tools=[add, word_count],
        system_prompt=SYSTEM_PROMPT,
        conversation_manager=NullConversationManager(),
        callback_handler=None,
        hooks=[LiveToolCalls(console)],
    )
    console.rule("conversation")
    try:
        result = await agent.invoke_async(QUESTION)
        console.print(f"[bold]stop reason:[/bold] {result.stop_reason}")
    except Exception as exc:  # the tiny model may end on max_tokens; the rows are still shown
        console.print(f"[yellow]agent stopped: {type(exc).__name__}: {exc}[/yellow]")
    for m in agent.messages:
        for block in m["content"]:
            if "text" in block:
                console.print(f"[bold]{m['role']}:[/bold] {block['text']}")
            elif "toolUse" in block:
                console.print(
                    f"[bold]{m['role']} → tool:[/bold] {block['toolUse']['name']}({block['toolUse']['input']})"
                )
            elif "toolResult" in block:
                console.print(f"[bold]tool result:[/bold] {block['toolResult']['content']}")
    traj = gateway.close_session("demo")
    table = Table(title=f"captured rows ({history_mode} mode)")
    for col in ("row", "turns", "tokens", "sampled (mask 1)", "context (mask 0)"):
        table.add_column(col, justify="right")
    for i, row in enumerate(traj.rows):
        table.add_row(
            str(i), str(row.turns), str(len(row)), str(row.num_sampled), str(len(row) - row.num_sampled)
        )
    console.rule("rows")
    console.print(table)
    for ev in traj.events:
        console.print(f"event turn {ev['turn']}: {ev['kind']}: {ev.get('reason', '')}")
    await backend.aclose()


def run_demo(
    model: str = "qwen2.5-coder-1.5b", history_mode: str = "tree", seed: int = 0, max_new_tokens: int = 96
) -> int:
    """Run the demo agent and print the conversation and rows; returns a process exit code."""
    asyncio.run(_run(model, history_mode, seed, max_new_tokens, Console()))
    return 0
