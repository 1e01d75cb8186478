"""The PostgreSQL ledger as fleets run it (issue 30 item 2): behind PgBouncer in transaction
pooling mode (`pg_bouncer.py`: each transaction of a client may run on another server
session), and migrated beside live writers. Writes from two proxy processes, reads, `report`
and migrations go through a real PgBouncer 1.18 in front of the session's throwaway cluster;
skipped with the reason where either cannot start."""

from __future__ import annotations

import io
import itertools
import json
import logging
import threading
import time
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from pg_cluster import PASSWORD
from stableprompt import Ledger, LedgerError, UsageRecord
from stableprompt._cli import main
from stableprompt._ledger import _postgres
from stableprompt._ledger._lean import iter_report_records
from stableprompt._ledger._schema import SELECT_COLUMNS, to_row
from stableprompt.emulator import Emulator
from test_ledger_fleet import _proxy, _sender
from test_report_lean import _copy_to

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)


def _record(i: int, *, ts: datetime | None = None, session: str = "s1") -> UsageRecord:
    return UsageRecord(
        record_id=f"r{i:05d}", ts_utc=ts or T0 + timedelta(seconds=i), session_id=session,
        turn=i + 1, wire_format="anthropic", provider="anthropic", model="claude-sonnet-4-5",
        lineage=f"sp1:{session}", request_fingerprint=f"sp1:f{i}", input_tokens_total=1000 + i,
        cache_read_tokens=900, cache_write_tokens=0, uncached_tokens=100 + i, output_tokens=3,
        usage_raw={"input_tokens": 100 + i}, verdict="hit", status_code=200)


@pytest.fixture
def bounced(pg_url: str, pg_bouncer: Any) -> tuple[str, str]:
    """``(direct, through PgBouncer)``: two URLs of one new, empty database."""
    dbname = pg_url.rsplit("/", 1)[1]
    pg_bouncer.warm(dbname)
    return pg_url, str(pg_bouncer.url(dbname))


def _insert(url: str, records: list[UsageRecord]) -> None:
    """Store ``records`` in one transaction, straight through psycopg (the ledger's schema
    is made first)."""
    import psycopg

    Ledger(url).close()
    marks = ", ".join("%s" for _ in SELECT_COLUMNS.split(", "))
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO calls ({SELECT_COLUMNS}) VALUES ({marks})",
                        [to_row(r) for r in records])


def test_two_proxies_write_through_pgbouncer(bounced: tuple[str, str], tmp_path: Path) -> None:
    """Two `stableprompt proxy` processes record 60 calls through PgBouncer in transaction
    mode, taking turns in five conversations (each process runs the same insert and lineage
    read far more often than psycopg's prepare threshold, 5): every call is one row, nothing
    spilled, each later turn's predecessor is the previous turn (stored by the other
    process), and neither process printed the password."""
    direct, through = bounced
    home = tmp_path / "home"
    home.mkdir()
    sessions, turns = 5, 12
    with Emulator() as emu, _proxy(emu.base_url, through, "127.0.0.1", home) as (_, a), \
            _proxy(emu.base_url, through, "127.0.0.1", home) as (_, b), \
            httpx.Client() as client:
        routes = [_sender(client, a), _sender(client, b)]
        for session in range(sessions):
            system = f"Session {session}. " + " ".join(f"rule {i}: keep the prefix stable."
                                                       for i in range(120))
            messages: list[dict[str, Any]] = []
            for turn in range(turns):
                if turn:
                    _wait_rows(direct, f"s{session}", turn)
                messages.append({"role": "user", "content": f"question {turn}"})
                body = {"model": "claude-sonnet-4-6", "max_tokens": 16,
                        "system": [{"type": "text", "text": system,
                                    "cache_control": {"type": "ephemeral"}}],
                        "messages": list(messages)}
                answer = routes[turn % 2](body, f"s{session}")
                text = "".join(part.get("text", "") for part in answer["content"])
                messages.append({"role": "assistant", "content": text or "ok"})
        _wait_rows(direct, None, sessions * turns)
    with Ledger(direct, read_only=True) as reader:
        rows = reader.records()
    assert len(rows) == sessions * turns == len({r.record_id for r in rows})
    assert not list(home.rglob("*.spill.jsonl"))
    for session in range(sessions):
        chain = sorted((r for r in rows if r.session_id == f"s{session}"),
                       key=lambda r: r.turn or 0)
        assert [r.turn for r in chain] == list(range(1, turns + 1))
        for earlier, later in itertools.pairwise(chain):
            assert later.predecessor_id == earlier.record_id
            assert later.verdict == "hit"


def _wait_rows(url: str, session: str | None, n: int) -> None:
    """Wait (up to 10 s) until ``url`` holds ``n`` rows (of ``session``)."""
    import psycopg

    end = time.monotonic() + 10.0
    sql = "SELECT count(*) FROM calls" + (' WHERE "gen_ai.conversation.id" = %s'
                                           if session else "")
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            row = conn.execute(sql, (session,) if session else None).fetchone()
            if row is not None and row[0] >= n:
                return
            assert time.monotonic() < end, f"{session}: {n} rows not stored within 10 s"
            time.sleep(0.02)


def _report(url: str, args: list[str], port: str, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["report", url, *args]) == 0
    out, err = capsys.readouterr()
    assert PASSWORD not in out + err
    return out.replace(f"127.0.0.1:{port}", "127.0.0.1:PORT")


def test_report_through_pgbouncer_equals_the_direct_read(
        bounced: tuple[str, str], demo_ledger_files: list[Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`stableprompt report` (text and `--json`) through PgBouncer prints what it prints
    reading the server directly, on the demo's rows plus 700 calls sharing one timestamp,
    read in pages of 64 rows (so pages end inside runs of equal `ts_utc`)."""
    monkeypatch.setattr(_postgres, "PAGE_ROWS", 64, raising=False)
    direct, through = bounced
    _copy_to(direct, demo_ledger_files[0])
    tied = T0 + timedelta(days=400)
    _insert(direct, [_record(i, ts=tied, session=f"t{i % 7}") for i in range(700)])
    direct_port = direct.split("@", 1)[1].split("/", 1)[0].split(":")[1]
    through_port = through.split("@", 1)[1].split("/", 1)[0].split(":")[1]
    for args in ([], ["--json"], ["--calls", "--limit", "50", "--offset", "680"]):
        expected = _report(direct, args, direct_port, capsys)
        got = _report(through, args, through_port, capsys)
        assert got == expected, args
        if args == ["--json"]:
            assert json.loads(got)["records"] > 750


def test_reads_through_pgbouncer_leave_no_session_setting_behind(
        bounced: tuple[str, str], tmp_path: Path) -> None:
    """Reads through PgBouncer (a read-only ledger's records, lineage reads, metadata)
    change no server session: under transaction pooling a `SET` outlives the transaction
    and reaches the next client of that server connection (a writer whose inserts would
    then fail as read-only). Afterwards every session says `default_transaction_read_only`
    off and writes through PgBouncer commit; reads stay read-only."""
    import psycopg

    direct, through = bounced
    _insert(direct, [_record(i) for i in range(30)])
    with Ledger(through, read_only=True) as reader:
        for _ in range(4):
            assert len(reader.records()) == 30
            assert len(reader.recent_for_lineage("sp1:s1", limit=3)) == 3
            assert isinstance(reader.meta(), dict)
        conn = reader._reader()
        try:
            with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
                conn.execute("DELETE FROM calls")
        finally:
            reader._release(conn)
    for _ in range(6):
        with psycopg.connect(through, autocommit=True) as conn:
            assert conn.execute("SHOW default_transaction_read_only").fetchone() == ("off",)
    with Ledger(through, spill_dir=tmp_path) as writer:
        assert [writer.write(_record(i)) for i in range(30, 60)] == ["committed"] * 30
        assert len(writer.records()) == 60


def test_keyset_pages_lose_and_repeat_nothing(pg_url: str, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A read in pages of 32 rows over 400 rows in runs of up to 120 equal `ts_utc`, while
    another ledger commits rows before, inside and after those runs: the read gives exactly
    the rows stored when it began, once each, in (`ts_utc`, insertion) order, both through
    `iter_records` and the report's read; the next read sees the new rows too."""
    monkeypatch.setattr(_postgres, "PAGE_ROWS", 32, raising=False)
    runs = [T0 + timedelta(seconds=s) for s in (0, 1, 1, 1, 2, 5)]
    records = [_record(i, ts=runs[min(i // 70, 5)]) for i in range(400)]
    _insert(pg_url, records)
    late = [_record(1000 + i, ts=runs[i % 6] + timedelta(microseconds=i % 2)) for i in range(30)]
    with Ledger(pg_url, read_only=True) as reader, Ledger(pg_url, spill_dir=tmp_path) as writer:
        for read in ("records", "report"):
            stored = records + (late[:15] if read == "report" else [])
            expected = [r.record_id for r in sorted(stored, key=lambda r: r.ts_utc)]
            if read == "records":
                rows: Iterator[UsageRecord] = reader.iter_records()
            else:
                rows = iter_report_records(reader, "", [])
            seen = [next(rows).record_id]
            for record in late[:15] if read == "records" else late[15:]:
                assert writer.write(record) == "committed"
            seen += [r.record_id for r in rows]
            assert seen == expected, read
        assert len(reader.records()) == 430


def test_rows_being_inserted_when_a_read_begins_come_once_or_not_at_all(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows whose insert had drawn its `seq` but not committed when a paged read began (a
    later row already committed, so the read's `seq` bound covers them), committed while it
    reads: one that sorts after the read's position comes once; one that sorts before it is
    not in this read but in the next. Never twice, nothing committed at the start lost."""
    import psycopg

    monkeypatch.setattr(_postgres, "PAGE_ROWS", 32, raising=False)
    records = [_record(i) for i in range(100)]
    _insert(pg_url, records)
    marks = ", ".join("%s" for _ in SELECT_COLUMNS.split(", "))
    holder = psycopg.connect(pg_url)  # a writer's open transaction: its seq drawn
    for late in (_record(500, ts=T0 + timedelta(seconds=1000)),
                 _record(501, ts=T0 - timedelta(seconds=1))):
        holder.execute(f"INSERT INTO calls ({SELECT_COLUMNS}) VALUES ({marks})", to_row(late))
    with Ledger(pg_url, spill_dir=tmp_path) as writer:
        # another hour: the holder's open transaction locks the rollup rows of its own rows'
        # hours (the rollup trigger's upsert), which an insert in those hours would wait for
        assert writer.write(_record(502, ts=T0 + timedelta(hours=3))) == "committed"
    with Ledger(pg_url, read_only=True) as reader:
        rows = reader.iter_records()
        seen = [next(rows).record_id]
        holder.commit()
        holder.close()
        seen += [r.record_id for r in rows]
        assert seen == [f"r{i:05d}" for i in (*range(100), 500, 502)]
        assert [r.record_id for r in reader.iter_records()] == [
            f"r{i:05d}" for i in (501, *range(100), 500, 502)]


@pytest.mark.parametrize("route", ["direct", "pgbouncer"])
def test_a_migration_beside_a_lock_holder_fails_typed_within_the_busy_timeout(
        bounced: tuple[str, str], tmp_path: Path, route: str) -> None:
    """A schema v4 database whose `calls` table a live writer holds locked (an open
    transaction that inserted a row): a newer ledger's migration waits at most
    `busy_timeout_s` (as SQLite's busy timeout bounds its `BEGIN IMMEDIATE`), then the write
    spills and a read raises LedgerError naming the migration, the lock wait and the ledger
    (password scrubbed); once the lock is gone the migration runs and the spilled record
    is imported. No server session keeps the migration's lock timeout (PgBouncer would hand
    it to the pool's next client)."""
    import psycopg

    from stableprompt._ledger._postgres import PG_MIGRATIONS

    direct, through = bounced
    url = direct if route == "direct" else through
    with psycopg.connect(direct, autocommit=True) as conn:
        for step in PG_MIGRATIONS[:4]:
            for statement in step:
                conn.execute(statement)
        conn.execute('CREATE TABLE stableprompt_schema ("version" INTEGER NOT NULL)')
        conn.execute("INSERT INTO stableprompt_schema VALUES (4)")
    holder = psycopg.connect(direct)  # a writer's open transaction: its lock on calls held
    holder.execute("LOCK TABLE calls IN ROW EXCLUSIVE MODE")
    outcome: dict[str, Any] = {}

    def migrate() -> None:
        ledger = Ledger(url, busy_timeout_s=1.0, spill_dir=tmp_path)
        began = time.monotonic()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                outcome["write"] = ledger.write(_record(1))
            outcome["warnings"] = [str(w.message) for w in caught]
            outcome["write_s"] = time.monotonic() - began
            began = time.monotonic()
            try:
                ledger.meta()
            except LedgerError as exc:
                outcome["error"] = exc
            outcome["read_s"] = time.monotonic() - began
        finally:
            ledger.close()

    worker = threading.Thread(target=migrate, daemon=True)
    logged = io.StringIO()
    handler = logging.StreamHandler(logged)
    logging.getLogger("stableprompt").addHandler(handler)
    try:
        worker.start()
        worker.join(timeout=20)
        hung = worker.is_alive()
        holder.rollback()  # let a hung migration finish before failing the test
        worker.join(timeout=20)
    finally:
        logging.getLogger("stableprompt").removeHandler(handler)
        holder.close()
    assert not hung, "the migration waited for the lock with no timeout"
    assert outcome["write"] == "spilled" and outcome["write_s"] < 6
    assert outcome["warnings"] and PASSWORD not in " ".join(outcome["warnings"])
    error = outcome["error"]
    assert outcome["read_s"] < 6
    assert isinstance(error.__cause__, LedgerError)
    assert error.__cause__.code == "ledger-migration-locked"
    text = f"{error} {error.__cause__}"
    assert "schema version 4" in text and "busy_timeout_s" in text and "calls" in text
    assert PASSWORD not in text + logged.getvalue()
    with Ledger(url, spill_dir=tmp_path) as ledger:  # the lock is gone: migrates, imports
        assert ledger.replay_spill() == 1
        assert [r.record_id for r in ledger.records()] == ["r00001"]
    for _ in range(6):  # the lock timeout was the migration transaction's own (SET LOCAL)
        with psycopg.connect(through, autocommit=True) as conn:
            assert conn.execute("SHOW lock_timeout").fetchone() == ("0",)
