"""Read request captures for ``stableprompt lint``: JSONL, HAR, JSON files and directories.

A capture is what a harness actually sent, from any language or framework. Accepted shapes:

- **JSONL** (one record per line; blank lines are ignored).
- **HAR** (``{"log": {"entries": [...]}}``, from a browser, mitmproxy or Charles): ``POST``
  entries whose ``request.postData.text`` (plain or ``"encoding": "base64"``) is a JSON request
  body; other traffic (GETs, non-JSON bodies) is counted as skipped, never linted.
- **A JSON file**: one record, or an array of records.
- **A directory**: its ``*.json`` files (each one record or an array of records) and
  ``*.jsonl`` / ``*.ndjson`` files (one record per line), in natural name order (``2.json``
  before ``10.json``). Other files and subdirectories are counted as skipped. A file of several
  records (JSONL, a JSON array) is its own group (``CaptureEntry.group``); the single-record
  JSON files together are one group (one request per file is one stream). Lint never pairs
  requests of two groups unless joined (``stableprompt lint DIR --join``).
- Any of these files gzip-compressed, named with ``.gz`` after its kind (``run.jsonl.gz``,
  ``trace.har.gz``): read streaming, the kind from the name before ``.gz``.

A **record** is either a request body (an object with ``messages`` or ``input``) or a wrapper
``{"request": ..., "response": ..., "session": ..., "url": ..., "wire_format": ...}`` where
``request`` is the body (object or JSON text) or an HTTP-like object
``{"url"|"path": ..., "body": <object or JSON text>}``. ``session`` (a string or integer; an
integer is read as its decimal string) says which session the request belongs to; ``url`` /
``path`` help detect the wire format. ``response`` is accepted and ignored.

Every record gets an ``index``: its 0-based position in the capture (JSONL: line number - 1;
HAR: position in ``log.entries``; JSON arrays and directories: running record number), so that
reports point back at the exact line or entry (in a directory, indexes run across its files;
sources keep each file's line numbers). A malformed record (bad JSON, not an object, no
request body) is reported as a :class:`CaptureProblem` with its line number, and reading goes
on: the rest of the capture is still linted.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import gzip
import io
import re
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .._canonical import json_type_name, loads
from .._exceptions import CaptureError
from .._wire._formats import endpoint

__all__ = ["Capture", "CaptureEntry", "CaptureProblem", "Skipped", "iter_capture", "iter_records",
           "read_capture"]

_JSONL_SUFFIXES = (".jsonl", ".ndjson")
_BOM = b"\xef\xbb\xbf"
READ_BUFFER_BYTES = 1 << 20
"""Read buffer of a capture file (bytes): a JSONL line of a long conversation is often
larger than the default 8 KiB, and ``readline`` then gathers it in pieces; with 1 MiB it is
one copy out of the buffer (measured ~3x faster on 110 KB lines)."""


@dataclass(frozen=True, slots=True)
class CaptureEntry:
    """One request read from a capture.

    Attributes:
        index: 0-based position of the record in the capture (JSONL line number - 1, HAR
            entry position, running record number in JSON arrays and directories).
        source: Human location: ``"run.jsonl:12"`` (1-based line), ``"run.har#entries[4]"``,
            ``"dir/0003.json"``, ``"batch.json[2]"``.
        body: The decoded request body (key order as sent).
        line: 1-based line number for JSONL records, else ``None``.
        url_path: URL path the request was sent to (``/v1/messages``), when the capture says.
        session: Session id given by the capture record (``session`` key), else ``None``.
        wire_format: Wire format declared by the capture record (``wire_format`` key), else
            ``None``.
        group: The file of a directory capture the record came from (``dir/a.jsonl``), else
            ``None``. Lint keeps each file's conversations apart unless told to join them.
    """

    index: int
    source: str
    body: Mapping[str, Any]
    line: int | None = None
    url_path: str | None = None
    session: str | None = None
    wire_format: str | None = None
    group: str | None = None


@dataclass(frozen=True, slots=True)
class CaptureProblem:
    """A record that could not be read; the rest of the capture is still linted.

    Attributes:
        source: Human location (as :attr:`CaptureEntry.source`).
        code: Stable slug: ``capture-json`` (not JSON), ``capture-record`` (JSON but not a
            request record), ``capture-shape`` (a body the wire format does not allow),
            ``capture-format`` (wire format unknown).
        message: What was wrong, one line.
        line: 1-based line number for JSONL records, else ``None``.
        index: 0-based record position, when known.
    """

    source: str
    code: str
    message: str
    line: int | None = None
    index: int | None = None

    def __str__(self) -> str:
        return f"{self.source}: {self.message} ({self.code})"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``source, line, index, code, message``."""
        return {"source": self.source, "line": self.line, "index": self.index,
                "code": self.code, "message": self.message}


@dataclass(frozen=True)
class Capture:
    """A whole capture, read eagerly (see :func:`iter_capture` for streaming).

    Attributes:
        path: The capture path as given.
        entries: Requests in capture order.
        problems: Malformed records, in capture order.
        skipped: Items that are not requests and were not linted (HAR traffic other than JSON
            POST bodies, non-JSON files in a directory).
    """

    path: str
    entries: tuple[CaptureEntry, ...]
    problems: tuple[CaptureProblem, ...]
    skipped: int = 0


@dataclass(frozen=True, slots=True)
class Skipped:
    """Marker yielded by :func:`iter_capture` for an item that is not a request."""

    source: str


def read_capture(path: str | Path) -> Capture:
    """Read a whole capture.

    Raises:
        CaptureError: as :func:`iter_capture`.
    """
    entries: list[CaptureEntry] = []
    problems: list[CaptureProblem] = []
    skipped = 0
    for item in iter_capture(path):
        if isinstance(item, CaptureEntry):
            entries.append(item)
        elif isinstance(item, CaptureProblem):
            problems.append(item)
        else:
            skipped += 1
    return Capture(str(path), tuple(entries), tuple(problems), skipped)


def iter_capture(path: str | Path) -> Iterator[CaptureEntry | CaptureProblem | Skipped]:
    """Stream the records of a capture, in capture order.

    JSONL files are read line by line (memory stays bounded by the largest line); HAR and JSON
    files are parsed whole. The kind is chosen by suffix (``.har``, ``.json``, ``.jsonl`` /
    ``.ndjson``) and, for other names, by content: a file whose first non-blank line is not a
    JSON value is parsed as one JSON document (pretty-printed HAR or JSON).

    Yields:
        :class:`CaptureEntry` per request, :class:`CaptureProblem` per malformed record,
        :class:`Skipped` per item that is not a request.

    Raises:
        CaptureError: the path cannot be read (code ``capture-unreadable``), a HAR/JSON
            document is not valid JSON or not a capture (code ``capture-format``), or the
            capture holds nothing at all (code ``capture-empty``). Malformed records inside a
            readable capture are yielded as problems instead.
    """
    return iter_records(path, loads)


def iter_records(path: str | Path, decode: Callable[[bytes], Any]) -> Iterator[
        CaptureEntry | CaptureProblem | Skipped]:
    """:func:`iter_capture` with each JSONL line decoded by ``decode`` (which must return
    what :func:`~stableprompt._canonical.loads` returns for the line, or raise as it does):
    lint decodes a line re-sending its conversation from what is new in it
    (:meth:`stableprompt._lint._linter._Linter.decode`)."""
    p = Path(path)
    if p.is_dir():
        yield from _check_nonempty(p, _iter_directory(p, decode))
        return
    suffix, compressed = _suffix_of(p)
    try:
        handle = (gzip.open(p, "rb") if compressed  # noqa: SIM115 (closed by the with below)
                  else p.open("rb", buffering=READ_BUFFER_BYTES))
    except OSError as exc:
        raise CaptureError(f"cannot read capture {str(p)!r}: {exc.strerror or exc}",
                           code="capture-unreadable") from exc
    except ValueError as exc:  # a NUL byte in the path
        raise CaptureError(f"cannot read capture {str(p)!r}: {exc}",
                           code="capture-unreadable") from exc
    with handle:
        try:
            if suffix in (".har", ".json"):
                yield from _check_nonempty(p, _iter_document(p, _read_all(p, handle)))
            else:
                sniff = suffix not in _JSONL_SUFFIXES
                yield from _check_nonempty(p, _iter_jsonl(p, handle, sniff=sniff,
                                                          decode=decode))
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:  # a damaged .gz
            raise CaptureError(f"cannot read capture {str(p)!r}: not a complete gzip file "
                               f"({exc})", code="capture-unreadable") from exc


def _suffix_of(p: Path) -> tuple[str, bool]:
    """The suffix that names a capture file's kind and whether it is gzip-compressed
    (``run.jsonl.gz``: ``(".jsonl", True)``)."""
    suffix = p.suffix.lower()
    if suffix == ".gz":
        return Path(p.name[:-3]).suffix.lower(), True
    return suffix, False


def _read_all(p: Path, handle: Any) -> bytes:
    try:
        data: bytes = handle.read()
    except OSError as exc:
        raise CaptureError(f"cannot read capture {str(p)!r}: {exc.strerror or exc}",
                           code="capture-unreadable") from exc
    return data


def _check_nonempty(
    p: Path, items: Iterator[CaptureEntry | CaptureProblem | Skipped]
) -> Iterator[CaptureEntry | CaptureProblem | Skipped]:
    """Pass items through; raise ``capture-empty`` when there were none at all."""
    empty = True
    for item in items:
        empty = False
        yield item
    if empty:
        raise CaptureError(f"capture {str(p)!r} is empty: no records", code="capture-empty")


def _iter_jsonl(
    p: Path, handle: Any, *, sniff: bool = True, label: str | None = None,
    decode: Callable[[bytes], Any] = loads,
) -> Iterator[CaptureEntry | CaptureProblem | Skipped]:
    """Records of a JSONL stream (sources ``<label>:<line>``); with ``sniff``, a first line
    that is not JSON makes the whole stream be tried as one JSON document (pretty-printed HAR
    or JSON)."""
    name = label or p.name
    first = True
    lineno = 0
    while True:
        raw = handle.readline()
        if not raw:
            return
        lineno += 1
        line = raw.strip()
        if lineno == 1 and line.startswith(_BOM):
            line = line[len(_BOM):].strip()
        if not line:
            continue
        try:
            value = decode(line)
        except ValueError as exc:
            if first and sniff:
                position = handle.tell()
                handle.seek(0)
                try:
                    doc = loads(handle.read())
                except ValueError:
                    handle.seek(position)
                else:
                    yield from _iter_value(p, doc)
                    return
            first = False
            yield CaptureProblem(f"{name}:{lineno}", "capture-json",
                                 f"line {lineno} is not valid JSON ({_json_reason(exc)})",
                                 line=lineno, index=lineno - 1)
            continue
        if first and isinstance(value, Mapping) and "log" in value:
            first = False
            yield from _iter_har(p, value)
            continue
        first = False
        yield _record(value, index=lineno - 1, source=f"{name}:{lineno}", line=lineno)


def _iter_document(p: Path, data: bytes) -> Iterator[CaptureEntry | CaptureProblem | Skipped]:
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    if not data.strip():
        return
    try:
        doc = loads(data)
    except ValueError as exc:
        if p.suffix.lower() == ".json":  # JSONL under a .json name
            yield from _iter_jsonl(p, io.BytesIO(data), sniff=False)
            return
        raise CaptureError(f"capture {str(p)!r} is not valid JSON ({_json_reason(exc)})",
                           code="capture-format") from exc
    yield from _iter_value(p, doc)


def _iter_value(p: Path, doc: Any) -> Iterator[CaptureEntry | CaptureProblem | Skipped]:
    if isinstance(doc, Mapping) and "log" in doc:
        yield from _iter_har(p, doc)
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield _record(value, index=i, source=f"{p.name}[{i}]")
    else:
        yield _record(doc, index=0, source=p.name)


def _iter_directory(p: Path, decode: Callable[[bytes], Any]) -> Iterator[
        CaptureEntry | CaptureProblem | Skipped]:
    try:
        children = sorted(p.iterdir(), key=lambda c: _natural_key(c.name))
    except OSError as exc:
        raise CaptureError(f"cannot read capture directory {str(p)!r}: {exc.strerror or exc}",
                           code="capture-unreadable") from exc
    index = 0
    for child in children:
        if child.name.startswith("."):
            continue
        source = f"{p.name}/{child.name}"
        suffix, compressed = _suffix_of(child)
        if not child.is_file() or suffix not in (".json", *_JSONL_SUFFIXES):
            yield Skipped(source)
            continue
        try:
            data = child.read_bytes()
            if compressed:
                data = gzip.decompress(data)
        except OSError as exc:
            raise CaptureError(f"cannot read capture file {str(child)!r}: "
                               f"{exc.strerror or exc}", code="capture-unreadable") from exc
        except (EOFError, zlib.error) as exc:
            raise CaptureError(f"cannot read capture file {str(child)!r}: not a complete "
                               f"gzip file ({exc})", code="capture-unreadable") from exc
        if suffix in _JSONL_SUFFIXES:  # renumber: indexes run across the whole directory
            for item in _iter_jsonl(child, io.BytesIO(data), sniff=False, label=source,
                                    decode=decode):
                if isinstance(item, Skipped):
                    yield item
                    continue
                if isinstance(item, CaptureEntry):
                    item = dataclasses.replace(item, group=source)
                yield dataclasses.replace(item, index=index)
                index += 1
            continue
        try:
            doc = loads(data)
        except ValueError as exc:
            yield CaptureProblem(source, "capture-json",
                                 f"file is not valid JSON ({_json_reason(exc)})", index=index)
            index += 1
            continue
        if isinstance(doc, list):
            for i, value in enumerate(doc):
                yield _grouped(_record(value, index=index, source=f"{source}[{i}]"), source)
                index += 1
        else:  # one request per file: the files together are one stream (the directory)
            yield _grouped(_record(doc, index=index, source=source), f"{p.name}/")
            index += 1


def _grouped(item: CaptureEntry | CaptureProblem, group: str) -> CaptureEntry | CaptureProblem:
    return dataclasses.replace(item, group=group) if isinstance(item, CaptureEntry) else item


def _iter_har(p: Path, doc: Mapping[str, Any]) -> Iterator[CaptureEntry | CaptureProblem | Skipped]:
    log = doc.get("log")
    entries = log.get("entries") if isinstance(log, Mapping) else None
    if not isinstance(entries, list):
        raise CaptureError(f"capture {str(p)!r} looks like HAR but has no log.entries list",
                           code="capture-format")
    for i, entry in enumerate(entries):
        source = f"{p.name}#entries[{i}]"
        request = entry.get("request") if isinstance(entry, Mapping) else None
        if not isinstance(request, Mapping):
            yield CaptureProblem(source, "capture-record", "HAR entry has no request object",
                                 index=i)
            continue
        url = request.get("url")
        url_path = urlsplit(url).path if isinstance(url, str) else None
        is_endpoint = url_path is not None and endpoint(url_path) is not None
        post = request.get("postData")
        text = post.get("text") if isinstance(post, Mapping) else None
        if str(request.get("method", "")).upper() != "POST" or not isinstance(text, str):
            yield Skipped(source)
            continue
        raw: str | bytes = text
        if isinstance(post, Mapping) and post.get("encoding") == "base64":
            try:
                raw = base64.b64decode(text, validate=True)
            except (binascii.Error, ValueError):
                yield CaptureProblem(source, "capture-json", "postData.text is not valid base64",
                                     index=i)
                continue
        try:
            body = loads(raw)
        except ValueError as exc:
            if is_endpoint:
                yield CaptureProblem(source, "capture-json",
                                     f"request body is not valid JSON ({_json_reason(exc)})",
                                     index=i)
            else:
                yield Skipped(source)
            continue
        if not _is_body(body) and not is_endpoint:
            yield Skipped(source)
            continue
        yield _record(body, index=i, source=source, url_path=url_path)


def _is_body(value: Any) -> bool:
    """A request body: a history key (``messages``; Responses ``input``; Gemini
    ``contents``)."""
    return isinstance(value, Mapping) and ("messages" in value or "input" in value
                                           or "contents" in value)


def _record(
    value: Any, *, index: int, source: str, line: int | None = None, url_path: str | None = None
) -> CaptureEntry | CaptureProblem:
    """Unwrap one record into an entry, or a problem saying what is wrong with it."""

    def problem(message: str, code: str = "capture-record") -> CaptureProblem:
        return CaptureProblem(source, code, message, line=line, index=index)

    if not isinstance(value, Mapping):
        return problem(f"record is a JSON {json_type_name(value)}, not an object")
    session: str | None = None
    wire_format: str | None = None
    body: Any = value
    if "request" in value and not _is_body(value):
        raw_session = value.get("session")
        if isinstance(raw_session, bool) or not isinstance(raw_session, (str, int, type(None))):
            return problem(f"'session' must be a string or an integer, got "
                           f"{json_type_name(raw_session)}")
        session = None if raw_session is None else str(raw_session)
        declared = value.get("wire_format")
        if declared is not None and not isinstance(declared, str):
            return problem("'wire_format' must be a string")
        wire_format = declared
        url_path = _path_of(value) or url_path
        body = value["request"]
        if isinstance(body, Mapping) and not _is_body(body) and "body" in body:
            url_path = _path_of(body) or url_path
            body = body["body"]
        if isinstance(body, (str, bytes)):
            try:
                body = loads(body)
            except ValueError as exc:
                return problem(f"'request' body text is not valid JSON ({_json_reason(exc)})",
                               "capture-json")
    if not isinstance(body, Mapping):
        return problem(f"request body is a JSON {json_type_name(body)}, not an object")
    if not _is_body(body):
        keys = ", ".join(list(body)[:6]) or "none"
        return problem(f"not a request body or {{\"request\": ...}} record: no 'messages', "
                       f"'input' or 'contents' (keys: {keys})")
    return CaptureEntry(index, source, body, line, url_path, session, wire_format)


def _path_of(record: Mapping[str, Any]) -> str | None:
    for key in ("url", "path"):
        value = record.get(key)
        if isinstance(value, str) and value:
            return urlsplit(value).path or None
    return None


def _json_reason(exc: Exception) -> str:
    return str(exc).split(":", 1)[0] if str(exc) else type(exc).__name__


_DIGITS = re.compile(r"(\d+)")


def _natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    return tuple((0, int(part)) if part.isdigit() else (1, part)
                 for part in _DIGITS.split(name) if part)
