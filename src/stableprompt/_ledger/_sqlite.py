"""The SQLite ledger backend: one database file, stdlib ``sqlite3`` in WAL mode.

The file is created with mode 0600 (missing parent directories 0700), as are its ``-wal`` and
``-shm`` side files; the schema is upgraded with ``PRAGMA user_version`` (``_schema.migrate``);
read-only opening is ``_schema.connect_read_only``. Durability: ``synchronous=NORMAL`` in WAL
mode (https://www.sqlite.org/wal.html, https://www.sqlite.org/pragma.html#pragma_synchronous).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .._exceptions import LedgerError
from ._backend import Connection, fetch_batches
from ._schema import INSERT_SQL, connect_read_only, has_table, is_transient, migrate

__all__ = ["SqliteBackend"]


class SqliteBackend:
    """A ledger in one SQLite file (see :class:`~._backend.Backend`)."""

    shared = False
    rowid = "rowid"
    commits_in_order = True
    insert_sql = INSERT_SQL
    errors: tuple[type[BaseException], ...] = (sqlite3.Error,)
    secrets: tuple[str, ...] = ()

    def __init__(self, path: Path, *, busy_timeout_s: float) -> None:
        self.anchor = path
        self.where = str(path)
        self.busy_timeout_s = busy_timeout_s

    def connect(self, migrations: Sequence[tuple[str, ...]]) -> Connection:
        path = self.anchor
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            try:
                os.fchmod(fd, 0o600)  # umask may have removed owner bits
            finally:
                os.close(fd)
        if not path.is_file():
            raise LedgerError(f"ledger path {path} is not a regular file",
                              code="ledger-not-a-file")
        conn = sqlite3.connect(path, timeout=self.busy_timeout_s, isolation_level=None,
                               check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            migrate(conn, path, migrations)
            for suffix in ("-wal", "-shm"):  # SQLite copies the db mode; make sure
                side = path.with_name(path.name + suffix)
                with contextlib.suppress(OSError):
                    if side.stat().st_mode & 0o077:
                        side.chmod(0o600)
        except BaseException:
            conn.close()
            raise
        return conn

    def connect_reader(self) -> Connection:
        return sqlite3.connect(self.anchor.as_uri() + "?mode=rw", uri=True,
                               timeout=self.busy_timeout_s, isolation_level=None,
                               check_same_thread=False)

    def connect_read_only(self) -> Connection:
        return connect_read_only(self.anchor, self.busy_timeout_s)

    def is_transient(self, exc: BaseException) -> bool:
        return is_transient(exc)

    @contextlib.contextmanager
    def transaction(self, conn: Connection) -> Iterator[None]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    def has_table(self, conn: Connection, name: str) -> bool:
        assert isinstance(conn, sqlite3.Connection)
        return has_table(conn, name)

    def columns(self, conn: Connection) -> list[str]:
        return [str(row[1]) for row in conn.execute('PRAGMA table_info("calls")').fetchall()]

    def executemany(self, conn: Connection, sql: str, rows: list[tuple[Any, ...]]) -> None:
        assert isinstance(conn, sqlite3.Connection)
        conn.executemany(sql, rows)

    def reusable(self, conn: Connection) -> bool:
        # opening a file costs ~0.1 ms, and a kept connection would go on reading a file
        # replaced under the same name: each read opens its own
        return False

    def read_in_order(self, conn: Connection, columns: str, where: str,
                      params: Sequence[Any] = ()) -> Iterator[Any]:
        # one statement: sqlite3 steps it as rows are fetched (nothing read ahead), in the
        # snapshot of its first step (WAL); calls_ts holds rowid, so it serves this order
        return fetch_batches(conn.execute(
            f'SELECT {columns}, rowid FROM calls{where} ORDER BY "ts_utc", rowid',
            tuple(params)))
