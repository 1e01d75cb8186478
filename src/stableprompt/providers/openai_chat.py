"""OpenAI Chat Completions (wire format ``"openai-chat"``): usage parsing and stream accumulation.

Public door; the implementation lives in ``stableprompt._wire.openai_chat``.
"""

from .._wire.openai_chat import (
    WIRE_FORMAT,
    ChatStreamAccumulator,
    OpenAIChatStreamAccumulator,
    chat_usage,
    delta_has_content,
    parse_response,
    parse_usage,
    prompt_details,
    response_usage,
)

__all__ = [
    "WIRE_FORMAT",
    "ChatStreamAccumulator",
    "OpenAIChatStreamAccumulator",
    "chat_usage",
    "delta_has_content",
    "parse_response",
    "parse_usage",
    "prompt_details",
    "response_usage",
]
