"""Tests for the report's numbers on hand-built ledgers (`_report._summary`): the ceiling across
sessions, the in-process summary (``summarize``, ``Recorder.summary``), write prices by TTL,
and bad ledgers (corrupt rows, schema versions merged)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from stableprompt import Ledger, UsageRecord
from stableprompt._cli import main
from stableprompt._report._command import read_ledger, summarize

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _rec(t: float, *, session: str, total: int, read: int = 0, write: int = 0,
         verdict: str = "hit", predecessor: str | None = None, lcp: int | None = None,
         record_id: str | None = None, model: str = "claude-sonnet-4-5",
         provider: str = "anthropic", write_1h: int | None = None,
         detail: dict[str, Any] | None = None) -> UsageRecord:
    extra: dict[str, Any] = {} if record_id is None else {"record_id": record_id}
    full_detail: dict[str, Any] = dict(detail or {})
    if lcp is not None:
        full_detail["lcp_tokens_scaled"] = lcp
    return UsageRecord(
        ts_utc=T0 + timedelta(seconds=t), scenario="s", session_id=session,
        wire_format="anthropic" if provider == "anthropic" else "openai-chat",
        provider=provider, model=model, input_tokens_total=total, cache_read_tokens=read,
        cache_write_tokens=write, cache_write_1h_tokens=write_1h,
        uncached_tokens=total - read - write, output_tokens=10, predecessor_id=predecessor,
        verdict=verdict,  # type: ignore[arg-type]
        verdict_detail=full_detail, **extra)


def _shared_head(gap_s: float) -> list[UsageRecord]:
    """Session a writes a 3,000-token head; session b starts ``gap_s`` later on the same head
    (its predecessor is a's call, 3,000 tokens shared) and reads it."""
    return [
        _rec(0, session="a", total=3000, write=3000, verdict="cold", record_id="a1"),
        _rec(6, session="a", total=3200, read=3000, write=200, record_id="a2",
             predecessor="a1", lcp=3000),
        _rec(6 + gap_s, session="b", total=3100, read=3000, write=100, record_id="b1",
             predecessor="a2", lcp=3000),
        _rec(12 + gap_s, session="b", total=3300, read=3100, write=200, record_id="b2",
             predecessor="b1", lcp=3100),
    ]


# --------------------------------------------------------------------------- ceiling


def test_cross_session_reads_are_within_the_ceiling() -> None:
    """Session 2 reading session 1's head gets that shared prefix as its first call's
    ceiling, so of-ceiling stays at or below 100% (it was 3000/... > 100% per session)."""
    report = summarize(_shared_head(gap_s=10), price=False)
    assert [row.ceiling_tokens for row in report.calls] == [0, 3000, 3000, 3100]
    t = report.overall
    assert t.cache_read_tokens == 9100 and t.ceiling_tokens == 9100
    assert t.of_ceiling == pytest.approx(1.0)
    for session in report.scenarios["s"].sessions.values():
        assert session.of_ceiling is not None and session.of_ceiling <= 1.0


def test_no_cross_session_credit_after_the_ttl() -> None:
    """A call sent after the shared entry's TTL (5 minutes by default, or the request's
    ``ttl_s``) gets no cross-session ceiling; with a 1-hour TTL the same gap is credited."""
    late = summarize(_shared_head(gap_s=301), price=False)
    assert late.calls[2].ceiling_tokens == 0
    in_time = summarize(_shared_head(gap_s=300), price=False)
    assert in_time.calls[2].ceiling_tokens == 3000
    hour = _shared_head(gap_s=1800)
    hour[2] = hour[2].model_copy(update={"verdict_detail": {**hour[2].verdict_detail,
                                                            "ttl_s": 3600}})
    assert summarize(hour, price=False).calls[2].ceiling_tokens == 3000


def test_same_session_ceiling_needs_the_ttl_too() -> None:
    """The session's own previous request bounds a call only while its entry can live: a
    gap above the TTL leaves no ceiling (ttl_expired loses nothing an append-only harness
    could have read at the same times)."""
    records = [_rec(0, session="a", total=3000, write=3000, verdict="cold", record_id="a1"),
               _rec(400, session="a", total=3100, write=3100, verdict="ttl_expired",
                    predecessor="a1", lcp=3000)]
    assert [r.ceiling_tokens for r in summarize(records, price=False).calls] == [0, 0]


def test_cross_session_credit_is_the_shared_prefix_only() -> None:
    """Another session's call credits only the prefix the two share (capped at both sizes),
    never its whole size; a predecessor outside the selection credits nothing."""
    records = [_rec(0, session="a", total=8000, write=8000, verdict="cold", record_id="a1"),
               _rec(6, session="b", total=5000, read=2048, write=2952, record_id="b1",
                    predecessor="a1", lcp=2100)]
    assert summarize(records, price=False).calls[1].ceiling_tokens == 2100
    alone = summarize(records[1:], price=False)
    assert alone.calls[0].ceiling_tokens == 0


# --------------------------------------------------------------------------- in process


@pytest.fixture(scope="module")
def demo_ledgers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, Path]]:
    """The synthetic demo, kept as a ledger, on both emulated wire formats (Anthropic
    Messages, OpenAI Chat Completions)."""
    from stableprompt.demo import run_demo, synthetic_workload

    out = {}
    for provider in ("anthropic", "openai"):
        path = tmp_path_factory.mktemp(provider) / "demo.db"
        out[provider] = run_demo(synthetic_workload(), provider=provider, ledger_path=path), path
    return out


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_summarize_equals_report_json(provider: str, demo_ledgers: dict[str, tuple[Any, Path]],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The public summarize(records) gives the numbers of `stableprompt report --json` on the
    same ledger: its JSON is that output without the command's ledger, meta and notes."""
    import stableprompt

    _, path = demo_ledgers[provider]
    summary = stableprompt.summarize(read_ledger(path))
    assert isinstance(summary, stableprompt.Summary)
    assert main(["report", str(path), "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    for key in ("ledger", "meta", "notes"):
        cli.pop(key)
    assert json.loads(json.dumps(summary.to_json())) == cli
    assert summary.hit_rate == summary.overall.hit_rate == pytest.approx(
        cli["overall"]["hit_rate"], abs=1e-6)
    assert summary.of_ceiling is not None and summary.of_ceiling <= 1.0


def _call(recorder: Any, step: int, *, read: int, write: int) -> None:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 5,
            "system": [{"type": "text", "text": "You are careful. " * 400,
                        "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": f"q{step}"}]}
    pending = recorder.start("/v1/messages", {}, json.dumps(body).encode(),
                             host="api.anthropic.com")
    assert pending is not None
    response = {"id": f"m{step}", "type": "message", "role": "assistant", "content": [],
                "usage": {"input_tokens": 20, "output_tokens": 3,
                          "cache_read_input_tokens": read, "cache_creation_input_tokens": write}}
    assert recorder.finish(pending, status_code=200,
                           body=json.dumps(response).encode()) is not None


def test_recorder_summary_is_summarize_of_its_records(tmp_path: Path) -> None:
    """Recorder.summary() summarizes the calls this recorder recorded, the same numbers as
    summarize on its ledger rows, so a harness can assert its hit rate in process."""
    from stableprompt import Recorder, Summary

    with Ledger(tmp_path / "c.db") as ledger:
        recorder = Recorder(ledger, tokenizer="bytes/4", session_id="s1", scenario="harness")
        _call(recorder, 0, read=0, write=1700)
        _call(recorder, 1, read=1700, write=0)
        _call(recorder, 2, read=1700, write=0)
        summary = recorder.summary()
        stored = summarize(ledger.records())
    assert isinstance(summary, Summary)
    assert summary.to_json() == stored.to_json()
    assert summary.overall.calls == 3 and summary.overall.verdicts["cold"] == 1
    assert summary.hit_rate == pytest.approx(3400 / (3 * 1720))
    assert summary.cost_usd is not None and summary.cost_usd > 0
    assert recorder.summary(price=False).cost_usd is None
    assert Recorder(None).summary().hit_rate is None
