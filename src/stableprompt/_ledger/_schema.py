"""The ledger's table layout, schema migrations, row codec and read-only opening.

Table ``calls`` holds one row per provider call. Column names follow the OpenTelemetry GenAI
semantic conventions where one exists (``"gen_ai.usage.input_tokens"``,
``"gen_ai.usage.cache_read.input_tokens"``, ...; see :data:`COLUMNS`), so the table reads like
exported spans. Table ``meta`` (schema v2) holds ledger-level ``key -> value`` text. The schema
is versioned with ``PRAGMA user_version`` and upgraded by :func:`migrate` with
:data:`MIGRATIONS` (v3 added ``request_headers``: the request's allow-listed cache-relevant
headers, ``_policy.CACHE_HEADERS``, as a JSON object; v4 added ``segment_digests``: the
request's segment outline, ``_recording._outline``, so a predecessor is compared without its
content; v5 added table ``call_rollups`` and the trigger that keeps it: ``_rollups``).

Read-only opening (:func:`connect_read_only`, used by ``Ledger(path, read_only=True)`` and so by
``stableprompt report``) never creates, migrates or writes the file: it connects with the SQLite
URI ``mode=ro`` and, when the WAL side files (``-wal``/``-shm``) cannot be created (a read-only
directory or mount), with ``immutable=1`` (https://www.sqlite.org/uri.html,
https://www.sqlite.org/wal.html#readonly). A file that is not a stableprompt ledger (no
``calls`` table, an unrelated one, schema version 0 or newer than :data:`SCHEMA_VERSION`) is
refused with :class:`LedgerError`; an older ledger is read as it is, the columns added since
(:data:`ADDED_COLUMNS`) as ``NULL``.

The writer (:class:`~stableprompt.Ledger`, ``_ledger.py``) owns connections, retries and spills.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from operator import itemgetter
from pathlib import Path
from typing import Any, get_args

from .._canonical import MAX_NESTING, canonical_json, loads, show_int
from .._exceptions import CanonicalizationError, LedgerError
from .._usage import USAGE_FIELDS
from ._rollups import sqlite_migration
from ._usage_record import (
    OTEL_ATTRIBUTES,
    SEGMENT_DIGESTS_PATTERN,
    UsageRecord,
    Verdict,
    WireFormat,
)

__all__ = [
    "ADDED_COLUMNS",
    "COLUMNS",
    "INSERT_SQL",
    "MIGRATIONS",
    "OUTLINE_UNREADABLE",
    "SCHEMA_VERSION",
    "SELECT_COLUMNS",
    "absent_columns",
    "connect_read_only",
    "decoded_or_reported",
    "from_row",
    "has_table",
    "is_transient",
    "migrate",
    "select_columns",
    "to_row",
    "ts_text",
    "validated_row",
]


# --------------------------------------------------------------------------- schema

_FIELDS = (
    "record_id",
    "ts_utc",
    "session_id",
    "turn",
    "scenario",
    "wire_format",
    "provider",
    "model",
    "lineage",
    "request_fingerprint",
    "predecessor_id",
    "lcp_bytes",
    "lcp_tokens",
    "request_tokens",
    "predicted_cache_read_tokens",
    *USAGE_FIELDS,
    "usage_inconsistent",
    "usage_raw",
    "verdict",
    "verdict_detail",
    "latency_ms",
    "ttft_ms",
    "status_code",
    "error_class",
    "diagnostics",
    "response_id",
    "content",
    "request_headers",
    "segment_digests",
)

COLUMNS: Mapping[str, str] = {field: OTEL_ATTRIBUTES.get(field, field) for field in _FIELDS}
"""``UsageRecord`` field -> column of table ``calls``: the OpenTelemetry name where one exists
(:data:`OTEL_ATTRIBUTES`, e.g. ``cache_read_tokens`` -> ``gen_ai.usage.cache_read.input_tokens``),
else the field name. A new record field needs a migration adding its column here."""

_JSON_FIELDS = frozenset({"usage_raw", "verdict_detail", "diagnostics", "request_headers"})

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # v1: create.
    (
        """CREATE TABLE calls (
            "record_id" TEXT PRIMARY KEY NOT NULL,
            "ts_utc" TEXT NOT NULL,
            "gen_ai.conversation.id" TEXT,
            "turn" INTEGER,
            "scenario" TEXT,
            "wire_format" TEXT NOT NULL,
            "gen_ai.provider.name" TEXT,
            "gen_ai.request.model" TEXT,
            "lineage" TEXT,
            "request_fingerprint" TEXT,
            "predecessor_id" TEXT,
            "lcp_bytes" INTEGER,
            "lcp_tokens" INTEGER,
            "request_tokens" INTEGER,
            "predicted_cache_read_tokens" INTEGER,
            "gen_ai.usage.input_tokens" INTEGER,
            "uncached_tokens" INTEGER,
            "gen_ai.usage.cache_read.input_tokens" INTEGER,
            "gen_ai.usage.cache_creation.input_tokens" INTEGER,
            "cache_write_5m_tokens" INTEGER,
            "cache_write_1h_tokens" INTEGER,
            "gen_ai.usage.output_tokens" INTEGER,
            "usage_inconsistent" INTEGER NOT NULL DEFAULT 0,
            "usage_raw" TEXT,
            "verdict" TEXT NOT NULL,
            "verdict_detail" TEXT NOT NULL DEFAULT '{}',
            "latency_ms" REAL,
            "ttft_ms" REAL,
            "http.response.status_code" INTEGER,
            "error.type" TEXT,
            "diagnostics" TEXT,
            "gen_ai.response.id" TEXT,
            "content" TEXT
        )""",
        'CREATE INDEX calls_lineage_ts ON calls ("lineage", "ts_utc")',
        'CREATE INDEX calls_conversation_ts ON calls ("gen_ai.conversation.id", "ts_utc")',
        'CREATE INDEX calls_ts ON calls ("ts_utc")',
    ),
    # v2: ledger-level metadata (what produced the calls: backend, workload, ...).
    (
        """CREATE TABLE meta (
            "key" TEXT PRIMARY KEY NOT NULL,
            "value" TEXT NOT NULL
        )""",
    ),
    # v3: the request's allow-listed cache-relevant headers (_policy.CACHE_HEADERS), JSON.
    (
        'ALTER TABLE calls ADD COLUMN "request_headers" TEXT',
    ),
    # v4: the request's segment outline (_recording._outline): a predecessor without content.
    (
        'ALTER TABLE calls ADD COLUMN "segment_digests" TEXT',
    ),
    # v5: rollups per hour x provider x model x scenario x verdict, kept by a trigger on
    # calls, built from the existing rows once (_rollups).
    sqlite_migration(),
)
"""Schema migrations: entry ``i`` upgrades ``user_version`` ``i`` to ``i + 1``. Append a tuple
of statements for the next version; never edit a shipped entry. Each upgrade runs in one
transaction. A migration that adds a ``calls`` column must also teach :func:`_check_schema`
(read-only opening never migrates) which versions lack it."""

SCHEMA_VERSION = len(MIGRATIONS)
"""Schema version this stableprompt writes (``PRAGMA user_version``)."""

ADDED_COLUMNS: Mapping[str, int] = {"request_headers": 3, "segment_digests": 4}
"""``calls`` columns added after v1 -> the schema version that added them. A ledger of an older
version opened read-only (which never migrates) lacks them: they are read as ``NULL``
(:func:`select_columns`), so the field is ``None`` (unknown), never a refusal."""

_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


SELECT_COLUMNS = ", ".join(_quote(column) for column in COLUMNS.values())
"""The quoted columns of :data:`COLUMNS`, comma-separated, in :data:`COLUMNS` order (the order
:func:`to_row` writes and :func:`from_row` reads)."""



def select_columns(missing: frozenset[str] = frozenset()) -> str:
    """:data:`SELECT_COLUMNS` with each column of ``missing`` (columns of
    :data:`ADDED_COLUMNS` a read-only ledger of an older version lacks) read as ``NULL``."""
    if not missing:
        return SELECT_COLUMNS
    return ", ".join(f"NULL AS {_quote(c)}" if c in missing else _quote(c)
                     for c in COLUMNS.values())


def absent_columns(columns: Iterable[str]) -> frozenset[str]:
    """The :data:`ADDED_COLUMNS` not among ``columns`` (the columns a ``calls`` table has)."""
    present = set(columns)
    return frozenset(c for c in ADDED_COLUMNS if c not in present)


INSERT_SQL = (
    f"INSERT OR IGNORE INTO calls ({SELECT_COLUMNS}) VALUES ({', '.join('?' for _ in COLUMNS)})"
)
"""Insert one :func:`to_row` row; a ``record_id`` already stored is ignored (idempotent)."""


def ts_text(ts: datetime) -> str:
    """``ts`` as stored in ``ts_utc``: UTC ISO 8601 with microseconds always present (fixed
    width, so text order is time order), e.g. ``"2026-06-01T12:00:00.000000+00:00"``."""
    return ts.astimezone(UTC).isoformat(timespec="microseconds")


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def to_row(record: UsageRecord) -> tuple[Any, ...]:
    """One ``calls`` row of ``record``, values in :data:`COLUMNS` order: ``ts_utc`` as
    :func:`ts_text`, JSON fields as canonical JSON text, ``usage_inconsistent`` as 0/1.

    Raises:
        LedgerError: a value SQLite cannot store: an integer outside signed 64 bits, or a JSON
            field that is not canonical JSON (code ``ledger-value``, pointer ``/<field>``).
            No retry can store such a record.
    """
    row: list[Any] = []
    for field in COLUMNS:
        value = getattr(record, field)
        if field == "ts_utc":
            value = ts_text(value)
        elif field in _JSON_FIELDS:
            try:
                value = None if value is None else canonical_json(value).decode("utf-8")
            except CanonicalizationError as exc:
                raise LedgerError(f"record {record.record_id}: {field} cannot be stored: "
                                  f"{exc.message}", code="ledger-value",
                                  pointer=f"/{field}{exc.pointer or ''}") from exc
        elif field == "usage_inconsistent":
            value = int(value)
        elif type(value) is int and not _INT64_MIN <= value <= _INT64_MAX:
            raise LedgerError(f"record {record.record_id}: {field} = {show_int(value)} is "
                              "outside SQLite's signed 64-bit INTEGER", code="ledger-value",
                              pointer=f"/{field}")
        row.append(value)
    return tuple(row)


def decoded_or_reported(row: tuple[Any, ...], rowid: object,
                        on_invalid: Callable[[str, Exception], None] | None,
                        ) -> UsageRecord | None:
    """:func:`from_row` of ``row``, the one rule for a row that does not decode: without
    ``on_invalid`` its error propagates; with it, ``on_invalid`` gets the row's record id
    (``"rowid N"`` when it has none, ``N`` = ``rowid``) and the error, and ``None`` is
    returned (the caller skips the row)."""
    if on_invalid is None:
        return from_row(row)
    try:
        return from_row(row)
    except Exception as exc:  # the row does not decode
        on_invalid(str(row[_RECORD_ID_AT] or f"rowid {rowid}"), exc)
        return None


def from_row(row: tuple[Any, ...]) -> UsageRecord:
    """The record of a row selected with :data:`SELECT_COLUMNS` (the inverse of :func:`to_row`).

    A row whose every value already has its field's type and range (what :func:`to_row`
    writes) is decoded without pydantic's validation (:func:`_trusted`, ~10x cheaper: the
    report reads a million rows); any other row is validated (:func:`validated_row`), so the
    record, or the error, is the same either way.

    Raises:
        pydantic.ValidationError: The row does not validate as a :class:`UsageRecord`.
    """
    record = _trusted(row)
    return validated_row(row) if record is None else record


_OPT_STR = ("session_id", "scenario", "provider", "model", "lineage", "request_fingerprint",
            "predecessor_id", "error_class", "response_id", "content")
_COUNTS = ("turn", "lcp_bytes", "lcp_tokens", "request_tokens", "predicted_cache_read_tokens")
_BY_NAME = ("record_id", "ts_utc", "wire_format", "verdict", "verdict_detail",
            "usage_inconsistent", "latency_ms", "ttft_ms", "status_code", "usage_raw",
            "diagnostics", "request_headers", "segment_digests")
if sorted((*_OPT_STR, *_COUNTS, *USAGE_FIELDS, *_BY_NAME)) != sorted(COLUMNS):  # pragma: no cover
    raise RuntimeError("a ledger column without a check in _trusted")  # a new column: add it
_FIELD_ORDER = tuple(UsageRecord.model_fields)
if tuple(COLUMNS) != _FIELD_ORDER:  # pragma: no cover - columns are the fields, in order
    raise RuntimeError("UsageRecord fields and ledger columns differ")
_RECORD_ID_AT = tuple(COLUMNS).index("record_id")
_STR_OR_NONE = frozenset({str, type(None)})
_INT_OR_NONE = frozenset({int, type(None)})
_VERDICTS = frozenset(get_args(Verdict))
_WIRE_FORMATS = frozenset(get_args(WireFormat))
_DEPTH_SAFE_CHARS = 512
"""JSON text shorter than this cannot nest deeper than :func:`canonical_json` allows (255
levels take 256 opening and 256 closing brackets): only longer text is checked with it."""
_INF = float("inf")
_OUTLINE = re.compile(SEGMENT_DIGESTS_PATTERN)
"""The field's own pattern (:data:`~._usage_record.SEGMENT_DIGESTS_PATTERN`)."""
OUTLINE_UNREADABLE = "segment_digests_unreadable"
"""The ``verdict_detail`` key of a row whose stored outline could not be read
(:func:`validated_row`)."""
_set = object.__setattr__


def _json_object(text: Any) -> dict[str, Any] | None:
    """The object a JSON column holds when it is one :class:`UsageRecord` accepts as it is
    (``None`` otherwise: not text, not an object, or refused by :func:`canonical_json`, which
    on decoded JSON can only be nesting too deep)."""
    if type(text) is not str:
        return None
    try:
        value = loads(text)
        if type(value) is not dict:
            return None
        if (len(text) >= _DEPTH_SAFE_CHARS
                and text.count("{") + text.count("[") > MAX_NESTING):
            canonical_json(value)  # only that many opening brackets can nest too deep
    except ValueError:
        return None
    return value


def _ms(value: Any) -> Any:
    """A duration column as the field holds it, ``False`` when validation must decide."""
    if value is None:
        return None
    if type(value) is not float and type(value) is not int:
        return False
    value = float(value)
    return value if 0 <= value < _INF else False  # NaN fails too


class _Decoder:
    """:func:`_trusted` for rows of ``fields`` (the record's fields in field order, or all but
    ``segment_digests``: ``_lean``, since an outline never makes a row corrupt and the report
    does not read it); a field the rows do not hold is ``None`` in the record. Every other
    field is checked, so a row it decodes is one :func:`validated_row` reads the same
    (``None`` otherwise, for :func:`validated_row` to decide). ``fields_set``: compute the
    record's pydantic fields-set (else every field the rows hold: the report never reads
    it)."""

    def __init__(self, fields: Sequence[str], *, fields_set: bool = True) -> None:
        index = {field: i for i, field in enumerate(fields)}
        if set(_FIELD_ORDER) - set(fields) - {"segment_digests"}:  # pragma: no cover
            raise ValueError("a checked field is missing")

        def getter(names: Sequence[str]) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
            get = itemgetter(*(index[f] for f in names))
            return get if len(names) > 1 else lambda row: (get(row),)

        self.fields = tuple(fields)
        self.opt_strs, self.counts, self.ints = (getter(_OPT_STR), getter(_COUNTS),
                                                 getter(USAGE_FIELDS))
        self.absent = dict.fromkeys(f for f in _FIELD_ORDER if f not in index)
        self.fields_set = fields_set

    def __call__(self, row: Sequence[Any]) -> UsageRecord | None:
        """The record of ``row``, or ``None`` for :func:`validated_row` to decide."""
        fields = self.fields
        if len(row) != len(fields):
            return None
        if (not set(map(type, self.opt_strs(row))) <= _STR_OR_NONE
                or not set(map(type, self.ints(row))) <= _INT_OR_NONE
                or not set(map(type, counts := self.counts(row))) <= _INT_OR_NONE
                or min(filter(None, counts), default=0) < 0):  # a negative count (ints, None)
            return None
        data = dict(zip(fields, row, strict=True))
        record_id, ts, wire, verdict = row[0], row[1], data["wire_format"], data["verdict"]
        if (type(record_id) is not str or not 0 < len(record_id) <= 128 or type(ts) is not str
                or type(wire) is not str or wire not in _WIRE_FORMATS
                or type(verdict) is not str or verdict not in _VERDICTS):
            return None
        try:
            when = datetime.fromisoformat(ts)
        except ValueError:
            return None
        if when.tzinfo is None or when.utcoffset() is None:
            return None
        data["ts_utc"] = when.astimezone(UTC)
        status = data["status_code"]
        if status is not None and (type(status) is not int or not 100 <= status <= 599):
            return None
        for name in ("latency_ms", "ttft_ms"):
            if (value := _ms(data[name])) is False:
                return None
            data[name] = value
        detail = data["verdict_detail"]
        data["verdict_detail"] = {} if detail is None else _json_object(detail)
        if data["verdict_detail"] is None:
            return None
        for name in ("usage_raw", "diagnostics", "request_headers"):
            if (text := data[name]) is not None:
                if (value := _json_object(text)) is None:
                    return None
                data[name] = value
        headers = data["request_headers"]
        if headers is not None and not set(map(type, headers.values())) <= {str}:
            return None
        if self.absent:
            data.update(self.absent)
        else:
            outline = data["segment_digests"]
            if outline is not None and (type(outline) is not str
                                        or _OUTLINE.fullmatch(outline) is None):
                return None
        data["usage_inconsistent"] = bool(data["usage_inconsistent"])
        record = object.__new__(UsageRecord)
        _set(record, "__dict__", data)
        _set(record, "__pydantic_fields_set__", {
            name for name, value in zip(fields, row, strict=True)
            if value is not None or name in _ALWAYS_SET} if self.fields_set else set(fields))
        _set(record, "__pydantic_extra__", None)
        _set(record, "__pydantic_private__", None)
        return record


_trusted = _Decoder(_FIELD_ORDER)
"""The record of a row of every field built without validation when each value has its
field's exact type and range (strict, as :class:`UsageRecord` validates; JSON text decoded by
:func:`loads` holds only JSON values); ``None`` when any does not, for :func:`validated_row`
to decide. Equal to :func:`validated_row`'s record, fields set included
(``tests/test_ledger_decode.py``)."""


_ALWAYS_SET = frozenset({"verdict_detail", "usage_inconsistent"})
"""Fields :func:`validated_row` sets from a ``NULL`` too (to their defaults)."""


def validated_row(row: tuple[Any, ...]) -> UsageRecord:
    """:func:`from_row` validating every value with pydantic (the reference decoding). A
    ``segment_digests`` value that is not an outline (a hand-edited row) is read as unknown,
    with ``verdict_detail[OUTLINE_UNREADABLE]`` saying so: the outline is an index derived from
    the request, and the row's usage and money are kept.

    Raises:
        pydantic.ValidationError: The row does not validate as a :class:`UsageRecord`.
    """
    data: dict[str, Any] = {}
    for field, value in zip(COLUMNS, row, strict=True):
        if value is None:
            if field == "verdict_detail":
                value = {}
            elif field == "usage_inconsistent":
                value = False
            else:
                continue
        elif field == "ts_utc":
            value = datetime.fromisoformat(value)
        elif field in _JSON_FIELDS:
            value = loads(value)
        elif field == "usage_inconsistent":
            value = bool(value)
        elif field in ("latency_ms", "ttft_ms"):
            value = float(value)
        data[field] = value
    outline = data.get("segment_digests")
    if outline is not None and (type(outline) is not str or _OUTLINE.fullmatch(outline) is None):
        # a derived index, not the call: an unreadable one is unknown (the row keeps its
        # usage and money), and the row says so
        del data["segment_digests"]
        detail = data.get("verdict_detail")
        if isinstance(detail, dict):
            data["verdict_detail"] = {**detail, OUTLINE_UNREADABLE:
                                      "the stored segment outline is not in a known format: "
                                      "read as unknown (the predecessor is matched by "
                                      "fingerprint)"}
    return UsageRecord.model_validate(data)


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a lock error worth retrying (``SQLITE_BUSY``/``SQLITE_LOCKED``)."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def migrate(
    conn: sqlite3.Connection, path: Path, migrations: Sequence[tuple[str, ...]]
) -> None:
    """Bring the schema to version ``len(migrations)`` in one ``BEGIN IMMEDIATE`` transaction.

    Args:
        conn: Write connection in autocommit mode (``isolation_level=None``).
        path: Database path, for messages.
        migrations: :data:`MIGRATIONS` as the writer sees it (tests substitute older or
            longer lists to simulate other versions).

    Raises:
        LedgerError: The file's schema is newer than ``migrations`` (code
            ``ledger-schema-newer``) or a migration failed (code ``ledger-migration``).
        sqlite3.OperationalError: A lock error (:func:`is_transient`), for the caller to retry.
    """
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if version == len(migrations):
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        if version > len(migrations):
            raise LedgerError(
                f"ledger {path} has schema version {version}, newer than this stableprompt "
                f"knows ({len(migrations)}); upgrade stableprompt or use another file",
                code="ledger-schema-newer",
            )
        for target in range(version, len(migrations)):
            for statement in migrations[target]:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {target + 1}")
        conn.execute("COMMIT")
    except BaseException as exc:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        if isinstance(exc, LedgerError) or is_transient(exc):
            raise
        if isinstance(exc, sqlite3.Error):
            raise LedgerError(
                f"cannot migrate ledger {path} from schema version {version}: {exc}",
                code="ledger-migration",
            ) from exc
        raise


# --------------------------------------------------------------------------- read-only

_SQLITE_MAGIC = b"SQLite format 3\x00"
_SQLITE_CANTOPEN = 14


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    """Whether the database of ``conn`` has a table ``name``."""
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
    ).fetchone()
    return row is not None


def _is_cantopen(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return bool(code & 0xFF == _SQLITE_CANTOPEN)
    return "unable to open" in str(exc).lower()  # pragma: no cover - Python < 3.11


def _open_uri(uri: str, busy_timeout_s: float) -> tuple[sqlite3.Connection, int]:
    """Connect to ``uri`` and read ``user_version`` (which makes SQLite open the file and,
    for a WAL database, its side files)."""
    conn = sqlite3.connect(
        uri, uri=True, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
    )
    try:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
    except BaseException:
        conn.close()
        raise
    return conn, int(version)


def connect_read_only(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
    """Open an existing ledger read-only: nothing is created, migrated or written.

    SQLite URI ``mode=ro`` first (it sees a live writer's WAL); when that cannot open the WAL
    side files (SQLITE_CANTOPEN: the directory is read-only), ``immutable=1``, which reads the
    main file alone: refused when a non-empty ``-wal`` file holds writes it would miss.

    Raises:
        LedgerError: See :class:`~stableprompt.Ledger` (``read_only=True``).
    """
    shown = str(path)
    if not path.exists():
        raise LedgerError(f"no ledger at {shown!r} (file not found)", code="ledger-not-found")
    if not path.is_file():
        raise LedgerError(f"ledger path {shown!r} is not a regular file", code="ledger-not-a-file")
    try:
        with path.open("rb") as handle:
            magic = handle.read(len(_SQLITE_MAGIC))
    except OSError as exc:
        raise LedgerError(
            f"ledger {shown!r} is not readable ({exc.strerror or exc})", code="ledger-unreadable"
        ) from exc
    if magic != _SQLITE_MAGIC:
        what = "an empty file" if not magic else "not a SQLite database"
        raise LedgerError(
            f"{shown!r} is not a stableprompt ledger ({what})", code="ledger-not-a-ledger"
        )
    uri = path.as_uri()
    try:
        try:
            conn, version = _open_uri(uri + "?mode=ro", busy_timeout_s)
        except sqlite3.OperationalError as exc:
            if not _is_cantopen(exc):
                raise
            wal = path.with_name(path.name + "-wal")
            if wal.is_file() and wal.stat().st_size > 0:
                raise LedgerError(
                    f"ledger {shown!r} has writes in {str(wal)!r} that SQLite cannot read "
                    "without creating its -shm file, and the directory is not writable: copy "
                    "the ledger and its -wal file to a writable directory",
                    code="ledger-unreadable",
                ) from exc
            conn, version = _open_uri(uri + "?mode=ro&immutable=1", busy_timeout_s)
    except sqlite3.Error as exc:
        raise LedgerError(
            f"cannot read ledger {shown!r}: {exc}", code="ledger-unreadable"
        ) from exc
    try:
        _check_schema(conn, shown, version)
    except BaseException:
        conn.close()
        raise
    return conn


def _check_schema(conn: sqlite3.Connection, shown: str, version: int) -> None:
    """Refuse a file that is not a stableprompt ledger this version can read, never migrating.

    Raises:
        LedgerError: Code ``ledger-not-a-ledger`` or ``ledger-schema-newer``.
    """
    try:
        has_calls = has_table(conn, "calls")
        columns = [row[1] for row in conn.execute('PRAGMA table_info("calls")')]
    except sqlite3.Error as exc:
        raise LedgerError(f"cannot read ledger {shown!r}: {exc}", code="ledger-unreadable") from exc
    if version > SCHEMA_VERSION:
        raise LedgerError(
            f"ledger {shown!r} has schema version {version}, newer than this stableprompt knows "
            f"({SCHEMA_VERSION}); upgrade stableprompt",
            code="ledger-schema-newer",
        )
    if version == 0:
        found = "an unrelated 'calls' table" if has_calls else "no 'calls' table"
        raise LedgerError(
            f"{shown!r} is not a stableprompt ledger (schema version 0, {found})",
            code="ledger-not-a-ledger",
        )
    missing = [column for column in COLUMNS.values()
               if column not in columns and ADDED_COLUMNS.get(column, 1) <= version]
    if missing:
        what = "no 'calls' table" if not has_calls else (
            f"table 'calls' lacks {len(missing)} ledger columns, e.g. {missing[0]!r}"
        )
        raise LedgerError(
            f"{shown!r} is not a stableprompt ledger (schema version {version}, {what})",
            code="ledger-not-a-ledger",
        )
