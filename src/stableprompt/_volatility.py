"""Volatile-content detectors: find what would change from one request to the next.

A prefix cache reuses work only up to the first differing token, so a clock, a date, a request id
or a nonce in the pinned head silently turns every call into a cold start. :func:`scan_volatile`
finds such tokens; the builder runs it over the head at freeze time (warning, or raising in
strict mode) and :func:`volatile_kind_at` lets the diff name a divergence ``volatile-token``.

Kinds (stable slugs, also in :data:`VOLATILE_KINDS`):

``timestamp``   ISO 8601 / RFC 3339 datetimes (``2026-11-30T14:03:22Z``, ``2026-11-30 14:03``,
                ``20261130T140322Z``, ``2026-11-30_14-03-22``), RFC 2822
                (``Mon, 30 Nov 2026 14:03:22 +0000``), ctime and JavaScript ``Date`` strings,
                and any date directly followed by a clock time (``Nov 30, 2026 at 2:03 PM``).
``date``        ``2026-11-30``, ``2026/11/30``, ``30/11/2026``, ``11/30/2026``, ``30.11.2026``,
                ``Nov 30, 2026``, ``30 November 2026``, ``Monday, November 30`` (a named date
                needs a year or a weekday).
``clock-time``  ``14:03``, ``14:03:22``, ``2:03 PM`` (a one-digit hour needs AM/PM or seconds).
``uuid``        RFC 4122 textual UUIDs, any version (the nil UUID is not flagged).
``hex-id``      16+ single-case hex digits with at least two letters and two digits (git SHAs,
                digests, trace ids), optionally ``0x``-prefixed.
``base64-id``   20+ characters of base64 / base64url that look random: request ids such as
                ``req_011CSHoEeqs5C35K2UUqR7Fy``, API keys, nonces, ULIDs, JWTs.
``nonce``       the value of a labelled id: ``nonce: 8f3k2l``, ``request_id=abc123``,
                ``Session ID: s-99102`` (the span covers the value, not the label); and short
                ``key=value`` / ``key: value`` nonces: a 5-15 character single-case hex value
                with letters and digits under any key (``cch=36ee5``, ``cch=3f9a1c2b7d``;
                after ``:`` from 8 characters or under a nonce-like key, ``trace:
                9f8e7d6c5b``, so ``Color: FF5733`` stays prose), another mix of letters and
                digits under a nonce-like key (``sid=a8k3z9``). Numbers alone are
                not (``version=12345``, ``port=8080``: versions, sizes and limits are stable);
                a value that differs between two requests under the same key is a nonce to
                :func:`paired_nonce` (the diff and lint), whatever its key.
``path``        home and temp-dir absolute paths, which name one user, machine or run
                (``/Users/alice/src/app``, ``/home/dev7/work``, ``C:\\Users\\Bob\\x``,
                ``/tmp/tmpa8k3z9x1``, ``/var/folders/...``); not ``/tmp``, ``/etc/hosts``,
                URL paths, or placeholder users (``/home/user``, ``/Users/<you>``).
``environment`` an agent harness's env lines: the value of ``Working directory:``, ``cwd=``,
                ``Hostname:`` / ``Host:`` (not ``localhost`` or ``example.com``: an HTTP
                example), ``Current branch:``, ``On branch main``, a one-line ``git status:
                3 files modified``, and git porcelain status / recent-commit lines under a
                ``Status:`` / ``Recent commits:`` header.
``model-name``  the model or provider named in a line of the head (``Model: claude-sonnet-4-5``,
                ``Provider: OpenAI``, ``powered by gpt-5.2``, ``The exact model ID is ...``,
                ``You are running on provider anthropic``; a provider after ``powered by`` is
                not, as that often names a tool's backend):
                a model switch then rewrites the head (a new lineage) instead of only the
                cache-key parameter.
``epoch``       10-digit seconds or 13-digit milliseconds from 2001-09-09 to 2100-01-01.
``counter``     per-turn counters: ``Turn 17``, ``Step 4 of 10``, ``attempt #3``, ``turn: 5``.

Precision over recall. Every digit-driven kind (all but ``path``, ``environment`` and
``model-name``) needs an ASCII digit; the other three need their labels or path prefixes, found
by a substring check first, so ordinary prose yields no span. Not flagged: placeholders
(``YYYY-MM-DD``), bare years, version numbers (``v1.2.3``), ports, prices, identifiers
(``BetaToolSearchToolBm25``), paths and URLs other than home / temp dirs, code slices
(``data[12:16]``), numbered instructions (``Step 1:``), time ranges (``09:00-17:00``), round
clock times on their own (``00:00``, ``18:30``, ``23:59:59``: formats and schedules, not
clocks), dates inside versioned names and paths (``gpt-4.1-2025-04-14``, ``spec/2025-06-18/``)
and documentation placeholders (``123e4567-e89b-12d3-a456-426614174000``, ``1234567890``,
``2147483647``). By default (``skip_examples=True``) values introduced as examples, formats or
defaults (``e.g. 2024-01-15``, ``"examples": [...]``, ``"default": "..."``) are skipped together
with the list that follows them (``'18:30' for 6:30 PM``, ``X or Y``), and so are dates stated
as fixed facts (``released 2024-09-13``, ``version: 2023-06-01``, ``must be after
14/03/2024``): documented values are stable bytes. On the 3,420 distinct tool schemas of
BFCL v4 this leaves no span.

Cost: linear in the text. One ``str.find`` pass per digit character locates the digit runs (one
regex pass when digits are dense); each run is then checked by at most a few anchored patterns
chosen by its length and neighbours, so prose without digits costs almost nothing and no
pattern can backtrack catastrophically. Patterns are compiled once at import. Measured on 2
cores: ~1-2.5 ms per 100 KB of tool schemas, docs and code; 0.01 ms for 100 KB of prose
without digits; ~20-45 ms for 100 KB of digit-dense logs (one span every 40 bytes). Text taken
from JSON is handled: an escape such as ``\\n`` right before a token does not glue onto it.

The patterns and the scanner that applies them are in :mod:`._volatility_patterns`; this
module resolves their overlapping candidates and holds the public API and the diff support.
The builder (at freeze) and lint (on captured heads) both call :func:`scan_volatile` over
:func:`head_strings`: one scanner, one rule.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any

from ._canonical import escape_pointer
from ._exceptions import InputError
from ._public import public
from ._volatility_patterns import Candidate, Scanner, line_candidates, suppress_examples

__all__ = [
    "SCHEMA_CONSTANT_KEYS",
    "VOLATILE_KINDS",
    "VolatileSpan",
    "byte_offset",
    "head_strings",
    "paired_nonce",
    "scan_volatile",
    "volatile_kind_at",
]

#: Every kind :func:`scan_volatile` reports, most specific first (the tie-break order when two
#: overlapping candidate spans have the same length).
VOLATILE_KINDS: tuple[str, ...] = (
    "timestamp",
    "uuid",
    "date",
    "epoch",
    "hex-id",
    "base64-id",
    "clock-time",
    "counter",
    "nonce",
    "environment",
    "path",
    "model-name",
)
_RANK = {kind: i for i, kind in enumerate(VOLATILE_KINDS)}


@dataclass(frozen=True, slots=True)
class VolatileSpan:
    """One volatile token found by :func:`scan_volatile`.

    Attributes:
        kind: One of :data:`VOLATILE_KINDS`, e.g. ``"timestamp"``.
        start: Character offset (``str`` index) of the first character in the scanned text.
        end: Character offset one past the last character (half-open).
        text: The matched characters: ``scanned[start:end]``.
        start_byte: ``start`` as a byte offset into the text's UTF-8 encoding.
        end_byte: ``end`` as a byte offset into the text's UTF-8 encoding (half-open).
    """

    kind: str
    start: int
    end: int
    text: str
    start_byte: int
    end_byte: int


def _resolve(candidates: list[Candidate]) -> list[Candidate]:
    """Keep the longest (then most specific) of overlapping candidates; sort by start.

    Taken spans never overlap, so checking the neighbours by start is enough (O(k log k)).
    """
    order = sorted(set(candidates), key=lambda c: (c[0] - c[1], _RANK[c[2]], c[0]))
    starts: list[int] = []
    taken: list[Candidate] = []
    for cand in order:
        start, end, _ = cand
        i = bisect.bisect_right(starts, start)
        if i > 0 and taken[i - 1][1] > start:
            continue
        if i < len(taken) and taken[i][0] < end:
            continue
        starts.insert(i, start)
        taken.insert(i, cand)
    return taken


def byte_offset(text: str, char_offset: int) -> int:
    """Byte offset in ``text.encode("utf-8")`` of the character offset ``char_offset``.

    Args:
        text: The text the character offset indexes.
        char_offset: ``0 <= char_offset <= len(text)``.

    Returns:
        ``len(text[:char_offset].encode("utf-8"))``.

    Raises:
        InputError: ``char_offset`` is out of range (code ``offset-out-of-range``).
    """
    if not 0 <= char_offset <= len(text):
        raise InputError(
            f"character offset {char_offset} is outside 0..{len(text)}",
            code="offset-out-of-range",
        )
    prefix = text[:char_offset]
    if prefix.isascii():
        return char_offset
    return len(prefix.encode("utf-8", "surrogatepass"))


def scan_volatile(
    text: str,
    *,
    kinds: Collection[str] | None = None,
    skip_examples: bool = True,
) -> tuple[VolatileSpan, ...]:
    """Find volatile tokens (timestamps, ids, nonces, counters, ...) in ``text``.

    Args:
        text: Text to scan, e.g. a system prompt, or a tool's canonical JSON decoded as UTF-8.
        kinds: Report only these kinds (a subset of :data:`VOLATILE_KINDS`); ``None`` for all.
            Overlaps are resolved before filtering, so a timestamp is never reported as its
            date part when ``kinds={"date"}``.
        skip_examples: Skip documented values: those introduced as examples, formats or
            defaults (``e.g. 2024-01-15``, ``"examples": [...]``, ``"default": "..."``) and the
            lists that follow them, and dates stated as fixed facts (``released ...``,
            ``version ...``, ``after ...``).

    Returns:
        Non-overlapping spans sorted by ``start``. ``start``/``end`` are character offsets
        into ``text`` (``text[span.start:span.end] == span.text``); ``start_byte``/``end_byte``
        are the same positions in ``text.encode("utf-8")``, for messages about segment bytes.
        Of overlapping matches the longest wins, then the most specific kind (the order of
        :data:`VOLATILE_KINDS`): ``2026-11-30 14:03`` is one ``timestamp``, not a ``date`` and
        a ``clock-time``.

    Raises:
        InputError: ``kinds`` names an unknown kind (code ``volatile-kind-unknown``).
    """
    if kinds is not None:
        unknown = sorted(set(kinds) - set(VOLATILE_KINDS))
        if unknown:
            raise InputError(
                f"unknown volatile kind(s) {unknown}; known: {list(VOLATILE_KINDS)}",
                code="volatile-kind-unknown",
            )
    spans = _resolve([*Scanner(text).run(), *line_candidates(text)])
    if skip_examples and spans:
        spans = suppress_examples(text, spans)
    if kinds is not None:
        spans = [s for s in spans if s[2] in kinds]
    return _with_bytes(text, spans)


def _with_bytes(text: str, spans: list[Candidate]) -> tuple[VolatileSpan, ...]:
    if not spans:
        return ()
    if text.isascii():
        return tuple(VolatileSpan(k, s, e, text[s:e], s, e) for s, e, k in spans)
    out: list[VolatileSpan] = []
    pos = pos_byte = 0
    for start, end, kind in spans:
        start_byte = pos_byte + len(text[pos:start].encode("utf-8", "surrogatepass"))
        end_byte = start_byte + len(text[start:end].encode("utf-8", "surrogatepass"))
        out.append(VolatileSpan(kind, start, end, text[start:end], start_byte, end_byte))
        pos, pos_byte = end, end_byte
    return tuple(out)


# --------------------------------------------------------------------------------------------
# The strings of a head (tools, system blocks) that the builder and lint scan.

SCHEMA_CONSTANT_KEYS: frozenset[str] = frozenset({"const", "default", "enum", "example",
                                                  "examples"})
"""JSON Schema keywords whose value is a constant the schema declares; :func:`head_strings`
skips their values (see there for why)."""

#: Keywords whose value maps *names* (properties, definitions) to subschemas: a key directly
#: inside one is a name chosen by the tool author, never a keyword, so a property called
#: ``default`` is still walked.
_NAME_MAPS = frozenset({"$defs", "definitions", "dependentSchemas", "patternProperties",
                        "properties"})


def head_strings(value: Any, pointer: str = "") -> Iterator[tuple[str, str]]:
    """``(pointer, text)`` of every string a head segment holds that could be volatile.

    The one walker for volatile head content: :class:`~stableprompt.PinnedHead` runs it over
    each tool at :meth:`~stableprompt.PromptBuilder.freeze` (warning, or raising in strict
    mode) and ``stableprompt lint`` over each cached tool/system segment of a capture, so the
    two agree on what counts.

    The rule: every string *value* is walked, in document order (object keys are names, not
    content), except the values of the schema-constant keywords :data:`SCHEMA_CONSTANT_KEYS`
    (``default``, ``examples``, ``example``, ``enum``, ``const``), at any depth, unless the key
    is a property or definition name (a key directly inside ``properties``,
    ``patternProperties``, ``$defs``, ``definitions`` or ``dependentSchemas``). Why skipped: a
    constant the schema declares (``"default": "2024-01-15"``, ``"examples": ["14:30"]``) is
    content the model sees on every call, but it is the same bytes on every call. It changes
    only when the developer edits the schema, which is a new head (a ``content-edit``), not a
    per-turn value; and the fix a finding would give ("move it to a tail slot") cannot apply
    to a schema constant. This is the same rule :func:`scan_volatile` applies to documented
    values in text (``"default": "..."``, ``e.g. 2024-01-15``). A date in a *description*
    is still reported: that is where per-turn values are usually interpolated.

    Args:
        value: A decoded JSON value (a tool's wire or canonical form, a system block).
        pointer: JSON pointer of ``value`` itself (RFC 6901), prefixed to every result.

    Returns:
        An iterator of ``(pointer, text)``; ``pointer`` locates ``text`` inside ``value``.
    """
    yield from _head_strings(value, pointer, False)


def _head_strings(value: Any, pointer: str, names: bool) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield pointer, value
    elif isinstance(value, dict):
        for key, child in value.items():
            if names or key not in SCHEMA_CONSTANT_KEYS:
                yield from _head_strings(child, f"{pointer}/{escape_pointer(key)}",
                                         not names and key in _NAME_MAPS)
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _head_strings(child, f"{pointer}/{i}", False)


# --------------------------------------------------------------------------------------------
# Divergence support for the diff.
_DIFF_WINDOW = 512
_KV_VALUE_RE = re.compile(r"(?<![\w.-])[A-Za-z_][A-Za-z0-9_-]{0,31}=(?P<v>[0-9A-Za-z]{5,64})"
                          r"(?![0-9A-Za-z_-])")


def _value_at(text: str, index: int) -> tuple[int, str] | None:
    lo = max(0, index - 100)
    for m in _KV_VALUE_RE.finditer(text, lo, min(len(text), index + 100)):
        if m.start("v") <= index <= m.end("v") and index < len(text):
            return m.start("v"), m.group("v")
    return None


def paired_nonce(a: str, b: str, index: int) -> bool:
    """Whether two texts that first differ at character ``index`` differ inside the value
    of one ``key=value`` pair: the same key, and on both sides a run of 5 to 64 letters and
    digits holding a digit (``k=Zq81xW`` then ``k=Pm42rT``). A value that changes from one
    request to the next under the same key is a per-request nonce whatever the key is called,
    which a single text cannot show (:func:`scan_volatile` flags only hex values and
    nonce-like keys); the diff then names the divergence ``volatile-token`` (``nonce``).
    """
    if index >= min(len(a), len(b)):
        return False
    found_a, found_b = _value_at(a, index), _value_at(b, index)
    if found_a is None or found_b is None or found_a[0] != found_b[0]:
        return False
    return all(any(ch.isdigit() for ch in value) for _, value in (found_a, found_b))



def volatile_kind_at(a: str | bytes, b: str | bytes, offset: int) -> str | None:
    """Name the volatile kind that explains the first difference between ``a`` and ``b``.

    The diff uses this to label a divergence ``volatile-token``: two renders that first differ
    inside a timestamp (or a request id, ...) on both sides differ because of that token.

    Args:
        a: The earlier text (``str``) or its UTF-8 bytes.
        b: The later text or bytes, the same type as ``a``.
        offset: Where ``a`` and ``b`` first differ (``a[:offset] == b[:offset]``): a character
            offset for ``str``, a byte offset for ``bytes`` (a byte inside a multi-byte
            character is moved back to that character's first byte).

    Returns:
        The kind if, on both sides, the position ``offset`` lies inside a volatile span of that
        same kind (on one side the span may end exactly at ``offset``, as in ``14:03`` vs
        ``14:03:22``); otherwise ``None``. Only a window of 512 characters around ``offset`` is
        scanned, so the cost does not grow with the texts; spans cut by the window edge are not
        used. Example values count here: a difference inside an example is still a difference
        inside a volatile token.

    Raises:
        InputError: ``a`` and ``b`` are not both ``str`` or both ``bytes``, or ``offset`` is
            negative (code ``volatile-diff-invalid``).
    """
    if offset < 0:
        raise InputError(f"offset must be >= 0, got {offset}", code="volatile-diff-invalid")
    if isinstance(a, bytes) and isinstance(b, bytes):
        while 0 < offset < len(a) and (a[offset] & 0xC0) == 0x80:
            offset -= 1
        found_a = _kind_covering(*_window_from_bytes(a, offset))
        found_b = _kind_covering(*_window_from_bytes(b, offset))
    elif isinstance(a, str) and isinstance(b, str):
        found_a = _kind_covering(*_window(a, offset))
        found_b = _kind_covering(*_window(b, offset))
    else:
        raise InputError(
            f"volatile_kind_at needs two str or two bytes values, got {type(a).__name__} "
            f"and {type(b).__name__}",
            code="volatile-diff-invalid",
        )
    if found_a is None or found_b is None or found_a[0] != found_b[0]:
        return None
    if found_a[1] and found_b[1]:  # both spans merely end at the offset: not inside either
        return None
    return found_a[0]


def _window(text: str, offset: int) -> tuple[str, bool, bool, int]:
    lo = max(0, offset - _DIFF_WINDOW)
    hi = min(len(text), offset + _DIFF_WINDOW)
    return text[lo:hi], lo == 0, hi == len(text), offset - lo


def _window_from_bytes(data: bytes, offset: int) -> tuple[str, bool, bool, int]:
    lo = max(0, offset - 4 * _DIFF_WINDOW)
    while 0 < lo < len(data) and (data[lo] & 0xC0) == 0x80:
        lo += 1
    hi = min(len(data), offset + 4 * _DIFF_WINDOW)
    while hi < len(data) and (data[hi] & 0xC0) == 0x80:
        hi -= 1
    offset = min(offset, hi)
    head = data[lo:offset].decode("utf-8", "replace")
    tail = data[offset:hi].decode("utf-8", "replace")
    return head + tail, lo == 0, hi == len(data), len(head)


@functools.lru_cache(maxsize=64)
def _kind_covering(text: str, at_start: bool, at_end: bool, offset: int) -> tuple[str, bool] | None:
    """(kind, ends_at_offset) of the span holding ``offset`` in a window, or ``None``.

    A span containing ``offset`` strictly wins over one that ends at it. Spans touching a cut
    edge of the window are ignored: their true extent is unknown.

    Kept for the 64 latest windows (a pure function of its arguments): in a capture whose
    head changes every request, a request's window is the later side of one pair and the
    earlier side of the next, at the same offset when the same token changed (lint scanned
    each twice).
    """
    best: tuple[str, bool] | None = None
    for span in scan_volatile(text, skip_examples=False):
        if span.start > offset:
            break
        if span.start <= offset <= span.end:
            if (span.start == 0 and not at_start) or (span.end == len(text) and not at_end):
                return None
            best = (span.kind, span.end == offset)
            if not best[1]:
                return best
    return best


public(VolatileSpan, scan_volatile)
