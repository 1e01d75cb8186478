"""``stableprompt report --what-if``: the what-if replay as tables and lines.

One table per provider family (:class:`~stableprompt.WhatIf`): each candidate policy's
replayed cost, its difference from what was paid, hit rate, ``ttl_expired`` calls and
keep-alive requests, then one column per request kind; under it what was paid, the replay of
the policy used (and how far it is from what was paid), the cheapest policy and its saving,
and the hindsight bound.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from .._accounting._what_if import WhatIf
from .._subcommand import shown
from ._text import format_int, format_pct, format_usd, make_console

__all__ = ["print_what_if", "what_if_lines"]


def _signed_usd(value: float) -> str:
    """``+$0.0123`` / ``−$0.0123``; ``$0.0000`` without a sign for what rounds to zero."""
    if abs(value) < 0.00005:
        return format_usd(0.0)
    return ("+" if value > 0 else "−") + format_usd(abs(value))


def _share(part: float, whole: float) -> str:
    share = part / whole
    return "0.0%" if abs(share) < 0.0005 else f"{share:+.1%}"


def what_if_lines(result: WhatIf) -> list[str]:
    """The lines under a provider's what-if table (module docstring)."""
    paid, used = result.recorded_usd, result.as_used
    error = (used.usd - paid) / paid if paid else 0.0
    cheapest = result.cheapest
    calls = "call" if result.calls == 1 else "calls"
    lines = [
        f"{result.provider}: {result.calls:,} {calls} replayed; paid {format_usd(paid)} "
        f"(linear unit prices per model and day).",
        f"  the policy used ({used.policy.label()}), replayed: {format_usd(used.usd)} "
        f"({error:+.2%} from what was paid: what the replay does not model, such as provider "
        "misses and cross-session reads).",
        f"  cheapest: {cheapest.policy.label()} at {format_usd(cheapest.usd)}, saving "
        f"{_signed_usd(result.saving_usd)} ({_share(result.saving_usd, paid)} of what was "
        "paid)" if paid else f"  cheapest: {cheapest.policy.label()} at "
        f"{format_usd(cheapest.usd)}",
        f"  hindsight bound (the best TTL and keep-alive choice per gap, known only after the "
        f"fact): {format_usd(result.hindsight_usd)}; no candidate replays below it.",
        f"  CachePolicy.from_ledger: {result.recommended().label()}",
    ]
    lines.extend(f"  break-even: {b.text()}" for b in result.break_even.values())
    lines.extend(f"  note: {note}" for note in result.notes)
    return lines


def print_what_if(results: dict[str, WhatIf], *, file: TextIO | None = None) -> None:
    """Print the what-if of each provider (:func:`what_if_lines` under a table); a line
    saying why when there is nothing to replay."""
    from rich.table import Table

    console = make_console(file or sys.stdout)
    if not results:
        console.print("what-if: no call to replay (no provider with known usage and a priced "
                      "model)")
        return
    for provider, result in results.items():
        kinds = [k for k in ("main", "subagent", "one-shot")
                 if any(k in o.by_kind for o in result.outcomes)]
        table = Table(title=f"what-if: {shown(provider)} (cheapest first)",
                      title_justify="left", header_style="bold")
        for column in ("policy", "cost", "vs paid", "hit rate", "ttl expired", "keep-alives",
                       *(f"{k} cost" for k in kinds)):
            table.add_column(column, justify="left" if column == "policy" else "right",
                             no_wrap=column != "policy")
        for outcome in result.outcomes:
            row: list[Any] = [shown(outcome.policy.label()), format_usd(outcome.usd),
                              _signed_usd(outcome.usd - result.recorded_usd),
                              format_pct(outcome.hit_rate), format_int(outcome.ttl_expired),
                              format_int(outcome.keepalive_pings)]
            row += [format_usd(outcome.kind_usd(k)) for k in kinds]
            table.add_row(*row)
        console.print(table)
        for line in what_if_lines(result):
            console.print(shown(line))
