"""Tests for reading request captures: JSONL, wrapper records, HAR, JSON files, directories."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from stableprompt import CaptureError
from stableprompt._lint._capture import CaptureEntry, iter_capture, read_capture
from stableprompt._lint._linter import lint_capture

FIXTURES = Path(__file__).parent / "fixtures" / "lint"
BODY: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 8,
                        "messages": [{"role": "user", "content": "hi"}]}


def _write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_jsonl_indexes_are_line_numbers() -> None:
    """JSONL entries carry 0-based index = line - 1 and a file:line source; malformed lines
    are problems with their line numbers and the rest is read."""
    capture = read_capture(FIXTURES / "malformed.jsonl")
    assert [(e.index, e.line, e.source) for e in capture.entries] == [
        (0, 1, "malformed.jsonl:1"), (4, 5, "malformed.jsonl:5"), (6, 7, "malformed.jsonl:7")]
    assert [(p.line, p.code) for p in capture.problems] == [
        (2, "capture-json"), (4, "capture-record"), (6, "capture-record")]
    assert "line 2 is not valid JSON" in capture.problems[0].message
    assert "JSON array, not an object" in capture.problems[1].message
    assert "no 'messages', 'input' or 'contents'" in capture.problems[2].message


def test_wrapper_records(tmp_path: Path) -> None:
    """{"request", "response"} wrappers give the body, session, URL path and declared format;
    request may be JSON text or an HTTP-like {url, body} object."""
    path = _write_jsonl(tmp_path / "c.jsonl", [
        {"request": BODY, "response": {"id": "x"}, "session": "s1"},
        {"request": json.dumps(BODY), "session": 7, "url": "https://h/v1/messages?beta=1"},
        {"request": {"url": "https://h/v1/chat/completions", "body": BODY},
         "wire_format": "openai-chat"},
    ])
    entries = read_capture(path).entries
    assert [e.body == BODY for e in entries] == [True, True, True]
    assert [e.session for e in entries] == ["s1", "7", None]
    assert [e.url_path for e in entries] == [None, "/v1/messages", "/v1/chat/completions"]
    assert entries[2].wire_format == "openai-chat"


def test_wrapper_record_problems(tmp_path: Path) -> None:
    """A wrapper with a bad session type or unparseable request text is a located problem."""
    path = _write_jsonl(tmp_path / "c.jsonl", [
        {"request": BODY, "session": ["x"]},
        {"request": "{not json"},
        BODY,
    ])
    capture = read_capture(path)
    assert [e.index for e in capture.entries] == [2]
    assert [(p.line, p.code) for p in capture.problems] == [(1, "capture-record"),
                                                            (2, "capture-json")]
    assert "'session' must be a string or an integer" in capture.problems[0].message


def test_har_reads_llm_posts_only() -> None:
    """HAR: JSON POST bodies are entries (base64 decoded), with their URL paths; GETs and
    unrelated JSON posts are skipped, not linted."""
    capture = read_capture(FIXTURES / "capture.har")
    assert [(e.index, e.url_path) for e in capture.entries] == [
        (1, "/v1/messages"), (3, "/v1/messages"), (4, "/v1/messages")]
    assert capture.skipped == 2 and capture.problems == ()
    report = lint_capture(FIXTURES / "capture.har")
    assert [p.predecessor for p in report.pairs] == [None, 1, 3]
    assert report.summary.breaks == 0 and report.summary.skipped == 2


def test_har_bad_body_at_llm_endpoint_is_a_problem(tmp_path: Path) -> None:
    """A POST to an LLM endpoint whose body is not JSON is reported; the rest is read."""
    entry = {"request": {"method": "POST", "url": "https://x/v1/messages",
                         "postData": {"text": "{oops"}}}
    good = {"request": {"method": "POST", "url": "https://x/v1/messages",
                        "postData": {"text": base64.b64encode(json.dumps(BODY).encode())
                                     .decode(), "encoding": "base64"}}}
    path = tmp_path / "c.har"
    path.write_text(json.dumps({"log": {"entries": [entry, good]}}))
    capture = read_capture(path)
    assert [e.index for e in capture.entries] == [1]
    assert capture.problems[0].source == "c.har#entries[0]"
    assert capture.problems[0].code == "capture-json"


def test_har_without_entries_is_a_format_error(tmp_path: Path) -> None:
    """A HAR document without log.entries is a capture-format error."""
    path = tmp_path / "c.har"
    path.write_text(json.dumps({"log": {"version": "1.2"}}))
    with pytest.raises(CaptureError) as info:
        read_capture(path)
    assert info.value.code == "capture-format"


def test_directory_in_natural_order() -> None:
    """A directory reads *.json in natural order (2 before 10), arrays as several records,
    and skips other files."""
    capture = read_capture(FIXTURES / "dir")
    assert [(e.index, e.source) for e in capture.entries] == [
        (0, "dir/1.json"), (1, "dir/2.json"), (2, "dir/10.json[0]"), (3, "dir/10.json[1]")]
    assert capture.skipped == 1
    assert [e.group for e in capture.entries] == ["dir/", "dir/", "dir/10.json", "dir/10.json"]
    # The single-request files are one stream; a file of several records is its own group,
    # never paired with another file's requests unless joined (issue 14 item 5).
    report = lint_capture(FIXTURES / "dir")
    assert [p.predecessor for p in report.pairs] == [None, 0, None, 2]
    joined = lint_capture(FIXTURES / "dir", join=True)
    assert [p.predecessor for p in joined.pairs] == [None, 0, 1, 2]
    assert report.summary.breaks == joined.summary.breaks == 0


def test_directory_with_bad_file(tmp_path: Path) -> None:
    """A non-JSON file in a directory is a problem; the other files are read."""
    (tmp_path / "a.json").write_text("{")
    (tmp_path / "b.json").write_text(json.dumps(BODY))
    capture = read_capture(tmp_path)
    assert [e.source for e in capture.entries] == [f"{tmp_path.name}/b.json"]
    assert capture.problems[0].code == "capture-json"


def test_single_json_and_pretty_printed_documents(tmp_path: Path) -> None:
    """A .json file holds one record or an array; a pretty-printed document under another
    suffix is sniffed; JSONL under a .json name still reads line by line."""
    one = tmp_path / "one.json"
    one.write_text(json.dumps(BODY, indent=2))
    assert len(read_capture(one).entries) == 1
    many = tmp_path / "many.txt"
    many.write_text(json.dumps([BODY, BODY], indent=2))
    assert [e.source for e in read_capture(many).entries] == ["many.txt[0]", "many.txt[1]"]
    lines = _write_jsonl(tmp_path / "lines.json", [BODY, BODY])
    assert [e.line for e in read_capture(lines).entries] == [1, 2]


def test_single_line_har_in_jsonl(tmp_path: Path) -> None:
    """A HAR document on one line of a .jsonl file is read as HAR."""
    har = {"log": {"entries": [{"request": {"method": "POST", "url": "https://x/v1/messages",
                                            "postData": {"text": json.dumps(BODY)}}}]}}
    path = _write_jsonl(tmp_path / "c.jsonl", [har])
    assert [e.url_path for e in read_capture(path).entries] == ["/v1/messages"]


@pytest.mark.parametrize(("content", "code"), [
    ("", "capture-empty"),
    ("\n  \n", "capture-empty"),
])
def test_empty_captures(tmp_path: Path, content: str, code: str) -> None:
    """Empty and blank captures raise capture-empty."""
    path = tmp_path / "c.jsonl"
    path.write_text(content)
    with pytest.raises(CaptureError) as info:
        read_capture(path)
    assert info.value.code == code


def test_unreadable_capture(tmp_path: Path) -> None:
    """A missing file raises capture-unreadable naming the path."""
    with pytest.raises(CaptureError, match=r"missing\.jsonl") as info:
        read_capture(tmp_path / "missing.jsonl")
    assert info.value.code == "capture-unreadable"


def test_not_json_at_all(tmp_path: Path) -> None:
    """A text file yields one problem per line; linting it is a capture-format error."""
    path = tmp_path / "notes.txt"
    path.write_text("hello\nworld\n")
    capture = read_capture(path)
    assert [p.line for p in capture.problems] == [1, 2] and capture.entries == ()
    with pytest.raises(CaptureError, match="no lintable request") as info:
        lint_capture(path)
    assert info.value.code == "capture-format"


def test_iter_capture_streams_entries(tmp_path: Path) -> None:
    """iter_capture yields entries lazily, in capture order."""
    path = _write_jsonl(tmp_path / "c.jsonl", [BODY, BODY, BODY])
    items = iter_capture(path)
    first = next(items)
    assert isinstance(first, CaptureEntry) and first.index == 0
    assert [i.index for i in items if isinstance(i, CaptureEntry)] == [1, 2]


def test_byte_order_mark_and_crlf(tmp_path: Path) -> None:
    """A UTF-8 byte order mark and CRLF line ends (Windows tools) are accepted."""
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(BODY).encode() + b"\r\n"
                     + json.dumps(BODY).encode() + b"\r\n")
    capture = read_capture(path)
    assert [e.line for e in capture.entries] == [1, 2] and capture.problems == ()
    har = tmp_path / "c.har"
    har.write_bytes(b"\xef\xbb\xbf" + json.dumps({"log": {"entries": []}}).encode())
    with pytest.raises(CaptureError) as info:
        read_capture(har)
    assert info.value.code == "capture-empty"


def test_directory_of_jsonl_files(tmp_path: Path) -> None:
    """JSONL files in a directory are read line by line; indexes run across files and sources
    keep each file's line numbers."""
    _write_jsonl(tmp_path / "a.jsonl", [BODY, BODY])
    (tmp_path / "b.jsonl").write_text(json.dumps(BODY) + "\n{broken\n")
    capture = read_capture(tmp_path)
    name = tmp_path.name
    assert [(e.index, e.source, e.line) for e in capture.entries] == [
        (0, f"{name}/a.jsonl:1", 1), (1, f"{name}/a.jsonl:2", 2), (2, f"{name}/b.jsonl:1", 1)]
    assert [(p.index, p.source, p.line) for p in capture.problems] == [
        (3, f"{name}/b.jsonl:2", 2)]
