"""Mappings that keep at most a cap of entries in memory and move the rest to a temporary
SQLite file (issue 30: ``stableprompt report`` in memory that does not grow with calls).

The streaming report remembers two things whose number grows with the ledger: every call's size
and send time by record id (``_ceilings``: a later call may name any earlier one as its
predecessor) and the totals of every session (``_totals.ScenarioReport.sessions``). Each is
kept here: at most ``cap`` entries stay in memory; when there are more, the oldest (in order of
their last set: a set moves a key to the end, a lookup does not) are written out in one batch
(``cap // 8``, at least one; in key order, so the inserts walk the file's B-tree once) as bytes
(``pickle``, or the map's own codec: :func:`fields_codec`) to a private temporary SQLite
database, and a key that misses memory is looked up there (then read back into memory and
deleted from the file). So a lookup gives the same value whether or not its entry was moved
out, and nothing is forgotten. A filter of the keys moved out (:data:`SPILL_FILTER_BYTES`, a
Bloom filter) answers most lookups of a key never moved out (a new session's) without reading
the file.

The file is SQLite's own temporary database (``sqlite3.connect("")``): created in the system
temporary directory (``SQLITE_TMPDIR``, else ``TMPDIR``, else ``/var/tmp``, ``/usr/tmp``,
``/tmp``) only once its pages outgrow :data:`SPILL_CACHE_KIB`, unlinked by SQLite right after
it is opened (on Windows: deleted when closed), so it goes when the connection is closed
(:meth:`SpillMap.close`, or the map is collected) and when the process dies, killed or not.
Nothing is written while a map holds at most ``cap`` entries: ``cap=None`` never spills.
When SQLite cannot write or read the file (its directory's disk full: ``SQLITE_FULL``, an I/O
error), the map raises :class:`~stableprompt.ConfigurationError` (``report-spill-failed``,
naming the directory) and closes the file; every later use raises it again (the entries of
the failed batch are lost, so no answer is given without them).

Values are encoded when moved out: a value read back is an equal copy, not the same object.
Mutate a value only right after :meth:`SpillMap.get` or setting it (before the next set or
get of the same map can move it out), as the report's pass does.

Two kinds, one mechanism: :class:`SpillMap` (lookups by key: the ceilings) and
:class:`OrderedSpillMap` (keys ``(part, key)`` in order of first set, counted and listed per
part: the totals per session of each scenario, one memory budget for all scenarios), read
per part through :class:`SpillView` (a read-only :class:`~collections.abc.Mapping`).
"""

from __future__ import annotations

import heapq
import itertools
import marshal
import operator
import os
import pickle
import sqlite3
from collections.abc import Callable, Hashable, ItemsView, Iterator, KeysView, Mapping, ValuesView
from dataclasses import fields
from typing import Any, Generic, NoReturn, TypeVar

from .._exceptions import ConfigurationError

__all__ = ["READ_ROWS", "SPILL_CACHE_KIB", "SPILL_FILTER_BYTES", "OrderedSpillMap", "SpillMap",
           "SpillView", "fields_codec"]

SPILL_CACHE_KIB = 4096
"""SQLite page cache of one spill file (KiB): the memory a spill file itself takes at most;
its pages past this are written to the file."""
SPILL_FILTER_BYTES = 1 << 20
"""Bytes of the filter a spill map keeps of the keys it moved out (a Bloom filter, 2 bits a
key, made at the first spill; a power of two): a key whose bits are not both set was never
moved out, so its lookup does not read the file. Fixed: past ~2 million keys moved out more
lookups read the file (a false match costs a query), none is answered wrong."""

READ_ROWS = 1024
"""Rows read from a spill file at a time while listing (decoded values held at once)."""

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")
_T = TypeVar("_T")


def _pickled(value: Any) -> bytes:
    return pickle.dumps(value, pickle.HIGHEST_PROTOCOL)


def fields_codec(cls: type[_T]) -> tuple[Callable[[_T], bytes], Callable[[bytes], _T]]:
    """``(encode, decode)`` of a dataclass whose fields hold only what ``marshal`` writes
    (``None``, bools, ints, floats, strings, and tuples, lists and dicts of them): its field
    values as one ``marshal``-ed tuple, read back through ``cls(*values)`` (several times
    faster than pickling a slotted dataclass, whose ``__getstate__`` lists its fields each
    time). Both are methods of a module-level object, so a map using them pickles (a
    :func:`~._summary.summarize` summary's sessions)."""
    codec = _FieldsCodec(cls)
    return codec.encode, codec.decode


class _FieldsCodec(Generic[_T]):
    """:func:`fields_codec`'s pair (picklable: a class, its fields' getter)."""

    def __init__(self, cls: type[_T]) -> None:
        self._cls = cls
        self._values = operator.attrgetter(*(f.name for f in fields(cls)))  # type: ignore[arg-type]

    def encode(self, value: _T) -> bytes:
        return marshal.dumps(self._values(value))

    def decode(self, data: bytes) -> _T:
        return self._cls(*marshal.loads(data))


_SCHEMA = ("CREATE TABLE spill (part TEXT NOT NULL, k TEXT NOT NULL, seq INTEGER NOT NULL, "
           "v BLOB NOT NULL, PRIMARY KEY (part, k)) WITHOUT ROWID")
_ORDER = "CREATE INDEX spill_order ON spill (part, seq)"


class SpillMap(Generic[_K, _V]):
    """Values by key, at most ``cap`` in memory, the rest in a temporary SQLite file (module
    docstring). Lookups only: :meth:`get`, ``map[key] = value``; no length, no listing.

    Args:
        cap: Entries kept in memory (``None``: all, never spills). At least 1.
        key_text: The key as text in the file (injective; default ``str`` for text keys;
            ``repr`` for tuples of strings).
        encode: A value as bytes in the file (default ``pickle``); ``decode`` reads it back
            (an equal value).
    """

    def __init__(self, cap: int | None, *, key_text: Callable[[_K], str] = str,
                 encode: Callable[[_V], bytes] = _pickled,
                 decode: Callable[[bytes], _V] = pickle.loads) -> None:
        if cap is not None and cap < 1:
            raise ValueError(f"a spill map keeps at least 1 entry in memory, got cap={cap}")
        self.cap = cap
        self._batch = 0 if cap is None else max(1, cap // 8)
        self._key_text = key_text
        self._encode, self._decode = encode, decode
        self._mem: dict[_K, _V] = {}
        self._db: sqlite3.Connection | None = None
        self.spilled = 0
        """Entries written out so far (0: the file was never opened)."""
        self.read_back = 0
        """Entries read back from the file so far."""
        self._gone = False
        self._broken: str | None = None  # why the file failed (then every use raises)
        self._filter: bytearray | None = None

    # -- the file

    def _conn(self) -> sqlite3.Connection:
        db = self._db
        if db is None:
            db = self._db = sqlite3.connect("", isolation_level=None)
            db.execute("PRAGMA journal_mode=OFF")
            db.execute("PRAGMA synchronous=OFF")
            db.execute(f"PRAGMA cache_size=-{SPILL_CACHE_KIB}")
            db.execute(_SCHEMA)
            if isinstance(self, OrderedSpillMap):
                db.execute(_ORDER)
        return db

    @property
    def closed(self) -> bool:
        """The file is closed (or was never opened)."""
        return self._db is None

    def close(self) -> None:
        """Close and so delete the file (idempotent). A map that had moved entries out is
        then unusable (:meth:`get` and listing raise ``RuntimeError``: never a partial
        answer); one that had not stays readable."""
        db, self._db = self._db, None
        if db is not None:
            db.close()
        if self.spilled:
            self._gone = True

    def _fail(self, exc: sqlite3.Error) -> NoReturn:
        """The file failed: close it, remember why, raise (module docstring)."""
        where = (os.environ.get("SQLITE_TMPDIR") or os.environ.get("TMPDIR")
                 or "/var/tmp, /usr/tmp or /tmp")
        self._broken = (f"the report's temporary file (SQLite's, in {where}) failed: {exc}; "
                        "free space there or set SQLITE_TMPDIR to a directory with room")
        self.close()
        self._check()
        raise AssertionError("unreachable")  # pragma: no cover

    def _check(self) -> None:
        if self._broken is not None:
            raise ConfigurationError(self._broken, code="report-spill-failed")
        if self._gone:
            raise RuntimeError("this spill map was closed: the entries it had moved to its "
                               "temporary file are gone (read a summary before closing it)")

    def __del__(self) -> None:
        if getattr(self, "_db", None) is not None:  # a failed __init__ has none
            self.close()

    def _part_text(self, key: _K) -> tuple[str, str]:
        return "", self._key_text(key)

    def _seq_of(self, key: _K) -> int:
        return 0

    def _spill(self) -> None:
        """Move the least recently used :attr:`_batch` entries to the file (one transaction)."""
        self._check()
        mem = self._mem
        keys = list(itertools.islice(mem, self._batch))
        rows = []
        encode = self._encode
        for key in keys:
            part, text = self._part_text(key)
            rows.append((part, text, self._seq_of(key), encode(mem.pop(key))))
        self._forget_seq(keys)
        seen = self._filter
        if seen is None:
            seen = self._filter = bytearray(SPILL_FILTER_BYTES)
        for key in keys:
            a, b = _filter_bits(key, seen)
            seen[a >> 3] |= 1 << (a & 7)
            seen[b >> 3] |= 1 << (b & 7)
        rows.sort()  # (part, key) unique: in the B-tree's order, each page visited once
        self.spilled += len(rows)
        try:
            db = self._conn()
            db.execute("BEGIN")
            db.executemany("INSERT OR REPLACE INTO spill VALUES (?, ?, ?, ?)", rows)
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            self._fail(exc)

    def _forget_seq(self, keys: list[_K]) -> None:
        pass

    def _take(self, key: _K) -> tuple[int, _V] | None:
        """``(seq, value)`` of ``key`` from the file, deleted there; ``None``: not there."""
        db = self._db
        if db is None:
            self._check()
            return None
        if not self._maybe_spilled(key):
            return None
        part, text = self._part_text(key)
        try:
            row = db.execute("SELECT seq, v FROM spill WHERE part = ? AND k = ?",
                             (part, text)).fetchone()
            if row is None:
                return None
            db.execute("DELETE FROM spill WHERE part = ? AND k = ?", (part, text))
        except sqlite3.Error as exc:
            self._fail(exc)
        self.read_back += 1
        return row[0], self._decode(row[1])

    def _maybe_spilled(self, key: Hashable) -> bool:
        """``False``: ``key`` was never moved out (the filter); ``True``: it may have been."""
        seen = self._filter
        if seen is None:
            return False
        a, b = _filter_bits(key, seen)
        return bool(seen[a >> 3] & (1 << (a & 7)) and seen[b >> 3] & (1 << (b & 7)))

    # -- the mapping

    def get(self, key: _K) -> _V | None:
        """The value of ``key`` (``None``: never set), from memory or the file (read back
        into memory, as the last set, when it was moved out)."""
        value = self._mem.get(key)
        if value is not None:
            return value
        taken = self._take(key)
        if taken is None:
            return None
        self._put(key, taken[1], taken[0])
        return taken[1]

    def __setitem__(self, key: _K, value: _V) -> None:
        """Set ``key`` (it becomes the most recently used). A key moved out earlier keeps
        its value in the file until this one is moved out (``INSERT OR REPLACE``): memory
        is read first, so the later value wins."""
        mem = self._mem
        if mem.pop(key, None) is None:
            self._new(key)
        mem[key] = value
        if self.cap is not None and len(mem) > self.cap:
            self._spill()

    def _new(self, key: _K) -> None:
        pass

    def _put(self, key: _K, value: _V, seq: int) -> None:
        self._mem[key] = value
        if self.cap is not None and len(self._mem) > self.cap:
            self._spill()


class OrderedSpillMap(SpillMap[tuple[str, str], _V]):
    """A :class:`SpillMap` keyed by ``(part, key)`` that also keeps each key's order of first
    set and counts and lists the entries of each part in that order (:meth:`items`,
    :meth:`count`; :class:`SpillView`: one part as a read-only mapping)."""

    def __init__(self, cap: int | None, *, encode: Callable[[_V], bytes] = _pickled,
                 decode: Callable[[bytes], _V] = pickle.loads) -> None:
        super().__init__(cap, encode=encode, decode=decode)
        self._seqs: dict[tuple[str, str], int] = {}
        self._next = 0
        self._counts: dict[str, int] = {}

    def _part_text(self, key: tuple[str, str]) -> tuple[str, str]:
        return key

    def _seq_of(self, key: tuple[str, str]) -> int:
        return self._seqs[key]

    def _forget_seq(self, keys: list[tuple[str, str]]) -> None:
        seqs = self._seqs
        for key in keys:
            del seqs[key]

    def _new(self, key: tuple[str, str]) -> None:
        """``key`` is not in memory: its order is the one it had in the file, else the next."""
        taken = self._take(key)
        if taken is None:
            self._seqs[key] = self._next
            self._next += 1
            self._counts[key[0]] = self._counts.get(key[0], 0) + 1
        else:
            self._seqs[key] = taken[0]

    def _put(self, key: tuple[str, str], value: _V, seq: int) -> None:
        self._seqs[key] = seq
        super()._put(key, value, seq)

    def count(self, part: str) -> int:
        """Keys set in ``part``."""
        return self._counts.get(part, 0)

    def peek(self, part: str, key: str) -> _V | None:
        """The value of ``(part, key)`` without making it the most recently used (a copy when
        it was moved out; nothing moves)."""
        value = self._mem.get((part, key))
        if value is not None or self._db is None or not self._maybe_spilled((part, key)):
            self._check()
            return value
        try:
            row = self._db.execute("SELECT v FROM spill WHERE part = ? AND k = ?",
                                   (part, key)).fetchone()
        except sqlite3.Error as exc:
            self._fail(exc)
        return None if row is None else self._decode(row[0])

    def items(self, part: str, *, values: bool = True) -> Iterator[tuple[str, Any]]:
        """``(key, value)`` of ``part`` in order of first set, those moved out read from the
        file as they are listed (copies); with ``values=False`` ``(key, None)``, nothing
        decoded. Nothing moves while listing; setting entries meanwhile is not supported."""
        self._check()
        held = sorted((self._seqs[k], k[1], v) for k, v in self._mem.items() if k[0] == part)
        in_memory = ((seq, key, value if values else None) for seq, key, value in held)
        if self._db is None:
            for _, key, value in in_memory:
                yield key, value
            return
        column = "v" if values else "NULL"
        try:
            cursor = self._db.execute(
                f"SELECT seq, k, {column} FROM spill WHERE part = ? ORDER BY seq", (part,))
            decode = self._decode
            from_file = ((seq, key, None if blob is None else decode(blob))
                         for seq, key, blob in _rows(cursor))
            for _, key, value in heapq.merge(in_memory, from_file, key=lambda e: e[0]):
                yield key, value
        except sqlite3.Error as exc:
            self._fail(exc)


    def sorted_keys(self, part: str) -> Iterator[str]:
        """The keys of ``part`` in ascending order (``sorted``'s: by code point, which is
        SQLite's ``BINARY`` order of their UTF-8), those moved out read from the file in its
        key order: the memory held is the entries in memory, not the keys listed. Nothing
        moves while listing; setting entries meanwhile is not supported."""
        self._check()
        held = sorted(k[1] for k in self._mem if k[0] == part)
        if self._db is None:
            yield from held
            return
        try:
            cursor = self._db.execute("SELECT k FROM spill WHERE part = ? ORDER BY k", (part,))
            yield from heapq.merge(held, (row[0] for row in _rows(cursor)))
        except sqlite3.Error as exc:
            self._fail(exc)


def _filter_bits(key: Hashable, seen: bytearray) -> tuple[int, int]:
    """The two bit positions of ``key`` in the filter ``seen`` (a power of two bytes)."""
    mask = len(seen) * 8 - 1
    h = hash(key)
    return h & mask, (h >> 23) & mask


def _rows(cursor: sqlite3.Cursor) -> Iterator[tuple[Any, ...]]:
    while rows := cursor.fetchmany(READ_ROWS):
        yield from rows


class SpillView(Mapping[str, _V]):
    """One part of an :class:`OrderedSpillMap` as a read-only mapping: keys in order of first
    set, ``len`` and lookups that never move an entry (:meth:`OrderedSpillMap.peek`).
    :meth:`items` and :meth:`values` read the file once, in order (not one lookup per key).
    Equal to a ``dict`` with the same items (:class:`~collections.abc.Mapping` equality)."""

    def __init__(self, spill: OrderedSpillMap[_V], part: str) -> None:
        self._spill, self._part = spill, part

    def __getitem__(self, key: str) -> _V:
        value = self._spill.peek(self._part, key)
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        for key, _ in self._spill.items(self._part, values=False):
            yield key

    def __len__(self) -> int:
        return self._spill.count(self._part)

    def sorted_keys(self) -> Iterator[str]:
        """Keys in ascending order (:meth:`OrderedSpillMap.sorted_keys`: not all held)."""
        return self._spill.sorted_keys(self._part)

    def items(self) -> ItemsView[str, _V]:
        """``(key, value)`` in order, read in one pass."""
        return _Items(self)

    def values(self) -> ValuesView[_V]:
        """Values in order, read in one pass."""
        return _Values(self)

    def keys(self) -> KeysView[str]:
        """Keys in order."""
        return KeysView(self)

    def __repr__(self) -> str:
        return f"SpillView({self._part!r}, {len(self):,} entries)"


class _Items(ItemsView[str, _V]):
    _mapping: SpillView[_V]

    def __iter__(self) -> Iterator[tuple[str, _V]]:
        view = self._mapping
        yield from view._spill.items(view._part)


class _Values(ValuesView[_V]):
    _mapping: SpillView[_V]

    def __iter__(self) -> Iterator[_V]:
        view = self._mapping
        for _, value in view._spill.items(view._part):
            yield value
