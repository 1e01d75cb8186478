"""A ledger summary as text: number formats, notes, and rich tables for the terminal.

:func:`print_tables` prints a :class:`~stableprompt._report._summary.Report` (one row per
scenario, a verdict table, optionally one table of sessions per scenario), then the notes;
:func:`meta_lines`, :func:`pricing_lines` and :func:`ceiling_notes` are the lines the terminal,
JSON and HTML outputs share. Numbers are formatted by ``format_*``: percentages with one
decimal, counts with thousands separators, USD with 4 decimals, ``"—"`` for unknown.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from .._canonical import loads
from .._subcommand import rich_console
from ._summary import VERDICTS, Report

__all__ = [
    "SELF_HOSTED",
    "ceiling_notes",
    "format_int",
    "format_pct",
    "format_usd",
    "format_verdicts",
    "make_console",
    "meta_lines",
    "pricing_lines",
    "print_tables",
]


# --------------------------------------------------------------------------- numbers


def format_pct(value: float | None) -> str:
    """A rate as a percentage with one decimal, ``"12.3%"``; ``"—"`` when unknown."""
    return "—" if value is None else f"{value * 100:.1f}%"


def format_int(value: int) -> str:
    """A count with thousands separators, ``"12,345"``."""
    return f"{value:,}"


def format_usd(value: float | None) -> str:
    """A cost in USD with 4 decimals, ``"$0.0123"``; ``"—"`` when unknown."""
    return "—" if value is None else f"${value:,.4f}"


def format_verdicts(counts: Mapping[str, int]) -> str:
    """Non-zero verdict counts in their order, ``"hit 3 client-mutation 1"``; ``"—"`` if none."""
    return " ".join(f"{k.replace('_', '-')} {v}" for k, v in counts.items() if v) or "—"


# --------------------------------------------------------------------------- notes

_META_LABELS = {"backend": "Backend", "workload": "Workload", "provider": "Provider",
                "model": "Model"}


SELF_HOSTED = frozenset({"llama-cpp", "vllm", "sglang"})
"""Provider families that are engines someone runs, not priced services."""


def _meta_value(key: str, value: str) -> str:
    """A JSON object value (the llama-server demo's ``agreement``, ``engine``, ``prefill``)
    as its keys; any other value as it is."""
    if value.startswith("{"):
        try:
            parsed = loads(value)
        except ValueError:
            return value
        if isinstance(parsed, dict):
            keys = ", ".join(list(parsed)[:4]) + (", ..." if len(parsed) > 4 else "")
            return f"JSON with {len(parsed)} keys ({keys}); see --json, meta.{key}"
    return value


def meta_lines(meta: Mapping[str, str]) -> list[str]:
    """Ledger metadata as ``"Label: value"`` lines: backend, workload, provider and model
    first (in that order), then any other key as ``"key: value"`` (a JSON object value as
    its keys only); ``[]`` when empty."""
    known = [f"{label}: {meta[key]}" for key, label in _META_LABELS.items() if key in meta]
    return known + [f"{key}: {_meta_value(key, value)}" for key, value in sorted(meta.items())
                    if key not in _META_LABELS]


def pricing_lines(report: Report) -> list[str]:
    """Where costs come from (one line), then why some were omitted (one line each); for
    calls that all went to a self-hosted engine (:data:`SELF_HOSTED`), one line saying so."""
    pricing = report.pricing
    providers = {p for s in report.scenarios.values() for p in s.providers}
    if not pricing.as_of() and providers and providers <= SELF_HOSTED:
        return [f"Costs: not priced: the calls went to a self-hosted engine "
                f"({', '.join(sorted(providers))})."]
    if pricing.as_of():
        head = (f"Costs: {pricing.source}, each call priced for its provider and model at the "
                f"prices in effect on its date ({pricing.as_of()}).")
    else:
        head = f"Costs: {pricing.source}; nothing could be priced."
    return [head, *pricing.notes]


def ceiling_notes(report: Report) -> list[str]:
    """A note when a scenario read more than its ceiling (``of ceiling`` above 100%); ``[]``
    otherwise. The number is kept: the note says why it can happen."""
    over = [f"{name} {format_pct(s.totals.of_ceiling)}" for name, s in report.scenarios.items()
            if s.totals.of_ceiling is not None and s.totals.of_ceiling > 1.0]
    if not over:
        return []
    return [f"of ceiling above 100% ({', '.join(over)}): some calls read cache entries that "
            "were written before this ledger's earlier calls of their session (a cache still "
            "warm from earlier runs, or another session with the same prefix); the ceiling "
            "counts only what the session's own previous request in this ledger could leave "
            "cached."]


# --------------------------------------------------------------------------- terminal


def make_console(file: TextIO) -> Any:
    """A rich Console on ``file``: the terminal's width, or 160 columns when not a terminal
    (pipes, files), so tables are never squeezed to 80 columns."""
    console = rich_console(file=file, highlight=False)
    if not console.is_terminal:
        console = rich_console(file=file, highlight=False, width=160)
    return console


def print_tables(report: Report, *, title: str, file: TextIO | None = None,
                 notes: Sequence[str] = (), sessions: bool = False) -> None:
    """Print the per-scenario table (and optionally per-session tables) with rich.

    Args:
        report: The summary.
        title: Table title.
        file: Output stream (default stdout).
        notes: Lines printed under the tables; then the cost source and pricing notes
            (:func:`pricing_lines`), which callers do not pass.
        sessions: Also print one table of sessions per scenario.
    """
    from rich.table import Table

    console = make_console(file or sys.stdout)
    table = Table(title=title, title_justify="left", header_style="bold")
    for column in ("scenario", "calls", "input tokens", "cache read", "cache write",
                   "hit rate", "ceiling", "of ceiling", "agreement", "cost"):
        table.add_column(column, justify="left" if column == "scenario" else "right",
                         no_wrap=True)
    for name, scenario in report.scenarios.items():
        t = scenario.totals
        table.add_row(name, format_int(t.calls), format_int(t.input_tokens),
                      format_int(t.cache_read_tokens), format_int(t.cache_write_tokens),
                      format_pct(t.hit_rate), format_pct(t.ceiling), format_pct(t.of_ceiling),
                      format_pct(t.agreement), format_usd(t.cost_usd))
    console.print(table)
    verdicts = Table(title="verdicts (one per call)", title_justify="left", header_style="bold")
    verdicts.add_column("scenario", no_wrap=True)
    for verdict in VERDICTS:
        verdicts.add_column(verdict.replace("_", " "), justify="right")
    for name, scenario in report.scenarios.items():
        verdicts.add_row(name, *(format_int(scenario.totals.verdicts[v]) for v in VERDICTS))
    console.print(verdicts)
    if sessions:
        for name, scenario in report.scenarios.items():
            per = Table(title=f"{name}: sessions", title_justify="left", header_style="bold")
            for column in ("session", "calls", "input", "read", "write", "hit rate",
                           "ceiling", "verdicts"):
                per.add_column(column, justify="left" if column in ("session", "verdicts")
                               else "right")
            for sid, t in scenario.sessions.items():
                per.add_row(sid, format_int(t.calls), format_int(t.input_tokens),
                            format_int(t.cache_read_tokens), format_int(t.cache_write_tokens),
                            format_pct(t.hit_rate), format_pct(t.ceiling),
                            format_verdicts(t.verdicts))
            console.print(per)
    for line in [*notes, *pricing_lines(report)]:
        console.print(line)
