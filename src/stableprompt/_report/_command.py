"""``stableprompt report``: summarize a ledger per scenario and session (tables, JSON, HTML).

``stableprompt report LEDGER... [--json] [--html PATH] [--sessions] [--calls] [--limit N]
[--offset K] [--top N] [--by scenario|session|model|wire|day|agent] [--session ID] [--since
T]`` prints the summary of ``_accounting/_summary.py`` (:func:`summarize`; what each number
means is documented there), computed in one streaming pass
(``_accounting._summary.summarize_stream``: the same numbers in bounded memory, what outgrows
its caps kept in a temporary file, ``_accounting._spill``); the per-call rows (``--calls``,
JSON ``calls``) are a page (``--limit`` / ``--offset`` in ledger order, or ``--top``: the calls
that lost the most), then why calls missed (turn-boundary split, causes with lost tokens and
dollars and their fixes, cliffs; ``--calls``: one row per call; ``_text.print_explanations``;
``--call ID``: every divergence of one call instead, exit 1 when no call id starts with ID),
after the ledger's metadata (``Ledger.meta()``: e.g. the backend the calls went to, so numbers
from our emulator say so). It opens each ledger read-only and never creates, migrates or writes
it, and reads its rows with the report's own query (``_ledger._lean``: the same records but the
segment outline no number uses, the same corrupt rows; ``--what-if``, which replays whole
records, reads them with ``Ledger.iter_records``).

``--what-if`` adds the replay of the calls under other cache policies (text:
``_what_if_text``; ``--html``: a section of the page, ``_what_if_html``; ``--json``:
``what_if``).

``stableprompt report --follow LEDGER [--follow-seconds S] [--interval S]`` is a live view
of a ledger another process writes instead (``_follow.py``); it takes none of ``--json``,
``--html``, ``--what-if`` (a usage error, exit 2).

A row that does not decode as a record (hand-edited, corrupted) is skipped and named by its
record id in a note (JSON: ``corrupt_rows``); every other row is reported. Records waiting
outside the ledger (spill files, a killed proxy's pending journal: ``Ledger.unimported_files``)
are not read, but named in a note (JSON: ``unimported_files``).

Several ledgers are merged as they are read (:func:`stream_records`, time order; ties keep
ledger order): a record id seen in more than one counts once (the first met in that order).
``--session`` and ``--since`` filter the calls read (``Ledger.iter_records``); a ceiling
counts only calls in the selection, so the first selected call of a session has none.

``--rollups [--bucket day|hour]`` reads the ledger's rollups instead of its rows
(``_rollups.py``). A ledger pruned with ``stableprompt ledger prune`` says so in a note
(metadata ``pruned_before``): the row-level report covers only the calls after it.

This module is also the report's one import point: it re-exports the summary
(``_summary.py``), the terminal text (``_text.py``), the HTML page
(``_html.py``) and the output-file helpers (``_subcommand.py``).
"""

from __future__ import annotations

import argparse
import heapq
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from .._accounting._builder import CallPage
from .._accounting._summary import (
    GROUP_BY,
    VERDICTS,
    Pricing,
    ScenarioReport,
    Summary,
    Totals,
    summarize,
    summarize_stream,
)
from .._exceptions import LedgerError
from .._ledger._usage_record import UsageRecord
from .._lint._gc import no_full_collections
from .._subcommand import (
    Subcommand,
    UsageError,
    json_text,
    output_dir_arg,
    output_dir_problem,
    output_file_arg,
    output_file_problem,
    same_file,
    seconds_arg,
    shown,
    write_scrubbed_json,
    write_text,
)
from ._follow import FollowState, follow
from ._html import html_report
from ._storage import storage_lines
from ._text import (
    ceiling_notes,
    estimate_notes,
    keepalive_lines,
    make_console,
    meta_lines,
    pricing_lines,
    print_call_divergences,
    print_explanations,
    print_tables,
    server_diagnosis_notes,
    turn_boundary_notes,
)

if TYPE_CHECKING:
    from .._ledger._ledger import Ledger

__all__ = [
    "SUBCOMMAND",
    "VERDICTS",
    "CorruptRow",
    "Pricing",
    "ScenarioReport",
    "Summary",
    "Totals",
    "ceiling_notes",
    "html_report",
    "json_text",
    "make_console",
    "merge_records",
    "meta_lines",
    "open_ledger",
    "output_dir_arg",
    "output_dir_problem",
    "output_file_arg",
    "output_file_problem",
    "parse_since",
    "pricing_lines",
    "print_tables",
    "read_ledger",
    "same_file",
    "stream_records",
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


def read_ledger(path: str | os.PathLike[str],
                corrupt: list[CorruptRow] | None = None) -> list[UsageRecord]:
    """Read every record of an existing ledger file, read-only (see :func:`open_ledger`).

    Args:
        path: The ledger file.
        corrupt: When given, rows that do not decode as records are skipped and appended
            here (:class:`CorruptRow`); otherwise such a row raises.

    Raises:
        LedgerError: See :func:`open_ledger`; also when a row cannot be read back and
            ``corrupt`` is ``None`` (code ``ledger-unreadable``).
    """
    return _records(open_ledger(path), corrupt=corrupt)


@dataclass(frozen=True, slots=True)
class CorruptRow:
    """A ledger row the report skipped: it does not decode as a record.

    Attributes:
        ledger: The ledger file it is in.
        row_id: Its ``record_id`` (``"rowid <n>"`` when that is empty).
        error: Why it does not decode (one line, at most 300 characters).
    """

    ledger: str
    row_id: str
    error: str

    def to_json(self) -> dict[str, str]:
        """``{"ledger", "id", "error"}``."""
        return {"ledger": self.ledger, "id": self.row_id, "error": self.error}

    def note(self) -> str:
        """One line for the terminal."""
        return f"skipped corrupt row {self.row_id!r} of {self.ledger}: {self.error}"


def _why_invalid(exc: Exception) -> str:
    """One line: each invalid field as ``/pointer: message`` for a pydantic validation error
    (without pydantic's help URL), else ``Class: message``."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        return "; ".join(f"/{'/'.join(str(p) for p in e['loc'])}: {e['msg']}"
                         for e in exc.errors(include_url=False))
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def _records(ledger: Ledger, *, session_id: str | None = None,
             since: datetime | None = None,
             corrupt: list[CorruptRow] | None = None) -> list[UsageRecord]:
    return list(_iter_records(ledger, session_id=session_id, since=since, corrupt=corrupt))


def _iter_records(ledger: Ledger, *, session_id: str | None = None,
                  since: datetime | None = None,
                  corrupt: list[CorruptRow] | None = None,
                  lean: bool = False) -> Iterator[UsageRecord]:
    """The ledger's records as they are read (:meth:`Ledger.iter_records`); a row that does not
    decode is skipped into ``corrupt`` (or raises when ``corrupt`` is ``None``). ``lean``: the
    report's own read (``_ledger._lean``: the same rows and corrupt rows, each record holding
    only the fields the report reads)."""
    on_invalid = None
    if corrupt is not None:
        def on_invalid(row_id: str, exc: Exception) -> None:
            corrupt.append(CorruptRow(ledger.location, row_id, _why_invalid(exc)[:300]))

    try:
        if lean:
            from .._ledger._lean import iter_report_records

            where, params = ledger._where(session_id, since)
            yield from iter_report_records(ledger, where, params, on_invalid)
        else:
            yield from ledger.iter_records(session_id=session_id, since=since,
                                           on_invalid=on_invalid)
    except LedgerError:
        raise
    except Exception as exc:  # a row that does not validate as a UsageRecord
        raise LedgerError(f"cannot read ledger {ledger.location!r}: {type(exc).__name__}: "
                          f"{exc}", code="ledger-unreadable") from exc


def merge_records(groups: Iterable[Iterable[UsageRecord]]) -> tuple[list[UsageRecord], int]:
    """Merge the records of several ledgers in time order (stable: ties keep ledger order).

    Returns:
        ``(records, duplicates)``: each record id once (the first seen), and how many rows
        were dropped as repeats of an id already seen.
    """
    seen: set[str] = set()
    merged: list[UsageRecord] = []
    duplicates = 0
    for records in groups:
        for record in records:
            if record.record_id in seen:
                duplicates += 1
                continue
            seen.add(record.record_id)
            merged.append(record)
    merged.sort(key=lambda r: r.ts_utc)
    return merged, duplicates


def parse_since(text: str) -> datetime:
    """``--since``: an ISO 8601 date or date-time (``2026-01-01``, ``2026-01-01T10:00``,
    ``...Z`` or with an offset); a time without an offset is UTC.

    Raises:
        UsageError: Not such a date (a one-line message naming ``--since``).
    """
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"stableprompt report: error: argument --since: {text!r} is not an "
                         "ISO 8601 date or date-time (e.g. 2026-01-01 or "
                         "2026-01-01T10:00:00Z)") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


# --------------------------------------------------------------------------- command


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ledger", metavar="LEDGER", nargs="+",
                        help="ledger(s) to summarize, opened read-only: SQLite files or "
                             "PostgreSQL URLs (postgresql://user@host:5432/dbname); several "
                             "are merged (a record id counts once)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--html", metavar="PATH", type=output_file_arg,
                        help="also write a self-contained HTML report to PATH")
    parser.add_argument("--sessions", action="store_true",
                        help="also print one table of sessions per scenario")
    parser.add_argument("--calls", action="store_true",
                        help="also print one row per call (verdict, read share, lost tokens, "
                             "cause, segment, path)")
    parser.add_argument("--call", metavar="ID",
                        help="print every divergence of the call whose record id starts "
                             "with ID (cause, segment, path, before/after, lost tokens), "
                             "in the provider's cache order")
    parser.add_argument("--limit", metavar="N", type=_count_arg, default=CallPage().limit,
                        help="per-call rows listed (--calls, --json calls): at most N "
                             f"(default {CallPage().limit:,}); every total counts all calls")
    parser.add_argument("--offset", metavar="K", type=_count_arg, default=0,
                        help="per-call rows from the K-th call on (0-based, ledger order)")
    parser.add_argument("--top", metavar="N", type=_count_arg, default=None,
                        help="per-call rows: the N calls that lost the most tokens instead "
                             "(in ledger order)")
    parser.add_argument("--by", choices=GROUP_BY, default="scenario",
                        help="group the totals by this (default: scenario)")
    parser.add_argument("--session", metavar="ID",
                        help="only the calls of this session (gen_ai.conversation.id)")
    parser.add_argument("--since", metavar="T",
                        help="only calls at or after T (ISO 8601 date or date-time, UTC "
                             "unless it has an offset)")
    parser.add_argument("--what-if", action="store_true", dest="what_if",
                        help="replay the calls under alternative cache policies (TTL per "
                             "breakpoint place and request kind, keep-alive): cost per "
                             "policy, the cheapest, the saving and the hindsight bound")
    parser.add_argument("--rollups", action="store_true",
                        help="read the ledger's rollups (sums per UTC hour x provider x model "
                             "x scenario x verdict, kept when rows are pruned) instead of its "
                             "call rows: totals per period with hit rate and cost, fast on "
                             "months of calls")
    parser.add_argument("--bucket", choices=("day", "hour"), default="day",
                        help="with --rollups: one row per UTC day (default) or hour")
    parser.add_argument("--follow", action="store_true",
                        help="a live view of one LEDGER while another process (the proxy) "
                             "writes it: hit rate, latest misses, causes; plain lines when "
                             "not a terminal; Ctrl-C or SIGTERM stops it")
    parser.add_argument("--follow-seconds", metavar="S", type=seconds_arg(zero=True),
                        default=None,
                        help="with --follow: stop after S seconds (0: read once and stop; "
                             "default: until stopped)")
    parser.add_argument("--interval", metavar="S", type=seconds_arg(zero=False), default=0.5,
                        help="with --follow: seconds between reads of the ledger (default 0.5)")


def _count_arg(text: str) -> int:
    """A whole number >= 0 (``--limit``, ``--offset``, ``--top``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


def _follow(args: argparse.Namespace) -> int:
    if len(args.ledger) != 1 or args.json or args.html is not None:
        raise UsageError("stableprompt report: error: argument --follow: follows exactly one "
                         "LEDGER, without --json or --html")
    if args.what_if:
        raise UsageError("stableprompt report: error: argument --what-if: not with --follow "
                         "(the live view shows calls as they arrive; the replay needs the "
                         "whole ledger): run `stableprompt report --what-if LEDGER`")
    if args.interval <= 0 or (args.follow_seconds is not None and args.follow_seconds < 0):
        raise UsageError("stableprompt report: error: argument --interval must be > 0 and "
                         "--follow-seconds >= 0")
    since = None if args.since is None else parse_since(args.since)
    state = FollowState(session_id=args.session, since=since)
    try:
        follow(args.ledger[0], file=sys.stdout, interval_s=args.interval,
               seconds=args.follow_seconds, state=state)
    finally:
        state.close()
    return 0


def _page(args: argparse.Namespace) -> CallPage:
    """``--limit`` / ``--offset`` / ``--top`` as a :class:`CallPage`; with ``--call`` the
    calls whose id starts with it, among all calls (``--offset`` / ``--top`` do not apply).

    Raises:
        UsageError: ``--top`` with ``--offset``; an empty ``--call``.
    """
    if args.top is not None and args.offset:
        raise UsageError("stableprompt report: error: argument --top: not with --offset "
                         "(--top lists the calls that lost the most tokens; --offset pages "
                         "the calls in ledger order)")
    if args.call is not None:  # the call is looked for among all calls, not in a page
        if not args.call:
            raise UsageError("stableprompt report: error: argument --call: empty (give a "
                             "record id or its first characters)")
        return CallPage(limit=args.limit, call=args.call)
    return CallPage(offset=args.offset, limit=args.limit, top=args.top)


class _Counted:
    """An iterator of one ledger's records that counts what it yielded."""

    def __init__(self, records: Iterable[UsageRecord]) -> None:
        self._records = iter(records)
        self.count = 0

    def __iter__(self) -> Iterator[UsageRecord]:
        for record in self._records:
            self.count += 1
            yield record


def stream_records(ledgers: Sequence[Ledger], *, session_id: str | None = None,
                   since: datetime | None = None, corrupt: list[CorruptRow] | None = None,
                   lean: bool = False,
                   ) -> tuple[Iterator[UsageRecord], list[_Counted], list[int]]:
    """The records of ``ledgers`` merged in time order, read as they are summarized (one
    ledger's rows come in its ``(ts_utc, insertion)`` order; ties across ledgers keep ledger
    order, as :func:`merge_records`). A record id seen again counts once (the first met in
    that order; ``duplicates[0]`` counts the rest), which holds the ids read when there is
    more than one ledger (at most ``_ceilings.CALLS_IN_MEMORY`` in memory, ``_spill``).

    Returns:
        ``(records, per_ledger, duplicates)``: ``per_ledger[i].count`` is how many rows ledger
        ``i`` gave, once the records are consumed.
    """
    counted = [_Counted(_iter_records(ledger, session_id=session_id, since=since,
                                      corrupt=corrupt, lean=lean)) for ledger in ledgers]
    duplicates = [0]
    if len(counted) == 1:
        return iter(counted[0]), counted, duplicates

    def merged() -> Iterator[UsageRecord]:
        from .._accounting import _ceilings
        from .._accounting._spill import SpillMap

        # the ids read, at most as many in memory as the ceilings' calls (the rest in a file)
        seen: SpillMap[str, bool] = SpillMap(_ceilings.CALLS_IN_MEMORY)
        try:
            for record in heapq.merge(*counted, key=lambda r: r.ts_utc):
                if seen.get(record.record_id):
                    duplicates[0] += 1
                    continue
                seen[record.record_id] = True
                yield record
        finally:
            seen.close()

    return merged(), counted, duplicates


def _body_finder(ledgers: Sequence[Ledger], session_id: str | None,
                 since: datetime | None) -> Callable[[str], UsageRecord | None]:
    """Look a predecessor's record up by id in the ledgers (first that has it), within the
    selection (``--session``, ``--since``)."""
    from .._ledger._reads import record_by_id

    def find(record_id: str) -> UsageRecord | None:
        for ledger in ledgers:
            found = record_by_id(ledger, record_id)
            if found is None:
                continue
            if session_id is not None and found.session_id != session_id:
                return None
            if since is not None and found.ts_utc < since:
                return None
            return found
        return None

    return find


def _run(args: argparse.Namespace) -> int:
    if args.follow:
        return _follow(args)
    from .._ledger._target import is_url, shown_target

    targets: list[str] = list(args.ledger)
    paths = [shown_target(target) for target in targets]  # a URL's password never shown
    for path in targets:
        if args.html is not None and not is_url(path) and same_file(args.html, path):
            raise UsageError(f"stableprompt report: error: argument --html: {str(args.html)!r} "
                             "is the ledger itself; choose another path")
    since = None if args.since is None else parse_since(args.since)
    page = _page(args)
    metas: list[dict[str, str]] = []
    corrupt: list[CorruptRow] = []
    unimported: list[Path] = []
    ledgers = []
    for target in targets:
        ledger = open_ledger(target)
        unimported += ledger.unimported_files()
        metas.append(ledger.meta())
        ledgers.append(ledger)
    if args.rollups:
        from ._rollups import run_rollups

        return run_rollups(args, ledgers, paths, metas, since)
    records, counted, duplicate_count = stream_records(ledgers, session_id=args.session,
                                                       since=since, corrupt=corrupt,
                                                       lean=not args.what_if)
    with no_full_collections():  # what the pass keeps only grows (up to its caps)
        report = summarize_stream(records, what_if=args.what_if, page=page, by=args.by,
                                  find_body=_body_finder(ledgers, args.session, since))
    try:
        return _write(args, report, paths, metas, counted, duplicate_count[0], corrupt,
                      unimported, since)
    finally:
        report.close()  # its temporary file of sessions, if any


def _write(args: argparse.Namespace, report: Summary, paths: list[str],
           metas: list[dict[str, str]], counted: list[_Counted], duplicates: int,
           corrupt: list[CorruptRow], unimported: list[Path], since: datetime | None) -> int:
    """Print (and write) the report of the summarized ledgers (:func:`_run`)."""
    per_ledger = [c.count for c in counted]
    name = paths[0] if len(paths) == 1 else f"{len(paths)} ledgers"
    if len(paths) == 1:
        meta = metas[0]
        header = meta_lines(meta)
    else:
        meta = {k: v for k, v in metas[0].items() if all(m.get(k) == v for m in metas[1:])}
        header = []
        for path, rows, m in zip(paths, per_ledger, metas, strict=True):
            header.append(f"{path}: {rows:,} records")
            header.extend(f"  {line}" for line in meta_lines(m))
    selection = []
    if args.session is not None:
        selection.append(f"session {args.session!r}")
    if since is not None:
        selection.append(f"calls since {since.isoformat().replace('+00:00', 'Z')}")
    notes = [f"ceiling: append-only bound (the session's whole previous request, or the prefix "
             f"shared with another session's call, within the TTL); "
             f"hit rate and ceiling are shares of input tokens. {report.records} records.",
             *([f"{duplicates:,} rows repeated a record id already read from an earlier "
                "ledger: counted once."] if duplicates else []),
             *([f"{len(corrupt):,} corrupt rows skipped (not readable as records; every "
                "other row is reported):"] if corrupt else []),
             *[f"  {row.note()}" for row in corrupt],
             *([f"{len(unimported):,} file(s) next to the ledger hold records it does not "
                "have yet (spilled on a write failure, or queued by a proxy that was killed), "
                "not counted here; `stableprompt proxy` imports them when it starts again "
                f"(as Ledger(path).replay_spill() does): {', '.join(map(str, unimported))}"]
               if unimported else []),
             *([f"selection: {', '.join(selection)}; a ceiling counts only selected calls."]
               if selection else []),
             *_pruned_notes(paths, metas, since),
             *_page_notes(report, args),
             *report.exclusion_notes(), *report.cost_notes(), *keepalive_lines(report),
             *storage_lines(report),
             *turn_boundary_notes(report),
             *estimate_notes(report),
             *server_diagnosis_notes(report),
             *ceiling_notes(report)]
    if args.html is not None:
        write_text(args.html, html_report(report, title=f"stableprompt report: {name}",
                                          intro=header, notes=notes))
    if args.json:
        extra: dict[str, object] = {"ledger": paths[0]} if len(paths) == 1 else {
            "ledger": None,
            "ledgers": [{"path": path, "records": rows, "meta": m}
                        for path, rows, m in zip(paths, per_ledger, metas, strict=True)],
            "duplicates": duplicates}
        if corrupt:
            extra["corrupt_rows"] = [row.to_json() for row in corrupt]
        if unimported:
            extra["unimported_files"] = [str(path) for path in unimported]
        if pruned := _pruned_notes(paths, metas, since):
            extra["pruned"] = pruned
        write_scrubbed_json({**extra, "meta": meta, **report.to_json(by=args.by, lazy=True),
                             "notes": ceiling_notes(report)})
        return 0
    for line in header:
        print(shown(line, markup=False))
    if not report.records:
        print(shown(f"{name}: the ledger has no records" if not selection and len(paths) == 1
                    else f"{name}: no records"
                    + (f" ({', '.join(selection)})" if selection else ""), markup=False))
        for row in corrupt:
            print(shown(row.note(), markup=False))
        for line in _pruned_notes(paths, metas, since):
            print(shown(line, markup=False))
        return 0
    if args.call is not None:
        if print_call_divergences(report, args.call):
            return 0
        for row in corrupt:  # the call is there, but its row does not decode
            if row.row_id.startswith(args.call):
                print(shown(row.note(), markup=False))
        return 1
    print_tables(report, title=shown(f"stableprompt report: {name}"), notes=(),
                 sessions=args.sessions, pricing=False)
    print_explanations(report, calls=args.calls, by=None if args.by == "scenario" else args.by)
    if report.what_if is not None:
        from ._what_if_text import print_what_if

        print_what_if(report.what_if)
    console = make_console(sys.stdout)
    for line in [*notes, *pricing_lines(report)]:
        console.print(shown(line))
    return 0


def _pruned_notes(paths: Sequence[str], metas: Sequence[dict[str, str]],
                  since: datetime | None) -> list[str]:
    """A line per pruned ledger: its rows before the cut-off are gone (``_rollups``)."""
    from ._rollups import pruned_note

    notes = [(path, pruned_note(meta, since)) for path, meta in zip(paths, metas, strict=True)]
    return [note if len(paths) == 1 else f"{path}: {note}" for path, note in notes if note]


def _page_notes(report: Summary, args: argparse.Namespace) -> list[str]:
    """What the per-call rows leave out (``--calls``, JSON ``calls``), and that ``--what-if``
    held every record."""
    lines = []
    total, shown_rows = report.calls_total, len(report.calls)
    if args.top is not None:
        lines.append(f"calls listed: the {shown_rows:,} of {total:,} that lost the most tokens "
                     f"(--top {args.top}), in ledger order (a session's calls stay together; "
                     "the causes table ranks by lost tokens).")
    elif shown_rows < total and (args.calls or args.json):
        which = (f"{args.offset + 1:,}-{args.offset + shown_rows:,}" if shown_rows else
                 "none" + (" (--limit 0)" if args.limit == 0 else
                           f" (--offset {args.offset:,} is past the last call)"))
        lines.append(f"calls listed: {which} of {total:,} in ledger order (--offset K, "
                     "--limit N; --top N: those that lost the most tokens); every number "
                     "above counts them all.")
    if args.what_if:
        lines.append(f"--what-if held all {report.records:,} records in memory (the replay "
                     "needs them); the rest of the report reads them in one pass.")
    return lines


SUBCOMMAND = Subcommand(
    name="report",
    help="summarize a ledger per scenario and session (tables, --json, --html)",
    add_arguments=_add_arguments,
    run=_run,
)
