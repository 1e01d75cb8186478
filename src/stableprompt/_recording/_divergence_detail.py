"""Every divergence of a ``client_mutation`` for its ledger row (``verdict_detail``).

The row keeps the first divergence's fields as they always were (``segment``, ``path``,
``cause``, ``snippet_a``, ``lost_tokens``, ...) and adds the list of all of them, in the
provider's cache order (:func:`~stableprompt._diff.divergences`), bounded:

- ``divergences``: at most :data:`~stableprompt._diff.DIVERGENCE_LIMIT` entries, each
  ``segment``, ``segment_kind``, ``path`` (``path_b`` when the later request holds it at
  another pointer), ``cause``, ``cause_detail``, ``offset``, ``snippet_a``, ``snippet_b``
  (:func:`~stableprompt._diff.value_snippet`: redacted as the first's) and ``lost_tokens``;
- ``divergences_total``: how many there were; ``divergences_truncated`` (``true``) when the
  list holds fewer.

``lost_tokens`` of an entry is what that divergence costs once every earlier one is fixed:
the first entry's is the row's ``lost_tokens`` (what the cache lost); a later one's is that
figure times the share of our token estimate of the predecessor's cacheable segments that lie
from its position on (so the difference between two entries is what fixing the earlier one
gains). An estimate, like every prefix count the recorder makes without the provider's
tokenizer.
"""

from __future__ import annotations

from typing import Any

from .._diff import DIVERGENCE_LIMIT, Divergence, bounded_divergences, value_snippet
from .._diff._first import _cacheable
from .._wire._segmenter import SegmentedRequest
from ._call import RequestState

__all__ = ["ledger_divergences"]


def _tokens_before(base: RequestState, d: Divergence) -> float:
    """Our token estimate of the predecessor's segments before ``d`` (the segment holding its
    offset counted by byte share)."""
    cum, tokens = base.cumulative_tokens, base.segment_tokens
    assert base.segmented is not None and cum is not None and tokens is not None
    segments = base.segmented.segments
    i = min(d.segment_index, len(segments))
    before = float(cum[i - 1]) if i else 0.0
    if i < len(segments):
        s = segments[i]
        inside = d.offset - s.start
        if 0 < inside < s.size_bytes:
            before += tokens[i] * inside / s.size_bytes
    return before


def ledger_divergences(base: RequestState, request: SegmentedRequest, lost_tokens: int,
                       first: Divergence | None = None) -> dict[str, Any]:
    """The ``divergences`` keys of a ``client_mutation`` row (see the module docstring);
    ``{}`` when the predecessor's body is not known (a ledger row only)."""
    a = base.segmented
    if a is None or base.cumulative_tokens is None or base.segment_tokens is None:
        return {}
    found, total = bounded_divergences(a, request, DIVERGENCE_LIMIT, first)
    if not found:
        return {}
    cacheable = len(_cacheable(a))
    end = float(base.cumulative_tokens[cacheable - 1]) if cacheable else 0.0
    after_first = end - _tokens_before(base, found[0])
    entries: list[dict[str, Any]] = []
    for k, d in enumerate(found):
        if k == 0 or after_first <= 0:
            lost = lost_tokens
        else:
            lost = int(lost_tokens * max(end - _tokens_before(base, d), 0.0) / after_first)
        snippet = value_snippet(a, request, d)
        entry: dict[str, Any] = {
            "segment": d.segment, "segment_kind": d.segment_kind, "path": d.path,
            "cause": d.cause, "cause_detail": d.detail, "offset": d.offset,
            "snippet_a": snippet.snippet_a, "snippet_b": snippet.snippet_b,
            "lost_tokens": lost}
        if d.path_b:
            entry["path_b"] = d.path_b
        entries.append(entry)
    detail: dict[str, Any] = {"divergences": entries, "divergences_total": total}
    if total > len(entries):
        detail["divergences_truncated"] = True
    return detail
