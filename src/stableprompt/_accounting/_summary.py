"""Summarize ledger records per scenario and per session: the numbers of ``stableprompt report``.

:func:`summarize` reads :class:`~stableprompt.UsageRecord` rows (``Ledger.records()``) and
groups them by ``scenario`` and ``session_id``. Every number comes from the records:

* ``calls``: records in the group (failed calls included).
* Excluded calls (:func:`~._calls.exclusion`): requests forwarded unanalysed by the proxy
  (``unanalysed``: wire format ``unknown``), no usage (``unknown_usage``), cache reads not
  reported (``unknown_reads``), a suspect input total (``suspect``:
  ``verdict_detail["usage_suspect"]``) or usage that did not add up (``inconsistent``) count
  as calls and verdicts but add nothing to any token sum, rate or ceiling below: an unknown
  read is not a 0 read. :meth:`Summary.exclusion_notes` names how many and why; a group with
  nothing left shows ``None`` ("—"). Costs exclude none of them but unanalysed requests
  (``cost_usd`` below).
* ``input_tokens`` / ``cache_read_tokens`` / ``cache_write_tokens`` / ``output_tokens`` /
  ``uncached_tokens``: sums of the provider-reported fields over the included calls
  (``input_tokens`` is the inclusive total, ``gen_ai.usage.input_tokens``).
* ``partial``: included calls that read some but clearly less than they could
  (:attr:`~._calls.CallRow.partial`); ``lost_tokens`` / ``lost_usd``: what the verdicts say
  was lost (:mod:`._calls`).
* ``hit_rate``: ``cache_read_tokens / input_tokens`` (token-weighted, DESIGN.md).
* ``ceiling``: the append-only upper bound on the same calls, as a hit rate: for each call with
  known usage, the most an append-only harness could read from *any* earlier call of the
  selection still within the cache TTL (:class:`Ceilings`), and never less than what the call
  read: a read proves its prefix was cached, so ``of ceiling`` never exceeds 100%; calls whose
  read the selection does not explain (a cache warm from calls outside it) are counted
  (:attr:`Summary.reads_beyond_ledger`, :func:`~._text.ceiling_notes`). Ceilings are kept per
  provider, model and wire format (one never reads another's cache), then per scenario and
  session. Two sources, the larger wins:

  - its own session's previous request, whole (an append-only harness repeats it byte for
    byte): ``min(previous input_tokens, this call's input_tokens)``. This uses request sizes
    only, so a scenario's own mistakes do not lower it;
  - another session's call sharing its prefix (sessions forked from one head, subagents with
    the same spec): the call the recorder compared it with (``predecessor_id``) when that call
    belongs to another session, credited with the prefix they share (``verdict_detail
    ["lcp_tokens_scaled"]``, provider tokens; else ``lcp_tokens``), at most that call's size.

  Either source counts only within the TTL: the gap from that earlier call's send time to
  this call's is at most the call's TTL (``verdict_detail["ttl_s"]``, else the policy's
  default, :attr:`~stableprompt.CacheRules.default_ttl_s`; no TTL for self-hosted engines).
  The result is floored to the model's cache granularity and is 0 below its minimum cacheable
  length (:func:`~stableprompt.cache_rules`); a session's first call without a cross-session
  source has ceiling 0. Limit: sessions whose heads differ (each subagent with its own copy
  of a spec behind its own preamble) are never compared by the recorder, so the ceiling does
  not see the head they could have shared; the demo's ``subagent-spec-copies`` vs
  ``subagent-fork`` shows that loss as a hit-rate gap.
* ``verdicts``: count per attribution verdict (all eight keys, zeros included).
* ``agreement``: fraction of calls with both numbers known whose predicted cache reads
  (``predicted_cache_read_tokens``) equal the reported ones within the provider's granularity
  (``|predicted - reported| < granularity_tokens``); ``None`` when no call has both. A
  prediction that rests partly on our token estimate (the first read of an entry ending at
  an earlier breakpoint, whose size the provider had not reported yet) agrees within an
  allowance for that estimated span (:func:`._calls.agreement_of`); ``agreement_estimated``
  counts those calls, ``estimate_max_error_tokens`` their largest error.
* ``cost_usd`` (USD): every call whose usage parsed, suspect or not, priced with
  `genai-prices <https://pypi.org/project/genai-prices/>`_ at its own date (``ts_utc``) for
  its provider and model (cache reads and writes, including the 1-hour write split, at their
  own rates; the long-context tier; server-tool fees from ``usage_raw["server_tool_use"]``;
  :mod:`._pricing`). Money is never dropped: a call whose cost is unknown (no usage, reads not
  reported, a negative part, an unknown model) or only partly known (output tokens unknown,
  a server-tool fee unknown) makes the sum a lower bound: ``cost_complete`` false and
  ``cost_unknown_calls`` counts those calls (the text and HTML show ``≥$X``; each call's
  ``cost_note`` and :meth:`Summary.cost_notes` name them). ``cost_usd`` is ``None`` only when
  no call of the group could be priced at all, or pricing was off. ``cost_uncached_usd``: the
  same calls with no caching; ``cost_at_ceiling_usd``: had each read at least its ceiling
  (0 for calls excluded from rates).

Per call: :attr:`Summary.calls` (:class:`~._calls.CallRow`); causes ranked by lost tokens and
dollars: :meth:`Summary.causes`; read-share cliffs: :meth:`Summary.cliffs`; what
``--stabilize`` saved: :attr:`Summary.stabilized` (:mod:`._stabilized`, how it is estimated).

Rendering is elsewhere: terminal tables and notes in ``_text.py``, the HTML page in
``_html.py``; JSON is :meth:`Summary.to_json`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from .._ledger._usage_record import UsageRecord
from .._policy import PolicyTable
from .._public import public
from .._subcommand import LazyJsonArray, LazyJsonObject
from ._builder import (
    NO_SCENARIO,
    NO_SESSION,
    CallPage,
    CostPoint,
    ReadPoint,
    Streamed,
    SummaryBuilder,
)
from ._calls import EXCLUSIONS, CallRow, Cliff, find_cliffs
from ._causes import ActionRow, CauseRow, rank_actions, rank_causes
from ._ceilings import Ceilings
from ._keepalive import KeepAliveTotals
from ._pricing import Pricing
from ._stabilized import StabilizeSavings
from ._storage import ExplicitCacheTotals
from ._totals import GROUP_BY, VERDICTS, ScenarioReport, Totals, group_key
from ._what_if import WhatIf

__all__ = [
    "GROUP_BY",
    "NO_SCENARIO",
    "NO_SESSION",
    "VERDICTS",
    "Ceilings",
    "Pricing",
    "ScenarioReport",
    "Streamed",
    "Summary",
    "Totals",
    "group_key",
    "summarize",
    "summarize_stream",
]

@dataclass
class Summary:
    """A ledger summary: scenarios in order of first appearance, and every call in order.

    What :func:`summarize` returns, in process, with the same numbers as ``stableprompt report
    --json`` (:meth:`to_json` is that output without the command's ``ledger``, ``meta`` and
    ``notes``). :attr:`overall` holds the totals over all calls; :attr:`hit_rate`,
    :attr:`ceiling`, :attr:`of_ceiling` and :attr:`cost_usd` are its numbers, so a harness can
    assert ``summary.hit_rate >= 0.8`` (``None`` when no call has known usage).
    """

    scenarios: dict[str, ScenarioReport]
    records: int
    pricing: Pricing
    calls: list[CallRow] = field(default_factory=list)
    overall: Totals = field(default_factory=Totals)
    priced: bool = True  # summarize(price=...): costs were asked for
    stabilized: StabilizeSavings = field(default_factory=StabilizeSavings)
    reads_beyond_ledger: int = 0
    """Calls that read more than any earlier call of the selection explains (a cache warm
    from calls not in it, or a prefix shared with a call the recorder did not compare it
    with); their ceiling is what they read, so ``of ceiling`` never exceeds 100%."""
    what_if: dict[str, WhatIf] | None = None
    """The what-if replay per provider family (``summarize(what_if=True)``), else ``None``."""
    keepalive: KeepAliveTotals = field(default_factory=KeepAliveTotals)
    """Keep-alive pings (``_accounting._keepalive``): kept out of :attr:`calls`, hit rates,
    ceilings and verdict counts (a ping serves no request), counted and priced here, and in
    :attr:`cost_usd`."""
    explicit_caches: ExplicitCacheTotals = field(default_factory=ExplicitCacheTotals)
    """Gemini explicit caches (``_accounting._storage``): their create / update / delete rows
    kept out of :attr:`calls` like pings; storage per token-hour, creation, reads served and
    break-even per cache; storage and creation in :attr:`cost_usd`."""
    streamed: Streamed | None = None
    """``None`` (:func:`summarize`): :attr:`calls` holds every call, and causes, cliffs,
    groups and cost notes are computed from them. Set by the streaming report
    (``_builder.summarize_stream``, ``stableprompt report``): :attr:`calls` holds only the
    page asked for, and the rest was gathered during its one pass (``_builder.Streamed``);
    the numbers are the same."""

    @property
    def calls_total(self) -> int:
        """Calls summarized (keep-alive pings not included), whether or not :attr:`calls`
        holds them all."""
        return len(self.calls) if self.streamed is None else self.streamed.calls_total

    @property
    def hit_rate(self) -> float | None:
        """Token-weighted hit rate over all included calls (:attr:`Totals.hit_rate`)."""
        return self.overall.hit_rate

    @property
    def ceiling(self) -> float | None:
        """The append-only ceiling as a hit rate over all included calls."""
        return self.overall.ceiling

    @property
    def of_ceiling(self) -> float | None:
        """Share of the ceiling the calls read."""
        return self.overall.of_ceiling

    @property
    def cost_usd(self) -> float | None:
        """Summed price of every priced call (USD; :attr:`Totals.cost_usd`), keep-alive
        pings (:attr:`keepalive`) and explicit-cache storage and creation
        (:attr:`explicit_caches`) included: a lower bound when ``overall.cost_complete`` is
        false (:meth:`cost_notes` names the calls), a ping is unpriced or an explicit cache
        is (``explicit_caches.unpriced``)."""
        extra = [usd for usd in (self.keepalive.usd, self.explicit_caches.usd)
                 if usd is not None]
        if not extra:
            return self.overall.cost_usd
        return sum(extra) + (self.overall.cost_usd or 0.0)

    def close(self) -> None:
        """Delete the temporary file a streaming summary keeps its sessions' and groups'
        totals in once they outgrow memory (``_builder.SESSIONS_IN_MEMORY``, ``_spill``);
        idempotent, and a no-op for :func:`summarize` (which keeps them in memory). Close it
        once its output is written: then its sessions raise ``RuntimeError`` rather than
        give a part of them (when some were moved out)."""
        if self.streamed is not None:
            for spill in self.streamed.spills:
                spill.close()

    def group_by(self, by: str = "scenario") -> Mapping[str, Totals]:
        """Totals per group of calls (:data:`GROUP_BY`), groups in order of first call; the
        same numbers as :attr:`scenarios` for ``"scenario"`` (a ``dict``; a streaming
        summary's gathered groups are a read-only mapping).

        Raises:
            ValueError: ``by`` is not one of :data:`GROUP_BY`, or (a streaming summary) not
                the grouping it gathered (:attr:`Streamed.by`) nor ``"scenario"``.
        """
        if self.streamed is not None:
            if by == "scenario":
                return {name: s.totals for name, s in self.scenarios.items()}
            if by != self.streamed.by:
                if by not in GROUP_BY:
                    raise ValueError(f"cannot group by {by!r}; choose one of "
                                     f"{', '.join(GROUP_BY)}")
                raise ValueError(f"this summary was streamed grouped by "
                                 f"{self.streamed.by!r}, not {by!r}")
            return self.streamed.groups
        out: dict[str, Totals] = {}
        for row in self.calls:
            out.setdefault(group_key(row, by), Totals()).add(row, row.agrees, self.priced)
        return out

    def causes(self) -> list[CauseRow]:
        """Causes ranked by lost tokens, then lost USD (:func:`~._causes.rank_causes`)."""
        return rank_causes(self.calls) if self.streamed is None else list(self.streamed.causes)

    def actions(self) -> list[ActionRow]:
        """Breaks grouped by the user action behind them, by lost USD
        (:func:`~._causes.rank_actions`)."""
        return rank_actions(self.calls) if self.streamed is None else list(self.streamed.actions)

    def cliffs(self) -> list[Cliff]:
        """Calls whose read share dropped sharply (:func:`~._calls.find_cliffs`); a
        streaming summary's sharpest :data:`~._builder.MAX_CLIFFS` (:meth:`cliffs_total`
        counts all)."""
        return find_cliffs(self.calls) if self.streamed is None else list(self.streamed.cliffs)

    def errors(self) -> dict[str, tuple[int, str]]:
        """The failed calls' error texts (:attr:`CallRow.error`, redacted), each with how many
        calls had it and the first one's id, in order of first appearance (a streaming
        summary keeps the first :data:`~._builder.MAX_NAMED` texts; calls with another
        text are counted under ``"(other errors)"``)."""
        if self.streamed is not None:
            return dict(self.streamed.errors)
        seen: dict[str, tuple[int, str]] = {}
        for row in self.calls:
            if row.error is not None:
                count, first = seen.get(row.error, (0, row.id))
                seen[row.error] = (count + 1, first)
        return seen

    def cliffs_total(self) -> int:
        """How many cliffs there are (:meth:`cliffs` may hold fewer when streamed)."""
        return len(self.cliffs()) if self.streamed is None else self.streamed.cliffs_total

    def misses(self) -> tuple[list[CallRow], int]:
        """``(rows, total)``: the included calls that lost tokens, in ledger order, and how
        many there are (a streaming summary keeps the :data:`~._builder.MAX_MISSES` that lost
        the most)."""
        if self.streamed is not None:
            return list(self.streamed.misses), self.streamed.misses_total
        rows = [r for r in self.calls if r.included and r.lost_tokens > 0]
        return rows, len(rows)

    def read_points(self) -> dict[str, list[ReadPoint]]:
        """The read-share chart's points per scenario: one per included call, in order (a
        streaming summary's may be decimated: ``streamed.decimated``)."""
        if self.streamed is not None:
            return self.streamed.read_points
        out: dict[str, list[ReadPoint]] = {}
        for r in self.calls:
            if r.read_share is not None:
                out.setdefault(r.scenario, []).append(ReadPoint(r.session, r.ts, r.read_share))
        return out

    def cost_points(self) -> dict[str, list[CostPoint]]:
        """The cost chart's points per scenario: one per priced call, USD as reported, at
        the ceiling and uncached (unknown parts as 0); decimated points sum their calls'."""
        if self.streamed is not None:
            return self.streamed.cost_points
        out: dict[str, list[CostPoint]] = {}
        for r in self.calls:
            if r.cost_usd is not None:
                out.setdefault(r.scenario, []).append(CostPoint(
                    r.ts, r.cost_usd or 0.0, r.cost_at_ceiling_usd or 0.0,
                    r.cost_uncached_usd or 0.0))
        return out

    def exclusion_notes(self) -> list[str]:
        """One line naming how many calls were excluded from rates and why; ``[]`` when
        none."""
        t = self.overall
        counts = {"unanalysed": t.unanalysed, "no-usage": t.unknown_usage,
                  "unknown-reads": t.unknown_reads, "suspect": t.suspect,
                  "inconsistent": t.inconsistent}
        parts = [f"{n:,} with {EXCLUSIONS[k]}" for k, n in counts.items() if n]
        if not parts:
            return []
        return [f"{t.excluded:,} of {t.calls:,} calls excluded from token sums, hit rates and "
                f"ceilings (counted as calls and verdicts, never as 0 reads): "
                f"{'; '.join(parts)}."]

    def cost_notes(self, *, limit: int = 10) -> list[str]:
        """What the costs leave out, one line each; ``[]`` when every call's cost is whole
        and none is suspect: the calls whose cost is unknown or a lower bound (``≥``), with
        their ids and why (at most ``limit`` named), and the suspect calls priced as
        reported (``usage_suspect``)."""
        if not self.priced:
            return []
        lines: list[str] = []
        if self.streamed is None:
            partial = [(row.id, row.cost_note) for row in self.calls if not row.cost_complete]
            suspect = [row.id for row in self.calls if row.excluded == "suspect"]
            partial_total, suspect_total = len(partial), len(suspect)
        else:
            partial, partial_total = self.streamed.partial_costs, self.streamed.partial_total
            suspect, suspect_total = self.streamed.suspect_ids, self.streamed.suspect_total
        if partial_total:
            named = "; ".join(f"{rid}: {note or 'unknown'}" for rid, note in partial[:limit])
            more = (f"; and {partial_total - limit:,} more" if partial_total > limit else "")
            lines.append(f"Costs marked ≥ are lower bounds: {partial_total:,} call"
                         f"{'s' if partial_total != 1 else ''} with a cost unknown or only "
                         f"partly known: {named}{more}.")
        if suspect_total:
            more = f", and {suspect_total - limit:,} more" if suspect_total > limit else ""
            lines.append(f"{suspect_total:,} call{'s' if suspect_total != 1 else ''} priced as "
                         "reported although the input total is far from our estimate of the "
                         "request (usage_suspect: cached tokens counted twice? see "
                         f"usage_dialect); not in hit rates: {', '.join(suspect[:limit])}{more}.")
        return lines

    def to_json(self, *, sessions: bool = True, by: str = "scenario",
                lazy: bool = False) -> dict[str, Any]:
        """``{"records", "pricing", "scenarios": {name: {...full totals..., "models",
        "sessions": {id: {...}}}}, "overall", "by", "groups", "calls", "causes", "actions",
        "cliffs", "exclusions", "cost_notes", "reads_beyond_ledger", "stabilized"}`` (``groups``:
        :meth:`group_by` as a list, each entry with its ``group`` key; by scenario also with
        ``scenario``, ``models`` and ``providers``). ``lazy``: each ``sessions`` object and
        ``groups`` by another key is made as it is encoded (``_subcommand.LazyJsonObject``,
        ``LazyJsonArray``; only for ``write_scrubbed_json``: ``stableprompt report --json``),
        so a streaming summary's sessions are never all in memory."""
        out: dict[str, Any] = {}
        groups: list[dict[str, Any]] = []
        if by != "scenario":
            grouped = self.group_by(by)
            groups = (LazyJsonArray(partial(_group_entries, grouped), len(grouped)) if lazy
                      else list(_group_entries(grouped)))
        for name, scenario in self.scenarios.items():
            entry = {**scenario.totals.to_full_json(), "models": list(scenario.models),
                     "providers": list(scenario.providers)}
            if by == "scenario":
                groups.append({"group": name, "scenario": name, **entry})
            if sessions:
                per = scenario.sessions
                entry["sessions"] = (
                    LazyJsonObject(partial(_session_entries, per), partial(iter, per),
                                   len(per)) if lazy
                    else dict(_session_entries(per)))
            out[name] = entry
        return {"records": self.records, "pricing": self.pricing.to_json(), "scenarios": out,
                "overall": self.overall.to_full_json(), "by": by, "groups": groups,
                "calls": [row.to_json() for row in self.calls],
                "causes": [cause.to_json() for cause in self.causes()],
                "actions": [action.to_json() for action in self.actions()],
                "cliffs": [cliff.to_json() for cliff in self.cliffs()],
                "exclusions": self.exclusion_notes(),
                "cost_notes": self.cost_notes(),
                "reads_beyond_ledger": self.reads_beyond_ledger,
                "stabilized": self.stabilized.to_json(),
                "keepalive": self.keepalive.to_json(),
                "explicit_caches": self.explicit_caches.to_json(),
                **({"what_if": {p: w.to_json() for p, w in self.what_if.items()}}
                   if self.what_if is not None else {}),
                **({"calls_page": {**self.streamed.page.to_json(),
                                   "total": self.streamed.calls_total},
                    "cliffs_total": self.streamed.cliffs_total}
                   if self.streamed is not None else {})}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _session_entries(sessions: Mapping[str, Totals]) -> Iterator[tuple[str, dict[str, Any]]]:
    for sid, t in sessions.items():
        yield sid, t.to_full_json()


def _group_entries(groups: Mapping[str, Totals]) -> Iterator[dict[str, Any]]:
    for key, t in groups.items():
        yield {"group": key, **t.to_full_json()}


# --------------------------------------------------------------------------- summarizing


def summarize(records: Iterable[UsageRecord], *, policies: PolicyTable | None = None,
              price: bool = True, what_if: bool = False) -> Summary:
    """Group records by scenario and session and compute the summary (module docstring).

    Args:
        records: Ledger records, in ledger order (time order).
        policies: Cache-policy table for minimums and granularity (default: shipped).
        price: Price calls with genai-prices (``False``: every cost is ``None``).
        what_if: Also replay the calls under alternative cache policies
            (:attr:`Summary.what_if`, :func:`~stableprompt.what_if` per provider); keeps
            the records in memory for it.

    Returns:
        A :class:`Summary`; scenarios and sessions in order of first appearance, calls in
        ledger order (every call: :attr:`Summary.calls`; ``stableprompt report`` streams
        instead, ``_builder.summarize_stream``, with the same numbers).
    """
    builder = SummaryBuilder(policies=policies, price=price, what_if=what_if)
    for record in records:
        builder.add(record)
    return Summary(**builder.finish())


def summarize_stream(records: Iterable[UsageRecord], *, policies: PolicyTable | None = None,
                     price: bool = True, what_if: bool = False, page: CallPage | None = None,
                     by: str = "scenario",
                     find_body: Callable[[str], UsageRecord | None] | None = None) -> Summary:
    """:func:`summarize`'s numbers in one pass that does not hold every call (``_builder``'s
    module docstring): the :class:`Summary` has :attr:`Summary.streamed` set and
    :attr:`Summary.calls` holding ``page`` only (default: the first 1,000 calls). Its memory
    does not grow with calls (``_spill``): call :meth:`Summary.close` once its output is
    written (deletes its temporary file, if one was needed).

    Args:
        records: As :func:`summarize`, read as they are summarized.
        policies: As :func:`summarize`.
        price: As :func:`summarize`.
        what_if: As :func:`summarize` (keeps every record for the replay).
        page: The calls kept as rows (:class:`~._builder.CallPage`).
        by: The grouping whose totals are gathered (:meth:`Summary.group_by`).
        find_body: The record of an id whose request body the pass no longer holds.

    Raises:
        ValueError: ``by`` is not one of :data:`GROUP_BY`.
    """
    builder = SummaryBuilder(policies=policies, price=price, what_if=what_if,
                             keep_calls=False, page=page, by=by, find_body=find_body)
    try:
        for record in records:
            builder.add(record)
        return Summary(**builder.finish())
    except BaseException:
        builder.close()  # no temporary file outlives a failed pass
        raise


public(Summary, summarize)
