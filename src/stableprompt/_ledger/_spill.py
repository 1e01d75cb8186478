"""Spill files: where ledger records go when the database will not take them.

A record the database refused is appended as one JSON line to ``<db>.spill.jsonl`` next to
the database, else to a spill file in a user-writable fallback directory, else kept in memory
(:attr:`SpillFiles.unflushed`). Each target is announced once with a
:class:`LedgerSpillWarning` (and a log line). :meth:`SpillFiles.replay` hands the records back
to the database (the ledger's ``replay_spill``).

Concurrency: appends take an exclusive POSIX advisory lock (``flock``) and re-check that the
file was not renamed away meanwhile; a replay renames the file aside first, so writers that
append during a replay start a new file and nothing is imported twice or lost. Files are
created with mode 0600 (directories 0700).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import tempfile
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

from .._canonical import canonical_json
from .._exceptions import LedgerError, LedgerSpillWarning
from .._redact import redact
from ._provisional import with_parsed_usage
from ._usage_record import UsageRecord

try:  # POSIX advisory locks keep spill appends and replays from racing; absent on Windows.
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "SpillFiles",
    "WriteOutcome",
    "append_line",
    "describe",
]

_log = logging.getLogger("stableprompt.ledger")

Insert = Callable[[list[UsageRecord]], list[tuple[UsageRecord, str]]]
"""Commits the storable records of a batch; returns the others with the reason."""

WriteOutcome = Literal["committed", "spilled", "unflushed"]
"""Where :meth:`Ledger.write` put the record: the database, a spill file, or memory."""

_RECENT_PER_LINEAGE = 32


def describe(exc: BaseException | None) -> str:
    """``"<class>: <message>"`` of an error, scrubbed of key-shaped strings."""
    if exc is None:
        return "unknown error"
    return redact(f"{type(exc).__name__}: {exc}")


def _default_fallback_dirs() -> list[Path]:
    dirs: list[Path] = []
    with contextlib.suppress(RuntimeError, KeyError):
        dirs.append(Path.home() / ".cache" / "stableprompt" / "spill")
    uid = getattr(os, "getuid", lambda: "user")()
    dirs.append(Path(tempfile.gettempdir()) / f"stableprompt-spill-{uid}")
    return dirs


def _write_whole(fd: int, data: bytes) -> None:
    """Write all of ``data`` at the end of ``fd`` or nothing: a short or failed write (a full
    disk) is truncated away again, so the file never holds half a line.

    Raises:
        OSError: the write failed (the file is back at its previous size).
    """
    size = os.fstat(fd).st_size
    view = memoryview(data)
    try:
        while view:
            written = os.write(fd, view)
            if written <= 0:
                raise OSError(f"write returned {written}")
            view = view[written:]
        os.fsync(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)
        raise


def append_line(path: Path, line: bytes) -> None:
    """Append one line to ``path`` (created 0600), atomically w.r.t. other appenders/replays,
    whole or not at all (:func:`_write_whole`).

    Raises:
        OSError: The file cannot be opened or written, or kept being renamed away.
    """
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(5):
        fd = os.open(path, flags, 0o600)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:  # a replay may have renamed the file away while we waited
                    same = os.stat(path).st_ino == os.fstat(fd).st_ino
                except FileNotFoundError:
                    same = False
                if not same:
                    continue
            _write_whole(fd, line + b"\n")
            return
        finally:
            os.close(fd)
    raise OSError(f"spill file {path} kept moving while appending")


def _why(exc: ValueError) -> str:
    """One line naming the field and the problem of an invalid spill line (pydantic's first
    error: ``turn: Input should be a valid integer``)."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
            where = ".".join(str(part) for part in first.get("loc", ())) or "line"
            return redact(f"{where}: {first.get('msg', 'invalid')}")
        except Exception:  # not pydantic's shape: fall back to the message
            pass
    return describe(exc).splitlines()[0]


def _glob_escape(name: str) -> str:
    """Escape ``*?[`` in a file name for ``Path.glob``."""
    return re.sub(r"([*?\[])", r"[\1]", name)


class SpillFiles:
    """The spill targets of one database, and the records spilled since the last replay.

    Not thread-safe by itself: the ledger calls it under its own lock.

    Args:
        db_path: Absolute database path (for PostgreSQL, the local path its files are named
            after: ``Backend.anchor``).
        shown: How messages name the ledger (default ``db_path``; a redacted URL).
        fallback_dir: Directory for the spill file when the database's own directory is not
            writable; default ``~/.cache/stableprompt/spill``, then
            ``<tempdir>/stableprompt-spill-<uid>``.

    Attributes:
        path: ``<db>.spill.jsonl`` next to the database.
        unflushed: Records no storage would take (last resort).
    """

    def __init__(self, db_path: Path, fallback_dir: str | os.PathLike[str] | None, *,
                 shown: str | None = None) -> None:
        self.db_path = db_path
        self.shown = shown or str(db_path)
        self.path = db_path.with_name(db_path.name + ".spill.jsonl")
        self._fallback_dirs = (
            [Path(fallback_dir)] if fallback_dir is not None else _default_fallback_dirs()
        )
        tag = hashlib.sha256(str(db_path).encode("utf-8")).hexdigest()[:16]
        self._fallback_name = f"{tag}.{db_path.name}.spill.jsonl"
        self.unflushed: list[UsageRecord] = []
        self._warned: set[str] = set()
        self._recent: dict[str, deque[UsageRecord]] = {}

    def targets(self) -> list[Path]:
        """Spill files in order of preference: next to the database, then the fallbacks."""
        return [self.path, *(d / self._fallback_name for d in self._fallback_dirs)]

    def recent(self, lineage: str) -> list[UsageRecord]:
        """Records of ``lineage`` spilled (or kept in memory) since the last replay, newest
        first (at most 32)."""
        return sorted(self._recent.get(lineage, ()), key=lambda r: r.ts_utc, reverse=True)

    def spill(self, record: UsageRecord, cause: BaseException) -> WriteOutcome:
        """Put ``record`` in the first writable spill file, else in :attr:`unflushed`; warn
        once per target. Never raises."""
        if record.lineage is not None:
            kept = self._recent.setdefault(record.lineage, deque(maxlen=_RECENT_PER_LINEAGE))
            kept.append(record)
        try:
            line: bytes | None = record.to_json()
        except Exception as exc:  # e.g. a count past 64 bits: no file can hold it as JSON
            line = None
            why = f"the record cannot be serialized ({describe(exc)})"
        else:
            why = "no spill file is writable"
        if line is not None:
            for target in self.targets():
                try:
                    if target.parent != self.db_path.parent:
                        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                    append_line(target, line)
                except Exception as exc:
                    _log.debug("ledger spill to %s failed: %s", target, describe(exc))
                    continue
                self._warn_once(
                    str(target),
                    f"ledger {self.shown} write failed ({describe(cause)}); "
                    f"record spilled to {target}; run Ledger.replay_spill() to import it",
                )
                return "spilled"
        self.unflushed.append(record)
        self._warn_once(
            f"<memory>{why}",
            f"ledger {self.shown} write failed ({describe(cause)}) and {why}; record "
            f"{record.record_id} is kept in memory only, in Ledger.unflushed (lost at exit "
            "unless replayed)",
        )
        return "unflushed"

    def _warn_once(self, key: str, message: str) -> None:
        if key in self._warned:
            return
        self._warned.add(key)
        _log.warning("%s", message)
        try:
            warnings.warn(message, LedgerSpillWarning, stacklevel=4)
        except Exception:  # warnings configured as errors must not break the user's call
            _log.debug("LedgerSpillWarning raised as an error; suppressed")

    def quarantine_path(self, source: Path) -> Path:
        """Where bad lines of spill file ``source`` are kept: ``<source stem>.quarantine.jsonl``
        beside it (never read by a replay)."""
        return source.with_name(source.name.removesuffix(".jsonl") + ".quarantine.jsonl")

    def replay(self, insert: Insert, journals: Iterable[Path] = ()) -> int:
        """Hand :attr:`unflushed`, every spill file's records and then those of ``journals``
        (orphaned pending journals, ``_journal``: last, so a record already stored or spilled
        wins over its provisional line) to ``insert``, which commits
        the storable ones and returns the others with the reason (or raises: nothing is
        deleted then). A spill file is deleted once its records are committed; a line that is
        not a record, or a record the ledger can never store, is moved to the
        :meth:`quarantine_path` file with its source and line number (and a warning says so)
        instead of blocking every record behind it.

        Returns:
            Number of records committed (already-stored ids included).

        Raises:
            LedgerError: A spill file cannot be moved aside (code ``ledger-replay``), a bad line
                cannot be written to quarantine (``ledger-quarantine``); ``insert``'s errors.
        """
        count = 0
        pending = list(self.unflushed)
        if pending:
            rejected = insert(pending)
            bad = {id(record) for record, _ in rejected}
            if rejected:
                self._quarantine(self.quarantine_path(self.path), [
                    (None, record.record_id, reason, record.model_dump_json().encode())
                    for record, reason in rejected], "memory")
            del self.unflushed[: len(pending)]
            count += len(pending) - len(bad)
        for source in [*self.targets(), *journals]:
            count += self._replay_file(source, insert)
        self._recent.clear()
        return count

    def _quarantine(self, target: Path,
                    bad: list[tuple[int | None, str | None, str, bytes]], source: str) -> None:
        """Append each bad line (with its source, line number and reason) to ``target``.

        Raises:
            LedgerError: ``target`` cannot be written (code ``ledger-quarantine``): the spill
                file is then kept, so the lines are never nowhere.
        """
        try:
            for number, record_id, reason, text in bad:
                append_line(target, canonical_json({
                    "line": number, "reason": reason, "record_id": record_id,
                    "source": source, "text": redact(text.decode("utf-8", "replace"))}))
        except OSError as exc:
            raise LedgerError(f"cannot write spill quarantine {target}: {exc}; the spill file "
                              f"{source} is kept", code="ledger-quarantine") from exc
        lines = ", ".join("memory" if n is None else str(n) for n, *_ in bad[:10])
        self._warn_once(
            f"quarantine:{source}:{time.time_ns()}",
            f"{len(bad)} spilled line(s) of {source} could not be imported (line {lines}: "
            f"{bad[0][2]}); kept in {target}, the rest imported",
        )

    def _replay_file(self, source: Path, insert: Insert) -> int:
        candidates = sorted(source.parent.glob(_glob_escape(source.name) + ".replaying.*"))
        if source.exists():
            moved = source.with_name(f"{source.name}.replaying.{os.getpid()}.{time.time_ns()}")
            try:
                os.rename(source, moved)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise LedgerError(
                    f"cannot move spill file {source} aside for replay: {exc}",
                    code="ledger-replay",
                ) from exc
            else:
                candidates.append(moved)
        count = 0
        for path in candidates:
            try:
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            except FileNotFoundError:
                continue  # another replay took it
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)  # wait for appenders that got in first
                with os.fdopen(os.dup(fd), "rb") as handle:
                    lines = handle.read().splitlines()
                if not path.exists():
                    continue
                records: list[UsageRecord] = []
                numbers: dict[int, int] = {}  # id(record) -> line number
                bad: list[tuple[int | None, str | None, str, bytes]] = []
                for number, line in enumerate(lines, start=1):
                    if not line.strip():
                        continue
                    try:
                        record = with_parsed_usage(UsageRecord.from_json(line))
                    except ValueError as exc:
                        bad.append((number, None, f"not a valid record: {_why(exc)}", line))
                        continue
                    records.append(record)
                    numbers[id(record)] = number
                rejected = insert(records)
                bad += [(numbers[id(record)], record.record_id, reason,
                         record.model_dump_json().encode()) for record, reason in rejected]
                if bad:
                    bad.sort(key=lambda item: item[0] or 0)
                    self._quarantine(self.quarantine_path(source), bad, str(source))
                path.unlink()
                count += len(records) - len(rejected)
            finally:
                os.close(fd)
        return count


