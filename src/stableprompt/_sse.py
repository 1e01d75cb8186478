"""Incremental Server-Sent Events parsing over raw bytes.

Two layers, both fed arbitrary byte chunks (a chunk may end mid-line, between ``\\r`` and
``\\n``, or inside a multi-byte UTF-8 sequence):

- :class:`LineSplitter` turns bytes into complete lines (``\\r\\n``, ``\\n`` or ``\\r``
  terminated), remembering the byte offset where each line starts. Used directly for
  newline-delimited JSON streams (Bedrock ConverseStream in JSON-lines form).
- :class:`SSEParser` interprets lines as the WHATWG event-stream format
  (html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
  ``event``/``data``/``id``/``retry`` fields, multi-line ``data`` joined with ``\\n``, ``:``
  comments ignored, one optional space after the colon stripped, a leading UTF-8 BOM dropped.

Both only read what they are given: the caller keeps its own bytes untouched. The only state is
the current unterminated line (and, for SSE, the fields of the event being assembled), so memory
is bounded by the longest line, not by the stream.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MAX_LINE_BYTES", "LineSplitter", "SSEEvent", "SSEParser"]

MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest line kept (bytes): a longer one (a broken or hostile server that never sends a
newline) is dropped, its offset recorded in :attr:`LineSplitter.overlong`, so observing a
stream never holds more than this much of it."""

_NEWLINE = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"


class LineSplitter:
    """Split a byte stream into lines, incrementally.

    Lines are returned without their terminator, as ``(offset, line)`` pairs where ``offset`` is
    the byte offset of the line's first byte in the whole stream (counting from 0, BOM
    included). A ``\\r`` at the very end of a chunk is held back until the next byte shows
    whether it starts a ``\\r\\n`` pair, so ``\\r\\n`` split across chunks is one terminator.
    """

    __slots__ = ("_buf", "_consumed", "_max", "_scan", "_skipping", "overlong")

    def __init__(self, *, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._buf = bytearray()
        self._consumed = 0  # stream offset of self._buf[0]
        self._scan = 0  # position in self._buf from which no terminator has been seen
        self._max = max_line_bytes
        self._skipping = False  # inside a dropped overlong line, until its terminator
        self.overlong: list[int] = []
        """Offsets of lines longer than ``max_line_bytes``, dropped (never returned)."""

    @property
    def pending(self) -> int:
        """Bytes of the current unterminated line held back (0 after a terminator)."""
        return len(self._buf)

    def feed(self, chunk: bytes | bytearray | memoryview) -> list[tuple[int, bytes]]:
        """Consume ``chunk`` and return the lines it completed, in order (lines longer than
        ``max_line_bytes`` are dropped and their offsets added to :attr:`overlong`)."""
        buf = self._buf
        buf += chunk
        lines: list[tuple[int, bytes]] = []
        start = 0
        end = len(buf)
        pos = self._scan
        while True:
            match = _NEWLINE.search(buf, pos)
            if match is None:
                break
            if match.group() == b"\r" and match.end() == end:
                break  # maybe the first half of "\r\n": wait for the next byte
            if self._skipping:
                self._skipping = False  # the end of a dropped line
            else:
                lines.append((self._consumed + start, bytes(buf[start : match.start()])))
            start = pos = match.end()
        if start:
            del buf[:start]
            self._consumed += start
        if len(buf) > self._max:  # no terminator within the limit: drop what is held
            if not self._skipping:
                self.overlong.append(self._consumed)
                self._skipping = True
            keep = 1 if buf.endswith(b"\r") else 0
            self._consumed += len(buf) - keep
            del buf[: len(buf) - keep]
        self._scan = len(buf) - 1 if buf.endswith(b"\r") else len(buf)
        return lines

    def close(self) -> tuple[int, bytes, bool] | None:
        """End of stream: return the held-back line as ``(offset, line, terminated)``, if any.

        A lone trailing ``\\r`` terminates its line (``terminated`` is True); bytes after the
        last terminator come back with ``terminated`` False: the stream was cut mid-line, and
        the caller decides whether to trust them.
        """
        buf = self._buf
        if self._skipping:  # the stream ended inside a dropped line
            self._consumed += len(buf)
            buf.clear()
            self._skipping = False
            return None
        if not buf:
            return None
        terminated = buf.endswith(b"\r")
        line = bytes(buf[:-1]) if terminated else bytes(buf)
        offset = self._consumed
        self._consumed += len(buf)
        buf.clear()
        self._scan = 0
        return offset, line, terminated


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched Server-Sent Event.

    Attributes:
        event: The ``event`` field, or ``"message"`` when the event had none (spec default).
        data: The ``data`` fields joined with ``\\n`` (UTF-8 decoded, invalid bytes replaced
            with U+FFFD as the spec requires).
        id: The last event id seen so far in the stream (persists across events), or ``None``.
        retry: The ``retry`` field in ms when this event carried a valid one, else ``None``.
        offset: Byte offset in the stream of the event's first line.
    """

    event: str
    data: str
    id: str | None
    retry: int | None
    offset: int


class SSEParser:
    """Incremental WHATWG event-stream parser.

    Feed raw bytes with :meth:`feed`; each call returns the events completed by that chunk. An
    event is dispatched at the blank line that ends it, and only if it carried at least one
    ``data`` field (spec: an empty data buffer dispatches nothing).

    At end of stream, :meth:`close` departs from the spec in one documented way: an event whose
    lines were all terminated but which lacked the final blank line is still dispatched (some
    servers end the body right after ``data: ...\\n``). A trailing partial line — a stream cut
    mid-line — is discarded, as the spec says.
    """

    __slots__ = (
        "_data",
        "_event",
        "_event_offset",
        "_has_data",
        "_last_id",
        "_lines",
        "_retry",
        "_started",
    )

    def __init__(self) -> None:
        self._lines = LineSplitter()
        self._started = False  # BOM check done
        self._event: str | None = None
        self._data: list[str] = []
        self._has_data = False
        self._retry: int | None = None
        self._last_id: str | None = None
        self._event_offset: int | None = None

    @property
    def pending(self) -> int:
        """Bytes of the current unterminated line held back."""
        return self._lines.pending

    @property
    def overlong(self) -> list[int]:
        """Offsets of lines dropped for exceeding :data:`MAX_LINE_BYTES`."""
        return self._lines.overlong

    def feed(self, chunk: bytes | bytearray | memoryview) -> list[SSEEvent]:
        """Consume ``chunk`` and return the events it completed, in order."""
        events: list[SSEEvent] = []
        for offset, line in self._lines.feed(chunk):
            event = self._line(offset, line)
            if event is not None:
                events.append(event)
        return events

    def close(self) -> list[SSEEvent]:
        """End of stream: return a final event that lacked its closing blank line, if any."""
        events: list[SSEEvent] = []
        tail = self._lines.close()
        if tail is not None and tail[2]:  # an unterminated tail is a cut-off line: discarded
            event = self._line(tail[0], tail[1])
            if event is not None:
                events.append(event)
        if self._has_data:
            events.append(self._dispatch())
        else:
            self._reset()
        return events

    def _line(self, offset: int, line: bytes) -> SSEEvent | None:
        if not self._started:
            self._started = True
            if line.startswith(_BOM):
                line = line[len(_BOM) :]
                offset += len(_BOM)
        if not line:
            if self._has_data:
                return self._dispatch()
            self._reset()
            return None
        if line[:1] == b":":
            return None  # comment
        if self._event_offset is None:
            self._event_offset = offset
        text = line.decode("utf-8", errors="replace")
        name, colon, value = text.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\x00" not in value:
                self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry = int(value)
        # other field names are ignored (spec)
        return None

    def _dispatch(self) -> SSEEvent:
        event = SSEEvent(
            event=self._event or "message",
            data="\n".join(self._data),
            id=self._last_id,
            retry=self._retry,
            offset=self._event_offset if self._event_offset is not None else 0,
        )
        self._reset()
        return event

    def _reset(self) -> None:
        self._event = None
        self._data = []
        self._has_data = False
        self._retry = None
        self._event_offset = None
