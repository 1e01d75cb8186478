"""Write a large synthetic ledger (default 1,000,000 calls) for the report benchmark.

The rows are real rows, replicated: the templates are the ledgers the offline demo writes
(``stableprompt.demo.run_demo`` over ``synthetic_workload()``, Anthropic Messages and OpenAI
Chat Completions against the emulator; 13 scenarios, each with its own verdict mix:
hits, cold starts, client mutations with causes, segments, paths and snippets, expired
TTLs, server diagnoses). Each copy ``k`` of the templates gets its own record ids (32 hex
digits, as the recorder's), session ids, lineages and predecessor ids, and its delta outlines
name their bases' copies (so predecessors and outline bases stay inside a copy, as in a real
ledger),
and is shifted by ``k * SHIFT_S`` seconds (1,800 copies cover about a month). One row in
:data:`FAIL_EVERY` becomes a failed call (no usage, HTTP 529, verdict ``unknown``), so
exclusions and unknown costs are exercised too. Rows are written with one ``executemany``
per copy into a ledger created by :class:`stableprompt.Ledger` (current schema, indexes).

Run once, reuse the file (the machine is shared):

    PYTHONPATH=src python benchmarks/ledger_gen.py benchmarks/.work/ledger-1m.db [--calls N]

A ``postgresql://`` URL instead of a path writes the same rows into that (empty) database:
the schema made by :class:`stableprompt.Ledger`, the rows sent with ``COPY`` (the rollup
trigger runs on each, as on an insert).

It takes about a minute; the file is about 1 GB. Deterministic for a given N (the templates
are made with the demo's fixed seeds and clock)."""

from __future__ import annotations

import argparse
import hashlib
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from stableprompt import Ledger
from stableprompt._ledger._outline_text import delta_base
from stableprompt._ledger._schema import COLUMNS, INSERT_SQL, SELECT_COLUMNS, ts_text
from stableprompt._usage import USAGE_FIELDS

SHIFT_S = 1500
"""Seconds between copies of the template rows."""

FAIL_EVERY = 97
"""One row in this many becomes a failed call (usage unknown)."""

_INDEX = {name: i for i, name in enumerate(COLUMNS)}


def templates(work: Path) -> list[tuple[Any, ...]]:
    """The demo's rows (Anthropic then OpenAI), in time order."""
    from stableprompt.demo import run_demo, synthetic_workload

    rows: list[tuple[Any, ...]] = []
    workload = synthetic_workload()
    for provider in ("anthropic", "openai"):
        path = work / f"demo-{provider}.db"
        if not path.exists():
            run_demo(workload, provider=provider, ledger_path=path)
        conn = sqlite3.connect(path)
        rows += conn.execute(f'SELECT {SELECT_COLUMNS} FROM calls ORDER BY "ts_utc", rowid'
                             ).fetchall()
        conn.close()
    return rows


def _suffix(value: Any, k: int) -> Any:
    return None if value is None else f"{value}~{k}"


def _copy_id(value: Any, k: int) -> Any:
    """Copy ``k``'s record id for template id ``value``: 32 hex digits, as the recorder
    writes (a delta outline names its base by such an id)."""
    if value is None:
        return None
    return hashlib.blake2b(f"{value}~{k}".encode(), digest_size=16).hexdigest()


def _copy_outline(text: Any, k: int) -> Any:
    """A delta outline (format 2) of copy ``k`` continues its base's copy (the same copy)."""
    base = None if text is None else delta_base(text)
    return text if base is None else text.replace(base, _copy_id(base, k), 1)


def copy_rows(rows: list[tuple[Any, ...]], k: int) -> list[tuple[Any, ...]]:
    """Copy ``k`` of the template rows (module docstring)."""
    out = []
    shift = timedelta(seconds=k * SHIFT_S)
    for n, row in enumerate(rows):
        values = list(row)
        for name in ("session_id", "lineage"):
            values[_INDEX[name]] = _suffix(values[_INDEX[name]], k)
        for name in ("record_id", "predecessor_id"):
            values[_INDEX[name]] = _copy_id(values[_INDEX[name]], k)
        values[_INDEX["segment_digests"]] = _copy_outline(values[_INDEX["segment_digests"]], k)
        values[_INDEX["ts_utc"]] = ts_text(datetime.fromisoformat(row[_INDEX["ts_utc"]]) + shift)
        if (n + k) % FAIL_EVERY == 0:
            for name in USAGE_FIELDS:
                values[_INDEX[name]] = None
            values[_INDEX["usage_raw"]] = None
            values[_INDEX["verdict"]] = "unknown"
            values[_INDEX["verdict_detail"]] = '{"reason":"no-usage"}'
            values[_INDEX["status_code"]] = 529
            values[_INDEX["error_class"]] = "overloaded_error"
        out.append(tuple(values))
    return out


def batches(calls: int) -> Iterator[list[tuple[Any, ...]]]:
    """The rows of a ``calls``-row ledger, one copy of the templates at a time."""
    with tempfile.TemporaryDirectory() as work:
        rows = templates(Path(work))
    written, k = 0, 0
    while written < calls:
        batch = copy_rows(rows, k)[: calls - written]
        yield batch
        written += len(batch)
        k += 1


def generate_pg(url: str, calls: int) -> int:
    """Write ``calls`` rows into the empty PostgreSQL database at ``url`` (schema by
    :class:`stableprompt.Ledger`, rows by ``COPY``); returns the rows written."""
    import psycopg

    Ledger(url).close()  # the current schema, migrated, with its indexes and trigger
    written = 0
    with psycopg.connect(url, autocommit=False) as conn:
        if conn.execute("SELECT count(*) FROM calls").fetchone() != (0,):
            raise SystemExit("the database's ledger is not empty")
        for batch in batches(calls):
            sql = f"COPY calls ({SELECT_COLUMNS}) FROM STDIN"
            with conn.cursor() as cur, cur.copy(sql) as copy:
                for row in batch:
                    copy.write_row(row)
            conn.commit()
            written += len(batch)
        conn.execute("ANALYZE calls")
        conn.commit()
    return written


def generate(path: Path, calls: int) -> int:
    """Write ``calls`` rows to a new ledger at ``path``; returns the rows written."""
    if path.exists():
        raise SystemExit(f"{path} exists; delete it first")
    path.parent.mkdir(parents=True, exist_ok=True)
    Ledger(path).close()  # the current schema, migrated, with its indexes
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    written = 0
    for batch in batches(calls):
        conn.executemany(INSERT_SQL, batch)
        conn.commit()
        written += len(batch)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="a SQLite file to create, or a postgresql:// URL")
    parser.add_argument("--calls", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.path.startswith("postgresql://"):
        written = generate_pg(args.path, args.calls)
        print(f"{written:,} rows -> PostgreSQL in {time.perf_counter() - start:.1f} s",
              file=sys.stderr)
        return 0
    path = Path(args.path)
    written = generate(path, args.calls)
    print(f"{written:,} rows -> {path} ({path.stat().st_size / 1e6:,.0f} MB) in "
          f"{time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
