"""Lint results: per-pair findings, capture-wide findings, the summary and the report.

Produced by :mod:`stableprompt._lint._linter`; rendered by :mod:`stableprompt._lint._command`.

Counting, in one place (the JSON fields have the same names):

- ``summary.requests``: requests linted == ``len(report.pairs)`` == ``len(doc["pairs"])``.
  Every linted request has an entry in ``pairs``, the first of each conversation included
  (with ``predecessor`` ``null``).
- ``summary.sessions``: entries with ``predecessor`` ``null`` (conversation starts).
- ``summary.pairs``: entries with a predecessor, i.e. actual comparisons;
  ``requests == sessions + pairs``. Means, ratios and ``breaks`` are over these.
- ``summary.problems`` == ``len(doc["problems"])``: malformed records, not linted, each listed
  with its line or entry.
- ``summary.skipped``: capture items that are not requests (HAR GETs and other non-JSON
  traffic, non-JSON files in a directory): neither linted nor listed, and not errors.
  Every capture record is exactly one of a request, a problem, or skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._diff import Divergence, ValueSnippet
from .._public import public
from ._capture import CaptureProblem
from ._divergence import describe_divergence

__all__ = ["LintFinding", "LintPair", "LintReport", "LintSummary", "format_pair"]


# -- results ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LintPair:
    """One request and its comparison with its predecessor.

    Attributes:
        index: 0-based capture position of the request (the later request of the pair).
        source: Human location (``run.jsonl:12``).
        wire_format: ``anthropic``, ``openai-chat`` or ``openai-responses``.
        session: Session id (capture ``session``, ``metadata.user_id`` or
            ``prompt_cache_key``), or ``None``.
        size_bytes: Segment data size of the request (bytes).
        predecessor: Capture index of the predecessor, ``None`` for a conversation start.
        predecessor_size_bytes: Segment data size of the predecessor, or ``None``.
        lcp_bytes: Longest common prefix with the predecessor (bytes; 0 without one).
        prefix_ratio: ``lcp_bytes / size_bytes``, ``None`` without a predecessor.
        ceiling: ``min(1, predecessor_size_bytes / size_bytes)``, ``None`` without one.
        divergence: First divergence from the predecessor, or ``None``. Its ``offset`` is a
            byte offset into segment data (compact JSON in cache order, breakpoint markers
            removed; equal to ``lcp_bytes``), not into the body as sent.
        expected: The divergence is not a break: it lies in the predecessor's volatile
            tail, or a deliberate cache event explains it (``event``).
        value: The differing JSON value at ``divergence.path`` on both sides
            (``value_offset``: character offset of the first difference inside that value;
            snippets cut from it), ``None`` without a divergence.
        event: ``"compaction"`` or ``"head-change"`` when a :class:`~stableprompt.CacheEvent`
            passed as ``events=`` explains the divergence, else ``None``.
        later: The divergences after the first, of a break, in the provider's cache order
            (:func:`~stableprompt._diff.divergences`), each with its value snippet: at
            most :data:`~stableprompt._diff.DIVERGENCE_LIMIT` minus one.
        divergences_total: How many divergences the pair has (0 without one; the first
            counts); ``later`` holds fewer when it is truncated.
    """

    index: int
    source: str
    wire_format: str
    session: str | None
    size_bytes: int
    predecessor: int | None = None
    predecessor_size_bytes: int | None = None
    lcp_bytes: int = 0
    prefix_ratio: float | None = None
    ceiling: float | None = None
    divergence: Divergence | None = None
    expected: bool = False
    value: ValueSnippet | None = None
    event: str | None = None
    later: tuple[tuple[Divergence, ValueSnippet], ...] = ()
    divergences_total: int = 0

    @property
    def is_break(self) -> bool:
        """A divergence that is not in the predecessor's volatile tail."""
        return self.divergence is not None and not self.expected

    def describe(self) -> str:
        """The divergence message (as ``assert_prefix_stable`` raises it), or ``""``."""
        if self.divergence is None:
            return ""
        value = self.value or ValueSnippet(0, "", "")
        text = describe_divergence(self.divergence, value, expected=self.expected
                                   and self.event is None)
        if self.event is not None:
            head, _, rest = text.partition("\n")
            text = f"{head} [expected: a deliberate {self.event}]\n{rest}"
        for n, (d, value) in enumerate(self.later, 2):
            moved = f" (now {d.path_b})" if d.path_b else ""
            text += (f"\n  then {n}. at {d.path or '/'}{moved} (segment {d.segment}; "
                     f"{d.lost_bytes or 0} bytes from there): {d.cause}"
                     + (f" ({d.detail})" if d.detail else "")
                     + f"\n     before: {value.snippet_a!r}\n     after:  {value.snippet_b!r}")
        shown = 1 + len(self.later)
        if self.divergences_total > shown:
            text += f"\n  ... {self.divergences_total - shown} more divergence(s) not listed"
        return text

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict; ``divergence`` is ``None`` or ``{segment, segment_kind, path,
        offset, value_offset, cause, detail, expected, snippet_a, snippet_b}`` (the first
        divergence; ``later_divergences``: the next ones of a break, in cache order, each with
        ``lost_bytes`` and ``path_b`` when moved; ``divergences_total``): ``offset`` is
        the segment-data byte offset (== ``lcp_bytes``), ``value_offset`` the character offset
        of the first difference inside the JSON value at ``path``, and the snippets are up to
        32 characters either side of it in that value (``""`` where a side has no value)."""
        divergence = None
        if self.divergence is not None:
            value = self.value or ValueSnippet(0, "", "")
            divergence = self.divergence.as_dict()
            divergence.update(value_offset=value.value_offset, expected=self.expected,
                              snippet_a=value.snippet_a, snippet_b=value.snippet_b,
                              event=self.event)
        later = [{**d.as_dict(), "value_offset": value.value_offset,
                  "snippet_a": value.snippet_a, "snippet_b": value.snippet_b}
                 for d, value in self.later]
        return {
            "index": self.index,
            "source": self.source,
            "wire_format": self.wire_format,
            "session": self.session,
            "size_bytes": self.size_bytes,
            "predecessor": self.predecessor,
            "lcp_bytes": self.lcp_bytes,
            "prefix_ratio": self.prefix_ratio,
            "ceiling": self.ceiling,
            "divergence": divergence,
            "later_divergences": later,
            "divergences_total": self.divergences_total,
        }


@dataclass(frozen=True, slots=True)
class LintFinding:
    """A problem that holds across the capture.

    Attributes:
        code: A key of :data:`FINDING_FIXES` (``unstable-tool-order``...).
        severity: ``error`` (breaks caching or is rejected), ``warning``, or ``info``.
        message: What was found, where (segment, JSON pointer), with an example.
        fix: One line saying how to fix it.
        requests: Capture indexes of the requests involved, ascending.
    """

    code: str
    severity: str
    message: str
    fix: str
    requests: tuple[int, ...]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``code, severity, message, fix, requests``."""
        return {"code": self.code, "severity": self.severity, "message": self.message,
                "fix": self.fix, "requests": list(self.requests)}


@dataclass(frozen=True, slots=True)
class LintSummary:
    """Capture-wide numbers (see the module docstring for the definitions).

    ``requests == sessions + pairs`` (see the module docstring).

    Attributes:
        requests: Requests linted (malformed records excluded): one ``LintPair`` each.
        sessions: Conversations: requests without a predecessor.
        pairs: Requests with a predecessor (the comparisons every mean is taken over).
        breaks: Pairs whose divergence is not expected.
        expected_divergences: Pairs that diverge only in the predecessor's volatile tail.
        prefix_ratio_mean: Mean prefix ratio over pairs, ``None`` without pairs.
        prefix_ratio_weighted: ``sum(lcp_bytes) / sum(size_bytes)`` over pairs, or ``None``.
        ceiling: Mean append-only ceiling over pairs, or ``None``.
        ceiling_weighted: ``sum(min(pred, size)) / sum(size)`` over pairs, or ``None``.
        causes: Break count per cause.
        wire_formats: Request count per wire format.
        problems: Malformed records (not linted; listed in ``LintReport.problems``).
        skipped: Capture items that are not requests (HAR traffic, non-JSON files): not
            linted, not listed, not errors.
    """

    requests: int
    sessions: int
    pairs: int
    breaks: int
    expected_divergences: int
    prefix_ratio_mean: float | None
    prefix_ratio_weighted: float | None
    ceiling: float | None
    ceiling_weighted: float | None
    causes: Mapping[str, int]
    wire_formats: Mapping[str, int]
    problems: int = 0
    skipped: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict of every field."""
        return {
            "requests": self.requests, "sessions": self.sessions, "pairs": self.pairs,
            "breaks": self.breaks, "expected_divergences": self.expected_divergences,
            "prefix_ratio_mean": self.prefix_ratio_mean,
            "prefix_ratio_weighted": self.prefix_ratio_weighted,
            "ceiling": self.ceiling, "ceiling_weighted": self.ceiling_weighted,
            "causes": dict(self.causes), "wire_formats": dict(self.wire_formats),
            "problems": self.problems, "skipped": self.skipped,
        }


@dataclass(frozen=True)
class LintReport:
    """Everything ``stableprompt lint`` found.

    Attributes:
        summary: Capture-wide numbers.
        pairs: One entry per linted request, in capture order (conversation starts included,
            with ``predecessor`` ``None``).
        findings: Capture-wide findings, errors first.
        problems: Malformed records that were not linted, in capture order.
        capture: Path of the capture, when linted from a file.
    """

    summary: LintSummary
    pairs: tuple[LintPair, ...]
    findings: tuple[LintFinding, ...]
    problems: tuple[CaptureProblem, ...] = ()
    capture: str | None = None

    @property
    def breaks(self) -> tuple[LintPair, ...]:
        """Pairs with a divergence that is not expected, in capture order."""
        return tuple(p for p in self.pairs if p.is_break)

    def pair(self, index: int) -> LintPair:
        """The pair whose later request has capture index ``index``.

        Raises:
            KeyError: no linted request has that index.
        """
        for p in self.pairs:
            if p.index == index:
                return p
        raise KeyError(index)

    def finding(self, code: str) -> LintFinding | None:
        """The first finding with ``code``, or ``None``."""
        return next((f for f in self.findings if f.code == code), None)

    def gate(
        self, min_prefix_ratio: float | None = None, *, max_breaks: int | None = None
    ) -> list[str]:
        """Why the report fails a CI gate: one line per failed condition, ``[]`` when it passes.

        Args:
            min_prefix_ratio: Fail when ``prefix_ratio_mean`` is below it, or when there are no
                pairs at all (nothing was compared, so the ratio cannot be judged).
            max_breaks: Fail when ``summary.breaks`` is above it.
        """
        s = self.summary
        reasons = []
        if min_prefix_ratio is not None:
            mean = s.prefix_ratio_mean
            if mean is None:
                reasons.append(f"no pairs: each of the {s.requests} request(s) starts a "
                               "conversation, so no prefix ratio can be judged against "
                               f"{min_prefix_ratio}")
            elif mean < min_prefix_ratio:
                a, b = format_pair(mean, min_prefix_ratio)
                reasons.append(f"mean prefix ratio {a} is below the minimum {b}")
        if max_breaks is not None and s.breaks > max_breaks:
            reasons.append(f"{s.breaks} break(s) exceed the maximum of {max_breaks}")
        return reasons

    def passes(self, min_prefix_ratio: float | None, *, max_breaks: int | None = None) -> bool:
        """Whether :meth:`gate` finds nothing: ``prefix_ratio_mean >= min_prefix_ratio`` (false
        when there are no pairs) and ``breaks <= max_breaks``; ``None`` disables a check."""
        return not self.gate(min_prefix_ratio, max_breaks=max_breaks)

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` document: ``{capture, summary, pairs, findings, problems}``
        (``pairs`` has one entry per linted request, ``summary.requests`` of them; see the
        module docstring for how the counts relate)."""
        return {
            "capture": self.capture,
            "summary": self.summary.as_dict(),
            "pairs": [p.as_dict() for p in self.pairs],
            "findings": [f.as_dict() for f in self.findings],
            "problems": [p.as_dict() for p in self.problems],
        }


def format_pair(x: float, y: float, digits: int = 4) -> tuple[str, str]:
    """Format two ratios with ``digits`` decimals, more when needed to tell them apart
    (``0.95799`` vs ``0.958`` prints ``0.95799`` vs ``0.95800``, never ``0.9580`` twice)."""
    while digits < 12 and x != y and f"{x:.{digits}f}" == f"{y:.{digits}f}":
        digits += 1
    return f"{x:.{digits}f}", f"{y:.{digits}f}"


public(LintFinding, LintPair, LintReport)
