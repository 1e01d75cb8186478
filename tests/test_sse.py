"""Tests for the incremental SSE parser (src/stableprompt/_sse.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from stableprompt._sse import LineSplitter, SSEEvent, SSEParser

_STREAM = (
    ": comment at start\n"
    "event: first\n"
    'data: {"a": 1}\n'
    "id: 7\n"
    "\n"
    "data: line one\n"
    "data:line two\n"
    "data\n"
    "retry: 1500\n"
    "\n"
    "event: empty-no-data\n"
    "\n"
    "data: snow ☃ and 🙂\n"
    "\n"
).encode()


def _parse(data: bytes, sizes: list[int] | None = None) -> list[SSEEvent]:
    parser = SSEParser()
    events: list[SSEEvent] = []
    if sizes is None:
        events += parser.feed(data)
    else:
        pos = 0
        for size in sizes:
            events += parser.feed(data[pos : pos + size])
            pos += size
        events += parser.feed(data[pos:])
    return events + parser.close()


def test_fields_comments_multiline_and_defaults() -> None:
    """Event, data, id and retry fields follow the WHATWG rules."""
    events = _parse(_STREAM)
    assert [e.event for e in events] == ["first", "message", "message"]
    assert events[0].data == '{"a": 1}'
    assert events[0].id == "7"
    assert events[1].data == "line one\nline two\n"
    assert events[1].retry == 1500
    assert events[1].id == "7"  # the last event id persists
    assert events[2].data == "snow ☃ and 🙂"
    assert events[2].retry is None


def test_event_offsets_point_at_first_field_line() -> None:
    """Each event's offset is the byte offset of its first non-comment line."""
    events = _parse(_STREAM)
    for event in events:
        assert _STREAM[event.offset :].startswith((b"event:", b"data"))
    assert events[0].offset == len(b": comment at start\n")


def test_crlf_and_cr_line_ends() -> None:
    """CRLF, CR and LF terminate lines alike."""
    lf = _parse(_STREAM)
    crlf = _parse(_STREAM.replace(b"\n", b"\r\n"))
    cr = _parse(_STREAM.replace(b"\n", b"\r"))
    assert [(e.event, e.data) for e in crlf] == [(e.event, e.data) for e in lf]
    assert [(e.event, e.data) for e in cr] == [(e.event, e.data) for e in lf]


def test_every_split_point_gives_the_same_events() -> None:
    """Splitting the bytes anywhere (mid-line, mid-CRLF, mid-UTF-8) changes nothing."""
    data = _STREAM.replace(b"\n", b"\r\n")
    whole = _parse(data)
    for cut in range(len(data) + 1):
        assert _parse(data, [cut]) == whole, cut


@given(st.lists(st.integers(min_value=0, max_value=9), max_size=40))
def test_random_chunking_gives_the_same_events(sizes: list[int]) -> None:
    """Any chunking of a CRLF stream yields the events of the unsplit stream."""
    data = _STREAM.replace(b"\n", b"\r\n")
    assert _parse(data, sizes) == _parse(data)


def test_bom_is_dropped() -> None:
    """A leading UTF-8 BOM does not become part of the first field name."""
    events = _parse(b"\xef\xbb\xbfdata: x\n\n")
    assert [e.data for e in events] == ["x"]


def test_final_event_without_blank_line_is_dispatched_at_close() -> None:
    """An event whose lines were terminated but lacked the final blank line is still delivered."""
    parser = SSEParser()
    assert parser.feed(b"data: last\n") == []
    assert [e.data for e in parser.close()] == ["last"]


def test_cut_off_line_is_discarded_at_close() -> None:
    """A trailing unterminated line (a cut stream) is not dispatched."""
    parser = SSEParser()
    assert parser.feed(b'data: {"ok": 1}\n\ndata: {"trunc') == [
        SSEEvent("message", '{"ok": 1}', None, None, 0)
    ]
    assert parser.close() == []


def test_trailing_cr_terminates_at_close() -> None:
    """A lone CR at the very end is a line terminator once the stream is closed."""
    parser = SSEParser()
    assert parser.feed(b"data: x\r") == []
    assert [e.data for e in parser.close()] == ["x"]


def test_invalid_utf8_is_replaced() -> None:
    """Invalid UTF-8 becomes U+FFFD, as the spec requires, instead of raising."""
    assert _parse(b"data: a\xffb\n\n")[0].data == "a\ufffdb"


def test_pending_is_bounded_by_the_current_line() -> None:
    """The parser holds only the unterminated line, not the stream."""
    parser = SSEParser()
    parser.feed(b"data: " + b"x" * 1000 + b"\n\n")
    assert parser.pending == 0
    parser.feed(b"data: part")
    assert parser.pending == len(b"data: part")


def test_line_splitter_offsets_and_close() -> None:
    """LineSplitter reports stream offsets and flags an unterminated tail."""
    splitter = LineSplitter()
    assert splitter.feed(b"ab\r") == []
    assert splitter.feed(b"\ncd\n") == [(0, b"ab"), (4, b"cd")]
    assert splitter.feed(b"ef") == []
    assert splitter.close() == (7, b"ef", False)
    assert splitter.close() is None


def test_a_line_without_terminator_is_bounded() -> None:
    """A line longer than the limit is dropped (its offset kept in ``overlong``), the lines
    after it come through, and memory never holds more than the limit (review finding)."""
    from stableprompt._sse import LineSplitter

    lines = LineSplitter(max_line_bytes=10)
    assert lines.feed(b"abc\n0123456789ABCDEF") == [(0, b"abc")]
    assert lines.pending == 0 and lines.overlong == [4]
    assert lines.feed(b"more of it\nok\n") == [(31, b"ok")]
    assert lines.feed(b"x" * 25) == [] and lines.pending <= 10
    assert lines.close() is None and lines.overlong == [4, 34]
