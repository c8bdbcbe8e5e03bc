"""The conversion path: every front's messages become the gateway's canonical messages here.

Two steps, the same for every front:

1. the front's request as :class:`~strands_art.conversion.incoming.Incoming` OpenAI-format
   messages, validated before anything is recorded: Strands messages
   (:func:`~strands_art.conversion.strands.strands_request`; the Strands provider
   :class:`~strands_art.model.ARTModel`, and through it the verl agent loop and the
   MigrationBench runner) or OpenAI chat messages
   (:func:`~strands_art.conversion.openai.openai_request`; the HTTP front), both proportional
   to the new messages (:class:`~strands_art.conversion.strands.StrandsKnown`,
   :class:`~strands_art.conversion.openai.RequestKnown`);
2. :meth:`SessionConversion.canonical` (one per session): the events (non-text content,
   harness rewrites, changed tool results) and the replay of what the gateway produced; the
   ignored request fields are recorded by the same object.

Data flows down: fronts → conversion → gateway (which normalizes again, also proportional to
the new messages: :mod:`strands_art.history.known`). docs/architecture.md, "Conversion path".
"""

from __future__ import annotations

from strands_art.conversion.canonical import CanonicalHistory
from strands_art.conversion.incoming import Incoming, Known
from strands_art.conversion.openai import RequestKnown, openai_request, replace_non_text_parts
from strands_art.conversion.session import SessionConversion
from strands_art.conversion.strands import StrandsFormatError, strands_request, tool_specs_to_openai

__all__ = [
    "CanonicalHistory",
    "Incoming",
    "Known",
    "RequestKnown",
    "SessionConversion",
    "StrandsFormatError",
    "openai_request",
    "replace_non_text_parts",
    "strands_request",
    "tool_specs_to_openai",
]
