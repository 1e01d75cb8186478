"""``stableprompt report --rollups [--bucket day|hour]``: totals from the ledger's rollups.

Reads table ``call_rollups`` (``_ledger/_rollups.py``: sums per UTC hour x provider x model x
scenario x verdict, kept by the ledger as rows are written, kept when rows are pruned), not
the call rows, so a month of a million calls is a few thousand rows: one table row per period
(UTC day or hour) x provider x model x scenario with calls, input / cache read / cache write
/ output tokens, hit rate, verdicts, exclusions and cost (priced in bulk per (provider,
model, date): ``_accounting/_rollups.py``), then the totals. Token sums equal the row-level
report's over the same rows; what needs rows (ceilings, lost tokens, causes, sessions,
per-call tables) is not shown. ``--since`` selects whole hours (the hour holding it
included). Several ledgers are summed (a record id in two ledgers counts in both: rollups
hold no ids; the row-level report counts it once).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from .._accounting._rollups import RollupSummary, summarize_rollups
from .._ledger._reads import rollup_rows
from .._ledger._rollups import PRUNED_BEFORE
from .._subcommand import UsageError, shown, write_scrubbed_json
from ._text import (
    format_int,
    format_pct,
    format_usd,
    format_verdicts,
    make_console,
    meta_lines,
)

if TYPE_CHECKING:
    from .._ledger._ledger import Ledger

__all__ = ["ROLLUP_CONFLICTS", "pruned_note", "run_rollups"]

ROLLUP_CONFLICTS = ("html", "sessions", "calls", "call", "top", "what_if", "follow", "session")
"""Options that need call rows: refused with ``--rollups``."""


def pruned_note(meta: dict[str, str], since: datetime | None) -> str | None:
    """The row-level report's line saying rows before the prune cut-off are gone (``None``
    when the ledger was never pruned, or ``--since`` starts at or after the cut-off)."""
    cut = meta.get(PRUNED_BEFORE)
    if cut is None:
        return None
    try:
        when = datetime.fromisoformat(cut)
    except ValueError:
        when = None
    if since is not None and when is not None and since >= when:
        return None
    return (f"rows before {cut} were pruned (stableprompt ledger prune): this report counts "
            "only the calls after it, not the whole period; `stableprompt report --rollups` "
            "has the totals of every hour, pruned ones included.")


def run_rollups(args: argparse.Namespace, ledgers: Sequence[Ledger], paths: Sequence[str],
                metas: Sequence[dict[str, str]], since: datetime | None) -> int:
    """Print (or ``--json``) the rollup report of ``ledgers``.

    Raises:
        UsageError: An option that needs call rows (:data:`ROLLUP_CONFLICTS`).
        LedgerError: A ledger cannot be read.
    """
    used = [name for name in ROLLUP_CONFLICTS if getattr(args, name, None) not in (None, False)]
    if used:
        flag = "--" + used[0].replace("_", "-")
        raise UsageError(f"stableprompt report: error: argument --rollups: not with {flag} "
                         "(rollups hold sums per hour, not calls or sessions): run the "
                         "row-level report for that")
    rows = [row for ledger in ledgers for row in rollup_rows(ledger, since=since)]
    summary = summarize_rollups(rows, bucket=args.bucket)
    pruned = {path: m[PRUNED_BEFORE] for path, m in zip(paths, metas, strict=True)
              if PRUNED_BEFORE in m}
    if args.json:
        write_scrubbed_json({"ledger": paths[0] if len(paths) == 1 else None,
                             "ledgers": list(paths), "meta": list(metas),
                             "rollups": summary.to_json(), "pruned_before": pruned})
        return 0
    for path, meta in zip(paths, metas, strict=True):
        for line in meta_lines({k: v for k, v in meta.items() if k != PRUNED_BEFORE}):
            print(shown(line if len(paths) == 1 else f"{path}: {line}", markup=False))
    _print(summary, name=paths[0] if len(paths) == 1 else f"{len(paths)} ledgers")
    console = make_console(sys.stdout)
    for path, cut in pruned.items():
        console.print(shown(f"{path}: call rows before {cut} were pruned; their hours are "
                            "in these totals (rollups are kept)."))
    return 0


def _print(summary: RollupSummary, *, name: str) -> None:
    from rich.table import Table

    console = make_console(sys.stdout)
    if not summary.buckets:
        console.print(shown(f"{name}: no calls in the rollups"))
        return
    table = Table(title=shown(f"stableprompt report --rollups: {name} (per {summary.bucket}, "
                              "UTC)"), title_justify="left", header_style="bold")
    # The period stays whole at any width (a cut "2026-03-…" names no hour); the other
    # cells wrap (numbers at their separators) rather than being cut.
    period_width = max(len("total"), *(len(key[0]) for key in summary.groups))
    for column in (summary.bucket, "provider", "model", "scenario", "calls", "input tokens",
                   "cache read", "cache write", "output", "hit rate", "cost", "excluded"):
        first = column == summary.bucket
        table.add_column(column, no_wrap=first, overflow="fold",
                         min_width=period_width if first else None,
                         justify="left" if column in (summary.bucket, "provider", "model",
                                                      "scenario") else "right")
    for (period, provider, model, scenario), t in summary.groups.items():
        table.add_row(period, shown(provider or "(none)"), shown(model or "(none)"),
                      shown(scenario or "(none)"), format_int(t.calls),
                      format_int(t.input_tokens), format_int(t.cache_read_tokens),
                      format_int(t.cache_write_tokens), format_int(t.output_tokens),
                      format_pct(t.hit_rate),
                      format_usd(t.cost_usd, complete=not t.cost_unknown_calls),
                      format_int(t.excluded))
    o = summary.overall
    table.add_row("total", "", "", "", format_int(o.calls), format_int(o.input_tokens),
                  format_int(o.cache_read_tokens), format_int(o.cache_write_tokens),
                  format_int(o.output_tokens), format_pct(o.hit_rate),
                  format_usd(o.cost_usd, complete=not o.cost_unknown_calls),
                  format_int(o.excluded), style="bold")
    console.print(table)
    lines = [f"{summary.buckets:,} rollup rows (UTC hour x provider x model x scenario x "
             "verdict); hit rate is cache reads over input tokens of the included calls.",
             f"verdicts: {format_verdicts(o.verdicts)} (per group: --json)."]
    if o.excluded:
        lines.append(f"excluded from token sums and rates: {o.excluded:,} calls (unanalysed "
                     f"{o.unanalysed:,}, no usage {o.unknown_usage:,}, cache reads not "
                     f"reported {o.unknown_reads:,}, suspect {o.suspect:,}, inconsistent "
                     f"{o.inconsistent:,}); failed calls: {o.failed_calls:,}.")
    if o.cost_unknown_calls:
        lines.append(f"cost of {o.cost_unknown_calls:,} calls unknown or a lower bound (≥).")
    pricing = summary.pricing
    source = pricing.source + (f", prices as of {pricing.as_of()}" if pricing.as_of() else "")
    lines.append(f"Costs: {source}; priced in bulk per provider, model and date from the "
                 "token sums.")
    lines.extend(pricing.notes)
    for line in lines:
        console.print(shown(line))
