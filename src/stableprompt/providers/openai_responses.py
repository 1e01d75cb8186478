"""OpenAI Responses API (wire format ``"openai-responses"``): usage parsing and streaming.

Public door; the implementation lives in ``stableprompt._wire.openai_responses``.
"""

from .._wire.openai_responses import (
    WIRE_FORMAT,
    OpenAIResponsesStreamAccumulator,
    parse_response,
    parse_usage,
)

__all__ = [
    "WIRE_FORMAT",
    "OpenAIResponsesStreamAccumulator",
    "parse_response",
    "parse_usage",
]
