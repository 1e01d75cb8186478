"""Summarize a ledger: per scenario and per session, in the terminal, as JSON and as HTML.

:func:`summarize` reads :class:`~stableprompt.UsageRecord` rows (``Ledger.records()``) and
groups them by ``scenario`` and ``session_id``. Every number comes from the records:

* ``calls``: records in the group (failed calls included).
* ``input_tokens`` / ``cache_read_tokens`` / ``cache_write_tokens`` / ``output_tokens``: sums
  of the provider-reported fields over calls whose usage is known (``input_tokens`` is the
  inclusive total, ``gen_ai.usage.input_tokens``).
* ``hit_rate``: ``cache_read_tokens / input_tokens`` (token-weighted, DESIGN.md).
* ``ceiling``: the append-only upper bound on the same calls, as a hit rate. For each call with
  known usage, in ledger order within its scenario and session, an append-only harness could at
  best read the whole previous request of the same session: ``min(previous input_tokens,
  this call's input_tokens)``, floored to the model's cache granularity and 0 when below its
  minimum cacheable length (:func:`~stableprompt.cache_policy`); a session's first call has
  ceiling 0. It uses request sizes only, so a scenario's own mistakes do not lower it. Reads of
  another session's identical head can exceed it (the demo gives each session its own head).
* ``verdicts``: count per attribution verdict (all seven keys, zeros included).
* ``agreement``: fraction of calls with both numbers known whose predicted cache reads
  (``predicted_cache_read_tokens``) equal the reported ones within the provider's granularity
  (``|predicted - reported| < granularity_tokens``); ``None`` when no call has both.
* ``cost_usd``: each call priced with `genai-prices <https://pypi.org/project/genai-prices/>`_
  at its own date (``ts_utc``) for its provider and model (cache reads and writes, including
  the 1-hour write split, at their own rates); ``None`` with a note when the model is unknown.

``stableprompt report LEDGER [--json] [--html PATH]`` prints the same summary, after the
ledger's metadata (``Ledger.meta()``: e.g. the backend the calls went to, so numbers from our
emulator say so). It opens the ledger read-only and never creates, migrates or writes it.
"""

from __future__ import annotations

import argparse
import html
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ._cli import Subcommand, UsageError
from ._exceptions import LedgerError
from ._policy import PolicyTable, cache_policy
from ._record import UsageRecord

if TYPE_CHECKING:
    from ._ledger import Ledger

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

VERDICTS = ("hit", "cold", "client_mutation", "below_minimum", "ttl_expired", "provider_miss",
            "unknown")
"""The attribution verdicts, in display order."""

NO_SCENARIO = "(none)"
NO_SESSION = "(none)"
_GENAI_PROVIDERS = {"gemini": "google", "bedrock": "aws", "xai": "x-ai"}


# --------------------------------------------------------------------------- model


@dataclass
class Totals:
    """Sums over a group of calls (tokens unless stated). See the module docstring.

    Attributes:
        calls: Calls in the group.
        unknown_usage: Calls whose usage is unknown (failed, interrupted).
        input_tokens: Reported input tokens, inclusive of cache reads and writes.
        cache_read_tokens: Reported cache reads.
        cache_write_tokens: Reported cache writes (all TTLs).
        output_tokens: Reported output tokens.
        ceiling_tokens: Sum of the per-call append-only ceiling.
        verdicts: Calls per verdict.
        agreement_calls: Calls with both predicted and reported reads.
        agreement_matches: Of those, calls where they agree within the granularity.
        cost_usd: Summed price (USD), ``None`` when any priced call could not be priced.
    """

    calls: int = 0
    unknown_usage: int = 0
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    ceiling_tokens: int = 0
    verdicts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VERDICTS, 0))
    agreement_calls: int = 0
    agreement_matches: int = 0
    cost_usd: float | None = 0.0

    @property
    def hit_rate(self) -> float | None:
        """``cache_read_tokens / input_tokens``, ``None`` when no input is known."""
        return self.cache_read_tokens / self.input_tokens if self.input_tokens else None

    @property
    def ceiling(self) -> float | None:
        """``ceiling_tokens / input_tokens``: the append-only bound as a hit rate."""
        return self.ceiling_tokens / self.input_tokens if self.input_tokens else None

    @property
    def of_ceiling(self) -> float | None:
        """``cache_read_tokens / ceiling_tokens``: share of the ceiling reached."""
        return self.cache_read_tokens / self.ceiling_tokens if self.ceiling_tokens else None

    @property
    def agreement(self) -> float | None:
        """Fraction of calls whose prediction matches the report within the granularity."""
        return self.agreement_matches / self.agreement_calls if self.agreement_calls else None

    def add(self, record: UsageRecord, ceiling: int, agrees: bool | None,
            cost: float | None, priced: bool) -> None:
        """Add one call (its ceiling, agreement and cost computed by :func:`summarize`)."""
        self.calls += 1
        verdict = record.verdict if record.verdict in self.verdicts else "unknown"
        self.verdicts[verdict] += 1
        if record.input_tokens_total is None:
            self.unknown_usage += 1
        else:
            self.input_tokens += record.input_tokens_total
            self.cache_read_tokens += record.cache_read_tokens or 0
            self.cache_write_tokens += record.cache_write_tokens or 0
            self.output_tokens += record.output_tokens or 0
            self.ceiling_tokens += ceiling
        if agrees is not None:
            self.agreement_calls += 1
            self.agreement_matches += int(agrees)
        if priced:
            self.cost_usd = None if cost is None or self.cost_usd is None else (
                self.cost_usd + cost)

    def to_json(self) -> dict[str, Any]:
        """The issue's fields: calls, input_tokens, cache_read_tokens, cache_write_tokens,
        hit_rate, ceiling, verdicts, agreement (rates rounded to 6 digits)."""
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "hit_rate": _round(self.hit_rate),
            "ceiling": _round(self.ceiling),
            "verdicts": dict(self.verdicts),
            "agreement": _round(self.agreement),
        }

    def to_full_json(self) -> dict[str, Any]:
        """:meth:`to_json` plus output tokens, unknown usage, ceiling tokens, share of the
        ceiling and cost (USD, rounded to 6 digits)."""
        return {
            **self.to_json(),
            "output_tokens": self.output_tokens,
            "unknown_usage": self.unknown_usage,
            "ceiling_tokens": self.ceiling_tokens,
            "of_ceiling": _round(self.of_ceiling),
            "cost_usd": _round(self.cost_usd),
        }


@dataclass
class ScenarioReport:
    """One scenario: totals, per-session totals, and the models/providers seen."""

    name: str
    totals: Totals = field(default_factory=Totals)
    sessions: dict[str, Totals] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)
    providers: list[str] = field(default_factory=list)
    read_series: list[float] = field(default_factory=list)  # per call: read / input


@dataclass
class Pricing:
    """How costs were computed.

    Attributes:
        source: ``"genai-prices <version>"`` (or why pricing is unavailable).
        first_date: Earliest call date priced.
        last_date: Latest call date priced.
        notes: Why some costs were omitted (unknown model, ...), one line each.
    """

    source: str = ""
    first_date: date | None = None
    last_date: date | None = None
    notes: list[str] = field(default_factory=list)

    def as_of(self) -> str | None:
        """``"2026-01-01"`` or ``"2026-01-01..2026-01-03"``; ``None`` when nothing was priced."""
        if self.first_date is None or self.last_date is None:
            return None
        if self.first_date == self.last_date:
            return self.first_date.isoformat()
        return f"{self.first_date.isoformat()}..{self.last_date.isoformat()}"

    def to_json(self) -> dict[str, Any]:
        """``{"source", "as_of", "notes"}``."""
        return {"source": self.source, "as_of": self.as_of(), "notes": list(self.notes)}


@dataclass
class Report:
    """A ledger summary: scenarios in order of first appearance."""

    scenarios: dict[str, ScenarioReport]
    records: int
    pricing: Pricing

    def to_json(self, *, sessions: bool = True) -> dict[str, Any]:
        """``{"records", "pricing", "scenarios": {name: {...full totals..., "models",
        "sessions": {id: {...}}}}}``."""
        out: dict[str, Any] = {}
        for name, scenario in self.scenarios.items():
            entry = {**scenario.totals.to_full_json(), "models": list(scenario.models),
                     "providers": list(scenario.providers)}
            if sessions:
                entry["sessions"] = {sid: t.to_full_json() for sid, t in scenario.sessions.items()}
            out[name] = entry
        return {"records": self.records, "pricing": self.pricing.to_json(), "scenarios": out}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


# --------------------------------------------------------------------------- summarizing


def _policy(provider: str | None, model: str | None,
            policies: PolicyTable | None) -> tuple[int, int]:
    """``(min_cacheable_tokens, granularity_tokens)``; ``(0, 1)`` for unknown providers."""
    try:
        policy = cache_policy(provider or "", model or "", policies)
    except LookupError:
        return 0, 1
    return policy.min_cacheable_tokens, policy.granularity_tokens


@lru_cache(maxsize=65_536)
def _price(provider: str, model: str, day: date, total: int, read: int, write: int,
           write_1h: int, output: int) -> float:
    from genai_prices import Usage, calc_price

    usage: dict[str, int] = {"input_tokens": total, "cache_read_tokens": read,
                             "cache_write_tokens": write, "output_tokens": output}
    if write_1h:
        usage["cache_write_1h_tokens"] = write_1h
    stamp = datetime(day.year, day.month, day.day, 12)
    result = calc_price(Usage(**usage), model, provider_id=_GENAI_PROVIDERS.get(provider, provider),
                        genai_request_timestamp=stamp)
    return float(result.total_price)


def _genai_prices_version() -> str | None:
    try:
        from importlib.metadata import version

        return f"genai-prices {version('genai-prices')}"
    except Exception:
        return None


def summarize(records: Iterable[UsageRecord], *, policies: PolicyTable | None = None,
              price: bool = True) -> Report:
    """Group records by scenario and session and compute the summary (module docstring).

    Args:
        records: Ledger records, in ledger order (time order).
        policies: Cache-policy table for minimums and granularity (default: shipped).
        price: Price calls with genai-prices (``False``: every cost is ``None``).

    Returns:
        A :class:`Report`; scenarios and sessions in order of first appearance.
    """
    scenarios: dict[str, ScenarioReport] = {}
    previous: dict[tuple[str, str], int] = {}
    pricing = Pricing(source=_genai_prices_version() or "genai-prices not installed")
    notes: dict[str, None] = {}
    count = 0
    for record in records:
        count += 1
        name = record.scenario or NO_SCENARIO
        sid = record.session_id or NO_SESSION
        scenario = scenarios.get(name)
        if scenario is None:
            scenario = scenarios[name] = ScenarioReport(name)
        if record.model and record.model not in scenario.models:
            scenario.models.append(record.model)
        if record.provider and record.provider not in scenario.providers:
            scenario.providers.append(record.provider)
        minimum, granularity = _policy(record.provider, record.model, policies)
        total = record.input_tokens_total
        ceiling = 0
        if total is not None:
            before = previous.get((name, sid))
            if before is not None:
                best = min(before, total) // granularity * granularity
                ceiling = best if best >= minimum else 0
            previous[(name, sid)] = total
            scenario.read_series.append((record.cache_read_tokens or 0) / total if total else 0.0)
        agrees = None
        predicted, reported = record.predicted_cache_read_tokens, record.cache_read_tokens
        if predicted is not None and reported is not None and total is not None:
            agrees = abs(predicted - reported) < granularity
        cost, priced = None, False
        if price and total is not None:
            priced = True
            cost = _record_cost(record, pricing, notes)
        scenario.totals.add(record, ceiling, agrees, cost, priced)
        session = scenario.sessions.get(sid)
        if session is None:
            session = scenario.sessions[sid] = Totals()
        session.add(record, ceiling, agrees, cost, priced)
    pricing.notes = list(notes)
    return Report(scenarios, count, pricing)


def _record_cost(record: UsageRecord, pricing: Pricing, notes: dict[str, None]) -> float | None:
    if pricing.source.startswith("genai-prices not"):
        notes["genai-prices is not installed: costs omitted"] = None
        return None
    model, provider = record.model, record.provider
    if not model or not provider:
        notes["calls without a model or provider name: cost omitted"] = None
        return None
    day = record.ts_utc.date()
    try:
        cost = _price(provider, model, day, record.input_tokens_total or 0,
                      record.cache_read_tokens or 0, record.cache_write_tokens or 0,
                      record.cache_write_1h_tokens or 0, record.output_tokens or 0)
    except LookupError:
        notes[f"genai-prices has no price for model {model!r} at provider {provider!r}: "
              "cost omitted"] = None
        return None
    except Exception as exc:  # a pricing-library problem must not hide the token numbers
        notes[f"cannot price {model!r}: {type(exc).__name__}: {exc}"] = None
        return None
    if pricing.first_date is None or day < pricing.first_date:
        pricing.first_date = day
    if pricing.last_date is None or day > pricing.last_date:
        pricing.last_date = day
    return cost


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
    from ._ledger import Ledger

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


# --------------------------------------------------------------------------- notes

_META_LABELS = {"backend": "Backend", "workload": "Workload", "provider": "Provider",
                "model": "Model"}


def meta_lines(meta: Mapping[str, str]) -> list[str]:
    """Ledger metadata as ``"Label: value"`` lines: backend, workload, provider and model
    first (in that order), then any other key as ``"key: value"``; ``[]`` when empty."""
    known = [f"{label}: {meta[key]}" for key, label in _META_LABELS.items() if key in meta]
    return known + [f"{key}: {value}" for key, value in sorted(meta.items())
                    if key not in _META_LABELS]


def pricing_lines(report: Report) -> list[str]:
    """Where costs come from (one line), then why some were omitted (one line each)."""
    pricing = report.pricing
    if pricing.as_of():
        head = (f"Costs: {pricing.source}, each call priced for its provider and model at the "
                f"prices in effect on its date ({pricing.as_of()}).")
    else:
        head = f"Costs: {pricing.source}; nothing could be priced."
    return [head, *pricing.notes]


def ceiling_notes(report: Report) -> list[str]:
    """A note when a scenario read more than its ceiling (``of ceiling`` above 100%); ``[]``
    otherwise. The number is kept: the note says why it can happen."""
    over = [f"{name} {_pct(s.totals.of_ceiling)}" for name, s in report.scenarios.items()
            if s.totals.of_ceiling is not None and s.totals.of_ceiling > 1.0]
    if not over:
        return []
    return [f"of ceiling above 100% ({', '.join(over)}): some calls read cache entries that "
            "were written before this ledger's earlier calls of their session (a cache still "
            "warm from earlier runs, or another session with the same prefix); the ceiling "
            "counts only what the session's own previous request in this ledger could leave "
            "cached."]


# --------------------------------------------------------------------------- terminal


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def _int(value: int) -> str:
    return f"{value:,}"


def _usd(value: float | None) -> str:
    return "—" if value is None else f"${value:,.4f}"


def _verdicts(counts: Mapping[str, int]) -> str:
    return " ".join(f"{k.replace('_', '-')} {v}" for k, v in counts.items() if v) or "—"


def make_console(file: TextIO) -> Any:
    """A rich Console on ``file``: the terminal's width, or 160 columns when not a terminal
    (pipes, files), so tables are never squeezed to 80 columns."""
    from rich.console import Console

    console = Console(file=file, highlight=False)
    if not console.is_terminal:
        console = Console(file=file, highlight=False, width=160)
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
        table.add_row(name, _int(t.calls), _int(t.input_tokens), _int(t.cache_read_tokens),
                      _int(t.cache_write_tokens), _pct(t.hit_rate), _pct(t.ceiling),
                      _pct(t.of_ceiling), _pct(t.agreement), _usd(t.cost_usd))
    console.print(table)
    verdicts = Table(title="verdicts (one per call)", title_justify="left", header_style="bold")
    verdicts.add_column("scenario", no_wrap=True)
    for verdict in VERDICTS:
        verdicts.add_column(verdict.replace("_", " "), justify="right")
    for name, scenario in report.scenarios.items():
        verdicts.add_row(name, *(_int(scenario.totals.verdicts[v]) for v in VERDICTS))
    console.print(verdicts)
    if sessions:
        for name, scenario in report.scenarios.items():
            per = Table(title=f"{name}: sessions", title_justify="left", header_style="bold")
            for column in ("session", "calls", "input", "read", "write", "hit rate",
                           "ceiling", "verdicts"):
                per.add_column(column, justify="left" if column in ("session", "verdicts")
                               else "right")
            for sid, t in scenario.sessions.items():
                per.add_row(sid, _int(t.calls), _int(t.input_tokens), _int(t.cache_read_tokens),
                            _int(t.cache_write_tokens), _pct(t.hit_rate), _pct(t.ceiling),
                            _verdicts(t.verdicts))
            console.print(per)
    for line in [*notes, *pricing_lines(report)]:
        console.print(line)


# --------------------------------------------------------------------------- HTML

_COLORS = {"read": "#2e7d32", "write": "#f9a825", "uncached": "#b0bec5", "ceiling": "#90caf9",
           "hit": "#2e7d32", "cold": "#64b5f6", "client_mutation": "#e53935",
           "below_minimum": "#8d6e63", "ttl_expired": "#ab47bc", "provider_miss": "#ff7043",
           "unknown": "#9e9e9e"}
_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:1rem 0}
th,td{padding:.25rem .6rem;border-bottom:1px solid #ddd}
td.n{text-align:right;font-variant-numeric:tabular-nums}th{text-align:left;background:#f5f5f5}
.note{color:#555}.banner{background:#fff3e0;border-left:4px solid #fb8c00;padding:.6rem 1rem}
svg text{font:12px system-ui,sans-serif}details{margin:.5rem 0}"""


def _svg_rates(report: Report) -> str:
    """Horizontal bars: hit rate (green) over the ceiling (light blue) per scenario."""
    names = list(report.scenarios)
    label_w, bar_w, row_h = 210, 560, 34
    height = row_h * len(names) + 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 130}" '
             f'height="{height}" role="img" aria-label="hit rate and ceiling per scenario">']
    for i, name in enumerate(names):
        t = report.scenarios[name].totals
        y = 10 + i * row_h
        ceiling, hit = t.ceiling or 0.0, t.hit_rate or 0.0
        parts.append(f'<text x="0" y="{y + 17}">{html.escape(name)}</text>')
        parts.append(f'<rect x="{label_w}" y="{y}" width="{bar_w}" height="24" fill="#eee"/>')
        parts.append(f'<rect x="{label_w}" y="{y}" width="{ceiling * bar_w:.1f}" height="24" '
                     f'fill="{_COLORS["ceiling"]}"><title>ceiling {_pct(t.ceiling)}</title></rect>')
        parts.append(f'<rect x="{label_w}" y="{y + 5}" width="{hit * bar_w:.1f}" height="14" '
                     f'fill="{_COLORS["hit"]}"><title>hit rate {_pct(t.hit_rate)}</title></rect>')
        parts.append(f'<text x="{label_w + bar_w + 6}" y="{y + 17}">{_pct(t.hit_rate)} / '
                     f'{_pct(t.ceiling)}</text>')
    parts.append(f'<text x="{label_w}" y="{height - 4}">green: hit rate; blue: ceiling '
                 "(append-only bound); both as a share of input tokens</text></svg>")
    return "".join(parts)


def _svg_stack(report: Report, kind: str) -> str:
    """Stacked 100% bars per scenario: token split (``kind="tokens"``) or verdicts."""
    names = list(report.scenarios)
    label_w, bar_w, row_h = 210, 560, 30
    height = row_h * len(names) + 34
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 20}" '
             f'height="{height}" role="img" aria-label="{kind} per scenario">']
    for i, name in enumerate(names):
        t = report.scenarios[name].totals
        if kind == "tokens":
            uncached = max(t.input_tokens - t.cache_read_tokens - t.cache_write_tokens, 0)
            pieces = [("read", t.cache_read_tokens), ("write", t.cache_write_tokens),
                      ("uncached", uncached)]
        else:
            pieces = [(v, t.verdicts[v]) for v in VERDICTS]
        whole = sum(v for _, v in pieces) or 1
        y, x = 8 + i * row_h, float(label_w)
        parts.append(f'<text x="0" y="{y + 15}">{html.escape(name)}</text>')
        for key, value in pieces:
            width = value / whole * bar_w
            if width <= 0:
                continue
            parts.append(f'<rect x="{x:.1f}" y="{y}" width="{width:.1f}" height="20" '
                         f'fill="{_COLORS[key]}"><title>{key}: {value:,} '
                         f'({value / whole * 100:.1f}%)</title></rect>')
            x += width
    keys = ["read", "write", "uncached"] if kind == "tokens" else list(VERDICTS)
    x = float(label_w) if kind == "tokens" else 0.0
    for key in keys:
        parts.append(f'<rect x="{x:.0f}" y="{height - 16}" width="10" height="10" '
                     f'fill="{_COLORS[key]}"/><text x="{x + 14:.0f}" y="{height - 7}">'
                     f"{key.replace('_', ' ')}</text>")
        x += 26 + 7 * len(key)
    parts.append("</svg>")
    return "".join(parts)


def _svg_series(scenario: ScenarioReport) -> str:
    """Per-call cache-read share (read / input) in call order, as a polyline."""
    series = scenario.read_series
    width, plot_h = 760, 90
    if not series:
        return ""
    step = width / max(len(series) - 1, 1)
    points = " ".join(f"{i * step:.1f},{plot_h - v * (plot_h - 6) - 3:.1f}"
                      for i, v in enumerate(series))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{plot_h + 18}" '
            f'role="img" aria-label="per-call read share"><rect width="{width}" '
            f'height="{plot_h}" fill="#fafafa"/><polyline fill="none" stroke="{_COLORS["hit"]}" '
            f'stroke-width="1.2" points="{points}"/><text x="0" y="{plot_h + 14}">cache read / '
            f"input tokens per call, in ledger order (0 to 1; {len(series):,} calls)</text></svg>")


def html_report(report: Report, *, title: str, intro: Sequence[str] = (),
                notes: Sequence[str] = ()) -> str:
    """A self-contained HTML page: tables and inline SVG charts, no scripts, no external files.

    Args:
        report: The summary.
        title: Page title.
        intro: Paragraphs shown first (e.g. the backend banner; escaped).
        notes: Paragraphs shown after the tables (escaped). The page adds the cost source
            and pricing notes itself (:func:`pricing_lines`): do not pass them again.
    """
    e = html.escape
    rows = []
    for name, scenario in report.scenarios.items():
        t = scenario.totals
        rows.append(
            f"<tr><td>{e(name)}</td><td class=n>{_int(t.calls)}</td>"
            f"<td class=n>{_int(t.input_tokens)}</td><td class=n>{_int(t.cache_read_tokens)}</td>"
            f"<td class=n>{_int(t.cache_write_tokens)}</td><td class=n>{_pct(t.hit_rate)}</td>"
            f"<td class=n>{_pct(t.ceiling)}</td><td class=n>{_pct(t.of_ceiling)}</td>"
            f"<td>{e(_verdicts(t.verdicts))}</td><td class=n>{_pct(t.agreement)}</td>"
            f"<td class=n>{_usd(t.cost_usd)}</td></tr>")
    details = []
    for name, scenario in report.scenarios.items():
        session_rows = "".join(
            f"<tr><td>{e(sid)}</td><td class=n>{_int(t.calls)}</td>"
            f"<td class=n>{_int(t.input_tokens)}</td><td class=n>{_int(t.cache_read_tokens)}</td>"
            f"<td class=n>{_int(t.cache_write_tokens)}</td><td class=n>{_pct(t.hit_rate)}</td>"
            f"<td class=n>{_pct(t.ceiling)}</td><td>{e(_verdicts(t.verdicts))}</td></tr>"
            for sid, t in scenario.sessions.items())
        details.append(
            f"<details><summary>{e(name)}: {len(scenario.sessions)} sessions, per-call read "
            f"share</summary>{_svg_series(scenario)}<table><tr><th>session</th><th>calls</th>"
            "<th>input</th><th>read</th><th>write</th><th>hit rate</th><th>ceiling</th>"
            f"<th>verdicts</th></tr>{session_rows}</table></details>")
    body = "".join([
        f"<h1>{e(title)}</h1>",
        *(f'<p class="banner">{e(p)}</p>' for p in intro),
        "<h2>Scenarios</h2><table><tr><th>scenario</th><th>calls</th><th>input tokens</th>"
        "<th>cache read</th><th>cache write</th><th>hit rate</th><th>ceiling</th>"
        "<th>of ceiling</th><th>verdicts</th><th>agreement</th><th>cost</th></tr>",
        *rows, "</table>",
        "<h2>Hit rate against the ceiling</h2>", _svg_rates(report),
        "<h2>Where the input tokens went</h2>", _svg_stack(report, "tokens"),
        "<h2>Verdicts</h2>", _svg_stack(report, "verdicts"),
        "<h2>Sessions</h2>", *details,
        *(f'<p class="note">{e(n)}</p>' for n in [*notes, *pricing_lines(report)]),
    ])
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{e(title)}'
            f"</title><style>{_CSS}</style></head><body>{body}</body></html>\n")


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path``, creating parent directories.

    Raises:
        OSError: The file cannot be written.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return Path(os.curdir)  # pragma: no cover - "." and "/" always exist


def _probe_directory(directory: Path, target: Path) -> str | None:
    """Create and delete a temporary file in ``directory`` (``target`` or its nearest existing
    ancestor); the OS's reason when it fails."""
    try:
        fd, name = tempfile.mkstemp(prefix=".stableprompt-probe-", dir=directory)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if directory == target:
            return f"cannot create files in {str(directory)!r} ({reason})"
        return (f"cannot create {str(target)!r}: files cannot be created in "
                f"{str(directory)!r} ({reason})")
    os.close(fd)
    os.unlink(name)
    return None


def output_file_problem(path: Path) -> str | None:
    """Why :func:`write_text` could not write ``path``, or ``None`` when it can.

    Checked by trying: an existing file is opened for appending (not truncated); a missing
    one is created and deleted again (in its nearest existing ancestor when parent
    directories are missing, as :func:`write_text` creates them). Nothing is left behind.
    """
    if path.is_dir():
        return f"{str(path)!r} is a directory"
    if os.path.lexists(path) and not path.exists():
        return f"{str(path)!r} is a dangling symbolic link"
    if path.exists():
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_NONBLOCK", 0)))
        except OSError as exc:
            return f"cannot write {str(path)!r} ({exc.strerror or exc})"
        return None
    base = _nearest_existing(path.parent)
    if not base.is_dir():
        return f"cannot create {str(path)!r}: {str(base)!r} is not a directory"
    if base != path.parent:
        return _probe_directory(base, path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        return f"cannot create {str(path)!r} ({exc.strerror or exc})"
    os.close(fd)
    os.unlink(path)
    return None


def output_dir_problem(path: Path) -> str | None:
    """Why files could not be written into directory ``path`` (created if missing), or
    ``None`` when they can. Checked by creating and deleting a temporary file."""
    if os.path.lexists(path):
        if not path.is_dir():
            return f"{str(path)!r} exists and is not a directory"
        return _probe_directory(path, path)
    base = _nearest_existing(path.parent)
    if not base.is_dir():
        return f"cannot create {str(path)!r}: {str(base)!r} is not a directory"
    return _probe_directory(base, path)


def output_file_arg(text: str) -> Path:
    """argparse ``type=`` for an output file: checked before the command runs (so a bad
    ``--html PATH`` fails at once, naming the option, not after the work).

    Raises:
        argparse.ArgumentTypeError: Empty, or see :func:`output_file_problem`.
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("the path is empty")
    path = Path(text)
    problem = output_file_problem(path)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return path


def output_dir_arg(text: str) -> Path:
    """argparse ``type=`` for an output directory (see :func:`output_file_arg`).

    Raises:
        argparse.ArgumentTypeError: Empty, or see :func:`output_dir_problem`.
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("the path is empty")
    path = Path(text)
    problem = output_dir_problem(path)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return path


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two paths name the same file (resolving links; for missing files, by path)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def json_text(data: Any) -> str:
    """Pretty JSON text (2-space indent, keys in insertion order, which is deterministic) with
    a final newline."""
    import json

    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


# --------------------------------------------------------------------------- command


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ledger", metavar="LEDGER",
                        help="ledger database (SQLite) to summarize; opened read-only")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--html", metavar="PATH", type=output_file_arg,
                        help="also write a self-contained HTML report to PATH")
    parser.add_argument("--sessions", action="store_true",
                        help="also print one table of sessions per scenario")


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
             *ceiling_notes(report)]
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
    print_tables(report, title=f"stableprompt report: {args.ledger}", notes=notes,
                 sessions=args.sessions)
    return 0


SUBCOMMAND = Subcommand(
    name="report",
    help="summarize a ledger per scenario and session (tables, --json, --html)",
    add_arguments=_add_arguments,
    run=_run,
)
