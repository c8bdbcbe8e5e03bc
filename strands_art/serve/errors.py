"""The HTTP front's request error and typed field access, shared by :mod:`.wire`, :mod:`.fields`
and :mod:`.sessions` (a leaf of ``serve/``: imports nothing of the package)."""

from __future__ import annotations

from typing import Any


class RequestError(ValueError):
    """A request the front cannot serve; carries the HTTP status and OpenAI error fields.

    Attributes:
        status: HTTP status (4xx/5xx).
        type: OpenAI error type (``invalid_request_error``, ``authentication_error``, ...).
        code: OpenAI error code or None (``context_length_exceeded``, ``rate_limit_exceeded``, ...).
        param: the request field at fault, or None.
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.code = code
        self.param = param

    def body(self) -> dict[str, Any]:
        """OpenAI's error object."""
        return {"error": {"message": str(self), "type": self.type, "param": self.param, "code": self.code}}


def typed_field(body: dict[str, Any], key: str, kind: type, what: str) -> Any:
    """``body[key]`` (None when absent or null).

    Raises:
        RequestError: 400 naming the field (``param=key``) when the value is not a ``kind``
            (``what`` says what it must be, e.g. ``"a string"``).
    """
    value = body.get(key)
    if value is not None and not isinstance(value, kind):
        raise RequestError(400, f"'{key}' must be {what}, got {type(value).__name__}", param=key)
    return value
