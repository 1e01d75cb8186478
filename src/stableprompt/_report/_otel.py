"""OpenTelemetry export: one GenAI client span and the token-usage counters per record.

- :func:`export_otel`: spans (and, given a meter, the usage counters) for records already in a
  ledger, the offline path.
- :class:`OTelSink`: the live path, a record sink (``Recorder(sinks=[OTelSink()])``): each call
  becomes a span and counter increments as it is recorded, so many machines report into any
  OpenTelemetry collector.

Metrics follow the current GenAI token conventions (monotonic counters
``gen_ai.client.inference.usage.*``, one record per inference, failed ones included; source
``open-telemetry/semantic-conventions-genai:docs/gen-ai/gen-ai-token-metrics.md``, read
2026-12-07). The older ``gen_ai.client.token.usage`` histogram is kept behind
``legacy_histogram=True``. Spans: https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/
(``otel`` extra).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from .._canonical import canonical_json
from .._diff import CAUSES
from .._exceptions import ConfigurationError
from .._ledger._usage_record import OTEL_ATTRIBUTES, UNANALYSED, UsageRecord
from .._public import public
from .._redact import redact

__all__ = ["CACHE_READ_TOKENS", "CACHE_WRITE_TOKENS", "INPUT_TOKENS", "OUTPUT_TOKENS",
           "TOKEN_BUCKETS", "TOKEN_USAGE", "USAGE_COUNTERS", "OTelSink", "export_otel",
           "token_usage_points", "usage_counter_points"]

INPUT_TOKENS = "gen_ai.client.inference.usage.input_tokens"
"""Counter of input tokens, inclusive of cache reads and writes (``input_tokens_total``)."""
CACHE_READ_TOKENS = "gen_ai.client.inference.usage.cache_read.input_tokens"
"""Counter of input tokens read from the provider's cache (a subset of :data:`INPUT_TOKENS`)."""
CACHE_WRITE_TOKENS = "gen_ai.client.inference.usage.cache_write.input_tokens"
"""Counter of input tokens written to the provider's cache, all TTLs (a subset of
:data:`INPUT_TOKENS`)."""
OUTPUT_TOKENS = "gen_ai.client.inference.usage.output_tokens"
"""Counter of output tokens, reasoning included."""

USAGE_COUNTERS: dict[str, tuple[str, str]] = {
    INPUT_TOKENS: ("input_tokens_total", "The number of input (prompt) tokens used, "
                   "including cached tokens."),
    CACHE_READ_TOKENS: ("cache_read_tokens", "The number of input tokens served from a "
                        "provider-managed cache."),
    CACHE_WRITE_TOKENS: ("cache_write_tokens", "The number of input tokens written to a "
                         "provider-managed cache."),
    OUTPUT_TOKENS: ("output_tokens", "The number of output (completion) tokens used, "
                    "including reasoning tokens."),
}
"""Each usage counter's name -> (the ``UsageRecord`` field it sums, its description)."""

MODALITY_ATTRIBUTE = "gen_ai.token.modality"
"""``text`` for a count the provider reported, ``unknown`` for the 0 of a missing one."""
VERDICT_ATTRIBUTE = "stableprompt.verdict"
"""The call's verdict (one of the eight ``Verdict`` values) on every counter point."""
CAUSE_ATTRIBUTE = "stableprompt.cause"
"""The break cause of a miss: a ``_diff.CAUSES`` slug, ``lookback-exceeded``, or ``other``."""

_KNOWN_CAUSES = frozenset((*CAUSES, "lookback-exceeded"))

TOKEN_USAGE = "gen_ai.client.token.usage"
"""The legacy GenAI client token-usage histogram (unit ``{token}``), behind
``legacy_histogram=True``."""

TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                 16777216, 67108864)
"""Its explicit bucket boundaries, as the semantic conventions recommend."""

CACHE_ATTRIBUTE = "gen_ai.token.cache"
"""The cache dimension of legacy input-token points: ``read``, ``write`` or ``uncached``."""

_OPERATION = {"gemini": "generate_content"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def usage_counter_points(record: UsageRecord) -> list[tuple[str, int, dict[str, Any]]]:
    """The usage-counter increments of one record: ``(counter name, tokens, attributes)``.

    One increment per counter of :data:`USAGE_COUNTERS` for every inference, failed ones
    included: the ledger's value of the counter's field, or ``0`` with
    ``gen_ai.token.modality="unknown"`` when the provider sent none (a failed call, a
    provider without cache counters) or an impossible negative one. A reported count has
    modality ``text`` (no parsed provider breaks usage down by modality). So each counter's
    sum per provider/model equals the ledger's column sum, unknowns as 0.

    Attributes on every point: ``gen_ai.operation.name``, ``gen_ai.provider.name``
    (``wire_format`` when the provider is unknown), ``gen_ai.request.model`` (when known),
    ``gen_ai.token.modality``, ``stableprompt.verdict``, ``stableprompt.cause`` (misses with
    a cause; an unlisted slug becomes ``other``) and ``error.type`` (failed calls): all low
    cardinality, never a session, id or path. An unanalysed request (wire format ``unknown``)
    is no inference and has none.
    """
    if record.wire_format == UNANALYSED:
        return []
    base: dict[str, Any] = {
        "gen_ai.operation.name": _OPERATION.get(record.wire_format, "chat"),
        "gen_ai.provider.name": record.provider or record.wire_format,
        VERDICT_ATTRIBUTE: record.verdict,
    }
    if record.model:
        base["gen_ai.request.model"] = record.model
    cause = record.verdict_detail.get("cause")
    if isinstance(cause, str):
        base[CAUSE_ATTRIBUTE] = cause if cause in _KNOWN_CAUSES else "other"
    if record.error_class is not None:
        base["error.type"] = redact(record.error_class)
    points: list[tuple[str, int, dict[str, Any]]] = []
    for name, (field, _) in USAGE_COUNTERS.items():
        value = getattr(record, field)
        known = isinstance(value, int) and value >= 0
        points.append((name, value if known else 0,
                       {**base, MODALITY_ATTRIBUTE: "text" if known else "unknown"}))
    return points


def token_usage_points(record: UsageRecord) -> list[tuple[int, dict[str, Any]]]:
    """The legacy ``gen_ai.client.token.usage`` points of one record: ``(tokens, attributes)``.

    Emitted only with ``legacy_histogram=True`` (:class:`OTelSink`, :func:`export_otel`).
    Attributes on every point: ``gen_ai.operation.name``, ``gen_ai.provider.name``,
    ``gen_ai.request.model`` (when known) and ``gen_ai.token.type`` (``input`` / ``output``).
    Input tokens are partitioned by ``gen_ai.token.cache``: ``read`` (cache reads),
    ``write`` (cache writes, all TTLs) and ``uncached`` (the rest of the inclusive
    ``input_tokens_total``), three points that sum to it, zeros included, so sums per
    dimension stay additive. A call whose cache counters are unknown, or whose usage does not
    add up (``usage_inconsistent``), gets one bare ``input`` point of its total; a call with
    no usage gets none (never a made-up 0).

    Semantic-convention status: the released GenAI metrics (semconv v1.41) define this
    histogram with ``gen_ai.token.type`` only; the cache dimension was the proposal
    https://github.com/open-telemetry/semantic-conventions-genai/pull/96, since replaced by the
    separate counters of :func:`usage_counter_points`.
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


class _Instruments:
    """The usage counters (and, behind the flag, the legacy histogram) of one meter."""

    def __init__(self, meter: Any, *, legacy_histogram: bool) -> None:
        self._counters = {name: meter.create_counter(name, unit="{token}", description=text)
                          for name, (_, text) in USAGE_COUNTERS.items()}
        self._histogram = meter.create_histogram(
            TOKEN_USAGE, unit="{token}", description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=list(TOKEN_BUCKETS)) if legacy_histogram \
            else None

    def record(self, record: UsageRecord) -> None:
        for name, value, attributes in usage_counter_points(record):
            self._counters[name].add(value, attributes=attributes)
        if self._histogram is not None:
            for value, attributes in token_usage_points(record):
                self._histogram.record(value, attributes=attributes)


class OTelSink:
    """A record sink that emits each record as it is written: one GenAI client span
    (:func:`export_otel`) and its usage-counter increments (:func:`usage_counter_points`).

    ``Recorder(ledger, sinks=[OTelSink()])``: the recorder calls the sink after the ledger
    write; an exporter failure is logged by the recorder and never breaks the call or loses
    the ledger row. A request the proxy forwarded unanalysed (wire format ``unknown``:
    ``GET /v1/models``, ...) is no GenAI operation: it is skipped, as by :func:`export_otel`.

    Args:
        tracer: An OpenTelemetry ``Tracer``; default ``trace.get_tracer("stableprompt")``.
        meter: An OpenTelemetry ``Meter``; default ``metrics.get_meter("stableprompt")``.
        spans: Emit spans (``False``: metrics only).
        metrics: Emit the usage counters (``False``: spans only).
        legacy_histogram: Also record the older ``gen_ai.client.token.usage`` histogram
            (:func:`token_usage_points`), for dashboards built on it.

    Raises:
        ConfigurationError: opentelemetry is not installed (code ``otel-missing``).

    Attributes:
        exported: Records handed to the exporters so far.
    """

    def __init__(self, *, tracer: Any = None, meter: Any = None, spans: bool = True,
                 metrics: bool = True, legacy_histogram: bool = False) -> None:
        trace = _otel()
        from opentelemetry import metrics as otel_metrics

        self._tracer = (tracer or trace.get_tracer("stableprompt")) if spans else None
        self._instruments = _Instruments(meter or otel_metrics.get_meter("stableprompt"),
                                         legacy_histogram=legacy_histogram) \
            if metrics else None
        self.exported = 0

    def __call__(self, record: UsageRecord) -> None:
        """Emit ``record``'s span and counter increments (none for an unanalysed request)."""
        if record.wire_format == UNANALYSED:
            return
        if self._tracer is not None:
            export_otel([record], self._tracer)
        if self._instruments is not None:
            self._instruments.record(record)
        self.exported += 1

    def __repr__(self) -> str:
        return f"OTelSink(exported={self.exported})"


def export_otel(records: Iterable[UsageRecord], tracer: Any = None, *,
                meter: Any = None, legacy_histogram: bool = False) -> int:
    """Emit one OpenTelemetry span per record, with GenAI semantic-convention attributes.

    Span name ``"{gen_ai.operation.name} {gen_ai.request.model}"``, kind CLIENT, start at
    ``ts_utc``, duration ``latency_ms``. Attributes: ``gen_ai.operation.name``,
    ``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.response.id``,
    ``gen_ai.conversation.id``, ``gen_ai.usage.input_tokens`` (inclusive),
    ``gen_ai.usage.output_tokens``, ``gen_ai.usage.cache_read.input_tokens``,
    ``gen_ai.usage.cache_creation.input_tokens``, ``error.type``, ``http.response.status_code``,
    and ours under ``stableprompt.*``: verdict, lineage, LCP, prediction, ttft, and for a
    miss ``stableprompt.cause``, ``stableprompt.segment`` (the first divergent segment) and
    ``stableprompt.path`` (the JSON pointer of the first differing value), and the request's
    allow-listed cache-relevant headers as ``http.request.header.<name>`` (string arrays, the
    HTTP semantic conventions; never another header). Unknown values are omitted; content is
    never exported.
    Source: https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/

    Given a ``meter``, each record's usage counters are incremented too
    (:func:`usage_counter_points`), and with ``legacy_histogram=True`` the older
    ``gen_ai.client.token.usage`` histogram is recorded beside them.

    Args:
        records: Records to export.
        tracer: An OpenTelemetry ``Tracer``; default ``trace.get_tracer("stableprompt")``.
        meter: An OpenTelemetry ``Meter`` for the usage counters; ``None``: spans only.
        legacy_histogram: Also record the ``gen_ai.client.token.usage`` histogram.

    Records of requests forwarded unanalysed (wire format ``unknown``) are skipped: they are
    no GenAI operation.

    Returns:
        Number of spans emitted.

    Raises:
        ConfigurationError: opentelemetry is not installed (``pip install 'stableprompt[otel]'``).
    """
    trace = _otel()
    instruments = None if meter is None else _Instruments(meter,
                                                          legacy_histogram=legacy_histogram)
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
        if instruments is not None:
            instruments.record(record)
        count += 1
    return count


def _otel_attributes(record: UsageRecord, operation: str) -> dict[str, Any]:
    clean = record.model_copy(update={"error_class": redact(record.error_class)})
    attributes: dict[str, Any] = {"gen_ai.operation.name": operation}
    for field in UsageRecord.model_fields:
        if field in ("ts_utc", "content", "usage_raw", "diagnostics", "verdict_detail",
                     "request_headers", "segment_digests"):  # (the outline: rows only)
            continue
        value = getattr(clean, field)
        if value is None:
            continue
        attributes[OTEL_ATTRIBUTES.get(field, f"stableprompt.{field}")] = value
    for name, sent in (clean.request_headers or {}).items():  # the allow-listed ones only
        attributes[f"http.request.header.{name}"] = [redact(sent)]
    for key in ("cause", "segment", "path"):  # the break, as filterable span attributes
        value = clean.verdict_detail.get(key)
        if isinstance(value, str):
            attributes[f"stableprompt.{key}"] = redact(value)
    if clean.verdict_detail:
        attributes["stableprompt.verdict_detail"] = canonical_json(
            redact(clean.verdict_detail)
        ).decode("utf-8")
    return attributes


public(OTelSink, export_otel)
