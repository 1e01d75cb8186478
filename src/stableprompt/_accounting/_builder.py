"""One pass over ledger records -> a :class:`~._summary.Summary`, holding every call or not.

:class:`SummaryBuilder` is the loop of :func:`~._summary.summarize` (ceilings, call rows,
totals per scenario, session and group, stabilize savings, keep-alive pings), one record at a
time. Two modes, the same numbers:

* ``keep_calls=True`` (:func:`~._summary.summarize`, the public API and
  :meth:`Recorder.summary <stableprompt.Recorder.summary>`): every
  :class:`~._calls.CallRow` is kept in :attr:`Summary.calls`, and causes, cliffs, groups and
  cost notes are computed from them when asked.
* ``keep_calls=False`` (:func:`~._summary.summarize_stream`, ``stableprompt report``):
  memory grows with sessions, groups and causes, not with calls. Each call row is made,
  added to the totals and dropped; what the report shows per call is gathered during the pass into
  :class:`Streamed`: a page of calls (:class:`CallPage`: ``offset`` / ``limit`` in ledger
  order, or the ``top`` calls that lost the most tokens), the causes (``_causes.CauseTally``),
  the cliffs (``_calls.CliffFinder``; at most :data:`MAX_CLIFFS` kept, the sharpest drops,
  all counted), the misses the HTML lists (at most :data:`MAX_MISSES`, those that lost the
  most), the calls the cost notes name (the first :data:`MAX_NAMED`, all counted), the totals
  per group for the one ``by`` asked, and the chart points per scenario, decimated beyond
  :data:`MAX_POINTS` (:class:`Decimator`: pairs merged, costs summed, so cumulative costs stay
  exact at every point kept). Request bodies (``store_content=True`` ledgers) are kept for
  the last :data:`MAX_BODIES` calls; an older predecessor's body is asked of
  ``find_body`` (the ledger, by record id).

The one per-call state is the ceilings' (``_ceilings.Ceilings``: each call's size and time by
id, about 200 bytes, for the later calls that name it as their predecessor); with the totals
per session (and per group), it is held in bounded memory (``_spill``: at most
``_ceilings.CALLS_IN_MEMORY`` calls, ``_ceilings.KEYS_IN_MEMORY`` cache keys,
:data:`SESSIONS_IN_MEMORY` sessions, groups and sessions that had a keep-alive ping, and
:data:`BRANCHES_IN_MEMORY` branches (agent labels, the cliffs' previous read share) in
memory, the rest in temporary files deleted when the pass ends, the sessions' by
:meth:`Summary.close <._summary.Summary.close>`), so memory does not grow with calls.
``what_if=True`` keeps every record either way: the replay needs them
(:func:`~._what_if.what_if_by_provider`).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from .._frozen import slotted_maker
from .._ledger._usage_record import UsageRecord
from .._policy import CacheRules, PolicyTable
from .._recording._gemini_caches import CACHE_DETAIL
from ._calls import (
    MAIN_AGENT,
    CallRow,
    Cliff,
    CliffFinder,
    agent_label,
    agreement_of,
    call_row,
    exclusion,
)
from ._causes import ActionRow, ActionTally, CauseRow, CauseTally
from ._ceilings import Ceilings, policy_of
from ._keepalive import KeepAliveTally, is_keepalive
from ._pricing import Pricing, genai_prices_version
from ._snippets import mutation_snippets
from ._spill import OrderedSpillMap, SpillMap, SpillView, fields_codec
from ._stabilized import StabilizeSavings
from ._storage import ExplicitCaches
from ._totals import GROUP_BY, ScenarioReport, Totals, add_call, group_key
from ._what_if import what_if_by_provider

__all__ = ["BRANCHES_IN_MEMORY", "MAX_BODIES", "MAX_CLIFFS", "MAX_MISSES", "MAX_NAMED",
           "MAX_POINTS", "NO_SCENARIO", "NO_SESSION", "SESSIONS_IN_MEMORY", "CallPage",
           "CostPoint", "Decimator", "ReadPoint", "Streamed", "SummaryBuilder"]

MAX_CLIFFS = 1000
"""Cliffs a streaming summary keeps (the sharpest drops; all are counted)."""
MAX_MISSES = 500
"""Calls that lost tokens a streaming summary keeps for the HTML page (the most tokens lost)."""
MAX_NAMED = 100
"""Calls the cost notes can name (the first; all are counted)."""
MAX_POINTS = 2000
"""Chart points per scenario and chart before a streaming summary decimates (it keeps between
this and twice this many)."""
MAX_BODIES = 256
"""Request bodies (``content``) a streaming pass keeps for the snippets of later calls."""
SESSIONS_IN_MEMORY = 100_000
"""Session totals (all scenarios together; and as many groups of ``by``) a streaming pass
keeps in memory (about 1.2 KB each: ~120 MB); the rest are moved to a temporary file
(``_spill``) and read back when their session has another call or when listed. The demo
ledgers and a 1,000,000-call ledger of the benchmark's shape (~88,500 sessions) never touch
the disk."""
BRANCHES_IN_MEMORY = 200_000
"""Conversation branches a streaming pass keeps in memory (each subagent ``(session,
lineage)``'s agent label, and each ``(scenario, session, agent)``'s previous read share for
the cliffs; about 250 bytes each: ~50 MB each); the rest as above."""

NO_SCENARIO = "(none)"
"""The scenario of a call that names none."""
NO_SESSION = "(none)"
"""The session of a call that names none."""


@dataclass(frozen=True, slots=True)
class CallPage:
    """Which calls a streaming summary keeps as rows: ``limit`` calls from ``offset`` (0-based,
    ledger order), or with ``top`` the ``top`` calls that lost the most tokens (then the most
    USD; shown in ledger order), or with ``call`` the first ``limit`` calls whose record id
    starts with ``call`` (wherever they are in the ledger: ``report --call``)."""

    offset: int = 0
    limit: int = 1000
    top: int | None = None
    call: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"offset", "limit", "top"}`` (and ``"call"`` when set)."""
        return {"offset": self.offset, "limit": self.limit, "top": self.top,
                **({} if self.call is None else {"call": self.call})}


@dataclass(frozen=True, slots=True)
class ReadPoint:
    """A point of the read-share chart: one included call (or the last of a decimated run)."""

    session: str
    ts: datetime
    read_share: float


@dataclass(frozen=True, slots=True)
class CostPoint:
    """A point of the cost chart: the USD of one priced call (or summed over a decimated run,
    ``ts`` its last call's): as reported, at the ceiling, uncached."""

    ts: datetime
    actual: float
    ceiling: float
    uncached: float


_read_point = slotted_maker(ReadPoint)
"""``ReadPoint(...)``, faster (``_frozen.slotted_maker``): one per kept run (every call below
:data:`MAX_POINTS` a scenario)."""
_cost_point = slotted_maker(CostPoint)
"""``CostPoint(...)``, faster: as :data:`_read_point`."""

_P = TypeVar("_P")


class Decimator(Generic[_P]):
    """Chart points in order, at most ``2 * cap``: when full, each pair of points becomes one
    (``merge(earlier, later)``) and later points are merged ``stride`` at a time. Below
    ``cap`` points nothing is merged: the points are the calls'."""

    def __init__(self, cap: int, merge: Callable[[_P, _P], _P]) -> None:
        self._cap, self._merge = cap, merge
        self.points: list[_P] = []
        self.stride = 1
        self._pending: _P | None = None
        self._count = 0

    def add(self, point: _P) -> None:
        """Add the next point."""
        self._pending = point if self._pending is None else self._merge(self._pending, point)
        self._count += 1
        if self._count < self.stride:
            return
        run, self._pending, self._count = self._pending, None, 0
        self.keep(run)

    def keep(self, point: _P) -> None:
        """Keep the point of a whole run (``stride`` points already merged)."""
        self.points.append(point)
        if len(self.points) >= 2 * self._cap:
            pts = self.points
            self.points = [self._merge(a, b) for a, b in zip(pts[::2], pts[1::2], strict=True)]
            self.stride *= 2

    def finish(self) -> list[_P]:
        """The points, a partial run at the end included."""
        if self._pending is not None:
            self.points.append(self._pending)
            self._pending, self._count = None, 0
        return self.points


class _ReadPoints:
    """A :class:`Decimator` of :class:`ReadPoint` (a run keeps its last point) fed with a
    call's values: a point is made only when its run is kept, not one per call."""

    def __init__(self, cap: int) -> None:
        self.decimator: Decimator[ReadPoint] = Decimator(cap, _later)
        self._last: tuple[str, datetime, float] | None = None
        self._count = 0

    def add(self, session: str, ts: datetime, share: float) -> None:
        """Add the next call's point (``Decimator.add(ReadPoint(...))``, the same points)."""
        d = self.decimator
        self._count += 1
        if self._count < d.stride:
            self._last = (session, ts, share)
            return
        self._last, self._count = None, 0
        d.keep(_read_point(session, ts, share))

    def finish(self) -> list[ReadPoint]:
        """The points, a partial run at the end included."""
        if self._last is not None:
            self.decimator.points.append(_read_point(*self._last))
            self._last, self._count = None, 0
        return self.decimator.finish()


class _CostPoints:
    """A :class:`Decimator` of :class:`CostPoint` (a run's costs summed in order, as
    ``_summed`` does: the same floats) fed with a call's values."""

    def __init__(self, cap: int) -> None:
        self.decimator: Decimator[CostPoint] = Decimator(cap, _summed)
        self._run: list[Any] | None = None  # [ts, actual, ceiling, uncached] of the run
        self._count = 0

    def add(self, ts: datetime, actual: float, ceiling: float, uncached: float) -> None:
        """Add the next call's costs (``Decimator.add(CostPoint(...))``, the same points)."""
        run = self._run
        if run is None:
            if self.decimator.stride == 1:  # a run of one call: its point as it is
                self.decimator.keep(_cost_point(ts, actual, ceiling, uncached))
                return
            run = self._run = [ts, actual, ceiling, uncached]
        else:
            run[0] = ts
            run[1] += actual
            run[2] += ceiling
            run[3] += uncached
        self._count += 1
        if self._count < self.decimator.stride:
            return
        self._run, self._count = None, 0
        self.decimator.keep(_cost_point(*run))

    def finish(self) -> list[CostPoint]:
        """The points, a partial run at the end included."""
        if self._run is not None:
            self.decimator.points.append(_cost_point(*self._run))
            self._run, self._count = None, 0
        return self.decimator.finish()


def _later(_: ReadPoint, later: ReadPoint) -> ReadPoint:
    return later


def _summed(a: CostPoint, b: CostPoint) -> CostPoint:
    return _cost_point(b.ts, a.actual + b.actual, a.ceiling + b.ceiling,
                       a.uncached + b.uncached)


@dataclass
class Streamed:
    """What a streaming pass gathered instead of holding every call (module docstring).

    Attributes:
        calls_total: Calls summarized (keep-alive pings not included), whatever the page.
        page: The page asked for; :attr:`Summary.calls` holds its rows.
        by: The grouping whose totals were gathered (``groups``).
        groups: Totals per group for ``by``, in order of first call (a read-only
            mapping; a :class:`~._spill.SpillView` when streamed by another key than
            ``scenario``).
        causes: Causes ranked (:func:`~._causes.rank_causes`'s numbers).
        actions: Breaks by user action (:func:`~._causes.rank_actions`'s numbers).
        errors: Failed calls' error texts -> ``(calls, first id)`` (``Summary.errors``).
        cliffs: The cliffs kept (at most :data:`MAX_CLIFFS`, ledger order);
            ``cliffs_total`` all of them.
        misses: Included calls that lost tokens (at most :data:`MAX_MISSES`, ledger order);
            ``misses_total`` all of them.
        partial_costs: ``(id, note)`` of the first calls whose cost is unknown or partly
            known; ``partial_total`` all of them.
        suspect_ids: The first suspect calls' ids; ``suspect_total`` all of them.
        read_points: Read-share chart points per scenario; ``cost_points`` the cost chart's;
            ``decimated`` whether any were merged.
        spills: The bounded maps that hold the sessions' and groups' totals
            (:meth:`Summary.close <._summary.Summary.close>` deletes their files).
    """

    calls_total: int = 0
    page: CallPage = field(default_factory=CallPage)
    by: str = "scenario"
    groups: Mapping[str, Totals] = field(default_factory=dict)
    causes: list[CauseRow] = field(default_factory=list)
    actions: list[ActionRow] = field(default_factory=list)
    errors: dict[str, tuple[int, str]] = field(default_factory=dict)
    cliffs: list[Cliff] = field(default_factory=list)
    cliffs_total: int = 0
    misses: list[CallRow] = field(default_factory=list)
    misses_total: int = 0
    partial_costs: list[tuple[str, str | None]] = field(default_factory=list)
    partial_total: int = 0
    suspect_ids: list[str] = field(default_factory=list)
    suspect_total: int = 0
    read_points: dict[str, list[ReadPoint]] = field(default_factory=dict)
    cost_points: dict[str, list[CostPoint]] = field(default_factory=dict)
    decimated: bool = False
    spills: list[OrderedSpillMap[Totals]] = field(default_factory=list)


class _Kept:
    """The ``size`` items with the largest ``rank`` (ties: the earlier), returned in the order
    they were added."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._heap: list[tuple[Any, int, Any]] = []
        self._seq = 0

    def add(self, rank: Any, item: Any) -> None:
        self._seq += 1
        entry = (rank, -self._seq, item)
        if len(self._heap) < self._size:
            heapq.heappush(self._heap, entry)
        elif self._size and entry > self._heap[0]:
            heapq.heapreplace(self._heap, entry)

    def items(self) -> list[Any]:
        return [item for _, _, item in sorted(self._heap, key=lambda e: -e[1])]


class SummaryBuilder:
    """The summary of records added one at a time in ledger order (module docstring).

    Args:
        policies: Cache-policy table (default: shipped).
        price: Price the calls (``False``: every cost ``None``).
        what_if: Also replay the records under other cache policies (keeps every record).
        keep_calls: Keep every call row (``summarize``); ``False``: stream (:class:`Streamed`).
        page: With ``keep_calls=False``, the calls kept as rows.
        by: With ``keep_calls=False``, the grouping whose totals are gathered
            (:data:`~._summary.GROUP_BY`).
        find_body: With ``keep_calls=False``, the record of an id whose request body the pass
            no longer holds (``None``: not found or not kept).
    """

    def __init__(self, *, policies: PolicyTable | None = None, price: bool = True,
                 what_if: bool = False, keep_calls: bool = True,
                 page: CallPage | None = None, by: str = "scenario",
                 find_body: Callable[[str], UsageRecord | None] | None = None) -> None:
        if by not in GROUP_BY:
            raise ValueError(f"cannot group by {by!r}; choose one of {', '.join(GROUP_BY)}")
        self._policies, self._price, self._what_if = policies, price, what_if
        self._keep = keep_calls
        self._page = page or CallPage()
        self._by = by
        self._find_body = find_body
        self.scenarios: dict[str, ScenarioReport] = {}
        self._ceilings = Ceilings(bounded=not keep_calls)
        codec = fields_codec(Totals)
        self._sessions: OrderedSpillMap[Totals] = OrderedSpillMap(
            None if keep_calls else SESSIONS_IN_MEMORY, encode=codec[0], decode=codec[1])
        # (scenario, session id) -> totals
        self._agents: SpillMap[tuple[str, str], str] = SpillMap(  # (session, lineage) ->
            None if keep_calls else BRANCHES_IN_MEMORY, key_text=repr)  # its agent label
        self._pricing = Pricing(source=genai_prices_version() or "genai-prices not installed")
        self._notes: dict[str, None] = {}
        self.rows: list[CallRow] = []
        self.overall: Totals = Totals()
        self._bodies: dict[str, UsageRecord] = {}
        self.stabilized = StabilizeSavings()
        self._kept: list[UsageRecord] = []
        self._pings = KeepAliveTally(  # the sessions that had a ping: as many as sessions
            price=price, cap=None if keep_calls else SESSIONS_IN_MEMORY)
        self._ping_count = 0
        self._caches = ExplicitCaches()
        self._calls = 0
        self._streamed = Streamed(page=self._page, by=by)
        self._groups: OrderedSpillMap[Totals] = OrderedSpillMap(
            None if keep_calls else SESSIONS_IN_MEMORY, encode=codec[0],
            decode=codec[1])  # ("", group) -> totals
        self._causes = CauseTally()
        self._actions = ActionTally()
        self._cliff_finder = CliffFinder(cap=None if keep_calls else BRANCHES_IN_MEMORY)
        self._cliffs = _Kept(MAX_CLIFFS)
        self._misses = _Kept(MAX_MISSES)
        self._top = _Kept(self._page.top or 0)
        self._reads: dict[str, _ReadPoints] = {}
        self._costs: dict[str, _CostPoints] = {}
        self._policy_of: dict[tuple[str | None, str | None], tuple[CacheRules | None, int]] = {}
        self._seen: set[tuple[str, str | None, str | None]] = set()

    def _policy(self, provider: str | None, model: str | None) -> tuple[CacheRules | None, int]:
        """``(policy_of(provider, model), its granularity)``, found once per (provider,
        model): the table's lookup is a pure function of them."""
        key = (provider, model)
        found = self._policy_of.get(key)
        if found is None:
            policy = policy_of(provider, model, self._policies)
            found = self._policy_of[key] = (
                policy, policy.granularity_tokens if policy is not None else 1)
        return found

    def _body(self, record_id: str) -> UsageRecord | None:
        found = self._bodies.get(record_id)
        if found is None and not self._keep and self._find_body is not None:
            found = self._find_body(record_id)
        return found

    def _keep_body(self, record: UsageRecord) -> None:
        self._bodies[record.record_id] = record
        if not self._keep and len(self._bodies) > MAX_BODIES:
            del self._bodies[next(iter(self._bodies))]  # the oldest

    def add(self, record: UsageRecord) -> None:
        """Add the next record (ledger order)."""
        detail = record.verdict_detail
        # a cachedContents call (its own line: storage) or a call reading one; most: neither
        caches = CACHE_DETAIL in detail or "cached_content" in detail
        if caches and self._caches.add(record):
            return
        if self._what_if:
            self._kept.append(record)
        if record.content is not None:
            self._keep_body(record)
        name = record.scenario or NO_SCENARIO
        sid = record.session_id or NO_SESSION
        provider, model = record.provider, record.model
        policy, granularity = (self._policy_of.get((provider, model))
                               or self._policy(provider, model))
        if is_keepalive(record):  # its own line: not a call served, but it keeps the cache
            self._pings.add(record)
            self._ping_count += 1
            self._ceilings.next(record, Ceilings.key(record, name, sid), policy)
            return
        scenario = self.scenarios.get(name)
        if scenario is None:
            scenario = self.scenarios[name] = ScenarioReport(
                name, sessions=SpillView(self._sessions, name))
        seen = (name, provider, model)
        if seen not in self._seen:  # the scenario's models and providers, in order of first call
            self._seen.add(seen)
            if model and model not in scenario.models:
                scenario.models.append(model)
            if provider and provider not in scenario.providers:
                scenario.providers.append(provider)
        compared = self._ceilings.total_of(record.predecessor_id)
        branch = (sid, record.lineage or "")  # a branch's later calls keep its label
        agent = agent_label(record) or self._agents.get(branch) or MAIN_AGENT
        if agent != MAIN_AGENT:
            self._agents[branch] = agent
        # a subagent's ceiling is its own conversation's, not its parent's previous request
        ceiling = self._ceilings.next(record, Ceilings.key(
            record, name, sid if agent == MAIN_AGENT else f"{sid}\x00{agent}"), policy,
            self._caches.created_tokens(record) if caches else 0)
        snippets = None
        if (record.verdict == "client_mutation" and record.content is not None
                and record.predecessor_id is not None):
            snippets = mutation_snippets(record, self._body(record.predecessor_id))
        excluded = exclusion(record)
        agrees = agreement_of(record, granularity, excluded)
        pricing = self._pricing if self._price else None
        row = call_row(record, scenario=name, session=sid, ceiling=ceiling,
                       granularity=granularity, pricing=pricing, notes=self._notes,
                       snippets=snippets, agrees=agrees, compared_input_tokens=compared,
                       agent=agent, excluded=excluded)
        if "stabilized" in detail:  # (StabilizeSavings counts no other call)
            self.stabilized.add(record, row, pricing, self._notes)
        totals = self._sessions.get((name, sid))
        if totals is None:
            totals = self._sessions[name, sid] = Totals()
        add_call((self.overall, scenario.totals, totals), row, agrees, self._price)
        if self._keep:
            self.rows.append(row)
            if row.read_share is not None:
                scenario.read_series.append(row.read_share)
        else:
            self._stream(row, agrees)
        self._calls += 1

    def _stream(self, row: CallRow, agrees: bool | None) -> None:
        """Gather what the report shows of ``row`` (module docstring), then drop it."""
        s = self._streamed
        page = self._page
        lost = row.lost_tokens
        missed = row.excluded is None and lost > 0  # an included call that lost tokens
        if page.call is not None:
            if row.id.startswith(page.call) and len(self.rows) < page.limit:
                self.rows.append(row)
        elif page.top is not None:
            if missed:
                self._top.add((lost, row.lost_usd or 0.0), row)
        elif page.offset <= self._calls < page.offset + page.limit:
            self.rows.append(row)
        if self._by != "scenario":
            key = group_key(row, self._by)
            group = self._groups.get(("", key))
            if group is None:
                group = self._groups["", key] = Totals()
            group.add(row, agrees, self._price)
        if missed or (row.verdict == "client_mutation" and row.excluded is None):
            self._causes.add(row)  # (the calls either tally counts; most calls: neither)
            self._actions.add(row)
        if row.read_share is not None:  # (CliffFinder skips the others)
            cliff = self._cliff_finder.add(row)
            if cliff is not None:
                s.cliffs_total += 1
                self._cliffs.add(cliff.drop, cliff)
        if missed:
            s.misses_total += 1
            self._misses.add((lost, row.lost_usd or 0.0), row)
        if self._price and not row.cost_complete:
            s.partial_total += 1
            if len(s.partial_costs) < MAX_NAMED:
                s.partial_costs.append((row.id, row.cost_note))
        if row.error is not None:
            text = row.error if (row.error in s.errors or len(s.errors) < MAX_NAMED
                                 ) else "(other errors)"
            count, first = s.errors.get(text, (0, row.id))
            s.errors[text] = (count + 1, first)
        if row.excluded == "suspect":
            s.suspect_total += 1
            if len(s.suspect_ids) < MAX_NAMED:
                s.suspect_ids.append(row.id)
        if row.read_share is not None:
            reads = self._reads.get(row.scenario)
            if reads is None:
                reads = self._reads[row.scenario] = _ReadPoints(MAX_POINTS)
            reads.add(row.session, row.ts, row.read_share)
        if row.cost_usd is not None:
            costs = self._costs.get(row.scenario)
            if costs is None:
                costs = self._costs[row.scenario] = _CostPoints(MAX_POINTS)
            costs.add(row.ts, row.cost_usd or 0.0, row.cost_at_ceiling_usd or 0.0,
                      row.cost_uncached_usd or 0.0)

    def close(self) -> None:
        """Delete the temporary files of the pass (``_spill``; also the sessions' and groups',
        which :meth:`finish` hands to the summary): the pass failed."""
        self._ceilings.close()
        self._agents.close()
        self._cliff_finder.close()
        self._sessions.close()
        self._groups.close()
        self._pings.close()

    def finish(self) -> dict[str, Any]:
        """The fields of the :class:`~._summary.Summary` of the records added (keyword
        arguments: ``Summary(**builder.finish())``). The ceilings' temporary file, if any,
        is deleted (the pass is over); the sessions' stays until :meth:`Summary.close
        <._summary.Summary.close>`."""
        self._ceilings.close()
        self._agents.close()
        self._cliff_finder.close()
        self._pings.close()  # (its totals are counts)
        self._pricing.notes = list(self._notes)
        replays = (what_if_by_provider(self._kept, table=self._policies)
                   if self._what_if and self._price else None)
        streamed = None
        if not self._keep:
            streamed = self._streamed
            streamed.calls_total = self._calls
            if self._page.top is not None:
                self.rows = self._top.items()
            streamed.groups = ({name: s.totals for name, s in self.scenarios.items()}
                               if self._by == "scenario" else SpillView(self._groups, ""))
            streamed.spills = [self._sessions, self._groups]
            streamed.causes = self._causes.ranked()
            streamed.actions = self._actions.ranked()
            streamed.cliffs = self._cliffs.items()
            streamed.misses = self._misses.items()
            streamed.read_points = {k: d.finish() for k, d in self._reads.items()}
            streamed.cost_points = {k: d.finish() for k, d in self._costs.items()}
            streamed.decimated = (any(d.decimator.stride > 1 for d in self._reads.values())
                                  or any(d.decimator.stride > 1
                                         for d in self._costs.values()))
        return {"scenarios": self.scenarios,
                "records": self._calls + self._ping_count + self._caches.rows,
                "pricing": self._pricing, "calls": self.rows, "overall": self.overall,
                "priced": self._price, "stabilized": self.stabilized,
                "reads_beyond_ledger": self._ceilings.beyond_ledger, "what_if": replays,
                "keepalive": self._pings.totals(), "streamed": streamed,
                "explicit_caches": self._caches.totals(price=self._price)}
