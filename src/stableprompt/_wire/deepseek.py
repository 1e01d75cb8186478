"""DeepSeek chat API (wire format ``"deepseek"``): usage parsing and stream accumulation.

Semantics (PROVIDERS.md §5; api-docs.deepseek.com/guides/kv_cache): ``prompt_tokens`` equals
``prompt_cache_hit_tokens + prompt_cache_miss_tokens``; the hit count is the cache read. DeepSeek
reports no cache writes (``cache_write_tokens`` is ``None``). Some responses also carry the
OpenAI-style ``prompt_tokens_details.cached_tokens``: ``prompt_cache_hit_tokens`` is preferred.
Streaming is OpenAI-style (final usage chunk with ``stream_options.include_usage``).
"""

from __future__ import annotations

from typing import Any

from .._usage import CacheUsage
from ._fields import as_mapping, inclusive_usage, opt_int, req_int, response_usage
from .openai_chat import ChatStreamAccumulator, prompt_details

__all__ = ["WIRE_FORMAT", "DeepSeekStreamAccumulator", "parse_response", "parse_usage"]

WIRE_FORMAT = "deepseek"


def parse_usage(usage: object, pointer: str = "") -> CacheUsage:
    """Normalize a DeepSeek ``usage`` object.

    Args:
        usage: ``{"prompt_tokens", "prompt_cache_hit_tokens"?, "prompt_cache_miss_tokens"?,
            "completion_tokens"?, "prompt_tokens_details"?: {"cached_tokens"?}}``.
        pointer: JSON pointer of ``usage`` inside its document (prefix of error pointers).

    Returns:
        CacheUsage with ``input_tokens_total = prompt_tokens`` (or hit + miss when
        ``prompt_tokens`` is absent), ``cache_read = prompt_cache_hit_tokens`` (else
        ``cached_tokens``, else ``prompt_tokens - prompt_cache_miss_tokens``) and
        ``cache_write = None``. Flags hit + miss != prompt_tokens and hit != cached_tokens.

    Raises:
        UsageParseError: neither ``prompt_tokens`` nor hit + miss present (``usage-missing``
            at ``/prompt_tokens``), or a count negative / not an integer.
    """
    obj = as_mapping(usage, pointer, "DeepSeek usage")
    hit = opt_int(obj, "prompt_cache_hit_tokens", pointer)
    miss = opt_int(obj, "prompt_cache_miss_tokens", pointer)
    cached, _ = prompt_details(obj, pointer)
    total = opt_int(obj, "prompt_tokens", pointer)
    if total is None:
        if hit is None or miss is None:
            req_int(obj, "prompt_tokens", pointer)  # raises usage-missing with the pointer
        else:
            total = hit + miss
    notes: list[str] = []
    if hit is not None and miss is not None and total is not None and hit + miss != total:
        notes.append(
            f"prompt_cache_hit_tokens + prompt_cache_miss_tokens ({hit + miss}) != "
            f"prompt_tokens ({total})"
        )
    if hit is not None and cached is not None and hit != cached:
        notes.append(
            f"prompt_cache_hit_tokens ({hit}) != prompt_tokens_details.cached_tokens ({cached})"
        )
    read = hit if hit is not None else cached
    if read is None and miss is not None and total is not None:
        read = total - miss  # the miss count is the complement of the hit count
    output = opt_int(obj, "completion_tokens", pointer)
    return inclusive_usage(
        WIRE_FORMAT, obj, total=total, read=read, write=None, output=output, notes=tuple(notes)
    )


def parse_response(body: object) -> CacheUsage:
    """Normalize the usage of a non-streaming DeepSeek chat body (``body["usage"]``)."""
    return response_usage(body, parse_usage)


class DeepSeekStreamAccumulator(ChatStreamAccumulator):
    """Stream accumulator for DeepSeek (OpenAI chat stream shape, DeepSeek usage fields)."""

    wire_format = WIRE_FORMAT

    def _parse(self, usage: Any, pointer: str) -> CacheUsage:
        return parse_usage(usage, pointer)
