"""Keep-alive calls counted and priced for the report (``_accounting._keepalive``), on
hand-built rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from stableprompt import UsageRecord
from stableprompt._accounting._keepalive import is_keepalive, keepalive_totals

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def row(t: float, *, read: int, write: int = 0, total: int | None = None, output: int = 1,
        session: str = "a", detail: dict[str, Any] | None = None, status: int = 200,
        model: str = "claude-sonnet-4-5") -> UsageRecord:
    total = read + write if total is None else total
    return UsageRecord(
        ts_utc=T0 + timedelta(seconds=t), session_id=session, wire_format="anthropic",
        provider="anthropic", model=model, input_tokens_total=total,
        cache_read_tokens=read, cache_write_tokens=write, uncached_tokens=total - read - write,
        output_tokens=output, verdict="hit", status_code=status,
        verdict_detail=dict(detail or {}))


PING = {"keepalive": True, "keepalive_ping": 1}


def test_pings_are_counted_apart_from_the_real_calls() -> None:
    """Three pings in two sessions among real calls: 3 calls, 2 sessions, their tokens only;
    a row whose ``keepalive`` is not ``True`` is not a ping; a failed ping is counted and
    named; without pricing ``usd`` is ``None``."""
    records = [row(0, read=0, write=10_000, output=300),
               row(270, read=10_000, detail=PING),
               row(540, read=10_000, detail={**PING, "keepalive_ping": 2}),
               row(600, read=20_000, output=500, session="b"),
               row(870, read=20_000, session="b", detail=PING),
               row(900, read=5, detail={"keepalive": "yes"}),
               row(910, read=0, total=0, output=0, session="b", status=529, detail=PING)]
    assert [is_keepalive(r) for r in records] == [False, True, True, False, True, False, True]
    totals = keepalive_totals(records, price=False)
    assert totals.to_json() == {
        "calls": 4, "sessions": 2, "input_tokens": 40_000, "cache_read_tokens": 40_000,
        "cache_write_tokens": 0, "output_tokens": 3, "usd": None, "unpriced": 0,
        "failed": 1, "notes": []}
    assert keepalive_totals([records[0]]).to_json()["calls"] == 0


def test_pings_are_priced_at_their_reads_and_one_output_token() -> None:
    """Claude Sonnet 4.5 (genai-prices: $0.30/M cache read, $15/M output below 200k input):
    two pings reading 10,000 tokens each cost 2 x (0.003 + 0.000015) = $0.00603; a ping of
    an unknown model is counted as unpriced and the total is a lower bound."""
    pytest.importorskip("genai_prices")
    records = [row(270, read=10_000, detail=PING), row(540, read=10_000, detail=PING)]
    assert keepalive_totals(records).usd == pytest.approx(0.00603)
    unknown = keepalive_totals([*records, row(600, read=10, detail=PING, model="no-such")])
    assert unknown.usd == pytest.approx(0.00603) and unknown.unpriced == 1
    assert any("no-such" in note for note in unknown.notes)
