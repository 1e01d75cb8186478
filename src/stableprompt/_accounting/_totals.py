"""Sums over groups of calls: :class:`Totals` (per scenario, session, any group of
:data:`GROUP_BY`) and :class:`ScenarioReport`; what each number means is in ``_summary``'s
module docstring. Moved out of ``_summary`` (issue 30) so the one pass that fills them
(``_builder``) sits below the :class:`~._summary.Summary` that holds them; ``_summary``
re-exports every name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._recording._server_reasons import AGREEMENTS
from ._calls import CallRow

__all__ = [
    "GROUP_BY",
    "VERDICTS",
    "CallSums",
    "ScenarioReport",
    "Totals",
    "add_call",
    "group_key",
]


VERDICTS = ("hit", "cold", "client_mutation", "below_minimum", "no_breakpoint", "ttl_expired",
            "provider_miss", "unknown")
"""The attribution verdicts, in display order."""


GROUP_BY = ("scenario", "session", "model", "wire", "day", "agent")
"""What :meth:`Summary.group_by` can group calls by (``session``: scenario and session id
together, ``"scenario/session"``; ``wire``: the record's wire format; ``day``: UTC date;
``agent``: ``main`` or ``subagent <id>``, :func:`~._calls.agent_label`)."""


def group_key(row: CallRow, by: str) -> str:
    """The group of ``row`` for ``by`` (:data:`GROUP_BY`).

    Raises:
        ValueError: ``by`` is not one of :data:`GROUP_BY`.
    """
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


class CallSums:
    """What the report's totals (:class:`Totals`) and the rollups' (``_rollups``) both derive
    from their exclusion counts and token sums: the hit rate and the excluded calls (each
    subclass declares the fields, as dataclass fields)."""

    __slots__ = ()

    unanalysed: int
    unknown_usage: int
    unknown_reads: int
    suspect: int
    inconsistent: int
    input_tokens: int
    cache_read_tokens: int

    @property
    def hit_rate(self) -> float | None:
        """``cache_read_tokens / input_tokens``, ``None`` when no input is known."""
        return self.cache_read_tokens / self.input_tokens if self.input_tokens else None

    @property
    def excluded(self) -> int:
        """Calls left out of every token sum and rate (unanalysed, unknown usage or reads,
        suspect, inconsistent)."""
        return (self.unanalysed + self.unknown_usage + self.unknown_reads + self.suspect
                + self.inconsistent)


@dataclass(slots=True)
class Totals(CallSums):
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
        agreement_matches: Of those, calls where they agree (``_calls.agreement_of``: within
            the granularity, or within the allowance of an estimated span).
        agreement_estimated: Of ``agreement_calls``, those whose prediction rests on an
            estimated span (the first read of an entry ending at an earlier breakpoint, whose
            size no call had reported).
        estimate_max_error_tokens: Their largest ``|predicted - reported|`` (tokens).
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
    agreement_estimated: int = 0
    estimate_max_error_tokens: int = 0
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
    def cost_complete(self) -> bool:
        """:attr:`cost_usd` is the whole cost of the group's calls (not a lower bound)."""
        return self.cost_unknown_calls == 0

    @property
    def uncached_tokens(self) -> int:
        """Input tokens neither read from nor written to the cache (included calls)."""
        return self.input_tokens - self.cache_read_tokens - self.cache_write_tokens

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
        add_call((self,), row, agrees, priced)

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
        (and calls) inside user turns vs first after a user message,
        ``agreement_estimated`` (of the calls in ``agreement``, those whose prediction rests on
        an estimated span, ``_calls.agreement_of``) with ``estimate_max_error_tokens`` (their
        largest ``|predicted - reported|``), and
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
            "agreement_estimated": self.agreement_estimated,
            "estimate_max_error_tokens": self.estimate_max_error_tokens,
            "server_diagnosis": {
                **{name: self.server_diagnosis.get(name, 0) for name in AGREEMENTS},
                "agreement": _round(self.server_agreement),
                "provider_side_unexplained": self.provider_side_unexplained,
            },
        }


_EXCLUDED_FIELD = {"unanalysed": "unanalysed", "no-usage": "unknown_usage",
                   "unknown-reads": "unknown_reads", "suspect": "suspect",
                   "inconsistent": "inconsistent"}
"""``CallRow.excluded`` -> the :class:`Totals` counter of that exclusion."""


def add_call(targets: tuple[Totals, ...], row: CallRow, agrees: bool | None,
             priced: bool) -> None:
    """:meth:`Totals.add` of one call to each of ``targets`` (the call's overall, scenario,
    session, ... totals): what the row says is read once, each target gets the same sums in
    the same order as one :meth:`Totals.add` each (so float sums are the same to the bit)."""
    verdict = row.verdict
    server = row.server_agreement
    unexplained = row.provider_side_unexplained
    excluded = row.excluded
    counter = None if excluded is None else _EXCLUDED_FIELD[excluded]
    error = row.estimate_error_tokens if agrees is not None else None
    complete, cost = row.cost_complete, row.cost_usd
    uncached, at_ceiling, lost_usd = row.cost_uncached_usd, row.cost_at_ceiling_usd, row.lost_usd
    total = row.input_tokens or 0
    read = row.cache_read_tokens or 0
    write = row.cache_write_tokens or 0
    output, ceiling, lost = row.output_tokens, row.ceiling_tokens, row.lost_tokens
    partial, boundary = row.partial, row.boundary
    for t in targets:
        t.calls += 1
        verdicts = t.verdicts
        verdicts[verdict if verdict in verdicts else "unknown"] += 1
        if agrees is not None:
            t.agreement_calls += 1
            if agrees:
                t.agreement_matches += 1
            if error is not None:
                t.agreement_estimated += 1
                t.estimate_max_error_tokens = max(t.estimate_max_error_tokens, error)
        # costs: a known cost is summed (also a lower bound); an unknown one is counted in
        # cost_unknown_calls, never summed as 0
        if not priced:  # summarize(price=False): no cost is known
            t.cost_usd = t.cost_uncached_usd = t.cost_at_ceiling_usd = t.lost_usd = None
        else:
            if not complete:
                t.cost_unknown_calls += 1
            if cost is None:
                if not complete and not t.priced_calls:  # nothing known yet
                    t.cost_usd = t.cost_uncached_usd = t.cost_at_ceiling_usd = None
                    t.lost_usd = None
            else:
                if not t.priced_calls:  # the first known cost: unknown ones before it counted
                    t.cost_usd = t.cost_uncached_usd = t.cost_at_ceiling_usd = 0.0
                    t.lost_usd = 0.0
                t.priced_calls += 1
                # each sum None once a part is unknown (_add, inlined: 4 calls per target)
                if (usd := t.cost_usd) is not None:
                    t.cost_usd = usd + cost
                if (usd := t.cost_uncached_usd) is not None:
                    t.cost_uncached_usd = None if uncached is None else usd + uncached
                if (usd := t.cost_at_ceiling_usd) is not None:
                    t.cost_at_ceiling_usd = None if at_ceiling is None else usd + at_ceiling
                if (usd := t.lost_usd) is not None:
                    t.lost_usd = None if lost_usd is None else usd + lost_usd
        if server is not None:
            t.server_diagnosis[server] = t.server_diagnosis.get(server, 0) + 1
        if unexplained:
            t.provider_side_unexplained += 1
        if counter is not None:
            setattr(t, counter, getattr(t, counter) + 1)
            continue
        # an included call: its tokens (read once above the loop, the same sums)
        t.input_tokens += total
        t.cache_read_tokens += read
        t.cache_write_tokens += write
        t.output_tokens += output
        t.ceiling_tokens += ceiling
        if partial:
            t.partial += 1
        t.lost_tokens += lost
        if boundary == "intra":
            t.intra_calls += 1
            t.intra_input_tokens += total
            t.intra_read_tokens += read
        elif boundary == "cross":
            t.cross_calls += 1
            t.cross_input_tokens += total
            t.cross_read_tokens += read


@dataclass
class ScenarioReport:
    """One scenario: totals, per-session totals, and the models/providers seen.

    ``sessions``: session id -> totals, in order of first call; a read-only mapping (a
    :class:`~._spill.SpillView` when made by a summary: a streaming report's may read
    sessions back from its temporary file as they are listed, each a copy)."""

    name: str
    totals: Totals = field(default_factory=Totals)
    sessions: Mapping[str, Totals] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)
    providers: list[str] = field(default_factory=list)
    read_series: list[float] = field(default_factory=list)
    """Per included call: read / input, in order (``summarize``; empty in a streaming
    summary, whose chart points are ``Summary.read_points()``)."""


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)

