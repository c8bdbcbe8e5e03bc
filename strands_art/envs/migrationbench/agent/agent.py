"""The MigrationBench agent: a Strands ``Agent`` that migrates a Java 8 Maven project to Java 17.

Shape follows the MigrationBench reference agent (a Strands agent with a shell tool and a file
editor, user turn "Please help migrate this repo: ... There are N test cases in it."; the rollout
ends when the model answers without a tool call) plus two limits: a number of model calls
(turns) and wall time, defaults from :class:`.config.RolloutConfig` (50, 1,800 s).
:class:`RolloutLimits` enforces both as a Strands hook provider: after a tool batch it calls
``agent.cancel(after_current_tools=True)``, so the loop stops *before* the next model call with
``stop_reason="cancelled"`` and nothing synthetic is appended to the history (every tool use
keeps its tool result). The reason is recorded as ``limits.stop_reason`` and in
``agent.state["stop_reason"]``: "completed", "turn_limit", "time_limit", "max_tokens",
"context_overflow" or "error".

History policy: ``NullConversationManager`` with ``context_manager=False`` - Strands never trims
or summarizes the conversation mid-rollout, so the messages the model saw are exactly the
messages the gateway captured. A context overflow ends the rollout instead.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from strands import Agent
from strands.agent.conversation_manager import NullConversationManager
from strands.hooks import (
    AfterInvocationEvent,
    AfterModelCallEvent,
    AfterToolsEvent,
    BeforeInvocationEvent,
    BeforeToolsEvent,
    HookProvider,
    HookRegistry,
)
from strands.tools.executors import SequentialToolExecutor
from strands.types.exceptions import ContextWindowOverflowException, MaxTokensReachedException

from strands_art.envs.migrationbench.agent.commands import DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TIMEOUT_S
from strands_art.envs.migrationbench.agent.tools import ToolStats, make_tools
from strands_art.envs.migrationbench.config import RolloutConfig
from strands_art.envs.migrationbench.workspace import Workspace
from strands_art.envs.sandbox import Sandbox
from strands_art.validation import is_int

logger = logging.getLogger(__name__)

SYSTEM_PROMPT = """\
You are an expert Java engineer. Migrate the Maven project in the given directory from Java 8 to \
Java 17 so that `mvn clean verify` passes under JDK 17 and every module compiles to Java 17 \
bytecode (class-file major version 61).

Tools: `shell` runs a bash command in the repository root (no network; Maven resolves offline; \
commands time out), `file_editor` views and edits files (view, create, str_replace, insert, \
undo_edit).

How to work:
1. Look first: the root and module `pom.xml` files, then the sources that use JDK internals.
2. Target Java 17: set `<maven.compiler.release>17</maven.compiler.release>` (or source and \
target 17) in every pom that sets 1.8, including compiler plugin `<configuration>` blocks.
3. Upgrade plugins pinned to versions too old for Java 17 or JUnit 5: maven-compiler-plugin \
3.8.1 or newer, maven-surefire-plugin 2.22.2 or newer.
4. Replace APIs removed from the JDK: `sun.misc.BASE64Encoder`/`BASE64Decoder` -> \
`java.util.Base64`; JAXB (`javax.xml.bind`) and `javax.annotation` -> add the API dependencies \
or rewrite the code; the Nashorn `ScriptEngine` is gone -> rewrite the logic in Java; \
reflective access into JDK internals (`setAccessible` on `java.*` fields) fails -> use public APIs.
5. Keep every test: do not delete, disable, skip or rename any `@Test` method.
6. Build with `mvn -q clean verify` and fix every error until it passes.

When the build passes and the migration is complete, reply with a short summary and no tool call.\
"""

COMPACT_SYSTEM_PROMPT = """\
You migrate a Java 8 Maven project to Java 17. You work in its repository root with two tools: \
shell (runs one bash command) and file_editor (view, or str_replace with path, old_str, new_str).

Answer with exactly one tool call at a time, in this form and nothing else:
<tool_call>
{"name": "shell", "arguments": {"command": "cat pom.xml"}}
</tool_call>

Work in this order:
1. Read the build file: {"name": "shell", "arguments": {"command": "cat pom.xml"}}
2. Set every Java version in every pom.xml to 17: \
{"name": "shell", "arguments": {"command": "find . -name pom.xml | xargs sed -i 's#>1[.]8<#>17<#g'"}}
3. Check: {"name": "shell", "arguments": {"command": "grep -rn '1[.]8' --include=pom.xml ."}} \
If it prints lines, fix them with file_editor str_replace.
4. Build: {"name": "shell", "arguments": {"command": "mvn -q clean verify"}} \
If it fails, read the error and fix the cause (too old plugins: maven-compiler-plugin 3.10.1, \
maven-surefire-plugin 2.22.2; APIs removed from the JDK), then build again.
Never delete, skip or change tests.

Each tool result comes back to you as plain text. Read it, then make the next call; do not \
repeat a call whose result you already have. When the build passes after your changes, answer \
with one plain sentence and no tool call: that ends the task.\
"""
"""A shorter prompt for small models (the 0.5B-1.5B Qwen2.5-Coder aliases): the steps as a list,
one worked call in the template's own ``<tool_call>`` form, and when to stop."""

USER_TURN = "Please help migrate this repo: {repo_path}. There are {num_tests} test cases in it."

COMPACT_USER_SUFFIX = (
    "\n\nMake these shell calls in order (you may write several calls in one answer):\n"
    "1. find . -name pom.xml | xargs sed -i 's#>1[.]8<#>17<#g'\n"
    "2. grep -rn '1[.]8' --include=pom.xml .\n"
    "3. mvn -q clean verify\n"
    "Then read the results: fix what the build reports, or answer with one plain sentence when "
    "it passed."
)
"""Appended to the user turn for small models: the recipe's first step next to where they answer
(the tool specs the template puts after the system prompt push the steps ~600 tokens away)."""

STOP_REASONS = ("completed", "turn_limit", "time_limit", "max_tokens", "context_overflow", "error")


def num_tests_of(task: Any) -> int:
    """``num_test_cases`` from a task record (mapping or object) or an int.

    Raises:
        ValueError: no test count found.
    """
    if is_int(task):
        return int(task)
    value = task.get("num_test_cases") if isinstance(task, Mapping) else getattr(task, "num_test_cases", None)
    if value is None:
        raise ValueError(f"task has no num_test_cases: {task!r}")
    return int(value)


def user_prompt(workspace: Workspace, task: Any, *, compact: bool = False, recipe: bool = True) -> str:
    """The first user turn for ``task`` in ``workspace`` (``USER_TURN`` filled in; with
    ``compact`` and ``recipe``, followed by :data:`COMPACT_USER_SUFFIX`, the spelled-out calls)."""
    text = USER_TURN.format(repo_path=workspace.root, num_tests=num_tests_of(task))
    return text + COMPACT_USER_SUFFIX if compact and recipe else text


class RolloutLimits(HookProvider):
    """Stop the agent loop cleanly at a turn or time limit (a Strands hook provider).

    A *turn* is one successful model call. The check runs after each tool batch, i.e. before
    the model would be called again: once ``model_calls >= max_turns`` or the elapsed time
    reaches ``time_limit_s`` the agent is cancelled after its current tools. Tools requested
    after the time limit are not run (their results say why), so history stays well formed.

    Args:
        max_turns: most model calls in one rollout (>= 1).
        time_limit_s: wall seconds from the first invocation (> 0).
        clock: monotonic seconds (injectable for tests).

    Attributes:
        model_calls: successful model calls so far.
        stop_reason: None while running, then one of ``STOP_REASONS``.
    """

    def __init__(
        self,
        max_turns: int = RolloutConfig.max_turns,
        time_limit_s: float = RolloutConfig.time_limit,
        clock: Callable[[], float] = time.monotonic,
    ):
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        if time_limit_s <= 0:
            raise ValueError(f"time_limit_s must be > 0, got {time_limit_s}")
        self.max_turns = max_turns
        self.time_limit_s = time_limit_s
        self._clock = clock
        self.started_at: float | None = None
        self.model_calls = 0
        self.limit_hit: str | None = None
        self.stop_reason: str | None = None

    # ------------------------------------------------------------------ queries
    def elapsed_s(self) -> float:
        return 0.0 if self.started_at is None else self._clock() - self.started_at

    def time_left(self) -> float | None:
        """Seconds left (None before the rollout starts); tools cap their timeouts with it."""
        return None if self.started_at is None else self.time_limit_s - self.elapsed_s()

    def _limit_now(self) -> str | None:
        if self.started_at is not None and self.elapsed_s() >= self.time_limit_s:
            return "time_limit"
        if self.model_calls >= self.max_turns:
            return "turn_limit"
        return None

    # ------------------------------------------------------------------ hooks
    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(BeforeInvocationEvent, self._on_start)
        registry.add_callback(AfterModelCallEvent, self._on_model_call)
        registry.add_callback(BeforeToolsEvent, self._on_before_tools)
        registry.add_callback(AfterToolsEvent, self._on_after_tools)
        registry.add_callback(AfterInvocationEvent, self._on_end)

    def _on_start(self, event: BeforeInvocationEvent) -> None:
        if self.started_at is None:
            self.started_at = self._clock()

    def _on_model_call(self, event: AfterModelCallEvent) -> None:
        if event.stop_response is not None:
            self.model_calls += 1

    def _on_before_tools(self, event: BeforeToolsEvent) -> None:
        if self.started_at is not None and self.elapsed_s() >= self.time_limit_s:
            self.limit_hit = "time_limit"
            event.cancel = f"Not run: the rollout's time limit ({self.time_limit_s:g} s) was reached."

    def _on_after_tools(self, event: AfterToolsEvent) -> None:
        reason = self.limit_hit or self._limit_now()
        if reason is not None:
            self.limit_hit = reason
            logger.info(
                "rollout stops: %s after %d model calls, %.1f s", reason, self.model_calls, self.elapsed_s()
            )
            event.agent.cancel(after_current_tools=True)

    def _on_end(self, event: AfterInvocationEvent) -> None:
        if self.limit_hit is not None:
            self.stop_reason = self.limit_hit
        elif event.result is None:
            self.stop_reason = self.stop_reason or "error"
        elif event.result.stop_reason == "end_turn":
            self.stop_reason = "completed"
        else:
            self.stop_reason = str(event.result.stop_reason)
        event.agent.state.set("stop_reason", self.stop_reason)


def build_agent(
    model: Any,
    workspace: Workspace,
    task: Any,
    *,
    max_turns: int = RolloutConfig.max_turns,
    time_limit_s: float = RolloutConfig.time_limit,
    command_timeout_s: float = DEFAULT_TIMEOUT_S,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    env: Mapping[str, str] | None = None,
    extra_path: Sequence[str] = (),
    sandbox: Sandbox | None = None,
    unsafe_no_sandbox: bool = False,
    stats: ToolStats | None = None,
    limits: RolloutLimits | None = None,
    system_prompt: str = SYSTEM_PROMPT,
    callback_handler: Callable[..., Any] | None = None,
    hooks: Sequence[HookProvider] = (),
) -> Agent:
    """Build the migration agent for one rollout in ``workspace``.

    Args:
        model: a Strands model provider (``ARTModel``, ``LiteLLMModel``, ...).
        workspace: the rollout's own copy of the task repository.
        task: the task record (mapping or object with ``num_test_cases``; stored in state).
        max_turns / time_limit_s: rollout limits (ignored when ``limits`` is given).
        command_timeout_s / max_output_bytes / env / extra_path / sandbox / unsafe_no_sandbox: see
            :func:`~strands_art.envs.migrationbench.agent.tools.make_tools`.
        stats: tool timing sink; pass one to read it after the rollout.
        limits: a :class:`RolloutLimits` to read ``stop_reason`` / ``model_calls`` from.
        system_prompt: defaults to :data:`SYSTEM_PROMPT`.
        callback_handler: Strands streaming callback; None = silent (Strands' default prints).
        hooks: more hook providers (e.g. progress reporting).

    Returns:
        A ``strands.Agent``; run it with ``await agent.invoke_async(user_prompt(workspace, task))``
        or :func:`run_agent`. Tools run one at a time (``SequentialToolExecutor``) so edits and
        builds happen in the order the model wrote them. Model calls are not retried
        (``retry_strategy=None``): a retry would sample a turn the history never shows.
    """
    lim = limits if limits is not None else RolloutLimits(max_turns=max_turns, time_limit_s=time_limit_s)
    tools = make_tools(
        workspace,
        command_timeout_s=command_timeout_s,
        max_output_bytes=max_output_bytes,
        env=env,
        extra_path=extra_path,
        sandbox=sandbox,
        unsafe_no_sandbox=unsafe_no_sandbox,
        stats=stats,
        time_left=lim.time_left,
    )
    return Agent(
        model=model,
        tools=tools,
        system_prompt=system_prompt,
        callback_handler=callback_handler,
        conversation_manager=NullConversationManager(),
        context_manager=False,
        tool_executor=SequentialToolExecutor(),
        retry_strategy=None,
        hooks=[lim, *hooks],
        state={"num_tests": num_tests_of(task), "repo_path": str(workspace.root)},
    )


@dataclass(frozen=True)
class RolloutEnd:
    """How a rollout ended: ``reason`` in ``STOP_REASONS``, ``error`` text if any, seconds."""

    reason: str
    error: str | None
    elapsed_s: float
    model_calls: int


async def run_agent(agent: Agent, prompt: str, limits: RolloutLimits, *, grace_s: float = 60.0) -> RolloutEnd:
    """Run one rollout to its end without raising.

    The hook stops the loop between turns; as a backstop for a model call that itself outlives
    the time limit, the whole invocation is cancelled ``grace_s`` after the limit.

    Returns:
        A :class:`RolloutEnd`; exceptions become reason "max_tokens", "context_overflow" or
        "error" with the message in ``error``.
    """
    start = time.monotonic()
    error: str | None = None
    try:
        await asyncio.wait_for(agent.invoke_async(prompt), timeout=limits.time_limit_s + grace_s)
        reason = limits.stop_reason or "completed"
    except TimeoutError:
        reason, error = "time_limit", f"model call still running {grace_s:g} s after the time limit"
    except MaxTokensReachedException as e:
        reason, error = "max_tokens", str(e)
    except ContextWindowOverflowException as e:
        reason, error = "context_overflow", str(e)
    except Exception as e:  # noqa: BLE001 - a rollout failure is a result, not a crash
        logger.exception("rollout failed")
        reason, error = "error", f"{type(e).__name__}: {e}"
    limits.stop_reason = reason
    agent.state.set("stop_reason", reason)
    return RolloutEnd(
        reason=reason, error=error, elapsed_s=time.monotonic() - start, model_calls=limits.model_calls
    )
