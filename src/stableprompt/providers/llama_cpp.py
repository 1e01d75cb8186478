"""llama.cpp ``llama-server`` (wire format ``"llama-cpp"``): usage parsing and streaming.

Public door; the implementation lives in ``stableprompt._wire.llama_cpp``.
"""

from .._wire.llama_cpp import (
    WIRE_FORMAT,
    LlamaCppStreamAccumulator,
    parse_response,
    parse_usage,
)

__all__ = [
    "WIRE_FORMAT",
    "LlamaCppStreamAccumulator",
    "parse_response",
    "parse_usage",
]
