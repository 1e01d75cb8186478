"""A ledger summary as text: number formats, notes, and rich tables for the terminal.

:func:`print_tables` prints a :class:`~stableprompt._accounting._summary.Summary` (one row per
scenario, a verdict table, optionally one table of sessions per scenario), then the notes;
:func:`print_explanations` prints what ``stableprompt report`` adds: the turn-boundary split
per scenario, the causes ranked by lost tokens and dollars with their fixes, the breaks by
the user action behind them, the failed calls' errors (redacted), what ``--stabilize`` saved,
the cliffs, and optionally one row per call (caveats and errors as notes beside the verdict);
:func:`meta_lines`, :func:`pricing_lines` and :func:`ceiling_notes` are the lines the terminal,
JSON and HTML outputs share. Numbers are formatted by ``format_*``: percentages with one
decimal, counts with thousands separators, USD with 4 decimals, ``"—"`` for unknown.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any, TextIO

from .._accounting._calls import MAIN_AGENT, CallRow, subagent_id
from .._accounting._spill import SpillView
from .._accounting._summary import VERDICTS, Summary, Totals
from .._canonical import loads
from .._policy import ESTIMATED_SEGMENT_FRAMING_TOKENS, ESTIMATED_SPAN_FRACTION
from .._subcommand import rich_console, shown
from ._ids import short_form, short_ids
from ._table import print_in_pieces

__all__ = [
    "SELF_HOSTED",
    "TEXT_CLIFFS",
    "ceiling_notes",
    "estimate_notes",
    "failed_call_lines",
    "format_int",
    "format_pct",
    "format_usd",
    "format_verdicts",
    "make_console",
    "meta_lines",
    "pricing_lines",
    "print_call_divergences",
    "print_explanations",
    "print_tables",
    "server_diagnosis_notes",
    "turn_boundary_notes",
]


# --------------------------------------------------------------------------- numbers


def format_pct(value: float | None) -> str:
    """A rate as a percentage with one decimal, ``"12.3%"``; ``"—"`` when unknown."""
    return "—" if value is None else f"{value * 100:.1f}%"


def format_int(value: int) -> str:
    """A count with thousands separators, ``"12,345"``."""
    return f"{value:,}"


def format_usd(value: float | None, *, complete: bool = True) -> str:
    """A cost in USD with 4 decimals, ``"$0.0123"``; ``"≥$0.0123"`` when it is a lower bound
    (``complete`` false: some calls' costs are unknown, :attr:`~._summary.Totals.cost_complete`);
    ``"—"`` when unknown."""
    if value is None:
        return "—"
    return f"{'' if complete else '≥'}${value:,.4f}"


def format_verdicts(counts: Mapping[str, int]) -> str:
    """Non-zero verdict counts in their order, ``"hit 3 client-mutation 1"``; ``"—"`` if none."""
    return " ".join(f"{k.replace('_', '-')} {v}" for k, v in counts.items() if v) or "—"


# --------------------------------------------------------------------------- notes

_META_LABELS = {"backend": "Backend", "workload": "Workload", "provider": "Provider",
                "model": "Model"}


TEXT_CLIFFS = 200
"""Cliffs the terminal lists at most (the sharpest drops, in ledger order; the title says how
many there are)."""

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


def pricing_lines(report: Summary) -> list[str]:
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


def keepalive_lines(report: Summary) -> list[str]:
    """One line on the keep-alive pings (``_accounting._keepalive``), ``[]`` without any:
    how many, in how many sessions, what they read and cost; they are left out of the calls,
    hit rates and ceilings above and counted in the total cost."""
    k = report.keepalive
    if not k.calls:
        return []
    cost = "cost unknown" if k.usd is None else (
        f"{format_usd(k.usd, complete=not k.unpriced)}")
    failed = f", {k.failed:,} failed" if k.failed else ""
    return [f"keep-alive: {k.calls:,} ping{'s' if k.calls != 1 else ''} in {k.sessions:,} "
            f"session{'s' if k.sessions != 1 else ''}{failed}, {format_int(k.cache_read_tokens)}"
            f" of {format_int(k.input_tokens)} input tokens read from the cache, {cost}; not "
            "in the calls, hit rates and ceilings above, in the total cost "
            f"({format_usd(report.cost_usd)})."]


def ceiling_notes(report: Summary) -> list[str]:
    """A note when some calls read more than any earlier call of the selection explains
    (:attr:`~._summary.Summary.reads_beyond_ledger`); ``[]`` otherwise."""
    n = report.reads_beyond_ledger
    if not n:
        return []
    return [f"{n:,} call{'s' if n != 1 else ''} read more than any earlier call in this "
            "selection explains (a cache still warm from earlier runs or from calls not in it, "
            "or a prefix shared with a call of another session that the recorder did not "
            "compare it with); their ceiling is what they read, so of ceiling stays <= 100%."]


# --------------------------------------------------------------------------- terminal


def make_console(file: TextIO) -> Any:
    """A rich Console on ``file``: the terminal's width, or 160 columns when not a terminal
    (pipes, files), so tables are never squeezed to 80 columns."""
    console = rich_console(file=file, highlight=False)
    if not console.is_terminal:
        console = rich_console(file=file, highlight=False, width=160)
    return console


def print_tables(report: Summary, *, title: str, file: TextIO | None = None,
                 notes: Sequence[str] = (), sessions: bool = False,
                 pricing: bool = True) -> None:
    """Print the per-scenario table (and optionally per-session tables) with rich.

    Args:
        report: The summary.
        title: Table title.
        file: Output stream (default stdout).
        notes: Lines printed under the tables; then the cost source and pricing notes
            (:func:`pricing_lines`), which callers do not pass.
        sessions: Also print one table of sessions per scenario.
        pricing: Print the notes and pricing lines (``False``: the caller prints them after
            more tables).
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
        table.add_row(shown(name), format_int(t.calls), format_int(t.input_tokens),
                      format_int(t.cache_read_tokens), format_int(t.cache_write_tokens),
                      format_pct(t.hit_rate), format_pct(t.ceiling), format_pct(t.of_ceiling),
                      format_pct(t.agreement), format_usd(t.cost_usd, complete=t.cost_complete))
    console.print(table)
    verdicts = Table(title="verdicts (one per call)", title_justify="left", header_style="bold")
    verdicts.add_column("scenario", no_wrap=True)
    for verdict in VERDICTS:
        verdicts.add_column(verdict.replace("_", " "), justify="right")
    for name, scenario in report.scenarios.items():
        verdicts.add_row(shown(name),
                         *(format_int(scenario.totals.verdicts[v]) for v in VERDICTS))
    console.print(verdicts)
    if sessions:  # every session: printed in pieces, as they are read (_table)
        for name, scenario in report.scenarios.items():
            print_in_pieces(console, partial(_sessions_table, name),
                            partial(_session_rows, scenario.sessions))
    if pricing:
        for line in [*notes, *pricing_lines(report)]:
            console.print(shown(line))


def _sessions_table(name: str) -> Any:
    """The sessions table of scenario ``name``, without rows (:func:`print_tables`)."""
    from rich.table import Table

    per = Table(title=f"{shown(name)}: sessions", title_justify="left", header_style="bold")
    for column in ("session", "calls", "input", "read", "write", "hit rate", "ceiling",
                   "verdicts"):
        per.add_column(column, justify="left" if column in ("session", "verdicts") else "right")
    return per


def _session_rows(sessions: Mapping[str, Totals]) -> Iterator[tuple[str, ...]]:
    """The cells of each session's row, in order (:func:`print_tables`)."""
    for sid, t in sessions.items():
        yield (shown(sid), format_int(t.calls), format_int(t.input_tokens),
               format_int(t.cache_read_tokens), format_int(t.cache_write_tokens),
               format_pct(t.hit_rate), format_pct(t.ceiling), shown(format_verdicts(t.verdicts)))


# --------------------------------------------------------------------------- explanations


def turn_boundary_notes(report: Summary) -> list[str]:
    """A note when some included calls have no known turn boundary (rows recorded before the
    recorder stored ``turn_boundary``, without a stored body); ``[]`` otherwise."""
    t = report.overall
    included = t.calls - t.excluded
    unknown = included - t.intra_calls - t.cross_calls
    if unknown <= 0:
        return []
    return [f"turn boundary unknown for {unknown:,} of {included:,} included calls (recorded "
            "without verdict_detail.turn_boundary and without their request body): left out "
            "of the intra/cross-turn split."]


def estimate_notes(report: Summary) -> list[str]:
    """A note when the agreement counts predictions that rest on an estimated span
    (``_accounting._calls.agreement_of``): how many, and their largest error; ``[]`` when
    none does."""
    t = report.overall
    if not t.agreement_estimated:
        return []
    return [f"agreement: {t.agreement_estimated:,} of {t.agreement_calls:,} predictions rest "
            "partly on our token estimate (a read ending where no reported size does, e.g. "
            "the first read of an entry at an earlier cache breakpoint): off by at most "
            f"{t.estimate_max_error_tokens:,} tokens, allowed "
            f"{ESTIMATED_SPAN_FRACTION:.0%} of the estimated span and "
            f"{ESTIMATED_SEGMENT_FRAMING_TOKENS} tokens per block in it; the other "
            "predictions count only within the cache granularity."]


def server_diagnosis_notes(report: Summary) -> list[str]:
    """One line per scenario whose calls carry the provider's own miss reasons: how they
    relate to our verdicts (agree, disagree, provider-side unexplained, no comparison);
    ``[]`` when no call asked for diagnostics."""
    lines = []
    for name, scenario in report.scenarios.items():
        t = scenario.totals
        counts = t.server_diagnosis
        if not counts:
            continue
        rate = t.server_agreement
        lines.append(
            f"provider diagnostics, {shown(name, markup=False)}: {counts.get('agree', 0):,} "
            f"agree, {counts.get('disagree', 0):,} disagree"
            f"{'' if rate is None else f' ({format_pct(rate)} where both speak)'}, "
            f"{t.provider_side_unexplained:,} provider-side unexplained, "
            f"{counts.get('no-comparison', 0):,} without a comparison.")
    if lines:
        lines.append("(provider diagnostics: the provider's own miss reason against our "
                     "verdict; the agreement column: our predicted cache reads against the "
                     "reported ones.)")
    return lines


def _verdict_text(row: CallRow) -> str:
    verdict = row.verdict.replace("_", "-")
    if row.excluded is not None:
        return f"{verdict} (excluded: {row.excluded})"
    return f"{verdict} (partial)" if row.partial else verdict


def _snippet(row: CallRow) -> str:
    if row.before is None and row.after is None:
        return ""
    return f"{row.before or ''!r} -> {row.after or ''!r}"


def _count(value: int | None) -> str:
    return "—" if value is None else format_int(value)


def _where(row: CallRow) -> str:
    """``cause segment path`` of a row (``""`` without a cause), ``+N more`` when the call
    diverged in more places (listed by ``report --call ID`` and ``--json``)."""
    more = f"+{row.more_divergences} more" if row.more_divergences else ""
    return " ".join(part for part in (row.cause, row.segment, row.path, more) if part)


def print_call_divergences(report: Summary, call_id: str, *,
                           file: TextIO | None = None) -> bool:
    """Every divergence of the calls whose record id starts with ``call_id``, in the
    provider's cache order: cause, segment, path (and the later request's path when
    another), lost tokens (what it costs once the earlier ones are fixed), detail and the
    redacted before/after; ``False`` when no call matches."""
    console = make_console(file or sys.stdout)
    rows = [row for row in report.calls if row.id.startswith(call_id)]
    for row in rows:
        console.print(shown(f"call {row.id} ({row.verdict}, session {row.session}): "
                            f"{row.divergences_total or 'no'} divergence(s)"))
        entries = row.divergences or ((
            {"cause": row.cause, "segment": row.segment, "path": row.path,
             "cause_detail": row.cause_detail, "snippet_a": row.before,
             "snippet_b": row.after, "lost_tokens": row.lost_tokens},) if row.cause else ())
        for n, entry in enumerate(entries, 1):
            moved = f" (now {entry['path_b']})" if entry.get("path_b") else ""
            console.print(shown(
                f"  {n}. {entry.get('cause')} {entry.get('segment')} {entry.get('path')}"
                f"{moved}: {format_int(int(entry.get('lost_tokens') or 0))} tokens"
                + (f"; {entry['cause_detail']}" if entry.get("cause_detail") else "")))
            if entry.get("snippet_a") is not None or entry.get("snippet_b") is not None:
                console.print(shown(f"     before: {entry.get('snippet_a') or ''!r}"))
                console.print(shown(f"     after:  {entry.get('snippet_b') or ''!r}"))
        if row.divergences_total > len(entries):
            console.print(shown(f"  ... {row.divergences_total - len(entries)} more not kept "
                                "(the ledger keeps the first eight)"))
    if not rows:
        console.print(shown(f"no call id starts with {call_id!r}"))
    return bool(rows)


def failed_call_lines(report: Summary) -> list[str]:
    """The failed calls' errors (redacted, :attr:`CallRow.error`), one line per distinct
    text with how many calls had it and the first one's id, most frequent first; ``[]`` when
    no call failed."""
    errors = report.errors()
    if not errors:
        return []
    total = sum(count for count, _ in errors.values())
    lines = [f"failed calls ({total:,}):"]
    for text, (count, first) in sorted(errors.items(), key=lambda item: -item[1][0]):
        lines.append(f"  {count:,} x {text} (e.g. {first})")
    return lines


def _notes_of(row: CallRow) -> tuple[str, ...]:
    """What is shown beside a call's verdict as footnotes: its caveats, then its error."""
    return (*row.caveats, *(() if row.error is None else (f"error: {row.error}",)))


_NARROW_COLUMNS = 130
"""Below this console width the calls table takes its compact form (``_print_calls``)."""
_NARROW_HEADERS = {"time (UTC)": "UTC", "read share": "share",
                   "read / predicted / input": "read / pred / input"}
_NARROW_CAUSE_WIDTH = 8
"""The narrowest cause column of the compact calls table (below it the time of day goes
under the session id, ``_print_calls``)."""
_NARROW_WIDTHS = {"turn": 4, "time (UTC)": 8, "after": 5, "verdict": 15, "read share": 6,
                  "read / predicted / input": 8, "lost": 6}
"""Column widths of the compact calls table (the longest verdict word, ``client-mutation``;
``100.0%``; a count to 999,999 with its `` /``)."""


def _print_calls(console: Any, report: Summary) -> None:
    """One table per scenario, its calls in ledger order (a streaming summary's page: the
    scenarios it holds calls of); a call's caveats (assumptions its verdict rests on, a
    changed header) and error text as numbered notes beside its verdict, listed under the
    table (one number per distinct text); an ``agent`` column (``main``, ``sub <id>``) when a
    scenario's calls include a subagent's (under 130 columns: ``sub`` under the session id of
    a subagent's call); ``~`` before a predicted read that rests partly on our token estimate
    (:attr:`CallRow.estimated_span_tokens`)."""
    from rich.table import Table

    snippets = any(row.before is not None or row.after is not None for row in report.calls)
    ids = short_ids(row.session for row in report.calls)
    agents = short_ids(subagent_id(row.agent) for row in report.calls).__getitem__
    for name in report.scenarios:
        rows = [row for row in report.calls if row.scenario == name]
        if not rows:
            continue
        # A narrow terminal (under 130 columns: 100) gets the compact form: the time of day,
        # short headers, no outer edge, fixed widths (a verdict, a token count and a short
        # session id whole; counts and causes wrap at spaces, never cut) and no snippets.
        narrow = console.width < _NARROW_COLUMNS
        table = Table(title=f"{shown(name)}: calls", title_justify="left",
                      header_style="bold", show_edge=not narrow, pad_edge=not narrow)
        columns = ["session", "turn", "time (UTC)", "after", "verdict", "read share",
                   "read / predicted / input", "lost", "cause, segment, path"]
        # A subagent's calls among its session's: whose each call is, in an ``agent``
        # column (narrow: ``sub`` under the session id, where a row has lines to spare).
        branched = any(row.agent != MAIN_AGENT for row in rows)
        if branched and not narrow:
            columns.insert(1, "agent")
        if snippets and not narrow:
            columns.append("before -> after")
        widths: dict[str, int] = {}
        # Tighter still (under ~91 columns: 80): the compact columns do not fit beside a
        # readable cause, so the time goes under the session id instead of being cut.
        tight = False
        if narrow:
            widths = {"session": max([7, *(len(ids.get(r.session or "", r.session or "—"))
                                            for r in rows)]), **_NARROW_WIDTHS}
            rest = console.width - sum(widths.values()) - 3 * (len(columns) - 1)
            if rest < _NARROW_CAUSE_WIDTH:
                tight = True
                columns.remove("time (UTC)")
                clock = widths.pop("time (UTC)")
                widths["session"] = max(widths["session"], clock)
                rest = console.width - sum(widths.values()) - 3 * (len(columns) - 1)
            widths["cause, segment, path"] = max(rest, _NARROW_CAUSE_WIDTH)
        fixed = {"session", "agent", "turn", "time (UTC)", "after", "read share", "lost"}
        for column in columns:
            right = column in ("turn", "read share", "read / predicted / input", "lost")
            header = _NARROW_HEADERS.get(column, column) if narrow else column
            table.add_column(header, justify="right" if right else "left",
                             no_wrap=column in fixed, overflow="fold",
                             width=widths.get(column))
        numbered: dict[str, int] = {}
        for row in rows:
            boundary = ({"intra": "tool", "cross": "user"} if narrow else
                        {"intra": "tool result", "cross": "user msg"}).get(row.boundary or "",
                                                                         "—")
            when = row.ts.strftime("%H:%M:%S" if narrow else "%m-%d %H:%M:%S")
            marks = "".join(f" [{numbered.setdefault(n, len(numbered) + 1)}]"
                            for n in _notes_of(row))
            cells = [ids.get(row.session or "", row.session), _count(row.turn), when, boundary,
                     _verdict_text(row) + marks, format_pct(row.read_share),
                     f"{_count(row.cache_read_tokens)} / "
                     f"{'~' if row.estimated_span_tokens else ''}"
                     f"{_count(row.predicted_cache_read_tokens)} / {_count(row.input_tokens)}",
                     format_int(row.lost_tokens) if row.lost_tokens else "", _where(row)]
            if branched and not narrow:
                cells.insert(1, _agent_cell(row.agent, agents))
            if snippets and not narrow:
                cells.append(_snippet(row))
            if tight:  # the time goes under the session id
                del cells[2]
            texts = [shown(cell) for cell in cells]
            if branched and narrow and row.agent != MAIN_AGENT:
                texts[0] += "\nsub"
            if tight:
                texts[0] += f"\n{when}"
            table.add_row(*texts)
        console.print(table)
        for note, number in numbered.items():
            console.print(shown(f"[{number}] {note}"))
        if any(row.estimated_span_tokens for row in rows):
            console.print("~ before a predicted read: it rests partly on our token estimate "
                          "(estimated_span_tokens in --json).")
        if snippets and narrow:
            console.print(f"before -> after snippets: at {_NARROW_COLUMNS}+ columns, or in "
                          "--json.")


def _agent_cell(agent: str, ids: Callable[[str], str]) -> str:
    """A call's agent as the calls table shows it: ``main``, ``sub`` or ``sub <short id>``
    (``ids``: the subagent ids shortened together, :func:`short_form`)."""
    ident = subagent_id(agent)
    if ident is None:
        return "sub" if agent != MAIN_AGENT else MAIN_AGENT
    return f"sub {ids(ident)}"


def _print_stabilized(console: Any, report: Summary) -> None:
    """The calls ``--stabilize`` rewrote per rewrite kind, and what they read, wrote and paid
    against the requests as the clients wrote them (``_accounting._stabilized``; negative
    savings: a cost); nothing when no call was rewritten."""
    from rich.table import Table

    saved = report.stabilized
    if not saved.calls:
        return
    table = Table(title=f"stabilized: {saved.calls:,} calls rewritten; against the same calls "
                  "as the clients wrote them (negative: the rewrite cost)",
                  title_justify="left", header_style="bold")
    for column in ("rewrite", "calls", "estimated", "reads gained", "writes added", "saved"):
        table.add_column(column, justify="left" if column == "rewrite" else "right",
                         no_wrap=True)
    for name, kind in saved.to_json()["kinds"].items():
        table.add_row(shown(name), format_int(kind["calls"]), format_int(kind["estimated"]),
                      format_int(kind["saved_tokens"]), format_int(kind["write_tokens"]),
                      format_usd(kind["saved_usd"]))
    table.add_row("(all)", format_int(saved.calls), "", format_int(saved.saved_tokens),
                  format_int(saved.write_tokens), format_usd(saved.saved_usd))
    console.print(table)


def _print_groups(console: Any, report: Summary, by: str) -> None:
    """The totals per group (``--by``): session ids and subagent ids shown short, as the
    calls table shows them (:func:`short_ids`: three Claude Code subagents were three
    identical ``subagent agent-…`` cut at 100 columns); the group and the verdicts wrap
    (folded where a word is too long), numbers stay whole. Under
    :data:`_GROUP_VERDICTS_COLUMNS` columns the verdicts are lines under the table, which has
    no outer edge and headers in lines (at 80 the verdicts column was squeezed to nothing and
    the cost cut). Every group, ~550,000 sessions at 10M calls: the table is printed in
    pieces (:func:`~._table.print_in_pieces`), the short ids made in one pass over the ids in
    order (:func:`~._ids.short_form`), the groups read from the report's temporary file as
    they are listed."""
    groups = report.group_by(by)
    label = _group_labels(groups, by)
    inline = console.width >= _GROUP_VERDICTS_COLUMNS
    print_in_pieces(console, partial(_groups_table, by, inline),
                    partial(_group_rows, groups, label, inline))
    if not inline:
        for key, t in groups.items():
            console.print(shown(f"verdicts, {label(key)}: {format_verdicts(t.verdicts)}"))


def _group_labels(groups: Mapping[str, Totals], by: str) -> Callable[[str], str]:
    """How a group's key is shown (:func:`_print_groups`): a session id short, an agent as
    the calls table shows it, any other key as it is."""
    if by not in ("session", "agent"):
        return str
    keys = groups.sorted_keys() if isinstance(groups, SpillView) else iter(sorted(groups))
    if by == "session":
        return short_form(keys)
    agents = short_form(i for i in map(subagent_id, keys) if i is not None)  # still in order
    return partial(_agent_cell, ids=agents)


def _groups_table(by: str, inline: bool) -> Any:
    """The ``--by`` table, without rows (:func:`_print_groups`)."""
    from rich.table import Table

    table = Table(title=f"by {by}", title_justify="left", header_style="bold",
                  show_edge=inline, pad_edge=inline)
    for column in (by, "calls", "input tokens", "cache read", "hit rate", "ceiling",
                   "intra-turn", "cross-turn", *(["verdicts"] if inline else []), "cost"):
        text = column in (by, "verdicts")
        header = column if inline else (  # narrow: headers in lines, no wider than counts
            column.replace("ceiling", "ceil-ing").replace(" ", "\n").replace("-", "-\n"))
        table.add_column(header, justify="left" if text else "right", no_wrap=not text,
                         overflow="fold", min_width=8 if column == by else None)
    return table


def _group_rows(groups: Mapping[str, Totals], label: Callable[[str], str],
                inline: bool) -> Iterator[tuple[str, ...]]:
    """The cells of each group's row, in order (:func:`_print_groups`)."""
    for key, t in groups.items():
        verdicts = (shown(format_verdicts(t.verdicts)),) if inline else ()
        yield (shown(label(key)), format_int(t.calls), format_int(t.input_tokens),
               format_int(t.cache_read_tokens), format_pct(t.hit_rate), format_pct(t.ceiling),
               format_pct(t.intra_turn_hit_rate), format_pct(t.cross_turn_hit_rate),
               *verdicts, format_usd(t.cost_usd, complete=t.cost_complete))


_GROUP_VERDICTS_COLUMNS = _NARROW_COLUMNS
"""Console width from which the ``--by`` table has a verdicts column (``_print_groups``);
narrower, its verdicts are lines under it (a verdicts column at 100 wraps every count)."""


def print_explanations(report: Summary, *, file: TextIO | None = None,
                       calls: bool = False, by: str | None = None) -> None:
    """Print why calls missed: with ``by`` a table of totals per group
    (:meth:`~stableprompt._accounting._summary.Summary.group_by`), the turn-boundary split per
    scenario, causes ranked by lost tokens and lost USD (each with its one-line fix), the
    cliffs, and with ``calls`` one row per call
    (:class:`~stableprompt._accounting._calls.CallRow`)."""
    from rich.table import Table

    console = make_console(file or sys.stdout)
    if by is not None:
        _print_groups(console, report, by)
    split = Table(title="turn boundary: hit rate inside user turns (after a tool result) vs "
                  "first call after a user message", title_justify="left",
                  header_style="bold")
    for column in ("scenario", "intra-turn calls", "intra-turn hit rate", "cross-turn calls",
                   "cross-turn hit rate", "partial", "lost tokens", "lost"):
        split.add_column(column, justify="left" if column == "scenario" else "right",
                         no_wrap=True)
    groups = [*report.scenarios.items(), ("(all)", None)]
    for name, scenario in groups:
        t = report.overall if scenario is None else scenario.totals
        split.add_row(shown(name), format_int(t.intra_calls),
                      format_pct(t.intra_turn_hit_rate),
                      format_int(t.cross_calls), format_pct(t.cross_turn_hit_rate),
                      format_int(t.partial), format_int(t.lost_tokens), format_usd(t.lost_usd))
    console.print(split)
    causes = report.causes()
    if causes:
        table = Table(title="causes, by lost tokens", title_justify="left", header_style="bold")
        for column in ("cause", "segment", "path", "calls", "lost tokens", "lost", "fix"):
            table.add_column(column, justify="right" if column in ("calls", "lost tokens",
                                                                    "lost") else "left",
                             no_wrap=column != "fix")
        for cause in causes:
            table.add_row(shown(cause.cause), shown(cause.segment or ""),
                          shown(cause.path or ""), format_int(cause.calls),
                          format_int(cause.lost_tokens), format_usd(cause.lost_usd),
                          shown(cause.fix or ""))
        console.print(table)
    actions = report.actions()
    if actions:
        table = Table(title="breaks by the user action behind them (where the ledger can tell)",
                      title_justify="left", header_style="bold")
        for column in ("action", "calls", "lost tokens", "lost", "example"):
            table.add_column(column, justify="right" if column in ("calls", "lost tokens",
                                                                    "lost") else "left",
                             no_wrap=True)
        for action in actions:
            table.add_row(shown(action.action), format_int(action.calls),
                          format_int(action.lost_tokens), format_usd(action.lost_usd),
                          shown(action.example_id))
        console.print(table)
    for line in failed_call_lines(report):
        console.print(shown(line))
    _print_stabilized(console, report)
    cliffs, total = report.cliffs(), report.cliffs_total()
    if len(cliffs) > TEXT_CLIFFS:  # the sharpest, in ledger order
        sharpest = set(map(id, sorted(cliffs, key=lambda c: -c.drop)[:TEXT_CLIFFS]))
        cliffs = [c for c in cliffs if id(c) in sharpest]
    if cliffs:
        count = (f"{total:,}" if len(cliffs) == total else
                 f"the {len(cliffs):,} sharpest of {total:,}; more in --json")
        table = Table(title=f"cliffs: read share fell sharply from the session's previous call "
                      f"({count})", title_justify="left", header_style="bold")
        for column in ("scenario", "session", "turn", "read share", "before", "verdict",
                       "cause", "segment"):
            table.add_column(column, justify="right" if column in ("turn", "read share",
                                                                    "before") else "left",
                             no_wrap=True)
        ids = short_ids(cliff.call.session for cliff in cliffs)
        for cliff in cliffs:
            row = cliff.call
            table.add_row(shown(row.scenario), shown(ids.get(row.session or "", row.session)),
                          _count(row.turn),
                          format_pct(row.read_share), format_pct(cliff.previous_read_share),
                          shown(_verdict_text(row)), shown(row.cause or ""),
                          shown(row.segment or ""))
        console.print(table)
    if calls:
        _print_calls(console, report)
