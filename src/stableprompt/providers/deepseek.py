"""DeepSeek chat API (wire format ``"deepseek"``): usage parsing and stream accumulation.

Public door; the implementation lives in ``stableprompt._wire.deepseek``.
"""

from .._wire.deepseek import (
    WIRE_FORMAT,
    DeepSeekStreamAccumulator,
    parse_response,
    parse_usage,
)

__all__ = [
    "WIRE_FORMAT",
    "DeepSeekStreamAccumulator",
    "parse_response",
    "parse_usage",
]
