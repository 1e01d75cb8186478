"""The report's own read of the ledger (`_ledger/_lean.py`, issue 30 item 1): the same records
as `Ledger.iter_records` but for the outline it leaves out, the same corrupt rows named the same
way, and the same `stableprompt report` text, `--json` and `--html` on the demo ledgers, a
ledger of every kind of row, a ledger with corrupted rows (hypothesis), and PostgreSQL."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stableprompt import Ledger, UsageRecord
from stableprompt._cli import main
from stableprompt._ledger._lean import REPORT_FIELDS, iter_report_records, report_record
from stableprompt._ledger._schema import (
    COLUMNS,
    INSERT_SQL,
    OUTLINE_UNREADABLE,
    SELECT_COLUMNS,
    to_row,
)
from stableprompt._report import _command
from stableprompt._report._command import open_ledger
from test_ledger_decode import BASE, FULL, MINIMAL, _values
from test_report_stream import _every_kind


def _fields(record: UsageRecord) -> dict[str, Any]:
    """The record's fields but the outline the report's read leaves out (and the note of an
    unreadable one, which no report number reads)."""
    out = {k: v for k, v in record.__dict__.items() if k != "segment_digests"}
    out["verdict_detail"] = {k: v for k, v in record.verdict_detail.items()
                             if k != OUTLINE_UNREADABLE}
    return out


_Read = tuple[list[dict[str, Any]], list[tuple[str, str]]]


def _both(ledger: Ledger) -> tuple[_Read, _Read]:
    """``(full, lean)``: each read's records (their fields but the outline) and corrupt rows
    (``(id, error text)``), in order."""
    out: list[_Read] = []
    for lean in (False, True):
        bad: list[tuple[str, str]] = []

        def on_invalid(row_id: str, exc: Exception, bad: list[tuple[str, str]] = bad) -> None:
            bad.append((row_id, f"{type(exc).__name__}: {exc}"))

        if lean:
            where, params = ledger._where(None, None)
            records = list(iter_report_records(ledger, where, params, on_invalid))
            assert all(r.segment_digests is None for r in records)
        else:
            records = list(ledger.iter_records(on_invalid=on_invalid))
        out.append(([_fields(r) for r in records], bad))
    return out[0], out[1]


def test_sound_rows_decode_to_the_full_records_but_the_outline() -> None:
    """A row of every field and a minimal one decode from the report's columns to the
    records ``from_row`` gives (the outline ``None``)."""
    for record in (FULL, MINIMAL):
        row = to_row(record)
        lean = report_record(tuple(v for f, v in zip(COLUMNS, row, strict=True)
                                   if f in REPORT_FIELDS))
        assert lean is not None
        assert _fields(lean) == _fields(record)
        assert lean.segment_digests is None


def test_demo_and_every_kind_ledgers_read_the_same(demo_ledger_files: list[Path],
                                                   tmp_path: Path) -> None:
    """On the demo ledgers and a ledger of every kind of row (stored bodies, pings, failed
    and suspect calls), the report's read gives every record ``iter_records`` gives, in
    order, and no corrupt row."""
    for path in (*demo_ledger_files, _every_kind(tmp_path / "every.db")):
        full, lean = _both(open_ledger(path))
        assert lean == full
        assert full[1] == [] and len(full[0]) > 50


_NAMES = list(COLUMNS)


@pytest.fixture(scope="module")
def corrupt_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger file of the current schema holding one good row (changed per example)."""
    path = tmp_path_factory.mktemp("lean-corrupt") / "c.db"
    Ledger(path).close()
    return path


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(st.dictionaries(st.sampled_from(_NAMES), _values, max_size=3),
                        min_size=1, max_size=4),
       base=st.sampled_from([BASE, to_row(MINIMAL)]))
def test_corrupted_rows_are_skipped_and_named_the_same(
        corrupt_ledger: Path, changes: list[dict[str, Any]], base: tuple[Any, ...]) -> None:
    """Rows with any columns replaced (another type, a negative count, NaN, a naive
    timestamp, JSON that is not an object or nests too deep, an unreadable outline, ...)
    between good rows: the report's read gives the same records and names the same corrupt
    rows with the same errors as ``iter_records``."""
    conn = sqlite3.connect(corrupt_ledger)
    conn.execute("DELETE FROM calls")
    rows = []
    for i, change in enumerate(changes):
        good = tuple(f"good-{i}" if n == "record_id" else v
                     for n, v in zip(_NAMES, BASE, strict=True))
        bad = tuple(f"bad-{i}" if n == "record_id" and "record_id" not in change
                    else change.get(n, v) for n, v in zip(_NAMES, base, strict=True))
        rows += [good, bad]
    for row in rows:
        try:
            conn.execute(INSERT_SQL, row)
        except (sqlite3.Error, OverflowError):
            continue  # a value SQLite refuses (a NULL in a NOT NULL column, a 70-bit int)
    conn.commit()
    conn.close()
    full, lean = _both(open_ledger(corrupt_ledger))
    assert lean == full


def _report(path: str, args: list[str], capsys: pytest.CaptureFixture[str],
            tmp_path: Path) -> list[str]:
    """``stableprompt report`` text, ``--json`` (and the HTML page) with ``args``."""
    out = []
    assert main(["report", path, *args]) == 0
    out.append(capsys.readouterr().out)
    assert main(["report", path, "--json", *args]) == 0
    out.append(capsys.readouterr().out)
    page = tmp_path / "r.html"
    assert main(["report", path, "--html", str(page), *args]) == 0
    capsys.readouterr()
    out.append(page.read_text())
    return out


def _full_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``stableprompt report`` read with ``iter_records`` (the reference)."""
    real = _command.stream_records

    def full(*args: Any, **kwargs: Any) -> Any:
        kwargs["lean"] = False
        return real(*args, **kwargs)

    monkeypatch.setattr(_command, "stream_records", full)


def _reports_agree(path: str, args: list[str], capsys: pytest.CaptureFixture[str],
                   tmp_path: Path) -> list[str]:
    lean = _report(path, args, capsys, tmp_path)
    with pytest.MonkeyPatch.context() as mp:
        _full_read(mp)
        full = _report(path, args, capsys, tmp_path)
    assert lean == full
    return lean


def test_report_outputs_are_the_same(demo_ledger_files: list[Path], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The report's text, ``--json`` and HTML page are the same bytes read either way, on
    the demo ledgers (also grouped by agent, per call), a ledger of every kind of row and a
    ledger with corrupt rows (named in the notes)."""
    every = _every_kind(tmp_path / "every.db")
    for path in (*demo_ledger_files, every):
        _reports_agree(str(path), [], capsys, tmp_path)
    _reports_agree(str(demo_ledger_files[0]), ["--by", "agent", "--calls", "--limit", "40"],
                   capsys, tmp_path)
    conn = sqlite3.connect(every)
    conn.execute("UPDATE calls SET verdict_detail = '{' WHERE record_id = 'r0004'")
    conn.execute("UPDATE calls SET \"gen_ai.usage.output_tokens\" = 'x' WHERE record_id = 'r0009'")
    conn.execute("UPDATE calls SET segment_digests = 'nope' WHERE record_id = 'r0001'")
    conn.execute("UPDATE calls SET latency_ms = 5 WHERE record_id = 'r0002'")
    conn.commit()
    conn.close()
    text, data, _ = _reports_agree(str(every), [], capsys, tmp_path)
    skipped = json.loads(data)["corrupt_rows"]
    assert sorted(row["id"] for row in skipped) == ["r0004", "r0009"]
    assert "2 corrupt rows skipped" in text


def _copy_to(url: str, source: Path) -> None:
    """Write the rows of a SQLite ledger into the PostgreSQL ledger at ``url``."""
    conn = sqlite3.connect(source)
    rows = conn.execute(f"SELECT {SELECT_COLUMNS} FROM calls ORDER BY ts_utc, rowid").fetchall()
    conn.close()
    from stableprompt._ledger._schema import from_row

    ledger = Ledger(url)
    for row in rows:
        ledger.write(from_row(row))
    ledger.close()


def test_postgres_reads_and_reports_the_same(pg_url: str, demo_ledger_files: list[Path],
                                             tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A PostgreSQL ledger of the demo's rows: the report's read gives the records
    ``iter_records`` gives, and the report the same text, JSON and HTML either way."""
    _copy_to(pg_url, demo_ledger_files[0])
    full, lean = _both(open_ledger(pg_url))
    assert lean == full and len(full[0]) > 50
    _reports_agree(pg_url, [], capsys, tmp_path)
