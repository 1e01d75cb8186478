"""The PostgreSQL ledger (`_ledger/_postgres.py` behind `_ledger/_backend.py`): the same
schema and behaviour as SQLite (idempotent rows, metadata, versioned schema, read-only
opening, spill and replay on write failure), typed errors for unsupported URLs, and a
password that is never shown. Needs a real server: the session's throwaway cluster
(`pg_cluster.py`), skipped with the reason where it cannot start."""

from __future__ import annotations

import itertools
import threading
import time
import warnings
from collections.abc import Generator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conftest import record_anthropic_call
from pg_cluster import PASSWORD
from stableprompt import Ledger, LedgerError, Recorder, UsageRecord
from stableprompt._ledger._postgres import redact_url
from stableprompt._ledger._schema import ADDED_COLUMNS, COLUMNS, SCHEMA_VERSION

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)


def _record(i: int, **update: object) -> UsageRecord:
    base = UsageRecord(
        record_id=f"r{i:04d}", ts_utc=T0 + timedelta(seconds=i), session_id="s1", turn=i,
        wire_format="anthropic", provider="anthropic", model="claude-sonnet-4-5",
        lineage="sp1:head", request_fingerprint=f"sp1:f{i}", input_tokens_total=2**40 + i,
        cache_read_tokens=100, cache_write_tokens=0, uncached_tokens=2**40 + i - 100,
        output_tokens=3, usage_raw={"input_tokens": i, "nested": {"a": [1, 2.5, None]}},
        verdict="hit", verdict_detail={"cause": "x", "gap_s": 1.25}, latency_ms=12.5,
        ttft_ms=0.1, status_code=200, diagnostics={"k": "v"}, response_id=f"m{i}")
    return base.model_copy(update=update)


@pytest.mark.parametrize("url", ["mysql://u:hunter2-secret@db/x", "http://example.com/l.db",
                                 "file:///tmp/x.db", "redis://h:6379"])
def test_an_unsupported_url_scheme_is_a_typed_error(
        url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Any ``scheme://`` other than postgresql/postgres/sqlite raises LedgerError
    ``ledger-url-scheme`` (no password in the message) and creates nothing."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LedgerError) as info:
        Ledger(url)
    assert info.value.code == "ledger-url-scheme"
    assert "hunter2" not in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_sqlite_urls_name_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``sqlite:///relative`` and ``sqlite:////absolute`` open SQLite files, as SQLAlchemy
    writes them; ``sqlite://`` without a path is refused."""
    monkeypatch.chdir(tmp_path)
    with Ledger("sqlite:///rel.db") as ledger:
        ledger.write(_record(1))
    assert (tmp_path / "rel.db").is_file()
    with Ledger(f"sqlite:///{tmp_path}/abs.db") as ledger:
        assert ledger.path == tmp_path / "abs.db"
    with pytest.raises(LedgerError) as info:
        Ledger("sqlite://")
    assert info.value.code == "ledger-url"


def test_redact_url_hides_the_password() -> None:
    """The URL shown anywhere has ``***`` for its password (userinfo or query)."""
    assert redact_url("postgresql://u:p%40ss@h:5432/db?sslmode=require") == \
        "postgresql://u:***@h:5432/db?sslmode=require"
    assert redact_url("postgres://h/db?user=u&password=x&a=1") == \
        "postgres://h/db?user=u&password=***&a=1"
    assert redact_url("postgresql://h/db") == "postgresql://h/db"


def test_records_round_trip_exactly(pg_url: str, tmp_path: Path) -> None:
    """Every field survives a PostgreSQL round trip as it does SQLite's (64-bit counts,
    floats, JSON fields, timestamps); a second write of an id is ignored."""
    records = [_record(i) for i in range(5)]
    with Ledger(pg_url, spill_dir=tmp_path) as pg, Ledger(tmp_path / "l.db") as lite:
        for record in records:
            assert pg.write(record) == "committed"
            lite.write(record)
        assert pg.write(records[0].model_copy(update={"verdict": "cold"})) == "committed"
        assert pg.records() == lite.records() == records
        assert pg.records(session_id="s1", since=T0 + timedelta(seconds=3)) == records[3:]
        assert pg.recent_for_lineage("sp1:head", limit=2) == records[:2:-1][:2]
        assert pg.last_for_lineage("sp1:head") == records[-1]
        first, last = pg.records_after(0, limit=2)
        assert first == records[:2]
        rest, _ = pg.records_after(last)
        assert rest == records[2:]
        ids = [records[3].record_id, "0" * 32, records[1].record_id, records[3].record_id]
        for ledger in (pg, lite):  # each stored id once, in no particular order
            assert sorted(ledger.records_by_id(ids), key=lambda r: r.record_id) == sorted(
                [records[1], records[3]], key=lambda r: r.record_id)
            assert ledger.records_by_id([]) == []


def test_schema_is_versioned_and_identical_in_columns(pg_url: str, tmp_path: Path) -> None:
    """The database gets the ledger's columns and the schema version; a read-only opening of
    an empty database is refused (not a ledger), of a newer one too."""
    import psycopg

    with pytest.raises(LedgerError) as info:
        Ledger(pg_url, read_only=True)
    assert info.value.code == "ledger-not-a-ledger"
    with Ledger(pg_url, spill_dir=tmp_path) as ledger:
        ledger.set_meta("backend", "test")
        ledger.set_meta("backend", "test2")
        assert ledger.meta() == {"backend": "test2"}
    with psycopg.connect(pg_url, autocommit=True) as conn:
        columns = {r[0] for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'calls'")}
        assert columns == {*COLUMNS.values(), "seq"}
        assert conn.execute("SELECT version FROM stableprompt_schema").fetchone() == (
            SCHEMA_VERSION,)
    reader = Ledger(pg_url, read_only=True)
    assert reader.meta() == {"backend": "test2"}
    with pytest.raises(Exception) as refused:
        reader.write(_record(1))
    assert getattr(refused.value, "code", None) == "ledger-read-only"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE stableprompt_schema SET version = 99")
    with pytest.raises(LedgerError) as newer:
        Ledger(pg_url, read_only=True)
    assert newer.value.code == "ledger-schema-newer"


def test_a_v2_database_is_read_as_it_is_then_migrated_keeping_rows(
        pg_url: str, tmp_path: Path) -> None:
    """A schema v2 database (before request_headers and segment_digests) opened read-only is
    read as it is (the v3 and v4 columns as None, nothing migrated); opened for writing it
    migrates to v4, keeps its rows, and stores a new row's allow-listed headers and outline."""
    import psycopg

    from stableprompt._ledger._postgres import PG_MIGRATIONS
    from stableprompt._ledger._schema import to_row

    old = _record(1)
    added = {c for c, version in ADDED_COLUMNS.items() if version > 2}
    assert added == {"request_headers", "segment_digests"}
    columns = [c for c in COLUMNS.values() if c not in added]
    values = [v for c, v in zip(COLUMNS.values(), to_row(old), strict=True)
              if c not in added]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for step in PG_MIGRATIONS[:2]:
            for statement in step:
                conn.execute(statement)
        conn.execute('CREATE TABLE stableprompt_schema ("version" INTEGER NOT NULL)')
        conn.execute("INSERT INTO stableprompt_schema VALUES (2)")
        names = ", ".join(f'"{c}"' for c in columns)
        conn.execute(f"INSERT INTO calls ({names}) VALUES ({', '.join('%s' for _ in values)})",
                     values)
    reader = Ledger(pg_url, read_only=True)
    assert reader.records() == [old]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT version FROM stableprompt_schema").fetchone() == (2,)
    new = _record(2, request_headers={"anthropic-beta": "b-2026-01-01"},
                  segment_digests="1|s|900|0=1h|" + "0f" * 16 + "|")
    with Ledger(pg_url, spill_dir=tmp_path) as ledger:
        assert ledger.write(new) == "committed"
        assert ledger.records() == [old, new]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT version FROM stableprompt_schema").fetchone() == (
            SCHEMA_VERSION,) == (5,)


def test_an_unreachable_database_spills_and_replays(pg_cluster: object, tmp_path: Path) -> None:
    """Writes to a database that does not exist yet spill locally (warned, password never
    shown); once it exists, replay_spill imports them, idempotently."""
    import psycopg

    url = pg_cluster.url("later")  # type: ignore[attr-defined]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ledger = Ledger(url, spill_dir=tmp_path)
        assert [ledger.write(_record(i)) for i in range(3)] == ["spilled"] * 3
    assert ledger.spill_path.parent == tmp_path and ledger.spill_path.is_file()
    shown = " ".join([*(str(w.message) for w in caught), repr(ledger), str(ledger.open_error)])
    assert PASSWORD not in shown and "***" in shown
    with pytest.raises(LedgerError) as info:
        ledger.records()
    assert PASSWORD not in str(info.value)
    with psycopg.connect(pg_cluster.url(), autocommit=True) as conn:  # type: ignore[attr-defined]
        conn.execute('CREATE DATABASE "later"')
    assert ledger.replay_spill() == 3
    assert ledger.write(_record(1)) == "committed"  # already there: ignored
    assert [r.record_id for r in ledger.records()] == ["r0000", "r0001", "r0002"]
    assert ledger.replay_spill() == 0
    ledger.close()


def test_a_broken_connection_spills_then_reconnects(pg_url: str, tmp_path: Path) -> None:
    """A write on a connection the server dropped spills; the next write reconnects."""
    import psycopg

    with Ledger(pg_url, spill_dir=tmp_path) as ledger:
        assert ledger.write(_record(0)) == "committed"
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                          "application_name = 'stableprompt' AND pid <> pg_backend_pid()")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert ledger.write(_record(1)) == "spilled"
        assert ledger.write(_record(2)) == "committed"
        assert ledger.replay_spill() == 1
        assert len(ledger.records()) == 3


def test_many_writers_at_once(pg_url: str, tmp_path: Path) -> None:
    """Eight ledgers on eight threads (eight connections) writing 40 rows each, some ids
    written twice: one row per id."""
    def work(n: int) -> None:
        with Ledger(pg_url, spill_dir=tmp_path) as ledger:
            for i in range(40):
                assert ledger.write(_record(n * 40 + i)) == "committed"
                assert ledger.write(_record((n * 40 + i + 7) % 320)) == "committed"

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with Ledger(pg_url, read_only=True) as ledger:
        assert len({r.record_id for r in ledger.records()}) == len(ledger.records()) == 320


def test_a_second_recorder_finds_the_first_ones_calls(pg_url: str, tmp_path: Path) -> None:
    """Two recorders on two ledgers of one database, taking turns in one conversation, each
    finds the other's previous call as predecessor by its stored digests (no content)."""
    with Ledger(pg_url, spill_dir=tmp_path / "a") as one, \
            Ledger(pg_url, spill_dir=tmp_path / "b") as two:
        a = Recorder(one, tokenizer="bytes/4")
        b = Recorder(two, tokenizer="bytes/4")
        first = record_anthropic_call(a, 0, read=0, write=1700)
        second = record_anthropic_call(b, 1, read=1700, write=0)
        third = record_anthropic_call(a, 2, read=1700, write=0)
    assert second.predecessor_id == first.record_id
    assert third.predecessor_id == second.record_id
    assert {second.verdict, third.verdict} == {"hit"}
    assert first.content is None and second.content is None


def test_reading_a_postgres_ledger_goes_in_keyset_pages(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`iter_records` on PostgreSQL reads in pages of `PAGE_ROWS` rows, one statement each
    (`("ts_utc", "seq") > (last row)`, `LIMIT`), bounded by the largest `seq` at the start:
    while the reader holds its first record only the first page was fetched, and all rows
    still come, in order, once each."""
    from stableprompt._ledger import _postgres

    monkeypatch.setattr(_postgres, "PAGE_ROWS", 100)
    sent: list[str] = []
    execute = _postgres._Connection.execute

    def spy(self: Any, sql: str, params: Any = ()) -> Any:
        sent.append(sql)
        return execute(self, sql, params)

    records = [_record(i) for i in range(600)]
    with Ledger(pg_url, spill_dir=tmp_path) as ledger:
        for record in records:
            assert ledger.write(record) == "committed"
        monkeypatch.setattr(_postgres._Connection, "execute", spy)
        rows = ledger.iter_records()
        first = next(rows)
        pages = [q for q in sent if q.endswith("LIMIT ?")]
        assert len(pages) == 1 and '"seq" <= ?' in pages[0]
        rest = list(rows)
    pages = [q for q in sent if q.endswith("LIMIT ?")]
    assert len(pages) == 7  # 6 full pages and the empty one that ends the read
    assert all('("ts_utc", "seq") > (?, ?)' in q for q in pages[1:])
    assert [first.record_id, *(r.record_id for r in rest)] == [r.record_id for r in records]


def _readers(admin: Any, ledger: Ledger) -> str:
    """A SQL condition naming the ledger's read sessions: its sessions but the writer's (a
    read-only statement runs in its own transaction, so their last query shows ``COMMIT``)."""
    writer = ledger._conn
    pid = writer.raw.info.backend_pid if writer is not None else 0  # type: ignore[attr-defined]
    return f"application_name = 'stableprompt' AND pid <> pg_backend_pid() AND pid <> {pid}"


def test_a_read_abandoned_after_its_connection_broke_ends_quietly(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader that stops iterating (`close()`, or drops the generator) after the server
    ended its connection: the read transaction ends first (its rollback fails, which psycopg
    logs and ignores), so the server-side cursor needs no `CLOSE` on the dead connection: no
    traceback through `sys.unraisablehook` from the collected stream, no ResourceWarning of
    a cursor left open, no error from `close()`; the ledger reads again afterwards."""
    import gc
    import sys

    import psycopg

    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    with Ledger(pg_url, spill_dir=tmp_path) as ledger:
        for i in range(600):
            assert ledger.write(_record(i)) == "committed"
        for abandon in ("close", "drop"):
            rows = ledger.iter_records()
            next(rows)
            with psycopg.connect(pg_url, autocommit=True) as admin:
                ended = admin.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    f"WHERE {_readers(admin, ledger)}").fetchone()
            assert ended == (1,)
            if abandon == "close":
                assert isinstance(rows, Generator)
                rows.close()
            else:
                del rows
                gc.collect()
        assert [u.exc_value for u in unraisable] == []
        assert len(ledger.records()) == 600


def test_a_slow_reader_holds_no_transaction_open(pg_url: str, tmp_path: Path) -> None:
    """A reader that pauses between records (longer than the database's
    `idle_in_transaction_session_timeout`, which servers set to end forgotten transactions)
    still reads every row: the streamed result holds no transaction open while it is read,
    so the pause neither ends the session nor keeps a lock a migration (`ALTER TABLE`) would
    queue behind. As before streaming, when psycopg read the whole result at once."""
    import time

    import psycopg

    with Ledger(pg_url, spill_dir=tmp_path) as ledger:
        for i in range(600):
            assert ledger.write(_record(i)) == "committed"
    database = pg_url.rsplit("/", 1)[1]
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{database}" SET idle_in_transaction_session_timeout '
                      "= '200ms'")
    for read_only in (False, True):
        with Ledger(pg_url, spill_dir=tmp_path, read_only=read_only) as ledger:
            rows = ledger.iter_records()
            first = next(rows)
            with psycopg.connect(pg_url, autocommit=True) as watcher:
                watcher.execute("SET lock_timeout = '1s'")
                states = watcher.execute(
                    "SELECT state FROM pg_stat_activity WHERE application_name = "
                    "'stableprompt' AND pid <> pg_backend_pid()").fetchall()
                assert ("idle in transaction",) not in states
                watcher.execute("ALTER TABLE calls ADD COLUMN probe TEXT")  # not blocked
                watcher.execute("ALTER TABLE calls DROP COLUMN probe")
            time.sleep(0.5)
            rest = list(rows)
        assert [first.record_id, *(r.record_id for r in rest)] == [
            f"r{i:04d}" for i in range(600)]


def test_reads_reuse_an_idle_connection_and_replace_one_the_server_ended(
        pg_url: str, tmp_path: Path) -> None:
    """Reads on PostgreSQL take a kept idle connection (opening one costs ~10 ms, and a
    recorder reads before each comparison): many reads use one server session; a kept
    connection the server ended is dropped, and the next read opens a new one instead of
    failing; rows committed by another ledger meanwhile are seen; close() closes them all."""
    import psycopg

    def readers(admin: Any) -> list[Any]:
        return list(admin.execute("SELECT pid FROM pg_stat_activity WHERE application_name = "
                             "'stableprompt' AND pid <> pg_backend_pid()").fetchall())

    with psycopg.connect(pg_url, autocommit=True) as admin, \
            Ledger(pg_url, spill_dir=tmp_path) as ledger, \
            Ledger(pg_url, spill_dir=tmp_path) as other:
        assert ledger.write(_record(0)) == "committed"
        opened = len(readers(admin))  # the two writers
        for _ in range(20):
            assert [r.record_id for r in ledger.recent_for_lineage("sp1:head")] == ["r0000"]
        assert len(readers(admin)) == opened + 1  # one kept reader for the 20 reads
        assert other.write(_record(1)) == "committed"  # another ledger's commit: seen
        assert {r.record_id for r in ledger.records_by_id(["r0000", "r0001"])} == {
            "r0000", "r0001"}
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                      "application_name = 'stableprompt' AND pid <> pg_backend_pid()")
        time.sleep(0.1)
        assert len(ledger.records()) == 2  # a new connection, not an error
        ledger.close()
        other.close()
        time.sleep(0.1)
        assert readers(admin) == []


def test_a_read_begun_before_a_fork_is_left_to_the_parent(pg_url: str, tmp_path: Path) -> None:
    """A forked child that drops a read its parent began (a generator paused mid-stream, as
    a proxy worker forked while a report was being read would hold): the child neither
    closes the parent's server-side cursor nor keeps the parent's connection for its own
    reads (both processes would then talk over one socket); the parent reads on."""
    import gc
    import os

    with Ledger(pg_url, spill_dir=tmp_path) as ledger:
        for i in range(600):
            assert ledger.write(_record(i)) == "committed"
        rows = ledger.iter_records()
        first = next(rows)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                del rows
                gc.collect()
                code = 0 if [len(ledger.records()) for _ in range(3)] == [600] * 3 else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        rest = list(rows)
        assert [first.record_id, *(r.record_id for r in rest)] == [
            f"r{i:04d}" for i in range(600)]
        assert len(ledger.records()) == 600


def test_a_read_never_started_leaves_no_connection_open(pg_url: str, tmp_path: Path) -> None:
    """`iter_records()` dropped before its first row: no server session is left behind and
    no ResourceWarning (pytest makes it an error) of a connection deleted while open."""
    import gc
    import sys

    import psycopg

    unraisable: list[Any] = []
    with Ledger(pg_url, spill_dir=tmp_path) as ledger:
        assert ledger.write(_record(0)) == "committed"
        old = sys.unraisablehook
        sys.unraisablehook = unraisable.append
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", ResourceWarning)
                for _ in range(6):
                    rows = ledger.iter_records()
                    del rows
                gc.collect()
        finally:
            sys.unraisablehook = old
        assert [u.exc_value for u in unraisable] == []
        with psycopg.connect(pg_url, autocommit=True) as admin:
            sessions = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                "'stableprompt' AND pid <> pg_backend_pid()").fetchone()
        assert sessions is not None and sessions[0] <= 2  # the writer and one kept reader


def test_a_read_right_after_the_server_ended_a_kept_connection_succeeds(
        pg_url: str, tmp_path: Path) -> None:
    """A kept read connection whose session the server is ending (`pg_terminate_backend`,
    as a restart or `idle_session_timeout` does) before its last message reached the
    client: the very next read opens a new connection instead of failing, as when every
    read opened its own. Before the kept one was asked a `SELECT 1`, about one read in
    five right after the termination failed with "terminating connection"."""
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as admin, \
            Ledger(pg_url, spill_dir=tmp_path) as ledger:
        assert ledger.write(_record(0)) == "committed"
        failures: list[BaseException] = []
        for _ in range(60):
            assert ledger.meta() is not None  # a kept reader, its last query this one
            ended = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                f"{_readers(admin, ledger)}").fetchone()
            assert ended == (1,)
            try:
                ledger.meta()
            except LedgerError as exc:
                failures.append(exc)
        assert failures == []


def test_a_kept_connection_idle_too_long_is_replaced(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kept read connection unused for longer than `_IDLE_READER_S` is closed and the
    read opens a new one (a firewall or NAT may have forgotten its idle TCP flow, and a read
    on it would hang until TCP gives up); a connection used again soon is kept."""
    import psycopg

    from stableprompt._ledger import _ledger

    monkeypatch.setattr(_ledger, "_IDLE_READER_S", 0.3)

    def reader_pids(admin: Any) -> set[int]:
        return {int(row[0]) for row in admin.execute(
            f"SELECT pid FROM pg_stat_activity WHERE {_readers(admin, ledger)}").fetchall()}

    with psycopg.connect(pg_url, autocommit=True) as admin, \
            Ledger(pg_url, spill_dir=tmp_path) as ledger:
        assert isinstance(ledger.meta(), dict)
        first = reader_pids(admin)
        assert isinstance(ledger.meta(), dict)
        assert reader_pids(admin) == first  # kept: used again at once
        time.sleep(0.5)
        assert isinstance(ledger.meta(), dict)
        time.sleep(0.1)
        later = reader_pids(admin)
        assert len(first) == len(later) == 1 and later != first


def test_threads_reading_at_once_share_the_kept_connections(
        pg_url: str, tmp_path: Path) -> None:
    """Threads reading one ledger at once (a recorder's worker and its caller): each read
    gets a connection no other read is using (two on one socket would mix their replies),
    reads begun and dropped midway give theirs back, and at most `_IDLE_READERS` stay open
    afterwards."""
    import psycopg

    from stableprompt._ledger._ledger import _IDLE_READERS

    with Ledger(pg_url, spill_dir=tmp_path) as ledger:
        for i in range(300):
            assert ledger.write(_record(i)) == "committed"
        errors: list[BaseException] = []

        def work() -> None:
            try:
                for _ in range(25):
                    assert len(ledger.recent_for_lineage("sp1:head")) > 0
                    rows = ledger.iter_records()
                    next(rows)
                    del rows  # dropped midway: its cursor closed, its connection kept
                    assert len(ledger.records()) == 300
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        with psycopg.connect(pg_url, autocommit=True) as admin:
            (sessions,) = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                "'stableprompt' AND query NOT LIKE 'INSERT%'").fetchone() or (None,)
        assert sessions is not None and 1 <= sessions <= _IDLE_READERS


def test_a_connection_on_a_high_descriptor_is_kept(pg_url: str, tmp_path: Path) -> None:
    """A process with over 1024 open descriptors (a busy proxy: two sockets per call in
    flight): the kept read connection's socket number is past what `select()` takes, and it
    is still kept (checked with `poll()`), not reopened at each read."""
    import os

    import psycopg

    if os.sysconf("SC_OPEN_MAX") < 1200:
        pytest.skip("the descriptor limit is below 1200")
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        with psycopg.connect(pg_url, autocommit=True) as admin, \
                Ledger(pg_url, spill_dir=tmp_path) as ledger:
            pids: set[int] = set()
            for _ in range(5):
                assert isinstance(ledger.meta(), dict)
                pids |= {int(row[0]) for row in admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE "
                    f"{_readers(admin, ledger)}").fetchall()}
            assert len(pids) == 1
    finally:
        for fd in held:
            os.close(fd)


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_reads_go_on_after_the_server_restarts(pg_cluster: Any, pg_url: str, tmp_path: Path,
                                                mode: str) -> None:
    """The server restarts (`pg_ctl restart -m fast`, or `-m immediate` as after a crash)
    while a ledger keeps read connections, some left by reads dropped midway: the first read
    afterwards opens a new connection and succeeds, and so does every one after it."""
    import subprocess

    import psycopg

    with Ledger(pg_url, spill_dir=tmp_path) as ledger:
        for i in range(300):
            assert ledger.write(_record(i)) == "committed"
        kept = [ledger.iter_records() for _ in range(3)]
        for rows in kept:
            next(rows)
        assert len(ledger.records()) == 300
        kept.clear()  # dropped midway: their connections are kept
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("CHECKPOINT")  # the cluster commits asynchronously: keep the rows
        restart = subprocess.run(
            [*pg_cluster.run_as, str(pg_cluster.bin_dir / "pg_ctl"), "-D",
             str(pg_cluster.root / "data"), "-l", str(pg_cluster.root / "log"), "-m", mode,
             "-w", "-t", "60", "restart"],
            capture_output=True, text=True, timeout=90, check=False, cwd=pg_cluster.root)
        assert restart.returncode == 0, restart.stderr
        for _ in range(3):
            assert len(ledger.records()) == 300
            assert [r.record_id for r in ledger.recent_for_lineage("sp1:head", limit=2)]


def test_a_kept_connection_stays_read_only(pg_url: str, tmp_path: Path) -> None:
    """A read connection kept and handed out again (after a statement on it raised, and
    after a read dropped midway) still reads only: each of its statements runs in a
    `READ ONLY` transaction (never a session `SET`, which a transaction-mode pooler would
    hand to its next client), so no read can write, on a read-only ledger and a writing one
    alike."""
    import psycopg

    with Ledger(pg_url, spill_dir=tmp_path) as writer:
        for i in range(300):
            assert writer.write(_record(i)) == "committed"
    for read_only in (True, False):
        with Ledger(pg_url, spill_dir=tmp_path, read_only=read_only) as ledger:
            rows = ledger.iter_records()
            next(rows)
            del rows
            for _ in range(3):
                conn = ledger._reader()
                try:
                    assert conn.execute("SHOW transaction_read_only").fetchone() == ("on",)
                    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
                        conn.execute("DELETE FROM calls")
                finally:
                    ledger._release(conn)
            assert len(ledger.records()) == 300


def test_a_read_in_order_bounds_every_alternative_of_its_where_clause(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`read_in_order` with a `WHERE` clause of alternatives (`a OR b`) applies its page
    position and `seq` bound to the whole clause, not only to the last alternative (`AND`
    binds tighter than `OR`): each matching row once, in order, the read ends."""
    from stableprompt._ledger import _postgres

    monkeypatch.setattr(_postgres, "PAGE_ROWS", 10)
    records = [_record(i) for i in range(60)]
    with Ledger(pg_url, spill_dir=tmp_path) as ledger:
        for record in records:
            assert ledger.write(record) == "committed"
        conn = ledger._reader()
        try:
            rows = ledger._backend.read_in_order(
                conn, '"record_id"', ' WHERE "turn" <= ? OR "turn" > ?', (25, 50))
            got = [row[0] for row in itertools.islice(rows, 200)]
        finally:
            ledger._release(conn)
    assert got == [f"r{i:04d}" for i in range(60) if i <= 25 or i > 50]


def _tuples_read(admin: Any) -> int:
    """Rows of `calls` the server has read so far (sequential scans plus index fetches),
    once no ledger session is left (a session's counts are flushed when it ends)."""
    deadline = time.monotonic() + 20
    while admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                        "'stableprompt'").fetchone() != (0,) and time.monotonic() < deadline:
        time.sleep(0.05)
    admin.execute("SELECT pg_stat_clear_snapshot()")
    row = admin.execute("SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) "
                        "FROM pg_stat_user_tables WHERE relname = 'calls'").fetchone()
    return int(row[0])


def test_a_long_run_of_equal_timestamps_is_read_in_linear_time(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read in pages of 50 rows over 3,000 rows sharing one `ts_utc` (an import), between
    rows of other timestamps, reads each row of the run a bounded number of times, not the
    run again for every page (which made 50,000 rows at one timestamp 3x slower than 50,000
    distinct ones, 200,000 rows 8x): the server reads fewer than 10 rows of `calls` per row
    given, and the rows come once each in (`ts_utc`, insertion) order."""
    import psycopg

    from stableprompt._ledger import _postgres
    from stableprompt._ledger._schema import SELECT_COLUMNS, to_row

    monkeypatch.setattr(_postgres, "PAGE_ROWS", 50)
    tied = T0 + timedelta(seconds=100)
    records = ([_record(i) for i in range(20)]
               + [_record(100 + i, ts_utc=tied) for i in range(3000)]
               + [_record(5000 + i) for i in range(20)])
    Ledger(pg_url, spill_dir=tmp_path).close()
    marks = ", ".join("%s" for _ in SELECT_COLUMNS.split(", "))
    with psycopg.connect(pg_url) as conn, conn.cursor() as cur:
        cur.executemany(f"INSERT INTO calls ({SELECT_COLUMNS}) VALUES ({marks})",
                        [to_row(r) for r in reversed(records)])  # seq order reversed
    expected = [r.record_id for r in sorted(reversed(records), key=lambda r: r.ts_utc)]
    with psycopg.connect(pg_url, autocommit=True) as admin:
        before = _tuples_read(admin)
        with Ledger(pg_url, read_only=True) as reader:
            got = [r.record_id for r in reader.iter_records()]
        read = _tuples_read(admin) - before
    assert got == expected
    assert read < 10 * len(records), read


def test_a_row_committed_inside_a_long_run_during_a_read_comes_once(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read in pages of 10 over a run of 100 rows at one `ts_utc`, while a row of that
    run whose insert had begun before the read (its `seq` within the read's bound) commits
    after the first page: it comes once, at its place after the run's other rows, and
    every stored row once, in order."""
    import psycopg

    from stableprompt._ledger import _postgres
    from stableprompt._ledger._schema import SELECT_COLUMNS, to_row

    monkeypatch.setattr(_postgres, "PAGE_ROWS", 10)
    tied = T0 + timedelta(seconds=50)
    with Ledger(pg_url, spill_dir=tmp_path) as ledger:
        for i in range(100):
            assert ledger.write(_record(i, ts_utc=tied)) == "committed"
    marks = ", ".join("%s" for _ in SELECT_COLUMNS.split(", "))
    holder = psycopg.connect(pg_url)  # a writer's open transaction: its seq drawn
    holder.execute(f"INSERT INTO calls ({SELECT_COLUMNS}) VALUES ({marks})",
                   to_row(_record(500, ts_utc=tied)))
    with Ledger(pg_url, spill_dir=tmp_path) as writer:  # another hour: no rollup row shared
        assert writer.write(_record(501, ts_utc=T0 + timedelta(hours=5))) == "committed"
    try:
        with Ledger(pg_url, read_only=True) as reader:
            rows = reader.iter_records()
            seen = [next(rows).record_id for _ in range(10)]
            holder.commit()
            seen += [r.record_id for r in rows]
    finally:
        holder.close()
    assert seen == [f"r{i:04d}" for i in (*range(100), 500, 501)]
