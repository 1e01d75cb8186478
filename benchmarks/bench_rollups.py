"""What the ledger's rollups (schema v5, issue 30 item 1) cost and give, in one run.

* ``write``: ``Ledger.write`` of the same records into a fresh SQLite ledger with the rollup
  trigger and into one whose trigger was dropped (the ledger as v4 wrote it), alternated in
  rounds; microseconds per row and the ratio (the trigger's upsert runs in the insert's own
  statement).
* ``backfill``: the v5 migration's one-time build of the rollups from existing rows: its
  grouped ``SELECT`` (``_rollups.aggregate_select``) timed over a generated ledger, read-only
  (what an old ledger's migration and a read-only ``report --rollups`` of a v4 ledger run).
* ``read``: reading the rollup table (``_reads.rollup_rows``) against that aggregate over
  the rows, and the calls they count (equal).

    PYTHONPATH=src python benchmarks/ledger_gen.py benchmarks/.work/ledger-200k.db --calls 200000
    PYTHONPATH=src python benchmarks/bench_rollups.py benchmarks/.work/ledger-200k.db

Prints Markdown lines and the machine; the numbers go to ``RESULTS.md`` by hand.
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from stableprompt import Ledger, UsageRecord
from stableprompt._ledger._reads import rollup_rows
from stableprompt._ledger._rollups import ROLLUP_TABLE, aggregate_select


def _records(n: int) -> list[UsageRecord]:
    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    return [UsageRecord(
        ts_utc=t0 + timedelta(seconds=13 * i), session_id=f"s{i % 50}", turn=i,
        scenario=f"sc{i % 7}", wire_format="anthropic", provider="anthropic",
        model="claude-sonnet-4-5", lineage=f"sp2:{i % 50}", input_tokens_total=5000 + i,
        cache_read_tokens=4000, cache_write_tokens=600, cache_write_5m_tokens=600,
        cache_write_1h_tokens=0, uncached_tokens=400 + i, output_tokens=30,
        usage_raw={"input_tokens": 400 + i, "cache_read_input_tokens": 4000},
        verdict=("hit", "cold", "client_mutation")[i % 3],
        verdict_detail={"cause": "tool-order", "gap_s": 1.5}) for i in range(n)]


def _write_us(path: Path, records: list[UsageRecord], *, trigger: bool) -> float:
    with Ledger(path) as ledger:
        ledger.write(records[0])
        if not trigger:
            conn = sqlite3.connect(path, isolation_level=None)
            conn.execute(f"DROP TRIGGER {ROLLUP_TABLE}_add")
            conn.close()
            ledger.close()
        start = time.perf_counter()
        for record in records[1:]:
            ledger.write(record)
        return (time.perf_counter() - start) / (len(records) - 1) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ledger", type=Path, help="a generated ledger (ledger_gen.py)")
    parser.add_argument("--writes", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    records = _records(args.writes)
    with_t: list[float] = []
    without: list[float] = []
    with tempfile.TemporaryDirectory() as work:
        for r in range(args.rounds):
            with_t.append(_write_us(Path(work) / f"t{r}.db", records, trigger=True))
            without.append(_write_us(Path(work) / f"n{r}.db", records, trigger=False))
    conn = sqlite3.connect(f"file:{args.ledger}?mode=ro", uri=True)
    rows = conn.execute("SELECT count(*) FROM calls").fetchone()[0]
    start = time.perf_counter()
    built = conn.execute(aggregate_select("sqlite", "")).fetchall()
    backfill_s = time.perf_counter() - start
    conn.close()
    ledger = Ledger(args.ledger, read_only=True)
    start = time.perf_counter()
    kept = rollup_rows(ledger)
    read_s = time.perf_counter() - start
    counted = sum(r.sums["calls"] for r in kept)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
          f"{os.getloadavg()[0]:.1f}\n")
    print(f"- write, {args.writes:,} rows x {args.rounds} rounds (best): with the trigger "
          f"{min(with_t):.1f} us/row, without {min(without):.1f} us/row: x"
          f"{min(with_t) / min(without):.2f} (all rounds: "
          f"{', '.join(f'{a:.0f}/{b:.0f}' for a, b in zip(with_t, without, strict=True))})")
    print(f"- backfill over {rows:,} rows ({args.ledger.stat().st_size / 1e6:,.0f} MB): "
          f"{backfill_s:.2f} s -> {len(built):,} rollup rows")
    print(f"- read: rollup table {read_s * 1000:.1f} ms ({len(kept):,} rows, {counted:,} calls"
          f"{'' if counted == rows else ' != ' + format(rows, ',') + ' rows'}) vs aggregate "
          f"over the rows {backfill_s:.2f} s: x{backfill_s / read_s:,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
