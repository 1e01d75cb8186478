"""Provider wire formats: usage parsing and streaming accumulation.

A public sub-namespace (like ``attrs.validators``): one module per wire format, each exposing
``parse_usage(usage, pointer="")``, ``parse_response(body)`` and a ``StreamAccumulator``
subclass; the functions below dispatch on the wire format name. See :data:`WIRE_FORMATS`.
"""

from ._base import StreamAccumulator
from ._registry import (
    WIRE_FORMATS,
    parse_response,
    parse_stream,
    parse_usage,
    stream_accumulator,
)

__all__ = [
    "WIRE_FORMATS",
    "StreamAccumulator",
    "parse_response",
    "parse_stream",
    "parse_usage",
    "stream_accumulator",
]
