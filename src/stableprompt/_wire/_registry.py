"""The wire-format registry behind :mod:`stableprompt.providers`' public functions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from .._exceptions import UsageParseError
from .._public import public
from .._usage import CacheUsage
from . import (
    anthropic,
    bedrock,
    deepseek,
    gemini,
    llama_cpp,
    openai_chat,
    openai_compatible,
    openai_responses,
)
from ._base import Clock, StreamAccumulator

__all__ = [
    "WIRE_FORMATS",
    "parse_response",
    "parse_stream",
    "parse_usage",
    "stream_accumulator",
    "stream_accumulator_for",
]


class _WireFormat(NamedTuple):
    parse_usage: Callable[[Any, str], CacheUsage]
    parse_response: Callable[[Any], CacheUsage]
    accumulator: type[StreamAccumulator]


_REGISTRY: dict[str, _WireFormat] = {
    anthropic.WIRE_FORMAT: _WireFormat(
        anthropic.parse_usage, anthropic.parse_response, anthropic.AnthropicStreamAccumulator
    ),
    bedrock.WIRE_FORMAT: _WireFormat(
        bedrock.parse_usage, bedrock.parse_response, bedrock.BedrockStreamAccumulator
    ),
    deepseek.WIRE_FORMAT: _WireFormat(
        deepseek.parse_usage, deepseek.parse_response, deepseek.DeepSeekStreamAccumulator
    ),
    gemini.WIRE_FORMAT: _WireFormat(
        gemini.parse_usage, gemini.parse_response, gemini.GeminiStreamAccumulator
    ),
    llama_cpp.WIRE_FORMAT: _WireFormat(
        llama_cpp.parse_usage, llama_cpp.parse_response, llama_cpp.LlamaCppStreamAccumulator
    ),
    openai_chat.WIRE_FORMAT: _WireFormat(
        openai_chat.parse_usage,
        openai_chat.parse_response,
        openai_chat.OpenAIChatStreamAccumulator,
    ),
    openai_compatible.WIRE_FORMAT: _WireFormat(
        openai_compatible.parse_usage,
        openai_compatible.parse_response,
        openai_compatible.OpenAICompatibleStreamAccumulator,
    ),
    openai_responses.WIRE_FORMAT: _WireFormat(
        openai_responses.parse_usage,
        openai_responses.parse_response,
        openai_responses.OpenAIResponsesStreamAccumulator,
    ),
}

WIRE_FORMATS: tuple[str, ...] = tuple(sorted(_REGISTRY))
"""Every supported wire format name, sorted."""


def _lookup(wire_format: str) -> _WireFormat:
    try:
        return _REGISTRY[wire_format]
    except (KeyError, TypeError):
        raise UsageParseError(
            f"unknown wire format {wire_format!r}; expected one of {', '.join(WIRE_FORMATS)}",
            code="usage-wire-format",
        ) from None


def parse_usage(wire_format: str, usage_object: object) -> CacheUsage:
    """Normalize a provider's usage object to uncached / cache-read / cache-write tokens.

    Args:
        wire_format: One of :data:`WIRE_FORMATS`. What ``usage_object`` is, per format:

            - ``"anthropic"``: the Message's ``usage`` (``input_tokens`` excludes cache reads
              and writes).
            - ``"openai-chat"``, ``"openai-compatible"``, ``"deepseek"``: the chat
              completion's ``usage`` (``prompt_tokens`` includes cached tokens).
            - ``"openai-responses"``: the Response's ``usage`` (``input_tokens`` inclusive).
            - ``"gemini"``: the response's ``usageMetadata`` (``promptTokenCount`` inclusive).
            - ``"bedrock-converse"``: the Converse ``usage`` / ``TokenUsage`` (``inputTokens``
              excludes cache reads and writes).
            - ``"llama-cpp"``: the whole response object (or ``{"usage": ..., "timings":
              ...}``), or a bare OpenAI ``usage``; ``timings.cache_n``/``prompt_n`` are the
              fallback when ``usage.prompt_tokens_details`` is absent.

            A pydantic model (the official SDKs' ``response.usage``) is accepted too.
        usage_object: The decoded JSON object described above.

    Returns:
        CacheUsage with ``input_tokens_total == uncached + cache_read + cache_write`` when all
        are known and consistent. Fields the provider did not send are ``None``, never 0
        (Gemini's proto3 JSON omits zeros: there a missing cached count is 0).

    Raises:
        UsageParseError: ``usage-wire-format`` for an unknown format; ``usage-missing``,
            ``usage-type`` or ``usage-negative`` with the JSON ``pointer`` of the bad field.

    Source: reference/PROVIDERS.md §0 and the per-provider sections each module cites.
    """
    return _lookup(wire_format).parse_usage(usage_object, "")


def parse_response(wire_format: str, response_json: object) -> CacheUsage:
    """Find and normalize the usage inside a full non-streaming response body.

    Args:
        wire_format: One of :data:`WIRE_FORMATS`.
        response_json: The decoded body: Anthropic/OpenAI/DeepSeek/compatible/Bedrock
            ``{"usage": ...}``, Gemini ``{"usageMetadata": ...}`` (or the JSON array of chunks
            of a non-SSE ``streamGenerateContent``), llama.cpp ``{"usage": ..., "timings":
            ...}``.

    Returns:
        The normalized usage, as :func:`parse_usage`.

    Raises:
        UsageParseError: as :func:`parse_usage`, with pointers into the body (``usage-missing``
            at ``/usage`` when the body carries no usage, e.g. an error body).
    """
    return _lookup(wire_format).parse_response(response_json)


def stream_accumulator(
    wire_format: str, *, clock: Clock | None = None, start: float | None = None
) -> StreamAccumulator:
    """A new observe-only stream accumulator for ``wire_format``.

    Args:
        wire_format: One of :data:`WIRE_FORMATS`.
        clock: Monotonic clock in seconds for TTFT (``time.monotonic`` by default).
        start: Clock reading at request send time (default: now).

    Raises:
        UsageParseError: ``usage-wire-format`` for an unknown format.
    """
    if clock is not None and not callable(clock):
        raise UsageParseError(f"clock must be a callable returning seconds, got "
                              f"{type(clock).__name__}", code="usage-stream-type")
    if start is not None and (isinstance(start, bool) or not isinstance(start, (int, float))):
        raise UsageParseError(f"start must be a clock reading in seconds, got "
                              f"{type(start).__name__}", code="usage-stream-type")
    return _lookup(wire_format).accumulator(clock=clock, start=start)


def stream_accumulator_for(
    usage_format: str, request_format: str, *, clock: Clock | None = None,
    start: float | None = None,
) -> StreamAccumulator:
    """:func:`stream_accumulator` for a call whose usage dialect was overridden
    (``Recorder(usage_dialect=...)``): the stream keeps its request format's event shape.
    ``openai-compatible`` on an ``anthropic`` (Messages) request accumulates Anthropic's
    events and reads the usage inclusively; any other pair is ``usage_format``'s own."""
    if usage_format == openai_compatible.WIRE_FORMAT and request_format == anthropic.WIRE_FORMAT:
        return openai_compatible.AnthropicShapedStreamAccumulator(clock=clock, start=start)
    return stream_accumulator(usage_format, clock=clock, start=start)


def parse_stream(wire_format: str, raw_sse_bytes: bytes | bytearray | memoryview) -> CacheUsage:
    """Normalize the usage of a complete recorded stream body.

    Args:
        wire_format: One of :data:`WIRE_FORMATS`.
        raw_sse_bytes: The whole response body as received: ``text/event-stream`` bytes, or
            for ``"bedrock-converse"`` JSON lines / binary eventstream.

    Returns:
        The usage; :meth:`CacheUsage.unknown` with a reason if the stream has no usage event.

    Raises:
        UsageParseError: unknown format, or a malformed usage object (``pointer`` relative to
            the event's JSON, ``offset`` the event's byte offset).
    """
    accumulator = stream_accumulator(wire_format)
    accumulator.feed(raw_sse_bytes)
    return accumulator.finish()


public(parse_stream, parse_usage)
