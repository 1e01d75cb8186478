"""Ledger -> numbers -> terminal / JSON / HTML.

- ``_summary``: the numbers (hit rate, ceiling, verdicts, cost) per group.
- ``_text``: the terminal tables.
- ``_html``: the self-contained HTML page.
- ``_command``: ``stableprompt report`` (arguments, reading ledgers, output).
"""
