"""A ledger summary as one self-contained HTML page, its charts drawn by matplotlib.

:func:`html_report` renders a :class:`~stableprompt._accounting._summary.Summary`: the scenario
table, two charts (read share per call per session over time with the cliffs marked by
verdict; cumulative cost as reported vs at the ceiling vs uncached: :mod:`._charts`), the
turn-boundary split, the causes ranked by lost tokens (with their fixes and lost USD), the
cliffs, the misses (calls that lost tokens, with cause, segment, path and before/after
snippets), the what-if replay when the summary has one (``summarize(..., what_if=True)``,
``report --what-if``: ``_what_if_html``), one collapsible table of sessions per scenario
(at most :data:`MAX_SESSION_ROWS`, the rest summarised in one row), then the notes.

Large ledgers (a streaming summary, ``Summary.streamed``): the cliffs and misses tables list
the sharpest cliffs and the calls that lost the most (their captions say how many of how
many), and the charts draw decimated points (``_accounting._builder.Decimator``: cumulative
costs exact at every point drawn); the caption under the charts says so.

Viewable offline: no scripts, no external files or URLs (the charts are inline SVG, their
text is text). The page names what drew the charts (library and version); without
matplotlib (the optional ``report`` extra) each chart's place says how to get it, and the
tables are all there. Every text from the ledger (scenario and session ids, paths, snippets,
notes) is HTML-escaped. Session ids are shown short, as the text report shows them
(``_ids.short_ids`` over each table's ids), the full id in the cell's ``title``. The same report
gives the same bytes.
"""

from __future__ import annotations

import html
import itertools
from collections.abc import Sequence
from datetime import UTC, datetime

from .._accounting._builder import MAX_POINTS
from .._accounting._calls import CLIFF_DROP
from .._accounting._summary import Summary, Totals
from . import _charts
from ._ids import short_ids
from ._text import (
    failed_call_lines,
    format_int,
    format_pct,
    format_usd,
    format_verdicts,
    pricing_lines,
)
from ._what_if_html import what_if_section

__all__ = ["MAX_SESSION_ROWS", "html_report"]

_OPEN_ROWS = 50
"""The cliff and miss tables start open up to this many rows, collapsed beyond."""
MAX_SESSION_ROWS = 300
"""Sessions listed per scenario; the rest are summarised in one row (their numbers are in the
scenario's totals)."""

_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:1rem 0}
th,td{padding:.25rem .6rem;border-bottom:1px solid #ddd;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}th{text-align:left;background:#f5f5f5}
.note{color:#555}.banner{background:#fff3e0;border-left:4px solid #fb8c00;padding:.6rem 1rem}
.missing{background:#f5f5f5;border:1px dashed #999;padding:1rem}
figure{margin:1rem 0}svg.chart{display:block;max-width:100%;height:auto}
code{white-space:pre-wrap;word-break:break-all;font-size:12px}details{margin:.5rem 0}"""


def _chart(title: str, draw: str, report: Summary, library: str | None) -> str:
    """One chart section: the SVG in a ``<figure>``, or in its place why it is not drawn."""
    head = f"<h2>{title}</h2>"
    if library is None:
        return (f'{head}<p class="missing">Chart not drawn: matplotlib is not installed. '
                f"Install the report extra to get it: <code>{html.escape(_charts.INSTALL_HINT)}"
                "</code></p>")
    svg = getattr(_charts, draw)(report)
    if svg is None:
        return f'{head}<p class="missing">Nothing to draw: no included call has this number.</p>'
    return f'<figure class="chart">{head}{svg}</figure>'


def _count_cells(t: Totals) -> str:
    """The numeric cells both tables start with: calls, input, read, write, hit rate, ceiling."""
    cells = (format_int(t.calls), format_int(t.input_tokens), format_int(t.cache_read_tokens),
             format_int(t.cache_write_tokens), format_pct(t.hit_rate), format_pct(t.ceiling))
    return "".join(f"<td class=n>{cell}</td>" for cell in cells)


def _explanations(report: Summary) -> list[str]:
    """The turn-boundary, causes, user-action, failed-call, cliffs and misses tables (HTML
    fragments); a miss's caveats under its verdict."""
    e = html.escape
    split = "".join(
        f"<tr><td>{e(name)}</td><td class=n>{format_int(t.intra_calls)}</td>"
        f"<td class=n>{format_pct(t.intra_turn_hit_rate)}</td>"
        f"<td class=n>{format_int(t.cross_calls)}</td>"
        f"<td class=n>{format_pct(t.cross_turn_hit_rate)}</td>"
        f"<td class=n>{format_int(t.partial)}</td><td class=n>{format_int(t.lost_tokens)}</td>"
        f"<td class=n>{format_usd(t.lost_usd)}</td></tr>"
        for name, t in [*((n, s.totals) for n, s in report.scenarios.items()),
                        ("(all)", report.overall)])
    causes = "".join(
        f"<tr><td>{e(c.cause)}</td><td>{e(c.segment or '')}</td><td>{e(c.path or '')}</td>"
        f"<td class=n>{format_int(c.calls)}</td><td class=n>{format_int(c.lost_tokens)}</td>"
        f"<td class=n>{format_usd(c.lost_usd)}</td><td>{e(c.fix or '')}</td></tr>"
        for c in report.causes())
    missed, missed_total = report.misses()
    ids = short_ids(r.session for r in missed)
    misses = [
        f"<tr><td>{e(r.scenario)}</td>{_session_cell(r.session, ids)}"
        f"<td class=n>{r.turn or ''}</td>"
        f"<td>{e(_ts(r.ts))}</td>"
        f"<td>{e(r.verdict.replace('_', '-'))}{' (partial)' if r.partial else ''}"
        f"{''.join(f'<br><small>{e(c)}</small>' for c in r.caveats)}</td>"
        f"<td class=n>{format_pct(r.read_share)}</td><td class=n>{format_int(r.lost_tokens)}</td>"
        f"<td class=n>{format_usd(r.lost_usd)}</td>"
        f"<td>{e(r.cause or '')}</td><td>{e(r.segment or '')}</td><td>{e(r.path or '')}"
        f"{f' (+{r.more_divergences} more)' if r.more_divergences else ''}</td>"
        f"<td><code>{e(repr(r.before)) if r.before is not None else ''}</code></td>"
        f"<td><code>{e(repr(r.after)) if r.after is not None else ''}</code></td></tr>"
        for r in missed]
    actions = "".join(
        f"<tr><td>{e(a.action)}</td><td class=n>{format_int(a.calls)}</td>"
        f"<td class=n>{format_int(a.lost_tokens)}</td><td class=n>{format_usd(a.lost_usd)}</td>"
        f"</tr>" for a in report.actions())
    failed = "".join(f"<li>{e(line.strip())}</li>" for line in failed_call_lines(report)[1:])
    sharpest = report.cliffs()
    ids = short_ids(c.call.session for c in sharpest)
    cliffs = [
        f"<tr><td>{e(c.call.scenario)}</td>{_session_cell(c.call.session, ids)}"
        f"<td class=n>{c.call.turn or ''}</td><td>{e(_ts(c.call.ts))}</td>"
        f"<td>{e(c.call.verdict.replace('_', '-'))}</td>"
        f"<td class=n>{format_pct(c.previous_read_share)} → {format_pct(c.call.read_share)}</td>"
        f"<td>{e(c.call.cause or '')}</td><td>{e(c.call.segment or '')}</td></tr>"
        for c in sharpest]
    cliffs_total = report.cliffs_total()
    return [
        "<h2>Turn boundary</h2><p class=note>Hit rate of calls inside a user turn (after a tool "
        "result) vs the first call after a user message.</p><table><tr><th>scenario</th>"
        "<th>intra-turn calls</th><th>intra-turn hit rate</th><th>cross-turn calls</th>"
        "<th>cross-turn hit rate</th><th>partial</th><th>lost tokens</th><th>lost</th></tr>",
        split, "</table>",
        "<h2>Causes, by lost tokens</h2><table><tr><th>cause</th><th>segment</th><th>path</th>"
        "<th>calls</th><th>lost tokens</th><th>lost</th><th>fix</th></tr>", causes, "</table>",
        "<h2>Breaks by the user action behind them</h2><table><tr><th>action</th>"
        "<th>calls</th><th>lost tokens</th><th>lost</th></tr>", actions, "</table>",
        *([f"<h2>Failed calls</h2><ul>{failed}</ul>"] if failed else []),
        _details(f"Cliffs: calls whose read share fell by {CLIFF_DROP * 100:.0f} points "
                 f"or more ({_shown_of(len(cliffs), cliffs_total, 'sharpest')})",
                 len(cliffs)),
        "<table><tr><th>scenario</th><th>session</th><th>turn</th><th>time (UTC)</th>"
        "<th>verdict</th><th>read share</th><th>cause</th><th>segment</th></tr>", *cliffs,
        "</table></details>",
        _details(f"Misses: calls that lost tokens "
                 f"({_shown_of(len(misses), missed_total, 'most lost')})", len(misses)),
        "<table><tr><th>scenario</th><th>session</th><th>turn</th><th>time (UTC)</th>"
        "<th>verdict</th><th>read share</th><th>lost tokens</th><th>lost</th><th>cause</th>"
        "<th>segment</th><th>path</th><th>before</th><th>after</th></tr>", *misses,
        "</table></details>",
    ]


def _session_cell(session: str | None, ids: dict[str, str]) -> str:
    """A table cell with a session id as the text report shows it (``_ids.short_ids`` over
    the table's ids), the full id in its ``title`` (shown on hover); empty for no session."""
    if session is None:
        return "<td></td>"
    short = ids.get(session, session)
    if short == session:
        return f"<td>{html.escape(session)}</td>"
    return f"<td title=\"{html.escape(session)}\">{html.escape(short)}</td>"


def _shown_of(shown: int, total: int, which: str) -> str:
    """``"12"``, or ``"500 shown of 9,000: the most lost"`` when a streaming summary kept only
    some rows."""
    if shown == total:
        return f"{total:,}"
    return f"{shown:,} shown of {total:,}: the {which}"


def _ts(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _details(summary: str, rows: int) -> str:
    """A ``<details>`` opening tag: open when the table is short (at most :data:`_OPEN_ROWS`)."""
    state = " open" if rows <= _OPEN_ROWS else ""
    return f"<details{state}><summary>{html.escape(summary)}</summary>"


def html_report(report: Summary, *, title: str, intro: Sequence[str] = (),
                notes: Sequence[str] = ()) -> str:
    """A self-contained HTML page (module docstring): tables and matplotlib's inline SVG
    charts, no scripts, no external files; deterministic (same report, same bytes).

    Args:
        report: The summary (:func:`~stableprompt._accounting._summary.summarize`); its numbers
            are shown as computed there, never recomputed.
        title: Page title (escaped).
        intro: Paragraphs shown first (e.g. the backend banner; escaped).
        notes: Paragraphs shown after the tables (escaped). The page adds the cost source
            and pricing notes itself (:func:`pricing_lines`): do not pass them again.

    Returns:
        The page as text (UTF-8 declared), ending with a newline. Without matplotlib the
        tables are all there and each chart's place says ``pip install 'stableprompt[report]'``.
    """
    e = html.escape
    rows = []
    for name, scenario in report.scenarios.items():
        t = scenario.totals
        rows.append(
            f"<tr><td>{e(name)}</td>{_count_cells(t)}<td class=n>{format_pct(t.of_ceiling)}</td>"
            f"<td>{e(format_verdicts(t.verdicts))}</td><td class=n>{format_pct(t.agreement)}</td>"
            f"<td class=n>{format_usd(t.cost_usd, complete=t.cost_complete)}</td>"
            f"<td class=n>{format_usd(t.cost_at_ceiling_usd, complete=t.cost_complete)}</td>"
            f"<td class=n>{format_usd(t.cost_uncached_usd, complete=t.cost_complete)}</td></tr>")
    details = []
    for name, scenario in report.scenarios.items():
        count = len(scenario.sessions)
        sessions = list(itertools.islice(scenario.sessions.items(), MAX_SESSION_ROWS))
        ids = short_ids(sid for sid, _ in sessions)
        session_rows = "".join(
            f"<tr>{_session_cell(sid, ids)}{_count_cells(t)}"
            f"<td>{e(format_verdicts(t.verdicts))}</td></tr>"
            for sid, t in sessions)
        if count > MAX_SESSION_ROWS:
            session_rows += (f"<tr><td colspan=8>and {count - MAX_SESSION_ROWS:,} more "
                             "sessions (in the scenario's totals above; every session: "
                             "<code>stableprompt report --sessions</code> or "
                             "<code>--json</code>)</td></tr>")
        details.append(
            f"<details><summary>{e(name)}: {count:,} sessions</summary>"
            "<table><tr><th>session</th><th>calls</th>"
            "<th>input</th><th>read</th><th>write</th><th>hit rate</th><th>ceiling</th>"
            f"<th>verdicts</th></tr>{session_rows}</table></details>")
    library = _charts.plotting_library()
    drawn_by = (f"Charts drawn by {library} (inline SVG; no scripts, viewable offline)."
                if library is not None else
                f"Charts not drawn: matplotlib is not installed ({_charts.INSTALL_HINT}).")
    if report.streamed is not None and report.streamed.decimated:
        drawn_by += (f" {report.calls_total:,} calls: the charts draw at most "
                     f"{2 * MAX_POINTS:,} points per scenario (runs of calls merged; the "
                     "cumulative costs are exact at every point drawn).")
    body = "".join([
        f"<h1>{e(title)}</h1>",
        *(f'<p class="banner">{e(p)}</p>' for p in intro),
        f'<p class="note" id="drawn-by">{e(drawn_by)}</p>',
        "<h2>Scenarios</h2><table><tr><th>scenario</th><th>calls</th><th>input tokens</th>"
        "<th>cache read</th><th>cache write</th><th>hit rate</th><th>ceiling</th>"
        "<th>of ceiling</th><th>verdicts</th><th>agreement</th><th>cost</th>"
        "<th>at ceiling</th><th>uncached</th></tr>",
        *rows, "</table>",
        _chart("Read share per call, by session", "read_share_svg", report, library),
        _chart("Cumulative cost, actual vs ceiling", "cost_svg", report, library),
        *_explanations(report),
        what_if_section(report.what_if),
        "<h2>Sessions</h2>", *details,
        *(f'<p class="note">{e(n)}</p>' for n in [*notes, *pricing_lines(report)]),
    ])
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{e(title)}'
            f"</title><style>{_CSS}</style></head><body>{body}</body></html>\n")
