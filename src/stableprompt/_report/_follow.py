"""``stableprompt report --follow LEDGER``: a live view of a ledger another process writes.

:func:`follow` polls the ledger every ``interval_s`` for the rows stored since the last poll
(``Ledger.records_after``, by insertion order: each row is read once; a fresh read-only
connection per poll sees every row a live writer committed, SQLite WAL; on PostgreSQL a row
that commits after a row with a higher ``seq``, another writer's, is shown when it commits,
up to ``_ledger._late.LATE_WAIT_S`` later) and shows:

* the running hit rate (token-weighted over included calls, as ``report``:
  :class:`~._summary.Totals`), calls, and calls per verdict;
* the latest misses (``client_mutation``, ``provider_miss``, ``ttl_expired``,
  ``below_minimum``, ``no_breakpoint``): when, session and turn, verdict, read share, cause,
  segment, JSON path, and the before/after snippets the row holds (:class:`~._calls.CallRow`);
* per miss cause, how many rows carry it so far and the latest of them (row ids).

On a terminal this is a rich ``Live`` panel redrawn at each poll; otherwise (a pipe, a
file, a test) one plain line per new call, flushed, then one summary line at the end. A
ledger that does not exist yet (the proxy has not started) is waited for. It stops on
Ctrl-C, on SIGTERM (when run in the main thread), or after ``seconds`` (after one last read
on SIGTERM or ``stop``); either way it exits 0 after printing the summary line.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TextIO

from .._accounting._calls import CallRow, call_row, exclusion
from .._accounting._ceilings import policy_of as _policy
from .._accounting._summary import Ceilings, Totals
from .._exceptions import LedgerError
from .._ledger._late import LateRows
from .._ledger._usage_record import UsageRecord
from .._policy import PolicyTable
from .._subcommand import shown
from ._text import format_int, format_pct, format_verdicts, make_console

__all__ = ["MISS_VERDICTS", "FollowState", "follow"]

MISS_VERDICTS = frozenset({"client_mutation", "provider_miss", "ttl_expired", "below_minimum",
                           "no_breakpoint"})
"""The verdicts the view lists as misses."""

_WAITING = frozenset({"ledger-not-found", "ledger-not-a-ledger"})  # not created yet


@dataclass
class CauseSeen:
    """One miss cause so far: rows carrying it, tokens lost, the latest row ids."""

    calls: int = 0
    lost_tokens: int = 0
    latest: deque[str] = field(default_factory=lambda: deque(maxlen=3))


class FollowState:
    """What the view shows, updated one record at a time (:meth:`add`).

    Args:
        misses: How many of the latest misses to keep.
        policies: Cache-policy table for each call's granularity (default: shipped).
        session_id: Only this session's calls (``--session``).
        since: Only calls at or after this time (``--since``).
    """

    def __init__(self, *, misses: int = 8, policies: PolicyTable | None = None,
                 session_id: str | None = None, since: datetime | None = None) -> None:
        self.totals = Totals()
        self.misses: deque[CallRow] = deque(maxlen=misses)
        self.causes: dict[str, CauseSeen] = {}
        self.policies = policies
        self.session_id = session_id
        self.since = since
        self.skipped = 0  # corrupt rows
        self.ceilings = Ceilings(bounded=True)  # as the report's: a follow runs for days

    def add(self, record: UsageRecord) -> CallRow | None:
        """Count one record; its row, or ``None`` when the selection leaves it out."""
        if self.session_id is not None and record.session_id != self.session_id:
            return None
        if self.since is not None and record.ts_utc < self.since:
            return None
        policy = _policy(record.provider, record.model, self.policies)
        scenario, session = record.scenario or "(none)", record.session_id or "(none)"
        # The same ceiling as the report's (its lost tokens are bounded by it).
        ceiling = self.ceilings.next(record, Ceilings.key(record, scenario, session), policy)
        row = call_row(record, scenario=scenario, session=session, ceiling=ceiling,
                       granularity=policy.granularity_tokens if policy is not None else 1,
                       pricing=None, notes={}, excluded=exclusion(record))
        self.totals.add(row, None, False)
        if row.verdict in MISS_VERDICTS:
            self.misses.append(row)
            seen = self.causes.setdefault(row.cause or row.verdict, CauseSeen())
            seen.calls += 1
            seen.lost_tokens += row.lost_tokens
            seen.latest.append(row.id)
        return row

    def close(self) -> None:
        """Delete the ceilings' temporary file, if any (``_spill``): the view is over."""
        self.ceilings.close()

    def summary_line(self) -> str:
        """``calls N, hit rate X%, verdicts ...`` over everything seen."""
        t = self.totals
        line = (f"calls {format_int(t.calls)}, hit rate {format_pct(t.hit_rate)}, "
                f"{format_verdicts(t.verdicts)}")
        return line + (f", {self.skipped:,} corrupt rows skipped" if self.skipped else "")

    def renderable(self, title: str) -> Any:
        """The live panel: summary line, latest misses, causes."""
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        misses = Table(title="latest misses", title_justify="left", header_style="bold")
        for column in ("time", "session", "turn", "verdict", "read", "cause", "segment",
                       "path", "before", "after"):
            misses.add_column(column, no_wrap=column not in ("before", "after"),
                              justify="right" if column in ("turn", "read") else "left")
        for row in reversed(self.misses):
            misses.add_row(*map(shown, (
                row.ts.strftime("%H:%M:%S"), row.session, _turn(row), row.verdict,
                format_pct(row.read_share), row.cause or "", row.segment or "", row.path or "",
                _clip(row.before), _clip(row.after))))
        causes = Table(title="miss causes so far", title_justify="left", header_style="bold")
        for column in ("cause", "rows", "lost tokens", "latest rows"):
            causes.add_column(column, justify="right" if column in ("rows", "lost tokens")
                              else "left", no_wrap=True)
        for name, seen in sorted(self.causes.items(), key=lambda kv: -kv[1].lost_tokens):
            causes.add_row(shown(name), format_int(seen.calls), format_int(seen.lost_tokens),
                           shown(", ".join(reversed(seen.latest))))
        return Group(Text(shown(f"{title}: {self.summary_line()}", markup=False),
                          style="bold"), misses, causes)


def _turn(row: CallRow) -> str:
    return "" if row.turn is None else str(row.turn)


def _clip(text: str | None, width: int = 60) -> str:
    if text is None:
        return ""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def plain_line(row: CallRow, state: FollowState) -> str:
    """One call as a plain line (non-terminal output): time, session/turn, verdict, read
    share, and for a miss its cause, segment, path and snippets; then the running totals."""
    parts = [row.ts.strftime("%Y-%m-%dT%H:%M:%SZ"), f"{row.session}/{_turn(row) or '-'}",
             row.verdict, f"read {format_pct(row.read_share)}"]
    if row.verdict in MISS_VERDICTS:
        parts.append(f"cause={row.cause or row.verdict}")
        if row.segment:
            parts.append(f"segment={row.segment}")
        if row.path:
            parts.append(f"path={row.path}")
        if row.before is not None or row.after is not None:
            parts.append(f"before={_clip(row.before)!r} after={_clip(row.after)!r}")
    t = state.totals
    parts.append(f"| calls {t.calls:,} hit rate {format_pct(t.hit_rate)}")
    return "  ".join(parts)


@contextlib.contextmanager
def _stop_on_sigterm(stop: threading.Event) -> Iterator[None]:
    """SIGTERM sets ``stop`` while inside (main thread only; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def follow(path: str, *, file: TextIO, interval_s: float = 0.5, seconds: float | None = None,
           state: FollowState | None = None, stop: threading.Event | None = None,
           clock: Callable[[], float] = time.monotonic) -> FollowState:
    """Follow the ledger at ``path`` until stopped (module docstring).

    Args:
        path: The ledger file (it may not exist yet).
        file: Where the view or the lines go.
        interval_s: Seconds between polls.
        seconds: Stop after this long (``None``: until Ctrl-C or SIGTERM; 0: one poll).
        state: The state to update (default: a new :class:`FollowState`).
        stop: Set it to stop (SIGTERM sets it too).
        clock: Monotonic seconds, for ``seconds``.

    Returns:
        The state after the last poll.

    Raises:
        LedgerError: The ledger exists but cannot be read (other than not being created yet).
    """
    from .._ledger._ledger import Ledger

    state = state if state is not None else FollowState()
    stop = stop if stop is not None else threading.Event()
    console = make_console(file)
    deadline = None if seconds is None else clock() + seconds
    title = f"following {path}"
    ledger: Ledger | None = None
    rowid = 0
    late = LateRows(clock=clock)
    waiting_said = False

    def skip(_row_id: str, _exc: Exception) -> None:
        state.skipped += 1

    def poll(emit: Callable[[CallRow], None]) -> None:
        nonlocal ledger, rowid, waiting_said
        if ledger is None:
            try:
                ledger = Ledger(path, read_only=True)
            except LedgerError as exc:
                if exc.code not in _WAITING:
                    raise
                if not waiting_said and not console.is_terminal:
                    print(shown(f"waiting for {path} ({exc})", markup=False), file=file,
                          flush=True)
                waiting_said = True
                return
        while True:
            records, rowid = ledger.records_after(rowid, on_invalid=skip, late=late)
            for record in records:
                row = state.add(record)
                if row is not None:
                    emit(row)
            if len(records) < 1000:
                return

    def run(emit: Callable[[CallRow], None], redraw: Callable[[], None]) -> None:
        stopped = False
        while True:  # once stopped, one last poll: rows committed until then are shown
            poll(emit)
            redraw()
            remaining = None if deadline is None else deadline - clock()
            if stopped or (remaining is not None and remaining <= 0):
                return
            stopped = stop.wait(interval_s if remaining is None else min(interval_s,
                                                                         remaining))

    with _stop_on_sigterm(stop), contextlib.suppress(KeyboardInterrupt):
        if console.is_terminal:
            from rich.live import Live

            with Live(state.renderable(title), console=console, auto_refresh=False,
                      transient=False) as live:
                run(lambda _row: None,
                    lambda: live.update(state.renderable(title), refresh=True))
        else:
            run(lambda row: print(shown(plain_line(row, state), markup=False), file=file,
                                  flush=True),
                lambda: None)
    print(shown(f"{title}: {state.summary_line()}", markup=False), file=file, flush=True)
    return state
