"""The ledger: one SQLite row per provider call, safe from many threads and processes.

Storage is stdlib ``sqlite3`` in WAL mode with a busy timeout. The table layout (OpenTelemetry
GenAI column names, :data:`COLUMNS`), the versioned schema (:data:`SCHEMA_VERSION`, upgraded on
opening for writing) and read-only opening live in ``_ledger/_schema.py``.

A failed write never raises into the caller and never silently loses the record: transient
``SQLITE_BUSY``/``SQLITE_LOCKED`` errors are retried with backoff; then the record is appended as
one JSON line to ``<db>.spill.jsonl`` next to the database, or to a spill file in a
user-writable fallback directory, or, as the last resort, kept in :attr:`Ledger.unflushed`.
Each spill target is announced once with a :class:`LedgerSpillWarning`. :meth:`Ledger.replay_spill`
imports spilled records back (idempotent by ``record_id``).

Durability: ``synchronous=NORMAL`` in WAL mode; a committed row survives the writing process
being killed (it is in the WAL file), though not necessarily a power loss
(https://www.sqlite.org/wal.html, https://www.sqlite.org/pragma.html#pragma_synchronous).

Read-only opening (``Ledger(path, read_only=True)``, used by ``stableprompt report``) never
creates, migrates or writes the file, even in a read-only directory; a file that is not a
stableprompt ledger, or is from a newer stableprompt, is refused with :class:`LedgerError`;
an older ledger is read as it is, the columns added since read as unknown
(``_schema.ADDED_COLUMNS``: schema v3's ``request_headers``).

Metadata: table ``meta`` (schema v2) holds ledger-level ``key -> value`` text, e.g. which
backend produced the calls (:meth:`Ledger.set_meta`, :meth:`Ledger.meta`).

Rollups and retention (schema v5, ``_rollups.py``): table ``call_rollups`` holds sums per
UTC hour x provider x model x scenario x verdict, kept by the database as each row is
inserted (once per record id); :meth:`Ledger.prune` deletes old call rows and keeps them.

Privacy: the database, its ``-wal``/``-shm`` files and spill files are created with mode 0600.
Request text (``content``) is stored only with ``store_content=True``. Of a request's headers
only the allow-listed cache-relevant ones are kept (``request_headers``,
``_policy.CACHE_HEADERS``: beta and version headers, never a credential); anything shaped like
an API key is scrubbed from the text fields by ``_usage_record.scrubbed`` before writing.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import io
import logging
import os
import random
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any, cast

from .._exceptions import InputError, LedgerError
from .._public import public
from .._redact import redact
from ._backend import Backend, Connection, fetch_batches
from ._journal import PendingJournal, orphaned_journals
from ._late import LateRows
from ._outline_text import DELTA_PREFIX, made_whole
from ._schema import (
    COLUMNS,
    MIGRATIONS,
    SCHEMA_VERSION,
    SELECT_COLUMNS,
    absent_columns,
    decoded_or_reported,
    select_columns,
    to_row,
    ts_text,
)
from ._spill import SpillFiles, WriteOutcome
from ._spill import describe as _describe
from ._target import backend_for
from ._usage_record import UsageRecord, scrubbed

__all__ = ["COLUMNS", "SCHEMA_VERSION", "Ledger", "WriteOutcome"]

_log = logging.getLogger("stableprompt.ledger")

_WRITE_ATTEMPTS = 4
_PRUNE_BATCH = 10_000
_LATE_RANGES_PER_QUERY = 100
"""Ranges of :class:`~._late.LateRows` read again in one statement (two parameters each)."""
"""Call rows :meth:`Ledger.prune` deletes per transaction."""
_IDLE_READERS = 4
"""Read connections a ledger keeps open between reads (each read takes one; a recorder
reads a lineage's recent rows before each comparison)."""
_IDLE_READER_S = 30.0
"""Seconds a kept read connection may wait unused before it is closed instead of reused: a
firewall or NAT that forgets an idle TCP flow (often after minutes) drops its packets
silently, and a read on it would hang until TCP gives up (~15 min on Linux)."""
_BACKOFF_S = 0.025

_MIGRATIONS = MIGRATIONS
"""The migrations :class:`Ledger` applies, read at each opening: tests patch this name to write
a file of an older schema version or to append a migration."""


def _after_fork_in_child() -> None:
    for ledger in list(_LIVE):
        ledger._forget_inherited()


def _close_all(idle: collections.deque[tuple[Connection, float]]) -> None:
    """Close every connection in ``idle`` (a ledger's kept read connections)."""
    while idle:
        try:
            conn, _ = idle.pop()
        except IndexError:
            return
        with contextlib.suppress(Exception):
            conn.close()


_LIVE: weakref.WeakSet[Ledger] = weakref.WeakSet()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Ledger:
    """The ledger of :class:`UsageRecord` rows, table ``calls``: a SQLite file or a
    PostgreSQL database (``Ledger("postgresql://user:password@host:5432/dbname")``, the
    ``postgres`` extra; ``_ledger/_postgres.py``), with the same schema and behaviour.

    Safe to share between threads (one connection behind a lock) and to open from several
    processes at once (SQLite WAL, busy timeout). After ``os.fork()`` the child opens its own
    connection. ``close()`` releases the connection; a later call reopens it.

    Args:
        path: Database file, created with mode 0600 if missing (missing parent directories
            with 0700); or ``sqlite:///relative`` / ``sqlite:////absolute``; or a PostgreSQL
            URL (``postgresql://`` / ``postgres://``), whose tables are created if missing.
            Any other ``scheme://`` raises :class:`LedgerError` (code ``ledger-url-scheme``).
        store_content: Keep request text (``UsageRecord.content``); otherwise it is set to
            ``None`` before writing.
        busy_timeout_s: How long a write or a schema migration waits for a lock another
            session holds (seconds): SQLite's busy timeout. On PostgreSQL: a migration's
            ``lock_timeout`` (then the write spills, and a read raises ``LedgerError``
            ``ledger-unavailable`` whose ``__cause__`` has code ``ledger-migration-locked``)
            and the connect timeout (whole seconds, at least 1). An insert's lock waits there
            are not bounded: a running migration holds its locks until it commits (it waits
            at most ``busy_timeout_s`` to take them, not to finish), and another session's
            open transaction that wrote a row of the same rollup hour and key (e.g. a
            ``replay_spill`` import) delays it until that transaction ends.
        fallback_dir: Directory for the spill file when the database's own directory is not
            writable. Default: ``~/.cache/stableprompt/spill``, then
            ``<tempdir>/stableprompt-spill-<uid>``.
        read_only: Open an existing ledger for reading only (module docs): nothing is created,
            migrated or written, and :meth:`write`, :meth:`set_meta` and :meth:`replay_spill`
            raise :class:`InputError` (code ``ledger-read-only``).
        spill_dir: Where a PostgreSQL ledger keeps its spill files and pending journals
            (default ``~/.cache/stableprompt/ledgers``); a SQLite ledger keeps them next to
            its file.
        shared: Other processes write this ledger at once (see :attr:`shared`). Default:
            ``True`` for PostgreSQL, ``False`` for SQLite; ``True`` on a SQLite file makes
            a recorder re-read a lineage's recent rows before each comparison, so that rows
            other processes wrote to the same file (``stableprompt proxy --workers N``) are
            predecessors too (one indexed query per call).

    A writable ledger's opening never raises for an unusable path: writes spill (see module
    docs) and reads raise :class:`LedgerError`. A read-only ledger is checked at once.

    Raises:
        LedgerError: Only with ``read_only=True``: the file is missing (code
            ``ledger-not-found``), not a regular file (``ledger-not-a-file``), unreadable
            (``ledger-unreadable``), not a stableprompt ledger (``ledger-not-a-ledger``) or
            from a newer stableprompt (``ledger-schema-newer``).

    Attributes:
        path: Absolute database path (PostgreSQL: the local path its spill files and
            journals are named after).
        location: The database file, or the URL with its password redacted (``***``).
        spill_path: ``<db>.spill.jsonl`` next to the database.
        unflushed: Records no storage would take (last resort); :meth:`replay_spill` retries them.
        open_error: Why the database could not be opened, or ``None``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        store_content: bool = False,
        busy_timeout_s: float = 5.0,
        fallback_dir: str | os.PathLike[str] | None = None,
        read_only: bool = False,
        spill_dir: str | os.PathLike[str] | None = None,
        shared: bool | None = None,
    ) -> None:
        if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
            raise InputError(f"ledger path must be a non-empty str or path, got {path!r}",
                             code="ledger-path")
        self._backend: Backend = backend_for(path, busy_timeout_s=busy_timeout_s,
                                             spill_dir=spill_dir)
        self.path = self._backend.anchor
        self.location = self._backend.where
        self.read_only = read_only
        self._spill = SpillFiles(self.path, fallback_dir, shown=self.location)
        self.spill_path = self._spill.path
        self.store_content = store_content
        self.busy_timeout_s = busy_timeout_s
        self._shared = self._backend.shared if shared is None else bool(shared)
        self.open_error: BaseException | None = None
        self._conn: Connection | None = None
        self._orphans: list[Connection] = []  # inherited over fork: never touched
        # idle read connections, reused (a PostgreSQL connection costs ~10 ms to open);
        # deque append/pop are atomic, so no lock a generator's finalizer could wait on
        # (connection, time.monotonic() when released)
        self._idle: collections.deque[tuple[Connection, float]] = collections.deque()
        # ids of the read connections this process lent (from _reader, until _release): a
        # read begun before a fork and ended in the child gives back its parent's connection
        self._lent: set[int] = set()
        weakref.finalize(self, _close_all, self._idle)  # a ledger dropped without close()
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._open_failed_at: float | None = None
        _LIVE.add(self)
        self._select = SELECT_COLUMNS  # a writer migrates: every column is there
        self._missing: frozenset[str] = frozenset()
        if read_only:
            conn = self._backend.connect_read_only()  # check it now
            try:  # an older ledger lacks the columns added since: read as NULL
                self._missing = absent_columns(self._backend.columns(conn))
                self._select = select_columns(self._missing)
            except self._backend.errors as exc:
                raise self._unreadable(exc) from exc
            finally:
                conn.close()
            return
        with self._lock:
            self._try_open()

    # ------------------------------------------------------------------ connection

    def _try_open(self, *, force: bool = True) -> Connection | None:
        """Return the write connection, opening it if needed. Caller holds the lock."""
        if self._pid != os.getpid():
            self._forget_inherited()
        if self._conn is not None:
            return self._conn
        failed_at = self._open_failed_at
        if not force and failed_at is not None and time.monotonic() - failed_at < 1.0:
            return None  # failed a moment ago: do not slow every write down
        deadline = time.monotonic() + self.busy_timeout_s
        for attempt in range(_WRITE_ATTEMPTS):
            try:
                self._conn = self._backend.connect(_MIGRATIONS)
            except Exception as exc:
                self.open_error = exc
                retry = attempt + 1 < _WRITE_ATTEMPTS and time.monotonic() < deadline
                if self._backend.is_transient(exc) and retry:
                    _sleep_backoff(attempt)
                    continue
                _log.debug("ledger %s cannot be opened: %s", self.location, self._why(exc))
                self._open_failed_at = time.monotonic()
                return None
            self.open_error = None
            self._open_failed_at = None
            return self._conn
        return None  # pragma: no cover - the loop always returns

    def _forget_inherited(self) -> None:
        """In a forked child: drop (never use or close) the parent's connection and lock."""
        if self._conn is not None:
            self._orphans.append(self._conn)
        self._orphans.extend(conn for conn, _ in self._idle)
        self._idle.clear()
        self._lent = set()
        self._conn = None
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def _drop_connection(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def close(self) -> None:
        """Close the database connection (idempotent). A later call reopens it."""
        with self._lock:
            if self._pid == os.getpid():
                self._drop_connection()
                self._close_idle()
            self._conn = None

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = ", read_only=True" if self.read_only else ""
        return f"Ledger({self.location!r}, store_content={self.store_content}{mode})"

    def _why(self, exc: BaseException | None) -> str:
        """``"<class>: <message>"`` of ``exc``, scrubbed of keys and the URL's password."""
        return redact(_describe(exc), secrets=self._backend.secrets)

    def _refuse_if_read_only(self, action: str) -> None:
        if self.read_only:
            raise InputError(
                f"ledger {self.location} was opened read_only; {action} needs Ledger(path)",
                code="ledger-read-only",
            )

    @property
    def shared(self) -> bool:
        """Whether other processes may write this ledger at once (PostgreSQL; a SQLite file
        opened with ``shared=True``): a recorder then reads a lineage's recent rows again
        before each comparison, to find predecessors that other processes stored."""
        return self._shared

    @property
    def unflushed(self) -> list[UsageRecord]:
        """Records no storage would take (last resort); :meth:`replay_spill` retries them."""
        return self._spill.unflushed

    # ------------------------------------------------------------------ writing

    def _without_content(self, record: UsageRecord) -> UsageRecord:
        """``record`` with ``content`` dropped unless :attr:`store_content`."""
        if not self.store_content and record.content is not None:
            record = record.model_copy(update={"content": None})
        return record

    def _prepare(self, record: UsageRecord) -> UsageRecord:
        """``record`` as stored: ``content`` dropped unless :attr:`store_content`, every text
        field scrubbed of key-shaped strings (the one field list of :func:`scrubbed`)."""
        return scrubbed(self._without_content(record))

    def write(self, record: UsageRecord) -> WriteOutcome:
        """Store one record; never raises for a storage failure and never drops the record.

        Lock errors (``SQLITE_BUSY``/``SQLITE_LOCKED``) are retried with exponential backoff
        and jitter, up to 4 attempts within ``busy_timeout_s`` (so a stuck lock delays the
        caller by about ``busy_timeout_s``, not more). Then the record goes, as one JSON line, to
        :attr:`spill_path`, else to a spill file in the fallback directory, else to
        :attr:`unflushed`; each new target is announced once with a :class:`LedgerSpillWarning`
        (and a log line). Writing a ``record_id`` that is already stored is a no-op.

        Args:
            record: The call to store. ``content`` is dropped unless ``store_content=True``;
                key-shaped strings are scrubbed (:func:`redact`).

        Returns:
            ``"committed"`` (in the database), ``"spilled"`` (in a spill file) or
            ``"unflushed"`` (in memory only).

        Raises:
            InputError: ``record`` is not a UsageRecord (code ``ledger-record-type``), or the
                ledger is read-only (code ``ledger-read-only``).
        """
        if not isinstance(record, UsageRecord):
            raise InputError(
                f"Ledger.write takes a UsageRecord, not {type(record).__name__}",
                code="ledger-record-type",
            )
        self._refuse_if_read_only("write")
        with self._lock:
            try:
                clean = self._prepare(record)
            except Exception as exc:  # pragma: no cover - redact works on validated records
                return self._spill.spill(record, exc)
            error = self._write_db(clean)
            if error is None:
                return "committed"
            return self._spill.spill(clean, error)

    def _write_db(self, record: UsageRecord) -> BaseException | None:
        """Insert, retrying lock errors until the busy timeout is used up. Caller holds lock."""
        deadline = time.monotonic() + self.busy_timeout_s
        error: BaseException | None = None
        for attempt in range(_WRITE_ATTEMPTS):
            conn = self._try_open(force=False)
            if conn is None:
                return self.open_error or LedgerError(
                    f"ledger {self.location} is unavailable", code="ledger-unavailable"
                )
            try:
                conn.execute(self._backend.insert_sql, to_row(record))
                return None
            except Exception as exc:
                error = exc
                if not self._backend.is_transient(exc):
                    self._drop_connection()
                    return exc
                if time.monotonic() >= deadline:
                    break  # SQLite already waited the busy timeout: do not stall the call
                _sleep_backoff(attempt)
        return error

    # ------------------------------------------------------------------ replay

    def replay_spill(self) -> int:
        """Import spilled and unflushed records into the database (idempotent by record_id).

        Reads ``<db>.spill.jsonl``, the fallback spill file and :attr:`unflushed`, then the
        pending journals (:meth:`pending_journal`) whose writing process is gone
        (``<db>.pending.<pid>.<ns>.jsonl``: the provisional rows of calls a killed proxy had
        not stored; a record already stored wins); each file is moved aside before reading
        and deleted once its records are committed, so writers appending meanwhile start a
        new file and nothing is imported twice or lost.

        A spilled line that is not a record, or a record with a value SQLite cannot store, is
        moved to ``<db>.spill.quarantine.jsonl`` with its line number (a
        :class:`LedgerSpillWarning` says so) and the rest is imported.

        Returns:
            Number of records imported from spill files and memory (already-stored ids
            included; quarantined lines not).

        Raises:
            LedgerError: The database cannot be opened or written (spill files are kept).
            InputError: The ledger is read-only (code ``ledger-read-only``).
        """
        self._refuse_if_read_only("replay_spill")
        with self._lock:
            conn = self._require_conn()
            return self._spill.replay(lambda records: self._insert_many(conn, records),
                                      orphaned_journals(self.path))

    def unimported_files(self) -> list[Path]:
        """Files holding records this ledger does not have yet (what :meth:`replay_spill`
        would import): non-empty spill files and pending journals whose writer is gone. Only
        reads; allowed on a read-only ledger (``stableprompt report`` names them)."""
        def nonempty(path: Path) -> bool:
            try:
                return path.stat().st_size > 0
            except OSError:
                return False

        return [p for p in [*self._spill.targets(), *orphaned_journals(self.path)]
                if nonempty(p)]

    def pending_journal(self) -> PendingJournal:
        """A new :class:`~stableprompt._ledger._journal.PendingJournal` of this ledger: where
        a process that stores records on a background thread makes them durable first
        (``stableprompt proxy``); it takes records already scrubbed (as the recorder makes
        them) and drops their content unless :attr:`store_content`. After the process died,
        :meth:`replay_spill` imports what it had not stored (prepared as :meth:`write`
        stores records)."""
        return PendingJournal(self.path, self._without_content)

    def _insert_many(self, conn: Connection,
                     records: list[UsageRecord]) -> list[tuple[UsageRecord, str]]:
        """Commit the storable records in one transaction; return the others (a value SQLite
        cannot hold, code ``ledger-value``) with the reason, for quarantine."""
        rows: list[tuple[Any, ...]] = []
        rejected: list[tuple[UsageRecord, str]] = []
        for record in records:
            try:
                rows.append(to_row(self._prepare(record)))
            except LedgerError as exc:
                if exc.code != "ledger-value":
                    raise
                rejected.append((record, f"{exc.message} (at {exc.pointer})"))

        def insert() -> None:
            with self._backend.transaction(conn):
                self._backend.executemany(conn, self._backend.insert_sql, rows)

        if rows:
            self._retry_locked(insert,
                               failure=f"cannot import records into ledger {self.location}",
                               code="ledger-replay")
        return rejected

    # ------------------------------------------------------------------ reading

    def _require_conn(self) -> Connection:
        conn = self._try_open(force=True)
        if conn is None:
            cause = self.open_error
            check = ("that the server is reachable and the user may create tables"
                     if self.location != str(self.path)
                     else "that the path is a writable file in an existing directory")
            raise LedgerError(
                f"cannot open ledger database {self.location}: {self._why(cause)}; check "
                f"{check} (records written meanwhile were spilled to {self.spill_path} or "
                "the fallback directory)",
                code="ledger-unavailable",
            ) from cause
        return conn

    def _unreadable(self, exc: BaseException) -> LedgerError:
        return LedgerError(
            f"cannot read ledger database {self.location}: "
            f"{redact(str(exc), secrets=self._backend.secrets)}", code="ledger-unreadable"
        )

    def _reader(self) -> Connection:
        """A connection for one read: an idle one this process opened before, when it
        waited less than :data:`_IDLE_READER_S` and it answers (:meth:`_answers`), else a
        new one. Give it back with :meth:`_release`.

        Raises:
            LedgerError: The database cannot be opened.
        """
        if self._pid == os.getpid():
            while True:
                try:
                    conn, released = self._idle.pop()
                except IndexError:
                    break
                if time.monotonic() - released < _IDLE_READER_S and self._answers(conn):
                    self._lent.add(id(conn))
                    return conn
                with contextlib.suppress(Exception):
                    conn.close()
        if self.read_only:
            conn = self._backend.connect_read_only()
        else:
            with self._lock:
                self._require_conn()  # creates/migrates the schema, or raises LedgerError
            try:
                conn = self._backend.connect_reader()
            except self._backend.errors as exc:
                raise self._unreadable(exc) from exc
        self._lent.add(id(conn))
        return conn

    def _answers(self, conn: Connection) -> bool:
        """Whether a kept connection answers a ``SELECT 1`` (one round trip, ~0.1 ms on the
        same host against ~10 ms to open one): a session the server is ending (a terminated
        backend, a restart) whose last message has not arrived yet fails here, not in the
        caller's read; and then the backend still finds it usable (``Backend.reusable``:
        open, idle outside a transaction). A closed or broken one fails the ``SELECT``."""
        try:
            conn.execute("SELECT 1").fetchone()
        except self._backend.errors:
            return False
        return self._backend.reusable(conn)

    def _release(self, conn: Connection) -> None:
        """The end of a read on ``conn`` (from :meth:`_reader`): kept for the next read
        when usable, else closed; beyond :data:`_IDLE_READERS` kept, the oldest is closed.
        One this process did not lend (a read its parent began before a fork) is never used
        or closed here: its socket is the parent's."""
        if id(conn) not in self._lent or self._pid != os.getpid():
            self._orphans.append(conn)
            return
        self._lent.discard(id(conn))
        if not self._backend.reusable(conn):
            with contextlib.suppress(Exception):
                conn.close()
            return
        self._idle.append((conn, time.monotonic()))
        while len(self._idle) > _IDLE_READERS:  # threads releasing at once: the oldest go
            try:
                old, _ = self._idle.popleft()
            except IndexError:
                return
            with contextlib.suppress(Exception):
                old.close()

    def _close_idle(self) -> None:
        _close_all(self._idle)

    # ------------------------------------------------------------------ metadata

    def set_meta(self, key: str, value: str) -> None:
        """Store one ledger-level ``key -> value`` pair (replacing an earlier value).

        Used for what a whole ledger shares, e.g. ``"backend"`` (where the calls went),
        ``"workload"``, ``"provider"``, ``"model"``; ``stableprompt report`` prints them.
        Key-shaped strings in ``value`` are scrubbed (:func:`redact`).

        Raises:
            InputError: ``key`` is not a non-empty ``str`` or ``value`` is not a ``str``
                (code ``ledger-meta-invalid``), or the ledger is read-only
                (``ledger-read-only``).
            LedgerError: The database cannot be opened or written (code
                ``ledger-unavailable`` / ``ledger-meta-write``); unlike :meth:`write`,
                metadata is not spilled.
        """
        if not isinstance(key, str) or not key or not isinstance(value, str):
            raise InputError(
                f"Ledger.set_meta takes a non-empty str key and a str value, not "
                f"{type(key).__name__} {key!r} -> {type(value).__name__}",
                code="ledger-meta-invalid",
            )
        self._refuse_if_read_only("set_meta")
        clean = redact(value, fragments=False)
        with self._lock:
            conn = self._require_conn()
            self._retry_locked(
                lambda: conn.execute(
                    'INSERT INTO meta ("key", "value") VALUES (?, ?) '
                    'ON CONFLICT ("key") DO UPDATE SET "value" = excluded."value"',
                    (key, clean),
                ),
                failure=f"cannot write metadata {key!r} to ledger {self.location}",
                code="ledger-meta-write",
            )

    def prune(self, before: datetime) -> int:
        """Delete the call rows older than ``before``; their rollups stay (retention).

        The rollups (table ``call_rollups``, ``_ledger/_rollups.py``) keep every hour's sums,
        so ``stableprompt report --rollups`` still shows the pruned period; the row-level
        report says rows before the cut-off were pruned: the cut-off (the latest of all
        prunes) is stored as metadata ``pruned_before`` (:func:`~._schema.ts_text` text).
        Rows go in batches of 10,000, each its own transaction (writers of a live ledger get
        the database between them); the cut-off is stored with the first.

        A row kept whose outline (``segment_digests``) is a delta of a row being deleted is
        first rewritten whole, in one transaction before any row goes (found by reads, so the
        scan of the kept rows holds no write lock; ``_outline_text.made_whole``: the same
        segments, read without its base), so a later reader still compares the next turn
        with it segment by segment. A row a live writer adds during the prune that continues
        a row older than the cut-off keeps its delta, and reads as no outline (compared by
        fingerprint) once that row is gone.

        Refused while records wait outside the database (:meth:`unimported_files`: spill
        files, a killed process's journal): import them first (:meth:`replay_spill`), or a
        pruned row replayed from them later would be counted in the rollups twice.

        Args:
            before: Timezone-aware cut-off; rows with ``ts_utc < before`` are deleted.

        Returns:
            How many call rows were deleted.

        Raises:
            InputError: ``before`` is naive (code ``ledger-since-naive``) or the ledger is
                read-only (``ledger-read-only``).
            LedgerError: Records wait outside the database (``ledger-prune-unimported``), or
                the database cannot be opened or written (``ledger-unavailable`` /
                ``ledger-prune``).
        """
        self._refuse_if_read_only("prune")
        if before.tzinfo is None or before.utcoffset() is None:
            raise InputError("prune's cut-off must be timezone-aware "
                             "(e.g. datetime.now(timezone.utc) - timedelta(days=30))",
                             code="ledger-since-naive")
        waiting = self.unimported_files()
        if waiting:
            raise LedgerError(
                f"ledger {self.location}: {len(waiting)} file(s) hold records the database "
                f"does not have yet ({', '.join(map(str, waiting))}); import them first "
                "(Ledger(path).replay_spill(), or start `stableprompt proxy` once), then prune",
                code="ledger-prune-unimported")
        cut = ts_text(before)
        rowid = self._backend.rowid
        with self._lock:
            conn = self._require_conn()
            self._retry_locked(functools.partial(self._outlines_made_whole, conn, cut),
                               failure=f"cannot prune ledger {self.location}",
                               code="ledger-prune")
        pick = f'SELECT {rowid} FROM calls WHERE "ts_utc" < ? LIMIT {_PRUNE_BATCH}'
        deleted, first = 0, True
        while True:  # batches: other writers get the database between them
            gone: list[int] = [0]
            with self._lock:
                conn = self._require_conn()
                self._retry_locked(functools.partial(self._prune_batch, conn, cut, pick,
                                                     first, gone),
                                   failure=f"cannot prune ledger {self.location}",
                                   code="ledger-prune")
            deleted, first = deleted + gone[0], False
            if gone[0] < _PRUNE_BATCH:
                return deleted

    def _prune_batch(self, conn: Connection, cut: str, pick: str, note: bool,
                     gone: list[int]) -> None:
        """One transaction of :meth:`prune`: the rows ``pick`` selects deleted (how many in
        ``gone[0]``), and with ``note`` the cut-off stored first (no row is gone without
        it)."""
        with self._backend.transaction(conn):
            if note:
                self._note_pruned(conn, cut)
            # counted, then deleted, in one write transaction (no RETURNING: SQLite 3.35+)
            (count,) = conn.execute(f"SELECT count(*) FROM ({pick}) AS batch",
                                    (cut,)).fetchone()
            conn.execute(f"DELETE FROM calls WHERE {self._backend.rowid} IN ({pick})", (cut,))
            gone[0] = int(count)

    def _outlines_made_whole(self, conn: Connection, cut: str) -> None:
        """The first step of :meth:`prune`, before any row goes: each row at or after
        ``cut`` whose outline is a delta of a row before it rewritten whole
        (``_outline_text.made_whole``: through at most ``MAX_DEPTH`` bases, as a reader
        resolves it; each row read once). The rows are found and resolved by reads (a scan
        of the kept rows: other writers keep writing), then rewritten in one transaction."""
        rowid = self._backend.rowid
        find = (f'SELECT kept.{rowid}, kept."segment_digests" FROM calls AS kept '
                'JOIN calls AS base ON base."record_id" = substr(kept."segment_digests", 3, 32) '
                'WHERE kept."ts_utc" >= ? AND kept."segment_digests" LIKE ? '
                'AND base."ts_utc" < ?')
        texts: dict[str, str | None] = {}

        def outline_of(record_id: str) -> str | None:
            if record_id not in texts:
                found = conn.execute('SELECT "segment_digests" FROM calls WHERE "record_id" = ?',
                                     (record_id,)).fetchone()
                texts[record_id] = (found[0] if found is not None and isinstance(found[0], str)
                                    else None)
            return texts[record_id]

        # found and resolved before the write transaction: the scan holds no write lock
        found = conn.execute(find, (cut, DELTA_PREFIX + "%", cut)).fetchall()
        rewrites = [(made, key, text) for key, text in found
                    if (made := made_whole(text, outline_of)) is not None]
        if rewrites:
            with self._backend.transaction(conn):
                for made, key, text in rewrites:  # a row changed since it was read is left
                    conn.execute(f'UPDATE calls SET "segment_digests" = ? WHERE {rowid} = ? '
                                 'AND "segment_digests" = ?', (made, key, text))

    @staticmethod
    def _note_pruned(conn: Connection, cut: str) -> None:
        """Store ``cut`` as metadata ``pruned_before`` unless a later cut-off is there."""
        from ._rollups import PRUNED_BEFORE

        found = conn.execute('SELECT "value" FROM meta WHERE "key" = ?',
                             (PRUNED_BEFORE,)).fetchone()
        if found is None or str(found[0]) < cut:
            conn.execute('INSERT INTO meta ("key", "value") VALUES (?, ?) ON CONFLICT ("key") '
                         'DO UPDATE SET "value" = excluded."value"', (PRUNED_BEFORE, cut))

    def meta(self) -> dict[str, str]:
        """Return the ledger-level metadata, keys sorted; ``{}`` for a ledger without any
        (including a schema v1 file opened read-only, which has no ``meta`` table).

        Raises:
            LedgerError: The database cannot be opened or read.
        """
        conn = self._reader()
        try:
            if not self._backend.has_table(conn, "meta"):
                return {}
            rows = conn.execute('SELECT "key", "value" FROM meta ORDER BY "key"').fetchall()
        except self._backend.errors as exc:
            raise self._unreadable(exc) from exc
        finally:
            self._release(conn)
        return {str(key): str(value) for key, value in rows}

    # ------------------------------------------------------------------ records

    def iter_records(
        self, *, session_id: str | None = None, since: datetime | None = None,
        on_invalid: Callable[[str, Exception], None] | None = None,
    ) -> Iterator[UsageRecord]:
        """Yield stored records in time order (oldest first), optionally filtered.

        Uses its own connection, so it does not block writers (WAL readers see a snapshot).

        Args:
            session_id: Only records of this conversation (``gen_ai.conversation.id``).
            since: Only records with ``ts_utc >= since`` (timezone-aware).
            on_invalid: Called with ``(row id, error)`` for each row that does not decode as a
                :class:`UsageRecord` (a hand-edited or corrupted row), which is then skipped;
                the row id is its ``record_id``, or ``"rowid <n>"`` when that is empty.
                ``None`` (default): such a row raises the decoding error.

        Raises:
            LedgerError: The database cannot be opened or read (code ``ledger-unavailable``
                or ``ledger-unreadable``).
            InputError: ``since`` is naive (code ``ledger-since-naive``).
        """
        where, params = self._where(session_id, since)
        return self._query("", params, on_invalid, in_order=where)

    @staticmethod
    def _where(session_id: str | None, since: datetime | None) -> tuple[str, list[Any]]:
        """The ``WHERE`` clause (``""`` without a filter) and parameters of
        :meth:`iter_records`' filters.

        Raises:
            InputError: ``since`` is naive (code ``ledger-since-naive``).
        """
        clauses: list[str] = []
        params: list[Any] = []
        if session_id is not None:
            clauses.append('"gen_ai.conversation.id" = ?')
            params.append(session_id)
        if since is not None:
            if since.tzinfo is None or since.utcoffset() is None:
                raise InputError(
                    "since must be timezone-aware (e.g. datetime.now(timezone.utc))",
                    code="ledger-since-naive",
                )
            clauses.append('"ts_utc" >= ?')
            params.append(ts_text(since))
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        return where, params

    def records_after(
        self, rowid: int = 0, *, limit: int = 1000,
        on_invalid: Callable[[str, Exception], None] | None = None,
        late: LateRows | None = None,
    ) -> tuple[list[UsageRecord], int]:
        """The records stored after insertion-order number ``rowid`` (SQLite's ``rowid``,
        PostgreSQL's ``seq``), in insertion order: what a follower (``stableprompt report
        --follow``) has not read yet while other processes write.

        Args:
            rowid: The last row already read (0: from the start).
            limit: At most this many rows after ``rowid`` per call.
            on_invalid: As :meth:`iter_records` (an invalid row is skipped but read past).
            late: Where the follower keeps the numbers it read past without a row
                (:class:`~._late.LateRows`, one per follower). On PostgreSQL a row can
                commit after a row with a higher ``seq`` (several writers); with ``late``,
                each call first returns the rows that have since filled those numbers (in
                insertion order), for :attr:`~._late.LateRows.wait_s` seconds. Without it (or
                on SQLite, where rows commit in insertion order) they are not read again.

        Returns:
            ``(records, last)``: the records (late rows first), and the number to pass next
            time (``rowid`` when no row was new). Rows come from a fresh connection, so a
            live writer's committed rows are seen; spilled records are not
            (:meth:`replay_spill`).

        Raises:
            LedgerError: As :meth:`iter_records`.
        """
        conn = self._reader()
        last = rowid
        out: list[UsageRecord] = []
        seq = self._backend.rowid
        watch = late if late is not None and not self._backend.commits_in_order else None
        try:
            found: list[Any] = []
            if watch is not None:
                watch.expire()
                ranges = watch.ranges
                for at in range(0, len(ranges), _LATE_RANGES_PER_QUERY):
                    chunk = ranges[at:at + _LATE_RANGES_PER_QUERY]
                    where = " OR ".join(f"{seq} BETWEEN ? AND ?" for _ in chunk)
                    found += conn.execute(
                        f"SELECT {self._select}, {seq} FROM calls WHERE {where}",
                        [bound for pair in chunk for bound in pair]).fetchall()
                found.sort(key=lambda row: int(row[-1]))
            rows = conn.execute(f"SELECT {self._select}, {seq} FROM calls WHERE {seq} > ? "
                                f"ORDER BY {seq} LIMIT ?", (rowid, limit)).fetchall()
        except self._backend.errors as exc:
            raise self._unreadable(exc) from exc
        finally:
            self._release(conn)
        if watch is not None:
            watch.filled(int(row[-1]) for row in found)
            watch.read_past(rowid, [int(row[-1]) for row in rows])
        for row in found:
            record = decoded_or_reported(row[:-1], int(row[-1]), on_invalid)
            if record is not None:
                out.append(record)
        for row in rows:
            last = int(row[-1])
            record = decoded_or_reported(row[:-1], last, on_invalid)
            if record is not None:
                out.append(record)
        return out, last

    def _query(self, sql: str, params: Iterable[Any],
               on_invalid: Callable[[str, Exception], None] | None = None, *,
               in_order: str | None = None) -> Iterator[UsageRecord]:
        """The records of ``sql`` (a query of bounded size: a ``LIMIT``, a list of ids), or
        with ``in_order`` (a ``WHERE`` clause or ``""``; ``sql`` unused) of
        ``Backend.read_in_order`` over it: every row in ledger order, memory bounded."""
        conn = self._reader()
        with_rowid = in_order is not None

        def read() -> Iterator[Any]:
            if in_order is not None:
                return self._backend.read_in_order(conn, self._select, in_order,
                                                   tuple(params))
            return fetch_batches(conn.execute(sql, tuple(params)))

        def rows() -> Iterator[UsageRecord | None]:
            try:
                yield None  # primed below: dropped before its first row, it still releases
                for row in read():
                    record = decoded_or_reported(row[:-1] if with_rowid else row, row[-1],
                                                 on_invalid)
                    if record is not None:
                        yield record
            except self._backend.errors as exc:
                raise self._unreadable(exc) from exc
            finally:
                self._release(conn)

        primed = rows()
        next(primed)  # inside the try: close() or collection now gives the connection back
        return cast(Iterator[UsageRecord], primed)

    def records(
        self, session_id: str | None = None, since: datetime | None = None, *,
        on_invalid: Callable[[str, Exception], None] | None = None,
    ) -> list[UsageRecord]:
        """Return stored records in time order; same filters, ``on_invalid`` and errors as
        :meth:`iter_records`. Spilled records appear after :meth:`replay_spill`."""
        return list(self.iter_records(session_id=session_id, since=since,
                                      on_invalid=on_invalid))

    def last_for_lineage(self, lineage: str) -> UsageRecord | None:
        """Return the most recent record of a cache lineage, or ``None`` if there is none.

        "Most recent" is the latest ``ts_utc`` (ties: the later insert). Records this instance
        spilled since the last :meth:`replay_spill` count too. Indexed on
        ``(lineage, ts_utc)``.

        Raises:
            LedgerError: The database cannot be opened or read.
        """
        return next(iter(self.recent_for_lineage(lineage, limit=1)), None)

    def recent_for_lineage(
        self, lineage: str, *, limit: int = 32,
        on_invalid: Callable[[str, Exception], None] | None = None,
    ) -> list[UsageRecord]:
        """Return up to ``limit`` most recent records of a cache lineage, newest first.

        Order: ``ts_utc`` descending (ties: the later insert first). Records this instance
        spilled since the last :meth:`replay_spill` count too. Indexed on
        ``(lineage, ts_utc)``. ``on_invalid``: as :meth:`iter_records` (a row that does not
        decode is skipped, and counts against ``limit``).

        Raises:
            LedgerError: The database cannot be opened or read.
            InputError: ``limit`` is below 1 (code ``ledger-limit``).
        """
        if limit < 1:
            raise InputError("limit must be at least 1", code="ledger-limit")
        sql = (
            f'SELECT {self._select} FROM calls WHERE "lineage" = ? '
            f'ORDER BY "ts_utc" DESC, {self._backend.rowid} DESC LIMIT ?'
        )
        found = list(self._query(sql, (lineage, limit), on_invalid))
        with self._lock:
            spilled = self._spill.recent(lineage)
        if spilled:
            stored = {r.record_id for r in found}
            found += [r for r in spilled if r.record_id not in stored]
            found.sort(key=lambda r: r.ts_utc, reverse=True)  # stable: ties keep insert order
        return found[:limit]

    def records_by_id(
        self, record_ids: Sequence[str], *,
        on_invalid: Callable[[str, Exception], None] | None = None,
    ) -> list[UsageRecord]:
        """Return the stored records with these ``record_ids`` (each at most once; ids not
        stored are left out; records this instance spilled since the last
        :meth:`replay_spill` are not looked up). ``on_invalid``: as :meth:`iter_records`.

        Raises:
            LedgerError: The database cannot be opened or read.
        """
        ids = list(dict.fromkeys(record_ids))
        if not ids:
            return []
        marks = ", ".join("?" for _ in ids)
        sql = f'SELECT {self._select} FROM calls WHERE "record_id" IN ({marks})'
        return list(self._query(sql, ids, on_invalid))

    def _retry_locked(self, action: Callable[[], object], *, failure: str, code: str) -> None:
        """Run ``action``, retrying lock errors (``Backend.is_transient``) with backoff and
        jitter, up to 4 attempts in all.

        Raises:
            LedgerError: ``action`` raised another database error, or a lock error on the
                last attempt; message ``"<failure>: <error>"``, code ``code``.
        """
        for attempt in range(_WRITE_ATTEMPTS):
            try:
                action()
                return
            except self._backend.errors as exc:
                if self._backend.is_transient(exc) and attempt + 1 < _WRITE_ATTEMPTS:
                    _sleep_backoff(attempt)
                    continue
                raise LedgerError(f"{failure}: {redact(str(exc), secrets=self._backend.secrets)}",
                                  code=code) from exc

    def export_jsonl(self, path_or_file: str | os.PathLike[str] | IO[Any]) -> int:
        """Write every stored record as one canonical JSON line (see ``UsageRecord.to_json``).

        Args:
            path_or_file: A path (created with mode 0600, overwritten) or an open file; text
                files get ``str`` lines, binary files ``bytes``.

        Returns:
            Number of records written. ``UsageRecord.from_json`` reads each line back.

        Raises:
            LedgerError: The database cannot be read.
        """
        records = self.iter_records()  # raises before any file is touched
        if isinstance(path_or_file, (str, os.PathLike)):
            fd = os.open(path_or_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as handle:
                return _export(records, handle)
        return _export(records, path_or_file)


def _export(records: Iterable[UsageRecord], handle: IO[Any]) -> int:
    text = _is_text(handle)
    count = 0
    for record in records:
        line = record.to_json() + b"\n"
        handle.write(line.decode("utf-8") if text else line)
        count += 1
    return count


def _is_text(handle: IO[Any]) -> bool:
    if isinstance(handle, io.TextIOBase):
        return True
    if isinstance(handle, (io.RawIOBase, io.BufferedIOBase)):
        return False
    return "b" not in getattr(handle, "mode", "b")


def _sleep_backoff(attempt: int) -> None:
    delay = _BACKOFF_S * (2**attempt)
    time.sleep(delay + random.uniform(0, delay))


public(Ledger)
