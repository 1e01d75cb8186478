"""OTLP/HTTP export of the usage counters and spans (`_report._otel`) to a loopback receiver
that decodes the protobuf with `opentelemetry-proto`: the counters equal the ledger's token
sums per provider/model, whether exported offline (`export_otel`) or live (`OTelSink`)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from conftest import record_anthropic_call
from stableprompt import Ledger, OTelSink, Recorder, UsageRecord, export_otel
from stableprompt._ledger._schema import COLUMNS
from stableprompt._ledger._usage_record import WireFormat
from stableprompt._report._otel import USAGE_COUNTERS

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
pytest.importorskip("opentelemetry.proto")

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

T0 = datetime(2026, 1, 1, tzinfo=UTC)
Key = tuple[str, str, str]  # (counter, provider, model)


class _Receiver:
    """A loopback OTLP/HTTP collector: decoded metric and trace export requests."""

    def __init__(self) -> None:
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.traces: list[ExportTraceServiceRequest] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                assert self.headers["Content-Type"] == "application/x-protobuf"
                reply: bytes
                if self.path == "/v1/metrics":
                    receiver.metrics.append(ExportMetricsServiceRequest.FromString(body))
                    reply = ExportMetricsServiceResponse().SerializeToString()
                elif self.path == "/v1/traces":
                    receiver.traces.append(ExportTraceServiceRequest.FromString(body))
                    reply = ExportTraceServiceResponse().SerializeToString()
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def counters(self) -> dict[Key, int]:
        """The last cumulative value of each usage counter, summed per provider/model."""
        latest: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
        for request in self.metrics:
            for resource in request.resource_metrics:
                for scope in resource.scope_metrics:
                    for metric in scope.metrics:
                        if metric.name not in USAGE_COUNTERS:
                            continue
                        assert metric.unit == "{token}" and metric.sum.is_monotonic
                        for point in metric.sum.data_points:
                            attrs = tuple(sorted((a.key, a.value.string_value)
                                                 for a in point.attributes))
                            latest[(metric.name, attrs)] = point.as_int
        out: dict[Key, int] = {}
        for (name, attrs), value in latest.items():
            named = dict(attrs)
            key = (name, named["gen_ai.provider.name"], named.get("gen_ai.request.model", ""))
            out[key] = out.get(key, 0) + value
        return out

    def span_names(self) -> list[str]:
        return [span.name for request in self.traces for resource in request.resource_spans
                for scope in resource.scope_spans for span in scope.spans]


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Receiver]:
    """A started loopback receiver (no proxy from the environment in the way)."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    server = _Receiver()
    server.thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()


def _providers(receiver: _Receiver) -> tuple[TracerProvider, MeterProvider]:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{receiver.url}/v1/traces")))
    reader = PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint=f"{receiver.url}/v1/metrics"),
        export_interval_millis=3_600_000)
    return tracer_provider, MeterProvider(metric_readers=[reader])


def _ledger_sums(path: Path) -> dict[Key, int]:
    """The ledger's token sums per provider/model, by SQL on its file (unknowns as 0)."""
    sums: dict[Key, int] = {}
    with sqlite3.connect(path) as db:
        for name, (field, _) in USAGE_COUNTERS.items():
            column = f'"{COLUMNS[field]}"'
            rows = db.execute(
                f'SELECT "gen_ai.provider.name", COALESCE("gen_ai.request.model", \'\'), '
                f'SUM(COALESCE({column}, 0)) FROM calls WHERE wire_format != \'unknown\' '
                f'GROUP BY 1, 2').fetchall()
            for provider, model, total in rows:
                sums[(name, provider, model)] = int(total)
    return sums


_CALLS: list[tuple[str, str, WireFormat]] = [
    ("anthropic", "claude-sonnet-4-5", "anthropic"), ("anthropic", "claude-opus-4-5", "anthropic"),
    ("openai", "gpt-5", "openai-chat"), ("deepseek", "deepseek-chat", "deepseek")]


def _traffic() -> list[UsageRecord]:
    """Calls of three providers and four models: hits, misses with causes, a failure
    without usage, a provider without cache-write counts, and an unanalysed request."""
    out: list[UsageRecord] = []
    for i in range(12):
        provider, model, wire = _CALLS[i % 4]
        write = None if provider != "anthropic" else 100 * i
        out.append(UsageRecord(
            ts_utc=T0 + timedelta(seconds=i), session_id=f"s{i % 3}", wire_format=wire,
            provider=provider, model=model, input_tokens_total=1000 + 10 * i,
            cache_read_tokens=500 + i, cache_write_tokens=write, output_tokens=7 + i,
            verdict="hit" if i % 3 else "client_mutation",
            verdict_detail={} if i % 3 else {"cause": "volatile-token", "segment": "system[0]",
                                             "path": "/system/0/text"},
            latency_ms=12.5))
    out.append(UsageRecord(ts_utc=T0, wire_format="openai-chat", provider="openai",
                           model="gpt-5", status_code=500, error_class="ProviderHTTPError"))
    out.append(UsageRecord(ts_utc=T0, wire_format="unknown", status_code=200))
    return out


def test_export_otel_over_otlp_http_equals_the_ledger_sums(
        tmp_path: Path, receiver: _Receiver) -> None:
    """Records read back from a ledger and exported over OTLP/HTTP: each usage counter, per
    provider/model, equals the ledger's column sum; one span per analysed call."""
    path = tmp_path / "c.db"
    with Ledger(path) as ledger:
        for record in _traffic():
            ledger.write(record)
        records = ledger.records()
    tracer_provider, meter_provider = _providers(receiver)
    assert export_otel(records, tracer_provider.get_tracer("t"),
                       meter=meter_provider.get_meter("t")) == 13
    meter_provider.shutdown()  # the final collection and export
    tracer_provider.shutdown()
    expected = _ledger_sums(path)
    assert receiver.counters() == expected
    assert expected[("gen_ai.client.inference.usage.input_tokens", "openai", "gpt-5")] == \
        sum(1000 + 10 * i for i in (2, 6, 10))  # the failed call counted as 0
    assert len(receiver.span_names()) == 13


def test_the_live_sink_over_otlp_http_equals_the_ledger_sums(
        tmp_path: Path, receiver: _Receiver) -> None:
    """Recorder(sinks=[OTelSink(...)]) exporting over OTLP/HTTP while it records: the
    counters received equal the ledger's token sums."""
    tracer_provider, meter_provider = _providers(receiver)
    sink = OTelSink(tracer=tracer_provider.get_tracer("t"), meter=meter_provider.get_meter("t"))
    path = tmp_path / "live.db"
    with Ledger(path) as ledger:
        recorder = Recorder(ledger, tokenizer="bytes/4", session_id="s1", sinks=[sink])
        for step in range(5):
            record_anthropic_call(recorder, step, read=0 if step == 0 else 1700,
                                  write=1700 if step == 0 else 0)
    meter_provider.shutdown()
    tracer_provider.shutdown()
    expected = _ledger_sums(path)
    assert receiver.counters() == expected
    assert expected[("gen_ai.client.inference.usage.cache_read.input_tokens", "anthropic",
                     "claude-sonnet-4-5")] == 4 * 1700
    assert receiver.span_names() == ["chat claude-sonnet-4-5"] * 5
