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
Tracing makes the pass several times slower; the numbers go to ``RESULTS.md`` by hand.
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
    args = parser.parse_args()

    from stableprompt._accounting import _builder, _ceilings
    from stableprompt._accounting._builder import CallPage
    from stableprompt._accounting._summary import summarize_stream
    from stableprompt._report._command import _body_finder, open_ledger, stream_records

    if args.unbounded:
        _ceilings.CALLS_IN_MEMORY = _ceilings.KEYS_IN_MEMORY = None  # type: ignore[assignment]
        _builder.SESSIONS_IN_MEMORY = None  # type: ignore[assignment]
        _builder.BRANCHES_IN_MEMORY = None  # type: ignore[assignment]
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


if __name__ == "__main__":
    main()
