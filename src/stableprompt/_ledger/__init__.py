"""Where records live.

- ``_usage_record``: UsageRecord (one call's accounting), Verdict, the one scrubbed field list.
- ``_schema``: ledger columns, migrations, row codec, read-only open.
- ``_spill``: spill files for records the database could not take.
- ``_journal``: pending journals (records queued for a background writer, durable first).
- ``_backend``: the storage seam (Backend protocol) the ledger talks to.
- ``_sqlite``: the SQLite backend (a file, WAL). ``_postgres``: the PostgreSQL backend (psycopg).
- ``_target``: which backend ``Ledger(target)`` names (path, ``sqlite:///``, ``postgresql://``).
- ``_ledger``: Ledger (retries, spills, replay, reads, JSONL export, prune) over a backend.
- ``_rollups``: the rollup table (sums per hour x provider x model x scenario x verdict) and
  the trigger that keeps it, in both dialects. ``_reads``: read-side queries (rollup rows,
  a record by id, rows before a cut-off).
- ``_command``: ``stableprompt ledger prune`` (retention: rows deleted, rollups kept).
"""
