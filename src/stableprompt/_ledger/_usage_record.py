"""UsageRecord: one ledger row per provider call; its JSON line and its scrubbed fields.

A record is what stableprompt knows about one call: when it ran, which conversation and cache
lineage it belongs to, how its request compares to its same-lineage predecessor (LCP, predicted
cache reads), what the provider reported (the usage fields mirror ``CacheUsage`` in
``_usage.py``: ``input_tokens_total == uncached + cache_read + cache_write`` where all are
known), and one attribution verdict. Fields the provider did not send are ``None`` (unknown),
never 0.

Records carry no HTTP headers but the allow-listed cache-relevant ones
(``request_headers``: beta and version headers, ``_policy.CACHE_HEADERS``), so an API key has
no field to live in; the recorder and the ledger additionally scrub the free-text fields
(:data:`PROVIDER_TEXT`, :data:`CALLER_TEXT`) before storing (:func:`scrubbed`,
:func:`~stableprompt._redact.redact`).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

from .._canonical import canonical_json
from .._public import public
from .._redact import redact

__all__ = [
    "CALLER_TEXT",
    "OTEL_ATTRIBUTES",
    "PROVIDER_TEXT",
    "SEGMENT_DIGESTS_PATTERN",
    "UNANALYSED",
    "UsageRecord",
    "Verdict",
    "WireFormat",
    "new_record_id",
    "scrubbed",
    "scrubbed_fields",
    "utc_now",
]

WireFormat = Literal[
    "anthropic",
    "openai-chat",
    "openai-responses",
    "gemini",
    "deepseek",
    "bedrock-converse",
    "openai-compatible",
    "llama-cpp",
    "unknown",
]
"""Wire formats whose usage objects stableprompt parses, and :data:`UNANALYSED`."""

UNANALYSED = "unknown"
"""The ``wire_format`` of a request forwarded without analysis (``stableprompt proxy``: a path
that is not an LLM endpoint, or a body that is not a request of its endpoint's format): its
row has no usage, verdict ``unknown``, and ``stableprompt report`` keeps it out of hit rates.
No schema change: ``wire_format`` is a free TEXT column; a stableprompt older than this value
skips such a row as undecodable (``on_invalid``) instead of failing the report."""

Verdict = Literal[
    "cold",
    "hit",
    "client_mutation",
    "below_minimum",
    "no_breakpoint",
    "ttl_expired",
    "provider_miss",
    "unknown",
]
"""One attribution verdict per call (see DESIGN.md, "Miss attribution"). ``no_breakpoint``: a
breakpoint cache (Anthropic, Bedrock) got a request with no cache breakpoint at all, so nothing
could be cached whatever its length (rows before it say ``below_minimum`` with
``verdict_detail["reason"] == "no-breakpoint"``; a stableprompt older than this value skips
such a row as undecodable, ``on_invalid``, instead of failing the report)."""


OTEL_ATTRIBUTES: Mapping[str, str] = {
    "session_id": "gen_ai.conversation.id",
    "provider": "gen_ai.provider.name",
    "model": "gen_ai.request.model",
    "input_tokens_total": "gen_ai.usage.input_tokens",
    "cache_read_tokens": "gen_ai.usage.cache_read.input_tokens",
    "cache_write_tokens": "gen_ai.usage.cache_creation.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "response_id": "gen_ai.response.id",
    "status_code": "http.response.status_code",
    "error_class": "error.type",
}
"""``UsageRecord`` fields that have an OpenTelemetry semantic-convention name (GenAI spans:
https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/). ``gen_ai.usage.input_tokens``
is inclusive: cache reads and writes SHOULD be counted in it, as ``input_tokens_total`` is.
Used as ledger column names and span attribute names."""


_IDS = random.Random(os.urandom(32))
if hasattr(os, "register_at_fork"):  # a forked child must not repeat its parent's ids
    os.register_at_fork(after_in_child=lambda: _IDS.seed(os.urandom(32)))


def new_record_id() -> str:
    """Return a fresh record id: a uuid4 (random, version 4) as 32 lowercase hex characters.

    Drawn from a generator seeded with 256 bits of ``os.urandom`` per process (reseeded in a
    forked child): unique, not secret. Unlike :func:`uuid.uuid4` it makes no system call, so
    a client recording in thread does not hand the GIL to its recorder's thread before the
    request is sent (``_recording._deferred``)."""
    n = _IDS.getrandbits(128)  # the version and variant bits as uuid.UUID(version=4) sets
    n = (n & ~(0xF000 << 64) & ~(0xC000 << 48)) | (4 << 76) | (0x8000 << 48)
    return f"{n:032x}"


def utc_now() -> datetime:
    """Return the current time as a timezone-aware UTC datetime."""
    return datetime.now(UTC)


SEGMENT_DIGESTS_PATTERN = (r"^(?:1|2\|[0-9a-f]{32}\|[0-9]{1,5})\|[ptsxuaom]*\|[0-9,]*"
                           r"\|[0-9a-z=?,]*\|[0-9a-f]*\|[0-9a-f]*$")
"""The values of :attr:`UsageRecord.segment_digests` (``_recording._outline``): format 1 (a
version, segment kind letters, token counts, ``index=ttl`` breakpoints, hex prefix digests and
the hex digest of the first message) or format 2 (a delta: the version, the record id of the
row it continues and how many of that row's segments it shares, then the same fields for
its own segments)."""


def _count() -> Any:
    """A count that may be unknown (``None``) but never negative."""
    return Field(default=None, ge=0)


class UsageRecord(BaseModel):
    """One provider call, as stored in the ledger (one row of table ``calls``).

    Validation is strict (no ``"5"`` -> ``5`` coercion) and the model is frozen; build a changed
    copy with ``record.model_copy(update={...})``.

    Attributes:
        record_id: Unique id of the row (default: uuid4 hex). Writing the same id twice stores
            it once.
        ts_utc: When the request was sent; timezone-aware, normalized to UTC. A naive datetime
            is rejected.
        session_id: Conversation id (OpenTelemetry ``gen_ai.conversation.id``).
        turn: Turn number within the session (0-based or 1-based, as the caller counts).
        scenario: Free label (benchmark scenario, harness name).
        wire_format: Request/response format, e.g. ``"anthropic"``, ``"openai-chat"``;
            ``"unknown"`` (:data:`UNANALYSED`) for a request forwarded without analysis.
        provider: Provider name (OpenTelemetry ``gen_ai.provider.name``), e.g. ``"anthropic"``.
        model: Requested model id (OpenTelemetry ``gen_ai.request.model``).
        lineage: Head fingerprint naming the cache lineage (``sp2:...``).
        request_fingerprint: Fingerprint of the whole request body.
        predecessor_id: ``record_id`` of the same-lineage request this one was compared with.
        lcp_bytes: Longest common prefix with the predecessor, in bytes.
        lcp_tokens: The same LCP in tokens, when a tokenizer is known.
        request_tokens: Our token count of the request (tokens).
        predicted_cache_read_tokens: What an exact-prefix cache should have read (tokens),
            floored to the provider's granularity, 0 below its minimum.
        input_tokens_total: Provider-reported input tokens, inclusive of cache reads and writes.
        uncached_tokens: Input tokens neither read from nor written to the cache.
        cache_read_tokens: Input tokens read from the prefix cache.
        cache_write_tokens: Input tokens written to the prefix cache (all TTLs together).
        cache_write_5m_tokens: Part of ``cache_write_tokens`` written with the 5-minute TTL.
        cache_write_1h_tokens: Part of ``cache_write_tokens`` written with the 1-hour TTL.
        output_tokens: Provider-reported output tokens.
        usage_inconsistent: The provider's usage did not add up (kept as reported, not
            clamped). An input total implausible against our estimate of the request is
            ``verdict_detail["usage_suspect"]`` instead (``_recording._plausibility``; older
            ledgers set both): a note beside the cost, which is still priced.
        usage_raw: The provider's usage object as received (JSON).
        verdict: Attribution verdict.
        verdict_detail: Evidence for the verdict (JSON object), e.g. ``segment``, ``path``,
            ``cause``, ``gap_s``, ``ttl_s``.
        latency_ms: Request sent to response complete (milliseconds).
        ttft_ms: Request sent to first streamed token (milliseconds).
        status_code: HTTP status of the response.
        error_class: Error class name when the call failed (e.g. ``"ProviderHTTPError"``).
        diagnostics: Provider cache diagnostics (Anthropic ``diagnostics``; OpenAI
            ``prompt_cache_options`` comparison), as received.
        response_id: Provider response id (OpenTelemetry ``gen_ai.response.id``).
        content: Request body text; the ledger keeps it only with ``store_content=True``.
        request_headers: The request's cache-relevant headers, allow-listed
            (:data:`stableprompt._policy.CACHE_HEADERS`: ``anthropic-beta``,
            ``anthropic-version``, ``openai-beta``, ...; lower-case name -> value as sent);
            ``{}`` when none was sent, ``None`` when unknown (a format without such headers,
            a row from before schema v3). Never any other header.
        segment_digests: The request's segment outline (``_recording._outline``, schema v4):
            per segment its kind or message role, our token count, its cache breakpoint TTL
            and 16 bytes (32 hex digits) of its chained prefix digest, and its first message's
            digest, so another process compares a later request with this one without its
            content. About 37 bytes per segment and 64 per row; ``None`` when unknown (no
            analysis, a row from before schema v4, more than 4,096 segments). Its
            alphabet (:data:`SEGMENT_DIGESTS_PATTERN`) holds no caller text: not scrubbed.

    Raises:
        pydantic.ValidationError: On a wrong type, a naive ``ts_utc``, a negative count where
            counts cannot be negative, NaN/Infinity, or a JSON field without a canonical form.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    record_id: str = Field(default_factory=new_record_id, min_length=1, max_length=128)
    ts_utc: datetime = Field(default_factory=utc_now)
    session_id: str | None = None
    turn: int | None = _count()
    scenario: str | None = None
    wire_format: WireFormat
    provider: str | None = None
    model: str | None = None
    lineage: str | None = None
    request_fingerprint: str | None = None
    predecessor_id: str | None = None
    lcp_bytes: int | None = _count()
    lcp_tokens: int | None = _count()
    request_tokens: int | None = _count()
    predicted_cache_read_tokens: int | None = _count()
    # Usage fields mirror CacheUsage. Not bounded below: an inconsistent provider report
    # (negative remainder) is stored as computed and flagged, never clamped.
    input_tokens_total: int | None = None
    uncached_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cache_write_5m_tokens: int | None = None
    cache_write_1h_tokens: int | None = None
    output_tokens: int | None = None
    usage_inconsistent: bool = False
    usage_raw: dict[str, JsonValue] | None = None
    verdict: Verdict = "unknown"
    verdict_detail: dict[str, JsonValue] = Field(default_factory=dict)
    latency_ms: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    ttft_ms: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    status_code: int | None = Field(default=None, ge=100, le=599)
    error_class: str | None = None
    diagnostics: dict[str, JsonValue] | None = None
    response_id: str | None = None
    content: str | None = None
    request_headers: dict[str, str] | None = None
    segment_digests: str | None = Field(default=None, pattern=SEGMENT_DIGESTS_PATTERN)

    @field_validator("ts_utc")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(
                "ts_utc must be timezone-aware; pass datetime.now(timezone.utc) or add tzinfo"
            )
        return value.astimezone(UTC)

    @field_validator("usage_raw", "verdict_detail", "diagnostics")
    @classmethod
    def _canonical(cls, value: dict[str, JsonValue] | None) -> dict[str, JsonValue] | None:
        if value is not None:
            canonical_json(value)  # raises CanonicalizationError (a ValueError) with a pointer
        return value

    def to_json(self) -> bytes:
        """Serialize to one line of canonical JSON (sorted keys, UTF-8, no newline).

        ``ts_utc`` is written as ISO 8601 with ``Z``. :meth:`from_json` reverses it exactly.
        """
        return canonical_json(self.model_dump(mode="json"))

    @classmethod
    def from_json(cls, data: bytes | str) -> UsageRecord:
        """Parse one JSON line written by :meth:`to_json` (or any JSON object of the fields).

        Raises:
            pydantic.ValidationError: The line is not JSON or is not a valid record.
        """
        return cls.model_validate_json(data)


PROVIDER_TEXT = ("error_class", "response_id", "usage_raw", "verdict_detail", "diagnostics")
"""Record fields holding text the provider sent: scrubbed of secrets and their fragments."""
CALLER_TEXT = ("session_id", "scenario", "model", "content", "request_headers")
"""Record fields holding text the caller wrote: scrubbed of whole secrets (a fragment of a weak
key, such as a word, may be ordinary text there)."""


def scrubbed(record: UsageRecord, secrets: tuple[str, ...] = ()) -> UsageRecord:
    """``record`` with every text field (:data:`PROVIDER_TEXT`, :data:`CALLER_TEXT`) scrubbed
    of ``secrets`` and key-shaped strings (:func:`~stableprompt._redact.redact`); ``record``
    itself when no field changes (unset fields are skipped: every write scrubs its record)."""
    update = _scrubbed_text(lambda name: getattr(record, name), secrets)
    return record.model_copy(update=update) if update else record


def scrubbed_fields(fields: Mapping[str, Any], secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """``fields`` of a record (its keyword arguments or its JSON object) with their text
    fields scrubbed as :func:`scrubbed` scrubs a record's, without building one (a
    provisional row on the caller's thread, ``_recording._deferred``); a copy."""
    update = _scrubbed_text(fields.get, secrets)
    return {**fields, **update}


def _scrubbed_text(get: Callable[[str], Any], secrets: tuple[str, ...]) -> dict[str, Any]:
    """The text fields (read with ``get``) that scrubbing changes, with their scrubbed
    values: provider text of secrets and their fragments, caller text of whole secrets."""
    update: dict[str, Any] = {}
    for names, fragments in ((PROVIDER_TEXT, True), (CALLER_TEXT, False)):
        for name in names:
            value = get(name)
            if value is not None:
                clean = redact(value, secrets=secrets, fragments=fragments)
                if clean != value:
                    update[name] = clean
    return update


public(UsageRecord)
