"""Tests for the report's numbers on hand-built ledgers (`_accounting._summary`): the ceiling across
sessions, the in-process summary (``summarize``, ``Recorder.summary``), write prices by TTL,
and bad ledgers (corrupt rows, schema versions merged)."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conftest import record_anthropic_call
from old_ledgers import downgrade
from stableprompt import Ledger, LedgerError, UsageRecord
from stableprompt._cli import main
from stableprompt._ledger._schema import SCHEMA_VERSION
from stableprompt._report._command import CorruptRow, read_ledger, summarize

T0 = datetime(2026, 1, 1, tzinfo=UTC)


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
    late_calls = _shared_head(gap_s=301)
    late_calls[2] = _rec(6 + 301, session="b", total=3100, write=3100, record_id="b1",
                         predecessor="a2", lcp=3000)  # the entry expired: nothing read
    late = summarize(late_calls, price=False)
    assert late.calls[2].ceiling_tokens == 0 and late.reads_beyond_ledger == 0
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
    never its whole size; a predecessor outside the selection credits nothing, but what the
    call read is proof of a cached prefix: the ceiling is the read, counted beyond the
    ledger."""
    records = [_rec(0, session="a", total=8000, write=8000, verdict="cold", record_id="a1"),
               _rec(6, session="b", total=5000, read=2048, write=2952, record_id="b1",
                    predecessor="a1", lcp=2100)]
    assert summarize(records, price=False).calls[1].ceiling_tokens == 2100
    alone = summarize(records[1:], price=False)
    assert alone.calls[0].ceiling_tokens == 2048 and alone.reads_beyond_ledger == 1


# --------------------------------------------------------------------------- in process


@pytest.fixture(scope="module")
def demo_ledgers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, Path]]:
    """The synthetic demo, kept as a ledger, in the three wire formats the emulator speaks:
    Anthropic Messages, OpenAI Chat Completions, OpenAI Responses."""
    from stableprompt.demo import run_demo, synthetic_workload

    out = {}
    for name, provider, wire in (("anthropic", "anthropic", None), ("openai", "openai", None),
                                 ("responses", "openai", "openai-responses")):
        path = tmp_path_factory.mktemp(name) / "demo.db"
        out[name] = run_demo(synthetic_workload(), provider=provider, ledger_path=path,
                             wire=wire), path
    return out


@pytest.mark.parametrize("provider", ["anthropic", "openai", "responses"])
def test_summarize_equals_report_json(provider: str, demo_ledgers: dict[str, tuple[Any, Path]],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The public summarize(records) gives the numbers of `stableprompt report --json` on the
    same ledger: its JSON is that output without the command's ledger, meta and notes, and the
    keys saying which page of calls the streaming command listed (``calls_page``,
    ``cliffs_total``; the page holds every call here)."""
    import stableprompt

    _, path = demo_ledgers[provider]
    summary = stableprompt.summarize(read_ledger(path))
    assert isinstance(summary, stableprompt.Summary)
    assert main(["report", str(path), "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    for key in ("ledger", "meta", "notes"):
        cli.pop(key)
    assert cli.pop("calls_page")["total"] == len(summary.calls)
    assert cli.pop("cliffs_total") == len(summary.cliffs())
    assert json.loads(json.dumps(summary.to_json())) == cli
    assert summary.hit_rate == summary.overall.hit_rate == pytest.approx(
        cli["overall"]["hit_rate"], abs=1e-6)
    assert summary.of_ceiling is not None and summary.of_ceiling <= 1.0


def test_recorder_summary_is_summarize_of_its_records(tmp_path: Path) -> None:
    """Recorder.summary() summarizes the calls this recorder recorded, the same numbers as
    summarize on its ledger rows, so a harness can assert its hit rate in process."""
    from stableprompt import Recorder, Summary

    with Ledger(tmp_path / "c.db") as ledger:
        recorder = Recorder(ledger, tokenizer="bytes/4", session_id="s1", scenario="harness")
        record_anthropic_call(recorder, 0, read=0, write=1700)
        record_anthropic_call(recorder, 1, read=1700, write=0)
        record_anthropic_call(recorder, 2, read=1700, write=0)
        summary = recorder.summary()
        stored = summarize(ledger.records())
    assert isinstance(summary, Summary)
    assert summary.to_json() == stored.to_json()
    assert summary.overall.calls == 3 and summary.overall.verdicts["cold"] == 1
    assert summary.hit_rate == pytest.approx(3400 / (3 * 1720))
    assert summary.cost_usd is not None and summary.cost_usd > 0
    assert recorder.summary(price=False).cost_usd is None
    assert Recorder(None).summary().hit_rate is None


# --------------------------------------------------------------------------- prices


def test_one_hour_writes_cost_twice_and_five_minute_writes_one_and_a_quarter() -> None:
    """Anthropic cache writes are priced by TTL through genai-prices: 5-minute writes at 1.25x
    the base input price, 1-hour writes at 2x, reads at 0.1x (claude-sonnet-4-5: $3 per
    million input tokens, $15 per million output tokens; below the 200k-token long-context tier)."""
    base = 3.0 / 1e6
    records = [
        _rec(0, session="a", total=100_000, write=100_000, verdict="cold"),  # all 5m
        _rec(6, session="b", total=100_000, write=100_000, write_1h=100_000,
             verdict="cold"),
        _rec(12, session="c", total=100_000, read=100_000, verdict="hit"),
        _rec(18, session="d", total=100_000, verdict="cold"),  # uncached
    ]
    rows = summarize(records).calls
    output = 10 * 15.0 / 1e6
    assert rows[0].cost_usd == pytest.approx(1e5 * base * 1.25 + output)
    assert rows[1].cost_usd == pytest.approx(1e5 * base * 2.0 + output)
    assert rows[2].cost_usd == pytest.approx(1e5 * base * 0.1 + output)
    assert rows[3].cost_usd == pytest.approx(1e5 * base + output)
    assert all(r.cost_uncached_usd == pytest.approx(1e5 * base + output) for r in rows)


# --------------------------------------------------------------------------- bad input


def _write(path: Path, records: list[UsageRecord]) -> None:
    with Ledger(path) as ledger:
        for record in records:
            assert ledger.write(record) == "committed"


def test_corrupt_rows_are_named_and_the_rest_reported(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Rows that no longer decode (a bad verdict, a naive timestamp, broken JSON) are skipped
    and named by their record id, in text and JSON; every other row is reported."""
    db = tmp_path / "c.db"
    _write(db, [_rec(i * 6, session="a", total=3000 + i, read=3000 if i else 0,
                     write=0 if i else 3000, record_id=f"r{i}") for i in range(5)])
    conn = sqlite3.connect(db)
    conn.execute("UPDATE calls SET verdict = 'bogus' WHERE record_id = 'r1'")
    conn.execute("UPDATE calls SET ts_utc = '2026-01-01T00:00:12' WHERE record_id = 'r2'")
    conn.execute("UPDATE calls SET verdict_detail = '{not json' WHERE record_id = 'r3'")
    conn.commit()
    conn.close()
    assert main(["report", str(db)]) == 0
    out = capsys.readouterr().out
    assert "3 corrupt rows skipped" in out
    for bad in ("r1", "r2", "r3"):
        assert f"skipped corrupt row '{bad}' of {db}" in out
    assert main(["report", str(db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [row["id"] for row in data["corrupt_rows"]] == ["r1", "r2", "r3"]
    verdict_error = data["corrupt_rows"][0]["error"]
    assert verdict_error.startswith("/verdict: ") and "pydantic.dev" not in out + verdict_error
    assert data["overall"]["calls"] == 2 and data["records"] == 2
    assert [c["id"] for c in data["calls"]] == ["r0", "r4"]
    with pytest.raises(LedgerError, match="bogus"):  # nowhere to put it: raises
        read_ledger(db)
    skipped: list[CorruptRow] = []
    assert [r.record_id for r in read_ledger(db, skipped)] == ["r0", "r4"]
    assert [row.row_id for row in skipped] == ["r1", "r2", "r3"]


def test_an_empty_ledger_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ledger with no records prints that it has none (exit 0) and JSON with zero calls and
    unknown rates, never 0% ones."""
    db = tmp_path / "empty.db"
    Ledger(db).close()
    assert main(["report", str(db)]) == 0
    assert "the ledger has no records" in capsys.readouterr().out
    assert main(["report", str(db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["records"] == 0 and data["overall"]["calls"] == 0
    assert data["overall"]["hit_rate"] is None and data["overall"]["ceiling"] is None


def test_ledgers_of_different_schema_versions_merge(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A schema v1 ledger (no meta table) and a current one merge into one report, in time
    order, with the cross-session ceiling across them; neither file is migrated."""
    old, new = tmp_path / "v1.db", tmp_path / "v2.db"
    records = _shared_head(gap_s=10)
    _write(old, records[:2])
    downgrade(old, 1)
    _write(new, records[2:])
    versions = []
    for path in (old, new):
        conn = sqlite3.connect(path)
        versions.append(conn.execute("PRAGMA user_version").fetchone()[0])
        conn.close()
    assert versions == [1, SCHEMA_VERSION]
    before = old.read_bytes()
    assert main(["report", str(new), str(old), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [c["id"] for c in data["calls"]] == ["a1", "a2", "b1", "b2"]
    assert [entry["records"] for entry in data["ledgers"]] == [2, 2]
    assert data["overall"]["of_ceiling"] == 1.0
    assert old.read_bytes() == before


# --------------------------------------------------------------------------- the demo ledger


@pytest.mark.parametrize(("name", "wire"), [("anthropic", "anthropic"),
                                          ("openai", "openai-chat"),
                                          ("responses", "openai-responses")])
def test_demo_ledger_in_each_wire_format(name: str, wire: str,
                                         demo_ledgers: dict[str, tuple[Any, Path]]) -> None:
    """The demo ledger in each wire format: the report's totals equal the demo's, every
    client_mutation of clock-in-system is a volatile token in the system segment, and the
    intra/cross-turn split is there (tool-loop calls read more than first calls of a turn)."""
    result, path = demo_ledgers[name]
    report = summarize(read_ledger(path))
    assert {row.wire_format for row in report.calls} == {wire}
    for name, scenario in result.report.scenarios.items():
        assert report.scenarios[name].totals.to_full_json() == scenario.totals.to_full_json()
    mutations = [r for r in report.calls
                 if r.scenario == "clock-in-system" and r.verdict == "client_mutation"]
    assert len(mutations) == 21
    assert {(r.cause, r.segment_kind) for r in mutations} == {("volatile-token", "system")}
    good = report.scenarios["stableprompt"].totals
    assert all(row.boundary in ("intra", "cross") for row in report.calls)
    assert good.intra_turn_hit_rate is not None and good.cross_turn_hit_rate is not None
    assert good.intra_turn_hit_rate > good.cross_turn_hit_rate


def test_inconsistent_only_shows_a_dash_with_a_note(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """When every call's usage is inconsistent the rates are unknown ("—", JSON null) with a
    note saying how many and why, never a summed 50,000%."""
    db = tmp_path / "c.db"
    _write(db, [_rec(i * 6, session="a", total=100, read=50_000, verdict="hit").model_copy(
        update={"usage_inconsistent": True}) for i in range(2)])
    assert main(["report", str(db)]) == 0
    out = capsys.readouterr().out
    assert "—" in out and "50000" not in out.replace(",", "")
    assert "2 of 2 calls excluded" in out and "2 with inconsistent usage" in out


def test_merged_ledgers_keep_each_providers_ceiling() -> None:
    """Ledgers from different providers that reuse session ids (the demo's) are merged
    without one provider's calls bounding another's: each call's ceiling is that of its own
    provider, model and wire format."""
    anthropic = [_rec(0, session="x", total=3000, write=3000, verdict="cold", record_id="a1"),
                 _rec(6, session="x", total=3200, read=3000, write=200, record_id="a2")]
    openai = [_rec(3, session="x", total=9000, write=0, verdict="cold", record_id="o1",
                   provider="openai", model="gpt-5.2"),
              _rec(9, session="x", total=9100, read=8960, write=0, record_id="o2",
                   provider="openai", model="gpt-5.2")]
    alone = {r.id: r.ceiling_tokens for part in (anthropic, openai)
             for r in summarize(part, price=False).calls}
    merged = summarize(sorted([*anthropic, *openai], key=lambda r: r.ts_utc), price=False)
    assert {r.id: r.ceiling_tokens for r in merged.calls} == alone
    assert merged.reads_beyond_ledger == 0


def test_lost_tokens_never_exceed_what_the_call_could_read() -> None:
    """A mutation's lost tokens are counted against the compared request, which can be
    longer (before a compaction): the report caps them at ``ceiling - read``."""
    records = [_rec(0, session="a", total=9000, write=9000, verdict="cold", record_id="a1"),
               _rec(6, session="a", total=5000, write=5000, verdict="client_mutation",
                    record_id="a2", predecessor="a1", lcp=0,
                    detail={"lost_tokens": 9000, "cause": "history-rewrite"})]
    row = summarize(records, price=False).calls[1]
    assert row.ceiling_tokens == 5000 and row.lost_tokens == 5000


def test_a_breakpoint_cache_without_breakpoints_names_its_loss() -> None:
    """Anthropic caches only at breakpoints: a long conversation sent without any is
    ``below_minimum`` with reason ``no-breakpoint`` for the recorder, and the report names
    ``no-breakpoint`` as its cause with the tokens its ceiling (the prefix it shares with
    the session's previous call) could have read, and the fix (it said ``below-minimum``
    with 0 lost, so the causes table was empty while `of ceiling` was 0%)."""
    records = [_rec(float(i), session="s", total=8_000 + 100 * i) for i in range(4)]
    records = [r.model_copy(update={"verdict": "below_minimum",
                                    "verdict_detail": {"reason": "no-breakpoint"}})
               for r in records]
    summary = summarize(records, price=False)
    causes = [c for c in summary.causes() if c.cause == "no-breakpoint"]
    assert len(causes) == 1 and causes[0].calls == 3  # the first call has nothing before it
    assert causes[0].lost_tokens == 8_000 + 8_100 + 8_200
    assert causes[0].fix is not None and "cache_control" in causes[0].fix
    assert summary.overall.lost_tokens == causes[0].lost_tokens
