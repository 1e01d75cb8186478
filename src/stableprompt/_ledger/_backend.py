"""The ledger's storage seam: what :class:`~stableprompt.Ledger` asks of a database.

:class:`Backend` is the one protocol; ``_sqlite.SqliteBackend`` (a file, stdlib ``sqlite3``)
and ``_postgres.PostgresBackend`` (a PostgreSQL URL, psycopg 3) implement it. The ledger keeps
everything that does not depend on the database: scrubbing, retries with backoff, spill files,
pending journals, replay, the record codec (``_schema.to_row`` / ``from_row``), forks.

``_target.backend_for`` picks one from what ``Ledger(...)`` was given.

Both backends store the same schema (``_schema.COLUMNS``, :data:`~._schema.SCHEMA_VERSION`),
with the same meaning: one row per ``record_id`` (a second insert is ignored), text
``ts_utc`` that sorts as time, canonical JSON text for the JSON fields, a ``meta`` table, and
an insertion-order column (SQLite's ``rowid``, PostgreSQL's ``seq``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

__all__ = ["Backend", "Connection", "Cursor", "fetch_batches"]


class Cursor(Protocol):
    """The rows of one statement (DB-API)."""

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def fetchmany(self, size: int) -> list[Any]: ...


class Connection(Protocol):
    """One autocommit connection; statements use ``?`` placeholders on every backend."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor: ...

    def close(self) -> None: ...


class Backend(Protocol):
    """Where a ledger's rows live.

    Attributes:
        where: What messages name: the database file, or the URL with its password redacted.
        anchor: The local path spill files and pending journals are named after
            (``<anchor>.spill.jsonl``, ``<anchor>.pending.<pid>.<ns>.jsonl``): the database
            file itself for SQLite, a per-database path in a local directory for PostgreSQL.
        shared: Other hosts write the same database (PostgreSQL): a recorder re-reads a
            lineage's recent rows before each comparison.
        rowid: The insertion-order column (``rowid`` / ``seq``).
        commits_in_order: No row can commit after a row with a higher ``rowid`` (SQLite:
            the number is taken under the write lock held until commit); PostgreSQL's
            sequence values are taken when an insert starts, so rows of several writers can
            commit out of that order (``_late``).
        insert_sql: Insert one ``_schema.to_row`` row (``?`` placeholders); a ``record_id``
            already stored is ignored.
        errors: The driver's exception base classes (database errors, never ours).
        secrets: Text that must never appear in a message (a URL's password).
    """

    where: str
    anchor: Path
    shared: bool
    rowid: str
    commits_in_order: bool
    insert_sql: str
    errors: tuple[type[BaseException], ...]
    secrets: tuple[str, ...]

    def connect(self, migrations: Sequence[tuple[str, ...]]) -> Connection:
        """A write connection; the schema is created or upgraded first (``migrations`` are
        SQLite's; PostgreSQL applies its own list of the same length).

        Raises:
            LedgerError: The schema is newer (``ledger-schema-newer``) or cannot be
                migrated (``ledger-migration``; ``ledger-migration-locked``: a lock it needs
                was held by another session for ``busy_timeout_s``, PostgreSQL; SQLite's
                busy timeout raises its lock error). Driver errors propagate (the ledger
                spills).
        """
        ...

    def connect_reader(self) -> Connection:
        """A fresh connection for one read (a writer-opened ledger; never migrates)."""
        ...

    def connect_read_only(self) -> Connection:
        """An existing ledger opened for reading only: nothing created, migrated or written.

        Raises:
            LedgerError: Missing, unreadable, not a stableprompt ledger, or newer schema.
        """
        ...

    def is_transient(self, exc: BaseException) -> bool:
        """Whether ``exc`` is a lock or serialization error worth retrying."""
        ...

    def transaction(self, conn: Connection) -> AbstractContextManager[None]:
        """One write transaction on ``conn`` (committed on exit, rolled back on error)."""
        ...

    def has_table(self, conn: Connection, name: str) -> bool:
        """Whether the database has table ``name``."""
        ...

    def columns(self, conn: Connection) -> list[str]:
        """The column names of table ``calls`` (an older ledger opened read-only lacks the
        columns added since, ``_schema.ADDED_COLUMNS``)."""
        ...

    def executemany(self, conn: Connection, sql: str, rows: list[tuple[Any, ...]]) -> None:
        """Run ``sql`` (``?`` placeholders) once per row."""
        ...

    def reusable(self, conn: Connection) -> bool:
        """Whether a read connection that finished its read may serve the next one: open,
        outside any transaction, nothing pending from the server (a connection the server
        ended is not). Never raises."""
        ...

    def read_in_order(self, conn: Connection, columns: str, where: str,
                      params: Sequence[Any] = ()) -> Iterator[Any]:
        """Every row of ``SELECT {columns}, {rowid} FROM calls{where} ORDER BY "ts_utc",
        {rowid}`` (``where``: ``""`` or a ``WHERE`` clause over ``params``, ``?``
        placeholders), with memory bounded however many rows it gives (a report over millions
        of calls): SQLite steps one statement; PostgreSQL reads keyset pages, one statement
        each (it works behind a transaction-mode pooler and holds nothing open between
        pages). Each row once, rows with equal ``ts_utc`` in insertion order; the rows
        committed when the read began (a row committed during the read may appear, never
        twice). Driver errors propagate."""
        ...


def fetch_batches(cursor: Cursor, size: int = 256) -> Iterator[Any]:
    """Every row of ``cursor``, fetched ``size`` at a time."""
    while batch := cursor.fetchmany(size):
        yield from batch
