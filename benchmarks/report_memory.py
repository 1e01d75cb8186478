"""What the streaming report's pass holds, traced (issue 30: memory that does not grow with
calls): ``tracemalloc`` around ``summarize_stream`` over a ledger, as ``stableprompt report``
runs it (the report's own read, ``by`` and a page of 1,000 calls), then the traced memory at
the end of the pass (current, and the peak during it) and the largest holders by source line.

    PYTHONPATH=src python benchmarks/ledger_gen.py /tmp/l100k.db --calls 100000   # once
    PYTHONPATH=src python benchmarks/report_memory.py /tmp/l100k.db [--by session] [--top 15]

``--no-trace`` runs the pass untraced and prints its CPU time (user + system, ``getrusage``)
instead: with and without ``--unbounded``, the CPU cost of moving entries out.
``--unbounded`` sets every cap of ``_accounting._spill``'s maps to ``None`` (the pass before
the bounded maps: every call and session in memory), for a before/after in one checkout.
``--caps N`` sets every cap to ``N`` instead (small caps: the spill used on a small ledger).
Tracing makes the pass several times slower; the numbers go to ``RESULTS.md`` by hand.

``--command "ARGS"`` runs ``stableprompt report LEDGER ARGS`` instead (output to
``/dev/null``; ``HTML`` in ARGS is replaced by a temporary file) and traces only the writing
of its output (after the pass: ``_command._write``, allocations above what the pass left),
which is where ``--by``'s table, ``--sessions`` and ``--json`` hold what they print; and the
run's peak RSS. With ``--caps`` also the
output's own bounds (``_table.PIECE_ROWS``, ``_spill.READ_ROWS``) are set to ``N // 8``.

    PYTHONPATH=src python benchmarks/report_memory.py /tmp/l100k.db --caps 2000 \
        --command "--by session"
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc


def main() -> None:
    """Run the traced pass and print what it holds."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ledger")
    parser.add_argument("--by", default="scenario")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--unbounded", action="store_true")
    parser.add_argument("--no-trace", action="store_true", dest="no_trace")
    parser.add_argument("--caps", type=int)
    parser.add_argument("--command")
    args = parser.parse_args()

    from stableprompt._accounting import _builder, _ceilings
    from stableprompt._accounting._builder import CallPage
    from stableprompt._accounting._summary import summarize_stream
    from stableprompt._report._command import _body_finder, open_ledger, stream_records

    if args.unbounded:
        _ceilings.CALLS_IN_MEMORY = _ceilings.KEYS_IN_MEMORY = None  # type: ignore[assignment]
        _builder.SESSIONS_IN_MEMORY = None  # type: ignore[assignment]
        _builder.BRANCHES_IN_MEMORY = None  # type: ignore[assignment]
    if args.caps is not None:
        _ceilings.CALLS_IN_MEMORY = _ceilings.KEYS_IN_MEMORY = args.caps
        _builder.SESSIONS_IN_MEMORY = _builder.BRANCHES_IN_MEMORY = args.caps
    if args.command is not None:
        _trace_command(args)
        return
    ledger = open_ledger(args.ledger)
    records, counted, _ = stream_records([ledger], corrupt=[], lean=True)
    if args.no_trace:
        before = resource.getrusage(resource.RUSAGE_SELF)
        report = summarize_stream(records, page=CallPage(), by=args.by,
                                  find_body=_body_finder([ledger], None, None))
        after = resource.getrusage(resource.RUSAGE_SELF)
        spilled = sum(m.spilled for m in report.streamed.spills) if report.streamed else 0
        print(f"{counted[0].count:,} rows, by {args.by}, unbounded={args.unbounded}: pass CPU "
              f"{after.ru_utime - before.ru_utime:.1f} s user + "
              f"{after.ru_stime - before.ru_stime:.1f} s system; sessions/groups moved "
              f"out: {spilled:,}; peak RSS {after.ru_maxrss / 1024:.0f} MB")
        report.close()
        return
    tracemalloc.start()
    started = time.perf_counter()
    report = summarize_stream(records, page=CallPage(), by=args.by,
                              find_body=_body_finder([ledger], None, None))
    seconds = time.perf_counter() - started
    current, peak = tracemalloc.get_traced_memory()
    snapshot = tracemalloc.take_snapshot()
    tracemalloc.stop()
    sessions = sum(len(s.sessions) for s in report.scenarios.values())
    spilled = sum(m.spilled for m in report.streamed.spills) if report.streamed else 0
    print(f"{counted[0].count:,} rows, {report.calls_total:,} calls, {sessions:,} sessions, "
          f"by {args.by}: traced at the end of the pass {current / 1e6:.1f} MB, peak "
          f"{peak / 1e6:.1f} MB ({seconds:.0f} s traced); sessions/groups moved out: "
          f"{spilled:,}")
    stats = snapshot.statistics("lineno")
    for stat in stats[:args.top]:
        frame = stat.traceback[0]
        print(f"  {stat.size / 1e6:8.2f} MB {stat.count:>9,} blocks  "
              f"{frame.filename.rsplit('/src/', 1)[-1]}:{frame.lineno}")
    report.close()


def _trace_command(args: argparse.Namespace) -> None:
    """``--command``: trace ``stableprompt report LEDGER ARGS`` (module docstring)."""
    import contextlib
    import os
    import shlex
    import tempfile

    from stableprompt._accounting import _spill
    from stableprompt._cli import main as cli
    from stableprompt._report import _command, _table

    if args.caps is not None:
        _table.PIECE_ROWS = max(1, args.caps // 8)
        _spill.READ_ROWS = max(1, args.caps // 8)  # (a name only a newer checkout reads)
    real = _command._write
    peaks: list[int] = []

    def traced(*a: object, **k: object) -> int:
        tracemalloc.start()
        try:
            return real(*a, **k)  # type: ignore[arg-type]
        finally:
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()

    _command._write = traced  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as folder:
        words = [os.path.join(folder, "r.html") if w == "HTML" else w
                 for w in shlex.split(args.command)]
        started = time.perf_counter()
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
            status = cli(["report", args.ledger, *words])
        seconds = time.perf_counter() - started
    used = resource.getrusage(resource.RUSAGE_SELF)
    print(f"report {args.command} (caps {args.caps}): exit {status}, {seconds:.1f} s; while "
          f"the output was written (traced): peak {peaks[0] / 1e6:.1f} MB; peak RSS of the "
          f"run {used.ru_maxrss / 1024:.0f} MB")

if __name__ == "__main__":
    main()
