"""Where and why two prompts stop sharing a prefix: the first divergence and every one.

- :mod:`._first`: longest common prefix, the first divergence (:func:`diff`) and its cause
  (:data:`CAUSES`, :data:`CAUSE_FIXES`: the one cause table), value snippets, and whether a
  divergence is the predecessor's volatile tail.
- :mod:`._history`: history items inserted, deleted, moved or changed (the alignment behind
  ``history-insert``, ``history-delete``, ``history-move``).
- :mod:`._all`: every divergence of a pair in the provider's cache order
  (:func:`divergences`), bounded for ledger rows and lint (:data:`DIVERGENCE_LIMIT`).

This package holds no logic: it re-exports what the rest of stableprompt imports.
"""

from ._all import DIVERGENCE_LIMIT, bounded_divergences, divergences
from ._first import (
    CAUSE_FIXES,
    CAUSES,
    FINDING_FIXES,
    SNIPPET_CHARS,
    Divergence,
    Segmented,
    ValueSnippet,
    body_path,
    common_prefix_len,
    diff,
    diverges,
    first_divergent_index,
    history_cause,
    is_expected_divergence,
    lcp_bytes,
    tokens_after,
    value_snippet,
)
from ._history import HistoryOp, history_ops, item_of

__all__ = [
    "CAUSES",
    "CAUSE_FIXES",
    "DIVERGENCE_LIMIT",
    "FINDING_FIXES",
    "SNIPPET_CHARS",
    "Divergence",
    "HistoryOp",
    "Segmented",
    "ValueSnippet",
    "body_path",
    "bounded_divergences",
    "common_prefix_len",
    "diff",
    "divergences",
    "diverges",
    "first_divergent_index",
    "history_cause",
    "history_ops",
    "is_expected_divergence",
    "item_of",
    "lcp_bytes",
    "tokens_after",
    "value_snippet",
]
