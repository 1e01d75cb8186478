"""Google Gemini ``generateContent`` / ``streamGenerateContent`` (wire format ``"gemini"``).

Public door; the implementation lives in ``stableprompt._wire.gemini``.
"""

from .._wire.gemini import (
    WIRE_FORMAT,
    GeminiStreamAccumulator,
    parse_response,
    parse_usage,
)

__all__ = [
    "WIRE_FORMAT",
    "GeminiStreamAccumulator",
    "parse_response",
    "parse_usage",
]
