"""The numbers (``_accounting``) -> terminal / JSON / HTML / OTel.

- ``_text``: the terminal tables.
- ``_table``: a rich table of many rows printed in pieces (``--sessions``), the same bytes.
- ``_html``: the self-contained HTML page.
- ``_charts``: its charts (matplotlib, optional ``report`` extra; imported only to draw).
- ``_otel``: export_otel and the live ``OTelSink``: one OpenTelemetry GenAI span and
  ``gen_ai.client.token.usage`` points per record.
- ``_command``: ``stableprompt report`` (arguments, reading and merging ledgers, corrupt rows
  skipped by id, output).
"""
