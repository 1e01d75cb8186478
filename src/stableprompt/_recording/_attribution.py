"""Cache-read prediction and miss attribution: one verdict per call, as a pure function.

:func:`attribute` compares a request with its same-lineage predecessor (an earlier request with
the same head fingerprint; the recorder picks the one sharing the longest prefix, see
``_predecessor``) and answers two questions:

1. **Prediction.** How many input tokens should an exact-prefix cache have read? The tokens of
   the longest common prefix (LCP) with the predecessor, limited to what the provider can read:

   - Breakpoint caches (Anthropic; ``CacheRules.automatic`` is false): only whole prefixes
     ending at a breakpoint the predecessor wrote (its ``cache_control`` blocks whose prefix
     reaches the minimum), that lie inside the LCP, and that one of *this* request's eligible
     breakpoints reaches within the lookback window ("The system checks at most 20 positions
     per breakpoint, counting the breakpoint itself as the first",
     platform.claude.com/docs/en/build-with-claude/prompt-caching). Each entry lives for its
     breakpoint's TTL (``5m``/``1h``).
   - Automatic caches (OpenAI, DeepSeek, vLLM, SGLang, llama.cpp, ...): the LCP itself, minus
     the last prompt token where the engine always recomputes it (vLLM: "When all tokens hit
     the cache, we must recompute the last token to obtain logits",
     ``vllm/v1/core/kv_cache_manager.py``), floored to the policy granularity (OpenAI before
     GPT-5.6: multiples of 128; vLLM: 16-token blocks), 0 below the minimum
     (developers.openai.com/api/docs/guides/prompt-caching). The TTL is the request's choice
     (``prompt_cache_retention`` / ``prompt_cache_options.ttl``) or the policy default.

   The TTL clock runs from the same-lineage predecessor's send time: it either wrote the entry
   or read it, and reads refresh the TTL (Anthropic: "refreshed for no additional cost each
   time the cached content is used").

2. **Verdict.** Exactly one of ``cold``, ``hit``, ``client_mutation``, ``below_minimum``,
   ``no_breakpoint``, ``ttl_expired``, ``provider_miss``, ``unknown`` (see :func:`attribute`
   for the order of the checks and what lands in ``detail``).

Token counts are **estimates** unless the backend tokenizes for us: stableprompt tokenizes
each segment's bytes (compact JSON of the block as sent) with its own tokenizer (cl100k by
default), which is not the provider's tokenizer and does not see the provider's chat template
or hidden system tokens. To compare like with like, a prefix is counted in provider tokens by
**anchoring** (:meth:`_Attributor.provider`): the provider's reported prompt size (this
request's ``input_tokens_total``, or the compared request's when the prefix is shared with it,
whichever leaves less to estimate) minus our estimate of what follows the prefix. Only that
unshared remainder is estimated: token density varies by content (0.33x to 1.42x of cl100k as
measured on llama-server, ``reference/ENGINES.md``), so one request-wide scale factor cannot
make a per-prefix count exact, while a fully shared predecessor's reported size is exact.
``detail["token_scale"]`` (reported total / our estimate) is kept as evidence only. The
prediction stored is in provider tokens when the provider reported its input total, else in
our tokenizer's tokens. Reported reads are then compared with the prediction within a
tolerance of one granule plus :data:`~stableprompt._policy.TOLERANCE_FRACTION` (5 %) of the
request's reported ``input_tokens_total``, which absorbs the tokenizer and template
differences. The LCP inside the first divergent segment is estimated proportionally to its
bytes (byte share of that segment's tokens, rounded down).

Known limits: only the entries the compared request wrote or read are considered (an entry
an older request wrote, that the predecessor neither wrote nor read, is not predicted); a
predecessor known only from its ledger row (no stored body) is matched by fingerprint and is
assumed to have one entry at the end of the matched prefix (``detail["predecessor_body"]``).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Literal

from .._diff import (
    Divergence,
    Segmented,
    diff,
    diverges,
    first_divergent_index,
    is_expected_divergence,
    lcp_bytes,
    value_snippet,
)
from .._ledger._usage_record import Verdict
from .._policy import (
    TOLERANCE_FRACTION,
    TTL_LABELS_S,
    CacheRules,
    content_shape_change,
    content_shape_rule,
    describe_header_change,
    estimate_allowance_tokens,
    header_changes,
)
from .._segment import HEAD_KINDS, Segment
from .._usage import CacheUsage
from .._wire._resegment import breakpoint_indices
from ._call import RequestState
from ._divergence_detail import ledger_divergences
from ._engine_view import EngineEvidence
from ._outline import outline_common
from ._plausibility import usage_suspicion
from ._sizes import ReportedSizes, extent_size, size_key

__all__ = [
    "IGNORED_BREAKPOINTS_MARGIN",
    "TTL_LABELS_S",
    "Attribution",
    "attribute",
]


IGNORED_BREAKPOINTS_MARGIN = 1.25
"""How far above the minimum (as a factor of ``min_cacheable_tokens``, in provider-scaled
tokens) a request's longest breakpoint prefix must reach before a report of no read and no
write on a breakpoint cache counts as "breakpoints sent, nothing written" (a gateway that
strips ``cache_control``, a server that ignores it) rather than a prefix that was below the
minimum in the provider's own tokens.

Why 1.25: an anchored prefix count still estimates the remainder after the prefix in our
tokenizer's density, not the provider's. Measured per content type
(``reference/ENGINES.md``: tool schemas 1.24x, system text 1.04x, user text 0.86x, assistant
tool calls 0.72x of cl100k), a head of tools and system text sits within about 20 % of a
typical request's content; 1.25 keeps a
borderline prefix (which may really be under the minimum, where "both counters 0" is the
documented silent outcome) out of the flag. Below the margin a reported 0 is taken at its
word (``below_minimum`` evidence) and is still anchored on."""

SIZE_SCAN_SEGMENTS = 64
"""Segments searched either way from a predicted entry's end for a size the provider reported
(:meth:`_Attributor.nearest_reported`): a bounded cost per call, whatever the history."""

_ANCHOR_KEYS = ("anchored_on_predecessor", "anchored_on_predecessor_read",
                "anchored_on_reported_size")
"""``verdict_detail`` keys naming what a prediction was anchored on (:meth:`_Attributor.
anchored`): each prediction replaces the previous one's."""

Relation = Literal["lineage", "session"]

_READLESS: frozenset[str] = frozenset({"cold", "below_minimum", "no_breakpoint", "ttl_expired"})
"""Verdicts that explain reads of at most the prediction (plus the tolerance)."""


@dataclass(frozen=True, slots=True)
class Attribution:
    """Prediction and verdict for one call.

    Attributes:
        verdict: One of the eight verdicts (``Verdict``).
        detail: Evidence for the verdict (JSON object): always ``relation``,
            ``min_cacheable_tokens``, ``granularity_tokens``, ``token_scale``,
            ``stable_prefix_tokens``; with a compared request also ``gap_s``,
            ``ttl_s``, ``tolerance_tokens``; ``client_mutation`` adds ``segment``,
            ``segment_kind``, ``path``, ``cause``, ``cause_detail``, ``offset``,
            ``lost_tokens`` (the first divergence), and every divergence in cache order
            as ``divergences`` (bounded: ``divergences_total``, ``divergences_truncated``;
            ``_divergence_detail``); reported reads as ``cache_read_tokens``; a
            prediction above 0 that rests partly on our token estimate adds
            ``estimated_span_tokens`` (our tokens between the end of the read entry and the
            nearest size the provider reported, :meth:`_Attributor.anchor`: the first read of
            an entry ending at an earlier breakpoint of a request, whose size no call has
            reported yet; the whole prefix when the provider reported no size) and
            ``estimated_span_segments`` (the segments ending in that span), which the
            report's agreement allows for (``_accounting._calls.agreement_of``).
        predicted_cache_read_tokens: Predicted cache reads (provider tokens when the provider
            reported its input total, else our tokenizer's), ``None`` when the request could
            not be segmented.
        lcp_bytes: LCP with the compared request, in segment-data bytes (``None`` without one).
        lcp_tokens: The same LCP in our tokenizer's tokens (``None`` without one).
        request_tokens: Our token estimate of the request.
        predecessor_id: ``record_id`` of the request compared with.
        read_entry_digest: Chained prefix digest of the cache entry this call read, when the
            reported reads match the predicted entry on a breakpoint cache (lets the next call
            reading the same entry predict its exact size).
        read_entry_index: The index of the segment ending that entry, with it.
        reported_sizes: The entry sizes this call's usage reports, as ``(_sizes.size_key of
            the prefix, provider tokens)`` (:meth:`_Attributor.reported_sizes`), for the
            recorder's :class:`~._sizes.ReportedSizes`.
    """

    verdict: Verdict
    detail: dict[str, Any]
    predicted_cache_read_tokens: int | None
    lcp_bytes: int | None
    lcp_tokens: int | None
    request_tokens: int | None
    predecessor_id: str | None
    read_entry_digest: str | None = None
    comparison: _Comparison | None = field(default=None, repr=False, compare=False)
    read_entry_index: int | None = None
    reported_sizes: tuple[tuple[str, int], ...] = ()

    @property
    def divergence(self) -> Divergence | None:
        """The first divergence from the compared request, if any (classified on first use)."""
        return None if self.comparison is None else self.comparison.divergence


@dataclass(frozen=True)
class _Comparison:
    """How a request relates to the request it is compared with."""

    common: int  # segments of the request fully shared with the base
    lcp_bytes: int
    lcp_tokens: int
    exact: bool  # the base's segments were known (else: estimated from fingerprints)
    # The two bodies when they diverge (exact comparisons only): what ``divergence`` diffs.
    diverged: tuple[Segmented, Segmented] | None = None
    # The base, known by its outline only (``_outline``), diverges at segment ``common``.
    cut: bool = False

    @property
    def diverges(self) -> bool:
        """The base is not a prefix of the request (its cacheable part)."""
        return self.diverged is not None or self.cut

    @cached_property
    def divergence(self) -> Divergence | None:
        """``diff(base, request)``, computed on first use: classifying the divergence and
        cutting its snippets is most of a comparison's cost, and only a ``client_mutation``
        (or the engine view) reads it, never a ``hit``. ``None`` without the base's bytes."""
        return None if self.diverged is None else diff(*self.diverged)


def base_segments(base: RequestState) -> Sequence[Segment] | None:
    """The compared request's segments: its segmented body's, else its ledger row's outline
    (``RequestState.outline``: kinds, roles, breakpoints, prefix digests; no bytes)."""
    return base.segmented.segments if base.segmented is not None else base.outline


def _total_tokens(state: RequestState | None) -> int | None:
    """Our token estimate of a compared request, when known (the sum of its segments')."""
    if state is None:
        return None
    if state.cumulative_tokens is not None:
        return state.cumulative_tokens[-1] if state.cumulative_tokens else 0
    return state.request_tokens


def _floor(value: float, granule: int) -> int:
    return int(value // granule) * granule


def _request_ttl_s(body: Mapping[str, Any], policy: CacheRules) -> int | None:
    """The TTL (seconds) an automatic cache applies to this request, ``None`` for no TTL."""
    if not policy.ttls_s:
        return None
    options = body.get("prompt_cache_options")
    if isinstance(options, Mapping):
        chosen = TTL_LABELS_S.get(str(options.get("ttl")))
        if chosen is not None:
            return chosen
    retention = body.get("prompt_cache_retention")
    if retention == "24h" and 86400 in policy.ttls_s:
        return 86400
    return policy.default_ttl_s


def _compare(base: RequestState, request: RequestState) -> _Comparison:
    """LCP and first divergence of ``request`` against ``base``."""
    seg = request.segmented
    assert seg is not None and request.segment_tokens is not None
    tokens, cum = request.segment_tokens, request.cumulative_tokens
    assert cum is not None  # made with segment_tokens
    if base.segmented is not None:
        common = first_divergent_index(base.segmented.segments, seg.segments)
        common = min(common, len(seg.segments))
        diverged = diverges(base.segmented, seg)
        nbytes = lcp_bytes(base.segmented, seg)
        lcp_tok = cum[common - 1] if common else 0
        if diverged and common < len(seg.segments):
            part = seg.segments[common]
            inside = nbytes - part.start
            if 0 < inside < part.size_bytes:
                lcp_tok += tokens[common] * inside // part.size_bytes
        return _Comparison(common, nbytes, lcp_tok, exact=True,
                           diverged=(base.segmented, seg) if diverged else None)
    if base.outline is not None:  # its row's outline: segment by segment, no bytes
        outline = base.outline
        common = outline_common(outline, seg.segments)
        cacheable = len(outline)
        while cacheable and outline[cacheable - 1].kind == "tail":
            cacheable -= 1  # as ``_diff`` drops a volatile tail
        # as ``lcp_bytes``: through the base's cacheable end when all of it is shared, else
        # through the last shared segment (its bytes would reach into the divergent one)
        end = min(common, cacheable)
        nbytes = seg.segments[end - 1].end if end else 0
        return _Comparison(common, nbytes, cum[common - 1] if common else 0, exact=True,
                           cut=common < cacheable)
    # Only the predecessor's ledger row is known: its request fingerprint names a prefix of
    # this request if the conversation only grew (chained digests); else the head is shared.
    digest = base.fingerprint.split(":", 1)[-1]
    common = next((i + 1 for i, s in enumerate(seg.segments) if s.prefix_digest == digest), 0)
    if not common and base.head_fingerprint == seg.head_fingerprint:
        common = sum(1 for s in seg.segments if s.kind in HEAD_KINDS)
    nbytes = seg.segments[common - 1].end if common else 0
    return _Comparison(common, nbytes, cum[common - 1] if common else 0, exact=False)


def attribute(
    request: RequestState,
    *,
    predecessor: RequestState | None,
    usage: CacheUsage | None,
    policy: CacheRules,
    session_previous: RequestState | None = None,
    other_conversation: bool = False,
    engine: EngineEvidence | None = None,
    unknown_reason: str | None = None,
    sizes: ReportedSizes | None = None,
) -> Attribution:
    """Predict the cache reads of ``request`` and explain the reported reads with one verdict.

    Pure: the result depends only on the arguments (the clock is ``request.ts`` minus the
    compared request's ``ts``).

    Args:
        request: The request just sent; must have ``segmented`` and ``segment_tokens``.
        predecessor: An earlier request with the same head fingerprint (same lineage), or
            ``None``: the recorder passes the one sharing the longest prefix (ties: the same
            conversation, then the most recent); the TTL clock runs from it.
        usage: The provider's normalized usage, or ``None`` when there is none (failed call).
        policy: The provider/model cache rules (minimum, granularity, TTLs, lookback).
        session_previous: The previous request of the same session/conversation when it has a
            *different* head fingerprint and there is no same-lineage predecessor: the head
            changed within the conversation (a clock in the system prompt, tool order drift,
            a model switch). It is diffed like a predecessor, and a divergence from it is a
            ``client_mutation``.
        other_conversation: ``predecessor`` belongs to another conversation that shares this
            request's head (another session, or an unnamed request with another first
            message): the request branches off the shared prefix, so losing the rest of the
            predecessor's prefix is expected, not a ``client_mutation``; only the shared part
            is predicted (``detail["other_conversation"]``). ``_tree`` passes a call of
            another lineage sharing part of the head this way (rule ``shared-prefix``).
        unknown_reason: Why the call's verdict must be ``unknown`` whatever its prefix says
            (it failed, or its answer is incomplete: ``_outcome.Outcome.unknown_reason``);
            the verdict the prefix gives is then ``detail["verdict_if_complete"]``.
        engine: The engine's own token view of this call (a self-hosted backend that can be
            asked, see ``_engine_view``), or ``None`` for an estimate. With it, on an automatic
            cache the prediction is exact: ``min(slot LCP, prompt - 1)`` engine tokens (one-token
            granularity, last token recomputed), from what the engine's slot holds (any
            lineage), also on a first call; a JSON change the engine does not see (its template
            canonicalizes it, or ``model`` on a single-model server) is no mutation
            (``engine_ignores_change``); engine tokens lost to a change inside the compared
            request's last message, its volatile tail (``stableprompt.lint``'s expected
            divergence: a clock the next turn does not repeat), are no mutation either
            (``volatile_tail_tokens``), as long as the compared request without its tail is
            a prefix of this one in engine tokens; engine tokens lost with no change in the
            JSON view, or before that tail, are the template's doing: ``provider_miss`` with
            ``reason`` ``"template-not-append-stable"`` and ``engine_divergence`` (the first
            divergent token and the text around it); a slot another request took:
            ``provider_miss`` with ``reason`` ``"slot-taken"`` and ``slot_predecessor_id``.
        sizes: Entry sizes the provider reported for earlier calls (``_sizes``): a prediction
            of an entry no call has reported yet is anchored on the nearest of them (at most
            :data:`SIZE_SCAN_SEGMENTS` segments away), when that leaves less to estimate than
            the compared request's own sizes (``detail["anchored_on_reported_size"]``: how
            far, in segments; 0 when the entry's own size was reported).

    Returns:
        The :class:`Attribution`. Checks, in order (the first that applies wins):

        0. ``unknown`` after all the checks below when ``unknown_reason`` is given (a failed
           or incomplete call): ``detail["unknown_reason"]`` is that reason and
           ``detail["verdict_if_complete"]`` the verdict the checks gave (unless ``unknown``).
        1. ``unknown``: no usage, or the provider did not report cache reads. The prediction
           and comparison are still computed and stored; ``detail["unknown_reason"]`` says why.
        2. Nothing to compare with: ``no_breakpoint`` when a breakpoint cache got a request
           without any breakpoint; ``below_minimum`` when this request's cacheable prefix (up
           to its last breakpoint for breakpoint caches, the whole prompt for automatic ones)
           is below the minimum, else ``cold``.
        3. ``below_minimum``: the compared request's cacheable prefix was below the minimum
           (nothing was cached; ``reason`` ``compared-no-breakpoint`` when it had no
           breakpoint at all), or ``no_breakpoint`` when this request has none either.
        4. ``client_mutation``: the prefix changed before the compared request's cacheable
           point: a breakpoint entry it wrote is no longer shared (breakpoint caches), or more
           than the tolerance of its prompt was lost (automatic caches); always for a changed
           head within a session; never against ``other_conversation``. ``detail`` names
           ``segment``, ``segment_kind``, ``path``, ``cause`` (one of ``_diff.CAUSES``),
           ``cause_detail``, ``offset`` and ``lost_tokens``.
        5. ``no_breakpoint``: this request has no breakpoint at all (breakpoint caches;
           ``lost_tokens``: the shared prefix it could have read, see ``unmarked``);
           ``below_minimum``: none of its breakpoints is eligible (breakpoint caches), or the
           shared prefix is below the minimum (automatic caches).

        ``lost_tokens`` (``client_mutation``, ``no_breakpoint``) is computed once, here: what
        the compared request had cached (its entries still alive at this gap) and this call
        could not read, at most what this call could have read (``lost_cap_tokens``: its
        input total less its reads). The report shows it as stored.
        6. ``client_mutation`` with ``cause`` ``lookback-exceeded`` (breakpoint caches): the
           shared entries are more than ``lookback_blocks`` blocks before every breakpoint of
           this request, so the provider cannot find them.
        7. ``ttl_expired``: the gap to the compared request exceeds the TTL of the best
           readable entry, unless the reads still match the prediction without the TTL (then
           ``hit`` with ``read_after_ttl``).
        8. ``hit`` when reads are at least the prediction minus the tolerance (``detail``
           flags ``reads_above_prediction`` when they exceed it by more than the tolerance),
           else ``client_mutation`` with ``cause`` ``header-change`` when a cache-relevant
           header changed (below), else ``provider_miss`` (``missing_tokens``).

        Headers: the allow-listed headers of the request and of the compared request
        (``RequestState.headers``, :data:`~stableprompt._policy.CACHE_HEADERS`) are compared
        as the provider reads them (``anthropic-beta`` as a set: a reordered list is no
        change); every change is ``detail["header_changes"]``
        (:func:`~stableprompt._policy.header_changes`), whatever the verdict.

        Whatever the verdict, a reported input total implausible against our estimate of
        the request (:func:`~stableprompt._recording._plausibility.usage_suspicion`: an
        inclusive count in an exclusive field doubles it) adds ``usage_suspect``,
        ``usage_ratio``, ``usage_ratio_bounds`` and ``usage_suspect_reason``.

        A verdict never contradicts the reported writes: ``below_minimum`` with a reported
        cache write of at least the minimum becomes ``cold`` (``unexpected_writes``).
        Nor the reported reads: ``cold``, ``below_minimum`` or
        ``ttl_expired`` with reads above the prediction plus the tolerance becomes ``hit``
        with ``detail["unexpected_reads"]`` (and ``expected_verdict``: the verdict the prefix
        alone gives; ``reads_without_known_predecessor`` / ``read_after_ttl`` say which).

        "Breakpoints sent, nothing written" (breakpoint caches): when this request's longest
        breakpoint prefix reaches :data:`IGNORED_BREAKPOINTS_MARGIN` times the minimum and the
        provider reports ``cache_read_tokens == 0`` and ``cache_write_tokens == 0``, the
        markers did not reach a cache (a gateway stripped ``cache_control``, a server ignores
        it): an eligible breakpoint always reads or writes, even after an eviction, a TTL
        expiry or a prefix change. The verdict is ``provider_miss`` with
        ``detail["reason"] == "breakpoints-ignored"``, ``breakpoint_prefix_tokens`` and
        ``expected_verdict`` (what the prefix alone gives), **also on the first call of a
        lineage**: ``cold`` means "an expected write", and a call that wrote nothing
        despite eligible breakpoints is not one. A ``client_mutation`` keeps its verdict (the
        harness changed the prefix) and gets ``breakpoints_ignored``. And a predecessor
        whose breakpoints were that far above the minimum is never anchored on a reported
        extent of 0 (``predecessor_wrote_nothing``): the prediction is our estimate, so the
        next call is a ``provider_miss`` too, not a ``hit`` of 0 reads predicted as 0.

    Raises:
        ValueError: ``request`` has no segmented body or token counts.
    """
    if request.segmented is None or request.segment_tokens is None:
        raise ValueError("attribute() needs a request with segmented and segment_tokens")
    found = _Attributor(request, predecessor, session_previous, usage, policy,
                        other_conversation, engine, sizes).run()
    if unknown_reason is None:
        return found
    detail = {**found.detail, "unknown_reason": unknown_reason}
    if found.verdict != "unknown":
        detail["verdict_if_complete"] = found.verdict
    return replace(found, verdict="unknown", detail=detail)


class _Attributor:
    """One attribution run (holds the intermediate numbers shared by the checks)."""

    def __init__(
        self,
        request: RequestState,
        predecessor: RequestState | None,
        session_previous: RequestState | None,
        usage: CacheUsage | None,
        policy: CacheRules,
        other_conversation: bool = False,
        engine: EngineEvidence | None = None,
        sizes: ReportedSizes | None = None,
    ) -> None:
        assert request.segmented is not None and request.segment_tokens is not None
        self.sizes = sizes
        self.request = request
        self.seg = request.segmented
        self.tokens = request.segment_tokens
        assert request.cumulative_tokens is not None  # made with segment_tokens
        self.cum: Sequence[int] = request.cumulative_tokens
        self.request_tokens = self.cum[-1] if self.cum else 0
        self.usage = usage
        self.policy = policy
        self.reads = usage.cache_read_tokens if usage is not None else None
        total = usage.input_tokens_total if usage is not None else None
        self.total = total if total is not None and self.reads is not None else None
        self.scale = (
            self.total / self.request_tokens if self.total and self.request_tokens else 1.0
        )
        self.granule = policy.granularity_tokens
        self.minimum = policy.min_cacheable_tokens
        reference = total if total is not None else self.request_tokens
        self.tolerance = self.granule + math.ceil(TOLERANCE_FRACTION * reference)
        self.base: RequestState | None
        self.relation: Relation | None
        if predecessor is not None:
            self.base, self.relation = predecessor, "lineage"
        elif session_previous is not None:
            self.base, self.relation = session_previous, "session"
        else:
            self.base, self.relation = None, None
        self.comparison: _Comparison | None = None
        self.base_tokens = _total_tokens(self.base)
        self.header_changes = [] if self.base is None else header_changes(
            self.base.headers, request.headers)
        self.read_entry: str | None = None
        self.read_entry_index: int | None = None
        self.base_ignored = False  # the base sent breakpoints well above the minimum
        # Our tokens of the predicted read that rest on our estimate (the latest anchored()
        # prediction's, or the automatic LCP's): ``detail["estimated_span_tokens"]``.
        self.estimated_span = 0.0
        self.estimated_segments = 0
        # breakpoints(): the arguments of anchored() for the prediction as if no entry had
        # expired (measured() repeats it when the provider read the expired entry anyway)
        self.no_ttl_prediction: tuple[float, float | None, int | None] | None = None
        self.detail: dict[str, Any] = {
            "relation": self.relation,
            "min_cacheable_tokens": self.minimum,
            "granularity_tokens": self.granule,
            "token_scale": round(self.scale, 4),
        }
        self.other = other_conversation and self.relation == "lineage"
        self.engine = engine
        if engine is not None:
            self.detail.update(token_view="engine", engine_prompt_tokens=engine.prompt_tokens,
                               engine_slot_lcp_tokens=engine.slot_lcp_tokens)
            if engine.replayed_reply_tokens:
                self.detail["replayed_reply_tokens"] = engine.replayed_reply_tokens
        if self.other:
            self.detail["other_conversation"] = True
        if self.reads is not None:
            self.detail["cache_read_tokens"] = self.reads
        if self.header_changes:
            self.detail["header_changes"] = self.header_changes
        suspect = usage_suspicion(usage, self.request_tokens, self.seg.segments,
                                  self.seg.segment_bytes)
        if suspect is not None:
            self.detail.update(suspect)

    def provider(self, tokens: float, space: Literal["request", "base"] = "request",
                 extent: tuple[float, int] | None = None) -> int:
        """Provider tokens of the prefix whose size is ``tokens`` (our estimate) of this request
        (``space="request"``) or of the compared request (``"base"``).

        Anchored, never scaled: the provider's reported prompt size (this request's
        ``input_tokens_total``, or the compared request's when the prefix is shared with it),
        or the size of the compared request's longest cache entry (``extent``: its end in our
        tokens and the provider's ``cache_read + cache_write`` of it, when the prefix ends
        inside it), minus our estimate of the remainder after the prefix, choosing the anchor
        with the smallest remainder; only that remainder is estimated (token density varies
        0.33x to 1.42x by content, ``reference/ENGINES.md``, so no request-wide scale can make
        a per-prefix count exact). Our own estimate where no size was reported.
        """
        return self.anchor(tokens, space, extent)[0]

    def anchor(self, tokens: float, space: Literal["request", "base"] = "request",
               extent: tuple[float, int] | None = None,
               known: tuple[float, int] | None = None) -> tuple[int, float, int]:
        """:meth:`provider` and the span it estimated: ``(provider tokens, our tokens of the
        remainder between the prefix's end and the reported size it was anchored on, the
        segments that remainder holds)``; the span is 0 when the count is a reported size, the
        whole prefix when nothing was reported. ``known``: another reported size in the
        compared request's space (:meth:`nearest_reported`): ``(its end less the prefix's end,
        in our tokens: negative when it ends before the prefix; its provider tokens)``."""
        if tokens <= 0:
            return 0, 0.0, 0
        comparison = self.comparison
        shared = comparison is not None and tokens <= comparison.lcp_tokens
        base, base_tokens = self.base, self.base_tokens
        base_cum = None if base is None else base.cumulative_tokens
        # (remainder in our tokens, reported size, running sums of the anchor's request)
        best: tuple[float, int, Sequence[int] | None] | None = None
        if extent is not None and tokens <= extent[0]:
            best = (extent[0] - tokens, extent[1], base_cum)
        if (space == "request" or shared) and self.total is not None and (
                best is None or self.request_tokens - tokens < best[0]):
            best = (self.request_tokens - tokens, self.total, self.cum)
        if ((space == "base" or shared) and base is not None
                and base.input_tokens_total is not None and base_tokens is not None):
            remainder = base_tokens - tokens
            if best is None or remainder < best[0]:
                best = (remainder, base.input_tokens_total, base_cum)
        if known is not None and (best is None or abs(known[0]) < best[0]):
            best = (known[0], known[1], base_cum)
        if best is None:
            cum = self.cum if space == "request" else base_cum
            return (math.floor(tokens + 1e-9), float(tokens),
                    bisect_right(cum, tokens) if cum else 1)
        remainder, reported, cum = best
        segments = 0
        if remainder:  # the segment ends inside the span (1 when the ends are unknown)
            low, high = sorted((tokens, tokens + remainder))
            segments = (bisect_right(cum, high) - bisect_right(cum, low) if cum else 1) or 1
        count = math.floor(reported - remainder + 1e-9)
        return (max(0, count if remainder < 0 else min(reported, count)), abs(remainder),
                segments)

    def nearest_reported(self, index: int) -> tuple[float, int, int] | None:
        """The reported size (:attr:`sizes`) nearest in our tokens to the end of the compared
        request's segment ``index`` (not in segments: one long tool result after it is farther
        than a few short blocks before it), searched at most :data:`SIZE_SCAN_SEGMENTS`
        segments either way:
        ``(its end less that segment's end in our tokens, its provider tokens, how many
        segments away)``, or ``None``."""
        sizes, base = self.sizes, self.base
        if not sizes or base is None or base.cumulative_tokens is None:
            return None
        segments = base_segments(base)
        if segments is None:
            return None
        cum, n = base.cumulative_tokens, len(segments)
        found: tuple[float, int, int] | None = None
        for way in (1, -1):  # the first reported size each way; the nearer in tokens wins
            for step in range(SIZE_SCAN_SEGMENTS + 1):
                j = index + way * step
                if not 0 <= j < n or (found is not None
                                      and abs(cum[j] - cum[index]) >= abs(found[0])):
                    break
                size = sizes.get(size_key(segments[j].prefix_digest))
                if size is not None:
                    found = (cum[j] - cum[index], size, step)
                    break
        return found

    def entry_size(self, index: int, tokens: float) -> int:
        """Provider tokens of the compared request's entry ending at its segment ``index``
        (``tokens``, our estimate of it), as far as whether it reaches the minimum goes: the
        larger of :meth:`provider` in its space and the count anchored on the nearest reported
        size (:meth:`nearest_reported`). Our estimate of a long history after the entry can put
        it far under the minimum although a size reported a few tokens away is above it."""
        near = self.nearest_reported(index)
        estimate = self.provider(tokens, "base")
        if near is None:
            return estimate
        return max(estimate, self.anchor(tokens, "base", None, near[:2])[0])

    def implicit_breakpoint_tokens(self) -> int | None:
        """Our token count up to the predecessor's implicit breakpoint ("at the end of the latest
        eligible user or tool message", OpenAI GPT-5.6+: models with a breakpoint budget in an
        automatic policy), or ``None`` when the policy has no implicit breakpoints.

        Source: developers.openai.com/api/docs/guides/prompt-caching (model differences table).
        """
        base = self.base
        segments = None if base is None else base_segments(base)
        if (not self.policy.breakpoint_budget or base is None or segments is None
                or base.cumulative_tokens is None):
            return None
        ends = [i for i, s in enumerate(segments)
                if s.kind == "message" and s.label in ("user", "tool")]
        return base.cumulative_tokens[ends[-1]] if ends else None

    def anchored(self, tokens: float, base_extent: float | None,
                 entry_index: int | None = None) -> int:
        """Predicted reads for a shared prefix of ``tokens`` (our estimate), floored to the
        granularity. When the prefix reaches the end of the predecessor's longest entry
        (``base_extent`` in our tokens), the provider's own count of that entry
        (``cached_extent_tokens``) is exact, and is used instead of the scaled estimate. When
        the entry read now (``entry_index``, in the predecessor's segments) is the segment
        boundary closest to what the predecessor itself read (``cache_read_tokens``), the same
        entry is being read again: its reported size is exact too."""
        base = self.base
        if entry_index is not None and base is not None and base.segmented is not None:
            self.read_entry = base.segmented.segments[entry_index].prefix_digest
            self.read_entry_index = entry_index
        elif (entry_index is not None and base is not None and base.outline is not None
              and entry_index < len(self.seg.segments)):
            # A shared entry: this request's own (full) digest names the same prefix.
            self.read_entry = self.seg.segments[entry_index].prefix_digest
            self.read_entry_index = entry_index
        self.estimated_span = 0.0
        for key in _ANCHOR_KEYS:  # the evidence of the latest prediction only
            self.detail.pop(key, None)
        exact = None if base is None else base.cached_extent_tokens
        if exact == 0 and self.base_ignored:
            # "Breakpoints sent, nothing written": the predecessor's reported 0 is the
            # gateway's, not the size of an entry; predict from our estimate instead.
            self.detail["predecessor_wrote_nothing"] = True
            exact = None
        if exact is not None and base_extent is not None and tokens and tokens >= base_extent:
            self.detail["anchored_on_predecessor"] = True
            return _floor(exact, self.granule)
        if (entry_index is not None and base is not None and base.cache_read_tokens
                and self.read_entry == base.read_entry_digest):
            self.detail["anchored_on_predecessor_read"] = True
            return _floor(base.cache_read_tokens, self.granule)
        # A prefix inside the predecessor's entry: the nearest reported count is that entry's
        # own size, so only the part of the entry after the prefix is estimated.
        extent = None if exact is None or base_extent is None else (base_extent, exact)
        near = None if entry_index is None else self.nearest_reported(entry_index)
        count, self.estimated_span, self.estimated_segments = self.anchor(
            tokens, "base", extent, None if near is None else near[:2])
        if near is not None and abs(near[0]) == self.estimated_span:
            self.detail["anchored_on_reported_size"] = near[2]
        return _floor(count, self.granule)

    # ------------------------------------------------------------------ results

    def done(self, verdict: Verdict, predicted: int) -> Attribution:
        comparison = self.comparison
        reads = self.reads
        if (verdict in _READLESS and reads is not None
                and reads > predicted + self.tolerance):
            # The provider read more than this verdict allows: say so rather than contradict it.
            self.detail.update(unexpected_reads=True, expected_verdict=verdict,
                               tolerance_tokens=self.tolerance)
            if verdict == "ttl_expired":
                self.detail["read_after_ttl"] = True
            verdict = "hit"
        writes = None if self.usage is None else self.usage.cache_write_tokens
        if verdict in ("below_minimum", "no_breakpoint") and writes and writes >= self.minimum:
            # The provider wrote a cache entry: the prefix was cacheable after all (our token
            # estimate fell just under the minimum). A first write is a cold call.
            self.detail.update(unexpected_writes=True, expected_verdict=verdict)
            verdict = "cold"
        ignored = self.ignored_breakpoint_tokens()
        if ignored is not None:
            # Breakpoints sent, nothing written: an eligible breakpoint always writes (or
            # reads) an entry, even after an eviction, a TTL expiry or a client mutation.
            self.detail["breakpoint_prefix_tokens"] = ignored
            if verdict == "client_mutation":
                self.detail["breakpoints_ignored"] = True
            else:
                self.detail["reason"] = "breakpoints-ignored"
                if verdict != "provider_miss":
                    self.detail["expected_verdict"] = verdict
                verdict = "provider_miss"
        if predicted > 0 and self.estimated_span > 0 and self.engine is None:
            self.detail["estimated_span_tokens"] = math.ceil(self.estimated_span)
            self.detail["estimated_span_segments"] = self.estimated_segments
        head = self.head_tokens()
        if head is not None:
            self.detail["head_tokens"] = head
        if self.reads is None:
            usage = self.usage
            self.detail["unknown_reason"] = (
                "no usage (the call failed or returned no usage object)"
                if usage is None
                else usage.unknown_reason or "the provider did not report cache reads"
            )
            self.detail["verdict_without_usage"] = verdict
            verdict = "unknown"
        return Attribution(
            verdict=verdict,
            detail=self.detail,
            predicted_cache_read_tokens=predicted,
            lcp_bytes=None if comparison is None else comparison.lcp_bytes,
            lcp_tokens=None if comparison is None else comparison.lcp_tokens,
            request_tokens=self.request_tokens,
            predecessor_id=None if self.base is None else self.base.record_id,
            read_entry_digest=self.read_entry if self.read_matches(predicted) else None,
            comparison=comparison,
            read_entry_index=self.read_entry_index if self.read_matches(predicted) else None,
            reported_sizes=self.reported_sizes(predicted),
        )

    def reported_sizes(self, predicted: int) -> tuple[tuple[str, int], ...]:
        """The entry sizes this call's usage reports, on a breakpoint cache (entries end at
        breakpoints; not an automatic one, whose reads end at a granule): ``cache_read +
        cache_write`` is the size of the prefix up to the last breakpoint (the longest: it
        is written, or read, whenever anything is), and a read that matched the predicted
        entry is that entry's size. None from a suspect usage report or without both
        numbers."""
        usage = self.usage
        if (self.policy.automatic or self.engine is not None or usage is None
                or usage.cache_read_tokens is None or usage.cache_write_tokens is None
                or "usage_suspect" in self.detail):
            return ()
        own = breakpoint_indices(self.seg)
        found = list(extent_size(self.seg.segments[own[-1]] if own else None,
                                 usage.cache_read_tokens, usage.cache_write_tokens))
        reads = self.reads
        if self.read_entry is not None and reads and predicted:
            # the predicted entry's size, when the read is that entry (within what the
            # estimate allows: a looser match could be another entry's size)
            allowed = self.granule - 1
            if self.estimated_span > 0:
                allowed += estimate_allowance_tokens(
                    math.ceil(self.estimated_span), self.estimated_segments, self.scale) or 0
            if abs(reads - predicted) <= allowed:
                found.append((size_key(self.read_entry), reads))
        return tuple(found)

    def head_tokens(self) -> int | None:
        """Provider tokens of the request's head: every segment before its first message
        (params, tools, system), what a breakpoint placed on the head caches; ``None`` when
        the request has no message (the head is the whole request) or no head. Stored as
        ``detail["head_tokens"]`` for the what-if replay of per-place TTLs
        (``_accounting._what_if``)."""
        for index, segment in enumerate(self.seg.segments):
            if segment.kind in ("message", "tail"):
                return self.provider(self.cum[index - 1]) if index and self.cum else None
        return None

    def ignored_breakpoint_tokens(self) -> int | None:
        """Breakpoint caches: the longest breakpoint prefix of this request (provider-scaled
        tokens) when it reaches :data:`IGNORED_BREAKPOINTS_MARGIN` times the minimum and the
        provider reported reading 0 *and* writing 0 (both fields sent); else ``None``."""
        usage = self.usage
        if (self.policy.automatic or usage is None or usage.cache_read_tokens != 0
                or usage.cache_write_tokens != 0):
            return None
        own = breakpoint_indices(self.seg)
        top = self.provider(self.cum[own[-1]]) if own else 0
        return top if own and top >= self.minimum * IGNORED_BREAKPOINTS_MARGIN else None

    def content_shape(self, div: Divergence) -> str | None:
        """When the mutation is a message re-sent in the other content shape (a string vs one
        text block, same text): the content-shape rule's finding, with its source
        (:data:`stableprompt._policy.CONTENT_SHAPES`), else ``None``."""
        base = None if self.base is None else self.base.segmented
        seg, i = self.seg, div.segment_index
        if base is None or div.segment_kind != "message" or i >= len(seg.segments):
            return None
        x, y = base.segments[i], seg.segments[i]
        if not content_shape_change(base.data[x.start:x.end], seg.data[y.start:y.end]):
            return None
        rule = content_shape_rule(self.policy.provider)
        if rule is None or rule.cache_alike:
            return "content shape changed (string vs one text block)"
        return (f"content shape changed (string vs one text block): treated as different; "
                f"{rule.finding} ({rule.source}; {rule.as_of})")

    def read_matches(self, predicted: int) -> bool:
        """The reported reads are the predicted entry (within the tolerance)."""
        return bool(self.reads and predicted and abs(self.reads - predicted) <= self.tolerance)

    def mutation(self, predicted: int, lost: int, cause: str | None = None) -> Attribution:
        div = None if self.comparison is None else self.comparison.divergence
        if cause is None and div is not None:
            self.detail.update(
                segment=div.segment,
                segment_kind=div.segment_kind,
                path=div.path,
                cause=div.cause,
                cause_detail=div.detail,
                offset=div.offset,
            )
            segmented = None if self.base is None else self.base.segmented
            if segmented is not None:  # the report's before/after, cut as lint cuts it
                snippet = value_snippet(segmented, self.seg, div)  # (redacted)
                self.detail.update(snippet_a=snippet.snippet_a, snippet_b=snippet.snippet_b,
                                   value_offset=snippet.value_offset)
            shape = self.content_shape(div)
            if shape is not None:
                self.detail["content_shape"] = shape
        elif cause is None and self.comparison is not None and self.comparison.cut:
            # The predecessor's row outline only: the divergent segment, not its bytes.
            common = self.comparison.common
            if common < len(self.seg.segments):
                part = self.seg.segments[common]
                self.detail.update(segment=part.name, segment_kind=part.kind, path=part.path)
            self.detail["predecessor_body"] = (
                "segment digests only (content not stored): the changed segment is known, "
                "not its bytes")
        elif cause is not None:
            self.detail["cause"] = cause
        self.detail["lost_tokens"] = self.lost_here(lost)
        base = self.base
        if cause is None and div is not None and base is not None:
            self.detail.update(ledger_divergences(base, self.seg, self.detail["lost_tokens"],
                                                  div))
        return self.done("client_mutation", predicted)

    def measured(self, predicted: int, predicted_no_ttl: int, expired: bool) -> Attribution:
        """Compare the reported reads with the prediction (steps 7 and 8)."""
        reads, tolerance = self.reads, self.tolerance
        if expired:
            if reads is not None and predicted_no_ttl and reads >= predicted_no_ttl - tolerance:
                self.detail["read_after_ttl"] = True
                if self.no_ttl_prediction is not None:
                    # the entry read, its estimated span and anchor are the no-TTL
                    # prediction's, not the alive entry's computed after it
                    self.anchored(*self.no_ttl_prediction)
                return self.done("hit", predicted_no_ttl)
            self.detail["expired_tokens"] = predicted_no_ttl - predicted
            return self.done("ttl_expired", predicted)
        if reads is None or reads >= predicted - tolerance:
            if reads is not None and reads > predicted + tolerance:
                self.detail["reads_above_prediction"] = True
            return self.done("hit", predicted)
        if self.header_changes:
            return self.header_mutation(predicted, predicted - reads)
        self.detail["missing_tokens"] = predicted - reads
        return self.done("provider_miss", predicted)

    def header_mutation(self, predicted: int, lost: int) -> Attribution:
        """A miss on an unchanged prefix whose cache-relevant headers changed (a beta
        dropped or added, another API version): the change is the cause (``header-change``),
        named like a body parameter's (``segment`` ``headers``, ``path`` ``/headers/<name>``,
        the values before and after as snippets). Not predicted as a miss beforehand: no
        provider documents which header changes void a cached prefix."""
        change = self.header_changes[0]
        name = str(change["header"])
        self.detail.update(segment="headers", segment_kind="header", path=f"/headers/{name}",
                           cause="header-change", cause_detail=describe_header_change(change),
                           snippet_a=change.get("before") or "",
                           snippet_b=change.get("after") or "")
        self.detail["lost_tokens"] = self.lost_here(lost)
        return self.done("client_mutation", predicted)

    # ------------------------------------------------------------------ checks

    def run(self) -> Attribution:
        if self.base is None:
            return self.first()
        comparison = self.comparison = _compare(self.base, self.request)
        self.detail["gap_s"] = round(self.request.ts - self.base.ts, 3)
        self.detail["tolerance_tokens"] = self.tolerance
        self.detail["lcp_tokens_scaled"] = self.provider(comparison.lcp_tokens)
        if not comparison.exact:
            self.detail["predecessor_body"] = "unknown (ledger row only): shared prefix estimated"
        if self.policy.automatic:
            return self.automatic() if self.engine is None else self.engine_automatic()
        return self.breakpoints()

    def first(self) -> Attribution:
        """No predecessor and no changed-head session request (step 2)."""
        own = breakpoint_indices(self.seg)
        if self.policy.automatic:
            cacheable = self.provider(self.request_tokens)
        else:
            cacheable = self.provider(self.cum[own[-1]]) if own else 0
            if not own:
                self.detail["reason"] = "no-breakpoint"
        self.detail["stable_prefix_tokens"] = cacheable
        if self.reads:
            self.detail["reads_without_known_predecessor"] = True
        predicted = 0 if self.engine is None else self.engine_predicted()
        if not self.policy.automatic and not own:
            return self.unmarked()
        return self.done("below_minimum" if cacheable < self.minimum else "cold", predicted)

    def unmarked(self) -> Attribution:
        """``no_breakpoint``: a breakpoint cache got a request without a single cache
        breakpoint, so it could cache nothing whatever its length. ``lost_tokens``: what it
        could have read had it marked its end, the prefix it shares with the compared request
        (provider tokens) within the default TTL, floored to the granularity, 0 below the
        minimum, less what it read; 0 without a compared request."""
        self.detail["reason"] = "no-breakpoint"
        shared = 0
        base, comparison = self.base, self.comparison
        ttl = self.policy.default_ttl_s if self.policy.ttls_s else None
        if base is not None and comparison is not None and (
                ttl is None or self.request.ts - base.ts <= ttl):
            shared = _floor(self.provider(comparison.lcp_tokens), self.granule)
        self.detail["lost_tokens"] = self.lost_here(shared if shared >= self.minimum else 0)
        return self.done("no_breakpoint", 0)

    def lost_here(self, lost: float) -> int:
        """``lost`` (provider tokens the compared request cached and this one could not read)
        as this call lost it: at most what this call could have read (its reported input total,
        else our estimate, less what it read), never negative. The one computation of a
        call's lost tokens: the report shows it as stored. Adds ``lost_cap_tokens`` (that
        bound)."""
        own = self.total if self.total is not None else self.provider(self.request_tokens)
        cap = max(own - (self.reads or 0), 0)
        self.detail["lost_cap_tokens"] = cap
        return max(0, min(math.floor(lost), cap))

    def ttl_of(self, segment: Segment) -> int | None:
        if not self.policy.ttls_s:
            return None
        return TTL_LABELS_S.get(segment.breakpoint or "", self.policy.default_ttl_s)

    def breakpoints(self) -> Attribution:
        """Breakpoint caches (Anthropic, Bedrock): entries exist only at breakpoints."""
        base, comparison, seg, cum = self.base, self.comparison, self.seg, self.cum
        assert base is not None and comparison is not None
        gap_s = self.request.ts - base.ts
        # Entries the base wrote, as (index, segment, our prefix tokens), base index space.
        entries: list[tuple[int, Segment, int]] = []
        known = base_segments(base)
        if known is not None and base.cumulative_tokens is not None:
            base_cum = base.cumulative_tokens
            segments = known
            entries = [(i, segments[i], base_cum[i])
                       for i in (breakpoint_indices(base.segmented) if base.segmented is not None
                                 else [i for i, s in enumerate(known) if s.breakpoint])]
            read_at = base.read_entry_index
            if (read_at is not None and read_at < len(segments)
                    and segments[read_at].prefix_digest == base.read_entry_digest
                    and all(i != read_at for i, _, _ in entries)):
                # The entry the base read (another request wrote it; the base refreshed it),
                # though the base has no breakpoint there: readable again, exact size known.
                entries = sorted([*entries, (read_at, segments[read_at], base_cum[read_at])],
                                 key=lambda e: e[0])
        elif comparison.common:  # ledger row only: assume an entry at the end of the match
            last = comparison.common - 1
            entries = [(last, seg.segments[last], cum[last])]
        written = [e for e in entries if self.entry_size(e[0], e[2]) >= self.minimum]
        extent = max((self.provider(t, "base") for _, _, t in entries), default=0)
        self.base_ignored = known is not None and (
            extent >= self.minimum * IGNORED_BREAKPOINTS_MARGIN)
        self.detail["stable_prefix_tokens"] = extent
        shared = [e for e in written if e[0] < comparison.common]
        lost = [e for e in written if e[0] >= comparison.common]
        own = breakpoint_indices(seg)
        eligible = [i for i in own if self.provider(cum[i]) >= self.minimum]
        position = _BlockPositions(seg.segments)
        lookback = self.policy.lookback_blocks or len(seg.segments) + 1
        readable = [
            e for e in shared
            if any(b >= e[0] and position[b] - position[e[0]] < lookback for b in eligible)
        ]
        alive = [e for e in readable if (ttl := self.ttl_of(e[1])) is None or gap_s <= ttl]
        last_entry = entries[-1][2] if entries else None
        top_readable = max(readable, key=lambda e: e[2], default=None)
        top_alive = max(alive, key=lambda e: e[2], default=None)
        no_ttl = (top_readable[2] if top_readable else 0, last_entry,
                  top_readable[0] if top_readable else None)
        predicted_no_ttl = self.anchored(*no_ttl)
        predicted = self.anchored(top_alive[2] if top_alive else 0, last_entry,
                                  top_alive[0] if top_alive else None)
        self.no_ttl_prediction = no_ttl
        best = max(readable, key=lambda e: e[2], default=None)
        self.detail["ttl_s"] = self.ttl_of(best[1]) if best else self.policy.default_ttl_s

        if not written and extent < self.minimum:  # no entry of the compared request did
            if not own:
                return self.unmarked()
            if not entries:  # this request marks its prefix: the compared one did not
                self.detail["reason"] = "compared-no-breakpoint"
            return self.done("below_minimum", 0)
        diverged = comparison.diverges
        if diverged and (self.relation == "session" or (lost and not self.other)):
            kept = max((t for *_, t in shared), default=0)
            # What the change cost: entries the base wrote that were still alive now.
            top = max((t for _, s, t in written
                       if (ttl := self.ttl_of(s)) is None or gap_s <= ttl), default=0)
            return self.mutation(predicted, max(self.provider(top, "base")
                                                - self.provider(kept, "base"), 0))
        if not own:
            return self.unmarked()
        if not eligible:
            self.detail["reason"] = "breakpoints-below-minimum"
            return self.done("below_minimum", 0)
        if shared and not readable:
            far = max(i for i, _, _ in shared)
            self.detail["segment"] = seg.segments[far].name
            self.detail["lookback_blocks"] = lookback
            after = [b for b in eligible if b >= far]
            if after:
                self.detail["breakpoint_distance_blocks"] = position[min(after)] - position[far]
            return self.mutation(0, self.provider(max(t for *_, t in shared), "base"),
                                 cause="lookback-exceeded")
        expired = bool(readable) and predicted < predicted_no_ttl
        return self.measured(predicted, predicted_no_ttl, expired)

    def automatic(self) -> Attribution:
        """Automatic caches (OpenAI, DeepSeek, vLLM, SGLang, llama.cpp): any shared prefix."""
        base, comparison = self.base, self.comparison
        assert base is not None and comparison is not None
        gap_s = self.request.ts - base.ts
        extent = (base.input_tokens_total if base.input_tokens_total is not None
                  else self.provider(self.base_tokens or 0, "base"))
        lcp, self.estimated_span, self.estimated_segments = self.anchor(comparison.lcp_tokens)
        diverged = comparison.diverges
        self.detail["stable_prefix_tokens"] = lcp
        ttl_s = _request_ttl_s(self.seg._body_view, self.policy)
        self.detail["ttl_s"] = ttl_s
        usable = lcp
        if self.policy.recompute_last_token:
            usable = min(lcp, self.provider(self.request_tokens) - 1)
            if usable < lcp:  # this request's reported total, less its last token
                self.estimated_span = 0.0
        predicted_no_ttl = _floor(max(usable, 0), self.granule)
        implicit_end = self.implicit_breakpoint_tokens()
        if implicit_end is not None and usable == lcp:
            # Entries exist only at breakpoints: the predecessor's own (exact when fully shared),
            # else the entry the predecessor itself read, else none.
            earlier = base.cache_read_tokens or 0
            if comparison.lcp_tokens >= implicit_end:
                predicted_no_ttl = self.anchored(comparison.lcp_tokens, implicit_end)
            else:  # the predecessor's reported read, or nothing
                predicted_no_ttl = _floor(earlier if lcp >= earlier else 0, self.granule)
                self.estimated_span = 0.0
        if predicted_no_ttl < self.minimum:
            predicted_no_ttl = 0
        expired = ttl_s is not None and gap_s > ttl_s
        predicted = 0 if expired else predicted_no_ttl

        if extent < self.minimum:
            self.detail["stable_prefix_tokens"] = extent
            return self.done("below_minimum", 0)
        if diverged and (self.relation == "session" or (
                not self.other and extent - lcp > self.tolerance)):
            return self.mutation(predicted, 0 if expired else extent - lcp)
        if lcp < self.minimum:
            return self.done("below_minimum", 0)
        return self.measured(predicted, predicted_no_ttl, expired)


    def engine_predicted(self) -> int:
        """The engine's exact reuse: the slot LCP, less the last prompt token where the engine
        recomputes it, floored to the granularity, 0 below the minimum."""
        engine = self.engine
        assert engine is not None
        usable = engine.slot_lcp_tokens
        if self.policy.recompute_last_token:
            usable = min(usable, engine.prompt_tokens - 1)
        predicted = _floor(max(usable, 0), self.granule)
        return predicted if predicted >= self.minimum else 0

    def engine_automatic(self) -> Attribution:
        """Automatic caches the engine tokenized for us: exact counts, the template's order."""
        base, comparison, engine = self.base, self.comparison, self.engine
        assert base is not None and comparison is not None and engine is not None
        predicted = self.engine_predicted()
        if engine.base_tokens is None or engine.base_lcp_tokens is None:
            # The compared request has no engine view (a ledger row): estimate its part.
            extent = (base.input_tokens_total if base.input_tokens_total is not None
                      else self.provider(self.base_tokens or 0, "base"))
            lcp = self.provider(comparison.lcp_tokens)
        else:
            extent, lcp = engine.base_tokens, min(engine.base_lcp_tokens, engine.base_tokens)
        self.detail["stable_prefix_tokens"] = lcp
        self.detail["ttl_s"] = None
        if engine.divergence is not None:
            self.detail["engine_divergence"] = engine.divergence
        if extent < self.minimum:
            self.detail["stable_prefix_tokens"] = extent
            return self.done("below_minimum", 0)
        div = comparison.divergence
        lost = extent - lcp
        if lost > 0 and div is not None and base.segmented is not None and \
                is_expected_divergence(base.segmented, self.seg, div):
            # The predecessor's volatile tail (its last message: a clock the next turn does
            # not repeat, as stableprompt renders it): the one loss an append-only harness has,
            # unless the engine lost more than the tail (the compared prompt without its tail
            # is still no prefix of this one): then the template re-rendered earlier content.
            cut, kept = engine.untailed_tokens, engine.untailed_lcp_tokens
            if cut is not None and kept is not None and kept < cut:
                self.detail.update(reason="template-not-append-stable", lost_tokens=cut - kept,
                                   missing_tokens=cut - kept, volatile_tail_tokens=lost - (
                                       cut - kept))
                if engine.untailed_divergence is not None:
                    self.detail["engine_divergence"] = engine.untailed_divergence
                return self.done("provider_miss", predicted)
            self.detail["volatile_tail_tokens"] = lost
        elif lost > 0 and div is not None and (self.relation == "session" or not self.other):
            return self.mutation(predicted, lost)  # engine tokens, capped as the others
        if div is not None and lost <= 0:
            # The engine's template canonicalizes what changed (or ignores it: ``model`` on a
            # single-model server): nothing of the prompt it caches was lost.
            self.detail["engine_ignores_change"] = {"segment": div.segment, "path": div.path,
                                                    "cause": div.cause}
        if lost > 0 and div is None:
            self.detail.update(reason="template-not-append-stable", lost_tokens=lost,
                               missing_tokens=lost)
            return self.done("provider_miss", predicted)
        expected = min(lcp, engine.prompt_tokens - 1) if self.policy.recompute_last_token \
            else lcp
        if engine.slot_record_id != base.record_id and predicted < expected:
            self.detail.update(reason="slot-taken", slot_predecessor_id=engine.slot_record_id,
                               missing_tokens=expected - predicted)
            return self.done("provider_miss", predicted)
        return self.measured(predicted, predicted, False)


class _BlockPositions:
    """Block index of each segment: cache-key parameters are not blocks (Anthropic counts
    tools, system blocks and message content blocks). Segmenters add the params first
    (``SegmentBuilder.params`` before anything else), so segment ``i`` is block
    ``max(i - params, 0)``: O(params) to build, O(1) per lookup."""

    def __init__(self, segments: Sequence[Segment]) -> None:
        params = 0
        for s in segments:
            if s.kind != "param":
                break
            params += 1
        self._params = params

    def __getitem__(self, index: int) -> int:
        return max(index - self._params, 0)
