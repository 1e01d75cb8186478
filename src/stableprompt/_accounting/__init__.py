"""Ledger records -> the numbers: hit-rate and cost accounting, no presentation.

- ``_summary``: the numbers (hit rate, ceiling across sessions, verdicts, cost,
  turn-boundary split) per group, and the public ``Summary`` that holds them (``summarize``).
- ``_builder``: the one pass that makes a ``Summary``, holding every call (``summarize``) or
  streaming (``summarize_stream``, ``stableprompt report``: a page of calls, bounded state).
- ``_ceilings``: the append-only ceiling of each call (``Ceilings``).
- ``_spill``: mappings with at most a cap of entries in memory, the rest in a temporary SQLite
  file (the streaming pass's calls, cache keys, sessions and branches: memory bounded).
- ``_totals``: ``Totals`` and ``ScenarioReport``, the sums per group (``_summary`` re-exports
  them).
- ``_calls``: one row per call (read share, partial, exclusions, lost tokens and USD) and cliffs.
- ``_causes``: causes ranked by lost tokens and dollars, with lint's fixes (``_diff``).
- ``_pricing``: the one call site of genai-prices, and server-tool fees as dated data.
- ``_snippets``: before/after snippets of a prefix change from stored request bodies.
- ``_stabilized``: what the proxy's stabilizing rewrites saved.

Layer 3, beside ``_recording``: :meth:`Recorder.summary <stableprompt.Recorder.summary>` gives
these numbers in process; ``_report`` (layer 5) shows them.
"""
