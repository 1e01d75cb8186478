"""Which earlier call a request is compared with, and which turn of its conversation it is.

:class:`CallIndex` is the recorder's bounded, thread-safe memory of recent calls:

- **Per cache lineage** (head fingerprint): the last :data:`LINEAGE_DEPTH` successful calls.
  A request's predecessor is the one sharing the longest prefix of segments with it (chained
  digests, so one binary search each: :func:`~stableprompt._diff.first_divergent_index`),
  preferring the same conversation on ties, then the most recent. Two conversations that share
  a system prompt are therefore compared only with their own earlier turns, and a new
  conversation is compared with the call that shares most of its prefix; the TTL clock runs
  from that call.
- **Per named session**: the turn count and the latest call sent, and the latest successful
  call per (provider, wire format), for head changes within the conversation.
- **Calls without a session id**: there is no implicit global session. Such a call belongs to
  the conversation of a recent call (within the window) with the same wire format, model and
  first message (the digest of the first ``message`` segment), if there is one.
- **A rewritten first message** (no session id; a compaction that re-summarizes the first
  message, the head unchanged): the first message no longer names the conversation, so the
  request would look like another conversation sharing the head. It is the same conversation
  rewritten (rule ``same-head-recent``) when the most recent call on its head, from a call
  without session id with the same provider, wire format and model, *ended* at most
  :data:`REWRITE_WINDOW_S` before this request was sent (a harness continues its own
  conversation right after the answer; a concurrent request is no continuation), the request
  extends no recent call (no call of its own conversation is a candidate), and it carries that
  call's conversation over: a user or tool message after its first message is byte-identical
  to one after that call's first message. A genuinely new conversation opens with its own
  messages only, so it stays another conversation sharing the head.
  Limit: a compaction that keeps nothing but a summary (no message carried over) is still
  taken for a new conversation.

A request whose fingerprint equals its conversation's previous request, sent within
:data:`RETRY_WINDOW_S`, is a retry: it keeps that request's turn number.

**Conversations as a tree.** A conversation is a session *and agent*: a subagent named by
the harness's headers (``_identity``) is its own conversation within its session. Across
lineages, calls are indexed by the chained prefix digest of their entry-ending segments
(each breakpoint, and the end of each head part: params, tools, system), at most
:data:`PREFIX_INDEX_SIZE` digests, each with the lineage of the most recent call holding it
(:class:`_Prefixes`; a call adds the digests of its breakpoints, and of its head parts only
when its lineage is new to the index: cost in proportion to what is new). A request with no
same-conversation candidate on its lineage looks up its own such digests, deepest first, and
is compared with the most recent call sharing the deepest one (rule ``shared-prefix``, as
another conversation): a new session sharing part of another session's head (Claude Code's
static system block before a per-directory one, each behind a breakpoint) is predicted to
read up to the last shared breakpoint the provider can find, and says what it shares
(``verdict_detail["shared_prefix"]``, ``_tree``).

**Response chains.** A request without session id that continues a response
(``previous_response_id``, OpenAI Responses) belongs to the session of the call that got
that response; when that call had none, the chain is named by its first response id
(:meth:`CallIndex.chained_session`, at most ``max_keys`` response ids kept).

**Branches.** A request whose head differs from its conversation's previous request is that
conversation's head change (rule ``session-head-change``, diffed as a mutation) unless it is
a new branch, a subagent or side agent the headers did not name: another first message and a
fresh conversation or a head replaced wholesale (:func:`~stableprompt._economics.
_request_kind.is_branch`, the rule the what-if uses too). A branch is compared like a new
conversation (a shared prefix, else nothing) and says so (``verdict_detail["agent"]``); it is
an agent of its own (:func:`branch_id`, from its head), so its later calls continue it and the
main agent's previous call stays the main agent's.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from .._canonical import loads
from .._diff import first_divergent_index
from .._economics._request_kind import is_branch
from .._ledger._usage_record import UsageRecord
from .._segment import HEAD_KINDS, Segment
from .._wire._formats import REQUEST_FORMATS, request_format, segment_request, session_hint
from .._wire._resegment import breakpoint_indices
from .._wire._segmenter import SegmentedRequest
from ._call import Call, Comparison, RequestState
from ._identity import session_from_headers
from ._outline import Outline, decode_outline, outline_common

__all__ = [
    "LINEAGE_DEPTH",
    "PREDECESSOR_RULES",
    "PREFIX_INDEX_SIZE",
    "RETRY_WINDOW_S",
    "REWRITE_WINDOW_S",
    "CallIndex",
    "call_from_record",
    "common_segments",
    "entry_ends",
    "opening_of",
    "session_from_request",
]

LINEAGE_DEPTH = 32
"""Successful calls kept per cache lineage as predecessor candidates."""

DONE_PER_CONVERSATION = 4
"""Successful calls kept per conversation without session id for its head changes (the
newest with the same provider is the one read; each holds its request state)."""

RETRY_WINDOW_S = 120.0
"""Seconds within which an identical request (same request fingerprint) is a retry of its
conversation's previous request. Covers client backoff and ``retry-after`` waits (<= 60 s)."""

REWRITE_WINDOW_S = 30.0
"""Seconds from the end of the most recent call on a head to a request without session id
within which a request with a rewritten first message (and a message carried over) is taken
as the same conversation rewritten (rule ``same-head-recent``), not another conversation.

Why 30 s: a harness sends its next request as soon as it has the previous answer (a
compaction writes its summary back and continues at once; "calls a few seconds apart" in
the compaction spirals of issue 9); tool runs in between take seconds to tens of seconds.
The window is measured from the *end* of the previous call, so a request sent while that
call was still running (another user's conversation) never qualifies, and it is short
against the 5-minute TTL, so a late unrelated conversation is not taken for a rewrite. The
carried-over message is the main evidence; the window bounds coincidences."""

PREDECESSOR_RULES = ("same-conversation", "other-conversation", "same-head-recent",
                     "session-head-change", "shared-prefix", "other-head-prefix")
"""Values of ``Comparison.rule`` (``verdict_detail["predecessor_rule"]``): the longest-prefix
call of the request's own conversation; the longest-prefix call of another conversation
sharing the head; the most recent call on the head, whose conversation this request rewrote
(see the module docstring); the conversation's previous call under another head; with no
call of its own conversation on its lineage, the most recent call of another lineage sharing
the deepest entry-ending prefix (a cache whose entries end at segment ends: breakpoints, the
end of params / tools / system); for such a request on a cache whose entries end anywhere
inside a segment (``CacheRules.implicit_interval_tokens``: Gemini, GPT-5.5), where an
entry-ending digest cannot find them, the call of another head (same provider, wire format
and model) sharing the most leading segments with it."""

PREFIX_INDEX_SIZE = 8192
"""Entry-ending prefix digests kept across lineages for the ``shared-prefix`` search (the
least recently written dropped beyond it), each with its lineage (a head fingerprint: the
calls are those the index keeps per lineage, no request is kept alive by this map)."""

ACROSS_HEADS_LINEAGES = 512
"""Most recently used lineages searched for an ``other-head-prefix`` comparison (one newest
call each): the search runs only for a request no lineage call or session call explains."""

_HEAD_PARTS = ("param", "tool", "system")

_CARRIED_ROLES = ("user", "tool")


def opening_of(segmented: SegmentedRequest | None) -> str | None:
    """Digest of the first ``message`` segment's bytes (not chained: independent of the head),
    or ``None`` without messages. Names a conversation when no session id does."""
    if segmented is None:
        return None
    return next((s.digest for s in segmented.segments if s.kind == "message"), None)


def common_segments(base: RequestState, segments: Sequence[Segment]) -> int:
    """Leading segments of ``segments`` shared with ``base`` (same lineage): by chained digest
    when ``base``'s body is known, else the segment whose prefix digest is ``base``'s request
    fingerprint (the conversation only grew), at least the head."""
    if base.segmented is not None:
        return first_divergent_index(base.segmented.segments, segments)
    if base.outline is not None:  # its row's outline: the same answer, by digest
        return max(outline_common(base.outline, segments),
                   sum(1 for s in segments if s.kind in HEAD_KINDS))
    digest = base.fingerprint.split(":", 1)[-1]
    matched = next((i + 1 for i, s in enumerate(segments) if s.prefix_digest == digest), 0)
    return max(matched, sum(1 for s in segments if s.kind in HEAD_KINDS))


def _at_least(base: RequestState, segments: Sequence[Segment], shared: int) -> int | None:
    """:func:`common_segments` of ``base`` when it is at least ``shared``, else ``None``
    (with ``base``'s segments known, one digest comparison tells: chained digests agree
    through segment ``shared - 1`` exactly when at least ``shared`` segments are common)."""
    if shared and base.segmented is not None:
        other = base.segmented.segments
        if (len(other) < shared or len(segments) < shared
                or other[shared - 1].prefix_digest != segments[shared - 1].prefix_digest):
            return None
        return first_divergent_index(other, segments, shared)
    if shared and base.outline is not None:
        found = outline_common(base.outline, segments)
        found = max(found, sum(1 for s in segments if s.kind in HEAD_KINDS))
        return found if found >= shared else None
    found = common_segments(base, segments)
    return found if found >= shared else None


def _carried(segments: Sequence[Segment], opening: str | None) -> set[str]:
    """Digests of the user/tool message segments after the first message segment."""
    return {s.digest for s in segments
            if s.kind == "message" and s.label in _CARRIED_ROLES and s.digest != opening}


def _rewrite_of(call: Call, candidates: Iterable[Call]) -> Call | None:
    """The call whose conversation ``call`` rewrote under its first message (rule
    ``same-head-recent``, see the module docstring), or ``None``. ``candidates`` are the
    calls of ``call``'s lineage; none of them is of ``call``'s own conversation."""
    state = call.state
    if call.session_id is not None or state is None or state.segmented is None:
        return None
    earlier = [c for c in candidates if c.state is not None and c.ts <= call.ts]
    latest = max(earlier, key=lambda c: (c.ended or c.ts, c.ts), default=None)
    if (latest is None or latest.session_id is not None or latest.state is None
            or latest.state.segmented is None or latest.provider != call.provider
            or latest.wire_format != call.wire_format or latest.model != call.model):
        return None
    if not 0.0 <= call.ts - (latest.ended or latest.ts) <= REWRITE_WINDOW_S:
        return None
    theirs = _carried(latest.state.segmented.segments, latest.opening)
    ours = _carried(state.segmented.segments, call.opening)
    return latest if theirs & ours else None


_Key: TypeAlias = "tuple[str, str, str | None]"
"""An unnamed call's conversation: (opening, wire format, model), see
:meth:`Call.same_conversation`."""


def _key(call: Call) -> _Key | None:
    """The conversation key of a call without session id (``None``: it has no first message,
    so it is of no conversation)."""
    if call.session_id is not None or call.opening is None:
        return None
    return (call.opening, call.wire_format, call.model)


class _Unnamed:
    """Calls without session id, oldest dropped beyond ``maxlen``, indexed by conversation
    (:func:`_key`): finding a conversation's newest calls reads that conversation's calls
    only, never every recent call. Same answers as scanning one deque of ``maxlen`` calls
    newest first and keeping those of the conversation (callers hold the index's lock)."""

    def __init__(self, maxlen: int, per_key: int | None = None) -> None:
        self.maxlen = maxlen
        self.per_key = per_key  # at most this many calls kept per conversation (newest)
        self._order: deque[tuple[_Key | None, int]] = deque()  # (key, serial), oldest first
        self._by_key: dict[_Key, deque[tuple[int, Call]]] = {}
        self._serial = 0

    def append(self, call: Call) -> None:
        key = _key(call)
        self._serial += 1
        self._order.append((key, self._serial))
        if key is not None:
            calls = self._by_key.get(key)
            if calls is None:
                calls = self._by_key[key] = deque(maxlen=self.per_key)
            calls.append((self._serial, call))  # beyond ``per_key``, its oldest is dropped
        if len(self._order) > self.maxlen:
            dropped, serial = self._order.popleft()
            if dropped is not None:
                calls = self._by_key[dropped]
                # The oldest call overall is its conversation's oldest, unless ``per_key``
                # dropped it already.
                if calls and calls[0][0] == serial:
                    calls.popleft()
                if not calls:
                    del self._by_key[dropped]

    def newest(self, call: Call) -> Iterator[Call]:
        """The calls of ``call``'s conversation, newest first (none without a key)."""
        key = _key(call)
        calls = self._by_key.get(key, ()) if key is not None else ()
        return (kept for _, kept in reversed(calls))

    def renumber(self, call: Call, turn: int) -> None:
        """Give the newest kept call sent at ``call``'s time with its fingerprint (``call``
        as registered: same conversation) the turn ``turn``."""
        key = _key(call)
        calls = self._by_key.get(key) if key is not None else None
        if calls is None:
            return
        for i in range(len(calls) - 1, -1, -1):
            serial, kept = calls[i]
            if kept.ts == call.ts and kept.fingerprint == call.fingerprint:
                calls[i] = (serial, dataclasses.replace(kept, turn=turn))
                return


@dataclass
class _Session:
    count: int = 0
    started: Call | None = None
    # the latest successful call per (provider, wire format, agent)
    last: dict[tuple[str, str, str | None], Call] = field(default_factory=dict)


def entry_ends(segmented: SegmentedRequest, *, head: bool) -> list[int]:
    """Indices of the segments that end a possible cache entry, in order: each breakpoint
    and, with ``head``, the last segment of each head part (params, tools, system)."""
    found = set(breakpoint_indices(segmented))
    if head:
        segments = segmented.segments
        for i, s in enumerate(segments):
            if s.kind not in _HEAD_PARTS:
                break
            if i + 1 == len(segments) or segments[i + 1].kind != s.kind:
                found.add(i)
    return sorted(found)


class _Prefixes:
    """Entry-ending prefix digest -> the lineage (head fingerprint) of the most recent call
    holding it, least recently written dropped beyond ``maxlen`` (callers hold the index's
    lock). The calls themselves stay in the index's lineages: a digest whose lineage was
    evicted finds nothing, and the map keeps no request alive."""

    def __init__(self, maxlen: int) -> None:
        self.maxlen = maxlen
        self._heads: OrderedDict[str, str] = OrderedDict()
        self._indexed: OrderedDict[str, None] = OrderedDict()  # lineages whose head is in

    def add(self, call: Call) -> None:
        """Index ``call``'s breakpoints, and its head parts when its lineage's are not."""
        state = call.state
        if state is None or state.segmented is None:
            return
        segments, lineage = state.segmented.segments, state.head_fingerprint
        head = lineage not in self._indexed
        if head:
            self._indexed[lineage] = None
            if len(self._indexed) > self.maxlen:
                self._indexed.popitem(last=False)
        for i in entry_ends(state.segmented, head=head):
            digest = segments[i].prefix_digest
            self._heads[digest] = lineage
            self._heads.move_to_end(digest)
        while len(self._heads) > self.maxlen:
            self._heads.popitem(last=False)

    def deepest(self, call: Call, lineages: Mapping[str, Sequence[Call]]) -> Call | None:
        """The most recent call of another lineage (same wire format, sent before ``call``)
        sharing the deepest entry-ending prefix of ``call``, or ``None``: per prefix, one
        look-up and at most :data:`LINEAGE_DEPTH` digest comparisons."""
        state = call.state
        assert state is not None and state.segmented is not None
        segments = state.segmented.segments
        for i in reversed(entry_ends(state.segmented, head=True)):
            digest = segments[i].prefix_digest
            lineage = self._heads.get(digest)
            if lineage is None or lineage == state.head_fingerprint:
                continue
            for found in reversed(lineages.get(lineage, ())):
                other = None if found.state is None else found.state.segmented
                if (other is not None and found.ts <= call.ts
                        and found.wire_format == call.wire_format
                        and len(other.segments) > i
                        and other.segments[i].prefix_digest == digest):
                    return found
        return None


def _branch(call: Call, previous: Call) -> dict[str, Any] | None:
    """``verdict_detail["agent"]`` when ``call``, whose head differs from its conversation's
    previous call ``previous``, is a new branch (:func:`~stableprompt._economics.
    _request_kind.is_branch`), else ``None``."""
    state, before = call.state, previous.state
    if state is None or before is None or state.segmented is None or before.segmented is None:
        return None
    changed = [kind for kind in _HEAD_PARTS
               if [s.digest for s in state.segmented.segments if s.kind == kind]
               != [s.digest for s in before.segmented.segments if s.kind == kind]]
    if not is_branch(changed, _first_message(state.segmented.segments)
                     != _first_message(before.segmented.segments), state.request_tokens,
                     before.request_tokens):
        return None
    return {"kind": "subagent", "id": branch_id(state.head_fingerprint),
            "source": "head replaced, conversation of its own "
            f"(changed: {', '.join(changed) or 'none'}; another first message)"}


def branch_id(head_fingerprint: str) -> str:
    """The agent id of a branch no header named: ``branch-`` and 12 hex digits of its head
    fingerprint (its later calls, on the same head, are the same agent; the session's main
    agent keeps its own previous call)."""
    return "branch-" + head_fingerprint.rsplit(":", 1)[-1][:12]


def _first_message(segments: Sequence[Segment]) -> list[str]:
    """The digests of the first message's segments (all its content blocks: Claude Code's
    subagent repeats its parent's opening block and differs in the next)."""
    first = next((s for s in segments if s.kind == "message"), None)
    if first is None:
        return []
    root = "/".join(first.path.split("/")[:3])  # "/messages/0", "/input/0"
    return [s.digest for s in segments if s.kind == "message"
            and (s.path == root or s.path.startswith(root + "/"))]


def _is_retry(previous: Call | None, call: Call) -> bool:
    return (previous is not None and previous.fingerprint is not None
            and previous.fingerprint == call.fingerprint
            and 0.0 <= call.ts - previous.ts <= RETRY_WINDOW_S)


class CallIndex:
    """Bounded, thread-safe memory of recent calls (see the module docstring).

    Args:
        window_s: How long a conversation's previous call counts for turns and head-change
            comparisons (seconds).
        max_calls: Successful calls kept over all lineages (each holds its request body);
            the least recently used lineages are dropped beyond it.
        max_keys: Named sessions kept (least recently used dropped).
        max_unnamed: Calls without a session id kept for conversation matching (sent calls
            are kept without their body).
    """

    def __init__(self, *, window_s: float, max_calls: int = 4096, max_keys: int = 4096,
                 max_unnamed: int = 1024) -> None:
        self.window_s = window_s
        self.max_calls = max_calls
        self.max_keys = max_keys
        self._lineages: OrderedDict[str, deque[Call]] = OrderedDict()
        self._calls = 0  # calls held in _lineages
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._started = _Unnamed(max_unnamed)  # sent, without their body
        # successful, with their request state: only a conversation's newest are read
        self._done = _Unnamed(max(max_unnamed // 4, 1), per_key=DONE_PER_CONVERSATION)
        self._prefixes = _Prefixes(PREFIX_INDEX_SIZE)
        # response id -> the session its conversation continues under (``previous_response_id``)
        self._chains: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def knows_lineage(self, head: str) -> bool:
        """True once the lineage was seen (or loaded) in this index."""
        with self._lock:
            return head in self._lineages

    def chained_session(self, previous_response_id: str) -> str:
        """The session of a request continuing the response ``previous_response_id``
        (OpenAI Responses' ``previous_response_id``): the session of the call that got that
        response, or the id of the first response of its chain when that call had no session
        (the chain names the conversation), or ``previous_response_id`` itself when the
        response is unknown (a chain begun before this process)."""
        with self._lock:
            return self._chains.get(previous_response_id, previous_response_id)

    def knows_session(self, session_id: str) -> bool:
        """True once the named session was seen in this index."""
        with self._lock:
            return session_id in self._sessions

    def load_lineage(self, head: str, calls: Iterable[Call]) -> None:
        """Seed a lineage not seen yet (e.g. from ledger rows); a no-op once it is known."""
        with self._lock:
            if head not in self._lineages:
                kept = self._lineages[head] = deque(calls, maxlen=LINEAGE_DEPTH)
                self._calls += len(kept)
                self._evict()

    def lineage_ids(self, head: str) -> set[str]:
        """The record ids of the calls kept for lineage ``head``."""
        with self._lock:
            return {c.state.record_id for c in self._lineages.get(head, ())
                    if c.state is not None and c.state.record_id is not None}

    def merge_lineage(self, head: str, calls: Iterable[Call]) -> None:
        """Add calls another process stored (a shared ledger) to a known lineage, in time
        order, keeping the newest :data:`LINEAGE_DEPTH`."""
        with self._lock:
            kept = self._lineages.get(head)
            if kept is None:
                return
            before = len(kept)
            merged = sorted([*kept, *calls], key=lambda c: c.ts)
            kept.clear()
            kept.extend(merged)  # the deque's maxlen drops the oldest
            self._calls += len(kept) - before
            self._evict()

    def begin(self, call: Call, *, earlier_turns: int = 0) -> tuple[int | None, bool]:
        """Register a call being sent and number its turn.

        Args:
            call: The call (``turn`` is ignored).
            earlier_turns: Turns of a named session already in the ledger (first sight, or
                every call on a shared ledger, where other hosts add turns).

        Returns:
            ``(turn, retry)``: the 1-based turn in its conversation (``None`` for a call
            without session id or first message) and whether it is a retry of the
            conversation's previous request (then it keeps that turn).
        """
        with self._lock:
            if call.session_id is not None:
                session = self._sessions.get(call.session_id)
                if session is None:
                    session = self._sessions[call.session_id] = _Session(count=earlier_turns)
                    self._trim(self._sessions)
                elif earlier_turns > session.count:  # a shared ledger: other hosts' turns
                    session.count = earlier_turns
                self._sessions.move_to_end(call.session_id)
                started = session.started
                retry = _is_retry(started, call)
                if started is not None and retry:
                    number = started.turn
                else:
                    session.count += 1
                    number = session.count
                session.started = dataclasses.replace(call, turn=number, state=None)
                return number, retry
            if call.opening is None:
                return None, False
            previous = self._recent(self._started, call)
            retry = _is_retry(previous, call)
            if previous is None:
                turn: int | None = 1
            else:
                turn = previous.turn if retry else (previous.turn or 0) + 1
            self._started.append(dataclasses.replace(call, turn=turn, state=None))
            return turn, retry

    def compare(self, call: Call, *, across_heads: bool = False) -> Comparison:
        """Choose what ``call`` (with a ``state``) is compared with.

        The lineage candidate with the longest common prefix (ties: same conversation, then
        most recent). When it belongs to another conversation and this conversation's own
        previous call (within the window) has a different head, that call is used instead: the
        conversation changed its head, unless the request is a new branch (module docstring;
        ``detail["agent"]``). With no candidate of its own conversation on its lineage: with
        ``across_heads`` (a cache whose entries may end inside a segment), the newest call of
        another recent lineage (same provider, wire format and model) sharing the most leading
        segments, rule ``other-head-prefix`` (a head that differs only after a long shared
        start, a system prompt whose last lines name the session, is read up to that start);
        else, or when there is none, the call of another lineage sharing the deepest
        entry-ending prefix (rule ``shared-prefix``, ``detail["shared_prefix"]``).
        """
        state = call.state
        if state is None or state.segmented is None:
            return Comparison()
        segments = state.segmented.segments
        with self._lock:
            candidates = list(self._lineages.get(state.head_fingerprint, ()))
            previous = self._conversation_previous(call)
        best: tuple[int, bool, float] | None = None
        chosen: Call | None = None
        # a branch no header named is the same agent on its head (``branch_id``)
        own_branch = branch_id(state.head_fingerprint) if call.agent is None else None
        for candidate in reversed(candidates):  # the newest first: it shares the most, often
            if (candidate.state is None or candidate.ts > call.ts
                    or candidate.wire_format != call.wire_format):  # never another format's
                continue
            shared = _at_least(candidate.state, segments, 0 if best is None else best[0])
            if shared is None:  # fewer segments shared than the best so far: cannot win
                continue
            mine = candidate.same_conversation(call) or (
                own_branch is not None and candidate.agent == own_branch
                and candidate.session_id == call.session_id)
            key = (shared, mine, candidate.ts)
            if best is None or key > best:
                best, chosen = key, candidate
        same = best is not None and best[1]
        branch = None if previous is None or same else _branch(call, previous)
        if chosen is not None and best is not None and (
                same or previous is None or branch is not None):
            rewritten = None if best[1] else _rewrite_of(call, candidates)
            if rewritten is not None and rewritten.state is not None:
                return Comparison(predecessor=rewritten.state,
                                  common_segments=common_segments(rewritten.state, segments),
                                  rule="same-head-recent", predecessor_turn=rewritten.turn)
            if same and chosen.agent is not None and chosen.agent == own_branch:
                branch = {"kind": "subagent", "id": own_branch,
                          "source": "continues a branch the branch rule named"}
            return Comparison(predecessor=chosen.state, other_conversation=not best[1],
                              common_segments=best[0],
                              rule="same-conversation" if best[1] else "other-conversation",
                              detail={} if branch is None else {"agent": branch})
        if previous is not None and branch is None:
            return Comparison(session_previous=previous.state, rule="session-head-change")
        # No call of this conversation on its lineage: a new conversation or a branch.
        detail: dict[str, Any] = {} if branch is None else {"agent": branch}
        if across_heads:  # entries inside segments: the most leading segments shared
            found = self._other_head(call, segments)
            if found.predecessor is not None:
                return dataclasses.replace(found, detail=detail)
        # The call of another lineage sharing the deepest entry-ending prefix, if any.
        with self._lock:
            other = self._prefixes.deepest(call, self._lineages)
        if other is None or other.state is None:
            return Comparison(detail=detail)
        common = common_segments(other.state, segments)
        detail["shared_prefix"] = {
            "record_id": other.state.record_id, "session": other.session_id,
            "agent": other.agent, "segments": common,
            "differs_at_segment": segments[common].name if common < len(segments) else None,
        }
        return Comparison(predecessor=other.state, other_conversation=True,
                          common_segments=common, rule="shared-prefix", detail=detail)

    def _other_head(self, call: Call, segments: Sequence[Segment]) -> Comparison:
        """The ``other-head-prefix`` comparison of :meth:`compare`, or none."""
        assert call.state is not None
        head = call.state.head_fingerprint
        with self._lock:
            newest = [calls[-1] for key, calls in reversed(self._lineages.items())
                      if key != head and calls][:ACROSS_HEADS_LINEAGES]
        best: tuple[int, float] | None = None
        chosen: Call | None = None
        for candidate in newest:
            if (candidate.state is None or candidate.state.segmented is None  # a ledger row
                    or candidate.ts > call.ts or candidate.wire_format != call.wire_format
                    or candidate.provider != call.provider or candidate.model != call.model):
                continue
            shared = _at_least(candidate.state, segments, 1 if best is None else best[0])
            if shared is None:
                continue
            key = (shared, candidate.ts)
            if best is None or key > best:
                best, chosen = key, candidate
        if chosen is None or best is None:
            return Comparison()
        return Comparison(predecessor=chosen.state, other_conversation=True,
                          common_segments=best[0], rule="other-head-prefix")

    def renumber(self, call: Call, turn: int) -> None:
        """Give the registered call ``call`` (from :meth:`begin`) another turn number: it
        continues a conversation found by :meth:`compare` (rule ``same-head-recent``), and
        its conversation's later turns count on from it."""
        with self._lock:
            self._started.renumber(call, turn)

    def remember(self, call: Call) -> None:
        """Keep a successful call (with a ``state``) as a future predecessor."""
        state = call.state
        if state is None:
            return
        with self._lock:
            calls = self._lineages.get(state.head_fingerprint)
            if calls is None:
                calls = self._lineages[state.head_fingerprint] = deque(maxlen=LINEAGE_DEPTH)
            before = len(calls)
            calls.append(call)
            self._calls += len(calls) - before
            self._lineages.move_to_end(state.head_fingerprint)
            self._evict()
            self._prefixes.add(call)
            if state.response_id:
                self._chains[state.response_id] = call.session_id or state.response_id
                self._trim(self._chains)
            if call.session_id is None:
                self._done.append(call)
                return
            session = self._sessions.get(call.session_id)
            if session is not None:
                key = (call.provider, call.wire_format, call.agent)
                last = session.last.get(key)
                if last is None or last.ts <= call.ts:
                    session.last[key] = call

    # ------------------------------------------------------------------ internals (locked)

    def _recent(self, calls: _Unnamed, call: Call) -> Call | None:
        """The newest call of ``calls`` in ``call``'s conversation, within the window."""
        return next((c for c in calls.newest(call) if call.ts - c.ts <= self.window_s), None)

    def _conversation_previous(self, call: Call) -> Call | None:
        assert call.state is not None
        if call.session_id is not None:
            session = self._sessions.get(call.session_id)
            found = None if session is None else session.last.get(
                (call.provider, call.wire_format, call.agent))
        else:
            found = next((c for c in self._done.newest(call)
                          if c.provider == call.provider and call.ts - c.ts <= self.window_s),
                         None)
        if (found is None or found.state is None or call.ts - found.ts > self.window_s
                or found.state.head_fingerprint == call.state.head_fingerprint):
            return None
        return found

    def _trim(self, table: OrderedDict[str, Any]) -> None:
        while len(table) > self.max_keys:
            table.popitem(last=False)

    def _evict(self) -> None:
        """Drop least recently used lineages while more than ``max_calls`` calls are held."""
        while self._calls > self.max_calls and len(self._lineages) > 1:
            _, dropped = self._lineages.popitem(last=False)
            self._calls -= len(dropped)


def call_from_record(record: UsageRecord, head: str,
                     count: Callable[[SegmentedRequest], list[int]],
                     resolve: Callable[[str], Outline | None] | None = None) -> Call:
    """A ledger row as a predecessor candidate of lineage ``head`` (the recorder seeds its
    index with a lineage's recent rows, and re-reads a shared ledger's): its segments and
    token counts (``count``) when the row kept its request body, else its segment outline
    (``segment_digests``, ``_outline``: compared segment by segment as the body would be),
    else its fingerprint, usage and token estimate only (a row from before schema v4). A delta
    outline (format 2) is read through ``resolve`` (a record id to that row's outline); its
    depth (``outline_depth``) says whether a later row may continue it."""
    segmented = tokens = None
    outline = None
    sent = record.verdict_detail.get("request_format")
    wire = (sent if isinstance(sent, str) and sent in REQUEST_FORMATS
            else request_format(record.wire_format))
    if record.content:
        try:
            body = loads(record.content)
            segmented = segment_request(wire, body)
            tokens = tuple(count(segmented))
        except Exception:
            segmented = tokens = None
    opening = opening_of(segmented)
    depth = None
    if record.segment_digests is not None:
        decoded = decode_outline(record.segment_digests, resolve)
        if decoded is not None:
            depth = decoded.depth
            if segmented is None:
                outline, tokens, opening = (decoded.segments, tuple(decoded.tokens),
                                            decoded.opening)
    ts = record.ts_utc.timestamp()
    state = RequestState(
        ts=ts,
        fingerprint=record.request_fingerprint or "",
        head_fingerprint=head,
        segmented=segmented,
        segment_tokens=tokens,
        request_tokens=sum(tokens) if tokens is not None else record.request_tokens,
        record_id=record.record_id,
        response_id=record.response_id,
        cached_extent_tokens=(
            record.cache_read_tokens + record.cache_write_tokens
            if record.cache_read_tokens is not None and record.cache_write_tokens is not None
            else None),
        cache_read_tokens=record.cache_read_tokens,
        input_tokens_total=record.input_tokens_total,
        headers=record.request_headers,
        outline=outline,
        outline_depth=depth,
    )
    agent = record.verdict_detail.get("agent")
    agent_id = agent.get("id") if isinstance(agent, dict) else None
    return Call(ts=ts, session_id=record.session_id, provider=record.provider or "",
                wire_format=wire, model=record.model,
                opening=opening, fingerprint=state.fingerprint, state=state,
                turn=record.turn, agent=agent_id if isinstance(agent_id, str) else None,
                ended=None if record.latency_ms is None else ts + record.latency_ms / 1000)


def session_from_request(body: Mapping[str, Any], headers: Any = None) -> str | None:
    """The session id a request names, or ``None``.

    Order: the ``x-stableprompt-session`` header, then a harness's session header
    (``_identity.SESSION_HEADERS``: Claude Code's ``X-Claude-Code-Session-Id``, Codex's
    ``session-id``), then the body's hint (:func:`~stableprompt._wire._formats.session_hint`:
    the session id inside Claude Code's ``metadata.user_id``, a ``prompt_cache_key``) when it
    names a conversation (a ``prompt_cache_key`` stableprompt derived from a head names a
    lineage, not a session).
    """
    value = session_from_headers(headers)
    if value:
        return value
    hint = session_hint(body)
    return hint[0] if hint is not None and hint[1] else None
