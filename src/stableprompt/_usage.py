"""Normalized prompt-cache usage: one shape for every provider's usage report.

Providers disagree on whether their "input tokens" include cached tokens (Anthropic and Bedrock
report only the uncached remainder; OpenAI, Gemini, DeepSeek, vLLM, llama.cpp report the whole
prompt). :class:`CacheUsage` is the normalized record the per-provider parsers in
:mod:`stableprompt.providers` produce, so that for every provider::

    input_tokens_total == uncached_tokens + cache_read_tokens + cache_write_tokens

whenever all four are known and the report is consistent. Source of each provider's semantics:
``reference/PROVIDERS.md`` §0 (cheat sheet) and the per-provider sections it cites.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from ._canonical import show_int
from ._public import public

__all__ = ["MAX_TOKEN_COUNT", "USAGE_FIELDS", "CacheUsage"]

USAGE_FIELDS = (
    "input_tokens_total",
    "uncached_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
    "output_tokens",
)
"""Names of :class:`CacheUsage`'s token counts, in declaration order: the usage fields
:class:`~stableprompt.UsageRecord` mirrors (same names, same order) and the ledger stores as
columns. The one list; everything that copies usage counts iterates it."""

MAX_TOKEN_COUNT = 2**53 - 1
"""The largest token count a usage parser accepts (a typed ``usage-overflow`` error above).

Far above any real prompt, and chosen so that every count *and every sum of a few counts*
fits the ledger's SQLite INTEGER (signed 64-bit) and reads exactly in JSON consumers that use
doubles (JavaScript)."""


class CacheUsage(BaseModel):
    """A provider's token usage, normalized to uncached / cache-read / cache-write tokens.

    Every count is in tokens. ``None`` means the provider did not report the number (or the
    stream ended before it did); it is never a stand-in for 0, and 0 is never a stand-in for
    ``None``. Inconsistent reports (more cached than total, a TTL split that does not add up to
    the write total, ...) are kept as reported and flagged by :attr:`inconsistent`, never
    clamped: an impossible remainder stays negative so the sum above still holds arithmetically.

    Attributes:
        wire_format: The wire format parsed, e.g. ``"anthropic"``, ``"openai-chat"``.
        input_tokens_total: All prompt tokens, cached or not.
        uncached_tokens: Prompt tokens neither read from nor written to the cache. For
            providers that do not report cache writes (``cache_write_tokens is None``) this is
            ``input_tokens_total - cache_read_tokens``: it then includes any unreported writes.
        cache_read_tokens: Prompt tokens served from the prefix cache.
        cache_write_tokens: Prompt tokens written to the cache (the provider's total; the TTL
            split below is a breakdown of it, never added on top).
        cache_write_5m_tokens: Part of the write with a 5-minute TTL (Anthropic
            ``cache_creation.ephemeral_5m_input_tokens``, Bedrock ``cacheDetails`` ``5m``).
        cache_write_1h_tokens: Part of the write with a 1-hour TTL.
        output_tokens: Generated tokens (including reasoning/thinking tokens).
        raw: The provider's usage object as received (for streams: as accumulated), for audit.
        unknown_reason: Why some or all counts are unknown (an interrupted stream, a stream
            without a usage event), or ``None`` for a complete report.
        inconsistency_notes: Provider-specific contradictions found by the parser (e.g.
            DeepSeek hit + miss != prompt tokens); part of :attr:`inconsistency`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    wire_format: str
    input_tokens_total: int | None = None
    uncached_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cache_write_5m_tokens: int | None = None
    cache_write_1h_tokens: int | None = None
    output_tokens: int | None = None
    raw: dict[str, Any] = {}
    unknown_reason: str | None = None
    inconsistency_notes: tuple[str, ...] = ()

    @classmethod
    def unknown(cls, wire_format: str, reason: str) -> CacheUsage:
        """Usage that is entirely unknown, e.g. a stream interrupted before its usage event.

        Args:
            wire_format: The wire format of the call.
            reason: Human-readable cause, kept in :attr:`unknown_reason`.

        Returns:
            A CacheUsage whose counts are all ``None`` and whose ``raw`` is ``{}``.
        """
        return cls(wire_format=wire_format, unknown_reason=reason)

    @property
    def is_unknown(self) -> bool:
        """True when no token count at all is known."""
        return all(getattr(self, name) is None for name in USAGE_FIELDS)

    @property
    def hit_rate(self) -> float | None:
        """``cache_read_tokens / input_tokens_total``; ``None`` if either is unknown or the
        total is 0. Not clamped: an inconsistent report can exceed 1.0."""
        read, total = self.cache_read_tokens, self.input_tokens_total
        if read is None or total is None or total == 0:
            return None
        return read / total

    @property
    def inconsistency(self) -> str | None:
        """Why the report contradicts itself (``"; "``-joined reasons), or ``None``.

        Checked: negative counts; ``cache_read + cache_write > input_tokens_total``;
        ``uncached + cache_read + cache_write != input_tokens_total`` when all are known; a TTL
        split that does not sum to (or exceeds) ``cache_write_tokens``; parser notes.
        """
        reasons: list[str] = []
        for name in USAGE_FIELDS:
            value = getattr(self, name)
            if value is not None and value < 0:
                reasons.append(f"{name} is negative ({show_int(value)})")
        total = self.input_tokens_total
        read = self.cache_read_tokens
        write = self.cache_write_tokens
        uncached = self.uncached_tokens
        if total is not None and (read is not None or write is not None):
            cached = (read or 0) + (write or 0)
            if cached > total:
                reasons.append(f"cache_read + cache_write ({show_int(cached)}) exceed "
                               f"input_tokens_total ({show_int(total)})")
        if None not in (total, read, write, uncached):
            parts = (uncached or 0) + (read or 0) + (write or 0)
            if parts != total:
                reasons.append(f"uncached + cache_read + cache_write ({show_int(parts)}) != "
                               f"input_tokens_total ({show_int(total or 0)})")
        ttl_parts = (self.cache_write_5m_tokens, self.cache_write_1h_tokens)
        split = [value for value in ttl_parts if value is not None]
        if split and write is not None:
            both_known = len(split) == 2
            split_sum = sum(split)
            if (both_known and split_sum != write) or split_sum > write:
                reasons.append(f"TTL split 5m + 1h ({show_int(split_sum)}) does not match "
                               f"cache_write ({show_int(write)})")
        reasons.extend(self.inconsistency_notes)
        return "; ".join(reasons) if reasons else None

    @property
    def inconsistent(self) -> bool:
        """True when :attr:`inconsistency` names at least one contradiction."""
        return self.inconsistency is not None


public(CacheUsage)
