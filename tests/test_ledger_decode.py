"""The ledger's lean row decoder (`_ledger/_schema.py` `_trusted`, issue 30): a row of the
types `to_row` writes decodes to the same record as pydantic's validation (`validated_row`),
fields set included; any other row goes to validation, so `from_row` gives the same record or
raises the same error, on the demo ledgers, on stored records of every field, and on rows with
any column replaced by a value of another type or range (hypothesis)."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from stableprompt import UsageRecord
from stableprompt._ledger._schema import (
    COLUMNS,
    SELECT_COLUMNS,
    _trusted,
    from_row,
    to_row,
    validated_row,
)


def _same(a: UsageRecord, b: UsageRecord) -> None:
    assert a == b
    assert a.model_fields_set == b.model_fields_set
    assert list(a.__dict__) == list(b.__dict__)
    assert repr(a) == repr(b)
    assert a.model_dump_json() == b.model_dump_json()
    assert a.model_dump() == b.model_dump()


def _outcome(row: tuple[Any, ...]) -> tuple[str, Any]:
    try:
        return "ok", validated_row(row)
    except ValidationError as exc:
        return "error", [(e["loc"], e["type"]) for e in exc.errors()]
    except Exception as exc:  # a value from_row cannot even convert (a bad timestamp)
        return "raised", type(exc)


def _check(row: tuple[Any, ...]) -> None:
    kind, expected = _outcome(row)
    fast = _trusted(row)
    if kind != "ok":
        assert fast is None
        try:
            from_row(row)
        except ValidationError as exc:
            assert kind == "error"
            assert [(e["loc"], e["type"]) for e in exc.errors()] == expected
        except Exception as exc:
            assert (kind, type(exc)) == ("raised", expected)
        else:
            pytest.fail("from_row decoded a row validation refuses")
        return
    if fast is not None:
        _same(fast, expected)
    if row[0] is None or row[1] is None:  # validation draws a fresh id / now for a NULL
        assert fast is None
        fixed = {"record_id": "x", "ts_utc": datetime(2026, 1, 1, tzinfo=UTC)}
        assert from_row(row).model_copy(update=fixed) == expected.model_copy(update=fixed)
        return
    _same(from_row(row), expected)


FULL = UsageRecord(
    record_id="r1", ts_utc=datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC),
    session_id="s", turn=3, scenario="sc", wire_format="anthropic", provider="anthropic",
    model="claude-sonnet-4-5", lineage="L", request_fingerprint="sp2:f",
    predecessor_id="r0", lcp_bytes=10, lcp_tokens=4, request_tokens=5000,
    predicted_cache_read_tokens=4000, input_tokens_total=5000, uncached_tokens=10,
    cache_read_tokens=4000, cache_write_tokens=990, cache_write_5m_tokens=990,
    cache_write_1h_tokens=0, output_tokens=7, usage_inconsistent=True,
    usage_raw={"input_tokens": 10, "server_tool_use": {"web_search_requests": 2},
               "ratio": 0.5, "nested": [None, True, "x"]},
    verdict="client_mutation", verdict_detail={"segment": "tools", "lost_tokens": 12},
    latency_ms=12.5, ttft_ms=3.0, status_code=200, error_class="ProviderHTTPError",
    diagnostics={"a": {"b": [1, 2]}}, response_id="msg_1", content='{"model": "m"}',
    request_headers={"anthropic-version": "2023-06-01"})
MINIMAL = UsageRecord(record_id="r2", ts_utc=datetime(2026, 3, 1, tzinfo=UTC),
                      wire_format="openai-chat")


def test_full_and_minimal_records_round_trip_through_the_lean_decoder() -> None:
    """Records with every field set and with only the required ones decode without
    validation to records equal to the validated ones (fields set included)."""
    for record in (FULL, MINIMAL):
        row = to_row(record)
        fast = _trusted(row)
        assert fast is not None
        _same(fast, validated_row(row))
        assert fast == record


def test_demo_ledger_rows_all_take_the_lean_path_with_the_same_records(
        tmp_path: Path) -> None:
    """Every row the offline demo writes (Anthropic and OpenAI) takes the lean path and
    decodes to the validated record."""
    from stableprompt.demo import run_demo, synthetic_workload

    workload = synthetic_workload()
    count = 0
    for provider in ("anthropic", "openai"):
        path = tmp_path / f"{provider}.db"
        run_demo(workload, provider=provider, ledger_path=path)
        conn = sqlite3.connect(path)
        rows = conn.execute(f"SELECT {SELECT_COLUMNS} FROM calls").fetchall()
        conn.close()
        for row in rows:
            fast = _trusted(row)
            assert fast is not None, row[0]
            _same(fast, validated_row(row))
        count += len(rows)
    assert count > 50


BASE = to_row(FULL)
_NAMES = list(COLUMNS)

_values = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=140),
    st.sampled_from(["", "hit", "cold", "anthropic", "unknown", "{}", "[]", "null", "{",
                     '{"a": NaN}', '{"a": 1}', '{"a": "b"}', '{"a": {"b": 1}}',
                     "[" * 300 + "]" * 300, '{"a":' + "[" * 300 + "]" * 300 + "}",
                     '{"a":' + "[" * 100 + "]" * 100 + "}", '{"a": 18446744073709551616}',
                     '{"k": "\\ud800"}', "2026-03-01T00:00:00", "2026-03-01T00:00:00Z",
                     "2026-03-01T05:00:00+05:00", "not a time", "x" * 129, "x" * 128,
                     "-0.0"]),
    st.sampled_from([0, -1, 1, 99, 100, 599, 600, 0.0, -0.0, -1.0, 1.5, 2**63]))


@settings(max_examples=600, deadline=None)
@given(changes=st.dictionaries(st.sampled_from(_NAMES), _values, max_size=4),
       base=st.sampled_from([BASE, to_row(MINIMAL)]))
def test_any_row_decodes_as_validation_decides(changes: dict[str, Any],
                                               base: tuple[Any, ...]) -> None:
    """A row with any columns replaced (wrong types, negative counts, out-of-range status,
    NaN, naive or offset timestamps, JSON that is not an object, too deep, or a big integer)
    decodes to the validated record or raises the validation's error: never another record."""
    row = tuple(changes.get(name, value) for name, value in zip(_NAMES, base, strict=True))
    _check(row)


def test_rows_of_another_length_go_to_validation() -> None:
    """A row with a column too few is not decoded by the lean path (validation raises)."""
    assert _trusted(BASE[:-1]) is None
    with pytest.raises(ValueError):
        from_row(BASE[:-1])


def test_deep_json_is_refused_like_validation() -> None:
    """A ``verdict_detail`` nested deeper than canonical JSON allows is refused by both
    paths (the lean one checks long JSON text with ``canonical_json``)."""
    deep = json.dumps({"a": [[]] and json.loads("[" * 300 + "]" * 300)})
    row = tuple(deep if name == "verdict_detail" else v
                for name, v in zip(_NAMES, BASE, strict=True))
    assert _trusted(row) is None
    with pytest.raises(ValidationError):
        from_row(row)


def test_a_corrupt_row_does_not_hide_its_lineage_from_a_new_recorder(tmp_path: Path) -> None:
    """A recorder started on an existing ledger (a proxy restarted, another process) seeds a
    lineage from its recent rows: one hand-edited row that does not decode (a malformed
    ``segment_digests``) was a ValidationError that dropped every row of the lineage, so the
    next call had no predecessor; it is skipped and the latest good row is the predecessor."""
    import httpx2

    from stableprompt import Ledger
    from stableprompt._recording._recorder import Recorder
    from stableprompt._recording._transport import RecordingTransport
    from test_transport import FakeProvider

    path = tmp_path / "l.db"
    system = [{"type": "text", "text": "rules " * 900, "cache_control": {"type": "ephemeral"}}]
    messages: list[dict[str, Any]] = []

    def send(recorder: Recorder, turn: int) -> None:
        messages.append({"role": "user", "content": f"turn {turn}"})
        body = {"model": "claude-sonnet-4-5", "max_tokens": 8, "system": system,
                "messages": messages, "metadata": {"user_id": "s1"}}
        client = httpx2.Client(transport=RecordingTransport(
            httpx2.MockTransport(FakeProvider()), recorder=recorder))
        client.post("http://provider.test/v1/messages", content=json.dumps(body),
                    headers={"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"})
        messages.append({"role": "assistant", "content": f"answer {turn}"})

    with Ledger(path) as ledger:
        first = Recorder(ledger=ledger, tokenizer="bytes/4")
        send(first, 1)
        send(first, 2)
        one, two = first.records
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE calls SET segment_digests = 'garbage' WHERE record_id = ?",
                     (one.record_id,))
    conn.close()
    with Ledger(path) as ledger:
        later = Recorder(ledger=ledger, tokenizer="bytes/4")
        send(later, 3)
        (three,) = later.records
    assert three.lineage == two.lineage
    assert three.predecessor_id == two.record_id
    assert three.turn == 3  # the session's turns are counted past the corrupt row too


def test_an_unreadable_outline_keeps_the_row_and_its_money(tmp_path: Path) -> None:
    """A hand-edited ``segment_digests`` (not format 1) is read as unknown with a note: the
    row keeps its usage, so the report still counts its tokens and money (it used to skip the
    whole row as corrupt)."""
    from datetime import UTC, datetime

    from stableprompt import Ledger, UsageRecord, summarize
    from stableprompt._ledger._schema import OUTLINE_UNREADABLE

    path = tmp_path / "l.db"
    row = UsageRecord(record_id="r1", ts_utc=datetime(2026, 12, 1, tzinfo=UTC),
                      wire_format="anthropic", provider="anthropic", model="claude-sonnet-4-5",
                      input_tokens_total=5000, uncached_tokens=1000, cache_read_tokens=4000,
                      cache_write_tokens=0, output_tokens=10, verdict="hit",
                      verdict_detail={"turn_boundary": "cross"})
    with Ledger(path) as ledger:
        ledger.write(row)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE calls SET segment_digests = 'garbage' WHERE record_id = 'r1'")
    conn.close()
    with Ledger(path, read_only=True) as ledger:
        (read,) = ledger.records()
    assert read.segment_digests is None and read.cache_read_tokens == 4000
    assert "not in a known format" in str(read.verdict_detail[OUTLINE_UNREADABLE])
    assert read.verdict_detail["turn_boundary"] == "cross"
    report, expected = summarize([read]), summarize([row])
    assert report.cost_usd is not None and report.cost_usd == expected.cost_usd
