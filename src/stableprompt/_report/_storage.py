"""The report's lines on Gemini explicit caches: storage per token-hour priced next to the
reads and the creation, and the break-even of each cache (``_accounting._storage``)."""

from __future__ import annotations

from .._accounting._storage import break_even_note
from .._accounting._summary import Summary
from ._text import format_int, format_usd

__all__ = ["storage_lines"]


def storage_lines(report: Summary) -> list[str]:
    """One line per explicit cache of the ledger and a total, ``[]`` without any: its tokens,
    life (hours, deleted or expired), storage and creation (USD), the reads it served and
    their tokens (priced with the calls, at the read price), and its break-even; these cache
    calls are left out of the calls, hit rates and ceilings above, and their storage and
    creation are in the total cost."""
    totals = report.explicit_caches
    if not totals.caches:
        return []
    lines = []
    for c in totals.caches:
        tokens = "tokens unknown" if c.tokens is None else f"{format_int(c.tokens)} tokens"
        ended = "deleted" if c.deleted else "until its expiry"
        life = (f"lived {c.hours:.2f} h ({ended})" if c.created is not None
                else "life unknown (not created in this ledger)")
        lines.append(
            f"explicit cache {c.name} ({c.model or 'model unknown'}): {tokens}, {life}; "
            f"storage {format_usd(c.storage_usd)}, creation "
            f"{format_usd(c.creation_usd)}; {format_int(c.reads)} read"
            f"{'s' if c.reads != 1 else ''} served ({format_int(c.read_tokens)} tokens, "
            f"priced with the calls); {break_even_note(c)}.")
    complete = not totals.unpriced
    lines.append(
        f"explicit caches: {len(totals.caches):,}, storage "
        f"{format_usd(totals.storage_usd, complete=complete)} + creation "
        f"{format_usd(totals.creation_usd, complete=complete)} (prices: "
        f"{totals.caches[0].source}); their create / update / delete calls are not in the "
        f"calls, hit rates and ceilings above; in the total cost "
        f"({format_usd(report.cost_usd, complete=complete and report.overall.cost_complete)})"
        + ("" if complete else f"; {totals.unpriced:,} cache{'s' if totals.unpriced != 1 else ''}"
           " unpriced: the costs are lower bounds") + ".")
    return lines
