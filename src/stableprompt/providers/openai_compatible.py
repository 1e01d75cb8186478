"""OpenAI-compatible servers (wire format ``"openai-compatible"``): vLLM, SGLang, OpenRouter,

Public door; the implementation lives in ``stableprompt._wire.openai_compatible``.
"""

from .._wire.openai_compatible import (
    WIRE_FORMAT,
    OpenAICompatibleStreamAccumulator,
    parse_response,
    parse_usage,
)

__all__ = [
    "WIRE_FORMAT",
    "OpenAICompatibleStreamAccumulator",
    "parse_response",
    "parse_usage",
]
