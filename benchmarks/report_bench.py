"""``stableprompt report`` on a large ledger against a plain SQL aggregate over the same file,
in the same run (issue 30 item 1): wall time and peak RSS of each, one process each.

* ``sql``: one ``GROUP BY scenario, provider, model, verdict`` query with ``count(*)`` and
  the token sums (the headline numbers a SQL user computes), through Python's ``sqlite3``
  on the file opened read-only: the baseline.
* ``text``, ``json``, ``html``: ``python -m stableprompt report LEDGER`` (default), with
  ``--json``, with ``--html PATH``; output to ``/dev/null`` (HTML to a temporary file).
* ``rollups``, ``rollups-hour``: ``report --rollups`` (per day; per hour) reads the ledger's
  rollup table (schema v5) instead of its rows (``--modes text,rollups,rollups-hour``).

Each command runs in its own process, measured with ``os.wait4`` (the child's own
``ru_maxrss``: peak RSS; ``ru_utime + ru_stime``: CPU seconds, which a machine loaded by
other jobs inflates less than wall time) and ``time.perf_counter`` around it (wall, including
interpreter start and imports). The SQL runs first and last; its faster run is the baseline
(the first one may read the file from disk, the report's pass reads it from the page cache).
On PostgreSQL the server does the aggregate's work, so the child's CPU says little there:
compare wall times. With
``--src DIR`` the report runs from another checkout (``PYTHONPATH=DIR``), e.g. the code
before the streaming report, for a before/after on a smaller ledger. With ``--against DIR``
each report also runs from that checkout at the same time as from ``--src`` (two processes
started together, so both see the same load: on a shared machine, runs one after the other
can differ by more than the change measured) and a second table gives the CPU of both.

    PYTHONPATH=src python benchmarks/ledger_gen.py benchmarks/.work/ledger-1m.db   # once
    PYTHONPATH=src python benchmarks/report_bench.py benchmarks/.work/ledger-1m.db

On PostgreSQL: ``--postgres N`` starts a throwaway cluster (``tests/pg_cluster.py``: Debian's
``postgresql`` package, a data directory in a temporary directory, fsync off), writes ``N``
rows into it with ``ledger_gen.py`` (``COPY``), runs the same commands on its URL (the SQL
aggregate through psycopg) and stops it; a ``postgresql://`` URL as LEDGER measures an
existing database.

    PYTHONPATH=src python benchmarks/report_bench.py --postgres 1000000

Prints a Markdown table (seconds, MB, ratio to the SQL baseline) and the machine; the
numbers go to ``RESULTS.md`` by hand (not run by ``run.py``: minutes per 1M rows).
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SQL = """SELECT scenario, "gen_ai.provider.name", "gen_ai.request.model", verdict, count(*),
 sum("gen_ai.usage.input_tokens"), sum("gen_ai.usage.cache_read.input_tokens"),
 sum("gen_ai.usage.cache_creation.input_tokens"), sum("gen_ai.usage.output_tokens")
 FROM calls GROUP BY 1, 2, 3, 4"""

_SQL_CHILD = (
    "import sqlite3, sys\n"
    "conn = sqlite3.connect(f'file:{sys.argv[1]}?mode=ro', uri=True)\n"
    f"rows = conn.execute({SQL!r}).fetchall()\n"
    "print(len(rows))\n"
)


_PG_CHILD = (
    "import psycopg, sys\n"
    "with psycopg.connect(sys.argv[1]) as conn:\n"
    f"    rows = conn.execute({SQL!r}).fetchall()\n"
    "print(len(rows))\n"
)


def _describe(ledger: str) -> tuple[int, str]:
    """The ledger's call count and a few words on where it is (file size, or server)."""
    if ledger.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(ledger) as pg:
            facts: list[Any] = [pg.execute(sql).fetchone() for sql in (
                "SELECT count(*) FROM calls", "SELECT pg_database_size(current_database())",
                "SHOW server_version")]
        (rows,), (size,), (version,) = facts
        return int(rows), f"PostgreSQL {version} database of {int(size) / 1e6:,.0f} MB"
    conn = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
    (rows,) = conn.execute("SELECT count(*) FROM calls").fetchone()
    conn.close()
    size = Path(ledger).stat().st_size / 1e6
    return int(rows), f"{size:,.0f} MB, SQLite {sqlite3.sqlite_version}"


def measure(argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Run ``argv`` to the end: ``(wall seconds, peak RSS in MB, CPU seconds)`` (CPU: user +
    system of the child, what a loaded machine's waiting does not inflate)."""
    start = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.PIPE, env=env)
        assert proc.stderr is not None
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        err = proc.stderr.read().decode("utf-8", "replace")
        proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {err[-2000:]}")
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime  # Linux: KB


def measure_pair(argvs: list[list[str]], envs: list[dict[str, str]]) -> list[float]:
    """Start the commands together and run them to the end: the CPU seconds of each (user +
    system of the child)."""
    procs = []
    with open(os.devnull, "wb") as sink:
        for argv, env in zip(argvs, envs, strict=True):
            procs.append(subprocess.Popen(argv, stdout=sink, stderr=subprocess.DEVNULL,
                                          env=env))
        out = []
        for argv, proc in zip(argvs, procs, strict=True):
            _, status, usage = os.wait4(proc.pid, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                raise SystemExit(f"{' '.join(argv)} failed ({status})")
            out.append(usage.ru_utime + usage.ru_stime)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ledger", nargs="?", default=None,
                        help="a SQLite ledger file, or a postgresql:// URL")
    parser.add_argument("--postgres", type=int, default=None, metavar="N",
                        help="start a throwaway PostgreSQL cluster, write N rows into it "
                             "(ledger_gen.py) and measure there")
    parser.add_argument("--modes", default="text,json,html",
                        help="report modes, comma-separated (text, json, html, rollups, "
                             "rollups-hour)")
    parser.add_argument("--src", type=Path, default=Path(__file__).parent.parent / "src",
                        help="the stableprompt sources to run (PYTHONPATH)")
    parser.add_argument("--against", type=Path, default=None,
                        help="another checkout's sources run at the same time as --src's, "
                             "for a before/after under the same load")
    args = parser.parse_args(argv)
    if (args.ledger is None) == (args.postgres is None):
        parser.error("give a LEDGER or --postgres N, not both")
    if args.postgres is None:
        return run(args, args.ledger)
    sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
    import psycopg

    import pg_cluster  # type: ignore[import-not-found]

    cluster = pg_cluster.start()
    try:
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            conn.execute('CREATE DATABASE "bench"')
        url = str(cluster.url("bench"))
        start = time.perf_counter()
        # in a child: a measured child's peak RSS (``ru_maxrss``) starts at its parent's at
        # the fork, so the rows must not be made in this process
        subprocess.run([sys.executable, str(Path(__file__).parent / "ledger_gen.py"), url,
                        "--calls", str(args.postgres)], check=True,
                       env={**os.environ, "PYTHONPATH": str(args.src.resolve())})
        print(f"{args.postgres:,} rows written in {time.perf_counter() - start:.0f} s",
              file=sys.stderr, flush=True)
        return run(args, url)
    finally:
        cluster.stop()


def run(args: argparse.Namespace, ledger: str) -> int:
    """Measure the SQL aggregate and the reports on ``ledger`` and print the tables."""
    rows, where = _describe(ledger)
    child = _PG_CHILD if ledger.startswith("postgresql://") else _SQL_CHILD
    env = {**os.environ, "PYTHONPATH": str(args.src.resolve())}
    results: list[tuple[str, float, float, float]] = []
    pairs: list[tuple[str, float, float]] = []
    sql = [measure([sys.executable, "-c", child, ledger], env)]
    with tempfile.TemporaryDirectory() as work:
        for mode in args.modes.split(","):
            extra = {"text": [], "json": ["--json"],
                     "html": ["--html", str(Path(work) / "report.html")],
                     "rollups": ["--rollups"],
                     "rollups-hour": ["--rollups", "--bucket", "hour"]}[mode]
            wall, rss, cpu = measure([sys.executable, "-m", "stableprompt", "report",
                                      ledger, *extra], env)
            name = {"text": "(text)", "rollups-hour": "--rollups --bucket hour"}.get(
                mode, "--" + mode)
            results.append((f"report {name}", wall, rss, cpu))
            print(f"{mode}: {wall:.1f} s, {rss:,.0f} MB, CPU {cpu:.1f} s", file=sys.stderr,
                  flush=True)
            if args.against is not None:
                command = [sys.executable, "-m", "stableprompt", "report", ledger, *extra]
                other = {**os.environ, "PYTHONPATH": str(args.against.resolve())}
                theirs, ours = measure_pair([command, command], [other, env])
                pairs.append((mode, theirs, ours))
                print(f"{mode} side by side: {args.against} CPU {theirs:.1f} s, {args.src} "
                      f"CPU {ours:.1f} s", file=sys.stderr, flush=True)
    sql.append(measure([sys.executable, "-c", child, ledger], env))
    base = min(sql)
    cpu_base = min(cpu for _, _, cpu in sql)
    load = os.getloadavg()[0]
    print(f"{rows:,} calls, {where}; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average {load:.1f} "
          f"(1 min, at the end); src {args.src}\n")
    print("| run | wall (s) | peak RSS (MB) | x SQL aggregate | CPU (s) | x SQL CPU |")
    print("|---|---|---|---|---|---|")
    print(f"| SQL aggregate (GROUP BY, best of 2: {sql[0][0]:.2f} / {sql[1][0]:.2f} s) | "
          f"{base[0]:.2f} | {base[1]:,.0f} | 1.0 | {cpu_base:.2f} | 1.0 |")
    for name, wall, rss, cpu in results:
        print(f"| {name} | {wall:.1f} | {rss:,.0f} | {wall / base[0]:.1f} | {cpu:.1f} | "
              f"{cpu / cpu_base:.1f} |")
    if pairs:
        print(f"\nSide by side (started together): CPU seconds of {args.against} and of "
              f"{args.src}\n")
        print("| run | --against CPU (s) | --src CPU (s) | change |")
        print("|---|---|---|---|")
        for mode, theirs, ours in pairs:
            print(f"| {mode} | {theirs:.1f} | {ours:.1f} | {100 * (ours / theirs - 1):+.0f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
