"""The HTML report's charts, drawn by matplotlib as inline SVG (the one matplotlib call site).

Two charts, one panel per scenario (at most :data:`MAX_PANELS`, in order of first call):

* :func:`read_share_svg`: the read share of every included call
  (:attr:`~._calls.CallRow.read_share`, 0..1 as a percentage) against its time (``ts``, UTC),
  one line per session, and the report's cliffs (:meth:`~._summary.Summary.cliffs`) as
  markers coloured by their verdict.
* :func:`cost_svg`: the cumulative cost (USD) of the priced calls against time:
  as reported (:attr:`~._calls.CallRow.cost_usd`), at the ceiling (``cost_at_ceiling_usd``)
  and with no caching (``cost_uncached_usd``). The last point of each line is the sum of
  those per-call costs, so it equals the scenario's totals when every call is priced.

Nothing here computes a number of the report: the charts only plot the per-call rows and
cliffs :func:`~._summary.summarize` made.

matplotlib is optional (the ``report`` extra: ``pip install 'stableprompt[report]'``) and
imported only when a chart is drawn, never at package import (``stableprompt lint`` never loads
it). The charts are drawn on a bare :class:`matplotlib.figure.Figure` given its own Agg canvas
and saved as SVG: no pyplot, no ``matplotlib.use`` (the caller's backend, e.g. a notebook's,
is left alone), no GUI. Output is deterministic (the same report gives the
same bytes for a given matplotlib version): a fixed ``svg.hashsalt`` per chart (so the ids of
two charts in one page never collide), text kept as text (``svg.fonttype="none"``), no date in
the metadata, math text parsing off (a ``$`` in a scenario name stays a ``$``), all inside an
``rc_context`` so the caller's matplotlib settings are left alone.
"""

from __future__ import annotations

import html
import io
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import import_module
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from .._accounting._builder import CostPoint, ReadPoint
from .._accounting._summary import Summary
from ._text import format_usd

if TYPE_CHECKING:
    from .._accounting._calls import CallRow

__all__ = ["INSTALL_HINT", "MAX_PANELS", "MAX_SESSION_LINES", "VERDICT_COLORS", "cost_svg",
           "plotting_library", "read_share_svg"]

INSTALL_HINT = "pip install 'stableprompt[report]'"
"""How to get the charts when matplotlib is missing."""

MAX_PANELS = 12
MAX_SESSION_LINES = 200
"""Sessions drawn as lines in one panel of the read-share chart; beyond, the panel's points
are drawn as dots (thousands of lines take matplotlib minutes and show nothing apart)."""
"""At most this many scenario panels per chart (the first scenarios by first call)."""

VERDICT_COLORS = {"hit": "#2e7d32", "cold": "#1e88e5", "client_mutation": "#e53935",
                  "below_minimum": "#8d6e63", "no_breakpoint": "#f9a825",
                  "ttl_expired": "#8e24aa", "provider_miss": "#fb8c00", "unknown": "#757575"}
"""Marker colour per verdict (the cliffs)."""

_FIRST = datetime(1, 1, 1, tzinfo=UTC)  # the dates matplotlib converts (``num2date``)
_LAST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
_SESSION_COLORS = ("#5c7fa8", "#a3bcd6")  # alternate sessions, so their boundaries show
_COST_COLORS = {"actual": "#c62828", "ceiling": "#2e7d32", "uncached": "#9e9e9e"}
_COST_STYLES: dict[str, Literal["-", "--", ":"]] = {"actual": "-", "ceiling": "--",
                                                     "uncached": ":"}


def plotting_library() -> str | None:
    """``"matplotlib <version>"`` when matplotlib can be imported, else ``None``."""
    try:
        matplotlib = import_module("matplotlib")
    except ImportError:
        return None
    return f"matplotlib {matplotlib.__version__}"


@contextmanager
def _settings(salt: str) -> Iterator[Any]:
    """matplotlib with the deterministic SVG settings; yields the ``matplotlib`` module."""
    matplotlib = import_module("matplotlib")
    with matplotlib.rc_context({
        "svg.hashsalt": f"stableprompt-{salt}", "svg.fonttype": "none",
        "text.parse_math": False, "timezone": "UTC", "font.size": 9,
        "axes.titlesize": 10, "axes.spines.top": False, "axes.spines.right": False,
    }):
        yield matplotlib


def _figure(count: int) -> tuple[Any, list[Any]]:
    """A figure with one panel per scenario (two columns from two scenarios on), x shared."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    cols = 1 if count == 1 else 2
    rows = math.ceil(count / cols)
    figure = Figure(figsize=(11.0 if cols == 2 else 8.0, 0.9 + 2.1 * rows),
                    layout="constrained")
    FigureCanvasAgg(figure)  # Agg measures the text for the layout; savefig writes the SVG
    grid = figure.subplots(rows, cols, sharex=True, sharey=True, squeeze=False)
    axes = [ax for row in grid for ax in row]
    for ax in axes[count:]:
        ax.set_visible(False)
    return figure, axes[:count]


def _svg(figure: Any, label: str) -> str:
    """The figure as an inline ``<svg>`` element (no XML prolog), ``label`` for screen
    readers (escaped)."""
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    return text.replace("<svg ", f'<svg class="chart" role="img" '
                        f'aria-label="{html.escape(label)}" ', 1)


def _date_axis(ax: Any) -> None:
    """UTC date ticks, labelled concisely (``01:10``, the date once as the offset); the
    axis kept within the dates matplotlib draws (years 1 to 9999)."""
    mdates: Any = import_module("matplotlib.dates")  # its locators are not annotated
    low, high = ax.get_xlim()
    first, last = mdates.date2num(_FIRST), mdates.date2num(_LAST)
    if low < first or high > last:  # the margin around a call of year 1 or 9999
        ax.set_xlim(max(low, first), min(high, last))
    locator = mdates.AutoDateLocator(tz=UTC)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC))


_P = TypeVar("_P", ReadPoint, CostPoint)


def _panels(report: Summary, points: dict[str, list[_P]]) -> list[tuple[str, list[_P]]]:
    """The first :data:`MAX_PANELS` scenarios with their points (scenario order)."""
    by_scenario: dict[str, list[_P]] = {name: [] for name in report.scenarios}
    for name, pts in points.items():
        by_scenario[name] = pts
    return list(by_scenario.items())[:MAX_PANELS]


def _omitted(report: Summary) -> str:
    extra = len(report.scenarios) - MAX_PANELS
    return f"; {extra} more scenarios not drawn" if extra > 0 else ""


def read_share_svg(report: Summary) -> str | None:
    """Read share per call per session on a time axis, cliffs marked by verdict.

    Args:
        report: The summary (:func:`~._summary.summarize`).

    Returns:
        One ``<svg>`` element (UTF-8 text, deterministic), one panel per scenario; ``None``
        when no call has a read share (no included calls).

    Raises:
        ImportError: matplotlib is not installed (check :func:`plotting_library` first).
    """
    panels = _panels(report, report.read_points())
    if not any(rows for _, rows in panels):
        return None
    cliffs: dict[str, list[CallRow]] = {}
    for cliff in report.cliffs():
        cliffs.setdefault(cliff.call.scenario, []).append(cliff.call)
    with _settings("read-share"):
        from matplotlib.lines import Line2D
        from matplotlib.ticker import PercentFormatter

        figure, axes = _figure(len(panels))
        seen: dict[str, None] = {}
        for ax, (name, rows) in zip(axes, panels, strict=True):
            sessions: dict[str, list[ReadPoint]] = {}
            for row in rows:
                sessions.setdefault(row.session, []).append(row)
            if len(sessions) > MAX_SESSION_LINES:  # one line each would hide the points
                ax.scatter([r.ts for r in rows], [r.read_share for r in rows], s=3,
                           color=_SESSION_COLORS[0], linewidths=0)
            for i, calls in enumerate(sessions.values() if len(sessions) <= MAX_SESSION_LINES
                                      else ()):
                ax.plot([r.ts for r in calls], [r.read_share for r in calls],
                        color=_SESSION_COLORS[i % 2], linewidth=1.0, marker="o",
                        markersize=1.8)
            for verdict in VERDICT_COLORS:
                marked = [r for r in cliffs.get(name, ()) if r.verdict == verdict]
                if marked:
                    seen[verdict] = None
                    ax.scatter([r.ts for r in marked], [r.read_share for r in marked], s=26,
                               color=VERDICT_COLORS[verdict], edgecolors="white",
                               linewidths=0.5, zorder=3)
            n = len(cliffs.get(name, ()))
            ax.set_title(f"{name}: {len(sessions):,} sessions, {n:,} cliffs", loc="left")
            ax.set_ylim(-0.05, 1.05)
            ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
            ax.grid(axis="y", color="#e0e0e0", linewidth=0.6)
            _date_axis(ax)
        axes[0].set_ylabel("read share")
        handles = [Line2D([], [], linestyle="none", marker="o", markersize=6,
                          color=VERDICT_COLORS[v], label=f"cliff: {v.replace('_', '-')}")
                   for v in seen]
        if handles:
            figure.legend(handles=handles, loc="outside lower center", ncols=len(handles),
                          frameon=False)
        figure.suptitle("cache read / input tokens per call (one line per session; time UTC)"
                        + _omitted(report), x=0.01, ha="left", fontsize=10)
        return _svg(figure, "read share per call per session over time, cliffs marked")


def _cumulative(values: Sequence[float]) -> list[float]:
    out, total = [], 0.0
    for value in values:
        total += value
        out.append(total)
    return out


def cost_svg(report: Summary) -> str | None:
    """Cumulative cost (USD) over time: as reported vs at the ceiling vs with no caching.

    Args:
        report: The summary (:func:`~._summary.summarize`).

    Returns:
        One ``<svg>`` element (deterministic), one panel per scenario that has priced calls
        (calls with an unknown price are not drawn: the tables say why); ``None`` when no call
        was priced.

    Raises:
        ImportError: matplotlib is not installed (check :func:`plotting_library` first).
    """
    panels = [(name, rows) for name, rows in _panels(report, report.cost_points()) if rows]
    if not panels:
        return None
    with _settings("cost"):
        from matplotlib.lines import Line2D
        from matplotlib.ticker import StrMethodFormatter

        figure, axes = _figure(len(panels))
        for ax, (name, rows) in zip(axes, panels, strict=True):
            times = [r.ts for r in rows]
            lines = {"actual": [r.actual for r in rows],
                     "ceiling": [r.ceiling for r in rows],
                     "uncached": [r.uncached for r in rows]}
            for key in ("uncached", "ceiling", "actual"):
                ax.plot(times, _cumulative(lines[key]), color=_COST_COLORS[key],
                        linestyle=_COST_STYLES[key], linewidth=1.4, drawstyle="steps-post")
            totals = report.scenarios[name].totals
            done = totals.cost_complete
            ax.set_title(f"{name}: {format_usd(totals.cost_usd, complete=done)} actual, "
                         f"{format_usd(totals.cost_at_ceiling_usd, complete=done)} at ceiling",
                         loc="left")
            ax.yaxis.set_major_formatter(StrMethodFormatter("${x:,.2f}"))
            ax.grid(axis="y", color="#e0e0e0", linewidth=0.6)
            _date_axis(ax)
        axes[0].set_ylabel("cumulative USD")
        labels = {"actual": "actual (as reported)", "ceiling": "at the ceiling (append-only best)",
                  "uncached": "no caching"}
        handles = [Line2D([], [], color=_COST_COLORS[k], linestyle=_COST_STYLES[k],
                          label=labels[k]) for k in ("actual", "ceiling", "uncached")]
        figure.legend(handles=handles, loc="outside lower center", ncols=3, frameon=False)
        figure.suptitle("cumulative cost of the priced calls (USD; time UTC)" + _omitted(report),
                        x=0.01, ha="left", fontsize=10)
        return _svg(figure, "cumulative cost over time: actual, at the ceiling, uncached")
