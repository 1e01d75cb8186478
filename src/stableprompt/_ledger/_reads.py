"""Read-side queries the streaming report asks a ledger (issue 30): what one pass needs that
it cannot keep for every call.

* :func:`record_by_id`: one record by id (the request body of a predecessor the pass no longer
  holds, for the before/after snippets of ``store_content=True`` ledgers); SQL both backends
  run as written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._schema import SELECT_COLUMNS

if TYPE_CHECKING:
    from ._ledger import Ledger
    from ._usage_record import UsageRecord

__all__ = ["record_by_id"]

def record_by_id(ledger: Ledger, record_id: str) -> UsageRecord | None:
    """The record with ``record_id``, ``None`` when the ledger has none or its row does not
    decode (a corrupt row is named by the pass that reads it, not here).

    Raises:
        LedgerError: The database cannot be read.
    """
    sql = f'SELECT {SELECT_COLUMNS} FROM calls WHERE "record_id" = ?'
    found = list(ledger._query(sql, (record_id,), lambda _id, _exc: None))
    return found[0] if found else None
