"""Capture-wide lint findings: codes, fixes, and the checks that need the whole capture.

Used by :mod:`stableprompt._lint._linter`.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .._canonical import escape_pointer, loads
from .._diff import CAUSE_FIXES, FINDING_FIXES, body_path
from .._prompt._tool_schema import properties_orders
from .._segment import Segment
from .._volatility import head_strings, scan_volatile
from .._wire._parts import a_or_an
from ._results import LintFinding

__all__ = ["CAUSE_FIXES", "FINDING_FIXES", "HeadGroup", "HeadSeg", "finding",
           "head_findings", "tool_order_findings"]

@dataclass(slots=True)
class HeadSeg:
    """A tool or system segment seen in the capture (deduplicated by digest)."""

    kind: str
    name: str
    label: str
    path: str
    data: bytes
    requests: list[int]  # every request holding this segment
    cached_requests: list[int]  # those where it lies inside a cached region


@dataclass(slots=True)
class HeadGroup:
    """The requests sharing one head (the same chain of param, tool and system segments):
    its tool names, its segments (``(HeadSeg, end offset)``, params left out) and, per
    request, ``(index, cached_end)``: the request's cached region ends there, so a head
    segment ending at or before it is cached. Kept per head, not per segment, so a request
    costs one append; :meth:`spread` fills the segments' request lists once, for the
    report (findings read them as sets)."""

    tools: tuple[str, ...]
    heads: list[tuple[HeadSeg, int]]
    requests: list[tuple[int, int]]

    def spread(self) -> None:
        """Add this group's requests to its segments' ``requests`` and, where cached,
        ``cached_requests`` (a request caches a prefix of the head's segments: sorted by
        ``cached_end``, each segment takes a prefix of that order)."""
        ordered = sorted(self.requests, key=lambda r: -r[1])
        indexes = [i for i, _ in ordered]
        ends = [-end for _, end in ordered]  # ascending
        for head, end in self.heads:
            head.requests.extend(indexes)
            head.cached_requests.extend(indexes[:bisect.bisect_right(ends, -end)])


def head_findings(heads: Iterable[HeadSeg]) -> Iterator[LintFinding]:
    """Volatile content in cached tools/system blocks, and schemas with unsorted keys."""
    volatile: dict[tuple[str, str, str], tuple[str, list[str], list[int]]] = {}
    schemas: list[tuple[str, list[int]]] = []
    for head in heads:
        try:
            value = loads(head.data)
        except ValueError:  # pragma: no cover - segment bytes are JSON we wrote
            continue
        where = f"tool {head.label}" if head.kind == "tool" and head.label else head.name
        if head.kind == "tool":
            problem = _schema_key_problem(value)
            if problem is not None:
                schemas.append((f"{where}: {problem}", head.requests))
        if not head.cached_requests:
            continue
        seg = Segment(head.kind, head.name, 0, 0, "", "", path=head.path)
        for inner, text in head_strings(value):
            for span in scan_volatile(text):
                path = body_path(seg, inner)
                key = (where, inner, span.kind)
                if key not in volatile:
                    volatile[key] = (f"{where} at {path} holds {a_or_an(span.kind)}", [], [])
                texts = volatile[key][1]
                if span.text not in texts:
                    texts.append(span.text)
                volatile[key][2].extend(head.cached_requests)
    for start, texts, indexes in volatile.values():
        shown = ", ".join(map(repr, texts[:3])) + (f" and {len(texts) - 3} more"
                                                   if len(texts) > 3 else "")
        yield finding("volatile-in-cached-region", f"{start} ({shown}) inside the cached prefix",
                      indexes)
    if schemas:
        indexes = [i for _, reqs in schemas for i in reqs]
        shown = "; ".join(m for m, _ in schemas[:3])
        more = f" (and {len(schemas) - 3} more)" if len(schemas) > 3 else ""
        yield finding("non-canonical-schema-keys",
                       f"{len(schemas)} tool schema(s) with unsorted keys: {shown}{more}",
                       indexes)

def tool_order_findings(
    tool_orders: Mapping[tuple[str, ...], list[int]]) -> Iterator[LintFinding]:
    """Tools sent in conflicting orders (tool names per order -> request indexes)."""
    orders = [o for o in tool_orders if len(o) > 1][:200]
    conflicts: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
    for i, first in enumerate(orders):
        position = {name: j for j, name in enumerate(first)}
        for second in orders[i + 1:]:
            common = [name for name in second if name in position]
            if any(position[x] > position[y] for x, y in itertools.pairwise(common)):
                conflicts.append((first, second))
    if not conflicts:
        return
    involved = {o for pair in conflicts for o in pair}
    indexes = [i for o in involved for i in tool_orders[o]]
    first, second = conflicts[0]
    yield finding(
        "unstable-tool-order",
        f"tools appear in {len(involved)} conflicting orders, e.g. "
        f"[{', '.join(first)}] (request {tool_orders[first][0]}) vs "
        f"[{', '.join(second)}] (request {tool_orders[second][0]})",
        indexes)



def finding(code: str, message: str, indexes: Iterable[int]) -> LintFinding:
    severity, fix = FINDING_FIXES[code]
    return LintFinding(code, severity, message, fix, tuple(sorted(set(indexes))))


def _schema_key_problem(tool: Any) -> str | None:
    """First object of a tool's schema whose keys are not sorted, as a message, or ``None``.
    A ``properties`` map is not one: its order is what a model writes (OpenAI Structured
    Outputs, Gemini ``propertyOrdering``; ``_prompt._tool_schema``), kept as authored by the
    canonical form, so only the order of its subschemas' keys is checked."""
    if not isinstance(tool, dict):
        return None
    for key in ("input_schema", "parameters"):
        if isinstance(tool.get(key), dict):
            base, schema = f"/{key}", tool[key]
            break
    else:
        function = tool.get("function")
        if not (isinstance(function, dict) and isinstance(function.get("parameters"), dict)):
            return None
        base, schema = "/function/parameters", function["parameters"]

    ordered = {base + pointer for pointer in properties_orders(schema)}

    def walk(value: Any, pointer: str) -> str | None:
        if isinstance(value, dict):
            keys = list(value)
            if keys != sorted(keys) and pointer not in ordered:
                bad = next(k for k, s in zip(keys, sorted(keys), strict=True) if k != s)
                return f"keys at {pointer or '/'} start {keys[:3]} ('{bad}' out of order)"
            for k in keys:
                found = walk(value[k], f"{pointer}/{escape_pointer(k)}")
                if found:
                    return found
        elif isinstance(value, list):
            for i, child in enumerate(value):
                found = walk(child, f"{pointer}/{i}")
                if found:
                    return found
        return None

    return walk(schema, base)
