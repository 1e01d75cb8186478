"""What-if: what each caching policy would have cost on a ledger's own traffic.

:func:`what_if` replays each conversation's calls (their send times, input tokens, what they
read and wrote) under alternative :class:`~stableprompt.CachePolicy` values and prices them
with each call's own model and date (:func:`~stableprompt._economics._prices.unit_prices`),
following the provider's documented rules (:class:`~stableprompt.CacheRules`: TTLs, write
multipliers, refresh on read). It reports per policy and per request kind the cost, hit rate,
``ttl_expired`` count and keep-alive requests; the cheapest policy; the saving against what
was paid; and the hindsight bound: the best TTL choice per gap, known only after the fact,
which no policy can beat.

Replay model, per chain (the calls of one cache lineage of one session of one scenario to
one provider, model and wire format, in time order: a subagent sharing its parent's session
id is a chain of its own):

- ``P`` (reusable): the prefix the call could read were the cache warm: what it read, or for
  a ``ttl_expired`` call, its prediction plus ``expired_tokens`` (the recorder's evidence),
  or for a ``hit`` flagged ``read_after_ttl`` (a read within the tolerance of the whole
  prefix after the TTL, e.g. only a longer-lived head read when the rest was a few per cent),
  its prediction, which ignores the TTL.
- ``C`` (extent): what is cached after the call: reads plus writes (breakpoint caches; an
  automatic cache with uncharged writes, ``write_multipliers`` empty, writes nothing billed).
- ``H`` (head): ``verdict_detail["head_tokens"]``, the tokens before the first message, which
  a head breakpoint caches: the recorder's estimate, or the reported size where a call of the
  same chain and head (``lineage``) shows it (a read of the head entry alone, or the head's
  1-hour write). Rows recorded before it existed: per-place policies are not replayed for
  them, and the result says so.
- A gap ``g`` since the chain's last request (or keep-alive) leaves the history entry alive
  when ``g <= history TTL`` and the head entry alive when ``g <= head TTL`` (a read refreshes
  the TTL: ``ttl_refreshed_on_read``). Replayed reads: ``P`` with the history alive, else
  ``min(H, P)`` with the head alive, else 0. Replayed writes: ``C`` minus the reads, the head
  part at the head TTL's price and the rest at the history's. The rest is uncached. The first
  call of a chain reads what it read (a cache warmed by another session), writes what it wrote.
- Keep-alive (:class:`~stableprompt.KeepAlive`): the pings ``KeepAliveScheduler`` sends: one
  every ``interval_s`` while the next request has not come, under the cap, while its
  expected saving exceeds its price (``_economics._keepalive_value``, on the chain's gaps so
  far with the policy's prior; the default candidates carry the replayed traffic's gaps),
  after a chain's last request too unless the harness closes its conversations
  (``closes_conversations``); each ping reads the chain's extent and produces its output
  tokens (``KEEPALIVE_OUTPUT_TOKENS``); the gap then counts from the last of them. The
  hindsight bound instead knows each gap: its keep-alive option pings exactly every
  ``interval_s`` of it, never after the last request.
- Gemini explicit head cache: one cache per head (lineage), shared by every session using it;
  every call reads at least ``H`` (at the explicit read price); the cache is created (``H``
  billed as input, UNVERIFIED) at its first use and again after it expired, its TTL (the
  rule's default) extended at each use, its storage billed per token-hour
  (``ExplicitCacheRule``) for the time it lives; implicit reads beyond it as recorded. A
  model without a storage price replays storage at $0 and the result says so.

Linear prices per (provider, model, day) (long-context tiers are not modelled: the recorded
cost the replay is compared with is priced the same way, and :attr:`WhatIf.recorded_usd` is
that). Calls without known usage, or whose model has no price, are counted and named in
:attr:`WhatIf.notes`, never priced at 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from .._economics._cache_policy import (
    REQUEST_KINDS,
    CachePolicy,
    KeepAlive,
    TtlChoice,
    gap_quantiles,
    ttl_seconds,
)
from .._economics._keepalive_value import GapModel, ping_value
from .._economics._prices import UnitPrices, unit_prices
from .._economics._request_kind import fresh_conversation
from .._exceptions import InputError, PolicyError
from .._ledger._usage_record import UNANALYSED, UsageRecord
from .._policy import (
    KEEPALIVE_OUTPUT_TOKENS,
    TTL_LABELS_S,
    CacheRules,
    PolicyTable,
    cache_rules,
    explicit_cache_rule,
    keepalive_unsupported,
    openai_explicit_rule,
)
from .._public import public
from ._keepalive import is_keepalive

__all__ = ["BreakEven", "PolicyOutcome", "ReplayCall", "WhatIf", "candidate_policies", "replay",
           "what_if", "what_if_by_provider"]

_LABEL_OF_S = {seconds: label for label, seconds in TTL_LABELS_S.items()}


@dataclass(frozen=True, slots=True)
class ReplayCall:
    """One call as the replay sees it (module docstring): tokens, time, chain, kind.

    Attributes:
        ts: Send time (UTC).
        chain: The cache key (provider, model, wire format, scenario, session, lineage).
        kind: Request kind (``"main"``, ``"subagent"``, ``"one-shot"``).
        total: Input tokens (inclusive).
        read: Reported cache reads (tokens).
        write: Reported cache writes (tokens, all TTLs).
        write_1h: Of those, written at 1 hour (tokens).
        output: Output tokens (0 when unknown).
        reusable: ``P`` (tokens).
        head: ``H`` (tokens), ``None`` when the row does not say.
        expired: The recorder's verdict was ``ttl_expired``.
        ttl_s: The TTL the recorded request used (seconds), ``None``: none.
        prices: Unit prices of the call's model on its day.
        rules: The provider's cache rules for the model.
        keepalive: A recorded keep-alive ping (``_accounting._keepalive.is_keepalive``): a
            touch of its chain in the replay of the policy used, left out of every other
            (each candidate sends its own).
    """

    ts: datetime
    chain: tuple[str, ...]
    kind: str
    total: int
    read: int
    write: int
    write_1h: int
    output: int
    reusable: int
    head: int | None
    expired: bool
    ttl_s: int | None
    prices: UnitPrices
    rules: CacheRules
    keepalive: bool = False

    @property
    def extent(self) -> int:
        """``C``: tokens cached after the call (reads plus writes)."""
        return self.read + self.write

    def recorded_usd(self) -> float:
        """The call's input and output at its reported split (linear unit prices)."""
        return self.prices.usd(self.total, self.read, self.write,
                               min(self.write_1h, self.write), self.output)


@dataclass
class PolicyOutcome:
    """One policy replayed over the selection.

    Attributes:
        policy: The policy.
        usd: Replayed cost (USD; input, output and keep-alive requests).
        input_tokens: Input tokens of the real calls.
        read_tokens: Replayed cache reads (tokens).
        ttl_expired: Calls whose reusable prefix had expired under this policy.
        keepalive_pings: Keep-alive requests sent.
        keepalive_usd: Their cost (USD, inside ``usd``).
        storage_usd: Explicit-cache storage (USD, inside ``usd``).
        by_kind: ``usd``, ``hit_rate``, ``ttl_expired`` and ``calls`` per request kind.
    """

    policy: CachePolicy
    usd: float = 0.0
    input_tokens: int = 0
    read_tokens: int = 0
    ttl_expired: int = 0
    keepalive_pings: int = 0
    keepalive_usd: float = 0.0
    storage_usd: float = 0.0
    by_kind: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def hit_rate(self) -> float | None:
        """Replayed reads over input tokens; ``None`` without input."""
        return self.read_tokens / self.input_tokens if self.input_tokens else None

    def add(self, kind: str, usd: float, total: int, read: int, expired: bool) -> None:
        self.usd += usd
        self.input_tokens += total
        self.read_tokens += read
        self.ttl_expired += expired
        entry = self.by_kind.setdefault(kind, {"usd": 0.0, "input_tokens": 0, "read_tokens": 0,
                                               "ttl_expired": 0, "calls": 0})
        entry["usd"] += usd
        entry["input_tokens"] += total
        entry["read_tokens"] += read
        entry["ttl_expired"] += expired
        entry["calls"] += 1

    def kind_usd(self, kind: str) -> float:
        return self.by_kind.get(kind, {}).get("usd", 0.0)

    def to_json(self) -> dict[str, Any]:
        kinds = {kind: {"usd": round(v["usd"], 6), "calls": int(v["calls"]),
                        "ttl_expired": int(v["ttl_expired"]),
                        "hit_rate": (round(v["read_tokens"] / v["input_tokens"], 6)
                                     if v["input_tokens"] else None)}
                 for kind, v in self.by_kind.items()}
        return {"policy": self.policy.label(),
                "settings": self.policy.model_dump(mode="json", exclude_defaults=True),
                "usd": round(self.usd, 6), "hit_rate": _r(self.hit_rate),
                "ttl_expired": self.ttl_expired, "keepalive_pings": self.keepalive_pings,
                "keepalive_usd": round(self.keepalive_usd, 6),
                "storage_usd": round(self.storage_usd, 6), "by_kind": kinds}


@dataclass(frozen=True, slots=True)
class BreakEven:
    """When a longer TTL pays, against the default, on the replayed traffic.

    Per call, a longer TTL costs its extra write price on the tokens the call writes
    (``n``: their mean) and saves, on a gap the longer TTL survives and the default does not,
    rewriting the reusable prefix (``P``: its mean) instead of reading it. It pays when the
    share of such gaps is at least ``n * (write_long - write_default) / (P * (write_default -
    read))`` (prices of the busiest model).

    Attributes:
        ttl: The longer TTL label.
        default: The default TTL label.
        share_needed: That break-even share of gaps (can exceed 1: never pays).
        share_observed: The share of gaps between the two TTLs in the traffic.
    """

    ttl: str
    default: str
    share_needed: float
    share_observed: float

    def text(self) -> str:
        """``"1h pays when >= 12.0% of gaps fall between 5m and 1h (observed 40.0%)"``;
        ``"... never pays here ..."`` when no share of gaps would do (nothing to reuse)."""
        if not math.isfinite(self.share_needed) or self.share_needed > 1:
            return (f"{self.ttl} never pays here: even with every gap between {self.default} "
                    f"and {self.ttl} its extra write price exceeds the rewrites it saves "
                    f"(observed {self.share_observed:.1%} of gaps there)")
        return (f"{self.ttl} pays when >= {self.share_needed:.1%} of gaps fall between "
                f"{self.default} and {self.ttl} (observed {self.share_observed:.1%})")


@dataclass
class WhatIf:
    """The what-if of one provider family's calls (module docstring).

    Attributes:
        provider: Provider family replayed.
        calls: Calls replayed (recorded keep-alive pings not counted).
        recorded_usd: What they cost as reported, recorded keep-alive pings included (USD,
            linear unit prices).
        as_used: The policy the calls used, replayed (reproduces ``recorded_usd``; the
            difference is what the model does not capture: provider misses, cross-session
            reads).
        outcomes: Every candidate, cheapest first.
        hindsight_usd: The best TTL (and keep-alive) choice per gap, after the fact (USD):
            a lower bound for every candidate.
        per_place: Per-place (head/history) policies were replayed (rows carry
            ``head_tokens``).
        notes: What was left out and why (unknown usage, unpriced models), one line each.
        break_even: Per longer TTL label the provider offers, when it pays
            (:class:`BreakEven`).
        gaps_s: The idle gaps (seconds) between consecutive calls of each chain (the
            default candidates' keep-alives carry their quantiles as their scheduler's prior,
            ``KeepAlive.prior_gaps_s``).
    """

    provider: str
    calls: int
    recorded_usd: float
    as_used: PolicyOutcome
    outcomes: list[PolicyOutcome]
    hindsight_usd: float
    per_place: bool
    notes: list[str]
    break_even: dict[str, BreakEven] = field(default_factory=dict)
    gaps_s: list[float] = field(default_factory=list)

    @property
    def cheapest(self) -> PolicyOutcome:
        """The candidate with the lowest replayed cost."""
        return self.outcomes[0]

    @property
    def saving_usd(self) -> float:
        """``recorded_usd`` minus the cheapest candidate's cost (negative: it costs more)."""
        return self.recorded_usd - self.cheapest.usd

    def recommended(self) -> CachePolicy:
        """The cheapest policy per request kind, combined into one :class:`CachePolicy`:
        keep-alive and the explicit cache are one setting for all kinds, so for each such
        setting the cheapest TTLs per kind are summed and the cheapest setting wins (ties:
        the simpler one, without keep-alive); kinds whose TTLs differ from the main agent's
        go in ``by_kind``. Named with its replayed cost against the provider default."""
        kinds = sorted({k for o in self.outcomes for k in o.by_kind},
                       key=REQUEST_KINDS.index)
        pools: dict[tuple[KeepAlive | None, bool], list[PolicyOutcome]] = {}
        for outcome in self.outcomes:
            key = (outcome.policy.keep_alive, outcome.policy.explicit_cache)
            pools.setdefault(key, []).append(outcome)

        def total(pool: list[PolicyOutcome]) -> float:
            return sum(_cheapest_for(pool, k).kind_usd(k) for k in kinds)

        setting = min(pools, key=lambda key: (round(total(pools[key]), 9), key[0] is not None,
                                              key[1]))
        pool = pools[setting]
        best = {kind: _cheapest_for(pool, kind) for kind in kinds}
        main = best.get("main", pool[0]).policy
        by_kind = {kind: outcome.policy.for_kind(kind) for kind, outcome in best.items()
                   if outcome.policy.for_kind(kind) != main.for_kind(kind)}
        default = self.outcomes_by_label().get("default")
        label = main.label() if not by_kind else "per kind"
        name = f"from ledger: {label}"
        if default is not None:
            name += (f" (replayed ${total(pool):.4f} vs ${default.usd:.4f} at the default "
                     "TTL")
            longer = main.history or main.head
            if longer is not None and longer in self.break_even:
                name += f"; {self.break_even[longer].text()}"
            name += ")"
        keep = setting[0]
        return CachePolicy(name=name, head=main.head, history=main.history, by_kind=by_kind,
                           keep_alive=keep, explicit_cache=setting[1])

    def outcomes_by_label(self) -> dict[str, PolicyOutcome]:
        return {o.policy.name or o.policy.label(): o for o in self.outcomes}

    def to_json(self) -> dict[str, Any]:
        """``{"provider", "calls", "recorded_usd", "as_used", "policies", "cheapest",
        "saving_usd", "hindsight_usd", "per_place", "notes", "recommended", "break_even"}``
        (``recommended``: :meth:`recommended` as a ``--cache-policy`` file's JSON)."""
        return {"provider": self.provider, "calls": self.calls,
                "recorded_usd": round(self.recorded_usd, 6),
                "as_used": self.as_used.to_json(),
                "policies": [o.to_json() for o in self.outcomes],
                "cheapest": self.cheapest.policy.label(),
                "saving_usd": round(self.saving_usd, 6),
                "hindsight_usd": round(self.hindsight_usd, 6),
                "per_place": self.per_place, "notes": list(self.notes),
                "recommended": self.recommended().model_dump(mode="json",
                                                             exclude_defaults=True),
                "break_even": {label: {"share_needed": round(b.share_needed, 6),
                                       "share_observed": round(b.share_observed, 6)}
                               for label, b in self.break_even.items()}}


def _cheapest_for(outcomes: list[PolicyOutcome], kind: str) -> PolicyOutcome:
    """The outcome cheapest for ``kind``; ties go to the simpler policy (no keep-alive, then
    fewer TTLs set: the provider's default before a longer head)."""
    return min(outcomes, key=lambda o: (round(o.kind_usd(kind), 9), o.policy.keep_alive
                                        is not None, o.policy.explicit_cache,
                                        sum(t is not None for t in (o.policy.head,
                                                                    o.policy.history))))


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


# --------------------------------------------------------------------------- extraction


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _kinds(records: list[UsageRecord]) -> dict[tuple[str, str], str]:
    """Request kind per (session, lineage), from the rows alone:

    - a session with one call is ``one-shot``;
    - a session whose first call's predecessor is another session's call on its own head
      (not a ``shared-prefix`` of another head) is a forked ``subagent`` (its lineages too),
      and so is a lineage whose first call the recorder
      named a branch (``verdict_detail["agent"]``, :func:`_recorded_branch`);
    - within a session, the first lineage is ``main``; a later lineage is a ``subagent`` (a
      branch: Claude Code's and Codex's subagents share their parent's session id) when an
      earlier lineage of the session is used again after it starts and its first request is
      a fresh conversation (:func:`_fresh_conversation`: a head that merely drifts, tools
      reordered, keeps the history and its size), ``one-shot`` when it has one call (a title
      or summary request), else ``main`` (the head was replaced or drifts: a system edit, a
      model switch, a reordering).
    """
    session_of = {r.record_id: _session_key(r) for r in records}
    by_session: dict[str, list[UsageRecord]] = {}
    for record in records:
        by_session.setdefault(_session_key(record), []).append(record)
    kinds: dict[tuple[str, str], str] = {}
    for sid, calls in by_session.items():
        parent = session_of.get(calls[0].predecessor_id or "")
        # a session whose first call continues another session's head (a fork); one that
        # only shares part of another head (``shared-prefix``) opens a conversation of its own
        forked = parent is not None and parent != sid and (
            calls[0].verdict_detail.get("predecessor_rule") != "shared-prefix")
        starts: dict[str, int] = {}
        counts: dict[str, int] = {}
        last_use: dict[str, int] = {}
        for index, call in enumerate(calls):
            lineage = call.lineage or ""
            starts.setdefault(lineage, index)
            counts[lineage] = counts.get(lineage, 0) + 1
            last_use[lineage] = index
        first_lineage = calls[0].lineage or ""
        for lineage, start in starts.items():
            if len(calls) == 1:
                kind = "one-shot"
            elif forked or _recorded_branch(calls[start]):
                kind = "subagent"
            elif lineage == first_lineage:
                kind = "main"
            elif (any(starts[other] < start < last_use[other] for other in starts
                      if other != lineage)
                  and _fresh_conversation(calls[start], calls[start - 1])):
                kind = "subagent"
            elif counts[lineage] == 1:
                kind = "one-shot"
            else:
                kind = "main"
            kinds[(sid, lineage)] = kind
    return kinds


def _fresh_conversation(first: UsageRecord, before: UsageRecord) -> bool:
    """``first`` (a new lineage's first call) is a conversation of its own, not the session's
    history under another head (:func:`~stableprompt._economics._request_kind.
    fresh_conversation`, the rule the recorder uses too; sizes as reported, else our
    estimates)."""
    return fresh_conversation(first.input_tokens_total or first.request_tokens,
                              before.input_tokens_total or before.request_tokens)


def _recorded_branch(record: UsageRecord) -> bool:
    """The recorder named the request's agent a branch (``verdict_detail["agent"]``: from
    the harness's headers, or its own :func:`~stableprompt._economics._request_kind.
    is_branch`)."""
    agent = record.verdict_detail.get("agent")
    return isinstance(agent, dict) and agent.get("kind") == "subagent"


def _replay_calls(records: list[UsageRecord], policies: PolicyTable | None,
                  notes: dict[str, None]) -> list[ReplayCall]:
    kinds = _kinds([r for r in records if not is_keepalive(r)])
    calls: list[ReplayCall] = []
    lineages: list[str | None] = []
    skipped: dict[str, int] = {}
    no_output = 0
    for r in records:
        if r.wire_format == UNANALYSED:
            continue
        reason = None
        counts = (r.input_tokens_total, r.cache_read_tokens, r.cache_write_tokens,
                  r.cache_write_1h_tokens, r.output_tokens)
        if r.input_tokens_total is None or r.cache_read_tokens is None:
            reason = "usage or cache reads unknown"
        elif r.usage_inconsistent or any(c is not None and c < 0 for c in counts) or (
                r.cache_read_tokens + (r.cache_write_tokens or 0) > r.input_tokens_total
                or (r.cache_write_1h_tokens or 0) > (r.cache_write_tokens or 0)):
            reason = "usage that does not add up (a negative or impossible part)"
        rules = None
        if reason is None:
            try:
                rules = cache_rules(r.provider or "", r.model or "", policies)
            except LookupError:
                reason = f"provider {r.provider!r} without cache rules"
        prices = None
        if reason is None:
            prices = unit_prices(r.provider or "", r.model or "", r.ts_utc.date())
            if prices is None:
                reason = f"no price for {r.provider}/{r.model} (genai-prices)"
        if reason is not None or rules is None or prices is None:
            skipped[reason or "?"] = skipped.get(reason or "?", 0) + 1
            continue
        no_output += r.output_tokens is None
        total, read = r.input_tokens_total or 0, r.cache_read_tokens or 0
        detail = r.verdict_detail
        reusable = read
        if r.verdict == "ttl_expired":
            reusable = max(read, (r.predicted_cache_read_tokens or 0)
                           + (_int(detail.get("expired_tokens")) or 0))
        elif detail.get("read_after_ttl"):  # a hit past the TTL: its prediction ignores it
            reusable = max(read, r.predicted_cache_read_tokens or 0)
        sid = _session_key(r)
        chain = (r.provider or "", r.model or "", r.wire_format, r.scenario or "", sid,
                 r.lineage or "")
        calls.append(ReplayCall(
            ts=r.ts_utc, chain=chain, kind=kinds.get((sid, r.lineage or ""), "main"),
            total=total, read=read, write=r.cache_write_tokens or 0,
            write_1h=r.cache_write_1h_tokens or 0, output=r.output_tokens or 0,
            reusable=min(reusable, total), head=_int(detail.get("head_tokens")),
            expired=r.verdict == "ttl_expired", ttl_s=_int(detail.get("ttl_s")),
            prices=prices, rules=rules, keepalive=is_keepalive(r)))
        lineages.append(r.lineage)
    for reason, n in skipped.items():
        notes[f"{n:,} {_calls(n)} not replayed: {reason}"] = None
    if no_output:
        notes[f"{no_output:,} {_calls(no_output)} without an output count (a stream cut "
              "before its final usage): output priced at 0, what was paid and every "
              "replay are lower bounds"] = None
    return _reported_heads(calls, lineages)


def _calls(n: int) -> str:
    return "call" if n == 1 else "calls"


def _session_key(record: UsageRecord) -> str:
    """A call's conversation: its scenario and session (a demo reuses session ids across
    scenarios), the call itself without a session id."""
    if record.session_id is None:
        return record.record_id
    return f"{record.scenario or ''}\x00{record.session_id}"


_HEAD_MATCH = 0.05
"""How far (fraction of the estimate) a reported size may be from the estimated head and
still be taken for the head's own (the recorder's token estimate is within ~2%)."""


def _reported_heads(calls: list[ReplayCall], lineages: list[str | None]
                    ) -> list[ReplayCall]:
    """``H`` as the provider reported it where a call of the same chain and head
    (``lineage``) shows it, in place of the recorder's estimate: a call that read only the head
    entry (``0 < read < P``), or wrote from nothing at two TTLs (``write_1h``: the head span
    at 1 hour). Calls of other heads keep the estimate."""
    exact: dict[tuple[tuple[str, ...], str], int] = {}
    for call, lineage in zip(calls, lineages, strict=True):
        if call.head is None or lineage is None:
            continue
        seen = None
        if call.read == 0 and 0 < call.write_1h < call.write:
            seen = call.write_1h
        elif 0 < call.read < call.reusable:
            seen = call.read
        if seen is not None and abs(seen - call.head) <= _HEAD_MATCH * call.head:
            exact.setdefault((call.chain, lineage), seen)
    if not exact:
        return calls
    return [call if call.head is None or lineage is None
            else replace(call, head=exact.get((call.chain, lineage), call.head))
            for call, lineage in zip(calls, lineages, strict=True)]


# --------------------------------------------------------------------------- candidates


def candidate_policies(rules: CacheRules, *, per_place: bool = True,
                       explicit: bool = False, labels: Iterable[str] | None = None,
                       keepalive: bool = True,
                       prior_gaps_s: tuple[float, ...] = ()) -> list[CachePolicy]:
    """The policies the what-if replays for a provider's rules: each TTL it offers
    (``labels``, default first; default: ``rules.ttls_s``), the longer ones on the head with
    the default on the history (``per_place``), each with and without keep-alive (a ping
    30 s before the history's TTL ends, at most one hour of pings per idle gap; only with
    ``keepalive``: requests a ping can keep, ``_policy.keepalive_unsupported``; its
    scheduler's gap prior ``prior_gaps_s``, the replayed traffic's own when the what-if
    makes the candidates), and (Gemini, ``explicit``) an explicit head cache."""
    known = [_LABEL_OF_S[s] for s in rules.ttls_s if s in _LABEL_OF_S]
    labels = list(labels) if labels is not None else known
    if not labels and known:  # no TTL to choose: the default, with and without keep-alive
        labels = known[:1]
    if not labels:
        return [CachePolicy(name="default")]
    default = labels[0]
    out = [CachePolicy(name="default")]
    out += [CachePolicy(name=label, head=label, history=label) for label in labels[1:]]
    if per_place:
        out += [CachePolicy(name=f"{label} head + {default} history", head=label,
                            history=default) for label in labels[1:]]
    with_keep: list[CachePolicy] = []
    for policy in out:
        shortest = ttl_seconds(policy.history, rules.default_ttl_s) or 0
        interval = max(shortest - 30, shortest * 0.9)
        pings = max(1, math.ceil(3600 / interval))
        keep = KeepAlive(interval_s=interval, max_pings=pings, prior_gaps_s=prior_gaps_s)
        with_keep.append(policy.model_copy(update={
            "keep_alive": keep, "name": f"{policy.name} + keep-alive"}))
    if keepalive:
        out += with_keep
    if explicit:
        out.append(CachePolicy(name="explicit head cache", explicit_cache=True))
    return out


def _as_used(calls: list[ReplayCall]) -> tuple[CachePolicy, dict[tuple[str, ...], TtlChoice]]:
    """The TTLs the recorded calls used, per chain (a ledger may hold traffic from before and
    after a policy changed): :func:`_chain_choice` of each chain; the policy names the most
    frequent choice, ``"as used (per chain)"`` when chains differ."""
    chains: dict[tuple[str, ...], list[ReplayCall]] = {}
    for call in calls:
        chains.setdefault(call.chain, []).append(call)
    choices = {chain: _chain_choice(members) for chain, members in chains.items()}
    counts: dict[TtlChoice, int] = {}
    for choice in choices.values():
        counts[choice] = counts.get(choice, 0) + 1
    common = max(counts, key=lambda c: counts[c]) if counts else TtlChoice()
    name = "as used" if len(counts) <= 1 else "as used (per chain)"
    return CachePolicy(name=name, head=common.head, history=common.history), choices


def _chain_choice(calls: list[ReplayCall]) -> TtlChoice:
    """The TTLs one chain's requests used, from what they reported and what the recorder saw:
    1-hour writes of a whole new history (a read, then everything written at 1 hour) mean a
    1-hour history; 1-hour writes beside others, a 1-hour head; else the TTL the requests
    chose (``ttl_s``, the most frequent) when the provider prices it apart, else the
    default."""
    rules = calls[0].rules
    if "1h" in rules.write_multipliers:
        if any(c.write > 0 and c.write_1h == c.write and c.read > 0 for c in calls):
            return TtlChoice(head="1h", history="1h")
        if any(c.write_1h > 0 for c in calls):
            default = _LABEL_OF_S.get(rules.default_ttl_s or 0)
            return TtlChoice(head="1h", history=default if default != "1h" else None)
    counts: dict[int, int] = {}
    for call in calls:
        if call.ttl_s is not None:  # a chain's first call compares with nothing: no TTL
            counts[call.ttl_s] = counts.get(call.ttl_s, 0) + 1
    ttl = max(counts, key=lambda k: counts[k]) if counts else None
    label = _LABEL_OF_S.get(ttl) if ttl is not None else None
    if label is None or label not in rules.write_multipliers:
        return TtlChoice()  # the default
    return TtlChoice(head=label, history=label)


# --------------------------------------------------------------------------- replay


def _call_usd(call: ReplayCall, read: int, choice: TtlChoice, explicit_read: int = 0) -> float:
    """Price ``call`` had it read ``read`` tokens with writes at ``choice``'s TTLs."""
    p, rules = call.prices, call.rules
    charged = bool(rules.write_multipliers)
    write = max(call.extent - read, 0) if charged else 0
    head = call.head or 0
    head_write = max(0, min(head, call.extent) - read) if choice.head != choice.history else 0
    history_write = write - head_write
    uncached = max(call.total - read - write, 0)
    cost = (uncached * p.input + (read - explicit_read) * p.cache_read
            + call.output * p.output)
    if charged:
        cost += (head_write * p.write(choice.head, rules.write_multipliers)
                 + history_write * p.write(choice.history, rules.write_multipliers))
    return cost


def _pings(gap: float, keep: KeepAlive | None) -> int:
    if keep is None or gap <= keep.interval_s:
        return 0
    return min(keep.max_pings, math.floor(gap / keep.interval_s))


def _ping_usd(previous: ReplayCall) -> float:
    """One keep-alive ping after ``previous``: its extent read, its output tokens."""
    output = KEEPALIVE_OUTPUT_TOKENS.get(previous.chain[2], 1)
    return previous.extent * previous.prices.cache_read + output * previous.prices.output


def _scheduled_pings(model: GapModel, gap: float, previous: ReplayCall, ttl_label: str | None,
                     keep: KeepAlive) -> int:
    """The pings ``KeepAliveScheduler`` sends in a gap of ``gap`` seconds (``math.inf``: after
    a chain's last call) after ``previous``: one every ``interval_s`` while the next request
    has not come, the cap allows and the expected saving exceeds the price
    (``_economics._keepalive_value.ping_value``, the scheduler's own rule, on the gaps the
    chain showed so far with the policy's prior)."""
    rules, prices = previous.rules, previous.prices
    ttl_s = ttl_seconds(ttl_label, rules.default_ttl_s)
    extent = previous.extent
    if ttl_s is None or extent <= 0 or keep.interval_s >= ttl_s:
        return 0
    try:
        write = prices.write(ttl_label, rules.write_multipliers)
    except KeyError:  # a TTL the rules do not price apart: the default write price
        write = prices.cache_write
    sent, refreshed = 0, 0.0
    while sent < keep.max_pings:
        due = refreshed + keep.interval_s
        if due >= gap:
            break
        value = ping_value(model, gap_s=due, refreshed_s=refreshed, ttl_s=ttl_s,
                           interval_s=keep.interval_s, pings_left=keep.max_pings - sent,
                           saving_per_hit_usd=extent * (write - prices.cache_read),
                           ping_usd=_ping_usd(previous),
                           min_saving_usd=keep.min_expected_saving_usd)
        if not value.ping:
            break
        sent, refreshed = sent + 1, due
    return sent


def _step(call: ReplayCall, previous: ReplayCall | None, choice_before: TtlChoice,
          choice: TtlChoice, keep: KeepAlive | None,
          pings: int | None = None) -> tuple[float, int, bool, int, float]:
    """Replay one call: (USD, reads, expired, pings, ping USD). ``choice_before`` is the TTL
    choice the previous call wrote (and refreshed) its entries with; ``pings`` the keep-alive
    pings sent in the gap (default: every ``interval_s``, up to the cap: the hindsight's
    option, which knows the gap)."""
    if previous is None:
        return _call_usd(call, call.read, choice), call.read, False, 0, 0.0
    gap = (call.ts - previous.ts).total_seconds()
    if pings is None:
        pings = _pings(gap, keep)
    ping_usd = pings * _ping_usd(previous)
    if pings:
        gap -= pings * (keep.interval_s if keep is not None else 0)
    default = call.rules.default_ttl_s
    history_s = ttl_seconds(choice_before.history, default)
    head_s = ttl_seconds(choice_before.head, default)
    history_alive = history_s is None or gap <= history_s
    head_alive = head_s is None or gap <= head_s
    if history_alive:
        read = call.reusable
    elif head_alive and call.head is not None:
        read = min(call.head, call.reusable)
    else:
        read = 0
    expired = read < call.reusable
    return _call_usd(call, read, choice), read, expired, pings, ping_usd


def replay(calls: Iterable[ReplayCall], policy: CachePolicy, *,
           recorded_pings: bool = False,
           chain_choices: Mapping[tuple[str, ...], TtlChoice] | None = None) -> PolicyOutcome:
    """Replay ``calls`` (in time order) under ``policy`` (module docstring). Recorded
    keep-alive pings are left out, unless ``recorded_pings`` (the replay of the policy used):
    then each is a touch of its chain at its recorded cost. ``chain_choices`` overrides the
    policy's TTLs per chain (the policy used, :func:`_as_used`)."""
    outcome = PolicyOutcome(policy)
    last: dict[tuple[str, ...], ReplayCall] = {}
    caches: dict[tuple[str, ...], _ExplicitCache] = {}
    models: dict[tuple[str, ...], GapModel] = {}  # keep-alive: each chain's gaps so far
    for call in calls:
        if call.keepalive:
            if recorded_pings:
                usd = call.recorded_usd()
                outcome.keepalive_pings += 1
                outcome.keepalive_usd += usd
                outcome.usd += usd
                last[call.chain] = call
            continue
        choice = (chain_choices.get(call.chain) if chain_choices is not None else None) \
            or policy.for_kind(call.kind)
        previous = last.get(call.chain)
        if policy.explicit_cache and call.head:
            read = max(call.read, call.head)
            rule = explicit_cache_rule(call.chain[1])
            explicit_price = (rule.read_usd_per_mtok / 1e6 if rule.read_usd_per_mtok
                              is not None else call.prices.cache_read)
            key = (call.chain[0], call.chain[1], call.chain[5])  # one cache per head
            cache = caches.setdefault(key, _ExplicitCache(call.kind, call.head,
                                                          rule.storage_usd_per_mtok_hour))
            created = cache.use(call.ts.timestamp(), float(rule.default_ttl_s or 3600))
            usd = (_call_usd(call, read, choice, explicit_read=call.head)
                   + call.head * explicit_price + created * call.head * call.prices.input)
            outcome.add(call.kind, usd, call.total, read, False)
        else:
            keep, pings = policy.keep_alive, None
            if keep is not None and previous is not None:
                model = models.setdefault(call.chain, GapModel(keep.prior_gaps_s or None))
                gap = (call.ts - previous.ts).total_seconds()
                pings = _scheduled_pings(model, gap, previous, choice.history, keep)
                model.observe(gap)
            usd, read, expired, pings, ping_usd = _step(call, previous, choice, choice, keep,
                                                       pings)
            outcome.add(call.kind, usd + ping_usd, call.total, read, expired)
            outcome.keepalive_pings += pings
            outcome.keepalive_usd += ping_usd
        last[call.chain] = call
    if (policy.keep_alive is not None and not policy.keep_alive.closes_conversations
            and not recorded_pings):  # the pings after each chain's last call
        for chain, end in last.items():
            if end.keepalive:
                continue
            model = models.setdefault(chain, GapModel(policy.keep_alive.prior_gaps_s or None))
            trailing = _scheduled_pings(model, math.inf, end,
                                        policy.for_kind(end.kind).history, policy.keep_alive)
            usd = trailing * _ping_usd(end)
            outcome.keepalive_pings += trailing
            outcome.keepalive_usd += usd
            outcome.usd += usd
            outcome.by_kind[end.kind]["usd"] += usd
    for cache in caches.values():
        storage = cache.storage_usd()
        outcome.storage_usd += storage
        outcome.usd += storage
        outcome.by_kind[cache.kind]["usd"] += storage
    return outcome


@dataclass
class _ExplicitCache:
    """One head's explicit cache in a replay: created on its first use (billed as the head's
    input tokens; UNVERIFIED how Google bills creation), its TTL extended to ``ttl`` after
    each use, created again after it expired; storage billed for the time it lives."""

    kind: str
    tokens: int
    usd_per_mtok_hour: float | None
    start: float = 0.0
    end: float = -math.inf
    seconds: float = 0.0

    def use(self, ts: float, ttl: float) -> int:
        """A call at ``ts`` reads the cache: 1 when it had to be (re)created, else 0."""
        if ts <= self.end:
            self.end = ts + ttl
            return 0
        if self.end > -math.inf:
            self.seconds += self.end - self.start
        self.start, self.end = ts, ts + ttl
        return 1

    def storage_usd(self) -> float:
        """Storage over every interval the cache lived (0 when its price is unknown)."""
        if self.usd_per_mtok_hour is None:
            return 0.0
        alive = self.seconds + (self.end - self.start if self.end > -math.inf else 0.0)
        return self.tokens / 1e6 * self.usd_per_mtok_hour * alive / 3600


def _hindsight(calls: list[ReplayCall], policies: list[CachePolicy]) -> float:
    """The cheapest sequence of per-call choices among ``policies``' TTL and keep-alive
    settings, knowing every gap (a dynamic programme per chain over the choice the previous
    call made): no fixed policy among them costs less."""
    options = list({(p.for_kind(k), p.keep_alive) for p in policies if not p.explicit_cache
                    for k in REQUEST_KINDS})
    if not options:  # explicit-cache candidates only: their own costs bound them
        return math.inf
    best: dict[tuple[str, ...], list[float]] = {}
    last: dict[tuple[str, ...], ReplayCall] = {}
    for call in calls:
        previous = last.get(call.chain)
        costs = best.get(call.chain)
        new: list[float] = []
        for choice, _ in options:
            if previous is None or costs is None:
                usd, *_ = _step(call, None, choice, choice, None)
                new.append(usd)
                continue
            cheapest = math.inf
            for j, (before, keep) in enumerate(options):
                usd, _, _, _, ping_usd = _step(call, previous, before, choice, keep)
                cheapest = min(cheapest, costs[j] + usd + ping_usd)
            new.append(cheapest)
        best[call.chain] = new
        last[call.chain] = call
    return sum(min(costs) for costs in best.values())


# --------------------------------------------------------------------------- entry point


def _records(source: Any, since: datetime | None) -> list[UsageRecord]:
    """The records of ``source`` at or after ``since``, in time order (stable: ledger order
    among equal times), so nothing computed from them depends on the order given."""

    if since is not None and (not isinstance(since, datetime) or since.tzinfo is None
                              or since.utcoffset() is None):
        raise InputError(f"since must be a timezone-aware datetime (e.g. "
                         f"datetime.now(timezone.utc)), got {since!r}", code="ledger-since-naive")
    return sorted(_read(source, since), key=lambda r: r.ts_utc)


def _read(source: Any, since: datetime | None) -> list[UsageRecord]:
    from .._ledger._ledger import Ledger

    if isinstance(source, (str, Path)):
        with Ledger(source, read_only=True) as opened:
            return list(opened.iter_records(since=since))
    if isinstance(source, Ledger):
        return list(source.iter_records(since=since))
    if isinstance(source, (bytes, Mapping)) or not isinstance(source, Iterable):
        raise InputError(f"what_if reads a Ledger, a ledger path or URL, or UsageRecord "
                         f"values; got {type(source).__name__}", code="what-if-source")
    records = list(source)
    for index, record in enumerate(records):
        if not isinstance(record, UsageRecord):
            raise InputError(f"what_if: item {index} is a {type(record).__name__}, not a "
                             "UsageRecord", code="what-if-source")
    return [r for r in records if since is None or r.ts_utc >= since]


def what_if(source: Any, *, provider: str | None = None, since: datetime | None = None,
            policies: Iterable[CachePolicy] | None = None,
            table: PolicyTable | None = None) -> WhatIf:
    """Replay a ledger's calls of one provider family under alternative cache policies.

    Args:
        source: A :class:`~stableprompt.Ledger`, a ledger path or URL, or
            :class:`~stableprompt.UsageRecord` values in time order.
        provider: The provider family (``"anthropic"``, ``"openai"``, ...); needed when the
            calls are of several.
        since: Only calls at or after this time.
        policies: The candidates (default: :func:`candidate_policies` of the provider's
            rules for the busiest model).
        table: Provider rules (default: the shipped table).

    Returns:
        A :class:`WhatIf`; its ``outcomes`` sorted by cost.

    Raises:
        PolicyError: no replayable call of the provider, or several providers and none named
            (code ``cache-policy``).
        InputError: ``source`` is none of those, or holds something other than records
            (code ``what-if-source``).
        LedgerError: the ledger cannot be opened or read.
    """
    records = _records(source, since)
    notes: dict[str, None] = {}
    calls = _replay_calls(records, table, notes)
    providers = sorted({c.chain[0] for c in calls})
    if provider is None:
        if len(providers) > 1:
            raise PolicyError(f"calls of several providers {providers}: name one "
                              "(provider=...)", code="cache-policy")
        if not providers:
            raise PolicyError("no call to replay (no known usage with a priced model)"
                              + (": " + "; ".join(notes) if notes else ""), code="cache-policy")
        provider = providers[0]
    others = [c for c in calls if c.chain[0] != provider]
    calls = [c for c in calls if c.chain[0] == provider]
    if not calls:
        raise PolicyError(f"no replayable call of provider {provider!r} (providers with "
                          f"calls: {providers})", code="cache-policy")
    if others:
        notes[f"{len(others):,} calls of other providers not replayed here"] = None
    calls.sort(key=lambda c: c.ts)
    per_place = all(c.head is not None for c in calls)
    if not per_place:
        notes["per-place TTLs (head vs history) not replayed: some rows have no head_tokens "
              "(recorded before stableprompt stored it)"] = None
    busiest = _busiest(calls)
    explicit = provider == "gemini" and per_place
    if explicit:
        rules = {c.chain[1]: explicit_cache_rule(c.chain[1]) for c in calls}
        unsupported = sorted(m for m, r in rules.items() if not r.supported)
        unpriced = sorted(m for m, r in rules.items()
                          if r.supported and r.storage_usd_per_mtok_hour is None)
        if unsupported:
            explicit = False
            notes[f"no explicit-cache candidate: {', '.join(unsupported)} offer only implicit "
                  "caching (ExplicitCacheRule)"] = None
        elif unpriced:
            notes[f"explicit head cache: no storage price known for {', '.join(unpriced)} "
                  "(ExplicitCacheRule): its storage is replayed at $0, a lower bound"] = None
    real = [c for c in calls if not c.keepalive]
    keepable = _keepalive_problem(calls)
    if keepable is not None:
        notes[f"no keep-alive candidate: {keepable}"] = None
    if policies is None:
        candidates = candidate_policies(busiest, per_place=per_place, explicit=explicit,
                                        labels=_settable_labels(calls, provider),
                                        keepalive=keepable is None,
                                        prior_gaps_s=gap_quantiles(_gaps(real)))
    else:
        candidates = list(policies)
        _check_labels(candidates, busiest, _settable_labels(calls, provider))
        _check_features(candidates, provider, keepable, busiest)
    if not candidates:
        raise PolicyError("no candidate policy to replay", code="cache-policy")
    if not real:
        raise PolicyError(f"no call to replay: the {len(calls):,} calls of {provider} are "
                          "keep-alive pings", code="cache-policy")
    outcomes = sorted((replay(real, p) for p in candidates), key=lambda o: o.usd)
    used, choices = _as_used(real)
    as_used = replay(calls, used, recorded_pings=True, chain_choices=choices)
    recorded = sum(c.recorded_usd() for c in calls)  # the recorded pings' cost included
    # The programme covers every TTL and keep-alive candidate; an explicit-cache candidate
    # (a different regime) bounds it too where it is cheaper.
    hindsight = min(_hindsight(real, candidates), *(o.usd for o in outcomes))
    pings = len(calls) - len(real)
    if pings:
        notes[f"{pings:,} recorded keep-alive ping{'s' if pings != 1 else ''} "
              f"(${as_used.keepalive_usd:.4f}, in what was paid) replayed as sent for the "
              "policy used; each candidate sends its own"] = None
    return WhatIf(provider=provider, calls=len(real), recorded_usd=recorded, as_used=as_used,
                  outcomes=outcomes, hindsight_usd=hindsight, per_place=per_place,
                  notes=list(notes), break_even=_break_even(real, busiest, candidates),
                  gaps_s=_gaps(real))


def _gaps(calls: list[ReplayCall]) -> list[float]:
    """Seconds between consecutive calls of each chain (``calls`` in time order)."""
    last: dict[tuple[str, ...], datetime] = {}
    gaps: list[float] = []
    for call in calls:
        before = last.get(call.chain)
        if before is not None:
            gaps.append((call.ts - before).total_seconds())
        last[call.chain] = call.ts
    return gaps


def _break_even(calls: list[ReplayCall], rules: CacheRules,
                candidates: list[CachePolicy]) -> dict[str, BreakEven]:
    """:class:`BreakEven` of each longer TTL the candidates use (its docstring)."""
    default_s = rules.default_ttl_s
    if default_s is None or not rules.write_multipliers:
        return {}
    default = _LABEL_OF_S.get(default_s)
    gaps: list[float] = []
    written: list[int] = []
    reusable: list[int] = []
    last: dict[tuple[str, ...], ReplayCall] = {}
    for call in calls:
        previous = last.get(call.chain)
        if previous is not None:
            gaps.append((call.ts - previous.ts).total_seconds())
            written.append(max(call.extent - call.reusable, 0))
            reusable.append(call.reusable)
        last[call.chain] = call
    labels = {label for p in candidates for label in (p.head, p.history)
              if label is not None and label != default}
    if not gaps or default is None or not labels:
        return {}
    prices = calls[-1].prices
    multipliers = rules.write_multipliers
    mean_new, mean_reusable = sum(written) / len(gaps), sum(reusable) / len(gaps)
    out: dict[str, BreakEven] = {}
    for label in sorted(labels, key=lambda t: TTL_LABELS_S[t]):
        premium = mean_new * (prices.write(label, multipliers) - prices.write(None, multipliers))
        saving = mean_reusable * (prices.write(None, multipliers) - prices.cache_read)
        needed = premium / saving if saving > 0 else math.inf
        longer_s = TTL_LABELS_S[label]
        observed = sum(default_s < g <= longer_s for g in gaps) / len(gaps)
        out[label] = BreakEven(label, default, needed, observed)
    return out


def what_if_by_provider(records: Iterable[UsageRecord], *,
                        table: PolicyTable | None = None) -> dict[str, WhatIf]:
    """:func:`what_if` for each provider family with replayable calls (``records`` in time
    order); a provider whose calls cannot be replayed (unknown usage, no price) is left out,
    and why is in the other results' notes when there are any."""
    records = list(records)
    providers = sorted({r.provider for r in records
                        if r.provider and r.wire_format != UNANALYSED})
    out: dict[str, WhatIf] = {}
    for provider in providers:
        try:
            out[provider] = what_if(records, provider=provider, table=table)
        except PolicyError:
            continue
    return out


def _check_labels(policies: list[CachePolicy], rules: CacheRules,
                  settable: list[str] | None) -> None:
    """Every TTL a candidate names is one the provider offers (and, for OpenAI, one each API
    of the calls accepts).

    Raises:
        PolicyError: naming the policy and the TTL (code ``cache-policy``).
    """
    offered = (settable if settable is not None
               else [_LABEL_OF_S[s] for s in rules.ttls_s if s in _LABEL_OF_S])
    for policy in policies:
        if not isinstance(policy, CachePolicy):
            raise PolicyError(f"a candidate is a {type(policy).__name__}, not a CachePolicy",
                              code="cache-policy")
        choices = [policy.for_kind(kind) for kind in REQUEST_KINDS]
        for label in {t for c in choices for t in (c.head, c.history) if t is not None}:
            if label not in offered:
                shown = ", ".join(offered) or "its default only"
                raise PolicyError(f"policy {policy.label()!r}: TTL {label!r} is not one "
                                  f"{rules.provider} offers here ({shown})",
                                  code="cache-policy")


def _keepalive_problem(calls: list[ReplayCall]) -> str | None:
    """Why no keep-alive ping could keep some of ``calls`` (``keepalive_unsupported``, the
    scheduler's own rule), ``None`` when every call could be kept."""
    seen = {(c.chain[2], c.chain[1]): c.rules for c in calls}  # (wire format, model)
    for (wire_format, _), rules in seen.items():
        problem = keepalive_unsupported(wire_format, rules)
        if problem is not None:
            return problem[1]
    return None


def _check_features(policies: list[CachePolicy], provider: str, keepable: str | None,
                    rules: CacheRules) -> None:
    """A candidate asks for nothing the calls' provider cannot do: a keep-alive where no ping
    can keep the requests, or whose interval is not shorter than the TTL it keeps (the
    provider's default where the policy names none), an explicit cache outside Gemini.

    Raises:
        PolicyError: naming the policy (code ``cache-policy``).
    """
    for policy in policies:
        keep = policy.keep_alive
        if keep is not None and keepable is not None:
            raise PolicyError(f"policy {policy.label()!r}: no keep-alive here: {keepable}",
                              code="cache-policy")
        for kind in REQUEST_KINDS if keep is not None else ():
            kept = ttl_seconds(policy.for_kind(kind).history, rules.default_ttl_s)
            if keep is not None and kept is not None and keep.interval_s >= kept:
                raise PolicyError(f"policy {policy.label()!r}: keep_alive.interval_s "
                                  f"{keep.interval_s:g} is not shorter than the {kind} TTL it "
                                  f"keeps ({kept} s, {rules.provider} default or the "
                                  "policy's)", code="cache-policy")
        if policy.explicit_cache and provider != "gemini":
            raise PolicyError(f"policy {policy.label()!r}: an explicit cache is Gemini's "
                              f"(cachedContents), not {provider}'s", code="cache-policy")


def _settable_labels(calls: list[ReplayCall], provider: str) -> list[str] | None:
    """TTL labels a request can choose, for every call: OpenAI's explicit-caching rule per
    API (``OPENAI_EXPLICIT_RULES``: Chat 30m, Responses 30m or 12h; none before GPT-5.6,
    whose retention the renders do not set: the default only); ``None``: the provider
    rules' TTLs."""
    if provider != "openai":
        return None
    allowed: list[str] | None = None
    for wire_format, model in {(c.chain[2], c.chain[1]) for c in calls}:
        rule = openai_explicit_rule(wire_format, model)
        ttls = list(rule.ttls) if rule is not None else []
        allowed = ttls if allowed is None else [t for t in allowed if t in ttls]
    return allowed or []


def _busiest(calls: list[ReplayCall]) -> CacheRules:
    counts: dict[str, int] = {}
    rules: Mapping[str, CacheRules] = {c.chain[1]: c.rules for c in calls}
    for call in calls:
        counts[call.chain[1]] = counts.get(call.chain[1], 0) + 1
    return rules[max(counts, key=lambda m: counts[m])]


public(PolicyOutcome, WhatIf, what_if)
