"""Tests for UsageRecord (src/stableprompt/_record.py)."""

from __future__ import annotations

import os
import re
import typing
import uuid
import warnings
from datetime import UTC, datetime, timedelta, timezone

import pydantic
import pytest

from stableprompt._ledger._usage_record import (
    UNANALYSED,
    UsageRecord,
    WireFormat,
    new_record_id,
)
from stableprompt._redact import redact, secrets_in_headers
from stableprompt.providers import WIRE_FORMATS


def test_defaults_fill_id_and_utc_timestamp() -> None:
    """A record gets a uuid4-hex id, a UTC timestamp, verdict unknown and unknown usage."""
    before = datetime.now(UTC)
    record = UsageRecord(wire_format="anthropic")
    assert re.fullmatch(r"[0-9a-f]{32}", record.record_id)
    assert record.ts_utc.tzinfo == UTC
    assert before <= record.ts_utc <= datetime.now(UTC)
    assert record.verdict == "unknown"
    assert record.verdict_detail == {}
    assert record.input_tokens_total is None and record.cache_read_tokens is None
    assert UsageRecord(wire_format="anthropic").record_id != record.record_id


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_record_ids_are_uuid4_hex_unique_and_not_repeated_by_a_forked_child() -> None:
    """``new_record_id`` (no system call per id): version-4 UUIDs as 32 hex characters, 10,000
    distinct, and a forked child draws other ids than its parent's next ones."""
    ids = {new_record_id() for _ in range(10_000)}
    assert len(ids) == 10_000
    assert all(uuid.UUID(hex=i).version == 4 and re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    read, write = os.pipe()
    with warnings.catch_warnings():  # 3.12+: fork with threads; the child only writes, exits
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: its next id, to the parent
        os.write(write, new_record_id().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 64).decode()
    os.close(read)
    assert len(child) == 32 and child != new_record_id()


def test_aware_timestamp_is_normalized_to_utc() -> None:
    """An aware non-UTC timestamp is kept as the same instant, expressed in UTC."""
    local = datetime(2026, 3, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    record = UsageRecord(wire_format="openai-chat", ts_utc=local)
    assert record.ts_utc == datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    assert record.ts_utc.utcoffset() == timedelta(0)


def test_naive_timestamp_is_rejected() -> None:
    """A naive ts_utc raises a validation error that says it must be timezone-aware."""
    with pytest.raises(pydantic.ValidationError, match="timezone-aware"):
        UsageRecord(wire_format="anthropic", ts_utc=datetime(2026, 1, 1))


def test_validation_is_strict_frozen_and_closed() -> None:
    """Strings are not coerced to ints, unknown fields are rejected and records are frozen."""
    with pytest.raises(pydantic.ValidationError, match="turn"):
        UsageRecord(wire_format="anthropic", turn="5")  # type: ignore[arg-type]
    with pytest.raises(pydantic.ValidationError, match="api_key"):
        UsageRecord(wire_format="anthropic", api_key="x")  # type: ignore[call-arg]
    record = UsageRecord(wire_format="anthropic")
    with pytest.raises(pydantic.ValidationError):
        record.turn = 3


def test_literals_are_enforced() -> None:
    """Unknown wire formats and verdicts are rejected; every documented one is accepted."""
    # one list: the parsers', and the proxy's "unknown" for requests it did not analyse
    assert set(typing.get_args(WireFormat)) == {*WIRE_FORMATS, UNANALYSED}
    for wire in typing.get_args(WireFormat):
        assert UsageRecord(wire_format=wire).wire_format == wire
    for verdict in (
        "cold",
        "hit",
        "client_mutation",
        "below_minimum",
        "ttl_expired",
        "provider_miss",
        "unknown",
    ):
        rec = UsageRecord(wire_format="gemini", verdict=verdict)
        assert rec.verdict == verdict
    with pytest.raises(pydantic.ValidationError):
        UsageRecord(wire_format="cohere")  # type: ignore[arg-type]
    with pytest.raises(pydantic.ValidationError):
        UsageRecord(wire_format="anthropic", verdict="miss")  # type: ignore[arg-type]


def test_bounds_on_counts_and_timings() -> None:
    """Our own counts and timings cannot be negative or NaN; provider usage is kept as reported."""
    with pytest.raises(pydantic.ValidationError, match="lcp_bytes"):
        UsageRecord(wire_format="anthropic", lcp_bytes=-1)
    with pytest.raises(pydantic.ValidationError, match="latency_ms"):
        UsageRecord(wire_format="anthropic", latency_ms=float("nan"))
    with pytest.raises(pydantic.ValidationError, match="status_code"):
        UsageRecord(wire_format="anthropic", status_code=42)
    # An inconsistent provider report (negative remainder) is stored and flagged, not clamped.
    record = UsageRecord(
        wire_format="openai-chat",
        input_tokens_total=10,
        cache_read_tokens=12,
        uncached_tokens=-2,
        usage_inconsistent=True,
    )
    assert record.uncached_tokens == -2 and record.usage_inconsistent


def test_json_fields_must_be_canonical_json() -> None:
    """NaN inside usage_raw is rejected with the JSON pointer of the offending value."""
    with pytest.raises(pydantic.ValidationError, match=r"/usage/cached.*canonical-nan"):
        UsageRecord(wire_format="anthropic", usage_raw={"usage": {"cached": float("nan")}})


def test_json_line_round_trip() -> None:
    """to_json writes one canonical line (sorted keys, Z time) and from_json restores it exactly."""
    record = UsageRecord(
        wire_format="anthropic",
        ts_utc=datetime(2026, 5, 4, 3, 2, 1, 123456, tzinfo=UTC),
        session_id="conv-1",
        turn=2,
        lineage="sp1:abc",
        input_tokens_total=1200,
        uncached_tokens=100,
        cache_read_tokens=1000,
        cache_write_tokens=100,
        cache_write_5m_tokens=100,
        cache_write_1h_tokens=0,
        output_tokens=50,
        usage_raw={"input_tokens": 100, "cache_read_input_tokens": 1000},
        verdict="client_mutation",
        verdict_detail={"segment": "system[0]", "path": "/system/0/text", "cause": "volatile"},
        latency_ms=812.5,
        ttft_ms=120,
        status_code=200,
        content="héllo",
    )
    line = record.to_json()
    assert b"\n" not in line
    assert line.startswith(b'{"cache_read_tokens":1000,')
    assert b'"ts_utc":"2026-05-04T03:02:01.123456Z"' in line
    assert "héllo".encode() in line
    again = UsageRecord.from_json(line)
    assert again == record
    assert again.ttft_ms == 120.0


def test_redact_removes_known_secrets_and_their_fragments() -> None:
    """A known secret with no key shape is removed whole and, in provider text, as any run of
    8+ of its characters; caller text keeps fragments (a weak key's word may be ordinary),
    short secrets are ignored, and key patterns still apply."""
    key = "tenant42-secret-token-ABCDEF123456"
    text = f"bad token {key}; again {key[:20]}...; tail {key[-9:]}"
    assert redact(text, secrets=[key]) == (
        "bad token [REDACTED]; again [REDACTED]...; tail [REDACTED]")
    assert redact(text, secrets=[key], fragments=False) == (
        f"bad token [REDACTED]; again {key[:20]}...; tail {key[-9:]}")
    assert redact({"error": [f"x {key}"]}, secrets=[key]) == {"error": ["x [REDACTED]"]}
    assert redact("kkk and k", secrets=["k"]) == "kkk and k"
    assert redact("REDACTED REDACTED", secrets=["REDACTEDxyz"]) == "[REDACTED] [REDACTED]"
    other = "sk-ant-api03-LEAKYLEAKYLEAKY1234"
    assert redact(f"<p>{other}</p>", secrets=["sk-ant-api03-REALKEYREALKEY000"]) == (
        "<p>[REDACTED]</p>")


def test_secrets_in_headers_reads_credential_headers_only() -> None:
    """Bearer tokens (scheme dropped), x-api-key and api-key values of 8+ characters are
    secrets; other headers and short values are not."""
    headers = {"Authorization": "Bearer tenant42-secret-token", "x-api-key": "sk-ant-xyz12345",
               "api-key": "azure-key-123", "content-type": "application/json",
               "x-goog-api-key": "short"}
    assert set(secrets_in_headers(headers)) == {
        "tenant42-secret-token", "sk-ant-xyz12345", "azure-key-123"}
    assert secrets_in_headers(None) == ()
