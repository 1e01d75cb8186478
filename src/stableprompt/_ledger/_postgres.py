"""The PostgreSQL ledger backend: ``Ledger("postgresql://user:password@host:5432/dbname")``.

psycopg 3 (``postgres`` extra), autocommit connections. The schema is ``_schema.MIGRATIONS``
translated (:func:`pg_statement`: ``INTEGER`` -> ``BIGINT``, ``REAL`` -> ``DOUBLE PRECISION``,
``ts_utc`` collated ``"C"`` so text order is time order as in SQLite, plus ``"seq"``, an
identity column for insertion order where SQLite has ``rowid``), so both backends store the
same columns with the same meaning. The version lives in table ``stableprompt_schema`` (SQLite
uses ``PRAGMA user_version``); migrations run in one transaction under a transaction-level
advisory lock, so several hosts opening one database at once migrate it once. Rows are
idempotent by ``record_id`` (``ON CONFLICT DO NOTHING``), so spill replays and journals from
every host can be imported in any order.

Behind a pooler in transaction mode (PgBouncer ``pool_mode = transaction``, Supabase's or
Neon's poolers) each transaction of a client may run on another server session, so nothing
outlives a transaction: no prepared statements (``prepare_threshold=None``, as psycopg's
documentation advises for PgBouncer: https://www.psycopg.org/psycopg3/docs/advanced/prepare.html
and .../docs/advanced/pool.html#pgbouncer, read 2026-12-07), no session ``SET`` (a read
connection is read-only per transaction: ``BEGIN READ ONLY``), no cursor kept between
statements (:meth:`PostgresBackend.read_in_order` reads in keyset pages). Migrations wait at
most ``busy_timeout_s`` for a lock (``SET LOCAL lock_timeout``), as SQLite's busy timeout
bounds its ``BEGIN IMMEDIATE``: one rule for both backends.

Spill files and pending journals are local (a write fails when the server is unreachable):
they are named after :attr:`PostgresBackend.anchor`, a path in ``spill_dir`` (default
``~/.cache/stableprompt/ledgers``) unique to the server, port, database and user.

The password is never shown: :attr:`PostgresBackend.where` is the URL with ``***`` in its
place, and it is a secret scrubbed from every message the ledger writes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import select
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from .._exceptions import ConfigurationError, LedgerError
from .._redact import redact
from ._backend import Connection, Cursor, fetch_batches
from ._rollups import pg_migration
from ._schema import ADDED_COLUMNS, COLUMNS, MIGRATIONS, SCHEMA_VERSION, SELECT_COLUMNS

__all__ = ["PAGE_ROWS", "PG_MIGRATIONS", "PostgresBackend", "pg_statement", "redact_url"]

_VERSION_TABLE = "stableprompt_schema"
_LOCK_KEY = 0x5354_4250_524F  # "STBPRO": the advisory lock of schema migrations


def pg_statement(statement: str) -> str:
    """A SQLite DDL statement of :data:`~._schema.MIGRATIONS` in PostgreSQL's types."""
    out = re.sub(r"\bINTEGER\b", "BIGINT", statement)
    out = re.sub(r"\bREAL\b", "DOUBLE PRECISION", out)
    out = out.replace('"ts_utc" TEXT NOT NULL', '"ts_utc" TEXT COLLATE "C" NOT NULL')
    return out.replace("CREATE TABLE calls (",
                       'CREATE TABLE calls (\n            "seq" BIGINT GENERATED ALWAYS AS '
                       "IDENTITY UNIQUE,", 1)


_ROLLUPS = 4
"""The index of the rollup migration (v5), which PostgreSQL writes in its own dialect (a
plpgsql trigger function: ``_rollups.pg_migration``)."""

PG_MIGRATIONS: tuple[tuple[str, ...], ...] = tuple(
    pg_migration() if i == _ROLLUPS else tuple(pg_statement(s) for s in step)
    for i, step in enumerate(MIGRATIONS))
""":data:`~._schema.MIGRATIONS` for PostgreSQL: entry ``i`` upgrades version ``i`` to ``i + 1``."""

_INSERT_SQL = (f"INSERT INTO calls ({SELECT_COLUMNS}) VALUES ({', '.join('?' for _ in COLUMNS)})"
               ' ON CONFLICT ("record_id") DO NOTHING')


def redact_url(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``; a ``password=`` query
    parameter too."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":***"
        netloc = f"{userinfo}@{hostport}"
    query = re.sub(r"(^|&)(password=)[^&]*", r"\1\2***", parts.query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _password(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.password:
        return unquote(parts.password)
    found = re.search(r"(?:^|&)password=([^&]*)", parts.query)
    return unquote(found.group(1)) if found else None


def _summary(statement: str) -> str:
    """The first line of a migration statement, e.g. ``CREATE TRIGGER call_rollups_add AFTER
    INSERT ON calls`` (what a message names; ours, holds no secret)."""
    line = statement.strip().splitlines()[0]
    found = re.match(r"(CREATE|ALTER|DROP)\b.*?\bON\s+\w+", line)
    return (found.group(0) if found else line)[:120]


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise ConfigurationError(
            "a PostgreSQL ledger needs psycopg 3: pip install 'stableprompt[postgres]'",
            code="postgres-missing") from exc
    return psycopg


def _readable(fd: int) -> bool:
    """Whether ``fd`` has something to read (or was hung up) now, without waiting: ``poll``
    where there is one, as ``select`` takes no descriptor past 1023 (a busy proxy has more
    open); ``select`` on Windows.

    Raises:
        OSError, ValueError: ``fd`` is not an open descriptor (``select``: or past 1023).
    """
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    ready, _, _ = select.select([fd], [], [], 0)  # pragma: no cover - Windows
    return bool(ready)


_IDLE = 0
"""``psycopg.pq.TransactionStatus.IDLE``: a session outside any transaction."""

PAGE_ROWS = 2000
"""Rows per page of :meth:`PostgresBackend.read_in_order` (one statement each: about 1 MB of
report columns; measured in benchmarks/RESULTS.md, session 16)."""


class _Connection:
    """A psycopg connection that takes the ledger's ``?`` placeholders. A read-only one runs
    each statement in its own ``BEGIN READ ONLY`` transaction (psycopg's ``read_only``),
    never a session ``SET``: behind a transaction-mode pooler a session setting stays on the
    server connection and reaches its next client. The statement's rows are read before the
    ``COMMIT`` (a client-side cursor), so the returned cursor still gives them."""

    def __init__(self, conn: Any, *, read_only: bool = False) -> None:
        self.raw = conn
        self.read_only = read_only
        if read_only:
            conn.read_only = True

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        query, args = sql.replace("?", "%s"), tuple(params) or None
        if self.read_only and self.raw.info.transaction_status == _IDLE:  # not in one: begin
            with self.raw.transaction():
                cursor: Cursor = self.raw.execute(query, args)
            return cursor
        cursor = self.raw.execute(query, args)
        return cursor

    def close(self) -> None:
        self.raw.close()


class PostgresBackend:
    """A ledger in a PostgreSQL database (see :class:`~._backend.Backend`).

    Raises:
        LedgerError: The URL has no host or database name (code ``ledger-url``).
        ConfigurationError: psycopg is not installed (code ``postgres-missing``).
    """

    shared = True
    rowid = "seq"
    commits_in_order = False
    insert_sql = _INSERT_SQL

    def __init__(self, url: str, *, busy_timeout_s: float,
                 spill_dir: str | os.PathLike[str] | None) -> None:
        parts = urlsplit(url)
        self.where = redact_url(url)
        password = _password(url)
        self.secrets: tuple[str, ...] = (password,) if password else ()
        database = parts.path.lstrip("/")
        if not database or "/" in database:
            raise LedgerError(f"PostgreSQL ledger URL {self.where!r} names no database: "
                              "postgresql://user@host:5432/dbname", code="ledger-url")
        self._url = url
        self.busy_timeout_s = busy_timeout_s
        self.errors: tuple[type[BaseException], ...] = (_psycopg().Error,)
        host = parts.hostname or "local"
        digest = hashlib.sha256(redact_url(url).encode("utf-8")).hexdigest()[:12]
        slug = re.sub(r"[^A-Za-z0-9._-]", "_", f"{host}-{parts.port or 5432}-{database}")
        directory = Path(spill_dir) if spill_dir is not None else (
            Path.home() / ".cache" / "stableprompt" / "ledgers")
        with contextlib.suppress(OSError):
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.anchor = directory.absolute() / f"{slug}-{digest}.pg"

    def _connect(self, *, read_only: bool = False) -> _Connection:
        psycopg = _psycopg()
        try:
            raw = psycopg.connect(self._url, autocommit=True,
                                  connect_timeout=max(1, round(self.busy_timeout_s)),
                                  application_name="stableprompt",
                                  prepare_threshold=None)  # no prepared statements: a pooler
        except psycopg.Error as exc:
            raise LedgerError(f"cannot connect to ledger {self.where}: "
                              f"{redact(str(exc).strip(), secrets=self.secrets)}",
                              code="ledger-unavailable") from None  # its text may quote the URL
        return _Connection(raw, read_only=read_only)

    def connect(self, migrations: Sequence[tuple[str, ...]]) -> Connection:
        conn = self._connect()
        try:
            self._migrate(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _version(self, conn: _Connection) -> int | None:
        if not self.has_table(conn, _VERSION_TABLE):
            return None
        row = conn.execute(f'SELECT max("version") FROM {_VERSION_TABLE}').fetchone()
        return int(row[0]) if row is not None and row[0] is not None else 0

    def _migrate(self, conn: _Connection) -> None:
        version = self._version(conn) or 0
        if version == len(PG_MIGRATIONS):
            return
        psycopg = _psycopg()
        doing = "the migration lock (another process is migrating this ledger)"
        try:
            with self.transaction(conn):
                # every lock below is waited for at most busy_timeout_s (SQLite: busy timeout)
                conn.execute("SELECT set_config('lock_timeout', ?, true)",  # SET LOCAL
                             (f"{max(1, round(self.busy_timeout_s * 1000))}ms",))
                conn.execute("SELECT pg_advisory_xact_lock(?)", (_LOCK_KEY,))
                doing = f"table {_VERSION_TABLE}"
                conn.execute(f'CREATE TABLE IF NOT EXISTS {_VERSION_TABLE} '
                             '("version" INTEGER NOT NULL)')
                version = self._version(conn) or 0
                if version > len(PG_MIGRATIONS):
                    raise LedgerError(
                        f"ledger {self.where} has schema version {version}, newer than this "
                        f"stableprompt knows ({len(PG_MIGRATIONS)}); upgrade stableprompt",
                        code="ledger-schema-newer")
                for target in range(version, len(PG_MIGRATIONS)):
                    for statement in PG_MIGRATIONS[target]:
                        doing = f"step {target} -> {target + 1} ({_summary(statement)})"
                        conn.execute(statement)
                doing = f"table {_VERSION_TABLE}"
                conn.execute(f"DELETE FROM {_VERSION_TABLE}")
                conn.execute(f'INSERT INTO {_VERSION_TABLE} ("version") VALUES (?)',
                             (len(PG_MIGRATIONS),))
        except psycopg.Error as exc:
            why = redact(str(exc).strip(), secrets=self.secrets)
            if getattr(exc, "sqlstate", None) == "55P03":  # lock_not_available
                raise LedgerError(
                    f"cannot migrate ledger {self.where} from schema version {version} to "
                    f"{len(PG_MIGRATIONS)}: a lock it needs for {doing} was held by another "
                    f"session (a writer's open transaction, a migration on another host) for "
                    f"{self.busy_timeout_s:g} s (busy_timeout_s); nothing was changed, and the "
                    f"next write tries again (records meanwhile spill); the server said: {why}",
                    code="ledger-migration-locked") from exc
            raise LedgerError(f"cannot migrate ledger {self.where}: {why}",
                              code="ledger-migration") from exc

    def connect_reader(self) -> Connection:
        return self._connect(read_only=True)

    def connect_read_only(self) -> Connection:
        conn = self._connect(read_only=True)
        try:
            self._check_schema(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _check_schema(self, conn: _Connection) -> None:
        version = self._version(conn)
        if version is not None and version > SCHEMA_VERSION:
            raise LedgerError(
                f"ledger {self.where} has schema version {version}, newer than this "
                f"stableprompt knows ({SCHEMA_VERSION}); upgrade stableprompt",
                code="ledger-schema-newer")
        if not version:
            raise LedgerError(f"{self.where} is not a stableprompt ledger (no "
                              f"{_VERSION_TABLE} table: never opened for writing)",
                              code="ledger-not-a-ledger")
        present = set(self.columns(conn))
        missing = {c for c in COLUMNS.values()
                   if c not in present and ADDED_COLUMNS.get(c, 1) <= version}
        if missing:
            raise LedgerError(f"{self.where} is not a stableprompt ledger (table 'calls' "
                              f"lacks {len(missing)} ledger columns)",
                              code="ledger-not-a-ledger")

    def columns(self, conn: Connection) -> list[str]:
        rows = conn.execute("SELECT column_name FROM information_schema.columns WHERE "
                            "table_name = 'calls' AND table_schema = current_schema()"
                            ).fetchall()
        return [str(row[0]) for row in rows]

    def is_transient(self, exc: BaseException) -> bool:
        sqlstate = getattr(exc, "sqlstate", None)
        return sqlstate in ("40001", "40P01", "55P03")  # serialization, deadlock, lock

    @contextlib.contextmanager
    def transaction(self, conn: Connection) -> Iterator[None]:
        assert isinstance(conn, _Connection)
        with conn.raw.transaction():
            yield

    def has_table(self, conn: Connection, name: str) -> bool:
        row = conn.execute("SELECT to_regclass(?) IS NOT NULL", (name,)).fetchone()
        return bool(row and row[0])

    def executemany(self, conn: Connection, sql: str, rows: list[tuple[Any, ...]]) -> None:
        assert isinstance(conn, _Connection)
        with conn.raw.cursor() as cursor:
            cursor.executemany(sql.replace("?", "%s"), rows)

    def reusable(self, conn: Connection) -> bool:
        """Open, not broken, idle outside a transaction, and its socket has nothing to read:
        an idle connection is sent nothing unless the server ends it (a terminated backend,
        a restart) or it listens, which the ledger never does. An autocommit statement sees
        every row committed before it, so a kept connection reads what a new one would."""
        if not isinstance(conn, _Connection):
            return False
        raw = conn.raw
        try:
            if raw.closed or raw.broken or (
                    raw.info.transaction_status != _psycopg().pq.TransactionStatus.IDLE):
                return False
            readable = _readable(raw.fileno())
        except (OSError, ValueError, _psycopg().Error):
            return False
        return not readable

    def read_in_order(self, conn: Connection, columns: str, where: str,
                      params: Sequence[Any] = ()) -> Iterator[Any]:
        """Keyset pages of :data:`PAGE_ROWS` rows: ``WHERE ... AND ("ts_utc", "seq") > (last
        row read) ORDER BY "ts_utc", "seq" LIMIT n``, each page one statement, bounded by the
        largest ``seq`` when the read began.

        Each page is a statement of its own, so the read works behind a transaction-mode
        pooler (a cursor kept between statements would be on another server session), holds
        no transaction, snapshot or lock open while the caller reads (a migration's ``ALTER
        TABLE`` and the writers behind it never wait for a slow reader), and no result is
        materialized in server temp space (a ``WITH HOLD`` cursor writes all of it at the
        ``DECLARE``). Memory: one page, plus the ``seq`` values of a long run of equal
        ``ts_utc`` (below: 8 bytes a row kept; the statement's result, which psycopg holds
        whole, briefly more). Plan: an index range scan of ``calls_ts`` (or
        ``calls_conversation_ts`` for a session) with an incremental sort on ``seq`` within
        equal ``ts_utc`` (EXPLAIN in benchmarks/RESULTS.md, session 16).

        Cost: linear in the rows read. A page that begins inside a run of equal ``ts_utc``
        scans that run from its start (no index holds ``seq`` after ``ts_utc``), so once a
        whole page is one run, the run's remaining ``seq`` values are read once (one
        statement) and its rows fetched a page at a time by the unique ``seq`` index; the
        read goes on after the run with ``"ts_utc" > run``. Before, every page rescanned the
        run: one timestamp on 200,000 rows took 28.5 s, now 4.7 s (benchmarks/RESULTS.md,
        session 16 review).

        Rows: every row committed when the read began (unless deleted since, e.g. pruned),
        once each, in (``ts_utc``, ``seq``) order, equal ``ts_utc`` included (the key is
        unique). A row whose insert began later has a larger ``seq`` and is left out; one
        being inserted when the read began (its ``seq`` already drawn) appears when it commits
        before the read reaches its place (inside a long run: before the run's ``seq``
        values are read), else not: never twice.
        """
        row = conn.execute('SELECT max("seq") FROM calls').fetchone()
        if row is None or row[0] is None:
            return
        bound = int(row[0])
        # the caller's condition in parentheses: AND binds tighter than an OR in it, which
        # would leave rows of its other alternatives unbounded and every page repeating them
        condition = where.strip().removeprefix("WHERE").strip()
        head = (f'SELECT {columns}, "seq", "ts_utc" FROM calls WHERE '
                f'{f"({condition}) AND " if condition else ""}"seq" <= ?')
        order = ' ORDER BY "ts_utc", "seq" LIMIT ?'
        page = conn.execute(head + order, (*params, bound, PAGE_ROWS)).fetchall()
        after = head + ' AND ("ts_utc", "seq") > (?, ?)' + order
        past = head + ' AND "ts_utc" > ?' + order
        while page:
            for found in page:
                yield found[:-1]
            if len(page) < PAGE_ROWS:
                return
            last = page[-1]
            if page[0][-1] != last[-1]:  # the next page starts at most a page into a run
                page = conn.execute(after, (*params, bound, last[-1], last[-2],
                                            PAGE_ROWS)).fetchall()
                continue
            # a whole page of one ts_utc: a long run, which each page would scan again from
            # its start (no index holds seq after ts_utc); its remaining seqs once instead
            # (8 bytes a row), then its rows a page at a time by the unique seq index
            seqs = array("q", (int(r[0]) for r in fetch_batches(conn.execute(
                f'SELECT "seq" FROM calls WHERE {f"({condition}) AND " if condition else ""}'
                '"ts_utc" = ? AND "seq" > ? AND "seq" <= ? ORDER BY "seq"',
                (*params, last[-1], last[-2], bound)))))
            for start in range(0, len(seqs), PAGE_ROWS):
                yield from (found[:-1] for found in conn.execute(
                    f'SELECT {columns}, "seq", "ts_utc" FROM calls WHERE "seq" = ANY(?) '
                    'ORDER BY "seq"', (list(seqs[start:start + PAGE_ROWS]),)).fetchall())
            page = conn.execute(past, (*params, bound, last[-1], PAGE_ROWS)).fetchall()
