"""Tests for the OpenTelemetry export (`_report._otel`): the `gen_ai.client.inference.usage.*`
counters, the legacy token-usage histogram behind its flag, spans, and the live sink a Recorder
writes each record to, checked with the OTel SDK's in-memory span exporter and
InMemoryMetricReader, and over OTLP/HTTP to a loopback receiver (`test_otlp.py`)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import record_anthropic_call
from stableprompt import Ledger, OTelSink, Recorder, UsageRecord, export_otel
from stableprompt._report._otel import (
    CACHE_READ_TOKENS,
    CACHE_WRITE_TOKENS,
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    TOKEN_USAGE,
    token_usage_points,
    usage_counter_points,
)

pytest.importorskip("opentelemetry.sdk.metrics")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _record(**update: Any) -> UsageRecord:
    base = UsageRecord(ts_utc=T0, session_id="c1", wire_format="anthropic", provider="anthropic",
                       model="claude-sonnet-4-5", input_tokens_total=5210,
                       cache_read_tokens=5100, cache_write_tokens=100, uncached_tokens=10,
                       output_tokens=42, verdict="hit")
    return base.model_copy(update=update)


def _otel() -> tuple[InMemorySpanExporter, TracerProvider, InMemoryMetricReader, MeterProvider]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    return exporter, tracer_provider, reader, MeterProvider(metric_readers=[reader])


def _points(reader: InMemoryMetricReader) -> dict[tuple[tuple[str, Any], ...], tuple[int, int]]:
    """``sorted attribute items -> (sum, count)`` of the token-usage histogram."""
    data = reader.get_metrics_data()
    out: dict[tuple[tuple[str, Any], ...], tuple[int, int]] = {}
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != TOKEN_USAGE:
                    continue
                assert metric.unit == "{token}"
                for point in metric.data.data_points:
                    key = tuple(sorted(dict(point.attributes or {}).items()))
                    out[key] = (int(point.sum), int(point.count))  # type: ignore[union-attr]
    return out


def _counters(reader: InMemoryMetricReader
              ) -> dict[tuple[str, tuple[tuple[str, Any], ...]], tuple[int, bool]]:
    """``(counter name, sorted attribute items) -> (value, monotonic)`` of every sum metric."""
    data = reader.get_metrics_data()
    out: dict[tuple[str, tuple[tuple[str, Any], ...]], tuple[int, bool]] = {}
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if not metric.name.startswith("gen_ai.client.inference.usage."):
                    continue
                assert metric.unit == "{token}"
                for point in metric.data.data_points:
                    key = (metric.name, tuple(sorted(dict(point.attributes or {}).items())))
                    out[key] = (int(point.value),  # type: ignore[union-attr]
                                bool(metric.data.is_monotonic))  # type: ignore[union-attr]
    return out


def _counter_sums(reader: InMemoryMetricReader) -> dict[str, int]:
    sums: dict[str, int] = {}
    for (name, _), (value, monotonic) in _counters(reader).items():
        assert monotonic
        sums[name] = sums.get(name, 0) + value
    return sums


def _key(token_type: str, cache: str | None = None) -> tuple[tuple[str, Any], ...]:
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic",
             "gen_ai.request.model": "claude-sonnet-4-5", "gen_ai.token.type": token_type}
    if cache is not None:
        attrs["gen_ai.token.cache"] = cache
    return tuple(sorted(attrs.items()))


def test_token_usage_points_partition_input_by_cache() -> None:
    """Input tokens split into read / write / uncached points that sum to the inclusive total;
    unknown cache counters or inconsistent usage give one bare input point; no usage, none."""
    points = token_usage_points(_record())
    assert [(v, a.get("gen_ai.token.type"), a.get("gen_ai.token.cache")) for v, a in points] == [
        (5100, "input", "read"), (100, "input", "write"), (10, "input", "uncached"),
        (42, "output", None)]
    assert sum(v for v, a in points if a["gen_ai.token.type"] == "input") == 5210
    bare = token_usage_points(_record(cache_read_tokens=None, cache_write_tokens=None))
    assert [(v, "gen_ai.token.cache" in a) for v, a in bare] == [(5210, False), (42, False)]
    odd = token_usage_points(_record(cache_read_tokens=9000, usage_inconsistent=True))
    assert [v for v, _ in odd] == [5210, 42]
    assert token_usage_points(_record(input_tokens_total=None, cache_read_tokens=None,
                                      cache_write_tokens=None, output_tokens=None)) == []


def test_export_otel_with_legacy_histogram_records_the_histogram() -> None:
    """export_otel(records, tracer, meter=..., legacy_histogram=True) emits the spans and the
    old token-usage histogram points."""
    spans, tracer_provider, reader, meter_provider = _otel()
    records = [_record(), _record(cache_read_tokens=0, cache_write_tokens=5200)]
    assert export_otel(records, tracer_provider.get_tracer("t"),
                       meter=meter_provider.get_meter("t"), legacy_histogram=True) == 2
    assert len(spans.get_finished_spans()) == 2
    points = _points(reader)
    assert points[_key("input", "read")] == (5100, 2)
    assert points[_key("input", "write")] == (5300, 2)
    assert points[_key("input", "uncached")] == (20, 2)
    assert points[_key("output")] == (84, 2)


def test_unanalysed_requests_get_no_genai_span() -> None:
    """A request the proxy forwarded unanalysed (wire format ``unknown``) is no GenAI
    operation: neither export_otel nor the sink emits a span or points for it."""
    spans, tracer_provider, reader, meter_provider = _otel()
    unanalysed = UsageRecord(ts_utc=T0, wire_format="unknown", status_code=200,
                             latency_ms=3.0, verdict_detail={"path": "/v1/models"})
    tracer, meter = tracer_provider.get_tracer("t"), meter_provider.get_meter("t")
    assert export_otel([unanalysed, _record()], tracer, meter=meter) == 1
    sink = OTelSink(tracer=tracer, meter=meter)
    sink(unanalysed)
    assert sink.exported == 0
    assert [s.name for s in spans.get_finished_spans()] == ["chat claude-sonnet-4-5"]
    assert _counter_sums(reader)[OUTPUT_TOKENS] == 42  # the LLM call's points only
    assert usage_counter_points(unanalysed) == []


def test_recorder_sink_emits_a_span_and_points_per_call(tmp_path: Path) -> None:
    """Recorder(sinks=[OTelSink(...)]) turns each recorded call into one span and its token
    points as it is written, after the ledger row."""
    spans, tracer_provider, reader, meter_provider = _otel()
    sink = OTelSink(tracer=tracer_provider.get_tracer("t"), meter=meter_provider.get_meter("t"),
                    legacy_histogram=True)
    with Ledger(tmp_path / "c.db") as ledger:
        recorder = Recorder(ledger, tokenizer="bytes/4", session_id="s1", sinks=[sink])
        record_anthropic_call(recorder, 0, read=0, write=1700)
        record_anthropic_call(recorder, 1, read=1700, write=0)
        assert len(ledger.records()) == 2
    assert sink.exported == 2
    finished = spans.get_finished_spans()
    assert [dict(s.attributes or {})["gen_ai.usage.cache_read.input_tokens"]
            for s in finished] == [0, 1700]
    points = _points(reader)
    assert points[_key("input", "read")] == (1700, 2)
    assert points[_key("input", "write")] == (1700, 2)
    assert points[_key("input", "uncached")] == (40, 2)
    assert points[_key("output")] == (6, 2)
    assert _counter_sums(reader) == {INPUT_TOKENS: 3440, CACHE_READ_TOKENS: 1700,
                                     CACHE_WRITE_TOKENS: 1700, OUTPUT_TOKENS: 6}


class _Broken:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, record: UsageRecord) -> None:
        self.calls += 1
        raise RuntimeError("collector down")


def test_a_failing_sink_breaks_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A sink that raises is logged; the call still returns its record, the ledger keeps the
    row, and the next sink still gets it."""
    broken = _Broken()
    spans, tracer_provider, _, _ = _otel()
    after = OTelSink(tracer=tracer_provider.get_tracer("t"), metrics=False)
    with Ledger(tmp_path / "c.db") as ledger, caplog.at_level(logging.WARNING):
        recorder = Recorder(ledger, tokenizer="bytes/4", session_id="s1",
                            sinks=[broken, after])
        record_anthropic_call(recorder, 0, read=0, write=1700)
        assert len(ledger.records()) == 1
    assert broken.calls == 1 and after.exported == 1
    assert len(spans.get_finished_spans()) == 1
    assert "record sink _Broken failed: RuntimeError: collector down" in caplog.text


def test_usage_counter_points_one_per_counter_per_inference() -> None:
    """Each inference adds to all four usage counters, with modality ``text``, the verdict,
    and the provider/model; the counters are the ledger's columns as reported."""
    points = usage_counter_points(_record())
    assert [(n, v) for n, v, _ in points] == [
        (INPUT_TOKENS, 5210), (CACHE_READ_TOKENS, 5100), (CACHE_WRITE_TOKENS, 100),
        (OUTPUT_TOKENS, 42)]
    assert points[0][2] == {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic",
                            "gen_ai.request.model": "claude-sonnet-4-5",
                            "gen_ai.token.modality": "text", "stableprompt.verdict": "hit"}


def test_a_failed_call_counts_zero_with_unknown_modality() -> None:
    """A failed call without usage still records each counter, as 0 with
    ``gen_ai.token.modality="unknown"``, with its low-cardinality ``error.type``."""
    failed = _record(input_tokens_total=None, cache_read_tokens=None, cache_write_tokens=None,
                     uncached_tokens=None, output_tokens=None, verdict="unknown",
                     status_code=529, error_class="ProviderOverloadedError")
    points = usage_counter_points(failed)
    assert [(v, a["gen_ai.token.modality"]) for _, v, a in points] == [(0, "unknown")] * 4
    assert {a["error.type"] for _, _, a in points} == {"ProviderOverloadedError"}
    partial = usage_counter_points(_record(cache_write_tokens=None, input_tokens_total=-3))
    assert [(v, a["gen_ai.token.modality"]) for _, v, a in partial] == [
        (0, "unknown"), (5100, "text"), (0, "unknown"), (42, "text")]


def test_cause_is_a_low_cardinality_attribute() -> None:
    """A miss carries its cause slug on the counters; an unlisted slug becomes ``other``;
    segment and path (high cardinality) stay off the metrics."""
    detail = {"cause": "volatile-token", "segment": "system[0]", "path": "/system/0/text"}
    miss = _record(verdict="client_mutation", verdict_detail=detail)
    attrs = usage_counter_points(miss)[0][2]
    assert attrs["stableprompt.verdict"] == "client_mutation"
    assert attrs["stableprompt.cause"] == "volatile-token"
    assert "stableprompt.segment" not in attrs and "stableprompt.path" not in attrs
    odd = _record(verdict="client_mutation", verdict_detail={"cause": "x" * 40})
    assert usage_counter_points(odd)[0][2]["stableprompt.cause"] == "other"


def test_the_span_names_the_segment_and_path_of_a_break() -> None:
    """The span per call carries the break's cause, segment and path as attributes."""
    spans, tracer_provider, _, _ = _otel()
    detail = {"cause": "volatile-token", "segment": "system[0]", "path": "/system/0/text"}
    export_otel([_record(verdict="client_mutation", verdict_detail=detail)],
                tracer_provider.get_tracer("t"))
    (span,) = spans.get_finished_spans()
    attrs = dict(span.attributes or {})
    assert attrs["stableprompt.verdict"] == "client_mutation"
    assert (attrs["stableprompt.cause"], attrs["stableprompt.segment"],
            attrs["stableprompt.path"]) == ("volatile-token", "system[0]", "/system/0/text")


def test_counters_by_default_and_the_histogram_only_behind_the_flag() -> None:
    """Without ``legacy_histogram`` no ``gen_ai.client.token.usage`` points are recorded;
    the counters are monotonic sums in ``{token}``, failed calls included."""
    _, tracer_provider, reader, meter_provider = _otel()
    failed = _record(input_tokens_total=None, cache_read_tokens=None, cache_write_tokens=None,
                     uncached_tokens=None, output_tokens=None, error_class="ProviderHTTPError")
    sink = OTelSink(tracer=tracer_provider.get_tracer("t"), meter=meter_provider.get_meter("t"))
    for record in (_record(), _record(model="claude-opus-4-5"), failed):
        sink(record)
    assert _points(reader) == {}
    counters = _counters(reader)
    assert _counter_sums(reader) == {INPUT_TOKENS: 10420, CACHE_READ_TOKENS: 10200,
                                     CACHE_WRITE_TOKENS: 200, OUTPUT_TOKENS: 84}
    unknown = [k for k in counters if ("gen_ai.token.modality", "unknown") in k[1]]
    assert len(unknown) == 4  # the failed call, once per counter, recorded as 0


def test_the_allow_listed_headers_are_http_request_header_attributes() -> None:
    """A row's cache-relevant headers become ``http.request.header.<name>`` string-array span
    attributes (the HTTP semantic conventions), and a no_breakpoint verdict is exported as
    such."""
    spans, tracer_provider, _, _ = _otel()
    headers = {"anthropic-beta": "a-2026-01-01,b-2026-01-01", "anthropic-version": "2023-06-01"}
    export_otel([_record(verdict="no_breakpoint", request_headers=headers)],
                tracer_provider.get_tracer("t"))
    (span,) = spans.get_finished_spans()
    attrs = dict(span.attributes or {})
    assert attrs["http.request.header.anthropic-beta"] == ("a-2026-01-01,b-2026-01-01",)
    assert attrs["http.request.header.anthropic-version"] == ("2023-06-01",)
    assert "stableprompt.request_headers" not in attrs
    assert attrs["stableprompt.verdict"] == "no_breakpoint"
