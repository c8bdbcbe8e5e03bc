"""The HTTP error for an exception of the gateway or its layers, mapped once for every protocol
(each front writes it in its own shape: :mod:`.errors`, :mod:`.anthropic_wire`)."""

from __future__ import annotations

from strands_art.backends.base import BackendError, BackendTimeout, BackendUnavailable
from strands_art.conversion.incoming import FieldError
from strands_art.gateway import (
    ContextBudgetExceeded,
    GatewayError,
    SamplingOverrideRejected,
    SessionClosed,
    UnknownSession,
)
from strands_art.history.divergence import HistoryDivergence
from strands_art.history.normalize import MessageError
from strands_art.render import TemplateError
from strands_art.serve.errors import RequestError


def error_for(exc: BaseException, conversation: str = "messages") -> RequestError | None:
    """The HTTP error for an exception of the gateway or its layers (None: not ours, a 500), in
    the words of the request's protocol: ``conversation`` is its field that holds the
    conversation (``messages`` for Chat Completions and Anthropic, ``input`` for the Responses API).

    ContextBudgetExceeded → 400 ``context_length_exceeded`` with OpenAI's message (what OpenAI
    sends, so the SDKs, LiteLLM and Strands raise their context-overflow errors); BackendTimeout → 429
    ``rate_limit_exceeded``; BackendUnavailable (HTTP 429/502/503/504 upstream, refused
    connection) → 503 ``backend_unavailable`` (both with ``Retry-After``, retryable, as the
    Strands provider's ModelThrottledException); any other BackendError (an upstream 4xx, a
    malformed or impossible answer) → 502 ``backend_error`` (no ``Retry-After``; the provider
    raises it as is); the backend's own context overflow arrives as ContextBudgetExceeded; MessageError / TemplateError /
    SamplingOverrideRejected → 400; HistoryDivergence → 409 ``history_diverged``; SessionClosed
    (closed while the turn ran) → 409 ``session_closed``; FieldError (a front's conversion) → 400
    naming the field; UnknownSession → 404; other
    GatewayError → 500 with its message.
    """
    if isinstance(exc, RequestError):
        return exc
    if isinstance(exc, FieldError):  # a front's conversion refused a field (Anthropic, Responses)
        return RequestError(400, str(exc), param=exc.field)
    if isinstance(exc, ContextBudgetExceeded):
        # OpenAI's own wording: clients that match on the text (LiteLLM) recognize it too
        message = (
            f"This model's maximum context length is {exc.max_context_tokens} tokens. However, your "
            f"{conversation} resulted in {exc.prompt_tokens} tokens, which leaves no room to generate. "
            f"Please reduce the length of the {conversation}."
        )
        return RequestError(400, message, code="context_length_exceeded", param=conversation)
    if isinstance(exc, BackendTimeout):
        return RequestError(
            429, f"sampling backend timed out: {exc}", type="rate_limit_error", code="rate_limit_exceeded"
        )
    if isinstance(exc, BackendUnavailable):
        return RequestError(
            503, f"sampling backend failed: {exc}", type="server_error", code="backend_unavailable"
        )
    if isinstance(exc, BackendError):
        return RequestError(502, f"sampling backend failed: {exc}", type="server_error", code="backend_error")
    if isinstance(exc, MessageError):
        return RequestError(400, str(exc), code="invalid_message", param=f"messages[{exc.index}]")
    if isinstance(exc, TemplateError):
        return RequestError(400, str(exc), code="template_error", param=conversation)
    if isinstance(exc, SamplingOverrideRejected):
        return RequestError(400, str(exc), code="sampling_override_rejected")
    if isinstance(exc, HistoryDivergence):
        return RequestError(409, str(exc), code="history_diverged", param=conversation)
    if isinstance(exc, SessionClosed):
        return RequestError(409, str(exc), code="session_closed")
    if isinstance(exc, UnknownSession):
        return RequestError(404, str(exc.args[0] if exc.args else exc), code="session_not_found")
    if isinstance(exc, GatewayError):
        return RequestError(500, str(exc), type="server_error", code="gateway_error")
    return None
