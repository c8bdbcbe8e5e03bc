"""Episodes for the verl agent-loop tests, importable by verl's agent-loop worker processes.

An episode is what :class:`~strands_art.verl.agent_loop.StrandsAgentLoop` runs for one rollout
(``episode:`` in the agent-loop entry). The Ray test starts verl's ``AgentLoopWorkerTQ`` actors
in other processes, which import the episode by its dotted path: it lives here, in a module with
no test-only imports (``tests/`` is on those processes' ``PYTHONPATH``).
"""

from __future__ import annotations

from strands import Agent
from strands.agent.conversation_manager import NullConversationManager
from strands.types.exceptions import MaxTokensReachedException

from strands_art.model import ARTModel

QUESTIONS = ("Name a colour.", "Say hi.")  # two agents per rollout -> two rows (linear mode)


async def two_agents_episode(gateway, sampling, sample):
    """Two Strands agents in one rollout (two lineages -> two rows). Reward: 1.0 for session 0,
    0.0 otherwise, so GRPO gives each group advantages of +-1/sqrt(2)."""
    rid = f"{sample['uid']}-{sample['session_id']}"
    gateway.open_session(rid, sample["uid"], sampling)
    for question in QUESTIONS:
        model = ARTModel(gateway=gateway, session_id=rid, group_id=sample["uid"])
        agent = Agent(model=model, callback_handler=None, conversation_manager=NullConversationManager())
        try:
            await agent.invoke_async(question)
        except MaxTokensReachedException:
            pass  # a turn cut at response_length: recorded like any other (finish_reason "length")
    return gateway.close_session(rid, reward=1.0 if sample["session_id"] == 0 else 0.0)
