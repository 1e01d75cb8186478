"""Tests for the SQLite ledger (src/stableprompt/_ledger/_ledger.py)."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from old_ledgers import downgrade
from stableprompt import LedgerSpillWarning
from stableprompt._exceptions import ConfigurationError, InputError, LedgerError
from stableprompt._ledger import _ledger, _spill
from stableprompt._ledger._ledger import COLUMNS, SCHEMA_VERSION, Ledger
from stableprompt._ledger._usage_record import UsageRecord
from stableprompt._redact import redact
from stableprompt._report._otel import export_otel

FAKE_KEY = "sk-ant-api03-TESTKEY0123456789abcdefghijklmnopqrstuvwxyz-AAAA"
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def _record(**fields: object) -> UsageRecord:
    base: dict[str, object] = {"wire_format": "anthropic", "lineage": "sp1:head"}
    base.update(fields)
    return UsageRecord.model_validate(base)


def _full_record(**fields: object) -> UsageRecord:
    base: dict[str, object] = {
        "ts_utc": T0,
        "session_id": "conv-7",
        "turn": 3,
        "scenario": "bfcl-multi-turn",
        "wire_format": "anthropic",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "lineage": "sp1:head",
        "request_fingerprint": "sp1:req",
        "predecessor_id": "f" * 32,
        "lcp_bytes": 20480,
        "lcp_tokens": 5100,
        "request_tokens": 5200,
        "predicted_cache_read_tokens": 5100,
        "input_tokens_total": 5210,
        "uncached_tokens": 10,
        "cache_read_tokens": 5100,
        "cache_write_tokens": 100,
        "cache_write_5m_tokens": 100,
        "cache_write_1h_tokens": 0,
        "output_tokens": 42,
        "usage_inconsistent": False,
        "usage_raw": {"input_tokens": 10, "cache_read_input_tokens": 5100},
        "verdict": "hit",
        "verdict_detail": {"gap_s": 12.5, "ttl_s": 300},
        "latency_ms": 812.25,
        "ttft_ms": 120.0,
        "status_code": 200,
        "error_class": None,
        "diagnostics": {"previous_message_id": "msg_01"},
        "response_id": "msg_02",
        "content": '{"messages":[]}',
        "request_headers": {"anthropic-beta": "b-one-2026-01-01,b-two-2026-02-02",
                            "anthropic-version": "2023-06-01"},
        "segment_digests": "1|su|900,12|0=5m|" + "ab" * 16 + "cd" * 16 + "|" + "ef" * 32,
    }
    base.update(fields)
    return UsageRecord.model_validate(base)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger(tmp_path / "ledger.db", fallback_dir=tmp_path / "fallback") as opened:
        yield opened


def _unwritable_dir(tmp_path: Path) -> tuple[Path, object]:
    """Return a directory path no file can be created in, and a callable that repairs it.

    Tests run as root, where ``chmod 0o500`` does not stop writes; then the "directory" is a
    path under a regular file (ENOTDIR), which fails for root too.
    """
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        (ro / "probe").touch()
    except PermissionError:

        def repair_chmod() -> None:
            ro.chmod(0o700)

        return ro, repair_chmod
    (ro / "probe").unlink()
    ro.chmod(0o700)
    blocker = tmp_path / "blocker"
    blocker.write_text("a regular file where a directory should be")

    def repair_blocker() -> None:
        blocker.unlink()
        blocker.mkdir()

    return blocker, repair_blocker


# --------------------------------------------------------------------------- basics


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    """A record with every field set reads back equal, content included when store_content=True."""
    record = _full_record()
    with Ledger(tmp_path / "l.db", store_content=True) as led:
        assert led.write(record) == "committed"
        assert led.records() == [record]


def test_content_dropped_unless_store_content(ledger: Ledger) -> None:
    """Without store_content the request text is set to None before writing."""
    ledger.write(_full_record(content="the whole prompt"))
    (stored,) = ledger.records()
    assert stored.content is None
    assert stored.cache_read_tokens == 5100


def test_columns_follow_otel_genai_names(ledger: Ledger) -> None:
    """Table calls uses the OpenTelemetry GenAI names for usage, conversation, model, provider."""
    ledger.write(_full_record())
    conn = sqlite3.connect(ledger.path)
    names = [row[1] for row in conn.execute("PRAGMA table_info(calls)")]
    for otel in (
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_creation.input_tokens",
        "gen_ai.conversation.id",
        "gen_ai.request.model",
        "gen_ai.provider.name",
    ):
        assert otel in names
    assert names == list(COLUMNS.values())
    row = conn.execute(
        'SELECT "gen_ai.usage.input_tokens", "gen_ai.usage.cache_read.input_tokens", '
        '"gen_ai.usage.cache_creation.input_tokens", "gen_ai.conversation.id", ts_utc, '
        "verdict_detail FROM calls"
    ).fetchone()
    conn.close()
    assert row == (
        5210,
        5100,
        100,
        "conv-7",
        "2026-06-01T12:00:00.000000+00:00",
        '{"gap_s":12.5,"ttl_s":300}',
    )


def test_write_is_idempotent_by_record_id(ledger: Ledger) -> None:
    """Writing the same record_id twice stores one row."""
    record = _record()
    assert ledger.write(record) == "committed"
    assert ledger.write(record) == "committed"
    assert [r.record_id for r in ledger.records()] == [record.record_id]


def test_filters_and_time_order(ledger: Ledger) -> None:
    """records() filters by session and since, oldest first; a naive since is rejected."""
    late = _record(session_id="a", ts_utc=T0 + timedelta(minutes=5))
    early = _record(session_id="a", ts_utc=T0)
    other = _record(session_id="b", ts_utc=T0 + timedelta(minutes=1))
    for rec in (late, early, other):
        ledger.write(rec)
    assert ledger.records() == [early, other, late]
    assert ledger.records(session_id="a") == [early, late]
    assert ledger.records(since=T0 + timedelta(minutes=1)) == [other, late]
    assert list(ledger.iter_records(session_id="b")) == [other]
    with pytest.raises(InputError) as info:
        ledger.records(since=datetime(2026, 1, 1))
    assert info.value.code == "ledger-since-naive"


def test_last_for_lineage_is_latest_by_time_and_indexed(ledger: Ledger) -> None:
    """last_for_lineage returns the newest record of that lineage (not the last inserted)."""
    newest = _record(lineage="L1", ts_utc=T0 + timedelta(seconds=30))
    ledger.write(newest)
    ledger.write(_record(lineage="L1", ts_utc=T0))
    ledger.write(_record(lineage="L2", ts_utc=T0 + timedelta(hours=1)))
    assert ledger.last_for_lineage("L1") == newest
    assert ledger.last_for_lineage("nope") is None
    conn = sqlite3.connect(ledger.path)
    plan = " ".join(
        str(row[-1])
        for row in conn.execute(
            'EXPLAIN QUERY PLAN SELECT * FROM calls WHERE "lineage" = ? '
            'ORDER BY "ts_utc" DESC, rowid DESC LIMIT 1',
            ("L1",),
        )
    )
    conn.close()
    assert "calls_lineage_ts" in plan


def test_recent_for_lineage_lists_newest_first_with_spilled_records(tmp_path: Path) -> None:
    """recent_for_lineage returns up to ``limit`` records of one lineage, newest first,
    including records spilled since the last replay; a limit below 1 is refused."""
    db = tmp_path / "busy.db"
    led = Ledger(db, busy_timeout_s=0.02, fallback_dir=tmp_path / "fb")
    stored = [_record(lineage="L1", ts_utc=T0 + timedelta(seconds=s)) for s in (10, 30, 20)]
    for record in stored:
        led.write(record)
    led.write(_record(lineage="L2", ts_utc=T0 + timedelta(hours=1)))
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    spilled = _record(lineage="L1", ts_utc=T0 + timedelta(seconds=25))
    with pytest.warns(LedgerSpillWarning):
        assert led.write(spilled) == "spilled"
    blocker.execute("ROLLBACK")
    blocker.close()
    assert led.recent_for_lineage("L1") == [stored[1], spilled, stored[2], stored[0]]
    assert led.recent_for_lineage("L1", limit=2) == [stored[1], spilled]
    assert led.recent_for_lineage("nope") == []
    with pytest.raises(InputError) as info:
        led.recent_for_lineage("L1", limit=0)
    assert info.value.code == "ledger-limit"
    led.close()


def test_file_modes_are_0600_even_with_open_umask(tmp_path: Path) -> None:
    """The database, -wal and -shm files are 0600 with umask 0; so is a spill file."""
    old = os.umask(0)
    try:
        with Ledger(tmp_path / "m.db") as led:
            led.write(_record())
            for name in ("m.db", "m.db-wal", "m.db-shm"):
                mode = stat.S_IMODE((tmp_path / name).stat().st_mode)
                assert mode == 0o600, (name, oct(mode))
        (tmp_path / "dir.db").mkdir()
        spilling = Ledger(tmp_path / "dir.db", fallback_dir=tmp_path / "fb")
        with pytest.warns(LedgerSpillWarning):
            assert spilling.write(_record()) == "spilled"
        assert stat.S_IMODE(spilling.spill_path.stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_write_rejects_non_records(ledger: Ledger) -> None:
    """Passing something that is not a UsageRecord is a caller error with a code."""
    with pytest.raises(InputError) as info:
        ledger.write({"wire_format": "anthropic"})  # type: ignore[arg-type]
    assert info.value.code == "ledger-record-type"


def test_close_then_write_reopens(tmp_path: Path) -> None:
    """After close() a write reopens the database instead of failing."""
    led = Ledger(tmp_path / "c.db")
    led.close()
    led.close()
    assert led.write(_record()) == "committed"
    assert len(led.records()) == 1
    led.close()


# --------------------------------------------------------------------------- concurrency


def test_eight_threads_500_writes_each_lose_nothing(ledger: Ledger) -> None:
    """8 threads x 500 concurrent writes on one Ledger commit all 4,000 rows."""
    barrier = threading.Barrier(8)
    written: list[list[str]] = [[] for _ in range(8)]
    outcomes: list[set[str]] = [set() for _ in range(8)]

    def work(index: int) -> None:
        barrier.wait()
        for turn in range(500):
            rec = _record(lineage=f"L{index}", turn=turn)
            outcomes[index].add(ledger.write(rec))
            written[index].append(rec.record_id)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(out == {"committed"} for out in outcomes)
    stored = {r.record_id for r in ledger.records()}
    assert len(stored) == 4000
    assert stored == {rid for ids in written for rid in ids}
    assert not ledger.spill_path.exists()


_WRITER = r"""
import sys
from stableprompt._ledger._ledger import Ledger
from stableprompt._ledger._usage_record import UsageRecord

db, tag, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
led = Ledger(db)
print("ready", flush=True)
sys.stdin.readline()
ids = []
for turn in range(count):
    rec = UsageRecord(wire_format="openai-chat", lineage=tag, turn=turn)
    if led.write(rec) != "committed":
        print("not-committed", flush=True)
    ids.append(rec.record_id)
print(",".join(ids), flush=True)
"""


def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    """Two processes released together, 500 writes each, commit all 1,000 rows."""
    db = tmp_path / "multi.db"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(db), f"proc{i}", "500"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    expected: set[str] = set()
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        assert "not-committed" not in out
        expected.update(out.strip().split(","))
    assert len(expected) == 1000
    with Ledger(db) as led:
        stored = led.records()
    assert {r.record_id for r in stored} == expected
    assert {r.lineage for r in stored} == {"proc0", "proc1"}


_KILLED_WRITER = r"""
import sys
from stableprompt._ledger._ledger import Ledger
from stableprompt._ledger._usage_record import UsageRecord

led = Ledger(sys.argv[1])
for turn in range(1_000_000):
    rec = UsageRecord(wire_format="anthropic", lineage="killed", turn=turn,
                      usage_raw={"pad": "x" * 512})
    if led.write(rec) == "committed":
        sys.stdout.write(rec.record_id + "\n")
        sys.stdout.flush()
"""


def test_writer_killed_with_sigkill_loses_no_committed_row(tmp_path: Path) -> None:
    """Every row a SIGKILLed writer reported committed is stored; the DB passes integrity_check."""
    db = tmp_path / "killed.db"
    with subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(db)], stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None
        reported: list[str] = []
        for line in proc.stdout:
            reported.append(line.strip())
            if len(reported) >= 400:
                break
        os.kill(proc.pid, signal.SIGKILL)
        reported.extend(proc.stdout.read().split())
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    committed = {rid for rid in reported if re.fullmatch(r"[0-9a-f]{32}", rid)}
    assert len(committed) >= 400
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    with Ledger(db) as led:
        stored = {r.record_id for r in led.records()}
    assert committed <= stored


def test_forked_child_uses_its_own_connection(tmp_path: Path) -> None:
    """A Ledger opened before os.fork() writes from the child through a fresh connection."""
    if not hasattr(os, "fork"):
        pytest.skip("no os.fork on this platform")
    led = Ledger(tmp_path / "fork.db")
    parent_rec = _record(lineage="parent")
    led.write(parent_rec)
    child_rec = _record(lineage="child")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads, 3.12+
        pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 0 if led.write(child_rec) == "committed" else 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert led.write(_record(lineage="parent-again")) == "committed"
    assert {r.lineage for r in led.records()} == {"parent", "child", "parent-again"}
    led.close()


# --------------------------------------------------------------------------- failures


def test_unusable_db_path_spills_next_to_it_warns_once_and_replays(tmp_path: Path) -> None:
    """A DB path that cannot be opened spills to <db>.spill.jsonl, warns once, replays later."""
    db = tmp_path / "ledger.db"
    db.mkdir()  # a directory where the database file should be: a real open failure
    led = Ledger(db, fallback_dir=tmp_path / "fallback")
    assert led.open_error is not None
    first, second = _record(turn=1), _record(turn=2)
    with pytest.warns(LedgerSpillWarning, match=re.escape(str(led.spill_path))) as caught:
        assert led.write(first) == "spilled"
        assert led.write(second) == "spilled"
    assert len([w for w in caught if w.category is LedgerSpillWarning]) == 1
    lines = led.spill_path.read_bytes().splitlines()
    assert [UsageRecord.from_json(line) for line in lines] == [first, second]
    with pytest.raises(LedgerError, match=re.escape(str(db))) as info:
        led.records()
    assert info.value.code == "ledger-unavailable"
    db.rmdir()
    assert led.replay_spill() == 2
    assert led.records() == [first, second]
    assert not led.spill_path.exists()
    assert led.replay_spill() == 0
    assert len(led.records()) == 2
    led.close()


def test_read_only_directory_spills_to_fallback_and_replays(tmp_path: Path) -> None:
    """A DB in an unwritable directory spills to the fallback dir; the write still returns."""
    directory, repair = _unwritable_dir(tmp_path)
    fallback = tmp_path / "fallback"
    led = Ledger(directory / "ledger.db", fallback_dir=fallback)
    record = _record(content="kept only in memory of the call")
    with pytest.warns(LedgerSpillWarning, match=re.escape(str(fallback))):
        assert led.write(record) == "spilled"
    (spill,) = fallback.iterdir()
    assert spill.name.endswith(".ledger.db.spill.jsonl")
    assert stat.S_IMODE(spill.stat().st_mode) == 0o600
    with pytest.raises(LedgerError):
        led.records()
    repair()  # type: ignore[operator]
    assert led.replay_spill() == 1
    assert led.records() == [record.model_copy(update={"content": None})]
    assert list(fallback.iterdir()) == []
    led.close()


def test_nothing_writable_keeps_records_in_memory(tmp_path: Path) -> None:
    """With no writable DB or spill location the record stays in ledger.unflushed and warns."""
    blocker = tmp_path / "blocker"
    blocker.write_text("file")
    led = Ledger(blocker / "ledger.db", fallback_dir=blocker / "fallback")
    record = _record()
    with pytest.warns(LedgerSpillWarning, match="unflushed"):
        assert led.write(record) == "unflushed"
    assert led.unflushed == [record]
    blocker.unlink()
    blocker.mkdir()
    assert led.replay_spill() == 1
    assert led.unflushed == []
    assert led.records() == [record]
    led.close()


def test_warnings_as_errors_do_not_break_the_write(tmp_path: Path) -> None:
    """Even with warnings turned into errors, a failing write returns and spills."""
    db = tmp_path / "x.db"
    db.mkdir()
    led = Ledger(db, fallback_dir=tmp_path / "fb")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert led.write(_record()) == "spilled"
    assert len(led.spill_path.read_bytes().splitlines()) == 1


def test_lock_held_too_long_retries_then_spills(tmp_path: Path) -> None:
    """A write blocked by another writer's lock retries, then spills, and replay imports it."""
    db = tmp_path / "busy.db"
    led = Ledger(db, busy_timeout_s=0.02, fallback_dir=tmp_path / "fb")
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    record = _record()
    with pytest.warns(LedgerSpillWarning, match="locked"):
        assert led.write(record) == "spilled"
    blocker.execute("ROLLBACK")
    blocker.close()
    assert led.last_for_lineage("sp1:head") == record  # spilled records still count
    assert led.replay_spill() == 1
    assert led.records() == [record]
    led.close()


def test_corrupt_database_spills_and_reading_raises(tmp_path: Path) -> None:
    """A file that is not SQLite spills writes and makes records() raise LedgerError."""
    db = tmp_path / "junk.db"
    db.write_bytes(b"this is not a database" * 100)
    led = Ledger(db, fallback_dir=tmp_path / "fb")
    with pytest.warns(LedgerSpillWarning):
        assert led.write(_record()) == "spilled"
    with pytest.raises(LedgerError, match="not a database"):
        led.records()
    with pytest.raises(LedgerError):
        led.export_jsonl(tmp_path / "never.jsonl")
    assert not (tmp_path / "never.jsonl").exists()


def test_replay_while_spilling_loses_and_duplicates_nothing(ledger: Ledger) -> None:
    """Spill appends racing with replay_spill end up in the database exactly once."""
    records = [_record(turn=i) for i in range(300)]

    def append_all() -> None:
        for rec in records:
            _spill.append_line(ledger.spill_path, rec.to_json())

    writer = threading.Thread(target=append_all)
    writer.start()
    replayed = 0
    while writer.is_alive():
        replayed += ledger.replay_spill()
    writer.join()
    replayed += ledger.replay_spill()
    assert replayed == 300
    assert sorted(r.turn or 0 for r in ledger.records()) == list(range(300))
    assert not ledger.spill_path.exists()
    assert list(ledger.path.parent.glob("*.replaying.*")) == []


def test_missing_parent_directories_are_created(tmp_path: Path) -> None:
    """A database path in directories that do not exist yet is created, directories 0700."""
    db = tmp_path / "a" / "b" / "ledger.db"
    with Ledger(db) as led:
        assert led.write(_record()) == "committed"
    assert stat.S_IMODE(db.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(db.stat().st_mode) == 0o600


# --------------------------------------------------------------------------- schema


def test_every_record_field_has_a_column() -> None:
    """COLUMNS covers every UsageRecord field, so a new field cannot be silently dropped."""
    assert list(COLUMNS) == list(UsageRecord.model_fields)
    assert len(set(COLUMNS.values())) == len(COLUMNS)


def test_new_database_gets_current_schema_version(ledger: Ledger) -> None:
    """A fresh ledger is at SCHEMA_VERSION, in WAL mode."""
    conn = sqlite3.connect(ledger.path)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()


def test_migrates_from_version_zero(tmp_path: Path) -> None:
    """An existing SQLite file at user_version 0 is migrated in place."""
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE unrelated (x INTEGER)")
    conn.commit()
    conn.close()
    with Ledger(db) as led:
        assert led.write(_record()) == "committed"
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,) == (5,)
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    conn.close()
    assert tables == {"calls", "meta", "unrelated", "call_rollups"}


def test_appended_migration_upgrades_old_file_keeping_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A migration appended to the list upgrades a current file and keeps its rows."""
    db = tmp_path / "v2.db"
    record = _full_record()
    with Ledger(db) as led:
        led.write(record)
    v3 = ('ALTER TABLE calls ADD COLUMN "gen_ai.response.finish_reasons" TEXT',)
    monkeypatch.setattr(_ledger, "_MIGRATIONS", (*_ledger._MIGRATIONS, v3))
    with Ledger(db) as led:
        assert led.records() == [record.model_copy(update={"content": None})]
        assert led.write(_record()) == "committed"
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION + 1,)
    names = [row[1] for row in conn.execute("PRAGMA table_info(calls)")]
    conn.close()
    assert names[-1] == "gen_ai.response.finish_reasons"


def test_newer_schema_is_refused_for_reading_and_spills_writes(tmp_path: Path) -> None:
    """A file from a newer stableprompt is not touched: reads raise, writes spill."""
    db = tmp_path / "new.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    led = Ledger(db, fallback_dir=tmp_path / "fb")
    with pytest.raises(LedgerError, match="schema version 99"):
        led.records()
    assert isinstance(led.open_error, LedgerError)
    assert led.open_error.code == "ledger-schema-newer"
    with pytest.warns(LedgerSpillWarning):
        assert led.write(_record()) == "spilled"


def _v1_ledger(db: Path, monkeypatch: pytest.MonkeyPatch, *records: UsageRecord) -> None:
    """Write a schema v1 ledger (before the meta table), as stableprompt 0.1 did."""
    with Ledger(db) as led:
        for record in records:
            assert led.write(record) == "committed"
    downgrade(db, 1)


def test_v1_file_migrates_with_an_empty_meta_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a v1 ledger for writing adds the meta table (v2), the request_headers
    column (v3) and the segment_digests column (v4), and keeps its rows (their headers and
    outlines unknown: ``None``)."""
    db = tmp_path / "v1.db"
    record = _full_record()
    _v1_ledger(db, monkeypatch, record)
    with Ledger(db) as led:
        assert led.meta() == {}
        led.set_meta("backend", "emulator")
        assert led.records() == [record.model_copy(update={
            "content": None, "request_headers": None, "segment_digests": None})]
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert conn.execute("SELECT key, value FROM meta").fetchall() == [("backend", "emulator")]
    conn.close()


# --------------------------------------------------------------------------- metadata


def test_meta_round_trips_replaces_and_sorts(ledger: Ledger) -> None:
    """set_meta stores key -> value text (a later value replaces an earlier one); meta()
    returns every pair with keys sorted, and key-shaped values are scrubbed."""
    assert ledger.meta() == {}
    ledger.set_meta("workload", "bfcl 2 sessions")
    ledger.set_meta("backend", "first")
    ledger.set_meta("backend", "stableprompt emulator (loopback): not a real provider")
    ledger.set_meta("note", f"key {FAKE_KEY}")
    meta = ledger.meta()
    assert list(meta) == ["backend", "note", "workload"]
    assert meta["backend"] == "stableprompt emulator (loopback): not a real provider"
    assert FAKE_KEY not in meta["note"] and "[REDACTED]" in meta["note"]
    with Ledger(ledger.path, read_only=True) as again:  # visible to another connection
        assert again.meta() == meta


@pytest.mark.parametrize(("key", "value"), [("", "v"), (1, "v"), ("k", None), ("k", 3)])
def test_set_meta_rejects_non_text(ledger: Ledger, key: object, value: object) -> None:
    """set_meta takes a non-empty str key and a str value; anything else is an InputError."""
    with pytest.raises(InputError) as info:
        ledger.set_meta(key, value)  # type: ignore[arg-type]
    assert info.value.code == "ledger-meta-invalid"
    assert ledger.meta() == {}


# --------------------------------------------------------------------------- read-only


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_read_only_reads_and_refuses_writes(tmp_path: Path) -> None:
    """A read-only Ledger reads records and metadata, refuses write/set_meta/replay_spill with
    InputError, and leaves the database file byte-identical."""
    db = tmp_path / "l.db"
    records = [_full_record(), _record(ts_utc=T0 + timedelta(seconds=1))]
    with Ledger(db) as led:
        for record in records:
            led.write(record)
        led.set_meta("backend", "emulator")
    before = _sha(db)
    ro = Ledger(db, read_only=True)
    assert ro.records() == [r.model_copy(update={"content": None}) for r in records]
    assert ro.meta() == {"backend": "emulator"}
    assert ro.last_for_lineage("sp1:head") == ro.records()[-1]
    for attempt in (lambda: ro.write(_record()), lambda: ro.set_meta("k", "v"),
                    ro.replay_spill):
        with pytest.raises(InputError) as info:
            attempt()
        assert info.value.code == "ledger-read-only"
    ro.close()
    assert _sha(db) == before
    assert "read_only=True" in repr(ro)


def test_read_only_v1_file_is_read_not_migrated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A schema v1 ledger opened read-only is read as it is: no meta table is added."""
    db = tmp_path / "v1.db"
    _v1_ledger(db, monkeypatch, _full_record())
    before = _sha(db)
    ro = Ledger(db, read_only=True)
    assert len(ro.records()) == 1 and ro.meta() == {}
    assert ro.records()[0].request_headers is None  # the v3 column it lacks: unknown
    assert ro.records()[0].segment_digests is None  # and v4's
    assert _sha(db) == before
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone() == (1,)
    conn.close()


def _foreign(path: Path, kind: str) -> None:
    if kind == "empty":
        path.touch()
    elif kind == "text":
        path.write_text("hello\n")
    else:
        conn = sqlite3.connect(path)
        if kind == "unrelated-calls":
            conn.execute("CREATE TABLE calls (id INTEGER, payload TEXT)")
        elif kind == "v1-unrelated-calls":
            conn.execute("CREATE TABLE calls (id INTEGER, payload TEXT)")
            conn.execute("PRAGMA user_version = 1")
        elif kind == "no-tables":
            conn.execute("PRAGMA user_version = 0")
        elif kind == "newer":
            conn.execute("PRAGMA user_version = 99")
        conn.commit()
        conn.close()


@pytest.mark.parametrize(("kind", "code", "words"), [
    ("missing", "ledger-not-found", "file not found"),
    ("empty", "ledger-not-a-ledger", "an empty file"),
    ("text", "ledger-not-a-ledger", "not a SQLite database"),
    ("no-tables", "ledger-not-a-ledger", "schema version 0, no 'calls' table"),
    ("unrelated-calls", "ledger-not-a-ledger", "schema version 0, an unrelated 'calls' table"),
    ("v1-unrelated-calls", "ledger-not-a-ledger", "table 'calls' lacks"),
    ("newer", "ledger-schema-newer", "schema version 99"),
])  # fmt: skip
def test_read_only_refuses_what_is_not_a_ledger(
    tmp_path: Path, kind: str, code: str, words: str
) -> None:
    """Read-only opening refuses a file that is not a stableprompt ledger, with a code and a
    message that says why, and leaves the file exactly as it was (never migrated)."""
    db = tmp_path / "x.db"
    if kind != "missing":
        _foreign(db, kind)
    before = _sha(db) if db.exists() else None
    with pytest.raises(LedgerError) as info:
        Ledger(db, read_only=True)
    assert info.value.code == code
    assert words in str(info.value) and str(db) in str(info.value)
    assert (_sha(db) if db.exists() else None) == before
    assert not db.with_name("x.db.spill.jsonl").exists()


# --------------------------------------------------------------------------- secrets


def test_redact_scrubs_key_shapes() -> None:
    """redact replaces sk-/sk-ant- keys, key headers, bearer tokens and key-named dict values."""
    assert redact(f"key {FAKE_KEY} end") == "key [REDACTED] end"
    assert redact("sk-proj-abcdefghijklmnop0123") == "[REDACTED]"
    assert redact("x-api-key: abc123") == "x-api-key: [REDACTED]"
    assert redact('{"api_key": "zzz-secret"}') == '{"api_key": "[REDACTED]"}'
    assert redact("Authorization: Bearer eyJhbGciOi.xyz") == "Authorization: Bearer [REDACTED]"
    assert redact("AIza" + "B" * 35) == "[REDACTED]"
    nested = {"X-Api-Key": "plain", "list": [f"a {FAKE_KEY}", 3, None], "n": 1.5}
    assert redact(nested) == {
        "X-Api-Key": "[REDACTED]",
        "list": ["a [REDACTED]", 3, None],
        "n": 1.5,
    }
    assert nested["X-Api-Key"] == "plain"  # input untouched
    # Ordinary text survives: short sk- words, task-ids, tokens counts.
    text = "risk-free task-1234567890abcdefghij sk-short cache_read_tokens=5"
    assert redact(text) == text
    assert redact(None) is None and redact(7) == 7


def test_the_ledger_scrubs_every_text_field_of_the_one_scrub_list(tmp_path: Path) -> None:
    """Every field of the one scrub list (PROVIDER_TEXT + CALLER_TEXT) is scrubbed of
    key-shaped text when written, the same fields the recorder scrubs."""
    from stableprompt._ledger._usage_record import CALLER_TEXT, PROVIDER_TEXT

    texts = {"session_id": f"s {FAKE_KEY}", "scenario": f"c {FAKE_KEY}",
             "model": f"m {FAKE_KEY}", "content": f"b {FAKE_KEY}",
             "error_class": f"E {FAKE_KEY}", "response_id": f"r {FAKE_KEY}",
             "usage_raw": {"echo": FAKE_KEY}, "verdict_detail": {"cause": FAKE_KEY},
             "diagnostics": {"note": FAKE_KEY},
             "request_headers": {"anthropic-beta": f"b-2026-01-01,{FAKE_KEY}"}}
    assert set(texts) == {*PROVIDER_TEXT, *CALLER_TEXT}
    with Ledger(tmp_path / "l.db", store_content=True) as led:
        led.write(_full_record(**texts))
        (stored,) = led.records()
    for name in texts:
        assert FAKE_KEY not in str(getattr(stored, name)), name
        assert "[REDACTED]" in str(getattr(stored, name)), name


def test_no_api_key_in_db_spill_or_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fake key in content, diagnostics, usage_raw and error_class reaches no file or log."""
    caplog.set_level("DEBUG")
    leaky = {
        "content": f'{{"x-api-key": "{FAKE_KEY}", "messages": ["{FAKE_KEY}"]}}',
        "diagnostics": {"note": f"auth {FAKE_KEY}", "x-api-key": FAKE_KEY},
        "usage_raw": {"input_tokens": 5, "echo": FAKE_KEY},
        "error_class": f"AuthError({FAKE_KEY})",
        "verdict_detail": {"cause": f"volatile {FAKE_KEY}"},
    }
    good_dir = tmp_path / "good"
    good_dir.mkdir()
    with Ledger(good_dir / "l.db", store_content=True) as led:
        assert led.write(_full_record(**leaky)) == "committed"
        (stored,) = led.records()
        assert stored.content is not None and "[REDACTED]" in stored.content
        led.export_jsonl(good_dir / "export.jsonl")
    bad = tmp_path / "bad.db"
    bad.mkdir()
    spilling = Ledger(bad, store_content=True, fallback_dir=tmp_path / "fb")
    with pytest.warns(LedgerSpillWarning):
        assert spilling.write(_full_record(**leaky)) == "spilled"
    files = [*good_dir.iterdir(), spilling.spill_path]
    assert {p.name for p in files} >= {"l.db", "export.jsonl", "bad.db.spill.jsonl"}
    for path in files:
        assert b"TESTKEY" not in path.read_bytes(), path
    captured = capsys.readouterr()
    assert caplog.text and "TESTKEY" not in caplog.text
    assert "TESTKEY" not in captured.out + captured.err


# --------------------------------------------------------------------------- export


def test_export_jsonl_round_trips(ledger: Ledger, tmp_path: Path) -> None:
    """export_jsonl writes one line per record that UsageRecord.from_json restores exactly."""
    records = [_full_record(turn=i, ts_utc=T0 + timedelta(seconds=i)) for i in range(3)]
    for rec in records:
        ledger.write(rec)
    expected = [rec.model_copy(update={"content": None}) for rec in records]
    target = tmp_path / "out.jsonl"
    assert ledger.export_jsonl(target) == 3
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    lines = target.read_bytes().splitlines()
    assert [UsageRecord.from_json(line) for line in lines] == expected
    assert json.loads(lines[0])["verdict"] == "hit"
    text = io.StringIO()
    assert ledger.export_jsonl(text) == 3
    binary = io.BytesIO()
    assert ledger.export_jsonl(binary) == 3
    assert text.getvalue().encode() == binary.getvalue() == target.read_bytes()


def test_export_otel_emits_genai_spans() -> None:
    """export_otel emits one CLIENT span per record with gen_ai.* attributes and no content."""
    pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind, StatusCode

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    ok = _full_record()
    failed = _full_record(
        wire_format="gemini",
        model="gemini-2.5-pro",
        error_class="ProviderHTTPError",
        status_code=429,
        input_tokens_total=None,
        latency_ms=None,
    )
    assert export_otel([ok, failed], tracer=provider.get_tracer("test")) == 2
    first, second = exporter.get_finished_spans()
    assert first.name == "chat claude-sonnet-4-5"
    assert first.kind is SpanKind.CLIENT
    assert first.start_time == int(T0.timestamp() * 1e9)
    assert first.end_time is not None and first.start_time is not None
    assert first.end_time - first.start_time == 812_250_000
    attrs = dict(first.attributes or {})
    assert attrs["gen_ai.usage.input_tokens"] == 5210
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 5100
    assert attrs["gen_ai.usage.cache_creation.input_tokens"] == 100
    assert attrs["gen_ai.usage.output_tokens"] == 42
    assert attrs["gen_ai.conversation.id"] == "conv-7"
    assert attrs["gen_ai.provider.name"] == "anthropic"
    assert attrs["gen_ai.request.model"] == "claude-sonnet-4-5"
    assert attrs["gen_ai.response.id"] == "msg_02"
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["stableprompt.verdict"] == "hit"
    assert attrs["stableprompt.lcp_tokens"] == 5100
    assert not any("content" in key for key in attrs)
    attrs2 = dict(second.attributes or {})
    assert second.name == "generate_content gemini-2.5-pro"
    assert "gen_ai.usage.input_tokens" not in attrs2
    assert attrs2["error.type"] == "ProviderHTTPError"
    assert attrs2["http.response.status_code"] == 429
    assert second.status.status_code is StatusCode.ERROR


def test_export_otel_without_opentelemetry_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without opentelemetry installed, export_otel raises ConfigurationError naming the extra."""
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(ConfigurationError, match=re.escape("pip install 'stableprompt[otel]'")):
        export_otel([_record()])


@pytest.mark.parametrize("path", ["", 5, None])
def test_a_bad_ledger_path_is_a_typed_error(path: object) -> None:
    """An empty, non-string or missing path is an InputError, not the working directory or
    a bare TypeError (review finding)."""
    with pytest.raises(InputError) as info:
        Ledger(path)  # type: ignore[arg-type]
    assert info.value.code == "ledger-path"
