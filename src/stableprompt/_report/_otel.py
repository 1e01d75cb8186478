"""OpenTelemetry export: one GenAI client span per :class:`~stableprompt.UsageRecord`.

Source: https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/ (``otel`` extra).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from typing import Any

from .._canonical import canonical_json
from .._exceptions import ConfigurationError
from .._ledger._usage_record import OTEL_ATTRIBUTES, UsageRecord
from .._public import public
from .._redact import redact

__all__ = ["export_otel"]

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


public(export_otel)
