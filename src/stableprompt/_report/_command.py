"""``stableprompt report``: summarize a ledger per scenario and session (tables, JSON, HTML).

``stableprompt report LEDGER [--json] [--html PATH] [--sessions] [--calls]`` prints the
summary of ``_report/_summary.py`` (:func:`summarize`; what each number means is documented
there), then why calls missed (turn-boundary split, causes with lost tokens and dollars and
their fixes, cliffs; ``--calls``: one row per call; ``_text.print_explanations``), after
the ledger's metadata (``Ledger.meta()``: e.g. the backend the calls went to, so numbers from
our emulator say so). It opens the ledger read-only and never creates, migrates or writes it.

This module is also the report's one import point: it re-exports the summary
(``_summary.py``), the terminal text (``_text.py``), the HTML page
(``_html.py``) and the output-file helpers (``_subcommand.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from .._exceptions import LedgerError
from .._ledger._usage_record import UsageRecord
from .._subcommand import (
    Subcommand,
    UsageError,
    json_text,
    output_dir_arg,
    output_dir_problem,
    output_file_arg,
    output_file_problem,
    same_file,
    write_text,
)
from ._html import html_report
from ._summary import (
    VERDICTS,
    Pricing,
    Report,
    ScenarioReport,
    Totals,
    summarize,
)
from ._text import (
    ceiling_notes,
    make_console,
    meta_lines,
    pricing_lines,
    print_explanations,
    print_tables,
    turn_boundary_notes,
)

if TYPE_CHECKING:
    from .._ledger._ledger import Ledger

__all__ = [
    "SUBCOMMAND",
    "VERDICTS",
    "Pricing",
    "Report",
    "ScenarioReport",
    "Totals",
    "ceiling_notes",
    "html_report",
    "json_text",
    "make_console",
    "meta_lines",
    "open_ledger",
    "output_dir_arg",
    "output_dir_problem",
    "output_file_arg",
    "output_file_problem",
    "pricing_lines",
    "print_tables",
    "read_ledger",
    "same_file",
    "summarize",
    "write_text",
]


# --------------------------------------------------------------------------- reading


def open_ledger(path: str | os.PathLike[str]) -> Ledger:
    """Open an existing ledger read-only (``Ledger(path, read_only=True)``): nothing is
    created, migrated or written, even in a read-only directory.

    Returns:
        The read-only :class:`~stableprompt.Ledger`.

    Raises:
        LedgerError: The path does not exist, is not a regular file, is unreadable, or is not
            a stableprompt ledger this version can read (an empty file, a SQLite file without
            the ledger's ``calls`` table or with an unrelated one: refused, never migrated).
    """
    from .._ledger._ledger import Ledger

    return Ledger(path, read_only=True)


def read_ledger(path: str | os.PathLike[str]) -> list[UsageRecord]:
    """Read every record of an existing ledger file, read-only (see :func:`open_ledger`).

    Raises:
        LedgerError: See :func:`open_ledger`; also when a row cannot be read back (code
            ``ledger-unreadable``).
    """
    return _records(open_ledger(path))


def _records(ledger: Ledger) -> list[UsageRecord]:
    try:
        records = ledger.records()
    except LedgerError:
        raise
    except Exception as exc:  # a row that does not validate as a UsageRecord
        raise LedgerError(f"cannot read ledger {str(ledger.path)!r}: {type(exc).__name__}: "
                          f"{exc}", code="ledger-unreadable") from exc
    return records


# --------------------------------------------------------------------------- command


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ledger", metavar="LEDGER",
                        help="ledger database (SQLite) to summarize; opened read-only")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--html", metavar="PATH", type=output_file_arg,
                        help="also write a self-contained HTML report to PATH")
    parser.add_argument("--sessions", action="store_true",
                        help="also print one table of sessions per scenario")
    parser.add_argument("--calls", action="store_true",
                        help="also print one row per call (verdict, read share, lost tokens, "
                             "cause, segment, path)")


def _run(args: argparse.Namespace) -> int:
    if args.html is not None and same_file(args.html, args.ledger):
        raise UsageError(f"stableprompt report: error: argument --html: {str(args.html)!r} is "
                         "the ledger itself; choose another path")
    ledger = open_ledger(args.ledger)
    meta = ledger.meta()
    records = _records(ledger)
    report = summarize(records)
    header = meta_lines(meta)
    notes = [f"ceiling: append-only bound (whole previous request of the same session); "
             f"hit rate and ceiling are shares of input tokens. {len(records)} records.",
             *report.exclusion_notes(), *turn_boundary_notes(report), *ceiling_notes(report)]
    if args.html is not None:
        write_text(args.html, html_report(report, title=f"stableprompt report: {args.ledger}",
                                          intro=header, notes=notes))
    if args.json:
        sys.stdout.write(json_text({"ledger": str(args.ledger), "meta": meta,
                                    **report.to_json(), "notes": ceiling_notes(report)}))
        return 0
    for line in header:
        print(line)
    if not records:
        print(f"{args.ledger}: the ledger has no records")
        return 0
    print_tables(report, title=f"stableprompt report: {args.ledger}", notes=(),
                 sessions=args.sessions, pricing=False)
    print_explanations(report, calls=args.calls)
    console = make_console(sys.stdout)
    for line in [*notes, *pricing_lines(report)]:
        console.print(line)
    return 0


SUBCOMMAND = Subcommand(
    name="report",
    help="summarize a ledger per scenario and session (tables, --json, --html)",
    add_arguments=_add_arguments,
    run=_run,
)
