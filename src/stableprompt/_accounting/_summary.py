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
  (``|predicted - reported| < granularity_tokens``); ``None`` when no call has both.
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

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .._ledger._usage_record import UsageRecord
from .._policy import CacheRules, PolicyTable, cache_rules
from .._public import public
from .._recording._server_reasons import AGREEMENTS
from ._calls import (
    EXCLUSIONS,
    MAIN_AGENT,
    CallRow,
    Cliff,
    agent_label,
    call_row,
    exclusion,
    find_cliffs,
)
from ._causes import ActionRow, CauseRow, rank_actions, rank_causes
from ._keepalive import KeepAliveTotals, is_keepalive, keepalive_totals
from ._pricing import Pricing, genai_prices_version
from ._snippets import mutation_snippets
from ._stabilized import StabilizeSavings
from ._storage import ExplicitCaches, ExplicitCacheTotals
from ._what_if import WhatIf, what_if_by_provider

__all__ = [
    "GROUP_BY",
    "NO_SCENARIO",
    "NO_SESSION",
    "VERDICTS",
    "Ceilings",
    "Pricing",
    "ScenarioReport",
    "Summary",
    "Totals",
    "summarize",
]

VERDICTS = ("hit", "cold", "client_mutation", "below_minimum", "no_breakpoint", "ttl_expired",
            "provider_miss", "unknown")
"""The attribution verdicts, in display order."""

NO_SCENARIO = "(none)"
NO_SESSION = "(none)"

GROUP_BY = ("scenario", "session", "model", "wire", "day", "agent")
"""What :meth:`Summary.group_by` can group calls by (``session``: scenario and session id
together, ``"scenario/session"``; ``wire``: the record's wire format; ``day``: UTC date;
``agent``: ``main`` or ``subagent <id>``, :func:`~._calls.agent_label`)."""


def _group_key(row: CallRow, by: str) -> str:
    if by == "scenario":
        return row.scenario
    if by == "session":
        return f"{row.scenario}/{row.session}"
    if by == "model":
        return row.model or "(none)"
    if by == "wire":
        return row.wire_format
    if by == "day":
        return row.ts.date().isoformat()
    if by == "agent":
        return row.agent
    raise ValueError(f"cannot group by {by!r}; choose one of {', '.join(GROUP_BY)}")


# --------------------------------------------------------------------------- model


def _add(total: float | None, value: float | None) -> float | None:
    return None if total is None or value is None else total + value


@dataclass
class Totals:
    """Sums over a group of calls (tokens unless stated). See the module docstring.

    Attributes:
        calls: Calls in the group.
        unanalysed: Requests the proxy forwarded without analysis (other endpoints, bodies
            not of their endpoint's format): excluded.
        unknown_usage: Calls whose usage is unknown (failed, interrupted): excluded.
        unknown_reads: Calls whose provider did not report cache reads: excluded.
        suspect: Calls whose input total is implausible for their request
            (``verdict_detail["usage_suspect"]``): excluded from token sums and rates,
            priced as reported.
        inconsistent: Calls flagged ``usage_inconsistent`` without suspicion (the usage did
            not add up): excluded from token sums and rates.
        input_tokens: Reported input tokens of the included calls, inclusive of cache reads
            and writes.
        cache_read_tokens: Reported cache reads.
        cache_write_tokens: Reported cache writes (all TTLs).
        output_tokens: Reported output tokens.
        ceiling_tokens: Sum of the per-call append-only ceiling.
        partial: Included calls that read some but clearly less than they could.
        lost_tokens: Tokens the verdicts say were lost (included calls).
        verdicts: Calls per verdict (all calls).
        agreement_calls: Calls with both predicted and reported reads.
        agreement_matches: Of those, calls where they agree within the granularity.
        cost_usd: Summed price (USD) of every priced call, a lower bound when
            ``cost_unknown_calls``; ``None`` when no call could be priced (or pricing is off).
        cost_unknown_calls: Calls whose cost is unknown or only partly known (their
            ``cost_note`` says why); :attr:`cost_complete` is ``cost_unknown_calls == 0``.
        priced_calls: Calls with a known cost (whole, or a lower bound).
        cost_uncached_usd: The same calls priced with no caching at all.
        cost_at_ceiling_usd: The same calls priced as if each read at least its ceiling.
        lost_usd: What the lost tokens cost beyond a cache read.
        intra_input_tokens: Input of the included calls inside a user turn (after a tool
            result); ``intra_read_tokens`` their reads; ``intra_calls`` how many.
        cross_input_tokens: Input of the included first calls after a user message;
            ``cross_read_tokens`` their reads; ``cross_calls`` how many.
        server_diagnosis: Calls per relation of the provider's own miss reason to our
            verdict (``_recording._server_reasons.AGREEMENTS``: agree, disagree, server-only,
            ours-only, no-comparison), for calls that asked for diagnostics.
        provider_side_unexplained: Calls whose miss the provider blames on itself or that
            neither side explains (:attr:`CallRow.provider_side_unexplained`).
    """

    calls: int = 0
    unanalysed: int = 0
    unknown_usage: int = 0
    unknown_reads: int = 0
    suspect: int = 0
    inconsistent: int = 0
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    ceiling_tokens: int = 0
    partial: int = 0
    lost_tokens: int = 0
    verdicts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VERDICTS, 0))
    agreement_calls: int = 0
    agreement_matches: int = 0
    cost_usd: float | None = 0.0
    cost_unknown_calls: int = 0
    priced_calls: int = 0
    cost_uncached_usd: float | None = 0.0
    cost_at_ceiling_usd: float | None = 0.0
    lost_usd: float | None = 0.0
    intra_calls: int = 0
    intra_input_tokens: int = 0
    intra_read_tokens: int = 0
    cross_calls: int = 0
    cross_input_tokens: int = 0
    cross_read_tokens: int = 0
    server_diagnosis: dict[str, int] = field(default_factory=dict)
    provider_side_unexplained: int = 0

    @property
    def server_agreement(self) -> float | None:
        """Where both speak (the server named a reason or a hit, and our verdict is known):
        the fraction that agree; ``None`` when none did."""
        agree = self.server_diagnosis.get("agree", 0)
        spoken = agree + self.server_diagnosis.get("disagree", 0)
        return agree / spoken if spoken else None

    @property
    def intra_turn_hit_rate(self) -> float | None:
        """Hit rate of the calls inside a user turn (tool-loop calls), ``None`` if none."""
        return (self.intra_read_tokens / self.intra_input_tokens if self.intra_input_tokens
                else None)

    @property
    def cross_turn_hit_rate(self) -> float | None:
        """Hit rate of the first calls after a new user message, ``None`` if none."""
        return (self.cross_read_tokens / self.cross_input_tokens if self.cross_input_tokens
                else None)

    @property
    def excluded(self) -> int:
        """Calls left out of every token sum and rate (unanalysed, unknown usage or reads,
        suspect, inconsistent)."""
        return (self.unanalysed + self.unknown_usage + self.unknown_reads + self.suspect
                + self.inconsistent)

    @property
    def cost_complete(self) -> bool:
        """:attr:`cost_usd` is the whole cost of the group's calls (not a lower bound)."""
        return self.cost_unknown_calls == 0

    @property
    def uncached_tokens(self) -> int:
        """Input tokens neither read from nor written to the cache (included calls)."""
        return self.input_tokens - self.cache_read_tokens - self.cache_write_tokens

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

    def add(self, row: CallRow, agrees: bool | None, priced: bool) -> None:
        """Add one call (its agreement computed by :func:`summarize`; ``priced``: costs were
        asked for, so a missing cost makes the sums unknown)."""
        self.calls += 1
        verdict = row.verdict if row.verdict in self.verdicts else "unknown"
        self.verdicts[verdict] += 1
        if agrees is not None:
            self.agreement_calls += 1
            self.agreement_matches += int(agrees)
        self._add_cost(row, priced)
        if row.server_agreement is not None:
            self.server_diagnosis[row.server_agreement] = (
                self.server_diagnosis.get(row.server_agreement, 0) + 1)
        self.provider_side_unexplained += int(row.provider_side_unexplained)
        if row.excluded is not None:
            name = {"unanalysed": "unanalysed", "no-usage": "unknown_usage",
                    "unknown-reads": "unknown_reads", "suspect": "suspect",
                    "inconsistent": "inconsistent"}[row.excluded]
            setattr(self, name, getattr(self, name) + 1)
            return
        self.input_tokens += row.input_tokens or 0
        self.cache_read_tokens += row.cache_read_tokens or 0
        self.cache_write_tokens += row.cache_write_tokens or 0
        self.output_tokens += row.output_tokens
        self.ceiling_tokens += row.ceiling_tokens
        self.partial += int(row.partial)
        self.lost_tokens += row.lost_tokens
        if row.boundary == "intra":
            self.intra_calls += 1
            self.intra_input_tokens += row.input_tokens or 0
            self.intra_read_tokens += row.cache_read_tokens or 0
        elif row.boundary == "cross":
            self.cross_calls += 1
            self.cross_input_tokens += row.input_tokens or 0
            self.cross_read_tokens += row.cache_read_tokens or 0

    def _add_cost(self, row: CallRow, priced: bool) -> None:
        """Add one call's costs: a known cost is summed (also a lower bound); an unknown one
        is counted in :attr:`cost_unknown_calls`, never summed as 0."""
        if not priced:  # summarize(price=False): no cost is known
            self.cost_usd = self.cost_uncached_usd = self.cost_at_ceiling_usd = None
            self.lost_usd = None
            return
        self.cost_unknown_calls += int(not row.cost_complete)
        if row.cost_usd is None:
            if not row.cost_complete and not self.priced_calls:  # nothing known yet
                self.cost_usd = self.cost_uncached_usd = self.cost_at_ceiling_usd = None
                self.lost_usd = None
            return
        if not self.priced_calls:  # the first known cost: unknown ones before it are counted
            self.cost_usd = self.cost_uncached_usd = self.cost_at_ceiling_usd = 0.0
            self.lost_usd = 0.0
        self.priced_calls += 1
        self.cost_usd = _add(self.cost_usd, row.cost_usd)
        self.cost_uncached_usd = _add(self.cost_uncached_usd, row.cost_uncached_usd)
        self.cost_at_ceiling_usd = _add(self.cost_at_ceiling_usd, row.cost_at_ceiling_usd)
        self.lost_usd = _add(self.lost_usd, row.lost_usd)

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
        """:meth:`to_json` plus output and uncached tokens, exclusions (``unanalysed``,
        ``unknown_usage``, ``unknown_reads``, ``suspect``, ``inconsistent``, ``excluded``),
        ceiling tokens, share of the ceiling, partial calls, lost tokens, costs (USD, rounded
        to 6 digits; ``cost_complete``: false when ``cost_usd`` is a lower bound, with
        ``cost_unknown_calls`` calls unknown or partly known), ``turn_boundary``: hit rates
        (and calls) inside user turns vs first after a user message, and
        ``server_diagnosis``: the provider's own miss reasons against our verdicts (calls per
        relation, ``agreement`` where both speak, ``provider_side_unexplained``)."""
        return {
            **self.to_json(),
            "output_tokens": self.output_tokens,
            "uncached_tokens": self.uncached_tokens,
            "unanalysed": self.unanalysed,
            "unknown_usage": self.unknown_usage,
            "unknown_reads": self.unknown_reads,
            "suspect": self.suspect,
            "inconsistent": self.inconsistent,
            "excluded": self.excluded,
            "ceiling_tokens": self.ceiling_tokens,
            "of_ceiling": _round(self.of_ceiling),
            "partial": self.partial,
            "lost_tokens": self.lost_tokens,
            "cost_usd": _round(self.cost_usd),
            "cost_complete": self.cost_complete,
            "cost_unknown_calls": self.cost_unknown_calls,
            "cost_uncached_usd": _round(self.cost_uncached_usd),
            "cost_at_ceiling_usd": _round(self.cost_at_ceiling_usd),
            "lost_usd": _round(self.lost_usd),
            "turn_boundary": {
                "intra_turn_hit_rate": _round(self.intra_turn_hit_rate),
                "cross_turn_hit_rate": _round(self.cross_turn_hit_rate),
                "intra_turn_calls": self.intra_calls,
                "cross_turn_calls": self.cross_calls,
            },
            "server_diagnosis": {
                **{name: self.server_diagnosis.get(name, 0) for name in AGREEMENTS},
                "agreement": _round(self.server_agreement),
                "provider_side_unexplained": self.provider_side_unexplained,
            },
        }


@dataclass
class ScenarioReport:
    """One scenario: totals, per-session totals, and the models/providers seen."""

    name: str
    totals: Totals = field(default_factory=Totals)
    sessions: dict[str, Totals] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)
    providers: list[str] = field(default_factory=list)
    read_series: list[float] = field(default_factory=list)  # per included call: read / input


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

    def group_by(self, by: str = "scenario") -> dict[str, Totals]:
        """Totals per group of calls (:data:`GROUP_BY`), groups in order of first call; the
        same numbers as :attr:`scenarios` for ``"scenario"``.

        Raises:
            ValueError: ``by`` is not one of :data:`GROUP_BY`.
        """
        out: dict[str, Totals] = {}
        for row in self.calls:
            out.setdefault(_group_key(row, by), Totals()).add(row, row.agrees, self.priced)
        return out

    def causes(self) -> list[CauseRow]:
        """Causes ranked by lost tokens, then lost USD (:func:`~._causes.rank_causes`)."""
        return rank_causes(self.calls)

    def actions(self) -> list[ActionRow]:
        """Breaks grouped by the user action behind them, by lost USD
        (:func:`~._causes.rank_actions`)."""
        return rank_actions(self.calls)

    def cliffs(self) -> list[Cliff]:
        """Calls whose read share dropped sharply (:func:`~._calls.find_cliffs`)."""
        return find_cliffs(self.calls)

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
        partial = [row for row in self.calls if not row.cost_complete]
        if partial:
            named = "; ".join(f"{row.id}: {row.cost_note or 'unknown'}"
                              for row in partial[:limit])
            more = f"; and {len(partial) - limit:,} more" if len(partial) > limit else ""
            lines.append(f"Costs marked ≥ are lower bounds: {len(partial):,} call"
                         f"{'s' if len(partial) != 1 else ''} with a cost unknown or only "
                         f"partly known: {named}{more}.")
        suspect = [row.id for row in self.calls if row.excluded == "suspect"]
        if suspect:
            more = f", and {len(suspect) - limit:,} more" if len(suspect) > limit else ""
            lines.append(f"{len(suspect):,} call{'s' if len(suspect) != 1 else ''} priced as "
                         "reported although the input total is far from our estimate of the "
                         "request (usage_suspect: cached tokens counted twice? see "
                         f"usage_dialect); not in hit rates: {', '.join(suspect[:limit])}{more}.")
        return lines

    def to_json(self, *, sessions: bool = True, by: str = "scenario") -> dict[str, Any]:
        """``{"records", "pricing", "scenarios": {name: {...full totals..., "models",
        "sessions": {id: {...}}}}, "overall", "by", "groups", "calls", "causes", "actions",
        "cliffs", "exclusions", "cost_notes", "reads_beyond_ledger", "stabilized"}`` (``groups``:
        :meth:`group_by` as a list, each entry with its ``group`` key; by scenario also with
        ``scenario``, ``models`` and ``providers``)."""
        out: dict[str, Any] = {}
        groups: list[dict[str, Any]] = []
        if by != "scenario":
            groups = [{"group": key, **t.to_full_json()} for key, t in self.group_by(by).items()]
        for name, scenario in self.scenarios.items():
            entry = {**scenario.totals.to_full_json(), "models": list(scenario.models),
                     "providers": list(scenario.providers)}
            if by == "scenario":
                groups.append({"group": name, "scenario": name, **entry})
            if sessions:
                entry["sessions"] = {sid: t.to_full_json() for sid, t in scenario.sessions.items()}
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
                   if self.what_if is not None else {})}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


# --------------------------------------------------------------------------- summarizing


def _policy(provider: str | None, model: str | None,
            policies: PolicyTable | None) -> CacheRules | None:
    """The call's cache policy, ``None`` for unknown providers (minimum 0, granularity 1,
    no TTL)."""
    try:
        return cache_rules(provider or "", model or "", policies)
    except LookupError:
        return None


def _ttl_s(record: UsageRecord, policy: CacheRules | None) -> int | None:
    """The TTL (seconds) of ``record``'s cache entries: ``verdict_detail["ttl_s"]`` (what the
    request chose), else the policy's default; ``None``: no TTL."""
    value = record.verdict_detail.get("ttl_s")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None if policy is None else policy.default_ttl_s


@dataclass(frozen=True, slots=True)
class _Seen:
    """What the ceiling needs of an earlier call: its session key, send time, size."""

    key: tuple[str, ...]
    ts: datetime
    total: int


class Ceilings:
    """The append-only ceiling of each call in ledger order (module docstring, ``ceiling``):
    the best of its session's previous request and the prefix it shares with another session's
    call (its ``predecessor_id``), either only within the TTL, and never less than what the
    call read (a read proves the prefix was there; :attr:`beyond_ledger` counts the calls whose
    read no earlier call of the selection explains)."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, ...], _Seen] = {}
        self._by_id: dict[str, _Seen] = {}
        self.beyond_ledger = 0

    @staticmethod
    def key(record: UsageRecord, scenario: str, session: str) -> tuple[str, ...]:
        """The cache a call can read from: one provider's, for one model and wire format
        (Anthropic and OpenAI caches are per model; one provider never reads another's), of
        one session of one scenario. Merged ledgers that reuse session ids across providers
        keep their ceilings apart."""
        return (record.provider or "", record.model or "", record.wire_format or "",
                scenario, session)

    def total_of(self, record_id: str | None) -> int | None:
        """The input total of an earlier call of the selection (``None``: not seen)."""
        seen = self._by_id.get(record_id or "")
        return None if seen is None else seen.total

    def next(self, record: UsageRecord, key: tuple[str, ...],
             policy: CacheRules | None, explicit: int = 0) -> int:
        """The ceiling (tokens) of ``record`` (of cache key ``key``, :meth:`key`), then
        remember it as an earlier call. A call whose size is unknown or implausible has
        ceiling 0 and bounds nothing later. ``explicit``: the tokens of a Gemini explicit
        cache the call names and the selection saw created (it can read them whole)."""
        total = record.input_tokens_total
        if total is None or record.usage_inconsistent:
            return 0
        ttl = _ttl_s(record, policy)
        best = 0
        before = self._last.get(key)
        if before is not None and _alive(before, record.ts_utc, ttl):
            best = min(before.total, total)
        other = self._by_id.get(record.predecessor_id or "")
        if (other is not None and other.key != key and other.key[:3] == key[:3]
                and _alive(other, record.ts_utc, ttl)):
            shared = record.verdict_detail.get("lcp_tokens_scaled", record.lcp_tokens)
            if isinstance(shared, int) and not isinstance(shared, bool):
                best = max(best, min(shared, other.total, total))
        # The request size is known (even when its reads are not): it bounds later calls.
        seen = _Seen(key, record.ts_utc, total)
        self._last[key] = self._by_id[record.record_id] = seen
        granularity = policy.granularity_tokens if policy is not None else 1
        minimum = policy.min_cacheable_tokens if policy is not None else 0
        best = best // granularity * granularity
        best = best if best >= minimum else 0
        best = max(best, min(explicit, total))  # an explicit cache is read whole
        read = record.cache_read_tokens
        if read is not None and read > best:  # read from a call the selection does not hold
            self.beyond_ledger += 1          # (or a prefix the recorder did not compare)
            best = min(read, total)
        return best


def _alive(earlier: _Seen, now: datetime, ttl_s: int | None) -> bool:
    return ttl_s is None or (now - earlier.ts).total_seconds() <= ttl_s


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
        ledger order.
    """
    scenarios: dict[str, ScenarioReport] = {}
    ceilings = Ceilings()
    pricing = Pricing(source=genai_prices_version() or "genai-prices not installed")
    notes: dict[str, None] = {}
    rows: list[CallRow] = []
    overall = Totals()
    bodies: dict[str, UsageRecord] = {}  # records that kept their request body, by id
    stabilized = StabilizeSavings()
    kept: list[UsageRecord] = []
    pings: list[UsageRecord] = []
    agents: dict[tuple[str, str], str] = {}  # (session, lineage) -> its branch's label
    caches = ExplicitCaches()
    for record in records:
        if caches.add(record):  # a cachedContents call: its own line (storage), no prompt
            continue
        if what_if:
            kept.append(record)
        if record.content is not None:
            bodies[record.record_id] = record
        name = record.scenario or NO_SCENARIO
        sid = record.session_id or NO_SESSION
        if is_keepalive(record):  # its own line: not a call served, but it keeps the cache
            pings.append(record)
            ceilings.next(record, Ceilings.key(record, name, sid),
                          _policy(record.provider, record.model, policies))
            continue
        scenario = scenarios.get(name)
        if scenario is None:
            scenario = scenarios[name] = ScenarioReport(name)
        if record.model and record.model not in scenario.models:
            scenario.models.append(record.model)
        if record.provider and record.provider not in scenario.providers:
            scenario.providers.append(record.provider)
        policy = _policy(record.provider, record.model, policies)
        granularity = policy.granularity_tokens if policy is not None else 1
        compared = ceilings.total_of(record.predecessor_id)
        branch = (sid, record.lineage or "")  # a branch's later calls keep its label
        agent = agent_label(record) or agents.get(branch, MAIN_AGENT)
        if agent != MAIN_AGENT:
            agents[branch] = agent
        # a subagent's ceiling is its own conversation's, not its parent's previous request
        ceiling = ceilings.next(record, Ceilings.key(
            record, name, sid if agent == MAIN_AGENT else f"{sid}\x00{agent}"), policy,
            caches.created_tokens(record))
        snippets = None
        if (record.verdict == "client_mutation" and record.content is not None
                and record.predecessor_id is not None):
            snippets = mutation_snippets(record, bodies.get(record.predecessor_id))
        agrees = None
        predicted, reported = record.predicted_cache_read_tokens, record.cache_read_tokens
        if predicted is not None and reported is not None and exclusion(record) is None:
            agrees = abs(predicted - reported) < granularity
        row = call_row(record, scenario=name, session=sid, ceiling=ceiling,
                       granularity=granularity, pricing=pricing if price else None, notes=notes,
                       snippets=snippets, agrees=agrees, compared_input_tokens=compared,
                       agent=agent)
        rows.append(row)
        stabilized.add(record, row, pricing if price else None, notes)
        if row.read_share is not None:
            scenario.read_series.append(row.read_share)
        for totals in (overall, scenario.totals, scenario.sessions.setdefault(sid, Totals())):
            totals.add(row, agrees, price)
    pricing.notes = list(notes)
    replays = what_if_by_provider(kept, table=policies) if what_if and price else None
    return Summary(scenarios, len(rows) + len(pings) + caches.rows, pricing, rows, overall, price,
                   stabilized, reads_beyond_ledger=ceilings.beyond_ledger, what_if=replays,
                   keepalive=keepalive_totals(pings, price=price),
                   explicit_caches=caches.totals(price=price))


public(Summary, summarize)
