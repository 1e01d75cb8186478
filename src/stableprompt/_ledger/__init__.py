"""Where records live.

- ``_usage_record``: UsageRecord (one call's accounting), Verdict, the one scrubbed field list.
- ``_schema``: ledger columns, migrations, row codec, read-only open.
- ``_spill``: spill files for records the database could not take.
- ``_ledger``: Ledger (SQLite WAL, retries, reads, JSONL export).
"""
