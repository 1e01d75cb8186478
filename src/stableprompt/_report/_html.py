"""A ledger summary as one self-contained HTML page with inline SVG charts.

:func:`html_report` renders a :class:`~stableprompt._report._summary.Report`: the scenario
table, three charts (hit rate against the ceiling, where the input tokens went, verdicts), the
turn-boundary split, the causes ranked by lost tokens (with their fixes and lost USD), the
misses (calls that lost tokens, with cause, segment, path and snippets), one collapsible
section per scenario with its per-call read share and its sessions, then the notes.
No scripts, no external files; every text is HTML-escaped, so the SVG parses as XML.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from ._summary import VERDICTS, Report, ScenarioReport, Totals
from ._text import format_int, format_pct, format_usd, format_verdicts, pricing_lines

__all__ = ["html_report"]

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


def _svg_open(width: float, height: float, label: str) -> str:
    """The opening ``<svg>`` tag of an inline chart (size in CSS pixels, ``label`` for screen
    readers, not escaped: callers pass plain text)."""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'role="img" aria-label="{label}">')


def _svg_rates(report: Report) -> str:
    """Horizontal bars: hit rate (green) over the ceiling (light blue) per scenario."""
    names = list(report.scenarios)
    label_w, bar_w, row_h = 210, 560, 34
    height = row_h * len(names) + 30
    parts = [_svg_open(label_w + bar_w + 130, height, "hit rate and ceiling per scenario")]
    for i, name in enumerate(names):
        t = report.scenarios[name].totals
        y = 10 + i * row_h
        ceiling, hit = t.ceiling or 0.0, t.hit_rate or 0.0
        parts.append(f'<text x="0" y="{y + 17}">{html.escape(name)}</text>')
        parts.append(f'<rect x="{label_w}" y="{y}" width="{bar_w}" height="24" fill="#eee"/>')
        parts.append(f'<rect x="{label_w}" y="{y}" width="{ceiling * bar_w:.1f}" height="24" '
                     f'fill="{_COLORS["ceiling"]}"><title>ceiling {format_pct(t.ceiling)}'
                     "</title></rect>")
        parts.append(f'<rect x="{label_w}" y="{y + 5}" width="{hit * bar_w:.1f}" height="14" '
                     f'fill="{_COLORS["hit"]}"><title>hit rate {format_pct(t.hit_rate)}'
                     "</title></rect>")
        parts.append(f'<text x="{label_w + bar_w + 6}" y="{y + 17}">{format_pct(t.hit_rate)} / '
                     f'{format_pct(t.ceiling)}</text>')
    parts.append(f'<text x="{label_w}" y="{height - 4}">green: hit rate; blue: ceiling '
                 "(append-only bound); both as a share of input tokens</text></svg>")
    return "".join(parts)


def _svg_stack(report: Report, kind: str) -> str:
    """Stacked 100% bars per scenario: token split (``kind="tokens"``) or verdicts."""
    names = list(report.scenarios)
    label_w, bar_w, row_h = 210, 560, 30
    height = row_h * len(names) + 34
    parts = [_svg_open(label_w + bar_w + 20, height, f"{kind} per scenario")]
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
    return (f'{_svg_open(width, plot_h + 18, "per-call read share")}<rect width="{width}" '
            f'height="{plot_h}" fill="#fafafa"/><polyline fill="none" stroke="{_COLORS["hit"]}" '
            f'stroke-width="1.2" points="{points}"/><text x="0" y="{plot_h + 14}">cache read / '
            f"input tokens per call, in ledger order (0 to 1; {len(series):,} calls)</text></svg>")


def _count_cells(t: Totals) -> str:
    """The numeric cells both tables start with: calls, input, read, write, hit rate, ceiling."""
    cells = (format_int(t.calls), format_int(t.input_tokens), format_int(t.cache_read_tokens),
             format_int(t.cache_write_tokens), format_pct(t.hit_rate), format_pct(t.ceiling))
    return "".join(f"<td class=n>{cell}</td>" for cell in cells)


def _explanations(report: Report) -> list[str]:
    """The turn-boundary table, the causes table and the miss table (HTML fragments)."""
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
    misses = "".join(
        f"<tr><td>{e(r.scenario)}</td><td>{e(r.session)}</td><td class=n>{r.turn or ''}</td>"
        f"<td>{e(r.verdict.replace('_', '-'))}{' (partial)' if r.partial else ''}</td>"
        f"<td class=n>{format_pct(r.read_share)}</td><td class=n>{format_int(r.lost_tokens)}</td>"
        f"<td>{e(r.cause or '')}</td><td>{e(r.segment or '')}</td><td>{e(r.path or '')}</td>"
        f"<td><code>{e(repr(r.before)) if r.before is not None else ''}</code></td>"
        f"<td><code>{e(repr(r.after)) if r.after is not None else ''}</code></td></tr>"
        for r in report.calls if r.included and r.lost_tokens > 0)
    return [
        "<h2>Turn boundary</h2><p class=note>Hit rate of calls inside a user turn (after a tool "
        "result) vs the first call after a user message.</p><table><tr><th>scenario</th>"
        "<th>intra-turn calls</th><th>intra-turn hit rate</th><th>cross-turn calls</th>"
        "<th>cross-turn hit rate</th><th>partial</th><th>lost tokens</th><th>lost</th></tr>",
        split, "</table>",
        "<h2>Causes, by lost tokens</h2><table><tr><th>cause</th><th>segment</th><th>path</th>"
        "<th>calls</th><th>lost tokens</th><th>lost</th><th>fix</th></tr>", causes, "</table>",
        "<details><summary>Misses: calls that lost tokens</summary><table><tr><th>scenario</th>"
        "<th>session</th><th>turn</th><th>verdict</th><th>read share</th><th>lost</th>"
        "<th>cause</th><th>segment</th><th>path</th><th>before</th><th>after</th></tr>",
        misses, "</table></details>",
    ]


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
            f"<tr><td>{e(name)}</td>{_count_cells(t)}<td class=n>{format_pct(t.of_ceiling)}</td>"
            f"<td>{e(format_verdicts(t.verdicts))}</td><td class=n>{format_pct(t.agreement)}</td>"
            f"<td class=n>{format_usd(t.cost_usd)}</td></tr>")
    details = []
    for name, scenario in report.scenarios.items():
        session_rows = "".join(
            f"<tr><td>{e(sid)}</td>{_count_cells(t)}<td>{e(format_verdicts(t.verdicts))}</td></tr>"
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
        *_explanations(report),
        "<h2>Sessions</h2>", *details,
        *(f'<p class="note">{e(n)}</p>' for n in [*notes, *pricing_lines(report)]),
    ])
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{e(title)}'
            f"</title><style>{_CSS}</style></head><body>{body}</body></html>\n")
