"""The numbers (``_accounting``) -> terminal / JSON / HTML / OTel.

- ``_text``: the terminal tables.
- ``_html``: the self-contained HTML page.
- ``_charts``: its charts (matplotlib, optional ``report`` extra; imported only to draw).
- ``_otel``: export_otel and the live ``OTelSink``: one OpenTelemetry GenAI span and
  ``gen_ai.client.token.usage`` points per record.
- ``_command``: ``stableprompt report`` (arguments, reading and merging ledgers, corrupt rows
  skipped by id, output).
"""
