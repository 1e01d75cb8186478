"""Ledger -> numbers -> terminal / JSON / HTML / OTel.

- ``_summary``: the numbers (hit rate, ceiling, verdicts, cost) per group.
- ``_text``: the terminal tables.
- ``_html``: the self-contained HTML page.
- ``_otel``: export_otel, one OpenTelemetry GenAI span per record.
- ``_command``: ``stableprompt report`` (arguments, reading ledgers, output).
"""
