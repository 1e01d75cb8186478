"""OpenAI-compatible servers (wire format ``"openai-compatible"``): vLLM, SGLang, OpenRouter,
xAI, Moonshot and other servers speaking the Chat Completions shape.

Semantics (PROVIDERS.md §7, §8, §10, §11): ``prompt_tokens`` includes cached tokens;
``prompt_tokens_details.cached_tokens`` is the cache read (vLLM only with
``--enable-prompt-tokens-details``, SGLang only with ``--enable-cache-report``: otherwise absent,
hence ``None``); ``prompt_tokens_details.cache_write_tokens`` is the write (OpenRouter).
Fallbacks when ``prompt_tokens_details.cached_tokens`` is absent: DeepSeek-style
``prompt_cache_hit_tokens``, then Moonshot's legacy top-level ``cached_tokens`` (UNVERIFIED in
official docs, PROVIDERS.md §11). Streaming is the OpenAI chat shape; vLLM's
``continuous_usage_stats`` cumulative usage on every chunk is handled (last non-null wins).

Anthropic-shaped usage with an inclusive count: some Anthropic-compatible servers answer
``/v1/messages`` with Anthropic's field names but put the *whole* prompt in
``input_tokens`` (``input_tokens = uncached + cache_read + cache_write``), where Anthropic
itself reports only the uncached remainder (PROVIDERS.md §1.1). Parsed as ``anthropic``, their
totals double. Choosing this dialect for such an endpoint (``Recorder(usage_dialect=...)``)
reads a usage object without ``prompt_tokens`` but with ``input_tokens`` inclusively:
``input_tokens`` is the total, ``cache_read_input_tokens`` / ``cache_creation_input_tokens``
the read and write. Their Messages streams are accumulated as Anthropic's
(:class:`AnthropicShapedStreamAccumulator`), then read the same way.
"""

from __future__ import annotations

from typing import Any

from .._usage import CacheUsage
from ._fields import as_mapping, inclusive_usage, opt_int, req_int, response_usage
from .anthropic import AnthropicStreamAccumulator
from .openai_chat import ChatStreamAccumulator, chat_usage

__all__ = [
    "WIRE_FORMAT",
    "AnthropicShapedStreamAccumulator",
    "OpenAICompatibleStreamAccumulator",
    "parse_response",
    "parse_usage",
]

WIRE_FORMAT = "openai-compatible"


def parse_usage(usage: object, pointer: str = "") -> CacheUsage:
    """Normalize an OpenAI-compatible server's chat ``usage`` object.

    Args:
        usage: ``{"prompt_tokens", "completion_tokens"?, "prompt_tokens_details"?:
            {"cached_tokens"?, "cache_write_tokens"?}, "prompt_cache_hit_tokens"?,
            "cached_tokens"?}``.
        pointer: JSON pointer of ``usage`` inside its document (prefix of error pointers).

    Returns:
        CacheUsage with ``input_tokens_total = prompt_tokens``; cache read and write as in the
        module docstring, ``None`` when the server did not report them. Without
        ``prompt_tokens``, an Anthropic-shaped object with ``input_tokens`` is read
        inclusively (module docstring).

    Raises:
        UsageParseError: ``prompt_tokens`` (and ``input_tokens``) missing, or a count negative
            / not an integer.
    """
    obj = as_mapping(usage, pointer, "OpenAI-compatible usage")
    if "prompt_tokens" not in obj and "input_tokens" in obj:
        return inclusive_usage(
            WIRE_FORMAT, obj,
            total=req_int(obj, "input_tokens", pointer),
            read=opt_int(obj, "cache_read_input_tokens", pointer),
            write=opt_int(obj, "cache_creation_input_tokens", pointer),
            output=opt_int(obj, "output_tokens", pointer),
        )
    return chat_usage(
        WIRE_FORMAT,
        usage,
        pointer,
        "OpenAI-compatible usage",
        read_fallbacks=("prompt_cache_hit_tokens", "cached_tokens"),
    )


def parse_response(body: object) -> CacheUsage:
    """Normalize the usage of a non-streaming OpenAI-compatible chat body (``body["usage"]``)."""
    return response_usage(body, parse_usage)


class OpenAICompatibleStreamAccumulator(ChatStreamAccumulator):
    """Stream accumulator for OpenAI-compatible servers (chat stream shape)."""

    wire_format = WIRE_FORMAT

    def _parse(self, usage: Any, pointer: str) -> CacheUsage:
        return parse_usage(usage, pointer)


class AnthropicShapedStreamAccumulator(AnthropicStreamAccumulator):
    """A Messages SSE stream (Anthropic's event shape and accumulation rule) from an
    Anthropic-compatible server whose ``input_tokens`` is inclusive: read with
    :func:`parse_usage`."""

    wire_format = WIRE_FORMAT

    def _parse(self, usage: dict[str, Any]) -> CacheUsage:
        return parse_usage(usage)
