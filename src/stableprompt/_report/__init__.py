"""Ledger -> numbers -> terminal / JSON / HTML / OTel.

- ``_summary``: the numbers (hit rate, ceiling across sessions, verdicts, cost,
  turn-boundary split) per group, and the public ``Summary`` that holds them (``summarize``).
- ``_calls``: one row per call (read share, partial, exclusions, lost tokens and USD) and cliffs.
- ``_causes``: causes ranked by lost tokens and dollars, with lint's fixes.
- ``_pricing``: the one call site of genai-prices.
- ``_snippets``: before/after snippets of a prefix change from stored request bodies.
- ``_text``: the terminal tables.
- ``_html``: the self-contained HTML page.
- ``_charts``: its charts (matplotlib, optional ``report`` extra; imported only to draw).
- ``_otel``: export_otel and the live ``OTelSink``: one OpenTelemetry GenAI span and
  ``gen_ai.client.token.usage`` points per record.
- ``_command``: ``stableprompt report`` (arguments, reading and merging ledgers, corrupt rows
  skipped by id, output).
"""
