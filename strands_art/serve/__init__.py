"""An OpenAI-compatible HTTP front on the rollout gateway, for harnesses that are not Strands.

Another way into the same :class:`~strands_art.gateway.RolloutGateway` as the Strands provider
(strands_art/model.py): :mod:`.wire` converts the Chat Completions wire format, :mod:`.sessions`
routes requests to rollouts, :mod:`.app` is the aiohttp application, :mod:`.cli` the
``strands-art serve`` command. See docs/http-front.md.
"""

from strands_art.serve.app import DEFAULT_HOST, DEFAULT_PORT, ServeConfig, create_app, error_for, start
from strands_art.serve.sessions import SESSION_HEADER

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "SESSION_HEADER",
    "ServeConfig",
    "create_app",
    "error_for",
    "start",
]
