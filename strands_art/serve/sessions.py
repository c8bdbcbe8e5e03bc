"""Session routing and control for the HTTP front: which rollout a request belongs to.

A chat request names its rollout, first match wins:

1. the path prefix ``/rollouts/{rollout_id}/v1/...`` (so any client's ``base_url`` can carry it);
2. the ``X-Rollout-Id`` header (:data:`SESSION_HEADER`);
3. the ``user`` field of the request body (LiteLLM and some SDK wrappers drop it, hence 1 and 2).

An id nobody opened is a 404 (``session_not_found``) unless the front auto-opens sessions; an id
closed through the front is a 409 (``session_closed``) even with auto-open, so a late request
can never start a second trajectory under a finished rollout's id. The front keeps one
:class:`~strands_art.conversion.session.SessionConversion` per open session (the conversion
path's state: canonical history, the last recorded request's messages), dropped on close.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import fields, replace
from typing import Any

from strands_art.backends.base import SamplingParams
from strands_art.conversion.session import SessionConversion
from strands_art.gateway import RolloutGateway
from strands_art.serve.errors import RequestError
from strands_art.serve.wire import check_unicode
from strands_art.trajectory import Trajectory

SESSION_HEADER = "X-Rollout-Id"
ROLLOUT_ID = re.compile(r"[A-Za-z0-9._:@+\-]{1,200}")
SAMPLING_KEYS = tuple(f.name for f in fields(SamplingParams))


def sampling_from_json(data: Any, base: SamplingParams) -> SamplingParams:
    """:class:`SamplingParams` from a JSON object (lists become tuples); the fields it leaves out
    are ``base``'s (the server's defaults: ``--temperature``, ``--top-p``, ``--max-new-tokens``),
    not the dataclass defaults.

    Raises:
        RequestError: 400 for an unknown key or a value SamplingParams rejects.
    """
    if not isinstance(data, dict):
        raise RequestError(400, "'sampling' must be an object", param="sampling")
    check_unicode("sampling", data)  # a stop string is stored with the session
    unknown = sorted(set(data) - set(SAMPLING_KEYS))
    if unknown:
        raise RequestError(
            400, f"unknown sampling keys {unknown} (known: {', '.join(SAMPLING_KEYS)})", param="sampling"
        )
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    try:
        return replace(base, **values)
    except (TypeError, ValueError) as exc:
        raise RequestError(400, f"bad sampling settings: {exc}", param="sampling") from None


class SessionRegistry:
    """The front's view of the gateway's sessions.

    Args:
        gateway: the rollout gateway (sessions opened with its Python API are served too).
        auto_open: open a session on the first request that names an unknown id.
        max_open: the most sessions open through the front at once (opening one more is a 429
            ``too_many_sessions``): a bound on memory when clients open sessions.
        remember_closed: how many closed ids to remember for the 409 (oldest forgotten first).
    """

    def __init__(
        self,
        gateway: RolloutGateway,
        *,
        auto_open: bool = False,
        max_open: int = 10_000,
        remember_closed: int = 100_000,
    ):
        self.gateway = gateway
        self.auto_open = auto_open
        self.max_open = max_open
        self._conversions: dict[str, SessionConversion] = {}
        self._closed: OrderedDict[str, None] = OrderedDict()
        self._remember_closed = remember_closed

    def __len__(self) -> int:
        return len(self._conversions)

    @staticmethod
    def resolve(path_id: str | None, header_id: str | None, user: str | None) -> str:
        """The rollout id of a request (path, then header, then ``user``).

        Raises:
            RequestError: 400 when none names one or the id has characters outside
                ``[A-Za-z0-9._:@+-]`` (or is over 200 long).
        """
        rollout_id = path_id or header_id or user
        if not rollout_id:
            raise RequestError(
                400,
                f"no rollout id: put it in the path (/rollouts/ID/v1/...), the {SESSION_HEADER} header "
                "or the 'user' field",
                code="missing_rollout_id",
            )
        check_id(rollout_id)
        return rollout_id

    def peek(self, rollout_id: str | None) -> SessionConversion | None:
        """The conversion state of an open session, or None; opens nothing, raises nothing
        (the request's messages are checked with it before the session is resolved)."""
        conversion = self._conversions.get(rollout_id) if isinstance(rollout_id, str) else None
        return conversion if conversion is not None and self.gateway.is_open(rollout_id) else None

    def conversion(self, rollout_id: str) -> SessionConversion:
        """The open session's conversion state (opened here under auto-open).

        Raises:
            RequestError: 409 ``session_closed``; 404 ``session_not_found`` (without auto-open).
        """
        if rollout_id in self._closed:
            raise RequestError(409, f"rollout {rollout_id!r} is closed", code="session_closed")
        if not self.gateway.is_open(rollout_id):
            self._conversions.pop(rollout_id, None)  # closed with the Python API
            if not self.auto_open:
                raise RequestError(
                    404,
                    f"no open rollout {rollout_id!r}: open it first (POST /sessions) or start the "
                    "server with auto-open",
                    code="session_not_found",
                )
            self._check_room()
            self.gateway.open_session(rollout_id)
        conversion = self._conversions.get(rollout_id)
        if conversion is None:
            conversion = self._conversions[rollout_id] = SessionConversion(self.gateway, rollout_id)
        return conversion

    def open(self, rollout_id: str | None, group_id: str | None, sampling: SamplingParams | None) -> str:
        """Open a session (the trainer's call); a new id when none is given.

        Raises:
            RequestError: 409 when the id was closed, or is open with another group id.
        """
        if rollout_id is not None:
            check_id(rollout_id)
            if rollout_id in self._closed:
                raise RequestError(409, f"rollout {rollout_id!r} is closed", code="session_closed")
            if self.gateway.is_open(rollout_id):
                open_group = self.gateway.trajectory(rollout_id).group_id
                if open_group != group_id:
                    raise RequestError(
                        409,
                        f"rollout {rollout_id!r} is already open with group {open_group!r}",
                        code="session_exists",
                    )
        if rollout_id is None or rollout_id not in self._conversions:
            self._check_room()
        rollout_id = self.gateway.open_session(rollout_id, group_id, sampling)
        if sampling is not None:
            self.gateway.set_sampling(rollout_id, sampling)
        self._conversions.setdefault(rollout_id, SessionConversion(self.gateway, rollout_id))
        return rollout_id

    def trajectory(self, rollout_id: str) -> Trajectory:
        """The open session's trajectory so far (409 closed / 404 unknown, never auto-opened)."""
        self._require_open(rollout_id)
        return self.gateway.trajectory(rollout_id)

    def set_sampling(self, rollout_id: str, sampling: SamplingParams) -> None:
        self._require_open(rollout_id)
        self.gateway.set_sampling(rollout_id, sampling)

    def close(self, rollout_id: str, reward: float | None) -> Trajectory:
        """Close a session with an optional reward; its id is remembered as closed."""
        self._require_open(rollout_id)
        traj = self.gateway.close_session(rollout_id, reward)
        self._conversions.pop(rollout_id, None)
        self._closed[rollout_id] = None
        while len(self._closed) > self._remember_closed:
            self._closed.popitem(last=False)
        return traj

    def _check_room(self) -> None:
        if len(self._conversions) >= self.max_open:
            raise RequestError(
                429,
                f"{len(self._conversions)} sessions are open, the most this server allows: close some first",
                type="rate_limit_error",
                code="too_many_sessions",
            )

    def _require_open(self, rollout_id: str) -> None:
        check_id(rollout_id)
        if rollout_id in self._closed:
            raise RequestError(409, f"rollout {rollout_id!r} is closed", code="session_closed")
        if not self.gateway.is_open(rollout_id):
            raise RequestError(404, f"no open rollout {rollout_id!r}", code="session_not_found")


def check_id(rollout_id: Any) -> None:
    """Raise a 400 RequestError unless ``rollout_id`` is a string of ``[A-Za-z0-9._:@+-]{1,200}``."""
    if not isinstance(rollout_id, str) or not ROLLOUT_ID.fullmatch(rollout_id):
        raise RequestError(
            400,
            f"bad rollout id {str(rollout_id)[:60]!r}: use 1-200 of [A-Za-z0-9._:@+-]",
            code="bad_rollout_id",
        )
