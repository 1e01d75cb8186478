"""Longest common prefix and first divergence between two prompts, with a likely cause.

Works on anything segmented: :class:`~stableprompt.RenderedPrompt`,
:class:`~stableprompt.ProviderRequest` and :class:`SegmentedRequest` (bodies captured from any
harness). Because segment digests are chained, the first divergent segment is found by binary
search over ``prefix_digest`` (O(log n) digest comparisons), and only that segment is parsed.

Causes (stable slugs): ``model-change``, ``param-change``, ``tool-added``, ``tool-removed``,
``tool-reorder``, ``key-order``, ``property-order``, ``whitespace``, ``volatile-token``,
``history-rewrite``, ``history-insert``, ``history-delete``, ``history-move`` (history items
put before an already-sent one, left out, or re-sent elsewhere: ``_diff._history``),
``content-edit``, ``breakpoint-on-per-turn-block`` (the predecessor's
cache breakpoint sat on a message block holding a per-call value, e.g. a clock block, which
the later request changed or left out: the entry written there ends in content no later
request repeats; the underlying change is in the detail).

``key-order`` and ``property-order`` are two causes on purpose. Object keys in another order
carry no meaning for a provider (``key-order``: serialize with sorted keys and the break goes
away). A tool schema's ``properties`` in another order are another schema: OpenAI Structured
Outputs generate the fields in that order, and Gemini's ``propertyOrdering`` pins it
(``_prompt._tool_schema``), so sorting them would change what the model writes
(``property-order``: keep one order, the one the schema was written in).

On top of :func:`diff`: :func:`is_expected_divergence` (is the divergence the predecessor's
volatile tail: one rule for the recorder, lint and ``assert_prefix_stable``) and
:func:`value_snippet` (the differing JSON value at the divergence's body pointer, with a
**character** offset inside it and up to :data:`SNIPPET_CHARS` characters either side: what
lint prints and what the recorder stores on a ``client_mutation`` row for the report).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, AnyStr, Protocol

from .._canonical import canonical_json, escape_pointer, loads, pointer_get, wire_json
from .._exceptions import InputError
from .._policy import CONTENT_SHAPES
from .._prompt._tool_schema import properties_orders
from .._public import public
from .._redact import redact_slice
from .._segment import ByteSlices, HeadedSegments, Segment, Snapshot
from .._volatility import paired_nonce, scan_volatile, volatile_kind_at
from .._wire import anthropic, bedrock_converse, gemini, openai_chat, openai_responses
from .._wire._schema_order import param_schemas
from ._history import HistoryOp, history_ops, item_of

__all__ = [
    "CAUSES",
    "CAUSE_FIXES",
    "FINDING_FIXES",
    "SNIPPET_CHARS",
    "Divergence",
    "Segmented",
    "ValueSnippet",
    "body_path",
    "common_prefix_len",
    "diff",
    "diverges",
    "first_divergent_index",
    "history_cause",
    "is_expected_divergence",
    "item_alike",
    "lcp_bytes",
    "tokens_after",
    "value_snippet",
]

CAUSES = (
    "model-change",
    "param-change",
    "tool-added",
    "tool-removed",
    "tool-reorder",
    "key-order",
    "property-order",
    "whitespace",
    "volatile-token",
    "history-rewrite",
    "history-insert",
    "history-delete",
    "history-move",
    "content-edit",
    "breakpoint-on-per-turn-block",
)

#: One-line fix per break cause (:data:`CAUSES`): what ``stableprompt lint`` and the report
#: print beside a break.
CAUSE_FIXES: Mapping[str, str] = {
    "model-change": "keep one model per session; a model switch starts a cold cache "
    "(start a new session for another model)",
    "param-change": "keep cache-key parameters (tool_choice, thinking, reasoning effort, "
    "response schema) fixed for the whole session",
    "tool-added": "declare every tool in the head up front and mask per-turn availability "
    "(tool_choice or a tail note) instead of adding tools",
    "tool-removed": "keep tools in the head and mask them (tool_choice or a tail note) "
    "instead of removing them",
    "tool-reorder": "send tools in one fixed order (sorted by name)",
    "key-order": "serialize JSON with sorted keys (canonical JSON) for tools, schemas and "
    "tool_use inputs; keep each schema's properties in their own order (it is what the model "
    "writes)",
    "property-order": "send each tool schema's properties in one fixed order (build the schema "
    "once): the order is what the model writes (OpenAI Structured Outputs, Gemini "
    "propertyOrdering), so never sort or shuffle it per call",
    "whitespace": "render each text once and re-send the same bytes; never re-format it",
    "volatile-token": "move per-turn values (clock, dates, ids, counters) out of the prefix "
    "into a volatile tail after the last breakpoint",
    "history-rewrite": "treat history as append-only: re-send the exact bytes already sent "
    "(same content form, whitespace, blocks)",
    "history-insert": "append new messages after the last one already sent, never before "
    "it: put late context (a file list, a reminder, a summary) in the next message instead "
    "of inserting it into history; every message after the insertion point is prefilled "
    "again",
    "history-delete": "keep every message already sent, in place; drop history only at a "
    "deliberate compaction (one rewrite, then append-only again)",
    "history-move": "keep messages already sent in the order they were sent; never re-sort "
    "or regroup history",
    "content-edit": "freeze the head (tools + system) for the session; changing it starts "
    "a new cache lineage",
    "breakpoint-on-per-turn-block": "put the breakpoint on the last stable block, before "
    "per-turn content, not on the per-turn block",
}

def _content_shape_fix() -> str:
    """The content-shape fix: one sentence, one URL per provider, from the rule in
    :data:`stableprompt._policy.CONTENT_SHAPES` (whose ``finding`` and ``source`` hold the
    full evidence)."""
    rules = CONTENT_SHAPES.values()
    alike = [r.provider for r in rules if r.cache_alike]
    verdict = (f"cache alike on {', '.join(alike)} only" if alike else
               "are different bytes to the cache: no provider documents that they cache alike")
    return ("re-send each message in the shape it was first sent in (a string stays a string, "
            "a list of text blocks stays a list); \"content\": \"x\" and "
            "[{\"type\": \"text\", \"text\": \"x\"}] " + verdict + " ("
            + "; ".join(f"{r.provider}: {r.url}" for r in rules) + ")")


#: Capture-wide finding code -> (severity, one-line fix): ``stableprompt lint``'s findings, and
#: the report's fixes for causes that are findings (a missing breakpoint).
FINDING_FIXES: Mapping[str, tuple[str, str]] = {
    "head-changed-mid-session": ("error", "freeze the head (model, params, tools, system) for "
                                 "a session; start a new session to change it"),
    "unstable-tool-order": ("error", "send tools in one fixed order (sorted by name); mask "
                            "instead of removing"),
    "too-many-breakpoints": ("error", "use at most the provider's breakpoint budget (4): end "
                             "of head and end of stable history"),
    "breakpoint-ttl-order": ("error", "put longer-TTL breakpoints (1h) before shorter ones "
                             "(5m)"),
    "content-shape-changed": ("error", _content_shape_fix()),
    "format-mismatch": ("error", "drop --format (the format is detected per request) or pass "
                        "the format the requests were sent in"),
    "volatile-in-cached-region": ("warning", "move per-turn values (clock, dates, ids) out of "
                                  "tools/system into a volatile tail after the last breakpoint"),
    "breakpoint-on-per-turn-block": ("warning", CAUSE_FIXES["breakpoint-on-per-turn-block"]),
    "breakpoint-below-minimum": ("warning", "move the first breakpoint to a prefix of at least "
                                 "the model's minimum cacheable tokens, or drop it"),
    "no-breakpoints": ("warning", "add cache_control (Anthropic; or top-level cache_control) "
                       "or a cachePoint block (Bedrock Converse) at the end of the head and of "
                       "the stable history: these providers cache only at breakpoints"),
    "non-canonical-schema-keys": ("info", "serialize tool schemas with sorted keys (canonical "
                                  "JSON) so another runtime cannot reorder them; keep "
                                  "properties in their authored order (the order the model "
                                  "writes)"),
}


SNIPPET_CHARS = 32
"""Characters (text snippets) or bytes (segment-data snippets) shown either side of a change."""
_MISSING = object()
#: One tail slot as the SDK renders it (``RenderedPrompt.tail_texts``): ``<name>\nvalue\n</name>``.
_SLOT = re.compile(r"<([A-Za-z0-9_.:-]{1,64})>\n.*?\n</\1>", re.DOTALL)
_KEY_CONTEXT = 256  # bytes searched beyond a snippet for a key that reaches into it
_WS = re.compile(r"\s+")


class Segmented(Protocol):
    """Anything with ordered segments over a byte buffer (``data[s.start:s.end]``)."""

    @property
    def segments(self) -> Sequence[Segment]: ...

    @property
    def data(self) -> ByteSlices: ...


def _bytes(x: Segmented) -> ByteSlices:
    """``x``'s segment bytes: a ``SegmentedRequest``'s shared pieces (never joined whole to
    read a few segments), else its ``data``."""
    found: ByteSlices | None = getattr(x, "segment_bytes", None)
    return found if found is not None else x.data


@dataclass(frozen=True, slots=True)
class Divergence:
    """Where and why a request stops sharing its predecessor's prefix.

    Attributes:
        offset: Byte offset of the first differing byte in the predecessor's ``data`` (its
            concatenated segment bytes, see :func:`diff`; == ``lcp_bytes``).
        segment: Name of the first divergent segment of the predecessor (``system[0]``), or of
            the later request when the predecessor ran out.
        segment_kind: ``param``, ``tool``, ``system``, ``message`` or ``tail``.
        segment_index: Index of that segment in the predecessor's segment list.
        path: JSON pointer of the first differing value in the provider body (or in the
            segment, for SDK renders), e.g. ``/system/0/text``.
        cause: One of :data:`CAUSES`.
        detail: Human detail: the volatile kind, the parameter, the tools involved, ...
        snippet_a: Up to 32 bytes either side of the divergence in the predecessor (UTF-8 text).
        snippet_b: The same window in the later request.
        path_b: The JSON pointer of the corresponding value in the later request when it is
            not ``path`` (a divergence after an insertion or deletion of history items:
            ``/messages/6`` there for ``/messages/5`` here), else ``""``.
        lost_bytes: Bytes of the predecessor's cacheable segment data from ``offset`` to its
            end: what this divergence costs once every earlier one is fixed (for the first
            divergence, what the cache lost), in segment-data bytes.
        lost_tokens: The same in tokens when the predecessor's segments carry token counts
            (a render, or the recorder's estimate: the ledger's ``divergences``), else
            ``None``.
    """

    offset: int
    segment: str
    segment_kind: str
    segment_index: int
    path: str
    cause: str
    detail: str
    snippet_a: str
    snippet_b: str
    path_b: str = ""
    lost_bytes: int | None = None
    lost_tokens: int | None = None

    @property
    def lcp_bytes(self) -> int:
        """Longest common prefix in bytes (same as ``offset``)."""
        return self.offset

    def __str__(self) -> str:
        detail = f" ({self.detail})" if self.detail else ""
        return (
            f"prefix diverges at byte {self.offset} in segment {self.segment} "
            f"at {self.path or '/'}: {self.cause}{detail}\n"
            f"  before: {self.snippet_a!r}\n  after:  {self.snippet_b!r}"
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``segment, path, offset, cause, detail`` plus snippets, and
        ``path_b``, ``lost_bytes``, ``lost_tokens`` when known."""
        found = {
            "segment": self.segment,
            "segment_kind": self.segment_kind,
            "path": self.path,
            "offset": self.offset,
            "cause": self.cause,
            "detail": self.detail,
            "snippet_a": self.snippet_a,
            "snippet_b": self.snippet_b,
        }
        for key in ("path_b", "lost_bytes", "lost_tokens"):
            value = getattr(self, key)
            if value not in ("", None):
                found[key] = value
        return found


def _cacheable(prompt: Segmented) -> Sequence[Segment]:
    """Drop trailing volatile tail segments: they are never part of a cached prefix. A
    render's are of kind ``tail``; a request the SDK rendered names its own
    (``ProviderRequest.tail_segments``, trailing by construction)."""
    segments = prompt.segments
    tail: Sequence[Segment] = getattr(prompt, "tail_segments", ())
    end = len(segments)
    if tail and tuple(segments[end - len(tail):]) == tuple(tail):
        end -= len(tail)
    while end and segments[end - 1].kind == "tail":
        end -= 1
    return segments if end == len(segments) else segments[:end]  # all: as they are, uncopied


def first_divergent_index(a: Sequence[Segment], b: Sequence[Segment], start: int = 0) -> int:
    """Index of the first segment of ``a`` whose chained digest differs from ``b``'s.

    Returns ``len(a)`` when every segment of ``a`` is a prefix of ``b``. Chained digests are
    monotone (once different, different forever), so this is a binary search; ``start``: the
    caller knows the first ``start`` segments agree (the search begins there), as it knows
    the segments two :class:`~stableprompt._segment.Snapshot` share (two requests of one
    conversation recorded: :meth:`~stableprompt._segment.Snapshot.shared_prefix`). The
    indexes both snapshots hold in their first part are searched in those sequences directly.
    Two :class:`~stableprompt._segment.HeadedSegments` views (lint's requests) are searched
    in their heads when those differ (the first divergence is in the shorter head, or right
    after it), else in their histories as held, from what they hold as the same objects on.
    """
    lo, hi = start, min(len(a), len(b))
    if type(a) is HeadedSegments and type(b) is HeadedSegments:
        heads = a.heads
        if a.key != b.key or heads != b.heads:
            hi = min(hi, heads, b.heads)
            a, b = a.head, b.head
        else:  # the same head: the histories' own chains decide
            x, y = a.history, b.history
            lo = max(lo, heads) - heads
            if type(x) is Snapshot:
                lo = max(lo, x.shared_prefix(y))
            return heads + _search(x, y, lo, hi - heads)
    elif type(a) is Snapshot or type(b) is Snapshot:  # not isinstance: an ABC check is slower
        x, nx = a.first_part() if type(a) is Snapshot else (a, hi)
        y, ny = b.first_part() if type(b) is Snapshot else (b, hi)
        lo = max(lo, a.shared_prefix(b)) if type(a) is Snapshot else lo
        cut = min(hi, nx, ny)
        if lo < cut and x[cut - 1].prefix_digest != y[cut - 1].prefix_digest:
            a, b, hi = x, y, cut  # the divergence is inside both first parts
        else:
            lo = max(lo, cut)
    return _search(a, b, lo, hi)


def _search(a: Sequence[Segment], b: Sequence[Segment], lo: int, hi: int) -> int:
    """The first index in ``[lo, hi)`` whose chained digests differ (``hi``: none), by
    binary search: the digests agree below ``lo`` and, once different, stay different."""
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid].prefix_digest == b[mid].prefix_digest:
            lo = mid + 1
        else:
            hi = mid
    return lo


def common_prefix_len(x: AnyStr, y: AnyStr) -> int:
    """Length of the longest common prefix of two strings or byte strings (binary search
    over slice comparisons: C-speed, no per-character Python loop)."""
    n = min(len(x), len(y))
    if x[:n] == y[:n]:
        return n
    lo, hi = 0, n  # invariant: x[:lo] == y[:lo], x[:hi] != y[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if x[:mid] == y[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def lcp_bytes(a: Segmented, b: Segmented) -> int:
    """Longest common prefix, in segment-data bytes, of ``a``'s cacheable part and ``b``."""
    sa = _cacheable(a)
    i = first_divergent_index(sa, b.segments)
    if i == len(sa):
        return sa[-1].end if sa else 0
    if i >= len(b.segments):
        return b.segments[-1].end if b.segments else 0
    x, y = sa[i], b.segments[i]
    if x.kind != y.kind:
        return x.start
    return x.start + common_prefix_len(_bytes(a)[x.start:x.end], _bytes(b)[y.start:y.end])


def _comparable(a: Segmented, b: Segmented) -> None:
    """Raise :func:`diff`'s ``InputError`` when ``a`` and ``b`` cannot be compared."""
    for name, value in (("a", a), ("b", b)):
        if not (hasattr(value, "segments") and (hasattr(value, "segment_bytes")
                                                or hasattr(value, "data"))):
            raise InputError(
                f"diff() compares RenderedPrompt, ProviderRequest or SegmentedRequest objects; "
                f"{name} is {type(value).__name__} (segment a request body dict with "
                "segment_request() first)", code="diff-type")
    if hasattr(a, "wire_format") != hasattr(b, "wire_format"):  # a request vs a render
        raise InputError(
            "cannot compare a provider request (with parameters) with a provider-neutral "
            "RenderedPrompt: compare two requests, or two renders", code="diff-mismatch")
    format_a, format_b = getattr(a, "wire_format", None), getattr(b, "wire_format", None)
    if format_a != format_b:  # two requests of different wire formats never share a cache
        raise InputError(
            f"cannot compare requests of different wire formats: a is {format_a}, b is "
            f"{format_b} (their bytes differ everywhere, and no provider caches one for the "
            "other); compare two requests of one format, or the two RenderedPrompts",
            code="diff-mismatch")


def diverges(a: Segmented, b: Segmented) -> bool:
    """``diff(a, b) is not None`` without classifying the divergence or cutting its snippets
    (one binary search over chained digests): for callers that need the divergence only on
    some paths (attribution of a hit never does).

    Raises:
        InputError: as :func:`diff`.
    """
    _comparable(a, b)
    sa = _cacheable(a)
    return first_divergent_index(sa, b.segments) < len(sa)


def _same(x: Any, y: Any) -> bool:
    """Order-sensitive JSON equality (dict key order matters, ``1 != 1.0 != True``)."""
    return type(x) is type(y) and wire_json(x) == wire_json(y)


def _first_json_difference(x: Any, y: Any, pointer: str) -> tuple[str, str]:
    """Return ``(pointer, how)`` of the first difference between two JSON values in order."""
    if isinstance(x, dict) and isinstance(y, dict):
        kx, ky = list(x), list(y)
        for key_x, key_y in zip(kx, ky, strict=False):
            if key_x != key_y:
                how = "key-order" if set(kx) == set(ky) else "keys"
                return pointer, how
            if not _same(x[key_x], y[key_y]):
                return _first_json_difference(x[key_x], y[key_y],
                                              f"{pointer}/{escape_pointer(key_x)}")
        if len(kx) != len(ky):
            longer = kx if len(kx) > len(ky) else ky
            return f"{pointer}/{escape_pointer(longer[min(len(kx), len(ky))])}", "keys"
        return pointer, "equal"
    if isinstance(x, list) and isinstance(y, list):
        for index, (vx, vy) in enumerate(zip(x, y, strict=False)):
            if not _same(vx, vy):
                return _first_json_difference(vx, vy, f"{pointer}/{index}")
        if len(x) != len(y):
            return f"{pointer}/{min(len(x), len(y))}", "length"
        return pointer, "equal"
    if type(x) is not type(y):
        return pointer, "type"
    return pointer, "value"


_TOOL_SHAPES = (anthropic, openai_chat, openai_responses, gemini, bedrock_converse)


def _tool_properties(tool: Any) -> dict[str, tuple[str, ...]]:
    """The ``properties`` orders of a tool entry's schema (pointer in the entry -> names),
    whatever the wire format's shape; empty when it has no schema."""
    if not isinstance(tool, dict):
        return {}
    for shape in _TOOL_SHAPES:
        where = shape.tool_schema(tool)
        if where is not None:
            holder, key = where
            base = _pointer_to(tool, holder) or ""
            found = properties_orders(holder[key])
            return {f"{base}/{escape_pointer(key)}{pointer}": names
                    for pointer, names in found.items()}
    return {}


def _pointer_to(node: Any, target: Any, depth: int = 3) -> str | None:
    """The pointer from ``node`` to the object ``target`` (found by identity, at most
    ``depth`` objects down), ``""`` for ``node`` itself; ``None`` when not found."""
    if node is target:
        return ""
    if depth and isinstance(node, dict):
        for key, value in node.items():
            found = _pointer_to(value, target, depth - 1)
            if found is not None:
                return f"/{escape_pointer(key)}{found}"
    return None


def _properties_moved(x: Any, y: Any) -> tuple[str, tuple[str, ...], tuple[str, ...]] | None:
    """The first ``properties`` map two tool entries hold in different orders (same names):
    ``(pointer in the entry, names before, names after)``; ``None`` when there is none."""
    before, after = _tool_properties(x), _tool_properties(y)
    for pointer, names in before.items():
        other = after.get(pointer)
        if other is not None and other != names and sorted(other) == sorted(names):
            return pointer, names, other
    return None


def _may_differ_in_whitespace_only(sx: Any, sy: Any) -> bool:
    """``False`` when the first differing values (``sx``, ``sy``: the strings at the first
    JSON difference) differ at their first differing character in two characters that are
    not whitespace (or one ends where the other goes on with one): then no whitespace
    stripping makes them equal, and the whole values need not be stripped (a 10 KB system
    text with a clock at its start costs its common prefix, not two regex passes)."""
    if not isinstance(sx, str) or not isinstance(sy, str) or sx == sy:
        return True
    k = common_prefix_len(sx, sy)
    cx, cy = sx[k:k + 1], sy[k:k + 1]
    return (cx.isspace() or cy.isspace()) if cx and cy else (cx or cy).isspace()


def _strip_ws(value: Any) -> Any:
    if isinstance(value, str):
        return _WS.sub("", value)
    if isinstance(value, dict):
        return {k: _strip_ws(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strip_ws(v) for v in value]
    return value


def _volatile_kind(x: str, y: str) -> str | None:
    """Kind of the volatile token at the first differing character of ``x`` vs ``y``, if
    any: the span covering that character in either text (a changed clock; a timestamp
    inserted or removed on one side starts there). A volatile token elsewhere in a longer
    differing region does not name the change (a working directory that changed is not a
    ``model-name`` because the model's name appears further on)."""
    index = common_prefix_len(x, y)
    both = volatile_kind_at(x, y, index)  # both sides inside a span of one kind (windowed)
    if both is not None:
        return both
    for text in (x, y):  # inserted or removed on one side: its span starts there
        for span in scan_volatile(text):
            if span.start <= index < span.end:
                return span.kind
    return "nonce" if paired_nonce(x, y, index) else None


def body_path(segment: Segment, inner: str) -> str:
    """Map a pointer inside a segment's JSON to a pointer in the provider body."""
    if segment.name.endswith(".rest"):
        return f"{segment.path}{inner}"
    for wrapper, replacement in (("/block", ""), ("/content", "/content"), ("/role", "/role")):
        if inner == wrapper or inner.startswith(wrapper + "/"):
            if wrapper == "/role" and ".content[" in segment.name:
                base = segment.path.rsplit("/content/", 1)[0]
                return f"{base}/role"
            return f"{segment.path}{replacement}{inner[len(wrapper):]}"
    return f"{segment.path}{inner}"


def _labels(segments: Sequence[Segment], kind: str) -> list[str]:
    return [s.label for s in segments if s.kind == kind]


def _snippet(data: ByteSlices, offset: int) -> str:
    """The bytes around ``offset``, key-shaped strings scrubbed (keys are found in a wider
    window, so a key cut by the snippet's edge is scrubbed too)."""
    lo = max(0, offset - SNIPPET_CHARS)
    wide = max(0, lo - _KEY_CONTEXT)
    window = redact_slice(data[wide: offset + SNIPPET_CHARS + _KEY_CONTEXT], lo - wide,
                          offset + SNIPPET_CHARS - wide)
    return window.decode("utf-8", "replace")


def _message_of(pointer: str) -> str:
    """The message a segment's JSON pointer lies in (``/messages/1/content/0`` ->
    ``/messages/1``; Gemini ``/contents/1/parts/0`` -> ``/contents/1``)."""
    return "/".join(pointer.split("/")[:3])


def _classify(
    a: Segmented, b: Segmented, x: Segment | None, y: Segment | None
) -> tuple[str, str, str]:
    """Return ``(cause, detail, path)`` for the first divergent pair of segments."""
    seg = x if x is not None else y
    assert seg is not None
    kinds = {s.kind for s in (x, y) if s is not None}
    if "param" in kinds:
        name = (x if x is not None and x.kind == "param" else y).label  # type: ignore[union-attr]
        if name == "model":
            return "model-change", "model", "/model"
        return _param_change(a, b, x, y, name)
    if "tool" in kinds:
        tools_a, tools_b = _labels(a.segments, "tool"), _labels(b.segments, "tool")
        added = sorted(set(tools_b) - set(tools_a))
        removed = sorted(set(tools_a) - set(tools_b))
        if removed:
            return "tool-removed", ", ".join(removed), seg.path
        if added:  # point at the new tool in the later request when it is there
            where = y.path if y is not None and y.kind == "tool" else seg.path
            return "tool-added", ", ".join(added), where
        if tools_a != tools_b and x is not None and y is not None and x.label != y.label:
            return "tool-reorder", f"{x.label} -> {y.label} at {x.name}", seg.path
    if x is None or y is None:
        return "history-rewrite", "request has fewer segments than its predecessor", seg.path
    return _classify_pair(a, b, x, y)


#: Params whose first key names the setting that changed (``text.format``, ``reasoning.effort``).
_NESTED_PARAMS = frozenset({"text", "reasoning", "thinking", "output_config", "generationConfig",
                            "inferenceConfig", "context_management"})


def _param_change(a: Segmented, b: Segmented, x: Segment | None, y: Segment | None,
                  name: str) -> tuple[str, str, str]:
    """``param-change`` of parameter ``name``: the pointer of the first differing value
    inside it when both requests send it (``/response_format/json_schema/schema/properties``)
    and a detail naming the setting (``text.format``; ``schema`` when a JSON Schema changed,
    ``property-order`` when only the order of its ``properties`` did)."""
    if x is None or y is None or x.kind != "param" or y.kind != "param" or x.label != y.label:
        return "param-change", name, f"/{name}"
    try:
        vx, vy = loads(_bytes(a)[x.start:x.end]), loads(_bytes(b)[y.start:y.end])
    except ValueError:  # pragma: no cover - segment bytes are JSON
        return "param-change", name, f"/{name}"
    inner, how = _first_json_difference(vx, vy, "")
    tokens = inner.split("/")[1:]
    label = f"{name}.{tokens[0]}" if name in _NESTED_PARAMS and tokens else name
    schemas_x, schemas_y = dict(param_schemas(name, vx)), dict(param_schemas(name, vy))
    if schemas_x or schemas_y:
        moved = [pointer for keys, schema in schemas_x.items() if keys in schemas_y
                 for pointer, names in properties_orders(schema).items()
                 if (other := properties_orders(schemas_y[keys]).get(pointer)) is not None
                 and other != names and sorted(other) == sorted(names)]
        if how == "key-order" and moved:
            label += f": schema properties reordered at {moved[0]}"
        elif any("/".join(keys) in inner for keys in (*schemas_x, *schemas_y)):
            label += " schema changed"
    return "param-change", label, f"/{name}{inner}"


def _classify_pair(a: Segmented, b: Segmented, x: Segment, y: Segment,
                   shifted: bool = False) -> tuple[str, str, str]:
    """``(cause, detail, path)`` of two segments in corresponding places that differ, by
    their own bytes (not by the lists around them: a tool added elsewhere is no cause of
    this pair's change). ``shifted``: the two are at other history indexes (after an
    insertion or deletion), so only their block parts of the names must agree."""
    same = (x.name.split(".", 1)[1:] == y.name.split(".", 1)[1:]) if shifted else (
        x.name == y.name)
    if x.kind != y.kind or not same:
        if x.kind == "message" or y.kind == "message":
            return "history-rewrite", f"{x.name} became {y.name}", x.path
        return "content-edit", f"{x.name} became {y.name}", x.path
    xa, yb = _bytes(a)[x.start:x.end], _bytes(b)[y.start:y.end]
    try:
        vx, vy = loads(xa), loads(yb)
    except ValueError:
        return "content-edit", "", x.path
    inner, how = _first_json_difference(vx, vy, "")
    path = body_path(x, inner)
    if how == "key-order" or (how != "equal" and canonical_json(vx) == canonical_json(vy)):
        moved = _properties_moved(vx, vy) if x.kind == "tool" else None
        if moved is not None:
            where, before, after = moved
            return ("property-order", f"properties at {body_path(x, where)}: "
                    f"{', '.join(before)} -> {', '.join(after)}", body_path(x, where))
        return "key-order", "same keys and values in a different order", path
    sx, sy = pointer_get(vx, inner), pointer_get(vy, inner)
    if _may_differ_in_whitespace_only(sx, sy) and _strip_ws(vx) == _strip_ws(vy):
        if x.kind == "message":
            return "history-rewrite", f"already-sent {x.name} changed in whitespace only", path
        return "whitespace", "only whitespace differs", path
    if isinstance(sx, str) and isinstance(sy, str):
        kind = _volatile_kind(sx, sy)
        if kind is not None:
            return "volatile-token", kind, path
    if x.kind == "message":
        dropped = _reasoning_type(vx)
        if dropped is not None and _reasoning_type(vy) != dropped:
            return "history-rewrite", f"{dropped} block dropped from already-sent {x.name}", path
        return "history-rewrite", f"already-sent {x.name} changed ({how})", path
    return "content-edit", f"{x.kind} content changed ({how})", path


def _holds_volatile(a: Segmented, x: Segment) -> bool:
    """Whether segment ``x`` of ``a`` holds a per-call value (a timestamp, id, nonce:
    :func:`~stableprompt._volatility.scan_volatile`): a breakpoint on it marks a per-turn
    block, not history that was rewritten."""
    return bool(scan_volatile(_bytes(a)[x.start:x.end].decode("utf-8", "replace")))


def _reasoning_type(value: Any) -> str | None:
    """``thinking`` / ``redacted_thinking`` / ``reasoning`` when a message segment's block or
    item is a reasoning block, else ``None``."""
    if isinstance(value, dict):
        block = value.get("block", value)
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in ("thinking", "redacted_thinking", "reasoning"):
            return str(kind)
    return None


def diff(a: Segmented, b: Segmented) -> Divergence | None:
    """Compare a predecessor ``a`` with a later prompt ``b``.

    The predecessor's trailing volatile tail segments are ignored (never cached): a
    render's ``tail:<slot>`` segments, and the tail a request rendered by the SDK carries
    (:attr:`ProviderRequest.tail_segments`: Anthropic's trailing tail blocks, OpenAI's final
    tail message), so consecutive append-only turns give ``None`` in every format. A body
    captured elsewhere carries no tail; lint's ``is_expected_divergence`` judges those.

    Offsets: ``Divergence.offset`` (and ``lcp_bytes``) is a byte offset into ``a.data``, the
    concatenated segment bytes of the compared object (``data[s.start:s.end]`` is segment
    ``s``; for a request, params first, markers removed). It is the one coordinate system of
    stableprompt's byte offsets: ``VolatileContentWarning.offset`` counts in
    ``PinnedHead.data``, which is the head's part of a render's ``data``. To get the offset
    within the divergent segment, subtract that segment's ``start``; the JSON ``path`` locates
    it in the provider body.

    Args:
        a: The earlier render/request (same lineage).
        b: The later render/request.

    Returns:
        ``None`` when ``a``'s cacheable segments are a byte prefix of ``b``'s segments, else the
        :class:`Divergence` (first divergent byte, segment, JSON path, cause, snippets, and
        ``lost_bytes``: what it costs). A history item put before an already-sent one, left
        out or re-sent elsewhere is named so (``history-insert``, ``history-delete``,
        ``history-move``, at the predecessor's item); :func:`~stableprompt.divergences`
        lists every divergence after this one.

    Raises:
        InputError: ``a`` and ``b`` are of different kinds (a provider request and a
            provider-neutral render) or requests of different wire formats (``anthropic``
            vs ``openai-chat``: the message names both), code ``diff-mismatch``; or not
            segmented objects at all (code ``diff-type``).
    """
    _comparable(a, b)
    sa, sb = _cacheable(a), b.segments
    i = first_divergent_index(sa, sb)
    if i == len(sa):
        return None
    x = sa[i]
    y = sb[i] if i < len(sb) else None
    if y is None or x.kind != y.kind:
        offset = x.start
    else:
        offset = x.start + common_prefix_len(_bytes(a)[x.start:x.end], _bytes(b)[y.start:y.end])
    cause, detail, path = _classify(a, b, x, y)
    if x.kind == "message":
        moved = _history_cause(a, b, sa, sb, i)
        if moved is not None:
            cause, detail, path = moved
    if x.kind == "message" and x.breakpoint is not None and (cause == "volatile-token" or (
            cause in ("history-rewrite", "history-delete") and _holds_volatile(a, x))):
        # the same message re-sent in another form (one text block -> a string) changed it;
        # "left out" is for a block whose message no longer holds it
        how = "changed" if y is not None and y.kind == x.kind and (
            y.name == x.name or _message_of(y.path) == _message_of(x.path)) else "was left out"
        cause, detail = "breakpoint-on-per-turn-block", (
            f"the cache breakpoint sat on {x.name}, which {how} ({cause}"
            f"{f': {detail}' if detail else ''})")
    named = y if cause == "tool-added" and y is not None and y.kind == "tool" else x
    return Divergence(
        offset=offset,
        segment=named.name,
        segment_kind=named.kind,
        segment_index=i,
        path=path,
        cause=cause,
        detail=detail,
        snippet_a=_snippet(_bytes(a), offset),
        snippet_b=_snippet(_bytes(b), offset),
        lost_bytes=sa[-1].end - offset,
        lost_tokens=tokens_after(sa, offset),
    )


def tokens_after(segments: Sequence[Segment], offset: int) -> int | None:
    """Tokens of ``segments`` from byte ``offset`` (of their data) to their end, from the
    segments' own counts (the segment holding ``offset`` by its byte share, rounded up);
    ``None`` when a segment carries no count."""
    total = 0
    for s in reversed(segments):
        if s.tokens is None:
            return None
        if s.end <= offset:
            break
        if s.start >= offset:
            total += s.tokens
        else:
            total += -(-s.tokens * (s.end - offset) // max(s.size_bytes, 1))
            break
    return total


def _item_name(segment: Segment) -> str:
    """``messages[3]`` for ``messages[3].content[1]``: the history item's name."""
    return segment.name.split(".", 1)[0]


def history_cause(op: HistoryOp, sa: Sequence[Segment], sb: Sequence[Segment],
                  a: Segmented | None = None) -> tuple[str, str, str, str]:
    """``(cause, detail, path, path_b)`` of an ``insert``, ``delete`` or ``move`` op
    (:func:`~stableprompt._diff._history.history_ops`): the path is the item's pointer in the
    predecessor (where the insertion was put before, the item left out or out of place),
    ``path_b`` the corresponding item's in the later request."""
    x = sa[op.a_index] if op.a_index < len(sa) else None
    y = sb[op.b_index] if op.b_index < len(sb) else None
    where_a = item_of(x.path) if x is not None else ""
    where_b = item_of(y.path) if y is not None else ""
    name_a = _item_name(x) if x is not None else "the end"
    name_b = _item_name(y) if y is not None else "the end"
    if op.kind == "insert":
        role = f" ({y.label})" if y is not None and y.label else ""
        count = f"{op.b_items} items" if op.b_items > 1 else "an item"
        return ("history-insert", f"{count}{role} inserted at {name_b}, before already-sent "
                f"{name_a}", where_a, where_b)
    if op.kind == "delete":
        what = "item"
        if a is not None and x is not None:
            what = _reasoning_type(loads(_bytes(a)[x.start:x.end])) or what
        return ("history-delete", f"already-sent {what} {name_a} left out ({name_b} is in "
                "its place)", where_a, where_b)
    origin = sa[op.a_from] if 0 <= op.a_from < len(sa) else x
    name_from = _item_name(origin) if origin is not None else name_a
    way = "earlier" if op.a_from > op.a_index else "later"
    how = " (keys in another order)" if op.reserialized else ""
    return ("history-move", f"already-sent {name_from} re-sent {way}, as {name_b}{how}",
            where_a, where_b)


def item_alike(a: Segmented, b: Segmented) -> Callable[[int, int], bool]:
    """``alike(i, j)`` for :func:`~stableprompt._diff._history.history_ops`: whether the
    history item starting at segment ``i`` of ``a`` and the one at ``j`` of ``b`` hold the
    same JSON value, keys in any order (canonical JSON of their segments)."""
    sa, sb = a.segments, b.segments

    def values(req: Segmented, segments: Sequence[Segment], k: int) -> bytes:
        item, data, out = item_of(segments[k].path), _bytes(req), []
        while k < len(segments) and segments[k].kind == "message" and \
                item_of(segments[k].path) == item:
            out.append(canonical_json(loads(data[segments[k].start:segments[k].end])))
            k += 1
        return b"\n".join(out)

    def alike(i: int, j: int) -> bool:
        if i >= len(sa) or j >= len(sb):
            return False
        try:
            return values(a, sa, i) == values(b, sb, j)
        except ValueError:  # pragma: no cover - segment bytes are JSON
            return False

    return alike


def _resent_elsewhere(sa: Sequence[Segment], sb: Sequence[Segment], i: int) -> bool:
    """Whether the history item holding segment ``i`` of the predecessor may have been
    inserted before, deleted or moved (the alignment decides): the later request has no item
    there, or one of another shape (role, blocks), or the predecessor's item there is re-sent
    further on in the later request, or the later request's was sent further on in the
    predecessor (by their first blocks' standalone digests). Else the item changed in place.
    One pass over the segments after it, no per-item keys."""
    if i >= len(sb) or sb[i].kind != "message":
        return True
    x, y = sa[i], sb[i]
    if x.label != y.label:
        return True
    item_a, item_b = item_of(x.path), item_of(y.path)
    start_a = start_b = i
    while start_a > 0 and sa[start_a - 1].kind == "message" and \
            item_of(sa[start_a - 1].path) == item_a:
        start_a -= 1
    while start_b > 0 and sb[start_b - 1].kind == "message" and \
            item_of(sb[start_b - 1].path) == item_b:
        start_b -= 1
    end_a, end_b = i + 1, i + 1
    while end_a < len(sa) and item_of(sa[end_a].path) == item_a:
        end_a += 1
    while end_b < len(sb) and item_of(sb[end_b].path) == item_b:
        end_b += 1
    if end_a - start_a != end_b - start_b:
        return True
    first_a, first_b = sa[start_a].digest, sb[start_b].digest
    return (any(s.digest == first_a for s in itertools.islice(sb, end_b, None))
            or any(s.digest == first_b for s in itertools.islice(sa, end_a, None)))


def _history_cause(a: Segmented, b: Segmented, sa: Sequence[Segment], sb: Sequence[Segment],
                   i: int) -> tuple[str, str, str] | None:
    """The first divergence (segment ``i``) as a history insertion, deletion or move when
    the item holding it was one (else ``None``: it changed in place)."""
    if not _resent_elsewhere(sa, sb, i):
        return None  # neither item re-sent elsewhere: it changed in place
    ops = history_ops(sa, sb, i, alike=item_alike(a, b))
    if not ops or ops[0].kind == "change" or ops[0].a_index > i or (
            ops[0].a_index < len(sa) and item_of(sa[ops[0].a_index].path)
            != item_of(sa[i].path)):
        return None
    cause, detail, path, _ = history_cause(ops[0], sa, sb, a)
    return cause, detail, path


def _expected_by_position(a: Any, b: Any, divergence: Divergence) -> bool:
    """The positional rule of :func:`is_expected_divergence`: the divergence lies in ``a``'s
    volatile tail by where it is.

    Only the predecessor's **last message** can hold the tail (stableprompt renders it as the
    trailing blocks of the last user message for Anthropic, and as a final user/developer
    message for OpenAI): a divergence in any earlier message, tool, system block or parameter
    is a break, wherever the breakpoints are. Inside the last message:

    - When ``a``'s last breakpoint ends inside the last message or right where it starts (the
      harness marked the stable history up to there), a divergence at or after that
      breakpoint's end is expected: the rest of the message is the per-turn tail.
    - Otherwise (no breakpoints, or the last one is earlier, e.g. on the system prompt), the
      divergence is expected only when ``b`` has, at that segment position, a message of
      another role or another message: the per-turn last message was replaced by the next turn.
      A last message that ``b`` re-sends in the same place, edited, is a history rewrite.

    Args:
        a: The predecessor (``.segments``, ``.data``): a request, not a ``RenderedPrompt``,
            whose tail segments ``diff`` already ignores.
        b: The later request.
        divergence: ``diff(a, b)``.
    """
    segments: Sequence[Segment] = a.segments
    i = divergence.segment_index
    if not segments or i >= len(segments) or segments[i].kind != "message":
        return False
    x = segments[i]
    last = item_of(segments[-1].path)
    if item_of(x.path) != last:
        return False
    breakpoints = [s for s in segments if s.breakpoint is not None]
    if breakpoints:
        mark = breakpoints[-1]
        if divergence.offset < mark.end:
            return False
        first = next(s for s in segments if s.kind == "message" and item_of(s.path) == last)
        if mark.end >= first.start:
            return True
    if i >= len(b.segments):
        return False
    y: Segment = b.segments[i]
    return y.kind == "message" and (y.label != x.label or item_of(y.path) != last)


public(Divergence, diff)


def is_expected_divergence(a: Segmented, b: Segmented, divergence: Divergence) -> bool:
    """Whether ``divergence`` (from ``diff(a, b)``) lies in ``a``'s volatile tail: the one
    rule of the recorder's attribution, ``stableprompt lint`` and ``assert_prefix_stable``.

    Either the positional rule (:func:`_expected_by_position`: in the predecessor's last
    message, past its last breakpoint or replaced by the next turn), or stableprompt's own
    tail message re-sent with a new value after the same history: both requests end in it and
    it holds only ``<slot>\nvalue\n</slot>`` texts, the shape the SDK renders its tail in (the
    OpenAI formats send it as a final developer/user message, which the positional rule alone
    would call an edited last message).
    """
    if _expected_by_position(a, b, divergence):
        return True
    i = divergence.segment_index
    if divergence.segment_kind != "message" or not (_ends_in(a, i) and _ends_in(b, i)):
        return False
    slots_a = _tail_slots(a, i)
    return slots_a is not None and slots_a == _tail_slots(b, i)


def _ends_in(req: Segmented, i: int) -> bool:
    """Whether segment ``i`` of ``req`` is in its last message (only that message's
    segments, e.g. a Responses item's ``rest``, follow it)."""
    segments = req.segments
    if i >= len(segments):
        return False
    key = item_of(segments[i].path)
    return all(item_of(s.path) == key for s in segments[i + 1:])


def _tail_slots(req: Segmented, i: int) -> tuple[str, ...] | None:
    """The slot names of segment ``i`` when it is a non-assistant message made only of
    SDK tail texts, else ``None``."""
    s = req.segments[i]
    try:
        value = loads(_bytes(req)[s.start:s.end])
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    role = value.get("role")
    content = value["block"] if "block" in value else value.get("content")
    if role == "assistant":
        return None
    parts = content if isinstance(content, list) else [content]
    texts: list[str] = []
    for part in parts:
        text = part if isinstance(part, str) else part.get("text") if isinstance(
            part, dict) else None
        if not isinstance(text, str):
            return None
        texts.append(text)
    names: list[str] = []
    for text in texts:
        pos = 0
        for m in _SLOT.finditer(text):
            if text[pos:m.start()] not in ("", "\n"):
                return None
            names.append(m.group(1))
            pos = m.end()
        if pos != len(text) or not names:
            return None
    return tuple(names)


@dataclass(frozen=True, slots=True)
class ValueSnippet:
    """The differing JSON value at a divergence's ``path``, on both sides.

    Attributes:
        value_offset: Character (code point) offset of the first differing character inside
            the value at ``path`` (strings as is; other values as compact JSON text in the key
            order sent). Equal to the shorter length when one is a prefix of the other; 0
            when the value is absent on one side.
        snippet_a: Up to 32 characters either side of ``value_offset`` in the predecessor's
            value. When a side has no value at ``path``, its snippet is the start of the
            nearest enclosing value below the top-level key (e.g. the string content where the
            other side has a block list); for a message block left out, the block that came at
            its place instead (the next message's); else ``""`` (a tool or parameter that is
            absent).
        snippet_b: The same for the later request.
    """

    value_offset: int
    snippet_a: str
    snippet_b: str


def _resolve(prompt: Segmented, pointer: str) -> Any:
    """The JSON value at body pointer ``pointer`` of a segmented request, or ``_MISSING``.

    Message blocks are unwrapped from the segment's ``{"role", "block"}`` wrapper; a block
    list message's ``/role`` is read from its blocks' wrapper.
    """
    data = _bytes(prompt)
    role_of = pointer.rsplit("/role", 1)[0] + "/content/" if pointer.endswith("/role") else None
    for s in prompt.segments:
        if not s.path or s.kind == "tail":
            continue
        inside = pointer == s.path or pointer.startswith(s.path + "/")
        if not inside and not (role_of and s.path.startswith(role_of)):
            continue
        try:
            value = loads(data[s.start:s.end])
        except ValueError:  # pragma: no cover - segment bytes are JSON
            continue
        if not inside:  # /messages/i/role of a block-list message
            found = value.get("role", _MISSING) if isinstance(value, dict) else _MISSING
            if found is not _MISSING:
                return found
            continue
        rest = pointer[len(s.path):]
        if ".content[" in s.name and isinstance(value, dict) and "block" in value:
            value = value["block"]
        elif s.name.endswith(".rest"):
            if rest.split("/")[1:2] in (["role"], ["content"]):
                continue
        elif s.kind in ("message", "system") and rest and isinstance(value, dict) and (
                rest.split("/")[1] not in value):
            continue  # a key the message's ``.rest`` segment holds
        found = pointer_get(value, rest, _MISSING)
        if found is not _MISSING:
            return found
    return _MISSING


def _text(value: Any) -> str:
    if value is _MISSING:
        return ""
    if isinstance(value, str):
        return value
    return wire_json(value).decode("utf-8", "replace")


def value_snippet(a: Segmented, b: Segmented, divergence: Divergence) -> ValueSnippet:
    """The differing value at ``divergence.path`` in ``a`` and ``b`` (see :class:`ValueSnippet`).

    For SDK renders the path is resolved the same way against their segments' JSON.
    """
    path_b = divergence.path_b or divergence.path
    va, vb = _resolve(a, divergence.path), _resolve(b, path_b)
    if va is _MISSING or vb is _MISSING:
        ta, tb = _text(_enclosing(a, divergence.path)), _text(_enclosing(b, path_b))
        if divergence.segment_kind == "message":  # a block left out: show what came instead
            ta = ta or _text(_block_at(a, divergence.segment_index))
            tb = tb or _text(_block_at(b, divergence.segment_index))
        return ValueSnippet(0, redact_slice(ta, 0, 2 * SNIPPET_CHARS),
                            redact_slice(tb, 0, 2 * SNIPPET_CHARS))
    ta, tb = _text(va), _text(vb)
    k = common_prefix_len(ta, tb)
    lo = max(0, k - SNIPPET_CHARS)
    return ValueSnippet(k, redact_slice(ta, lo, k + SNIPPET_CHARS),
                        redact_slice(tb, lo, k + SNIPPET_CHARS))


def _block_at(prompt: Segmented, index: int) -> Any:
    """The message block (unwrapped from ``{"role", "block"}``) or message at segment
    ``index`` of ``prompt``, else ``_MISSING``."""
    if index >= len(prompt.segments) or prompt.segments[index].kind != "message":
        return _MISSING
    s = prompt.segments[index]
    try:
        value = loads(_bytes(prompt)[s.start:s.end])
    except ValueError:  # pragma: no cover - segment bytes are JSON
        return _MISSING
    return value["block"] if isinstance(value, dict) and "block" in value else value


def _enclosing(prompt: Segmented, pointer: str) -> Any:
    """The value at ``pointer``, else at its nearest ancestor at least two tokens deep
    (``/messages/0``), else ``_MISSING``."""
    while pointer.count("/") >= 2:
        value = _resolve(prompt, pointer)
        if value is not _MISSING:
            return value
        pointer = pointer.rsplit("/", 1)[0]
    return _MISSING
