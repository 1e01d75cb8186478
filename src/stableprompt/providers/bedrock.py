"""AWS Bedrock Converse / ConverseStream (wire format ``"bedrock-converse"``).

Public door; the implementation lives in ``stableprompt._wire.bedrock``.
"""

from .._wire.bedrock import (
    WIRE_FORMAT,
    BedrockStreamAccumulator,
    encode_event,
    parse_response,
    parse_usage,
)

__all__ = [
    "WIRE_FORMAT",
    "BedrockStreamAccumulator",
    "encode_event",
    "parse_response",
    "parse_usage",
]
