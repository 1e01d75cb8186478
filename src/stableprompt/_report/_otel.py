"""OpenTelemetry export: one GenAI client span and token-usage metric points per record.

- :func:`export_otel`: spans (and, given a meter, metric points) for records already in a
  ledger, the offline path.
- :class:`OTelSink`: the live path, a record sink (``Recorder(sinks=[OTelSink()])``): each call
  becomes a span and metric points as it is recorded, so many machines report into any
  OpenTelemetry collector.

Spans: https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/. Metrics:
https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-metrics/ (``otel`` extra).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from .._canonical import canonical_json
from .._exceptions import ConfigurationError
from .._ledger._usage_record import OTEL_ATTRIBUTES, UNANALYSED, UsageRecord
from .._public import public
from .._redact import redact

__all__ = ["TOKEN_BUCKETS", "TOKEN_USAGE", "OTelSink", "export_otel", "token_usage_points"]

TOKEN_USAGE = "gen_ai.client.token.usage"
"""The GenAI client token-usage histogram (unit ``{token}``)."""

TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                 16777216, 67108864)
"""Its explicit bucket boundaries, as the semantic conventions recommend."""

CACHE_ATTRIBUTE = "gen_ai.token.cache"
"""The cache dimension of input-token points: ``read``, ``write`` or ``uncached``."""

_OPERATION = {"gemini": "generate_content"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def token_usage_points(record: UsageRecord) -> list[tuple[int, dict[str, Any]]]:
    """The ``gen_ai.client.token.usage`` points of one record: ``(tokens, attributes)``.

    Attributes on every point: ``gen_ai.operation.name``, ``gen_ai.provider.name``,
    ``gen_ai.request.model`` (when known) and ``gen_ai.token.type`` (``input`` / ``output``).
    Input tokens are partitioned by ``gen_ai.token.cache``: ``read`` (cache reads),
    ``write`` (cache writes, all TTLs) and ``uncached`` (the rest of the inclusive
    ``input_tokens_total``), three points that sum to it, zeros included, so sums per
    dimension stay additive. A call whose cache counters are unknown, or whose usage does not
    add up (``usage_inconsistent``), gets one bare ``input`` point of its total; a call with
    no usage gets none (never a made-up 0).

    Semantic-convention status (read 2026-12-01): the released GenAI metrics
    (https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-metrics/, semconv v1.41) define
    this histogram with ``gen_ai.token.type`` only. The cache dimension is the proposal
    https://github.com/open-telemetry/semantic-conventions-genai/pull/96 (``gen_ai.token.cache``;
    values per that repository's unreleased changelog, ``uncached`` / ``read`` / ``write``).
    That repository's main branch is moving to separate counters instead
    (``gen_ai.client.inference.usage.input_tokens`` / ``.cache_read.input_tokens`` /
    ``.cache_write.input_tokens``, docs/gen-ai/gen-ai-token-metrics.md), unreleased, so not
    emitted yet.
    """
    operation = _OPERATION.get(record.wire_format, "chat")
    base: dict[str, Any] = {"gen_ai.operation.name": operation}
    if record.provider:
        base["gen_ai.provider.name"] = record.provider
    if record.model:
        base["gen_ai.request.model"] = record.model
    points: list[tuple[int, dict[str, Any]]] = []
    total = record.input_tokens_total
    read, write = record.cache_read_tokens, record.cache_write_tokens
    if total is not None and total >= 0:
        inputs = {**base, "gen_ai.token.type": "input"}
        uncached = None if read is None or write is None else total - read - write
        if uncached is None or record.usage_inconsistent or uncached < 0 \
                or read is None or write is None:
            points.append((total, inputs))
        else:
            points += [(read, {**inputs, CACHE_ATTRIBUTE: "read"}),
                       (write, {**inputs, CACHE_ATTRIBUTE: "write"}),
                       (uncached, {**inputs, CACHE_ATTRIBUTE: "uncached"})]
    if record.output_tokens is not None and record.output_tokens >= 0:
        points.append((record.output_tokens, {**base, "gen_ai.token.type": "output"}))
    return points


def _otel() -> Any:
    try:
        from opentelemetry import trace
    except ImportError as exc:
        raise ConfigurationError(
            "OpenTelemetry export needs the otel extra: pip install 'stableprompt[otel]'",
            code="otel-missing",
        ) from exc
    return trace


def _histogram(meter: Any) -> Any:
    return meter.create_histogram(
        TOKEN_USAGE, unit="{token}", description="Number of input and output tokens used.",
        explicit_bucket_boundaries_advisory=list(TOKEN_BUCKETS))


class OTelSink:
    """A record sink that emits each record as it is written: one GenAI client span
    (:func:`export_otel`) and its ``gen_ai.client.token.usage`` points
    (:func:`token_usage_points`).

    ``Recorder(ledger, sinks=[OTelSink()])``: the recorder calls the sink after the ledger
    write; an exporter failure is logged by the recorder and never breaks the call or loses
    the ledger row. A request the proxy forwarded unanalysed (wire format ``unknown``:
    ``GET /v1/models``, ...) is no GenAI operation: it is skipped, as by :func:`export_otel`.

    Args:
        tracer: An OpenTelemetry ``Tracer``; default ``trace.get_tracer("stableprompt")``.
        meter: An OpenTelemetry ``Meter``; default ``metrics.get_meter("stableprompt")``.
        spans: Emit spans (``False``: metrics only).
        metrics: Emit metric points (``False``: spans only).

    Raises:
        ConfigurationError: opentelemetry is not installed (code ``otel-missing``).

    Attributes:
        exported: Records handed to the exporters so far.
    """

    def __init__(self, *, tracer: Any = None, meter: Any = None, spans: bool = True,
                 metrics: bool = True) -> None:
        trace = _otel()
        from opentelemetry import metrics as otel_metrics

        self._tracer = (tracer or trace.get_tracer("stableprompt")) if spans else None
        self._histogram = _histogram(meter or otel_metrics.get_meter("stableprompt")) \
            if metrics else None
        self.exported = 0

    def __call__(self, record: UsageRecord) -> None:
        """Emit ``record``'s span and metric points (none for an unanalysed request)."""
        if record.wire_format == UNANALYSED:
            return
        if self._tracer is not None:
            export_otel([record], self._tracer)
        if self._histogram is not None:
            for value, attributes in token_usage_points(record):
                self._histogram.record(value, attributes=attributes)
        self.exported += 1

    def __repr__(self) -> str:
        return f"OTelSink(exported={self.exported})"


def export_otel(records: Iterable[UsageRecord], tracer: Any = None, *,
                meter: Any = None) -> int:
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

    Given a ``meter``, each record's ``gen_ai.client.token.usage`` points are recorded too
    (:func:`token_usage_points`).

    Args:
        records: Records to export.
        tracer: An OpenTelemetry ``Tracer``; default ``trace.get_tracer("stableprompt")``.
        meter: An OpenTelemetry ``Meter`` for the token-usage histogram; ``None``: spans only.

    Records of requests forwarded unanalysed (wire format ``unknown``) are skipped: they are
    no GenAI operation.

    Returns:
        Number of spans emitted.

    Raises:
        ConfigurationError: opentelemetry is not installed (``pip install 'stableprompt[otel]'``).
    """
    trace = _otel()
    histogram = None if meter is None else _histogram(meter)
    if tracer is None:
        tracer = trace.get_tracer("stableprompt")
    count = 0
    for record in records:
        if record.wire_format == UNANALYSED:
            continue  # a request forwarded unanalysed (GET /v1/models, ...): no GenAI span
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
        if histogram is not None:
            for value, attributes in token_usage_points(record):
                histogram.record(value, attributes=attributes)
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


public(OTelSink, export_otel)
