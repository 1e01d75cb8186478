"""Provider wire formats: usage parsing and streaming accumulation.

A public sub-namespace (like ``attrs.validators``): one module per wire format, each exposing
``parse_usage(usage, pointer="")``, ``parse_response(body)`` and a ``StreamAccumulator``
subclass; the functions below dispatch on the wire format name. See :data:`WIRE_FORMATS`.
"""

from .._wire._base import StreamAccumulator
from .._wire._registry import (
    WIRE_FORMATS,
    parse_response,
    parse_stream,
    parse_usage,
    stream_accumulator,
)
from . import anthropic as anthropic  # the per-format public modules, as attributes
from . import bedrock as bedrock
from . import deepseek as deepseek
from . import gemini as gemini
from . import llama_cpp as llama_cpp
from . import openai_chat as openai_chat
from . import openai_compatible as openai_compatible
from . import openai_responses as openai_responses

__all__ = [
    "WIRE_FORMATS",
    "StreamAccumulator",
    "parse_response",
    "parse_stream",
    "parse_usage",
    "stream_accumulator",
]
