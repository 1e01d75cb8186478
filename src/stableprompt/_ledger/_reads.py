"""Read-side queries the streaming report asks a ledger (issue 30): what one pass needs that
it cannot keep for every call.

* :func:`rollup_rows`: the ledger's rollups (``_rollups``), or for a ledger older than them
  opened read-only, the same sums aggregated from its rows (``report --rollups``).
* :func:`rows_before`: how many call rows are older than a cut-off (``stableprompt ledger
  prune --dry-run``).
* :func:`record_by_id`: one record by id (the request body of a predecessor the pass no longer
  holds, for the before/after snippets of ``store_content=True`` ledgers); SQL both backends
  run as written.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .._exceptions import InputError
from ._rollups import KEYS, ROLLUP_TABLE, SUMS, RollupRow, aggregate_select, column
from ._schema import SELECT_COLUMNS, ts_text

if TYPE_CHECKING:
    from ._ledger import Ledger
    from ._usage_record import UsageRecord

__all__ = ["record_by_id", "rollup_rows", "rows_before"]

def record_by_id(ledger: Ledger, record_id: str) -> UsageRecord | None:
    """The record with ``record_id``, ``None`` when the ledger has none or its row does not
    decode (a corrupt row is named by the pass that reads it, not here).

    Raises:
        LedgerError: The database cannot be read.
    """
    sql = f'SELECT {SELECT_COLUMNS} FROM calls WHERE "record_id" = ?'
    found = list(ledger._query(sql, (record_id,), lambda _id, _exc: None))
    return found[0] if found else None


def rows_before(ledger: Ledger, before: datetime) -> int:
    """How many call rows have ``ts_utc < before`` (timezone-aware; indexed on ``ts_utc``).

    Raises:
        LedgerError: The database cannot be read.
    """
    conn = ledger._reader()
    try:
        row = conn.execute('SELECT count(*) FROM calls WHERE "ts_utc" < ?',
                           (ts_text(before),)).fetchone()
    except ledger._backend.errors as exc:
        raise ledger._unreadable(exc) from exc
    finally:
        ledger._release(conn)
    return int(row[0])


def rollup_rows(ledger: Ledger, *, since: datetime | None = None) -> list[RollupRow]:
    """The rollup rows of ``ledger`` (hour order, then key order); ``since``: only hours
    that end after it (the hour holding ``since`` is included whole).

    A ledger of schema v5 or later is read from ``call_rollups``; an older one (opened
    read-only, never migrated) is aggregated from its call rows with the same expressions.

    Raises:
        LedgerError: The database cannot be opened or read (``ledger-unreadable``).
        InputError: ``since`` is naive (``ledger-since-naive``).
    """
    params: list[Any] = []
    backend = ledger._backend
    conn = ledger._reader()
    try:
        dialect = "sqlite" if backend.rowid == "rowid" else "pg"
        if since is not None:
            if since.tzinfo is None or since.utcoffset() is None:
                raise InputError("since must be timezone-aware", code="ledger-since-naive")
            params.append(ts_text(since)[:13])
        if backend.has_table(conn, ROLLUP_TABLE):
            where = ' WHERE "hour" >= ?' if since is not None else ""
            names = ", ".join(f'"{n}"' for n in (*KEYS, *SUMS))
            sql = (f"SELECT {names} FROM {ROLLUP_TABLE}{where} ORDER BY "
                   + ", ".join(f'"{k}"' for k in KEYS))
        else:
            where = f"WHERE substr({column('', 'ts_utc')}, 1, 13) >= ?" if since else ""
            # no safe-cast function before v5 (nor may a read-only opening create one):
            # rows written by the ledger hold canonical JSON
            sql = aggregate_select(dialect, "CAST({} AS jsonb)", where) + " ORDER BY 1, 2, 3, 4, 5"
        rows: Sequence[Any] = conn.execute(sql, tuple(params)).fetchall()
    except backend.errors as exc:
        raise ledger._unreadable(exc) from exc
    finally:
        ledger._release(conn)
    return [RollupRow(str(row[0]), str(row[1]), str(row[2]), str(row[3]), str(row[4]),
                      dict(zip(SUMS, (int(v or 0) for v in row[len(KEYS):]), strict=True)))
            for row in rows]
