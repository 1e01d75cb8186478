"""``stableprompt ledger prune --older-than AGE LEDGER``: retention of call rows.

Deletes the call rows older than ``AGE`` (``30d``, ``12h``, ``90m``, or a whole number of
days) or than ``--before T`` (ISO 8601; UTC unless it has an offset), keeping the rollups
(``_rollups.py``: per hour x provider x model x scenario x verdict), so ``stableprompt
report --rollups`` still shows the pruned period and the row-level report says rows before
the cut-off were pruned (:meth:`Ledger.prune <stableprompt.Ledger.prune>`). ``--dry-run``
counts the rows it would delete. ``--vacuum`` (SQLite) gives the space back to the file
system afterwards (``VACUUM`` rewrites the file: it needs as much free disk as the ledger,
blocks writers while it runs, and may renumber SQLite's rowids, so restart a running
``report --follow``). Prints one line, or one JSON object with ``--json``.
"""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta

from .._subcommand import Subcommand, UsageError, json_text

__all__ = ["SUBCOMMAND", "parse_age"]

_AGE = re.compile(r"^\s*(\d+)\s*([dhm]?)\s*$")
_UNITS = {"d": "days", "": "days", "h": "hours", "m": "minutes"}


def parse_age(text: str) -> timedelta:
    """``--older-than``: ``"30d"``, ``"12h"``, ``"90m"`` or ``"30"`` (days), at least a minute.

    Raises:
        argparse.ArgumentTypeError: Not such an age.
    """
    match = _AGE.match(text)
    if match is None or int(match.group(1)) < 1:
        raise argparse.ArgumentTypeError(f"not an age: {text!r} (e.g. 30d, 12h, 90m)")
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def _before(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 date or date-time: {text!r}") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    prune = actions.add_parser(
        "prune", help="delete call rows older than a cut-off, keeping the hourly rollups",
        description="Delete the call rows older than --older-than AGE (or --before T); the "
        "rollups (sums per UTC hour x provider x model x scenario x verdict) are kept, so "
        "`stableprompt report --rollups` still covers the pruned period, and the row-level "
        "report says rows before the cut-off were pruned. Refused while spill files or a "
        "killed proxy's journal hold records the ledger does not have yet.")
    prune.add_argument("ledger", metavar="LEDGER",
                       help="a SQLite ledger file or a PostgreSQL URL")
    when = prune.add_mutually_exclusive_group(required=True)
    when.add_argument("--older-than", metavar="AGE", type=parse_age, dest="older_than",
                      help="delete rows older than AGE: 30d, 12h, 90m (a bare number: days)")
    when.add_argument("--before", metavar="T", type=_before,
                      help="delete rows before T (ISO 8601; UTC unless it has an offset)")
    prune.add_argument("--dry-run", action="store_true", dest="dry_run",
                       help="count the rows that would be deleted; change nothing")
    prune.add_argument("--vacuum", action="store_true",
                       help="SQLite: give the freed space back to the file system (VACUUM: "
                            "needs free disk as large as the ledger, blocks writers while it "
                            "runs; restart a running `report --follow` afterwards)")
    prune.add_argument("--json", action="store_true", help="print one JSON object")


def _run(args: argparse.Namespace) -> int:
    from ._ledger import Ledger
    from ._target import check_target, is_url, shown_target

    target = check_target(args.ledger)
    if args.vacuum and is_url(target) and not target.lower().startswith("sqlite"):
        raise UsageError("stableprompt ledger prune: error: argument --vacuum: SQLite only "
                         "(PostgreSQL's autovacuum reuses the space)")
    cut = args.before if args.before is not None else datetime.now(UTC) - args.older_than
    shown = shown_target(target)
    if args.dry_run:
        from ._reads import rows_before

        found = rows_before(Ledger(target, read_only=True), cut)
        result = {"ledger": shown, "before": cut.isoformat(), "would_delete": found}
        print(json_text(result) if args.json else
              f"{shown}: {found:,} call rows before {cut.isoformat()} would be deleted "
              "(--dry-run: nothing changed)")
        return 0
    with Ledger(target) as ledger:
        deleted = ledger.prune(cut)
        if args.vacuum:
            conn = ledger._reader()
            try:
                conn.execute("VACUUM")
            finally:
                ledger._release(conn)
    result = {"ledger": shown, "before": cut.isoformat(), "deleted": deleted}
    print(json_text(result) if args.json else
          f"{shown}: deleted {deleted:,} call rows before {cut.isoformat()}; the hourly "
          "rollups keep their totals (stableprompt report --rollups)")
    return 0


SUBCOMMAND = Subcommand(
    name="ledger",
    help="maintain a ledger: prune call rows older than a cut-off (rollups kept)",
    add_arguments=_add_arguments,
    run=_run,
)
