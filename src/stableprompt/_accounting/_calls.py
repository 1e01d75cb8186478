"""One row per call: read share, partial reads, exclusions, lost tokens and dollars, cliffs.

:func:`call_row` turns one :class:`~stableprompt.UsageRecord` (with the append-only ceiling
:func:`~stableprompt._accounting._summary.summarize` computed for it) into a :class:`CallRow`:

* ``excluded``: why the call is left out of token sums, hit rates and ceilings, or ``None``:
  ``"unanalysed"`` (wire format ``unknown``: a request the proxy forwarded without analysis,
  another endpoint such as ``GET /v1/models`` or a body not of its endpoint's format),
  ``"no-usage"`` (no input total: a failed or interrupted call), ``"unknown-reads"`` (the
  provider did not report cache reads, e.g. vLLM without ``--enable-prompt-tokens-details``:
  0 would be a guess), ``"suspect"`` (``verdict_detail["usage_suspect"]``: the reported input
  total is implausible against our estimate of the request, e.g. cached tokens counted twice),
  ``"inconsistent"`` (``usage_inconsistent`` without suspicion: the usage did not add up;
  summing it could show a 50,000% hit rate). Never summed as zeros. Older recorders also set
  ``usage_inconsistent`` on suspect calls: the suspicion decides, so their rows read the same.
* costs are not excluded with them: every call whose usage parsed is priced
  (:func:`~stableprompt._accounting._pricing.price_record`), suspect or not; ``cost_complete`` is
  false when its cost is unknown (``cost_usd`` ``None``: no usage, reads not reported, a
  negative part, an unknown model) or a lower bound (output tokens unknown, a server-tool fee
  unknown), and ``cost_note`` says why. An unanalysed request is no call to price (``None``,
  complete).
* ``read_share``: ``cache_read_tokens / input_tokens_total`` of an included call.
* ``partial``: the call read something, but less than it could by more than the tolerance
  (one granule plus :data:`~stableprompt._policy.TOLERANCE_FRACTION` of its
  input): ``0 < read < max(predicted, ceiling) - tolerance``. So a call that read 82% of a
  prompt it could have read whole is not shown like a full hit, nor like a 0% miss.
* ``lost_tokens``: what the verdict says was lost: ``lost_tokens`` of a ``client_mutation`` or
  a ``no_breakpoint``, ``missing_tokens`` of a ``provider_miss``, ``expired_tokens`` of a
  ``ttl_expired`` (from ``verdict_detail``); 0 otherwise. A row whose ``verdict_detail`` has
  ``lost_cap_tokens`` carries the recorder's one computation (already at most what the call
  could read), shown as stored, so the report and the ledger say the same number; older rows
  are capped here at ``ceiling - cache_read`` of an included call (the verdict counts against
  the compared request, which can be longer than this one, e.g. before a compaction).
  ``cause``: the mutation's cause (``_diff.CAUSES``, or
  ``lookback-exceeded``), else the verdict in slug form (``provider-miss``, ``ttl-expired``).
* ``caveats``: what the verdict rests on beyond documented rules (:func:`caveats_of`: an
  undocumented content-shape rule, a default policy, a changed header, ...), shown beside it;
  ``error``: a failed call's error text, redacted (:func:`error_text`); ``action``: the user
  action behind a break (:func:`~._actions.action_of`).
* ``before`` / ``after``: the text around the divergence in the compared request and in this
  one, when the row holds them (``verdict_detail["snippet_a"]`` / ``["snippet_b"]``) or the
  ledger kept both bodies (:func:`~._snippets.mutation_snippets`, passed as ``snippets``).
* ``divergences``: every divergence of a ``client_mutation`` in cache order (the ledger keeps
  at most eight, ``_recording._divergence_detail``), ``divergences_total`` how many there were
  (:attr:`CallRow.more_divergences`: after the first; ``report --calls`` shows "+N more").
* ``boundary``: ``"intra"`` (the request followed a tool result: a tool-loop call inside a
  user turn) or ``"cross"`` (the first call after a new user message), from
  ``verdict_detail["turn_boundary"]`` (the recorder's, ``_recording._boundary``) or, for older
  rows that kept their request body (``content``), from that body; ``None`` when unknown.
* costs (USD, :func:`~stableprompt._accounting._pricing.price_call`): as reported, all uncached,
  at the ceiling (had it read ``max(read, ceiling)``) and ``lost_usd`` (the price difference
  had the lost tokens been read; 0 for calls excluded from rates, whose losses are not
  counted).

:func:`find_cliffs` lists the calls whose read share drops sharply against the previous
included call of the same scenario and session (:data:`CLIFF_DROP`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import EllipsisType
from typing import Any

from .._canonical import loads
from .._frozen import slotted_maker
from .._ledger._usage_record import UNANALYSED, UsageRecord
from .._policy import (
    TOLERANCE_FRACTION,
    describe_header_change,
    estimate_allowance_tokens,
)
from .._recording._boundary import turn_boundary
from .._redact import redact
from ._actions import action_of
from ._pricing import Pricing, price_readings
from ._spill import SpillMap

__all__ = ["CLIFF_DROP", "ERROR_TEXT_CHARS", "EXCLUSIONS", "MAIN_AGENT", "SUBAGENT", "CallRow",
           "Cliff", "CliffFinder", "agent_label", "agreement_of", "boundary_of", "call_row",
           "caveats_of", "error_text", "exclusion", "find_cliffs", "is_suspect", "subagent_id"]

EXCLUSIONS: Mapping[str, str] = {
    "unanalysed": "no LLM call to analyse (requests to other endpoints, or bodies not of "
    "their endpoint's format, forwarded by the proxy)",
    "no-usage": "no usage (failed or interrupted calls)",
    "unknown-reads": "cache reads not reported by the provider (0 would be a guess)",
    "suspect": "an input total far from our estimate of the request (usage_suspect: "
    "cached tokens counted twice?), priced as reported",
    "inconsistent": "inconsistent usage (did not add up)",
}
"""Why a call is excluded from token sums, rates and ceilings (never from costs): slug -> the
note's words."""

CLIFF_DROP = 0.25
"""A cliff: the read share falls by at least this much (absolute, 0.25 = 25 points) from the
previous included call of the same session."""

_LOSS_KEYS = {"client_mutation": "lost_tokens", "no_breakpoint": "lost_tokens",
              "provider_miss": "missing_tokens", "ttl_expired": "expired_tokens"}

UNMARKED = frozenset({"no-breakpoint", "breakpoints-below-minimum"})
"""``below_minimum`` reasons (``verdict_detail["reason"]``) that are the client's breakpoint
placement, not a short prompt: the row's cause is the reason, and it lost what the call's
ceiling (the prefix shared with earlier calls, within the TTL) could have read."""


def _int(detail: Mapping[str, Any], key: str) -> int | None:
    value = detail.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(detail: Mapping[str, Any], key: str) -> str | None:
    value = detail.get(key)
    return value if isinstance(value, str) and value else None


def _snippet(detail: Mapping[str, Any], key: str, snippets: tuple[str, str] | None,
             side: int) -> str | None:
    """The row's recorded snippet (``""`` is kept: that side has no value there, e.g. a block
    the later request dropped), else the one cut from stored bodies, else ``None``."""
    value = detail.get(key)
    if isinstance(value, str) and (value or isinstance(detail.get("snippet_a" if side else
                                                                  "snippet_b"), str)):
        return value
    return snippets[side] if snippets else None


MAIN_AGENT = "main"
"""The agent of a call no branch rule or header named: its session's main agent."""


@dataclass(frozen=True, slots=True)
class CallRow:
    """One call of the report (see the module docstring for each derived field).

    Token counts are provider-reported unless named ``predicted`` or ``ceiling``; costs are
    USD, ``None`` when unknown (``cost_complete`` false, ``cost_note`` says why; a lower bound
    when ``cost_usd`` is set and ``cost_complete`` false).
    """

    id: str
    scenario: str
    session: str
    turn: int | None
    ts: datetime
    verdict: str
    provider: str | None
    model: str | None
    wire_format: str
    input_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    output_tokens: int
    predicted_cache_read_tokens: int | None
    ceiling_tokens: int
    excluded: str | None
    read_share: float | None
    partial: bool
    lost_tokens: int
    cause: str | None
    segment: str | None
    segment_kind: str | None
    path: str | None
    cause_detail: str | None
    before: str | None
    after: str | None
    boundary: str | None
    cost_usd: float | None
    cost_uncached_usd: float | None
    cost_at_ceiling_usd: float | None
    lost_usd: float | None
    agrees: bool | None = None
    cost_complete: bool = True
    cost_note: str | None = None
    server_reason: str | None = None
    server_agreement: str | None = None
    caveats: tuple[str, ...] = ()
    error: str | None = None
    action: str | None = None
    agent: str = MAIN_AGENT
    divergences: tuple[dict[str, Any], ...] = ()
    divergences_total: int = 0
    estimated_span_tokens: int | None = None

    @property
    def more_divergences(self) -> int:
        """Divergences after the first (``verdict_detail["divergences_total"] - 1``; 0 for
        rows recorded before the list, or with one divergence)."""
        return max(self.divergences_total - 1, 0)

    @property
    def provider_side_unexplained(self) -> bool:
        """A miss the provider blames on itself or that neither side explains: the server's
        diagnosis is ``server-only`` (``unavailable``, or a change we do not see), or our
        ``provider_miss`` got no server reason."""
        if self.server_agreement == "server-only":
            return True
        return self.verdict == "provider_miss" and self.server_agreement in (
            None, "no-comparison")

    @property
    def included(self) -> bool:
        """The call counts in token sums, rates and ceilings (costs count every call)."""
        return self.excluded is None

    def to_json(self) -> dict[str, Any]:
        """The issue's per-call fields first, then the rest (rates and USD to 6 digits)."""
        return {
            "id": self.id, "scenario": self.scenario, "session": self.session,
            "turn": self.turn, "ts": self.ts.isoformat().replace("+00:00", "Z"),
            "verdict": self.verdict, "read_share": _round(self.read_share),
            "cache_read_tokens": self.cache_read_tokens,
            "predicted_cache_read_tokens": self.predicted_cache_read_tokens,
            "lost_tokens": self.lost_tokens, "cause": self.cause, "segment": self.segment,
            "path": self.path, "before": self.before, "after": self.after,
            "input_tokens": self.input_tokens, "cache_write_tokens": self.cache_write_tokens,
            "ceiling_tokens": self.ceiling_tokens, "partial": self.partial,
            "excluded": self.excluded, "segment_kind": self.segment_kind,
            "cause_detail": self.cause_detail, "boundary": self.boundary,
            "provider": self.provider, "model": self.model, "wire_format": self.wire_format,
            "cost_usd": _round(self.cost_usd), "cost_uncached_usd": _round(self.cost_uncached_usd),
            "cost_at_ceiling_usd": _round(self.cost_at_ceiling_usd),
            "lost_usd": _round(self.lost_usd), "cost_complete": self.cost_complete,
            "cost_note": self.cost_note, "server_reason": self.server_reason,
            "server_agreement": self.server_agreement, "caveats": list(self.caveats),
            "error": self.error, "action": self.action, "agent": self.agent,
            "divergences": list(self.divergences), "divergences_total": self.divergences_total,
            "estimated_span_tokens": self.estimated_span_tokens,
        }

    @property
    def estimate_error_tokens(self) -> int | None:
        """``|predicted - reported|`` cache reads of a call whose prediction rests on an
        estimated span (:func:`agreement_of`), else ``None``."""
        if (self.estimated_span_tokens is None or self.agrees is None
                or self.predicted_cache_read_tokens is None or self.cache_read_tokens is None):
            return None
        return abs(self.predicted_cache_read_tokens - self.cache_read_tokens)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


make_call_row = slotted_maker(CallRow)
"""``CallRow(...)``, faster (``_frozen.slotted_maker``): the report makes one per call."""


def agreement_of(record: UsageRecord, granularity: int,
                 excluded: str | EllipsisType | None = ...) -> bool | None:
    """Whether the call's predicted cache reads agree with the reported ones (``None``: not
    both known, or the call is excluded from rates, :func:`exclusion`; ``excluded``: that
    exclusion when the caller has it, else computed).

    A prediction agrees within the granularity (``|predicted - reported| < granularity``,
    tokens). A prediction that rests partly on our token estimate
    (``verdict_detail["estimated_span_tokens"]``: the first read of an entry ending at an
    earlier breakpoint, whose size the provider reports only once it is read) agrees within
    an allowance on top: :data:`~stableprompt._policy.ESTIMATED_SPAN_FRACTION` of that span
    plus the request's density offset (``|token_scale - 1|`` of the span), and
    :data:`~stableprompt._policy.ESTIMATED_SEGMENT_FRAMING_TOKENS` per segment in it
    (``estimated_span_segments``, 1 when the row does not say;
    :func:`~stableprompt._policy.estimate_allowance_tokens`): no one can count a provider's
    tokens exactly without its tokenizer and chat template. The report counts
    those calls apart (:attr:`Totals.agreement_estimated`) with their largest error.

    The allowance covers how many tokens a read holds, not whether one happened: a read of 0
    against a positive prediction (or a read where 0 was predicted) is judged within the
    granularity only (measured on the emulator: a 46,347-token span after a system
    breakpoint allowed 3,616 tokens against a 2,191-token prediction). A density that is not
    a finite positive number, or an allowance too large for a float (a hand-edited row), adds
    no density offset / no allowance."""
    predicted, reported = record.predicted_cache_read_tokens, record.cache_read_tokens
    if predicted is None or reported is None:
        return None
    if (exclusion(record) if excluded is ... else excluded) is not None:
        return None
    error = abs(predicted - reported)
    detail = record.verdict_detail
    span = _int(detail, "estimated_span_tokens")
    if not span or span < 0 or (predicted > 0) != (reported > 0):
        return error < granularity
    allowance = estimate_allowance_tokens(span, _int(detail, "estimated_span_segments"),
                                          detail.get("token_scale"))
    return error < granularity + (allowance or 0)


def exclusion(record: UsageRecord) -> str | None:
    """Why ``record`` is left out of token sums and rates (a key of :data:`EXCLUSIONS`), or
    ``None``."""
    if record.wire_format == UNANALYSED:
        return "unanalysed"
    if record.input_tokens_total is None:
        return "no-usage"
    if record.cache_read_tokens is None:
        return "unknown-reads"
    if is_suspect(record):
        return "suspect"
    if record.usage_inconsistent:
        return "inconsistent"
    return None


def is_suspect(record: UsageRecord) -> bool:
    """The recorder found the reported input total implausible for the request
    (``verdict_detail["usage_suspect"]``, ``_recording._plausibility``)."""
    return record.verdict_detail.get("usage_suspect") is True


def boundary_of(record: UsageRecord) -> str | None:
    """``"intra"`` / ``"cross"`` for ``record`` (``verdict_detail["turn_boundary"]``, else its
    stored request body), ``None`` when neither says."""
    stored = record.verdict_detail.get("turn_boundary")
    if stored in ("intra", "cross"):
        return str(stored)
    if record.content is None:
        return None
    try:
        body = loads(record.content.encode("utf-8"))
    except ValueError:
        return None
    if not isinstance(body, Mapping):
        return None
    wire = record.verdict_detail.get("request_format") or record.wire_format
    return turn_boundary(str(wire), body)


_CAVEATS: Mapping[str, str] = {
    "content_shape": "{}",
    "policy": "cache policy: {}",
    "predecessor_body": "compared request: {}",
    "cache_write_assumed_zero": "writes assumed 0: {}",
}
"""``verdict_detail`` keys whose text says a verdict rests on an assumption (undocumented
provider behaviour, a default policy, an estimate), and how the report words them."""
_CAVEAT_KEYS = frozenset({*_CAVEATS, "header_changes", "breakpoints_ignored"})
"""Every ``verdict_detail`` key :func:`caveats_of` reads."""

ERROR_TEXT_CHARS = 300
"""At most this many characters of a failed call's error text (:func:`error_text`)."""


def caveats_of(detail: Mapping[str, Any]) -> tuple[str, ...]:
    """What a verdict rests on beyond the documented rules, one line each, from its
    ``verdict_detail``: a content-shape change treated by an undocumented rule (string vs one
    text block), the conservative default policy of an unknown model, a compared request known
    only from its ledger row, writes assumed 0, a cache-relevant header that changed
    (``header_changes``: a miss it explains is the cause instead), breakpoints that wrote
    nothing."""
    if detail.keys().isdisjoint(_CAVEAT_KEYS):  # most rows: nothing to say (no loop)
        return ()
    out = [template.format(value) for key, template in _CAVEATS.items()
           if isinstance(value := detail.get(key), str) and value]
    changes = detail.get("header_changes")
    if isinstance(changes, list):
        out.extend(describe_header_change(c) for c in changes if isinstance(c, Mapping))
    if detail.get("breakpoints_ignored") is True:
        out.append("breakpoints sent, nothing written (a gateway stripped cache_control?)")
    return tuple(out)


def error_text(record: UsageRecord) -> str | None:
    """A failed call's error, redacted (:func:`~stableprompt._redact.redact`) and at most
    :data:`ERROR_TEXT_CHARS` characters: class, HTTP status, the provider's error type or our
    error code, and its message, e.g. ``"ProviderHTTPError 429 rate_limit_error: Number of
    request tokens has exceeded your per-minute rate limit"``; ``None`` for a call that did
    not fail."""
    if record.error_class is None:
        return None
    detail = record.verdict_detail
    head = " ".join(str(part) for part in (record.error_class, record.status_code,
                                           _str(detail, "error_type") or _str(detail, "error_code"))
                    if part is not None)
    message = _str(detail, "error_message")
    text = redact(f"{head}: {message}" if message else head)
    return text if len(text) <= ERROR_TEXT_CHARS else text[:ERROR_TEXT_CHARS - 1] + "…"


def call_row(record: UsageRecord, *, scenario: str, session: str, ceiling: int,
             granularity: int, pricing: Pricing | None, notes: dict[str, None],
             snippets: tuple[str, str] | None = None,
             agrees: bool | None = None, compared_input_tokens: int | None = None,
             agent: str = MAIN_AGENT, excluded: str | None) -> CallRow:
    """The :class:`CallRow` of ``record``.

    Args:
        record: The ledger record.
        scenario: Its scenario name as grouped (``NO_SCENARIO`` when unnamed).
        session: Its session id as grouped.
        ceiling: Its append-only ceiling (tokens), 0 when excluded.
        granularity: Its provider's cache granularity (tokens), for the partial tolerance.
        pricing: Where costs are computed, ``None`` to price nothing.
        notes: Pricing notes (see :func:`~stableprompt._accounting._pricing.price_call`).
        snippets: ``(before, after)`` from the stored bodies, used when the row's
            ``verdict_detail`` has none.
        agrees: Whether the prediction matched the report within the granularity (``None``:
            not both known).
        compared_input_tokens: The reported input total of the request it was compared with
            (``predecessor_id``), for the user action behind a break (:func:`~._actions.
            action_of`: a compaction shrinks the request).
        agent: Its agent as grouped (:func:`agent_label`).
        excluded: Its :func:`exclusion` (decided once per call by the caller, which uses it
            too: the report's pass, ``report --follow``).
    """
    detail = record.verdict_detail
    total, read = record.input_tokens_total, record.cache_read_tokens
    included = excluded is None and total is not None and read is not None
    share = read / total if included and total and read is not None else None
    predicted = record.predicted_cache_read_tokens
    partial = False
    if included and total is not None and read:
        tolerance = granularity + math.ceil(TOLERANCE_FRACTION * total)
        partial = read < max(predicted or 0, ceiling) - tolerance
    verdict = record.verdict
    loss_key = _LOSS_KEYS.get(verdict)
    lost = (_int(detail, loss_key) or 0) if loss_key else 0
    lost = max(lost, 0)
    plain = detail.keys().isdisjoint(_DESCRIBING)  # most rows: nothing of a divergence
    reason = None if plain else _str(detail, "reason")
    # No usable breakpoint on a breakpoint cache (Anthropic caches only at breakpoints): the
    # client's placement lost what the prefix it shares with earlier calls could have read.
    unmarked = verdict == "no_breakpoint" or (verdict == "below_minimum" and reason in UNMARKED)
    if "lost_cap_tokens" in detail:
        pass  # the recorder's one computation (``_attribution.lost_here``): shown as stored
    elif unmarked and included and read is not None:  # rows recorded before it
        lost = max(ceiling - read, 0)
    elif included and read is not None:  # never more than the call could have read
        lost = min(lost, max(ceiling - read, 0))
    cause: str | None = None
    if verdict == "client_mutation":
        cause = _str(detail, "cause") or "client-mutation"
    elif unmarked:
        cause = reason or "no-breakpoint"
    elif verdict in ("provider_miss", "ttl_expired", "below_minimum"):
        cause = verdict.replace("_", "-")
    cause_detail = None if plain else _str(detail, "cause_detail") or reason
    joined = detail.get("server_diagnosis")
    costs: tuple[float | None, ...] = _NO_COSTS
    complete, cost_note = excluded == "unanalysed", None
    if pricing is not None and excluded != "unanalysed":
        # priced as reported, all uncached, at the ceiling, and had the lost tokens been read
        # (TokenSplit.reading); the model's rates found once (price_readings)
        reads = ((ceiling, (read or 0) + lost) if lost and included
                 else (ceiling if included else 0,))
        price, usd = price_readings(record, pricing, notes, reads)
        complete, cost_note = price.complete, "; ".join(price.gaps) or None
        cost = price.usd
        if cost is not None:
            lost_usd: float | None = 0.0
            if lost and included:
                saved = usd[2]
                lost_usd = None if saved is None else max(cost - saved, 0.0)
            costs = (cost, usd[0], usd[1], lost_usd)
    server_reason = server_agreement = None
    if joined is not None:  # most rows: no server diagnosis
        server_reason, server_agreement = _server(joined, "reason"), _server(joined, "agreement")
    if plain:  # what _str, _snippet and _divergences give a row without those keys
        segment = segment_kind = path = None
        before, after = snippets or (None, None)
        divergences, divergences_total = _NO_DIVERGENCES
    else:
        segment, segment_kind = _str(detail, "segment"), _str(detail, "segment_kind")
        path = _str(detail, "path")
        before = _snippet(detail, "snippet_a", snippets, 0)
        after = _snippet(detail, "snippet_b", snippets, 1)
        divergences, divergences_total = _divergences(detail)
    return make_call_row(  # positional, in field order (43 keywords cost ~2 us more a call)
        record.record_id, scenario, session, record.turn,  # id, scenario, session, turn
        record.ts_utc, verdict, record.provider, record.model,  # ts, verdict, provider, model
        record.wire_format, total, read,  # wire_format, input_tokens, cache_read_tokens
        record.cache_write_tokens, record.output_tokens or 0,  # cache_write, output_tokens
        predicted, ceiling if included else 0,  # predicted_cache_read_tokens, ceiling_tokens
        excluded, share, partial, lost, cause,  # excluded, read_share, partial, lost_tokens, cause
        segment, segment_kind, path, cause_detail, before, after,
        boundary_of(record),  # boundary
        costs[0], costs[1], costs[2], costs[3],  # cost_usd, _uncached_, _at_ceiling_, lost_usd
        agrees, complete, cost_note,  # agrees, cost_complete, cost_note
        server_reason, server_agreement,  # server_reason, server_agreement
        caveats_of(detail), error_text(record),  # caveats, error
        action_of(verdict, detail, total, compared_input_tokens),  # action
        agent, divergences, divergences_total, _span(detail))  # agent, ..., estimated_span


_DESCRIBING = frozenset({"reason", "cause_detail", "segment", "segment_kind", "path",
                         "snippet_a", "snippet_b", "divergences", "divergences_total"})
"""The ``verdict_detail`` keys :func:`call_row` reads for ``cause_detail``, ``segment``,
``segment_kind``, ``path``, ``before`` / ``after`` and the divergences: a row with none of them
(most rows) has each at its empty value."""

_NO_COSTS: tuple[None, ...] = (None, None, None, None)
"""A call's four costs when none is priced (as reported, uncached, at the ceiling, lost)."""


def _span(detail: Mapping[str, Any]) -> int | None:
    span = _int(detail, "estimated_span_tokens")
    return span if span is not None and span > 0 else None


def agent_label(record: UsageRecord) -> str | None:
    """``"subagent <id>"`` (or ``"subagent"``) when the recorder named the call's agent a
    branch (``verdict_detail["agent"]``: the harness's headers, or the branch rule
    ``_economics._request_kind.is_branch``), else ``None`` (the caller carries a lineage's
    label to its later calls, which the rule does not mark again)."""
    agent = record.verdict_detail.get("agent")
    if agent is None or not isinstance(agent, Mapping) or agent.get("kind") != "subagent":
        return None  # (None first: most rows, and an ABC's isinstance costs ~0.4 us)
    ident = agent.get("id")
    return f"{SUBAGENT} {ident}" if isinstance(ident, str) and ident else SUBAGENT


SUBAGENT = "subagent"
"""The agent label of a branch (:func:`agent_label`: ``"subagent"`` or ``"subagent <id>"``)."""


def subagent_id(label: str) -> str | None:
    """The id in a ``"subagent <id>"`` label (:func:`agent_label`), else ``None``."""
    prefix = SUBAGENT + " "
    return label[len(prefix):] if label.startswith(prefix) else None


def _divergences(detail: Mapping[str, Any]) -> tuple[tuple[dict[str, Any], ...], int]:
    """``(divergences, divergences_total)`` of a row (``_recording._divergence_detail``):
    every divergence in cache order (bounded), each a JSON object; a row recorded before the
    list, with a first divergence, counts one."""
    found = detail.get("divergences")
    if found is None and "divergences_total" not in detail and "path" not in detail:
        return _NO_DIVERGENCES  # a call that did not diverge (most rows)
    entries = tuple(e for e in found if isinstance(e, dict)) if isinstance(found, list) else ()
    total = _int(detail, "divergences_total")
    if total is None:
        total = len(entries) or (1 if isinstance(detail.get("path"), str) else 0)
    return entries, total


_NO_DIVERGENCES: tuple[tuple[dict[str, Any], ...], int] = ((), 0)


def _server(joined: Any, key: str) -> str | None:
    """A field of ``joined``, a row's ``verdict_detail["server_diagnosis"]`` (the provider's
    own miss reason joined to ours, ``_recording._server_reasons``), ``None`` without one."""
    value = joined.get(key) if isinstance(joined, Mapping) else None
    return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class Cliff:
    """A call whose read share fell by at least :data:`CLIFF_DROP` from the previous included
    call of its session (``previous_id``)."""

    call: CallRow
    previous_id: str
    previous_read_share: float

    @property
    def drop(self) -> float:
        """How far the read share fell (0..1)."""
        return self.previous_read_share - (self.call.read_share or 0.0)

    def to_json(self) -> dict[str, Any]:
        """``id, scenario, session, turn, ts, verdict, cause, segment, path, read_share,
        previous_id, previous_read_share, drop, lost_tokens``."""
        row = self.call.to_json()
        keys = ("id", "scenario", "session", "turn", "ts", "verdict", "cause", "segment", "path",
                "read_share")
        return {**{k: row[k] for k in keys}, "previous_id": self.previous_id,
                "previous_read_share": _round(self.previous_read_share),
                "drop": _round(self.drop), "lost_tokens": self.call.lost_tokens}


def find_cliffs(rows: Iterable[CallRow], *, drop: float = CLIFF_DROP) -> list[Cliff]:
    """Calls (in order) whose read share fell by at least ``drop`` from the previous included
    call of the same scenario, session and agent; excluded calls are skipped, not counted as
    0."""
    finder = CliffFinder(drop=drop)
    return [cliff for row in rows if (cliff := finder.add(row)) is not None]


class CliffFinder:
    """:func:`find_cliffs` one row at a time: keeps the previous included call's id and read
    share per scenario, session and agent (memory in sessions, not calls; with ``cap``, at
    most ``cap`` of them in memory, the rest in a temporary file: ``_spill``)."""

    def __init__(self, *, drop: float = CLIFF_DROP, cap: int | None = None) -> None:
        self._drop = drop
        self._last: SpillMap[tuple[str, str, str], tuple[str, float]] = SpillMap(
            cap, key_text=repr)

    def close(self) -> None:
        """Delete the temporary file, if any (the pass is over)."""
        self._last.close()

    def add(self, row: CallRow) -> Cliff | None:
        """The cliff ``row`` makes, if any (rows in ledger order)."""
        if row.read_share is None:
            return None
        key = (row.scenario, row.session, row.agent)  # a subagent's first call is no cliff
        before = self._last.get(key)
        self._last[key] = (row.id, row.read_share)
        if before is not None and before[1] - row.read_share >= self._drop - 1e-12:
            return Cliff(row, before[0], before[1])
        return None
