"""Rollups (`_ledger/_rollups.py`, `_accounting/_rollups.py`, `report --rollups`) and
retention (`Ledger.prune`, `stableprompt ledger prune`): sums kept by the ledger's trigger in
the insert's own statement, counted once per record id (replays, concurrent writers, two
processes), built once from the rows of an older ledger, equal to the row-level report's token
sums and costs, and still there after the rows are pruned; on SQLite and PostgreSQL (skipped
with the reason where no server can start)."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from old_ledgers import downgrade
from stableprompt import Ledger, LedgerError, UsageRecord
from stableprompt._accounting._pricing import SERVER_TOOL_FEES
from stableprompt._accounting._rollups import RollupTotals, summarize_rollups
from stableprompt._accounting._summary import Summary, Totals, summarize_stream
from stableprompt._cli import main
from stableprompt._ledger import _rollups
from stableprompt._ledger._reads import rollup_rows
from stableprompt._ledger._rollups import PRUNED_BEFORE, ROLLUP_TABLE

T0 = datetime(2026, 3, 1, 10, 5, tzinfo=UTC)


def _record(i: int, **update: Any) -> UsageRecord:
    base = UsageRecord(
        record_id=f"r{i:05d}", ts_utc=T0 + timedelta(minutes=7 * i), session_id=f"s{i % 3}",
        turn=i, scenario=("alpha", "beta", None)[i % 3], wire_format="anthropic",
        provider="anthropic", model="claude-sonnet-4-5", input_tokens_total=5000 + i,
        cache_read_tokens=4000, cache_write_tokens=600 + i, cache_write_5m_tokens=600 + i,
        cache_write_1h_tokens=0, uncached_tokens=400, output_tokens=30 + i,
        predicted_cache_read_tokens=4000, verdict=("hit", "cold", "client_mutation")[i % 3])
    return base.model_copy(update=update)


def _mixed() -> list[UsageRecord]:
    """Calls of every kind the report tells apart: included, each exclusion, a failed call,
    1-hour writes, web searches, an unknown server tool, unknown output, an unknown model,
    a second provider, another day."""
    out = [_record(i) for i in range(30)]
    out += [
        _record(100, wire_format="unknown", input_tokens_total=None, cache_read_tokens=None,
                cache_write_tokens=None, uncached_tokens=None, output_tokens=None,
                verdict="unknown"),
        _record(101, input_tokens_total=None, cache_read_tokens=None, cache_write_tokens=None,
                uncached_tokens=None, output_tokens=None, verdict="unknown",
                error_class="ProviderHTTPError", status_code=529),
        _record(102, cache_read_tokens=None),
        _record(103, verdict_detail={"usage_suspect": True}),
        _record(104, usage_inconsistent=True),
        _record(105, cache_write_1h_tokens=500, cache_write_5m_tokens=100 + 105),
        _record(106, usage_raw={"server_tool_use": {"web_search_requests": 3,
                                                    "web_fetch_requests": 1}}),
        _record(107, usage_raw={"server_tool_use": {"code_execution_requests": 2}}),
        _record(108, usage_raw={"server_tool_use": {"web_search_requests": 2.0}}),
        _record(109, output_tokens=None),
        _record(110, model="no-such-model-xyz"),
        _record(111, provider="openai", model="gpt-5", wire_format="openai-chat",
                cache_write_tokens=0, cache_write_5m_tokens=None, cache_write_1h_tokens=None),
        _record(112, ts_utc=T0 + timedelta(days=2, hours=3)),
        _record(113, model=None),
        _record(114, cache_read_tokens=9000),  # does not add up: no price, included tokens
        _record(115, verdict_detail={"usage_suspect": 1}),  # not `true`: not suspect
    ]
    return out


def _write(ledger: Ledger, records: Iterable[UsageRecord]) -> None:
    for record in records:
        assert ledger.write(record) == "committed"


def _row_report(ledger: Ledger) -> Summary:
    return summarize_stream(ledger.iter_records())


_SAME = ("calls", "unanalysed", "unknown_usage", "unknown_reads", "suspect", "inconsistent",
         "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
         "priced_calls", "cost_unknown_calls")


def _assert_same(rollup: RollupTotals, rows: Totals) -> None:
    for name in _SAME:
        assert getattr(rollup, name) == getattr(rows, name), name
    assert rollup.verdicts == rows.verdicts
    assert rollup.hit_rate == rows.hit_rate
    if rows.cost_usd is None:
        assert rollup.cost_usd is None
    else:
        assert rollup.cost_usd == pytest.approx(rows.cost_usd, rel=1e-9, abs=1e-12)
        assert rollup.cost_uncached_usd == pytest.approx(rows.cost_uncached_usd, rel=1e-9)


def _by_scenario(rows: list[_rollups.RollupRow]) -> dict[str, RollupTotals]:
    out: dict[str, RollupTotals] = {}
    for (_, _, _, scenario), totals in summarize_rollups(rows).groups.items():
        into = out.setdefault(scenario or "(none)", RollupTotals())
        for name in _SAME[:-2]:
            setattr(into, name, getattr(into, name) + getattr(totals, name))
    return out


def _check_equal(ledger: Ledger) -> None:
    rows = rollup_rows(ledger)
    report = _row_report(ledger)
    _assert_same(summarize_rollups(rows).overall, report.overall)
    _assert_same(summarize_rollups(rows, bucket="hour").overall, report.overall)
    per = _by_scenario(rows)
    assert set(per) == set(report.scenarios)
    for name, scenario in report.scenarios.items():
        for field in _SAME[:-2]:
            assert getattr(per[name], field) == getattr(scenario.totals, field), (name, field)
    by_day = summarize_stream(ledger.iter_records(), by="day", price=False).group_by("day")
    days: dict[str, int] = {}
    for (period, *_), totals in summarize_rollups(rows).groups.items():
        days[period] = days.get(period, 0) + totals.input_tokens
    assert days == {day: t.input_tokens for day, t in by_day.items()}


def test_server_tool_keys_match_the_fee_table() -> None:
    """The rollup's known server-tool keys are the pricing table's (a layer below it)."""
    assert set(_rollups._FEE_KEYS) == set(SERVER_TOOL_FEES)


def test_rollups_equal_the_row_report_on_every_kind_of_call(tmp_path: Path) -> None:
    """Token sums, exclusions, verdicts, hit rates and costs from the rollups equal the
    row-level report's over the same rows, overall, per scenario and per day."""
    with Ledger(tmp_path / "l.db") as ledger:
        _write(ledger, _mixed())
        _check_equal(ledger)
        summary = summarize_rollups(rollup_rows(ledger))
    overall = summary.overall
    assert overall.failed_calls == 1 and overall.unanalysed == 1
    assert overall.suspect == 1 and overall.inconsistent == 1 and overall.unknown_reads == 1
    assert overall.cache_write_1h_tokens == 500
    assert overall.cost_unknown_calls > 0  # unknown model, no model, partial, no usage


@pytest.mark.parametrize("provider", [0, 1], ids=["anthropic", "openai"])
def test_rollups_equal_the_row_report_on_the_demo_ledgers(demo_ledger_files: list[Path],
                                                          provider: int) -> None:
    """On the ledgers the offline demo writes, the rollups give the row report's numbers."""
    with Ledger(demo_ledger_files[provider], read_only=True) as ledger:
        _check_equal(ledger)


def test_a_replayed_or_rewritten_record_is_counted_once(tmp_path: Path) -> None:
    """Writing an id again, a spill replay and a batch import of stored ids add nothing."""
    records = _mixed()
    with Ledger(tmp_path / "l.db") as ledger:
        _write(ledger, records)
        before = rollup_rows(ledger)
        _write(ledger, records[:10])
        ledger._insert_many(ledger._require_conn(), records)  # the replay path: executemany
        assert rollup_rows(ledger) == before
        assert sum(r.sums["calls"] for r in before) == len(ledger.records()) == len(records)


def _worker(path: str, start: int, count: int) -> None:
    with Ledger(path) as ledger:
        for i in range(start, start + count):
            ledger.write(_record(i))
            ledger.write(_record(i // 2))  # ids the other process writes too


def _two_processes(target: str, count: int = 150) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(target, n * count, count)) for n in range(2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0


def test_two_processes_writing_at_once_lose_no_count(tmp_path: Path) -> None:
    """Two processes writing one SQLite ledger, some ids both: the rollups count each row
    once."""
    path = tmp_path / "l.db"
    Ledger(path).close()
    _two_processes(str(path))
    with Ledger(path, read_only=True) as ledger:
        rows = len(ledger.records())
        assert rows == 300
        assert sum(r.sums["calls"] for r in rollup_rows(ledger)) == rows
        _check_equal(ledger)


def test_a_v4_ledger_is_read_from_its_rows_then_migrated_once(tmp_path: Path) -> None:
    """A v4 ledger opened read-only is aggregated from its rows (not migrated); opened for
    writing it gets its rollups built from the existing rows once, then kept by the
    trigger."""
    path = tmp_path / "v4.db"
    records = _mixed()
    with Ledger(path) as ledger:
        _write(ledger, records[:20])
        expected = rollup_rows(ledger)
    downgrade(path, 4)
    with Ledger(path, read_only=True) as old:
        assert rollup_rows(old) == expected
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (4,)
    conn.close()
    with Ledger(path) as ledger:
        assert rollup_rows(ledger) == expected
        _write(ledger, records[20:])
        _check_equal(ledger)
        assert sum(r.sums["calls"] for r in rollup_rows(ledger)) == len(records)


def test_pruning_keeps_rollups_and_the_report_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Pruning deletes old rows only (in batches, here of 4); the rollups, and `report
    --rollups`, keep the pruned period; the row-level report names the cut-off; `ledger
    prune` does it from the CLI."""
    from stableprompt._ledger import _ledger

    monkeypatch.setattr(_ledger, "_PRUNE_BATCH", 4)
    path = tmp_path / "l.db"
    records = _mixed()
    with Ledger(path) as ledger:
        _write(ledger, records)
        before = rollup_rows(ledger)
        cut = T0 + timedelta(hours=2)
        deleted = ledger.prune(cut)
        assert deleted == sum(1 for r in records if r.ts_utc < cut) > 0
        assert all(r.ts_utc >= cut for r in ledger.records())
        assert rollup_rows(ledger) == before
        assert ledger.meta()[PRUNED_BEFORE] == "2026-03-01T12:05:00.000000+00:00"
        assert ledger.prune(cut - timedelta(hours=1)) == 0
        assert ledger.meta()[PRUNED_BEFORE] == "2026-03-01T12:05:00.000000+00:00"  # latest
    assert main(["report", "--rollups", "--json", str(path)]) == 0
    pruned = json.loads(capsys.readouterr().out)
    assert pruned["rollups"]["overall"]["calls"] == len(records)
    assert pruned["pruned_before"] == {str(path): "2026-03-01T12:05:00.000000+00:00"}
    assert main(["report", str(path)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "rows before 2026-03-01T12:05:00.000000+00:00 were pruned" in text
    assert main(["report", "--json", str(path)]) == 0
    assert "were pruned" in json.loads(capsys.readouterr().out)["pruned"][0]
    assert main(["report", "--since", "2026-03-02", str(path)]) == 0
    assert "were pruned" not in capsys.readouterr().out  # the selection starts after it
    assert main(["report", "--rollups", str(path)]) == 0
    assert "were pruned" in capsys.readouterr().out
    assert main(["ledger", "prune", "--before", "2026-03-02", "--dry-run", "--json",
                 str(path)]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["would_delete"] > 0
    assert main(["ledger", "prune", "--older-than", "1d", "--vacuum", str(path)]) == 0
    assert "deleted" in capsys.readouterr().out
    with Ledger(path, read_only=True) as ledger:
        assert ledger.records() == [] and rollup_rows(ledger) == before
    assert main(["report", str(path)]) == 0
    assert "were pruned" in capsys.readouterr().out  # no rows left: still said


def test_pruning_is_refused_while_records_wait_outside(tmp_path: Path) -> None:
    """Spilled records not imported yet would count twice after a prune: refused."""
    path = tmp_path / "l.db"
    with Ledger(path) as ledger:
        _write(ledger, _mixed()[:3])
    ledger.spill_path.write_bytes(_record(1).to_json() + b"\n")
    with Ledger(path) as ledger, pytest.raises(LedgerError) as info:
        ledger.prune(T0 + timedelta(days=9))
    assert info.value.code == "ledger-prune-unimported"
    with Ledger(path) as ledger, pytest.raises(Exception) as naive:
        ledger.prune(datetime(2026, 1, 1))
    assert getattr(naive.value, "code", None) == "ledger-since-naive"


def test_rollups_refuse_row_options(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """`--rollups` with an option that needs call rows is a usage error (exit 2)."""
    path = tmp_path / "l.db"
    with Ledger(path) as ledger:
        _write(ledger, _mixed()[:3])
    assert main(["report", "--rollups", "--calls", str(path)]) == 2
    assert "--calls" in capsys.readouterr().err
    assert main(["report", "--rollups", "--bucket", "hour", str(path)]) == 0
    assert "2026-03-01T10" in capsys.readouterr().out
    import stableprompt._report._rollups as rollups_report
    from stableprompt._subcommand import rich_console

    for width in (60, 80, 100):  # the hour whole at any width (it was cut to "2026-03-…")
        monkeypatch.setattr(rollups_report, "make_console", lambda file, w=width: rich_console(
            file=file, highlight=False, width=w))
        assert main(["report", "--rollups", "--bucket", "hour", str(path)]) == 0
        out = capsys.readouterr().out
        assert "2026-03-01T10" in out and "…" not in out, out
    assert main(["report", "--rollups", "--json", "--since", "2026-03-01T10:20",
                 str(path)]) == 0  # whole hours: the one holding --since included
    assert json.loads(capsys.readouterr().out)["rollups"]["overall"]["calls"] == 3
    assert main(["report", "--rollups", "--json", "--since", "2026-03-01T11:00Z",
                 str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["rollups"]["overall"]["calls"] == 0


# --------------------------------------------------------------------------- PostgreSQL


def test_postgres_rollups_are_the_same_and_replays_count_once(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On PostgreSQL the trigger keeps the same rollups as SQLite, replays add nothing, and
    pruning (in batches, here of 3) keeps them."""
    from stableprompt._ledger import _ledger

    monkeypatch.setattr(_ledger, "_PRUNE_BATCH", 3)
    records = _mixed()
    with Ledger(tmp_path / "l.db") as lite:
        _write(lite, records)
        expected = rollup_rows(lite)
    with Ledger(pg_url, spill_dir=tmp_path) as ledger:
        _write(ledger, records)
        _write(ledger, records[:5])
        ledger._insert_many(ledger._require_conn(), records)
        assert rollup_rows(ledger) == expected
        _check_equal(ledger)
        cut = T0 + timedelta(hours=2)
        assert ledger.prune(cut) == sum(1 for r in records if r.ts_utc < cut)
        assert all(r.ts_utc >= cut for r in ledger.records())
        assert rollup_rows(ledger) == expected
    with Ledger(pg_url, read_only=True) as reader:
        assert rollup_rows(reader) == expected


def test_postgres_two_processes_lose_no_count(pg_url: str) -> None:
    """Two processes writing one PostgreSQL ledger at once (upserts on the same keys): each
    row counted once."""
    Ledger(pg_url).close()
    _two_processes(pg_url)
    with Ledger(pg_url, read_only=True) as ledger:
        assert len(ledger.records()) == 300
        assert sum(r.sums["calls"] for r in rollup_rows(ledger)) == 300
        _check_equal(ledger)


def test_postgres_v4_database_is_read_from_rows_then_migrated(
        pg_url: str, tmp_path: Path) -> None:
    """A v4 PostgreSQL ledger is aggregated from its rows read-only, then migrated once."""
    import psycopg

    from stableprompt._ledger._postgres import PG_MIGRATIONS

    records = _mixed()
    with Ledger(tmp_path / "l.db") as lite:
        _write(lite, records[:20])
        expected = rollup_rows(lite)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for step in PG_MIGRATIONS[:4]:
            for statement in step:
                conn.execute(statement)
        conn.execute('CREATE TABLE stableprompt_schema ("version" INTEGER NOT NULL)')
        conn.execute("INSERT INTO stableprompt_schema VALUES (4)")
    with Ledger(pg_url, spill_dir=tmp_path) as ledger:  # writes at v5, then back to v4
        _write(ledger, records[:20])
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP TRIGGER {ROLLUP_TABLE}_add ON calls")
        conn.execute(f"DROP TABLE {ROLLUP_TABLE}")
        conn.execute("UPDATE stableprompt_schema SET version = 4")
    with Ledger(pg_url, read_only=True) as old:
        assert rollup_rows(old) == expected
    with Ledger(pg_url, spill_dir=tmp_path) as ledger:
        assert rollup_rows(ledger) == expected
        _write(ledger, records[20:])
        _check_equal(ledger)


def test_long_context_calls_are_priced_at_their_tier_unless_an_hour_straddles_it(
        tmp_path: Path) -> None:
    """Calls above their model's long-context threshold (Claude Sonnet 4.5: 200,000 input
    tokens; all of a call's tokens at the tier's rates) are priced from the sums at that
    tier, equal to the row-level report; an hour whose calls straddle the threshold is not
    priced from sums (unknown, with a note), never priced wrong, and its tokens still agree."""
    def long(i: int, **update: Any) -> UsageRecord:
        return _record(i, input_tokens_total=250_000 + i, uncached_tokens=245_400, **update)

    apart = [long(0), long(3), _record(1, ts_utc=T0 + timedelta(days=1))]
    with Ledger(tmp_path / "a.db") as ledger:
        _write(ledger, apart)
        _check_equal(ledger)
        assert summarize_rollups(rollup_rows(ledger)).overall.cost_unknown_calls == 0
    straddle = [long(0), _record(3)]  # same hour, scenario and verdict
    with Ledger(tmp_path / "b.db") as ledger:
        _write(ledger, straddle)
        summary = summarize_rollups(rollup_rows(ledger))
        rows = _row_report(ledger).overall
    assert summary.overall.input_tokens == rows.input_tokens
    assert rows.cost_unknown_calls == 0 and summary.overall.cost_unknown_calls == 2
    assert summary.overall.cost_usd is None and rows.cost_usd is not None
    assert any("long-context price threshold" in note for note in summary.pricing.notes)


def test_one_tier_holds_calls_between_thresholds_only() -> None:
    """`UnitPrices.same_tier`: calls priced at one tier lie strictly between thresholds (or
    are all the same size); a price per request is never priced from sums; `tier_prices`
    above Claude Sonnet 4.5's 200,000-token threshold doubles its input rate (genai-prices'
    data) and equals the base rates below it."""
    from datetime import date

    from stableprompt._economics._prices import UnitPrices, tier_prices, unit_prices

    rates = UnitPrices(1.0, 0.1, 1.25, 2.0, 5.0, "test", 200_000, (200_000, 1_000_000))
    assert rates.same_tier(1, 199_999) and rates.same_tier(200_001, 999_999)
    assert not rates.same_tier(199_999, 200_001) and not rates.same_tier(200_000, 200_001)
    assert rates.same_tier(200_000, 200_000)
    assert not UnitPrices(1.0, 0.1, 1.25, 2.0, 5.0, "test", 0, (0,)).same_tier(5, 5)
    day = date(2026, 3, 1)
    base = unit_prices("anthropic", "claude-sonnet-4-5", day)
    long = tier_prices("anthropic", "claude-sonnet-4-5", day, 250_000)
    assert base is not None and long is not None
    assert tier_prices("anthropic", "claude-sonnet-4-5", day, 150_000) == base
    assert long.input == pytest.approx(2 * base.input)
