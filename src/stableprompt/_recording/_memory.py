"""What a recorder remembers of earlier calls, and how it learns more of them.

A :class:`CallMemory` holds, per :class:`~stableprompt.Recorder`:

- the predecessor index (:class:`~stableprompt._recording._predecessor.CallIndex`): recent
  finished calls by lineage and conversation, seeded from the ledger on first sight of a
  lineage (:meth:`CallMemory.load_lineage`, the lineage's :data:`LINEAGE_DEPTH` newest rows)
  and of a named session (:meth:`CallMemory.ledger_turns`, its highest turn);
- the lineage segments (:class:`~stableprompt._wire._resegment.LineageSegments`): what the
  previous request of each lineage was made of, so a new request is segmented and counted
  from what it adds (its repeated segments are the stored ones, their token counts reused);
- the token counter (memoized by segment digest);
- what a local engine's slots hold after each call (:class:`SlotMemory`, for the engine's
  own token view of the next one: :meth:`CallMemory.engine_view`).

:meth:`CallMemory.analyse` is the request half of a call's recording (segments, token counts,
turn, predecessor); :meth:`CallMemory.remember` keeps a finished call as a future
predecessor. A ledger that cannot be read is logged once per memory and the in-memory state
is used; nothing here raises into the user's call.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from array import array
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._canonical import loads
from .._ledger._ledger import Ledger
from .._ledger._usage_record import UsageRecord
from .._policy import PolicyTable
from .._redact import redact
from .._tokens import EstimatingTokenCounter
from .._usage import CacheUsage
from .._wire._formats import reply_text, segment_request
from .._wire._resegment import LineageSegments, Resegmented
from .._wire._segmenter import SegmentedRequest
from ._boundary import turn_boundary
from ._call import Call, Pending, RequestState
from ._engine_view import EngineEvidence, EngineTokens, SlotMemory, observe_engine
from ._outline import MAX_DEPTH, Outline, decode_outline, row_outline
from ._predecessor import LINEAGE_DEPTH, CallIndex, call_from_record, opening_of
from ._sizes import ReportedSizes, row_sizes

OUTLINE_CACHE = 4096
"""Decoded ledger-row outlines a recorder keeps by record id (the bases of delta outlines)."""

__all__ = ["ENGINE_PROVIDER", "CallMemory"]

_log = logging.getLogger("stableprompt.recorder")

ENGINE_PROVIDER = "llama-cpp"
"""The provider family whose calls a recorder's ``engine`` tokenizes."""


class CallMemory:
    """The predecessor index, lineage segments and token counter of one recorder (module
    docstring). Thread-safe as its parts are (the recorder's calls may come from several
    threads).

    Args:
        counter: The recorder's token counter.
        window_s: How long an unnamed conversation's last call stays its continuation
            (``Recorder(session_window_s=...)``), seconds.
        slots: What the engine's slots hold (``Recorder(engine_slots=...)``).
        policies: The recorder's cache-policy table: which rows read from a ledger report
            entry sizes (breakpoint caches, :func:`~._sizes.row_sizes`).
    """

    def __init__(self, counter: EstimatingTokenCounter, *, window_s: float,
                 slots: SlotMemory, policies: PolicyTable | None = None) -> None:
        self.counter = counter
        self.slots = slots
        self.policies = policies or PolicyTable()
        self.index = CallIndex(window_s=window_s)
        self.sizes = ReportedSizes()  # entry sizes the provider reported (``_sizes``)
        # decoded outlines of ledger rows, by record id: the bases of delta outlines
        self._outlines: OrderedDict[str, Outline] = OrderedDict()
        self.segments = LineageSegments()
        self._lookup_warned = False

    def count(self, segmented: SegmentedRequest, reused: int = 0,
              previous: Sequence[int] | None = None) -> list[int]:
        """Token counts per segment of ``segmented``; the first ``reused`` are
        ``previous``'s (the same segments, counted for the lineage's previous request)."""
        data, segments = segmented.segment_bytes, segmented.segments
        counts = list(previous[:reused]) if previous is not None and reused else []
        count = self.counter.count
        counts.extend(count(data[s.start : s.end], digest=s.digest)
                      for s in segments[len(counts):])
        return counts

    def segment_rendered(self, wire_format: str, content: bytes) -> Resegmented | None:
        """Segment a body stableprompt rendered from what its lineage's previous request
        held (:meth:`LineageSegments.segment_rendered
        <stableprompt._wire._resegment.LineageSegments.segment_rendered>`); ``None`` when it
        continues no recorded request. Never raises."""
        try:
            return self.segments.segment_rendered(wire_format, content)
        except Exception:
            return None

    def decode(self, wire: str | None, body: bytes | bytearray | memoryview
               ) -> tuple[Any, Resegmented | None]:
        """``body`` decoded, and its segmenting when it continues a recorded request
        (:meth:`segment_rendered`: its body's view, ``SegmentedRequest._body_view``, rebuilt
        from that request's values and the new items, only those decoded, and no list of its
        history made). Rendered bodies and an official SDK's alike: a body not rendered here
        continues one only once the earlier body's bytes were found to be its compact dump
        (``LineageSegments.segment_captured``, checked on first reuse), so the transport path
        stops parsing (and making, for the garbage collector to promote) the whole
        conversation's objects on every call.

        Raises:
            ValueError: ``body`` is not JSON.
        """
        content = bytes(body)
        found = self.segment_rendered(wire, content) if wire else None
        return (loads(content) if found is None else found.segmented._body_view), found

    def compared_response_id(self, call: Call, body: Any, ledger: Ledger | None,
                             segmented: SegmentedRequest | None = None) -> str | None:
        """The provider response id of the request a request with ``body`` (decoded; or its
        ``segmented`` form when the caller has it, e.g. a rendered turn's body view), sent as
        ``call`` (no fingerprint or state yet), would be compared with (:meth:`analyse`'s
        choice, nothing registered). Raises what segmenting raises."""
        if segmented is None:
            segmented = segment_request(call.wire_format, body)
        state = RequestState(ts=call.ts, fingerprint=segmented.fingerprint,
                             head_fingerprint=segmented.head_fingerprint, segmented=segmented)
        self.load_lineage(ledger, state.head_fingerprint)
        base = self.index.compare(dataclasses.replace(
            call, opening=opening_of(segmented), fingerprint=state.fingerprint,
            state=state)).base
        return None if base is None else base.response_id

    def analyse(self, pending: Pending, body: dict[str, Any],
                raw: bytes | bytearray | memoryview, resegmented: Resegmented | None, *,
                rendered: bool, ledger: Ledger | None,
                problem: Callable[[Pending, BaseException], None],
                across_heads: bool = False) -> None:
        """Segment and count ``pending``'s request, number its turn and choose its
        predecessor (``pending.state``, ``.call``, ``.turn``, ``.retry``, ``.comparison``,
        ``.turn_boundary``).

        ``body`` is the decoded request (or ``resegmented``'s body view), ``raw`` its bytes
        (kept so that the next request of the lineage is segmented from its new items; bytes
        not ``rendered`` here are checked to be the body's compact dump first),
        ``resegmented`` its segmenting when the caller made it; a segmenting failure is
        handed to ``problem`` and the call goes on without segments. ``ledger`` is read for
        the conversation's earlier turns and the lineage's recent rows, once each.
        ``across_heads``: the model's cache keeps entries inside segments
        (:meth:`CallIndex.compare`).
        """
        segmented: SegmentedRequest | None = None
        pending.turn_boundary = turn_boundary(pending.wire_format, body)
        try:
            found = resegmented if resegmented is not None and \
                resegmented.segmented.wire_format == pending.wire_format else \
                self.segments.segment(
                    pending.wire_format, body if resegmented is None else
                    resegmented.segmented.body, content=bytes(raw), checked=rendered)
            segmented = found.segmented
            tokens = self.count(segmented, found.reused, found.previous_tokens)
            state = pending.state = RequestState.of(
                segmented, tokens, pending.ts, record_id=pending.record_id,
                reused=found.reused if found.previous_tokens is not None else 0,
                previous_cumulative=found.previous_cumulative, headers=pending.headers)
            self.segments.remember_tokens(segmented, state.segment_tokens or (),
                                          state.cumulative_tokens)
        except Exception as exc:
            problem(pending, exc)
        chained = body.get("previous_response_id") if pending.session_id is None else None
        if isinstance(chained, str) and chained:  # a Responses chain names its conversation
            pending.session_id = self.index.chained_session(chained)
        call = pending.call = Call(
            ts=pending.ts, session_id=pending.session_id, provider=pending.provider,
            wire_format=pending.wire_format, model=pending.model,
            agent=None if pending.agent is None else pending.agent.id,
            opening=opening_of(segmented),
            fingerprint=None if segmented is None else segmented.fingerprint,
            state=pending.state)
        earlier = 0
        if pending.session_id is not None and (
                not self.index.knows_session(pending.session_id)
                or (ledger is not None and ledger.shared)):
            earlier = self.ledger_turns(ledger, pending.session_id)
        pending.turn, pending.retry = self.index.begin(call, earlier_turns=earlier)
        if pending.state is not None:
            self.load_lineage(ledger, pending.state.head_fingerprint)
            pending.comparison = self.index.compare(call, across_heads=across_heads)
            branch = pending.comparison.detail.get("agent")
            if pending.agent is None and isinstance(branch, dict) and branch.get("id"):
                # a branch the branch rule named: its own conversation in its session (its
                # calls do not stand for the main agent's previous call)
                call = pending.call = dataclasses.replace(call, agent=str(branch["id"]))
            continued = pending.comparison.predecessor_turn
            if continued is not None and not pending.retry:
                # A rewritten first message continues the conversation it was compared with.
                pending.turn = continued + 1
                self.index.renumber(call, pending.turn)

    def remember(self, pending: Pending, usage: CacheUsage | None, response_id: str | None,
                 read_entry_digest: str | None = None,
                 engine: tuple[EngineEvidence, array[int]] | None = None, *,
                 ended: float, read_entry_index: int | None = None,
                 sizes: tuple[tuple[str, int], ...] = ()) -> None:
        """Keep a complete, successful call as a future predecessor, with what its response
        said (usage, response id; ``ended``: the recorder's clock at its end; ``sizes``: the
        entry sizes its usage reports, ``Attribution.reported_sizes``) and, with an engine
        view (:meth:`engine_view`), as what the engine's slot now holds."""
        if pending.state is None or pending.call is None:
            return
        self.sizes.add(sizes)
        depth = row_outline(pending)[1]  # how its row stores its outline
        held: dict[str, Any] = {}
        if engine is not None:
            evidence, content = engine
            self.slots.remember(pending.record_id, content, evidence.slot_record_id,
                                evidence.prompt_tokens)
            held = {"engine_tokens": content, "engine_prompt_tokens": evidence.prompt_tokens}
        read = None if usage is None else usage.cache_read_tokens
        write = None if usage is None else usage.cache_write_tokens
        state = dataclasses.replace(
            pending.state, response_id=response_id,
            cached_extent_tokens=read + write if read is not None and write is not None else None,
            cache_read_tokens=read, read_entry_digest=read_entry_digest,
            read_entry_index=read_entry_index if read_entry_digest is not None else None,
            input_tokens_total=None if usage is None else usage.input_tokens_total,
            outline_depth=depth, **held)
        self.index.remember(dataclasses.replace(pending.call, state=state, turn=pending.turn,
                                                ended=ended))

    def engine_view(self, engine: EngineTokens | None, pending: Pending, response: Any,
                    success: bool, usage: CacheUsage | None, detail: dict[str, Any]
                    ) -> tuple[EngineEvidence, array[int]] | None:
        """Ask ``engine`` for its token view of the call (``None`` without an engine, for
        another provider than :data:`ENGINE_PROVIDER`, or when it cannot answer:
        ``detail["engine_view_error"]``).

        Returns the evidence for attribution and what the slot holds after the call (prompt
        tokens, then the reply's tokens when the call succeeded)."""
        state = pending.state
        if (engine is None or state is None or state.segmented is None
                or pending.provider != ENGINE_PROVIDER):
            return None
        try:
            return observe_engine(
                engine, self.slots, pending.wire_format, state, pending.comparison.base,
                reply_text(pending.wire_format, response) if success else None, detail,
                None if usage is None else usage.output_tokens)
        except Exception as exc:
            detail["engine_view_error"] = redact(f"{type(exc).__name__}: {exc}",
                                                 secrets=pending.secrets)
            return None

    def ledger_turns(self, ledger: Ledger | None, session_id: str) -> int:
        """The highest turn of a named session already in ``ledger`` (a resumed
        conversation); 0 without one or when it cannot be read."""
        if ledger is None:
            return 0
        try:
            return max((r.turn or 0 for r in ledger.iter_records(
                session_id=session_id, on_invalid=lambda row, exc: self._lookup_failed(
                    exc, row))), default=0)
        except Exception as exc:
            self._lookup_failed(exc)
            return 0

    def load_lineage(self, ledger: Ledger | None, head: str) -> None:
        """Seed the index with the lineage's recent ``ledger`` rows, once per lineage (a
        failed, interrupted or unreadable row is never a predecessor). A shared ledger
        (``Ledger.shared``: other hosts write it) is read again before every comparison, and
        the rows other processes stored meanwhile join the lineage."""
        if ledger is None:
            return
        known = self.index.knows_lineage(head)
        if known and not ledger.shared:
            return
        try:
            # a row that does not decode (hand-edited) is skipped, not the whole lineage
            rows = ledger.recent_for_lineage(
                head, limit=LINEAGE_DEPTH,
                on_invalid=lambda row, exc: self._lookup_failed(exc, row))
        except Exception as exc:
            self._lookup_failed(exc)
            rows = []
        seen = self.index.lineage_ids(head) if known else set()
        kept = [r for r in reversed(rows) if r.error_class is None
                and not r.verdict_detail.get("incomplete") and r.record_id not in seen]
        batch = {r.record_id: r for r in rows}
        resolve = functools.partial(self._outline_of, ledger, batch)
        calls = [call_from_record(r, head, self.count, resolve) for r in kept]
        for row, call in zip(kept, calls, strict=True):  # what other processes were told
            if call.state is not None:
                self.sizes.add(row_sizes(row, call.state, self.policies))
        if known:
            if calls:
                self.index.merge_lineage(head, calls)
        else:
            self.index.load_lineage(head, calls)

    def _outline_of(self, ledger: Ledger, batch: Mapping[str, UsageRecord], record_id: str,
                    depth: int = 0) -> Outline | None:
        """The decoded outline of row ``record_id`` (a delta outline's base): from the rows
        decoded before, the lineage's rows just read (``batch``), else the ledger; ``None``
        when it is not there, has none, or its chain is deeper than ``_outline.MAX_DEPTH``."""
        found = self._outlines.get(record_id)
        if found is not None:
            self._outlines.move_to_end(record_id)
            return found
        if depth > MAX_DEPTH:
            return None
        row = batch.get(record_id)
        if row is None:
            try:
                rows = ledger.records_by_id([record_id], on_invalid=lambda r, exc: None)
            except Exception as exc:
                self._lookup_failed(exc)
                return None
            row = rows[0] if rows else None
        if row is None or row.segment_digests is None:
            return None
        found = decode_outline(row.segment_digests, functools.partial(
            self._outline_of, ledger, batch, depth=depth + 1))
        if found is not None:
            self._outlines[record_id] = found
            while len(self._outlines) > OUTLINE_CACHE:
                self._outlines.popitem(last=False)
        return found

    def _lookup_failed(self, exc: BaseException, row: str | None = None) -> None:
        if not self._lookup_warned:  # once per recorder: a broken ledger must not flood logs
            self._lookup_warned = True
            if row is not None:
                _log.warning("ledger row %s skipped, it does not decode (logged once): %s: %s",
                             redact(row), type(exc).__name__, redact(str(exc))[:300])
                return
            _log.warning("ledger lookup failed (logged once; in-memory state is used): %s: %s",
                         type(exc).__name__, redact(str(exc)))
