"""An HTTP front on the rollout gateway (Chat Completions, Anthropic Messages, the Responses API),
for harnesses that are not Strands.

Another way into the same :class:`~strands_art.gateway.RolloutGateway` as the Strands provider
(strands_art/model.py): :mod:`.wire`, :mod:`.anthropic_wire` and :mod:`.responses_wire` speak
the three wire formats, :mod:`.fronts` handles the two newer ones, :mod:`.turn` runs one turn
for every protocol, :mod:`.sessions` routes requests to rollouts, :mod:`.app` is the aiohttp
application, :mod:`.cli` the ``strands-art serve`` command. See docs/http-front.md.

``create_app``, ``start``, ``ServeConfig`` and ``error_for`` are imported from :mod:`.app` on
first use, so ``strands-art --help`` does not load aiohttp and the gateway.
"""

from __future__ import annotations

from typing import Any

from strands_art.serve.defaults import DEFAULT_HOST, DEFAULT_MAX_BODY_BYTES, DEFAULT_PORT

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_PORT",
    "ServeConfig",
    "create_app",
    "error_for",
    "start",
]


def __getattr__(name: str) -> Any:
    if name in ("ServeConfig", "create_app", "error_for", "start"):
        from strands_art.serve import app

        return getattr(app, name)
    raise AttributeError(f"module 'strands_art.serve' has no attribute {name!r}")
