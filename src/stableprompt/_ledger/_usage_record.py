"""UsageRecord: one ledger row per provider call; its JSON line, redaction and OTel span.

A record is what stableprompt knows about one call: when it ran, which conversation and cache
lineage it belongs to, how its request compares to its same-lineage predecessor (LCP, predicted
cache reads), what the provider reported (the usage fields mirror ``CacheUsage`` in
``_usage.py``: ``input_tokens_total == uncached + cache_read + cache_write`` where all are
known), and one attribution verdict. Fields the provider did not send are ``None`` (unknown),
never 0.

Records carry no HTTP headers, so an API key has no field to live in; the ledger additionally
scrubs anything key-shaped from the free-text fields before writing (:func:`redact`).
:func:`export_otel` turns records into OpenTelemetry GenAI spans (``otel`` extra).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

from .._canonical import canonical_json
from .._exceptions import ConfigurationError
from .._public import public

__all__ = [
    "MIN_SECRET_CHARS",
    "OTEL_ATTRIBUTES",
    "UsageRecord",
    "Verdict",
    "WireFormat",
    "export_otel",
    "new_record_id",
    "redact",
    "secrets_in_headers",
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
]
"""Wire formats whose usage objects stableprompt parses."""

Verdict = Literal[
    "cold",
    "hit",
    "client_mutation",
    "below_minimum",
    "ttl_expired",
    "provider_miss",
    "unknown",
]
"""One attribution verdict per call (see DESIGN.md, "Miss attribution")."""


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


def new_record_id() -> str:
    """Return a fresh record id: a uuid4 as 32 lowercase hex characters."""
    return uuid.uuid4().hex


def utc_now() -> datetime:
    """Return the current time as a timezone-aware UTC datetime."""
    return datetime.now(timezone.utc)


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
        wire_format: Request/response format, e.g. ``"anthropic"``, ``"openai-chat"``.
        provider: Provider name (OpenTelemetry ``gen_ai.provider.name``), e.g. ``"anthropic"``.
        model: Requested model id (OpenTelemetry ``gen_ai.request.model``).
        lineage: Head fingerprint naming the cache lineage (``sp1:...``).
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
        usage_inconsistent: The provider's usage did not add up (kept as reported, not clamped).
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

    @field_validator("ts_utc")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(
                "ts_utc must be timezone-aware; pass datetime.now(timezone.utc) or add tzinfo"
            )
        return value.astimezone(timezone.utc)

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


# --------------------------------------------------------------------------- redaction

_REDACTED = "[REDACTED]"
_SECRET_PATTERNS = (
    # Anthropic (sk-ant-api03-...), OpenAI (sk-..., sk-proj-...), and other sk- style keys.
    re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{16,}"),
    # Google API keys (x-goog-api-key / ?key=).
    re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{35}"),
    # A header or assignment naming the key: "x-api-key: ...", "api_key=...", "Bearer ...".
    re.compile(
        r"(?i)((?:x-api-key|x-goog-api-key|api[-_]?key|authorization)[\"']?\s*[:=]\s*[\"']?"
        r"(?:bearer\s+)?)[^\s\"',;}&]+"
    ),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/\-]{8,}=*"),
)
_SECRET_KEYS = re.compile(
    r"(?i)^(?:x-api-key|x-goog-api-key|api[-_]?key|authorization|proxy-authorization)$"
)

_T = TypeVar("_T")

MIN_SECRET_CHARS = 8
"""Shortest secret :func:`redact` scrubs by value, and the shortest fragment of a longer
secret it scrubs (characters). Shorter values are not keys; scrubbing them would mangle text."""


def _redact_text(text: str, secrets: tuple[str, ...], fragments: bool) -> str:
    for pattern in _SECRET_PATTERNS:  # first: a known key's prefix must not hide a whole key
        if pattern.groups:
            text = pattern.sub(lambda m: m.group(1) + _REDACTED, text)
        else:
            text = pattern.sub(_REDACTED, text)
    for secret in secrets:
        text = _strip_secret(text, secret, fragments)
    return text


def _strip_secret(text: str, secret: str, fragments: bool) -> str:
    """``text`` with ``secret`` and (``fragments``) every run of at least
    :data:`MIN_SECRET_CHARS` of its characters (a truncated or partly masked echo) replaced by
    ``[REDACTED]``."""
    size = MIN_SECRET_CHARS
    if len(secret) < size or not text:
        return text
    text = text.replace(secret, _REDACTED)
    if not fragments:
        return text
    for start in range(len(secret) - size + 1):
        window = secret[start : start + size]
        at = text.find(window)
        while at >= 0:
            end = at + size
            while end < len(text) and start + end - at < len(secret) and (
                    text[end] == secret[start + end - at]):
                end += 1
            text = text[:at] + _REDACTED + text[end:]
            at = text.find(window, at + len(_REDACTED))
    return text


def secrets_in_headers(headers: Any) -> tuple[str, ...]:
    """The credential values of a request's headers: the ``Authorization`` /
    ``Proxy-Authorization`` token (without its scheme), ``x-api-key``, ``api-key`` (Azure),
    ``x-goog-api-key``; values shorter than :data:`MIN_SECRET_CHARS` are left out.

    Args:
        headers: An httpx/httpx2 ``Headers`` or any mapping of header names to values
            (``None``: no secrets).

    Returns:
        The distinct secret values, longest first (so a key is scrubbed before its fragments).
    """
    found: set[str] = set()
    try:
        items = list(headers.items()) if headers is not None else []
    except Exception:
        return ()
    for name, value in items:
        if not isinstance(name, str) or not isinstance(value, str):
            continue
        if not _SECRET_KEYS.match(name):
            continue
        token = value.strip()
        scheme, _, rest = token.partition(" ")
        if rest and scheme.lower() in ("bearer", "basic", "token"):
            token = rest.strip()
        if len(token) >= MIN_SECRET_CHARS:
            found.add(token)
    return tuple(sorted(found, key=len, reverse=True))


def redact(value: _T, *, secrets: Iterable[str] = (), fragments: bool = True) -> _T:
    """Scrub API keys from a string or a JSON value: known ``secrets`` and key-shaped text.

    Replaced with ``[REDACTED]``: each of ``secrets`` (exact values of at least
    :data:`MIN_SECRET_CHARS` characters, e.g. the key the request was sent with, and with
    ``fragments`` every run of at least that many of its characters, as a server echoing part
    of a key would send);
    ``sk-...`` keys (Anthropic ``sk-ant-...``, OpenAI ``sk-proj-...``; at least 16 characters
    after ``sk-``), Google ``AIza...`` keys, the value after ``x-api-key``/``api_key``/
    ``Authorization`` (``:`` or ``=``), ``Bearer`` tokens, and the whole value of a dict entry
    whose key is ``x-api-key``, ``api_key``, ``authorization`` (any case). Dict keys and
    non-string scalars are kept.

    Args:
        value: A ``str``, or a JSON value (``dict``/``list`` nesting ``str``, numbers, ...).
        secrets: Exact secret values to remove wherever they occur (see
            :func:`secrets_in_headers`).
        fragments: Also remove runs of :data:`MIN_SECRET_CHARS`+ characters of a secret
            (for provider text; ``False`` for text the caller wrote, such as a request body or
            a label, where a weak key's word could be ordinary text).

    Returns:
        A scrubbed copy of the same shape (the input is not modified).
    """
    return _redact(value, tuple(sorted(set(secrets), key=len, reverse=True)), fragments)


def _redact(value: _T, secrets: tuple[str, ...], fragments: bool) -> _T:
    if isinstance(value, str):
        return _redact_text(value, secrets, fragments)  # type: ignore[return-value]
    if isinstance(value, dict):
        return {  # type: ignore[return-value]
            key: (_REDACTED if isinstance(key, str) and _SECRET_KEYS.match(key)
                  else _redact(item, secrets, fragments))
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return type(value)(_redact(item, secrets, fragments) for item in value)
    return value


# --------------------------------------------------------------------------- OpenTelemetry

_OPERATION = {"gemini": "generate_content"}
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)


def export_otel(records: Iterable[UsageRecord], tracer: Any = None) -> int:
    """Emit one OpenTelemetry span per record, with GenAI semantic-convention attributes.

    Span name ``"{gen_ai.operation.name} {gen_ai.request.model}"``, kind CLIENT, start at
    ``ts_utc``, duration ``latency_ms``. Attributes: ``gen_ai.operation.name``,
    ``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.response.id``,
    ``gen_ai.conversation.id``, ``gen_ai.usage.input_tokens`` (inclusive),
    ``gen_ai.usage.output_tokens``, ``gen_ai.usage.cache_read.input_tokens``,
    ``gen_ai.usage.cache_creation.input_tokens``, ``error.type``, ``http.response.status_code``,
    and ours under ``stableprompt.*`` (verdict, lineage, LCP, prediction, ttft). Unknown
    values are omitted; content is never exported.
    Source: https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/

    Args:
        records: Records to export.
        tracer: An OpenTelemetry ``Tracer``; default ``trace.get_tracer("stableprompt")``.

    Returns:
        Number of spans emitted.

    Raises:
        ConfigurationError: opentelemetry is not installed (``pip install 'stableprompt[otel]'``).
    """
    try:
        from opentelemetry import trace
    except ImportError as exc:
        raise ConfigurationError(
            "OpenTelemetry export needs the otel extra: pip install 'stableprompt[otel]'",
            code="otel-missing",
        ) from exc
    if tracer is None:
        tracer = trace.get_tracer("stableprompt")
    count = 0
    for record in records:
        operation = _OPERATION.get(record.wire_format, "chat")
        name = f"{operation} {record.model}" if record.model else operation
        start_ns = (record.ts_utc - _EPOCH) // _MICROSECOND * 1_000
        span = tracer.start_span(
            name,
            kind=trace.SpanKind.CLIENT,
            start_time=start_ns,
            attributes=_otel_attributes(record, operation),
        )
        if record.error_class is not None:
            span.set_status(trace.Status(trace.StatusCode.ERROR, redact(record.error_class)))
        end_ns = start_ns + int((record.latency_ms or 0.0) * 1_000_000)
        span.end(end_time=end_ns)
        count += 1
    return count


def _otel_attributes(record: UsageRecord, operation: str) -> dict[str, Any]:
    clean = record.model_copy(update={"error_class": redact(record.error_class)})
    attributes: dict[str, Any] = {"gen_ai.operation.name": operation}
    for field in UsageRecord.model_fields:
        if field in ("ts_utc", "content", "usage_raw", "diagnostics", "verdict_detail"):
            continue
        value = getattr(clean, field)
        if value is None:
            continue
        attributes[OTEL_ATTRIBUTES.get(field, f"stableprompt.{field}")] = value
    if clean.verdict_detail:
        attributes["stableprompt.verdict_detail"] = canonical_json(
            redact(clean.verdict_detail)
        ).decode("utf-8")
    return attributes


public(UsageRecord, export_otel)
