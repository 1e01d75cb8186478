"""Prefix-stability lint for captured request logs from any harness (``stableprompt lint``).

Each request is segmented in its provider's cache order (:func:`segment_request`) once, paired
with a predecessor, and compared with :func:`diff`. Definitions (all sizes are bytes of segment
data, ``SegmentedRequest.data``: compact JSON in cache order, breakpoint markers removed):

**Sessions.** A capture record's ``session`` key names a conversation. A body's
``metadata.user_id`` or ``prompt_cache_key`` is a hint: it names a session unless two
conversations (told apart by their opening message) interleave under it, in which case it is
only a routing key; a ``prompt_cache_key`` starting with ``sp-`` (stableprompt's per-head key,
``prompt_cache_key=True``) is always only a routing key. A session or routing key restricts the
candidates; only a session enables the session exceptions below (and ``LintPair.session``).

**Predecessor.** Candidates are the earlier requests of the same wire format and, when the
request has a session or routing key, of the same key; otherwise any earlier request. In a
directory capture, only requests of the same file group (:attr:`CaptureEntry.group`) are
candidates unless joined (``join=True``, ``--join``). With ``k`` = the most whole segments any
candidate shares with the request (an index of chained prefix digests finds it in O(log n)
lookups; no pairwise comparisons), in order:

1. A candidate that is entirely a prefix of the request (``k`` segments long) is the
   predecessor: a rewind, fork or retry is not a break. Exception: a longer candidate that
   diverges at ``k`` while the request re-sends at least a quarter of its message bytes after
   that point (compared by digest) was *rewritten*; it is the predecessor.
2. A request with no assistant turn yet (an opening request):

   - in a known session: a new conversation, unless the candidate with the same opening
     message (the same prompt re-sent), else the best candidate (as in 4) if it is a
     multi-turn request, has the same model, cache-key parameters and tools (the session
     restarted its history on the same lineage: compaction, a rewritten head). Subagents and
     side requests that share a session id but not the tools or model start their own, and
     so does a single-turn request after another under the same key, unless it changes only
     cache-key parameters (same model, tools and system: a new ``response_format`` /
     ``text.format`` schema), which is a break of that request's head;
   - else the candidate with the same opening message block (the same prompt re-sent: a retry,
     new parameters, a new tail value), sharing the most segments;
   - else, when some candidate shares the request's whole head, a new conversation on that
     cached lineage (or, with a pending compaction event whose summary it holds, that
     lineage's best candidate);
   - else the candidate whose head it most plausibly changes: sharing at least half of the
     request's head bytes (whole segments by standalone digest anywhere, plus the common
     prefix of the first differing segment). So a single-turn lineage whose model, tools or
     system changed is paired and the break named, and so is a session forked from another's
     head with its own env block; another application's head stays apart.
3. Candidates with the same opening message block (the same conversation, or a fork of it):
   the one sharing the most segments.
4. Else the one sharing the most bytes of segment ``k``; when the session is unknown it must
   also be continued (the request re-sends a quarter of its message bytes), else the request
   continues the conversation it re-sends the most message bytes of, by standalone segment
   digest, if that is a quarter of that conversation's (e.g. resumed a day later with its
   first message re-rendered), else it starts a conversation (e.g. resumed mid-way).

A request whose body-hinted key (``prompt_cache_key``, ``metadata.user_id``) is new, with no
candidate under it, is compared with requests under keys that were *replaced* (never used
again from this request on) by the same rules 2-4: a rotated key (one per day) is a named
``param-change``, keys used side by side (one per user) never meet. An opening request under
a new key with a new first message is a conversation start (so every fresh session of a
harness that sends one key per session starts alike); only the same prompt re-sent under the
new key pairs across (rule 2's "same opening message").

Every lookup goes through an index (prefix digest, standalone segment digest, opening
message digest) and compares at most the 64 most recent candidates; ties go to the latest. So
interleaved subagents, and sessions that share a head, do not look like breaks, and the cost
stays proportional to the capture.

**Events.** ``lint_requests(events=[...])`` takes the :class:`~stableprompt.CacheEvent` of
each deliberate compaction or rebase; the break it explains is expected
(``LintPair.event``), see :mod:`stableprompt._lint._events`. Limitation: without session
ids or events, a compaction that rewrites most already-sent bytes looks like a new
conversation.

**Prefix ratio** of a pair = ``lcp_bytes / size_bytes`` of the later request. A request with no
predecessor has ``predecessor``, ``prefix_ratio`` and ``ceiling`` ``None`` and is left out of
every mean; ``prefix_ratio_mean`` is the plain mean over pairs, ``prefix_ratio_weighted`` is
``sum(lcp_bytes) / sum(size_bytes)`` over pairs: weighted by request size in bytes, a proxy
for tokens (bytes per token is near constant within one capture).

**Ceiling** of a pair = ``min(1, predecessor size_bytes / size_bytes)``: an append-only harness
re-sends its predecessor's bytes verbatim and only adds new content, so at best the whole
predecessor is a prefix of the request. ``ceiling`` is the mean over the same pairs as
``prefix_ratio_mean`` and ``ceiling_weighted`` is ``sum(min(pred, size)) / sum(size)``, so
ratio and ceiling are directly comparable (``prefix_ratio <= ceiling`` always).

**Expected divergences** (the volatile tail, not breaks) lie inside the predecessor's *last
message*, after its last breakpoint when that breakpoint ends in or right before that message,
else where the later request has another message or role in its place (the per-turn message
was replaced by the next turn); see :func:`is_expected_divergence`. A change to any earlier
message is a ``history-rewrite`` break, even after the last breakpoint. Expected divergences
are reported with ``"expected": true`` and do not count as breaks; stableprompt's own renders
put their tail there.

**Offsets.** ``Divergence.offset`` (``divergence.offset`` in JSON) is a byte offset into the
segment data defined above (== ``lcp_bytes``), not into the body as sent; ``value_offset`` is
the character offset of the first difference inside the JSON value at ``path``, and the
snippets are cut from that value (see :mod:`stableprompt._lint._divergence`).

**Findings** hold across the capture: see :data:`FINDING_FIXES` for the codes and their fixes.
Volatile content (:func:`scan_volatile`; values under ``examples``/``default``/``enum``/
``const`` keys are skipped) is looked for in tools and system blocks inside the cached region:
up to the end of the last breakpoint; the whole request for the automatically cached OpenAI
formats; the head for Anthropic requests without breakpoints (themselves a finding). History
is append-only, so ids and dates in it are stable bytes and are not flagged; a history block
that does change shows up as a break.
Token counts (breakpoint minimums) are cl100k estimates over segment JSON when a tokenizer is
available, else ``ceil(bytes / 4)``: providers tokenize their own rendering, so this is a
screen, not a measurement.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._canonical import loads
from .._diff import (
    DIVERGENCE_LIMIT,
    Divergence,
    ValueSnippet,
    bounded_divergences,
    common_prefix_len,
    diff,
    first_divergent_index,
    is_expected_divergence,
    lcp_bytes,
    value_snippet,
)
from .._exceptions import CaptureError, PolicyError
from .._policy import (
    TTL_LABELS_S,
    CacheRules,
    PolicyTable,
    cache_rules,
    content_shape_change,
    provider_of_wire_format,
)
from .._public import public
from .._segment import HEAD_KINDS, Segment
from .._tokens import EstimatingTokenCounter
from .._wire._formats import (
    BODY_KEYS,
    BREAKPOINT_FORMATS,
    WIRE_FORMATS_WITH_REQUESTS,
    PlainMessages,
    detect,
    segment_request,
    with_path_model,
)
from .._wire._resegment import LineageSegments
from .._wire._segmenter import SegmentedRequest
from ._capture import CaptureEntry, CaptureProblem, Skipped, iter_capture, iter_records
from ._events import EventQueue
from ._findings import (
    CAUSE_FIXES,
    FINDING_FIXES,
    HeadGroup,
    HeadSeg,
    finding,
    head_findings,
    tool_order_findings,
)
from ._gc import no_full_collections
from ._requests import Req as _Req
from ._requests import RequestIndex as _Index
from ._requests import continues as _continues
from ._requests import head_count as _head_count
from ._requests import make_req as _make_req
from ._requests import ratio as _ratio
from ._results import LintFinding, LintPair, LintReport, LintSummary

__all__ = [
    "CAUSE_FIXES",
    "FINDING_FIXES",
    "LintFinding",
    "LintPair",
    "LintReport",
    "LintSummary",
    "is_expected_divergence",
    "lint_capture",
    "lint_requests",
]

_SCAN_CANDIDATES = 64
_HEADED = True
"""Keep each request's segments as a head and a history its conversation shares
(:class:`~stableprompt._segment.HeadedSegments`: a new head costs what is new, not the
history); ``False``: a tuple of chained segments each (the same report: what the tests
compare against)."""
_LINEAGES = 64
"""Conversations whose last request lint keeps for segment reuse (``_wire._resegment``):
interleaved beyond this many, a request is segmented whole again (same result, slower)."""


def _params_changed(a: _Req, b: _Req) -> bool:
    """``b`` sends ``a``'s model, tools and system but other cache-key parameters (a
    ``response_format`` / ``text.format`` schema, a reasoning effort): the one change of a
    single-turn request within a session that is a break, not a new conversation."""
    def head(req: _Req, kinds: tuple[str, ...]) -> list[tuple[str, str]]:
        return [(s.name, s.digest) for s in req.segments if s.kind in kinds]

    return (a.model == b.model and head(a, ("tool", "system")) == head(b, ("tool", "system"))
            and head(a, ("param",)) != head(b, ("param",)))


def _method(counter: EstimatingTokenCounter) -> str:
    """How lint's token counts were made, as its messages name it."""
    return "bytes/4 estimate" if counter.fell_back else "cl100k estimate"


# -- internals: see ._requests ----------------------------------------------------------


class _Linter:
    """Streams requests in capture order; predecessor search and per-request findings."""

    def __init__(self, *, wire_format: str | None, policies: PolicyTable | None,
                 events: Iterable[Any] | None = None, join: bool = True,
                 reuse: bool = False) -> None:
        self.wire_format = wire_format
        # Bodies decoded by ``_canonical.loads`` (a capture file) only: reuse compares the
        # bytes of decoded JSON, which a body built in Python (NaN, tuples) may not be.
        self.headed = _HEADED
        self.lineages = LineageSegments(_LINEAGES, local_history=self.headed) if reuse \
            else None
        self.policies = policies
        self.events = EventQueue(events)
        self.join = join
        self.last_pos: dict[tuple[str, str | None, str | None], int] = {}
        self.reqs: list[_Req] = []
        self.pairs: list[LintPair] = []
        self.problems: list[CaptureProblem] = []
        self.skipped = 0
        self.scopes: dict[tuple[str, str | None, str | None], _Index] = {}
        self.head: dict[str, HeadSeg] = {}  # head segment digest -> facts (report time)
        self.head_groups: dict[tuple[str, str], HeadGroup] = {}  # per head: see HeadGroup
        self.tool_orders: dict[tuple[str, ...], list[int]] = {}
        self.hits: dict[str, list[int]] = {}  # finding code -> request indexes
        self.examples: dict[str, str] = {}  # finding code -> first example message
        self.tokens = EstimatingTokenCounter("cl100k_base")
        # The last line :meth:`decode` read: (its value, the line, and when the line was
        # segmented from its new bytes, the format and the segments), for :meth:`add`.
        self.decoded: tuple[Any, bytes, str | None, SegmentedRequest | None] | None = None
        self.line_formats: dict[str, None] = {}  # formats of lines kept for segment_rendered
        self.plain = PlainMessages()  # detect reads a request's new messages only

    # -- input -------------------------------------------------------------------------------

    def decode(self, line: bytes) -> Any:
        """What :func:`~stableprompt._canonical.loads` returns for a capture line (raising
        as it does). A line re-sending the conversation of an earlier line (the same bytes
        around its history, which starts with the same items) is not parsed whole: it is
        segmented from its new items (:meth:`LineageSegments.segment_rendered`, which decodes
        only those), and its body rebuilt from the earlier one's values and the new items:
        equal to the parsed body. :meth:`add` takes those segments for the entry it yields
        (a plain body record: the line is the body)."""
        self.decoded = None
        if self.lineages is not None:
            for fmt in self.line_formats:
                try:
                    found = self.lineages.segment_rendered(fmt, line) or \
                        self.lineages.segment_reheaded(fmt, line)
                except CaptureError:  # a malformed new item: parsed, and reported by add
                    break
                if found is not None:
                    body = found.segmented.body
                    self.decoded = (body, line, fmt, found.segmented)
                    return body
        value = loads(line)
        self.decoded = (value, line, None, None)
        return value

    def add(self, entry: CaptureEntry) -> None:
        decoded, self.decoded = self.decoded, None
        if decoded is not None and decoded[0] is not entry.body:
            decoded = None  # not a plain body record (a wrapper, a HAR entry, an array)
        fmt = self.wire_format or entry.wire_format
        if fmt is None:
            fmt = detect(entry.body, entry.url_path, plain=self.plain)
            if fmt is None:
                self._problem(entry, "capture-format", "cannot tell the wire format of this "
                              "request; pass --format")
                return
        body = with_path_model(fmt, entry.body, entry.url_path)
        if body is not entry.body:  # Gemini / Converse: the model is in the URL path
            entry = dataclasses.replace(entry, body=body)
            decoded = None
        model = entry.body.get("model")
        if not isinstance(model, str) or not model:
            # Every request format requires it, and it is the first cache key: without it the
            # request cannot be paired (a problem for this request, the rest is linted).
            where = ("the URL path (capture the request URL: this format keeps the model "
                     "there)" if fmt in ("gemini", "bedrock-converse") else "/model")
            self._problem(entry, "capture-shape", f"request has no 'model' string at {where}")
            return
        try:
            if self.lineages is None:
                seg = segment_request(fmt, entry.body)
            elif decoded is not None and decoded[3] is not None and decoded[2] == fmt:
                seg = decoded[3]  # segmented by decode from the line's new items
            elif decoded is not None:  # the line is the body: the next one may reuse it
                seg = self.lineages.segment_captured(fmt, entry.body, decoded[1]).segmented
                self.line_formats[fmt] = None
            else:
                seg = self.lineages.segment(fmt, entry.body).segmented
        except CaptureError as exc:
            where = f" at {exc.pointer or '/'}" if exc.pointer is not None else ""
            self._problem(entry, exc.code, f"{exc.message}{where}")
            return
        if self.wire_format is not None:
            self._check_forced_format(entry, fmt)
        req = _make_req(len(self.reqs), entry, seg, group=not self.join, headed=self.headed)
        self.reqs.append(req)
        self._scan_request(req)

    def _problem(self, entry: CaptureEntry, code: str, message: str) -> None:
        self.problems.append(CaptureProblem(entry.source, code, message, entry.line, entry.index))

    def _check_forced_format(self, entry: CaptureEntry, forced: str) -> None:
        """Flag a request whose declared, URL or body format is not the forced one when that
        is visible: the capture declares it, the URL says it, or the body has fields the forced
        format does not read (linting it as ``forced`` silently drops them)."""
        by_url = detect({}, entry.url_path) if entry.url_path else None
        detected = entry.wire_format or by_url or detect(entry.body)
        if detected == "openai-compatible":
            detected = "openai-chat"
        if detected is None or detected == forced or detected not in BODY_KEYS:
            return
        ignored = [k for k in entry.body if k in BODY_KEYS[detected] and k not in BODY_KEYS[forced]]
        why = ("declared by the capture record" if entry.wire_format else
               f"URL {entry.url_path}" if by_url else "from its fields")
        if not (ignored or entry.wire_format or by_url):
            return  # a weak guess from the body alone, and nothing is dropped
        effect = (f"{', '.join(repr(k) for k in ignored)} ignored: not part of the {forced} "
                  "cache order" if ignored else "its segments may not follow the provider's "
                  "cache order")
        self._hit("format-mismatch", entry.index,
                  f"request {entry.index} looks like {detected} ({why}) but was linted as "
                  f"{forced} (--format): {effect}")

    # -- predecessor and pair ----------------------------------------------------------------

    def pair_all(self) -> None:
        """Pair every request with its predecessor, in capture order (run once, after the
        last :meth:`add`: whether a body's session hint names one conversation depends on
        the whole capture)."""
        interleaved = self._interleaved()
        for req in self.reqs:
            self.last_pos[(req.wire_format, req.group, req.scope)] = req.pos
        for req in self.reqs:
            if req.hinted and (req.wire_format, req.group, req.scope) in interleaved:
                req.session = None
            self._pair(req)
            for key in {(req.wire_format, req.group, None),
                        (req.wire_format, req.group, req.scope)}:
                self.scopes.setdefault(key, _Index()).add(req)

    def _interleaved(self) -> set[tuple[str, str | None, str | None]]:
        """Hinted session ids (``metadata.user_id``, ``prompt_cache_key``) under which
        several conversations interleave: a conversation (by its opening message) comes back
        after another one started. Such an id is a routing key (it still scopes candidates),
        not a session: a new conversation under it must not look like a compaction."""
        current: dict[tuple[str, str | None, str | None], str] = {}
        seen: dict[tuple[str, str | None, str | None], set[str]] = {}
        out: set[tuple[str, str | None, str | None]] = set()
        for req in self.reqs:
            key = (req.wire_format, req.group, req.scope)
            digest = req.first_message_digest
            if not req.hinted or req.session is None or digest is None or key in out:
                continue
            if current.get(key, digest) != digest:
                done = seen.setdefault(key, set())
                if digest in done:
                    out.add(key)
                done.add(current[key])
            current[key] = digest
        return out

    def _predecessor(self, b: _Req) -> _Req | None:
        index = self.scopes.get((b.wire_format, b.group, b.scope))
        if index is None or not index.all:
            return self._across_keys(b)
        segs = b.segments
        k = index.shared(segs)  # most whole segments shared with any candidate
        if k:
            full = index.by_last.get(segs[k - 1].prefix_digest)
            if full is not None:
                if b.has_assistant:  # a rewrite of a longer request, or a fork of this one?
                    for pos in reversed(index.holders(segs[k - 1].prefix_digest)[
                            -_SCAN_CANDIDATES:]):
                        a = self.reqs[pos]
                        if len(a.segments) > k and _continues(a, b, k + 1):
                            return a
                return self.reqs[full]
        if not b.has_assistant:  # an opening request
            if b.session is not None:  # a known session: the same prompt re-sent, or a
                same = self._same_opening(b, index)  # compaction on the same lineage,
                best = same or self._most_bytes(b, k, index)  # continues it; a subagent
                if best is None or not (same or best.has_assistant):  # starts its own
                    # (and so does a single-turn request after another, unless only its
                    # cache-key params changed: a new response schema, named)
                    return best if best is not None and _params_changed(best, b) else None
                j = first_divergent_index(best.segments, segs)
                same_lineage = all(s.kind not in ("param", "tool")
                                   for s in (*best.segments[j:], *segs[j:]))
                return best if same_lineage else None
            same = self._same_opening(b, index)
            if same is not None:  # the same prompt again (a retry, new params, a new tail)
                return same
            if k >= _head_count(b):  # the head is cached: a new conversation on the lineage,
                if k and self.events.compaction_in(b):  # or the history compacted on purpose
                    return self._most_bytes(b, k, index)
                return None
            return self._head_relative(b, k, index) or self._across_keys(b)
        same = self._same_opening(b, index)
        if same is not None:  # the same conversation (or a fork / rerun of it)
            return same
        best = self._most_bytes(b, k, index)
        if best is not None and b.session is None and not _continues(best, b):
            if self.events.compaction_in(b):  # the history compacted on purpose
                return best
            # Not a rewrite of that one: the conversation it most plausibly continues (e.g.
            # resumed with its opening message re-rendered), else a new one (resumed mid-way).
            return self._continued(b, index) or self._across_keys(b)
        return best

    def _same_opening(self, b: _Req, index: _Index) -> _Req | None:
        """Of the candidates with ``b``'s opening message block, the one sharing the most
        segments (the 64 most recent; latest on ties), or ``None``."""
        same_opening = index.by_first.get(b.first_message_digest or "")
        if not same_opening:
            return None
        return self._most_shared(b, same_opening[-_SCAN_CANDIDATES:], index.shared(b.segments))

    def _most_shared(self, b: _Req, positions: Sequence[int], bound: int) -> _Req:
        """Of the requests at ``positions`` (not empty), the one sharing the most leading
        segments with ``b`` (latest on ties). ``bound``: the most any of them can share
        (:meth:`RequestIndex.shared` of their index): the first, latest, to reach it is the
        answer, so the rest are not compared (the previous request of a conversation whose
        head changes every turn reaches it: one comparison, not 64)."""
        best_k, best = -1, None
        for pos in reversed(positions):
            a = self.reqs[pos]
            shared = first_divergent_index(a.segments, b.segments)
            if shared > best_k:
                best_k, best = shared, a
                if shared >= bound:
                    break
        assert best is not None
        return best

    def _shared_bytes(self, b: _Req, index: _Index, kinds: tuple[str, ...]) -> dict[int, int]:
        """Candidate position -> bytes of ``b``'s segments of ``kinds`` that the candidate
        holds too (same bytes by standalone digest, anywhere): one index lookup per segment,
        at most 64 candidates each, never a pairwise comparison."""
        scores: dict[int, int] = {}
        seen: set[str] = set()
        for s in b.segments:
            if s.kind not in kinds or s.digest in seen:
                continue
            seen.add(s.digest)
            for pos in index.by_segment.get(s.digest, ())[-_SCAN_CANDIDATES:]:
                scores[pos] = scores.get(pos, 0) + s.size_bytes
        return scores

    def _head_relative(self, b: _Req, k: int, index: _Index) -> _Req | None:
        """The earlier request whose head ``b``'s head most plausibly changes: it shares at
        least half of ``b``'s head bytes (whole segments by digest, plus the common prefix of
        the first differing segment), e.g. a single-turn lineage whose model, tools or
        system changed, or a session forked from another's head with its own env block."""
        head_bytes = sum(s.size_bytes for s in b.segments if s.kind in HEAD_KINDS)
        scores = self._shared_bytes(b, index, HEAD_KINDS)
        y = b.segments[k]
        if y.kind in HEAD_KINDS:  # partial credit for the first differing head segment
            tail = b.data[y.start:y.end]
            candidates = index.holders(b.segments[k - 1].prefix_digest) if k else index.all
            for pos in candidates[-_SCAN_CANDIDATES:]:
                a = self.reqs[pos]
                if k < len(a.segments) and a.segments[k].kind == y.kind:
                    x = a.segments[k]
                    scores[pos] = scores.get(pos, 0) + common_prefix_len(
                        a.data[x.start:x.end], tail)
        return self._best(scores, lambda a, score: 2 * score >= head_bytes)

    def _continued(self, b: _Req, index: _Index) -> _Req | None:
        """The earlier request whose conversation ``b`` most plausibly continues: the most
        message bytes re-sent, and at least a quarter of its own (:func:`_continues`)."""
        scores = self._shared_bytes(b, index, ("message",))
        return self._best(scores, lambda a, score: _continues(a, b))

    def _best(self, scores: dict[int, int], accept: Any) -> _Req | None:
        """The highest-scoring candidate (latest on ties) if ``accept(req, score)``."""
        if not scores:
            return None
        pos = max(scores, key=lambda p: (scores[p], p))
        a = self.reqs[pos]
        return a if accept(a, scores[pos]) else None

    def _across_keys(self, b: _Req) -> _Req | None:
        """For a request whose body-hinted key (``prompt_cache_key``, ``metadata.user_id``)
        is new: the request it plausibly continues under a key that was *replaced* (never
        used again from ``b`` on), so a rotated key (one per day, per head) is paired and
        named, while keys used side by side (one per user) stay apart."""
        if not b.hinted or b.scope is None:
            return None
        own = self.scopes.get((b.wire_format, b.group, b.scope))
        index = self.scopes.get((b.wire_format, b.group, None))
        if (own is not None and own.all) or index is None or not index.all:
            return None  # not a new key, or nothing earlier at all
        last = self.last_pos
        retired = _Index()
        for pos in index.all[-_SCAN_CANDIDATES:]:
            a = self.reqs[pos]
            if a.scope != b.scope and last.get((a.wire_format, a.group, a.scope), 0) < b.pos:
                retired.add(a)
        if not retired.all:
            return None
        if b.has_assistant:
            return self._same_opening(b, retired) or self._continued(b, retired)
        same = self._same_opening(b, retired)
        if same is not None or b.first_message_digest is not None:
            # The same prompt under the new key (a rotated key: named), else a new key with
            # a new first message: a conversation start, whatever else it shares (three
            # fresh sessions of one CLI start alike, never as a change of key or model).
            return same
        k = retired.shared(b.segments)
        return None if k >= _head_count(b) else self._head_relative(b, k, retired)

    def _most_bytes(self, b: _Req, k: int, index: _Index) -> _Req | None:
        """Of the candidates sharing ``k`` whole segments with ``b``, the one sharing the most
        bytes of segment ``k`` (the 64 most recent; latest on ties)."""
        segs = b.segments
        candidates = index.holders(segs[k - 1].prefix_digest) if k else index.all
        if k >= len(segs):
            return self.reqs[candidates[-1]]
        y = segs[k]
        tail = b.data[y.start:y.end]
        best, best_len = None, -1
        for pos in reversed(candidates[-_SCAN_CANDIDATES:]):
            a = self.reqs[pos]
            if k >= len(a.segments):
                continue
            x = a.segments[k]
            n = common_prefix_len(a.data[x.start:x.end], tail) if x.kind == y.kind else 0
            if n > best_len:
                best, best_len = a, n
        return best if best is not None else self.reqs[candidates[-1]]

    def _pair(self, b: _Req) -> None:
        a = self._predecessor(b)
        size = len(b.data)
        if a is None:
            self.pairs.append(LintPair(b.index, b.source, b.wire_format, b.session, size))
            return
        divergence = diff(a, b)
        lcp = lcp_bytes(a, b)
        expected = divergence is not None and is_expected_divergence(a, b, divergence)
        event = None
        if divergence is not None and not expected and len(self.events):
            event = self.events.explain(b, divergence)  # a deliberate compaction / rebase
        snippet = None if divergence is None else value_snippet(a, b, divergence)
        later: tuple[tuple[Divergence, ValueSnippet], ...] = ()
        total = 0 if divergence is None else 1
        if divergence is not None and not expected and event is None:  # a break: all of it
            found, total = bounded_divergences(a, b, DIVERGENCE_LIMIT, divergence)
            later = tuple((d, value_snippet(a, b, d)) for d in found[1:])
        self.pairs.append(LintPair(
            b.index, b.source, b.wire_format, b.session, size, a.index, len(a.data), lcp,
            _ratio(lcp, size), min(1.0, _ratio(len(a.data), size)), divergence,
            expected or event is not None, snippet, event, later, total))
        if divergence is None or expected or event is not None:
            return
        x = a.segments[divergence.segment_index]
        if x.kind == "message" and divergence.segment_index < len(b.segments):
            y = b.segments[divergence.segment_index]
            if content_shape_change(a.data[x.start:x.end], b.data[y.start:y.end]):
                self._hit("content-shape-changed", b.index,
                          f"request {b.index} re-sends the text of {x.name} (request "
                          f"{a.index}) in the other content shape ({x.name} -> {y.name}): "
                          "a string and one text block are different bytes to the cache")
        if x.kind == "message" and x.breakpoint is not None:
            self._hit("breakpoint-on-per-turn-block", b.index,
                      f"request {a.index} put a breakpoint on {x.name}, which changed in "
                      f"request {b.index} ({divergence.cause})")
        same_session = b.session is not None and a.session == b.session
        if divergence.segment_kind in HEAD_KINDS and (same_session or (
                b.has_assistant and a.first_message_digest is not None
                and a.first_message_digest == b.first_message_digest)):
            self._hit("head-changed-mid-session", b.index,
                      f"request {b.index} continues the conversation of request {a.index} "
                      f"with a different head: {divergence.cause} at {divergence.path or '/'}"
                      + (f" ({divergence.detail})" if divergence.detail else ""))

    def _hit(self, code: str, index: int, example: str) -> None:
        self.hits.setdefault(code, []).append(index)
        self.examples.setdefault(code, example)

    # -- per-request facts for findings ------------------------------------------------------

    def _policy(self, req: _Req) -> CacheRules | None:
        """The request's cache policy (the table remembers its lookups), ``None`` when the
        table has no entry for the provider."""
        try:
            return cache_rules(provider_of_wire_format(req.wire_format), req.model or "",
                                self.policies)
        except PolicyError:
            return None

    def _scan_request(self, req: _Req) -> None:
        # Every format segments its head (params, tools, system) first: only that run of
        # segments holds tools and system blocks, so the history is never walked here. The
        # head's facts are kept per head (its last chained digest names it whole), so a
        # request re-sending a known head costs one append (HeadGroup).
        n = _head_count(req)
        key = (req.wire_format, req.segments[n - 1].prefix_digest if n else "")
        group = self.head_groups.get(key)
        if group is None:
            group = self.head_groups[key] = self._head_group(req, n)
        self.tool_orders.setdefault(group.tools, []).append(req.index)
        bps = req.breakpoints
        if bps:
            cached_end = bps[-1].end
        elif req.wire_format in BREAKPOINT_FORMATS:  # nothing cached yet; the head is where
            cached_end = req.segments[n - 1].end if n else 0  # it goes
            marker, provider = (("cachePoint", "Bedrock") if req.wire_format == "bedrock-converse"
                                else ("cache_control", "Anthropic"))
            self._hit("no-breakpoints", req.index, f"request {req.index} has no {marker} "
                      f"breakpoint, so {provider} caches none of it")
        else:
            cached_end = len(req.data)
        group.requests.append((req.index, cached_end))
        if bps:
            self._check_breakpoints(req, bps)

    def _head_group(self, req: _Req, n: int) -> HeadGroup:
        """The group of ``req``'s head (its first ``n`` segments), its segments' entries in
        :attr:`head` made on first sight (in capture order, as findings list them)."""
        head_segments = req.segments[:n]
        heads = []
        for s in head_segments:
            if s.kind == "param":
                continue
            head = self.head.get(s.digest)
            if head is None:
                head = self.head[s.digest] = HeadSeg(
                    s.kind, s.name, s.label, s.path, req.data[s.start:s.end], [], [])
            heads.append((head, s.end))
        return HeadGroup(tuple(s.label for s in head_segments if s.kind == "tool"), heads, [])

    def _check_breakpoints(self, req: _Req, bps: tuple[Segment, ...]) -> None:
        policy = self._policy(req)
        budget = (policy.breakpoint_budget if policy else None) or 4
        if len(bps) > budget:
            unknown = (f", the conservative default for the unknown model {req.model}"
                       if policy is not None and policy.conservative else "")
            self._hit("too-many-breakpoints", req.index,
                      f"request {req.index} has {len(bps)} breakpoints (budget {budget}"
                      f"{unknown}): " + ", ".join(s.name for s in bps))
        known = [(s, TTL_LABELS_S[s.breakpoint or ""]) for s in bps
                 if s.breakpoint in TTL_LABELS_S]
        for (s1, t1), (s2, t2) in itertools.pairwise(known):
            if t2 > t1:
                self._hit("breakpoint-ttl-order", req.index,
                          f"request {req.index}: a {s2.breakpoint} breakpoint on {s2.name} "
                          f"follows a {s1.breakpoint} breakpoint on {s1.name}")
                break
        if policy is None or not policy.min_cacheable_tokens:
            return
        minimum = policy.min_cacheable_tokens
        first = bps[0]
        params = 0  # where the leading params end (SegmentBuilder.params runs first)
        for s in req.segments:
            if s.kind != "param":
                break
            params = s.end
        if first.kind != "param" and first.end - params >= 16 * minimum:
            return  # the prefix below (contiguous segments from 0, params left out) is big
        at = req.first_breakpoint
        prefix = [s for s in req.segments[: at + 1] if s.kind != "param"]
        tokens = sum(self.tokens.count(req.data[s.start:s.end]) for s in prefix)
        if tokens < minimum:
            if policy.conservative:
                whose = (f"conservative {minimum}-token minimum assumed for the unknown model "
                         f"{req.model or '(none given)'}: the provider's largest documented "
                         "minimum; add the model to the policy table for its own")
            else:
                whose = f"{minimum}-token minimum of {req.model or 'this model'}"
            self._hit("breakpoint-below-minimum", req.index,
                      f"request {req.index}: the first breakpoint ({first.name}) ends a prefix "
                      f"of ~{tokens} tokens ({_method(self.tokens)}), below the {whose} "
                      f"({policy.source.split(';')[0]})")

    # -- output ------------------------------------------------------------------------------

    def report(self, capture: str | None) -> LintReport:
        for head in self.head.values():
            head.requests.clear()
            head.cached_requests.clear()
        for group in self.head_groups.values():
            group.spread()
        findings = [*head_findings(self.head.values()), *tool_order_findings(self.tool_orders)]
        for code, indexes in self.hits.items():
            count = len(set(indexes))
            more = f" (and {count - 1} more request{'s' * (count > 2)})" if count > 1 else ""
            findings.append(finding(code, self.examples[code] + more, indexes))
        rank = {"error": 0, "warning": 1, "info": 2}
        findings.sort(key=lambda f: (rank[f.severity], f.code, f.requests))
        return LintReport(self._summary(), tuple(self.pairs), tuple(findings),
                          tuple(self.problems), capture)

    def _summary(self) -> LintSummary:
        with_pred = [p for p in self.pairs if p.predecessor is not None]
        causes: dict[str, int] = {}
        formats: dict[str, int] = {}
        for p in self.pairs:
            formats[p.wire_format] = formats.get(p.wire_format, 0) + 1
            if p.is_break and p.divergence is not None:
                causes[p.divergence.cause] = causes.get(p.divergence.cause, 0) + 1
        n = len(with_pred)
        total = sum(p.size_bytes for p in with_pred)
        return LintSummary(
            requests=len(self.pairs),
            sessions=len(self.pairs) - n,
            pairs=n,
            breaks=sum(causes.values()),
            expected_divergences=sum(1 for p in with_pred if p.expected),
            prefix_ratio_mean=sum(p.prefix_ratio or 0.0 for p in with_pred) / n if n else None,
            prefix_ratio_weighted=_ratio(sum(p.lcp_bytes for p in with_pred), total) if n
            else None,
            ceiling=sum(p.ceiling or 0.0 for p in with_pred) / n if n else None,
            ceiling_weighted=_ratio(sum(min(p.predecessor_size_bytes or 0, p.size_bytes)
                                        for p in with_pred), total) if n else None,
            causes=dict(sorted(causes.items(), key=lambda kv: (-kv[1], kv[0]))),
            wire_formats=formats,
            problems=len(self.problems),
            skipped=self.skipped,
        )

# -- public API ------------------------------------------------------------------------------


def _entries(
    requests: Iterable[Any], sessions: Sequence[str | None] | None
) -> Iterator[CaptureEntry]:
    try:
        items = iter(requests)
    except TypeError as exc:
        raise CaptureError(f"requests is a {type(requests).__name__}, not an iterable of "
                           "request bodies", code="capture-record") from exc
    for i, item in enumerate(items):
        session = sessions[i] if sessions is not None and i < len(sessions) else None
        if isinstance(item, CaptureEntry):
            yield item
            continue
        body = getattr(item, "body", item)  # ProviderRequest / SegmentedRequest
        path = getattr(item, "path", None)
        declared = getattr(item, "wire_format", None)
        if not isinstance(body, Mapping):
            raise CaptureError(f"request {i} is a {type(item).__name__}, not a request body",
                               code="capture-record")
        yield CaptureEntry(i, f"request {i}", body, None, path if isinstance(path, str) else
                           None, session, declared if isinstance(declared, str) else None)


def lint_requests(
    requests: Iterable[Any],
    *,
    wire_format: str | None = None,
    sessions: Sequence[str | None] | None = None,
    policies: PolicyTable | None = None,
    events: Iterable[Any] | None = None,
) -> LintReport:
    """Lint a sequence of requests, in the order they were sent.

    Args:
        requests: Request body dicts, :class:`~stableprompt.ProviderRequest` or
            :class:`SegmentedRequest` objects, or :class:`CaptureEntry` records; request ``i``
            gets capture index ``i`` (entries keep their own).
        wire_format: ``anthropic``, ``openai-chat`` or ``openai-responses`` for every request;
            ``None`` or ``"auto"`` detects it per request.
        sessions: Optional session id per request (``None`` entries: unknown).
        policies: Cache-policy table for breakpoint budgets and minimums (default: shipped).
        events: :class:`~stableprompt.CacheEvent` objects of deliberate changes, from
            :meth:`Conversation.compact` and :meth:`Conversation.rebase`, in order: the
            break each one explains is expected (``LintPair.event`` names the kind), not a
            break (matching rules: :mod:`stableprompt._lint._events`).

    Returns:
        LintReport (a request whose shape the format does not allow becomes a problem).

    Raises:
        CaptureError: unknown ``wire_format`` (code ``capture-format``), ``requests`` not
            iterable or an item that is not a request body (``capture-record``), or nothing
            to lint (``capture-empty``).
        InputError: ``events`` is not a list of CacheEvent (code ``lint-events``, pointer
            ``/events/<i>``).
    """
    linter = _Linter(wire_format=_check_format(wire_format), policies=policies, events=events)
    for entry in _entries(requests, sessions):
        linter.add(entry)
    return _finish(linter, None)


def lint_capture(
    path: str | Path, *, wire_format: str | None = None, policies: PolicyTable | None = None,
    join: bool = False, reuse: bool = True,
) -> LintReport:
    """Lint a capture file or directory (see :mod:`stableprompt._lint._capture` for the formats).

    Malformed records are reported in ``report.problems`` with their line numbers and the rest
    is linted. In a directory, requests of different files (:attr:`CaptureEntry.group`) are
    never paired unless ``join`` (one stream in file order, as ``--join``).

    Each record is parsed once, and a request re-sending its conversation's previous request
    segments and hashes only what is new (:mod:`stableprompt._wire._resegment`); ``reuse=False``
    segments every request whole (the same report, slower: what the tests compare against).

    Raises:
        CaptureError: unknown ``wire_format`` (code ``capture-format``), unreadable capture
            (``capture-unreadable``), a capture with no records (``capture-empty``) or with no
            request among them (``capture-format``, naming the first problem).
    """
    linter = _Linter(wire_format=_check_format(wire_format), policies=policies, join=join,
                     reuse=reuse)
    with no_full_collections():  # what lint holds only grows until the report: see ._gc
        for item in (iter_records(path, linter.decode) if reuse else iter_capture(path)):
            if isinstance(item, CaptureEntry):
                linter.add(item)
            elif isinstance(item, CaptureProblem):
                linter.problems.append(item)
            elif isinstance(item, Skipped):
                linter.skipped += 1
        return _finish(linter, str(path))


def _check_format(wire_format: str | None) -> str | None:
    if wire_format in (None, "auto"):
        return None
    if wire_format == "openai-compatible":
        return "openai-chat"
    if wire_format not in WIRE_FORMATS_WITH_REQUESTS:
        raise CaptureError(f"unknown wire format {wire_format!r}; expected auto, "
                           f"{', '.join(WIRE_FORMATS_WITH_REQUESTS)}", code="capture-format")
    return wire_format


def _finish(linter: _Linter, capture: str | None) -> LintReport:
    linter.pair_all()
    if not linter.reqs:
        where = f"capture {capture!r}" if capture else "the request list"
        if linter.problems:
            first = linter.problems[0]
            raise CaptureError(f"{where} holds no lintable request ({len(linter.problems)} "
                               f"malformed record(s); first: {first})", code="capture-format")
        raise CaptureError(f"{where} is empty: no requests", code="capture-empty")
    return linter.report(capture)


public(lint_capture, lint_requests)
