"""The pending journal: records handed to a background writer, durable before they are stored.

``stableprompt proxy`` and the ``record_in_thread`` clients and transports finish calls on a
worker thread (``_recording._deferred``): between a response's end and its row's commit, the
call lives only in the worker's queue, and a SIGKILL would lose it. So before a call is
queued, a *provisional* record of it (what is known without analysis, verdict ``unknown``,
the record id its final row will have) is appended to a journal file next to the database;
once the worker stored the final record, the line is settled. A journal whose writer died
is an ordinary spill source: :meth:`Ledger.replay_spill <stableprompt.Ledger.replay_spill>`
imports it (the proxy does at startup), last, so a final record already stored or spilled
wins (rows are idempotent by ``record_id``: ``INSERT OR
IGNORE``) and nothing is imported twice.

Files: ``<db>.pending.<pid>.<ns>.jsonl`` (mode 0600), one JSON line per record (pydantic's
serialization, or the JSON object of a provisional row written as it is: both are what
:meth:`UsageRecord.from_json` reads; a provisional row's usage may still be as received,
parsed when it is read: ``_provisional``), records scrubbed by the recorder
that made them, content dropped unless the ledger has ``store_content``; a replay prepares
them again as every write does. The writing process holds an exclusive ``flock`` on each
of its files for as long as it has them open, which is how a replay tells a live journal
(skipped) from an orphan (the lock is released by the kernel when the process dies, even by
SIGKILL). A file is created under a hidden name, locked, then renamed into place, so a replay
never sees it unlocked. When every line of a file is settled it is truncated to zero (the
current file) or deleted (a file sealed at :data:`SEGMENT_BYTES`), so the journal stays small
under load and empty when idle; :meth:`PendingJournal.close` deletes settled files and leaves
the others (lines whose storing failed) for the next replay.

Cost: one ``write(2)`` of about 1 KB per call on the caller's thread, no ``fsync``: like the
ledger's WAL with ``synchronous=NORMAL``, a line survives the process being killed (it is in
the kernel's page cache), not a power loss. Without POSIX ``flock`` (Windows) there is no
journal (a replay could not tell a live one).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .._canonical import wire_json
from ._spill import describe
from ._usage_record import UsageRecord

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["SEGMENT_BYTES", "PendingJournal", "Segment", "orphaned_journals"]

_log = logging.getLogger("stableprompt.ledger")

SEGMENT_BYTES = 4 * 1024 * 1024
"""Size at which a journal file is sealed and a new one started (bytes)."""


def _pattern(db_path: Path) -> re.Pattern[str]:
    return re.compile(re.escape(db_path.name) + r"\.pending\.\d+\.\d+\.jsonl")


def orphaned_journals(db_path: Path) -> list[Path]:
    """The journal files of ``db_path`` whose writer is gone (no process holds their lock),
    oldest first; a file another replay has moved aside is found by that replay."""
    if fcntl is None:  # pragma: no cover - Windows
        return []
    pattern = _pattern(db_path)
    try:
        names = sorted(n for n in os.listdir(db_path.parent) if pattern.fullmatch(n))
    except OSError:
        return []
    found: list[Path] = []
    for name in names:
        path = db_path.parent / name
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # its writer is alive
        finally:
            os.close(fd)  # releases the probe's lock
        found.append(path)
    return found


def _fields_line(fields: Mapping[str, Any], *, keep_content: bool) -> bytes:
    """The journal line of a record given as its JSON object (``content`` dropped unless
    ``keep_content``)."""
    if not keep_content and "content" in fields:
        fields = {name: value for name, value in fields.items() if name != "content"}
    return wire_json(fields) + b"\n"


class Segment:
    """One journal file: its descriptor (holding the lock), size and unsettled lines."""

    __slots__ = ("fd", "outstanding", "path", "size")

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path
        self.size = 0
        self.outstanding = 0


class PendingJournal:
    """The journal of one writing process for one ledger (module docstring); thread-safe.

    Args:
        db_path: Absolute database path (the journal lives next to it).
        prepare: The ledger's content rule for a record (``Ledger._without_content``).
        segment_bytes: Size at which a file is sealed (bytes).

    Nothing here raises: a journal that cannot be written is announced once (log warning)
    and :meth:`append` returns ``None`` (the call is then as before: queued only).
    """

    def __init__(self, db_path: Path, prepare: Callable[[UsageRecord], UsageRecord], *,
                 segment_bytes: int = SEGMENT_BYTES) -> None:
        self.db_path = db_path
        self._prepare = prepare
        # the content rule as ``prepare`` states it, for records handed over as JSON objects
        self._keeps_content = prepare(UsageRecord(wire_format="unknown", content="-")
                                      ).content is not None
        self._segment_bytes = segment_bytes
        self._lock = threading.Lock()
        self._current: Segment | None = None
        self._open: set[Segment] = set()
        self._closed = fcntl is None
        self._warned = False

    def _warn(self, what: str, exc: BaseException) -> None:
        if not self._warned:
            self._warned = True
            _log.warning("pending journal of ledger %s %s (%s); queued records are lost if "
                         "the process is killed", self.db_path, what, describe(exc))

    def _new_segment(self) -> Segment | None:
        """A new locked file in place (caller holds the lock), ``None`` if it cannot be made."""
        assert fcntl is not None
        name = f"{self.db_path.name}.pending.{os.getpid()}.{time.time_ns()}.jsonl"
        final = self.db_path.with_name(name)
        hidden = self.db_path.with_name(f".{name}.new")
        flags = (os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL
                 | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            fd = os.open(hidden, flags, 0o600)
        except OSError as exc:
            self._warn("cannot be created", exc)
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(hidden, final)
        except OSError as exc:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(hidden)
            self._warn("cannot be created", exc)
            return None
        segment = Segment(fd, final)
        self._open.add(segment)
        return segment

    def append(self, record: UsageRecord | Mapping[str, Any]) -> Segment | None:
        """Write ``record``'s line; returns the ticket to :meth:`settle` once the record is
        stored, or ``None`` when nothing was written (journal closed or failing).

        ``record`` must be scrubbed already (:func:`~._usage_record.scrubbed`, as every
        record the recorder makes is): ``prepare`` only applies the ledger's content rule.
        It may be given as the JSON object of a record instead (what
        :meth:`UsageRecord.from_json` reads; the provisional row of a call, made on the
        caller's thread, ``_recording._unanalysed.provisional_fields``): written as it is,
        without building the record; the replay validates it (a line it rejects is
        quarantined, with a warning, as any spilled line)."""
        if self._closed:
            return None
        try:
            if isinstance(record, UsageRecord):  # pydantic's own JSON (no canonical form)
                line = self._prepare(record).model_dump_json().encode() + b"\n"
            else:
                line = _fields_line(record, keep_content=self._keeps_content)
        except Exception as exc:
            self._warn("cannot serialize a record", exc)
            return None
        with self._lock:
            if self._closed:
                return None
            segment = self._current
            if segment is None:
                segment = self._current = self._new_segment()
                if segment is None:
                    return None
            try:
                view = memoryview(line)
                while view:
                    written = os.write(segment.fd, view)
                    if written <= 0:
                        raise OSError(f"write returned {written}")
                    view = view[written:]
            except OSError as exc:
                with contextlib.suppress(OSError):  # never half a line
                    os.ftruncate(segment.fd, segment.size)
                self._warn("cannot be written", exc)
                return None
            segment.size += len(line)
            segment.outstanding += 1
            if segment.size >= self._segment_bytes:
                self._current = None  # sealed: deleted once its lines are settled
            return segment

    def settle(self, segment: Segment) -> None:
        """The record of one :meth:`append` is stored (or spilled): its line is obsolete."""
        with self._lock:
            segment.outstanding -= 1
            if segment.outstanding > 0 or segment not in self._open:
                return
            try:
                if segment is self._current:
                    os.ftruncate(segment.fd, 0)
                    segment.size = 0
                else:
                    self._drop(segment)
            except OSError as exc:
                self._warn("cannot be truncated", exc)

    def _drop(self, segment: Segment) -> None:
        """Delete a settled file (caller holds the lock); unlinked before its lock goes, so
        no replay reads it."""
        self._open.discard(segment)
        try:
            os.unlink(segment.path)
        finally:
            os.close(segment.fd)

    def close(self) -> None:
        """Delete the settled files, close the others (left for the next replay); later
        appends write nothing. Idempotent."""
        with self._lock:
            self._closed = True
            self._current = None
            for segment in list(self._open):
                try:
                    if segment.outstanding <= 0:
                        self._drop(segment)
                    else:
                        self._open.discard(segment)
                        os.close(segment.fd)
                except OSError as exc:
                    self._warn("cannot be closed", exc)
