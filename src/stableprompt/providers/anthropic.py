"""Anthropic Messages API (wire format ``"anthropic"``): usage parsing and stream accumulation.

Public door; the implementation lives in ``stableprompt._wire.anthropic``.
"""

from .._wire.anthropic import (
    WIRE_FORMAT,
    AnthropicStreamAccumulator,
    parse_response,
    parse_usage,
)

__all__ = [
    "WIRE_FORMAT",
    "AnthropicStreamAccumulator",
    "parse_response",
    "parse_usage",
]
