"""Ledgers as older stableprompt versions wrote them, for the migration and read-only tests.

:func:`downgrade` turns a ledger the current code wrote into the file an older version would
have written: the ``calls`` columns added since (``_schema.ADDED_COLUMNS``) dropped, the
``meta`` table dropped below v2, the rollup table and its trigger dropped below v5,
``PRAGMA user_version`` set. Writing with a shortened
migration list alone no longer does it: the current insert names every current column.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from stableprompt._ledger._rollups import ROLLUP_TABLE
from stableprompt._ledger._schema import ADDED_COLUMNS


def downgrade(db: Path, version: int) -> None:
    """Make ``db`` (a current ledger) the schema-``version`` ledger of an older stableprompt."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        if version < 5:
            conn.execute(f"DROP TRIGGER IF EXISTS {ROLLUP_TABLE}_add")
            conn.execute(f"DROP TABLE IF EXISTS {ROLLUP_TABLE}")
        for column, added in ADDED_COLUMNS.items():
            if added > version:
                conn.execute(f'ALTER TABLE calls DROP COLUMN "{column}"')
        if version < 2:
            conn.execute("DROP TABLE IF EXISTS meta")
        conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
