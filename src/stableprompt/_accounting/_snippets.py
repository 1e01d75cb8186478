"""Before/after snippets of a prefix change, from the request bodies a ledger kept.

A ``client_mutation`` row names the first divergent segment and JSON path; the text around
the change needs both request bodies. Where the ledger kept them (``store_content=True``: this
row's ``content`` and its ``predecessor_id`` row's), :func:`mutation_snippets` re-diffs them
(``_diff.diff`` over ``_wire.segment_request``) and cuts lint's snippet of the differing value
(:func:`stableprompt._diff.value_snippet`: up to 32 characters either side, key
shapes redacted), so the report shows exactly what ``stableprompt lint`` would. Rows whose
``verdict_detail`` already holds ``snippet_a`` / ``snippet_b`` keep those.
"""

from __future__ import annotations

from collections.abc import Mapping

from .._canonical import loads
from .._diff import diff, value_snippet
from .._ledger._usage_record import UsageRecord
from .._wire._formats import segment_request
from .._wire._segmenter import SegmentedRequest

__all__ = ["mutation_snippets"]


def _segmented(record: UsageRecord) -> SegmentedRequest | None:
    if record.content is None:
        return None
    try:
        body = loads(record.content.encode("utf-8"))
        if not isinstance(body, Mapping):
            return None
        wire = record.verdict_detail.get("request_format") or record.wire_format
        return segment_request(str(wire), body)
    except Exception:  # a body we cannot segment has no snippet; the row is still reported
        return None


def mutation_snippets(record: UsageRecord,
                      predecessor: UsageRecord | None) -> tuple[str, str] | None:
    """``(before, after)`` around the first change from ``predecessor`` to ``record``, or
    ``None`` when either body is missing, cannot be segmented, or nothing differs."""
    if predecessor is None:
        return None
    a, b = _segmented(predecessor), _segmented(record)
    if a is None or b is None:
        return None
    try:
        divergence = diff(a, b)
        if divergence is None:
            return None
        snippet = value_snippet(a, b, divergence)
    except Exception:  # pragma: no cover - defensive: a snippet never fails the report
        return None
    return snippet.snippet_a, snippet.snippet_b
