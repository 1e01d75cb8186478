"""Read-side queries the streaming report asks a ledger (issue 30): what one pass needs that
it cannot keep for every call.

* :func:`cross_session_predecessors`: the record ids that a call of another session (or
  scenario) names as its ``predecessor_id``, or that no row of this ledger holds (a
  predecessor in another ledger of a merge): the only calls the ceilings must remember by id
  (``_accounting._ceilings.Ceilings``). One join on the primary key.
* :func:`record_by_id`: one record by id (the request body of a predecessor the pass no longer
  holds, for the before/after snippets of ``store_content=True`` ledgers).

SQL that both backends run as written (SQLite, PostgreSQL): NULL and ``""`` compare equal,
as the report's grouping maps both to ``"(none)"``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._schema import SELECT_COLUMNS

if TYPE_CHECKING:
    from ._ledger import Ledger
    from ._usage_record import UsageRecord

__all__ = ["cross_session_predecessors", "record_by_id"]

_CROSS = (
    'SELECT DISTINCT c."predecessor_id" FROM calls c '
    'LEFT JOIN calls p ON p."record_id" = c."predecessor_id" '
    'WHERE c."predecessor_id" IS NOT NULL AND (p."record_id" IS NULL '
    'OR COALESCE(p."gen_ai.conversation.id", \'\') <> COALESCE(c."gen_ai.conversation.id", \'\') '
    "OR COALESCE(p.\"scenario\", '') <> COALESCE(c.\"scenario\", ''))"
)


def cross_session_predecessors(ledger: Ledger) -> set[str]:
    """The predecessor ids the ceilings must remember (module docstring).

    Raises:
        LedgerError: The database cannot be read (code ``ledger-unreadable``).
    """
    conn = ledger._reader()
    try:
        return {str(row[0]) for row in conn.execute(_CROSS).fetchall()}
    except ledger._backend.errors as exc:
        raise ledger._unreadable(exc) from exc
    finally:
        conn.close()


def record_by_id(ledger: Ledger, record_id: str) -> UsageRecord | None:
    """The record with ``record_id``, ``None`` when the ledger has none or its row does not
    decode (a corrupt row is named by the pass that reads it, not here).

    Raises:
        LedgerError: The database cannot be read.
    """
    sql = f'SELECT {SELECT_COLUMNS} FROM calls WHERE "record_id" = ?'
    found = list(ledger._query(sql, (record_id,), lambda _id, _exc: None))
    return found[0] if found else None
