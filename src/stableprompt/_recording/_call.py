"""The values of one call, stage by stage: what is known before sending, then after.

- :class:`RequestState`: one sent request as attribution sees it (segments, our token
  estimates, the provider's cache counters once answered).
- :class:`Call`: one call as the :class:`~stableprompt._recording._predecessor.CallIndex`
  sees it (conversation, lineage, turn).
- :class:`Comparison`: what a request is compared with (chosen by the index).
- :class:`Pending`: a call in flight, from :meth:`Recorder.start
  <stableprompt.Recorder.start>` to :meth:`Recorder.finish <stableprompt.Recorder.finish>`.

The first three are frozen slotted values (changed copies with :func:`dataclasses.replace`);
:class:`Pending` is the one mutable holder, filled in while the call is analysed and finished.
Times are seconds (epoch seconds for ``ts``, the monotonic clock for ``started``); token
counts are our tokenizer's estimates unless a field says "provider-reported".
"""

from __future__ import annotations

import contextlib
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, islice
from typing import Any

from .._ledger._usage_record import UsageRecord
from .._segment import Segment
from .._wire._segmenter import SegmentedRequest
from ._identity import Agent
from ._worker import JobHandle, in_recording_job

__all__ = ["Call", "Comparison", "Pending", "RequestState", "elapsed_ms"]


@dataclass(frozen=True, slots=True)
class RequestState:
    """What attribution knows about one request that was sent.

    Attributes:
        ts: Send time, seconds since the epoch (the recorder's clock).
        fingerprint: Request fingerprint (``sp2:...``).
        head_fingerprint: Head fingerprint: the cache lineage.
        segmented: The segmented request body, or ``None`` when only a ledger row is known
            (a predecessor from an earlier process without stored content).
        segment_tokens: Our token estimate per segment (same order as ``segmented.segments``),
            or ``None`` with ``segmented``. An ``array("q")`` whatever sequence was given (as
            ``cumulative_tokens``): one per segment of a request remembered as a predecessor,
            and the garbage collector traverses an array in one step, a tuple of ints item by
            item until its first collection.
        request_tokens: Our token estimate of the whole request, when known.
        record_id: The ledger ``record_id`` of this request, when it has one.
        response_id: The provider's message/response id, when known.
        cached_extent_tokens: Provider-reported ``cache_read + cache_write`` of this request
            (provider tokens): the length of the longest cache entry it read or wrote. Used to
            anchor the next prediction on the provider's own count instead of our estimate.
            ``None`` when the provider does not report writes.
        cache_read_tokens: Provider-reported cache reads of this request (the entry it read).
        engine_tokens: What a self-hosted engine's slot held after this request: its prompt
            in the engine's own tokens followed by the tokens of the generated reply
            (``_engine_view``), ``None`` without an engine view.
        engine_prompt_tokens: The prompt's part of ``engine_tokens`` (engine tokens).
        input_tokens_total: Provider-reported prompt size of this request (all input tokens,
            cached or not): the anchor of the next request's prediction (only the part after
            the shared prefix is then estimated).
        read_entry_digest: Prefix digest of the entry this request read (from its own hit
            attribution), so a later request reading the same entry predicts its exact size.
        headers: The request's allow-listed cache-relevant headers (``_http.cache_headers``:
            ``anthropic-beta``, ``anthropic-version``, ...), compared like cache-key body
            parameters; ``None`` when unknown.
        read_entry_index: The index of the segment ending that entry in this request (the
            entry can be read again by a later request that shares it, though this request
            wrote no breakpoint there: Claude Code moves its message breakpoint each turn).
        cumulative_tokens: Running sums of ``segment_tokens`` (``[i]``: our tokens of segments
            ``0..i``), made once per request when not given and carried by
            :func:`dataclasses.replace` (which never changes ``segment_tokens``), so
            attribution reads prefix sizes of a request and of its predecessor without
            summing them again. ``None`` with ``segment_tokens``.
        outline: The segments of a request known from its ledger row's ``segment_digests``
            (``_outline``: kind, role, breakpoint and a 16-byte prefix digest each; no bytes),
            when ``segmented`` is ``None``; ``segment_tokens`` are then the row's counts.
            Attribution compares a request with it segment by segment, as with ``segmented``.
        outline_depth: How its ledger row stores its outline: 0 whole, ``n`` a delta ``n``
            rows deep (``_outline.row_outline``), ``None`` without one (too many segments,
            not analysed, a row from before schema v4): a later row may be stored as a delta
            of this one only when it is not ``None``.
    """

    ts: float
    fingerprint: str
    head_fingerprint: str
    segmented: SegmentedRequest | None = None
    segment_tokens: Sequence[int] | None = None
    request_tokens: int | None = None
    record_id: str | None = None
    response_id: str | None = None
    cached_extent_tokens: int | None = None
    cache_read_tokens: int | None = None
    input_tokens_total: int | None = None
    engine_tokens: Sequence[int] | None = None
    engine_prompt_tokens: int | None = None
    read_entry_digest: str | None = None
    headers: Mapping[str, str] | None = None
    read_entry_index: int | None = None
    cumulative_tokens: Sequence[int] | None = field(default=None, repr=False, compare=False)
    outline: Sequence[Segment] | None = field(default=None, repr=False)
    outline_depth: int | None = None

    def __post_init__(self) -> None:
        tokens = self.segment_tokens
        if tokens is not None and not isinstance(tokens, array):
            object.__setattr__(self, "segment_tokens", tokens := array("q", tokens))
        cumulative = self.cumulative_tokens
        if cumulative is None and tokens is not None:
            object.__setattr__(self, "cumulative_tokens", array("q", accumulate(tokens)))
        elif cumulative is not None and not isinstance(cumulative, array):
            object.__setattr__(self, "cumulative_tokens", array("q", cumulative))

    @classmethod
    def of(
        cls,
        segmented: SegmentedRequest,
        segment_tokens: Sequence[int],
        ts: float,
        *,
        record_id: str | None = None,
        response_id: str | None = None,
        reused: int = 0,
        previous_cumulative: Sequence[int] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> RequestState:
        """Build the state of a request whose body and token counts are known.

        ``reused`` / ``previous_cumulative``: the first ``reused`` counts are those of a
        request whose running sums are ``previous_cumulative`` (the lineage's previous
        request, ``_resegment``): its sums are taken over and only the rest are added up.

        Raises:
            ValueError: ``segment_tokens`` does not have one count per segment.
        """
        tokens = array("q", segment_tokens)
        if len(tokens) != len(segmented.segments):
            raise ValueError(
                f"segment_tokens has {len(tokens)} counts for {len(segmented.segments)} segments"
            )
        if reused and previous_cumulative is not None and len(previous_cumulative) >= reused:
            cumulative = array("q", previous_cumulative[:reused])
            cumulative.extend(islice(accumulate(tokens[reused:], initial=cumulative[-1]), 1,
                                     None))
        else:
            cumulative = array("q", accumulate(tokens))
        return cls(
            ts=ts,
            fingerprint=segmented.fingerprint,
            head_fingerprint=segmented.head_fingerprint,
            segmented=segmented,
            segment_tokens=tokens,
            cumulative_tokens=cumulative,
            request_tokens=cumulative[-1] if cumulative else 0,
            record_id=record_id,
            response_id=response_id,
            headers=headers,
        )


@dataclass(frozen=True, slots=True)
class Call:
    """One call as the index sees it.

    Attributes:
        ts: Send time, epoch seconds.
        session_id: Named session, or ``None``.
        provider: Provider family.
        wire_format: Request format (``anthropic``, ``openai-chat``, ``openai-responses``).
        model: Requested model, if any.
        opening: :func:`opening_of` the request.
        fingerprint: Request fingerprint, ``None`` when the body could not be segmented.
        state: What attribution needs (``None`` when the body could not be analysed).
        turn: Turn number given by :meth:`CallIndex.begin`.
        ended: When the response ended, epoch seconds (the recorder's clock at finish),
            ``None`` before (or when unknown: then ``ts`` stands in).
        agent: The agent of the session other than its main one that sent the request
            (``_identity.Agent.id``, from the harness's headers; else the branch rule's
            ``_predecessor.branch_id``), ``None`` for the main agent.
    """

    ts: float
    session_id: str | None
    provider: str
    wire_format: str
    model: str | None
    opening: str | None
    fingerprint: str | None = None
    state: RequestState | None = None
    turn: int | None = None
    ended: float | None = None
    agent: str | None = None

    def same_conversation(self, other: Call) -> bool:
        """Same named session and agent; without session ids: same wire format, model and
        opening."""
        if self.session_id is not None or other.session_id is not None:
            return self.session_id == other.session_id and self.agent == other.agent
        return (self.opening is not None and self.opening == other.opening
                and self.wire_format == other.wire_format and self.model == other.model)


@dataclass(frozen=True, slots=True)
class Comparison:
    """What a request is compared with (at most one of the two is set).

    Attributes:
        predecessor: The chosen same-lineage call's state.
        other_conversation: ``predecessor`` belongs to another conversation.
        session_previous: The conversation's previous successful call, whose head differs.
        common_segments: Segments shared with ``predecessor`` (0 without one).
        rule: Which rule chose the compared request (``_predecessor.PREDECESSOR_RULES``),
            ``None`` without one.
        detail: Evidence for ``verdict_detail`` about the request's place in the
            conversation tree (``_predecessor``: ``agent``, ``shares``), empty without.
        predecessor_turn: The turn of ``predecessor`` when ``rule`` says the request
            continues its conversation under a rewritten first message
            (``"same-head-recent"``), else ``None``.
    """

    predecessor: RequestState | None = None
    other_conversation: bool = False
    session_previous: RequestState | None = None
    common_segments: int = 0
    rule: str | None = None
    predecessor_turn: int | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    @property
    def base(self) -> RequestState | None:
        """The compared request, if any."""
        return self.predecessor or self.session_previous


def elapsed_ms(started: float, now: float) -> float:
    """Milliseconds from ``started`` to ``now`` (monotonic seconds), never negative: a call's
    latency however late it is recorded (inline, on a recording thread, in a journal)."""
    return max((now - started) * 1000.0, 0.0)


_NO_COMPARISON = Comparison()


@dataclass(eq=False, slots=True)
class Pending:
    """A call in flight: everything :meth:`Recorder.finish` needs, taken before sending.

    Attributes:
        record_id: The record id this call will get.
        ts: Send time, seconds since the epoch (the recorder's clock).
        started: Monotonic clock reading at send time (seconds), for latency and TTFT.
        path: URL path.
        wire_format: Request format (``anthropic``, ``openai-chat``, ``openai-responses``).
        usage_format: Usage parser (``_wire._formats.usage_format``).
        provider: Provider family.
        model: Requested model, if any.
        session_id: Session id recorded, if any (``None``: no session named; the
            conversation is then recognized by its first message, see ``_predecessor``).
        agent: The agent other than the session's main one that the request's headers name
            (``_identity.agent_from_headers``), if any.
        turn: 1-based turn of the request in its conversation (a named session resumed in a
            new process continues from its ledger rows); a retry keeps its turn.
        retry: The request repeats its conversation's previous request (same fingerprint,
            within ``_predecessor.RETRY_WINDOW_S`` seconds).
        state: The request as attribution sees it, ``None`` when it could not be segmented.
        comparison: What the request is compared with (predecessor or session_previous).
        diagnostics_requested: The provider-diagnostics request fields in the body, if any.
        content: Request body text when ``store_content`` is on.
        turn_boundary: ``"intra"`` (after a tool result) or ``"cross"`` (after a user
            message), ``None`` when unknown (``_boundary.turn_boundary``).
        problem: Why the request could not be analysed, if it could not.
        record: The record, once finished.
        finished: :meth:`Recorder.finish <stableprompt.Recorder.finish>` ran (it runs once).
        secrets: The request's credential header values, scrubbed from every stored text.
        headers: The request's allow-listed cache-relevant headers
            (``_http.cache_headers``), ``None`` for a format without any.
        call: The call as registered in the recorder's index, ``None`` before analysis.
        deferred: What :meth:`Recorder.analyse <stableprompt.Recorder.analyse>` still has to
            read, when :meth:`Recorder.start <stableprompt.Recorder.start>` was told to defer
            the analysis (``None`` once analysed).
        detail: Evidence the sender adds to ``verdict_detail`` (``stabilized``: the rewrites
            a stabilizing transport made, ``_stabilize``).
        lazy_body: The body is not decoded yet (``start(..., decode=False)``, until the
            analysis read it): ``model`` and ``diagnostics_requested`` are ``None`` and
            ``session_id`` is only the recorder's or the session header's meanwhile.
        finishing: The handle of the job that finishes the call on a recording thread
            (``_deferred``), once it was queued; ``None`` inline.
        journal_identity: The request's part of the call's provisional row
            (``_unanalysed.provisional_identity``), made by its analysis job when the call is
            journaled, so the caller's thread only adds what the response said; ``None``
            before (the caller then makes it).
        outline: The segment outline of ``state`` as last encoded (``_outline.row_outline``:
            the provisional and the final row share one encoding), with the state it was
            encoded from and its delta depth; ``None`` before.
    """

    record_id: str
    ts: float
    started: float
    path: str
    wire_format: str
    usage_format: str
    provider: str
    model: str | None = None
    session_id: str | None = None
    agent: Agent | None = None
    turn: int | None = None
    retry: bool = False
    state: RequestState | None = None
    comparison: Comparison = _NO_COMPARISON  # frozen: one for every call compared with none
    diagnostics_requested: dict[str, Any] | None = None
    content: str | None = None
    turn_boundary: str | None = None
    problem: str | None = None
    record: UsageRecord | None = None
    finished: bool = field(default=False, repr=False)
    secrets: tuple[str, ...] = field(default=(), repr=False)
    headers: dict[str, str] | None = None
    call: Call | None = field(default=None, repr=False)
    detail: dict[str, Any] = field(default_factory=dict)
    deferred: tuple[Any, ...] | None = field(default=None, repr=False)
    lazy_body: bool = field(default=False, repr=False)
    finishing: JobHandle | None = field(default=None, repr=False)
    journal_identity: dict[str, Any] | None = field(default=None, repr=False)
    outline: tuple[RequestState, str | None, int | None] | None = field(default=None,
                                                                          repr=False)

    def wait(self, timeout_s: float | None = None) -> UsageRecord | None:
        """:attr:`record`, after waiting at most ``timeout_s`` seconds (``None``: no limit)
        for the job that finishes the call on a recording thread, when one was queued; the
        record is ``None`` while the call is not finished (its stream still open) or when
        the time ran out, and is not waited for from a recording job (a record sink: the job
        is behind its own). Never raises."""
        job = self.finishing
        if job is not None and not in_recording_job():
            with contextlib.suppress(Exception):  # a timeout: the record is not there yet
                job.result(timeout_s)
        return self.record

    @property
    def predecessor(self) -> RequestState | None:
        """The same-lineage request this call is compared with, if any."""
        return self.comparison.predecessor

    @property
    def session_previous(self) -> RequestState | None:
        """The conversation's previous request (another head) compared with, if any."""
        return self.comparison.session_previous

