"""The PostgreSQL ledger's cost of running behind a transaction-mode pooler (session 16),
before/after in one run: two checkouts' sources (``--before DIR``, default ``/work/main/src``;
``--after DIR``, default this checkout's ``src``), each measured in its own child process,
alternated, best of ``--rounds``.

* ``write``: microseconds per :meth:`Ledger.write` on a fresh database, direct (no pooler),
  ``--writes`` records per round, rounds alternating the write connection's
  ``prepare_threshold`` between psycopg's default (5: the insert is prepared) and ``None``
  (ours now) in one process, so both see the same load (the code sides only differ there).
* ``lineage``: microseconds per ``Ledger.recent_for_lineage(limit=32)`` (what a recorder
  runs before each call on a shared ledger) on a writing ledger, kept read connection.
  After: each statement in its own ``BEGIN READ ONLY`` transaction (no session ``SET``).
* ``read``: seconds to read every row of an ``N``-row ledger (``--rows``, ``ledger_gen.py``)
  with the report's read (``_lean.iter_report_records``), and the server's temp bytes it
  wrote (``pg_stat_database.temp_bytes``). Before: one ``DECLARE ... WITH HOLD`` cursor;
  after: keyset pages.
* ``report``: wall seconds of ``stableprompt report URL`` (text) on the same ledger.

* the read alone, paired in one process (this checkout): a ``WITH HOLD`` cursor as before
  against keyset pages, rows fetched and not decoded, alternating.

Then ``EXPLAIN (ANALYZE, BUFFERS)`` of the keyset page queries at ``N`` rows.

    PYTHONPATH=src python benchmarks/bench_pg_pooling.py --rows 100000

Starts a throwaway cluster (``tests/pg_cluster.py``); prints Markdown for RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent

_WRITE_CHILD = r"""
import json, sys, time
from datetime import UTC, datetime, timedelta
from stableprompt import Ledger, UsageRecord
url, n, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
def rec(i, k):
    return UsageRecord(record_id=f"w{k}-{i:06d}", ts_utc=T0 + timedelta(seconds=i),
        session_id=f"s{i % 20}", turn=i, wire_format="anthropic", provider="anthropic",
        model="claude-sonnet-4-5", lineage=f"sp1:l{i % 20}", request_fingerprint=f"sp1:f{i}",
        input_tokens_total=1000, cache_read_tokens=900, cache_write_tokens=0,
        uncached_tokens=100, output_tokens=3, usage_raw={"input_tokens": 100}, verdict="hit",
        status_code=200)
best_l = float("inf")
best = {5: float("inf"), None: float("inf")}
with Ledger(url) as ledger:
    ledger.write(rec(0, -1))
    raw = ledger._conn.raw
    for k in range(rounds):
        for j, threshold in enumerate((5, None) if k % 2 else (None, 5)):
            raw.prepare_threshold = threshold  # psycopg's default, then ours (paired)
            records = [rec(i, 2 * k + j) for i in range(n)]
            t = time.perf_counter()
            for r in records:
                assert ledger.write(r) == "committed"
            best[threshold] = min(best[threshold], (time.perf_counter() - t) / n)
        t = time.perf_counter()
        for i in range(200):
            ledger.recent_for_lineage(f"sp1:l{i % 20}", limit=32)
        best_l = min(best_l, (time.perf_counter() - t) / 200)
print(json.dumps({"write_prepared_us": best[5] * 1e6, "write_unprepared_us": best[None] * 1e6,
                  "lineage_us": best_l * 1e6}))
"""

_READ_CHILD = r"""
import json, sys, time
import psycopg
from stableprompt._ledger._lean import iter_report_records
from stableprompt._report._command import open_ledger
url = sys.argv[1]
def temp_bytes():
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("SELECT pg_stat_clear_snapshot()")
        return c.execute("SELECT temp_bytes FROM pg_stat_database WHERE datname = "
                         "current_database()").fetchone()[0]
before = temp_bytes()
ledger = open_ledger(url)
t = time.perf_counter()
n = sum(1 for _ in iter_report_records(ledger, "", []))
took = time.perf_counter() - t
ledger.close()
time.sleep(1.5)  # the server reports a session's temp files within a second
print(json.dumps({"rows": n, "read_s": took, "temp_mb": (temp_bytes() - before) / 1e6}))
"""


_PAIRED_READ_CHILD = r"""
import json, sys, time
import psycopg
from stableprompt._ledger._lean import report_select
from stableprompt._ledger._postgres import PostgresBackend
url, rounds = sys.argv[1], int(sys.argv[2])
backend = PostgresBackend(url, busy_timeout_s=5.0, spill_dir=None)
columns = report_select()
sql = f'SELECT {columns}, "seq" FROM calls ORDER BY "ts_utc", "seq"'
def hold():  # the read before: one DECLARE ... WITH HOLD, FETCH 256 at a time
    raw = psycopg.connect(url, autocommit=True)
    raw.execute("SET default_transaction_read_only = on")
    cur = raw.cursor(name="stableprompt_stream", withhold=True)
    cur.execute(sql)
    n = 0
    while batch := cur.fetchmany(256):
        n += len(batch)
    cur.close(); raw.close()
    return n
def pages():  # the read now: keyset pages, each statement in a READ ONLY transaction
    conn = backend.connect_reader()
    n = sum(1 for _ in backend.read_in_order(conn, columns, ""))
    conn.close()
    return n
times = {"hold": [], "pages": []}
for k in range(rounds):
    order = (("hold", hold), ("pages", pages))
    for name, read in order if k % 2 else order[::-1]:
        t = time.perf_counter(); n = read(); times[name].append(time.perf_counter() - t)
print(json.dumps({"rows": n, **{f"{k}_s": sorted(v) for k, v in times.items()}}))
"""


def _child(code: str, args: list[str], src: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src.resolve())}
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _wall(args: list[str], src: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(src.resolve())}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "stableprompt", "report", *args], env=env,
                   check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", type=Path, default=Path("/work/main/src"))
    parser.add_argument("--after", type=Path, default=HERE.parent / "src")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(HERE.parent / "tests"))
    import psycopg

    import pg_cluster  # type: ignore[import-not-found]

    cluster = pg_cluster.start()
    sides = {"before": args.before, "after": args.after}
    try:
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            for name in ("bench", *(f"w_{s}_{k}" for s in sides for k in range(3))):
                conn.execute(f'CREATE DATABASE "{name}"')
        url = str(cluster.url("bench"))
        subprocess.run([sys.executable, str(HERE / "ledger_gen.py"), url, "--calls",
                        str(args.rows)], check=True,
                       env={**os.environ, "PYTHONPATH": str(args.after.resolve())})
        out: dict[str, dict[str, list[float]]] = {s: {} for s in sides}
        for k in range(3):  # alternated: both sides see the same load
            for side, src in sides.items():
                got = _child(_WRITE_CHILD, [str(cluster.url(f"w_{side}_{k}")),
                                            str(args.writes), str(args.rounds)], src)
                for key, value in got.items():
                    out[side].setdefault(key, []).append(value)
                print(side, "write", got, file=sys.stderr, flush=True)
        for _ in range(3):
            for side, src in sides.items():
                got = _child(_READ_CHILD, [url], src)
                got["report_s"] = _wall([url], src)
                for key, value in got.items():
                    out[side].setdefault(key, []).append(value)
                print(side, "read", got, file=sys.stderr, flush=True)
        paired = _child(_PAIRED_READ_CHILD, [url, str(2 * args.rounds)], args.after)
        with psycopg.connect(url, autocommit=True) as conn:
            (bound,) = conn.execute('SELECT max("seq") FROM calls').fetchone() or (0,)
            (mid,) = conn.execute('SELECT "ts_utc" FROM calls ORDER BY "ts_utc", "seq" '
                                  "OFFSET %s LIMIT 1", (args.rows // 2,)).fetchone() or ("",)
            plans = []
            for where, params in (("", ()), (' WHERE "ts_utc" >= %s', ("2026",))):
                head = (f'SELECT * FROM calls{where}{" AND" if where else " WHERE"} '
                        '"seq" <= %s')
                for keyed in (False, True):
                    sql = head + (' AND ("ts_utc", "seq") > (%s, %s)' if keyed else "")
                    sql += ' ORDER BY "ts_utc", "seq" LIMIT 2000'
                    values = (*params, bound, *((mid, 1) if keyed else ()))
                    plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql,
                                        values).fetchall()
                    plans.append((sql, "\n".join(str(r[0]) for r in plan)))
    finally:
        cluster.stop()
    print(f"{args.rows:,} rows; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}, psycopg "
          f"{psycopg.__version__}, PostgreSQL {cluster.bin_dir.parent.name}; load average "
          f"{os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    print("| measure (best of the runs) | before | after |")
    print("|---|---|---|")
    for side in sides:
        print(f"Ledger.write, direct, {side}'s code, in one process alternating "
              f"{args.writes}-write rounds: prepare_threshold=5 (psycopg's default) "
              f"{min(out[side]['write_prepared_us']):.0f} us, None "
              f"{min(out[side]['write_unprepared_us']):.0f} us\n")
    rows = [
            ("recent_for_lineage, kept connection (us)", "lineage_us", "{:.0f}"),
            (f"report's read of {args.rows:,} rows (s)", "read_s", "{:.2f}"),
            ("server temp space written by that read (MB)", "temp_mb", "{:.0f}"),
            ("`stableprompt report` text, wall (s)", "report_s", "{:.2f}")]
    for label, key, fmt in rows:
        print(f"| {label} | {fmt.format(min(out['before'][key]))} | "
              f"{fmt.format(min(out['after'][key]))} |")
    print(f"\nThe read alone (rows fetched, not decoded), {paired['rows']:,} rows, in one "
          f"process alternating, {2 * args.rounds} rounds each: a WITH HOLD cursor (FETCH 256) "
          f"best {paired['hold_s'][0]:.2f} s, median "
          f"{paired['hold_s'][len(paired['hold_s']) // 2]:.2f} s; keyset pages of 2,000 "
          f"best {paired['pages_s'][0]:.2f} s, median "
          f"{paired['pages_s'][len(paired['pages_s']) // 2]:.2f} s")
    for sql, plan in plans:
        print(f"\n```\n{sql}\n{plan}\n```")
    return 0


if __name__ == "__main__":
    sys.exit(main())
