"""Volatile-content detectors: positives with exact spans, real-world negatives, diff support."""

from __future__ import annotations

import copy
import warnings
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stableprompt import InputError, VolatileContentWarning, canonical_json
from stableprompt._volatility import (
    SCHEMA_CONSTANT_KEYS,
    VOLATILE_KINDS,
    VolatileSpan,
    _resolve,
    byte_offset,
    head_strings,
    paired_nonce,
    scan_volatile,
    volatile_kind_at,
)
from stableprompt._volatility_patterns import Scanner

_JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N"

POSITIVES = [
    # timestamps
    ("Current time: 2026-11-30T14:03:22Z.", "timestamp", "2026-11-30T14:03:22Z"),
    ("now=2026-11-30T14:03:22.123456+02:00;", "timestamp", "2026-11-30T14:03:22.123456+02:00"),
    ("Today is 2026-11-30 14:03:22 (server).", "timestamp", "2026-11-30 14:03:22"),
    ("Date: Mon, 30 Nov 2026 14:03:22 +0000", "timestamp", "Mon, 30 Nov 2026 14:03:22 +0000"),
    ("signed at 20261130T140322Z by ci", "timestamp", "20261130T140322Z"),
    ("log file backup_2026-11-30_14-03-22.tar", "timestamp", "2026-11-30_14-03-22"),
    ("It is Mon Nov 30 14:03:22 2026 here", "timestamp", "Mon Nov 30 14:03:22 2026"),
    (
        "Started Mon Nov 30 2026 14:03:22 GMT+0000 (UTC)",
        "timestamp",
        "Mon Nov 30 2026 14:03:22 GMT+0000",
    ),
    ("Now: November 30, 2026 at 2:03 PM.", "timestamp", "November 30, 2026 at 2:03 PM"),
    # dates
    ("Today's date is 2026-11-30.", "date", "2026-11-30"),
    ("Today's date is 2026/11/30.", "date", "2026/11/30"),
    ("Today is Nov 30, 2026 in Paris.", "date", "Nov 30, 2026"),
    ("Heute ist 30.11.2026, ein Montag.", "date", "30.11.2026"),
    ("Today: 30/11/2026", "date", "30/11/2026"),
    ("Today: 11/30/2026", "date", "11/30/2026"),
    ("Today is Monday, November 30.", "date", "Monday, November 30"),
    ("Today is 30 November 2026.", "date", "30 November 2026"),
    ("Today is the 30th of November, 2026.", "date", "30th of November, 2026"),
    # clock times
    ("The time is 14:03 now.", "clock-time", "14:03"),
    ("The time is 2:03 PM now.", "clock-time", "2:03 PM"),
    ("The time is 14:03:22 now.", "clock-time", "14:03:22"),
    ("Local time 09:41 UTC.", "clock-time", "09:41 UTC"),
    # ids
    (
        "trace 550e8400-e29b-41d4-a716-446655440000 ok",
        "uuid",
        "550e8400-e29b-41d4-a716-446655440000",
    ),
    (
        "HEAD is 9fceb02d0ae598e95dc970b74767f19372d61af8.",
        "hex-id",
        "9fceb02d0ae598e95dc970b74767f19372d61af8",
    ),
    ("span 0x7f3a9c2b4d5e6f18 closed", "hex-id", "0x7f3a9c2b4d5e6f18"),
    ("previous req_011CSHoEeqs5C35K2UUqR7Fy failed", "base64-id", "req_011CSHoEeqs5C35K2UUqR7Fy"),
    ("event 01HV8Z3KXQ9J6Y2T4M5N7P8R0S queued", "base64-id", "01HV8Z3KXQ9J6Y2T4M5N7P8R0S"),
    ("key sk-proj-Xq7Lm2Pa9Wd4Rt8Yb3Nc6Hv1 used", "base64-id", "sk-proj-Xq7Lm2Pa9Wd4Rt8Yb3Nc6Hv1"),
    (
        "Authorization: Bearer " + _JWT,
        "base64-id",
        _JWT,
    ),
    # labelled nonces (the span is the value)
    ("nonce: abc123, then go", "nonce", "abc123"),
    ("request_id=7f3k2a9d&x=1", "nonce", "7f3k2a9d"),
    ("Session ID: s-99102 (active)", "nonce", "s-99102"),
    ('{"trace_id":"t-00421x"}', "nonce", "t-00421x"),
    # epochs
    ("ts 1732975402 seconds", "epoch", "1732975402"),
    ("ts_ms=1732975402123", "epoch", "1732975402123"),
    ("time.time() = 1732975402.5831", "epoch", "1732975402.5831"),
    # counters
    ("[Turn 17] The user asks again.", "counter", "Turn 17"),
    ("You are on Step 4 of 10 of the plan.", "counter", "Step 4 of 10"),
    ("This is attempt #3, be careful.", "counter", "attempt #3"),
    ("retry_count: 2", "counter", "retry_count: 2"),
    ("iteration 12.", "counter", "iteration 12"),
    # short key=value nonces (issue 14: a per-request billing nonce in a system prompt)
    ("x-anthropic-billing-header: cc_version=2.1.3; cch=36ee5;", "nonce", "36ee5"),
    ("cch=3f9a1c2b7d", "nonce", "3f9a1c2b7d"),
    ("resume with sid=a8k3z9 next time", "nonce", "a8k3z9"),
    ("commit=3F9A1C2 deployed", "nonce", "3F9A1C2"),
    # paths that name one user, machine or run
    ("Edit files under /home/dev7/work/app only.", "path", "/home/dev7/work/app"),
    ("Scratch dir: /tmp/tmpa8k3z9x1/out.json", "path", "/tmp/tmpa8k3z9x1/out.json"),
    ("Project at C:\\Users\\Dana\\repo", "path", "C:\\Users\\Dana\\repo"),
    ("Logs in /var/folders/zz/T/run.log", "path", "/var/folders/zz/T/run.log"),
    # an agent harness's env block
    ("<env>\nWorking directory: /srv/app\nIs directory a git repo: Yes\n</env>",
     "environment", "/srv/app"),
    ("cwd=/workspace/proj", "environment", "/workspace/proj"),
    ("Hostname: build-box", "environment", "build-box"),
    ("Current branch: feat/cache-lint", "environment", "feat/cache-lint"),
    ("On branch main", "environment", "main"),
    ("Status:\n?? notes.txt\n", "environment", "?? notes.txt"),
    ("Recent commits:\nabc1234 Fix the loop\n", "environment", "abc1234 Fix the loop"),
    # the model or provider named in the head
    ("Model: claude-sonnet-4-5", "model-name", "claude-sonnet-4-5"),
    ("Provider: OpenAI", "model-name", "OpenAI"),
    ("You are powered by the model named Claude Opus 4.5.", "model-name", "Claude Opus 4.5"),
    ("The exact model ID is gpt-5.2-codex.", "model-name", "gpt-5.2-codex"),
    # issue 14 review: missed at freeze
    ("Host: devbox-7", "environment", "devbox-7"),
    ("git status: 3 files modified, branch main", "environment",
     "3 files modified, branch main"),
    ("trace: 9f8e7d6c5b", "nonce", "9f8e7d6c5b"),
    ("cch: 36ee5", "nonce", "36ee5"),
    ("You are running on provider anthropic", "model-name", "anthropic"),
    ("You're running on the provider OpenRouter.", "model-name", "OpenRouter"),
]


@pytest.mark.parametrize(("text", "kind", "token"), POSITIVES)
def test_positive_detection_reports_kind_and_exact_span(text: str, kind: str, token: str) -> None:
    """Each volatile form is found once, with its kind and its exact character span."""
    spans = scan_volatile(text)
    assert [(s.kind, s.text) for s in spans] == [(kind, token)]
    (span,) = spans
    assert span.start == text.index(token)
    assert span.end == span.start + len(token)
    assert text[span.start : span.end] == token


NEGATIVES = [
    # key=value numbers are versions, sizes, ports and limits: stable (issue 14 decision)
    "version=12345",
    "Listen on port=8080 with timeout=30s and retries=3.",
    "Use color=ff00ff or bg=000000 for highlights.",
    "api=v1beta2 fmt=h264v2 model=gpt4o",
    "hash=deadbeef",
    # paths and lines that are the same on every machine
    "Write the report to /tmp, never to /etc/hosts or /usr/local/bin.",
    "Files live in /home/user/data or /Users/<you>/data.",
    "GET /v1/messages/123 returns the message.",
    "model: the model to use for the summary.",
    "The status: one of open, closed.",
    "The host name of the server to ping.",
    "This tool is powered by the search index.",
    "branch: the git branch to check out (string).",
    # schema and format descriptions
    "The start date. Format: YYYY-MM-DD.",
    "The timestamp in ISO 8601 / RFC 3339 format (YYYY-MM-DDTHH:MM:SSZ).",
    "The year, e.g. 2024.",
    "The date in the format 'YYYY-MM-DD', e.g. '2024-01-15' or '2024/01/15'.",
    "Reservation time in 24-hour format, e.g., '18:30' for 6:30 PM.",
    "Date in 'YYYYMMDD' format (e.g., '20210101' for January 1st, 2021).",
    "Range such as '2023-01-01 to 2023-01-31'.",
    "Logs are fetched up to 23:59:59 of this date, starting from 00:00:00.",
    "Example format: '123e4567-e89b-12d3-a456-426614174000'.",
    "Session identifier that looks like `sess_1234567890abcdef`.",
    # numbers that are not volatile
    "Requires Python 3.11.4 or v1.2.3; see release 2.0.0-beta.1.",
    "Listen on port 8080 and connect to 127.0.0.1:5432 or 192.168.1.1.",
    "Costs $14.99, or 1,000,000 tokens at 3.14159 USD.",
    "HTTP 404 means not found; returns up to 100 results per page.",
    "Office hours are 09:00-17:00, Monday to Friday.",
    "Step 1: read the file. Step 2: edit it.",
    "Turn 90 degrees to the left.",
    "Slice data[12:16] and h[16:32].",
    "Fixed in pull request #3514.",
    "if sys.maxsize == 2147483647: use 32-bit; placeholder 1234567890.",
    "Set iteration = 0 and step=1 before the loop.",
    "Use model gpt-4.1-2025-04-14 or claude-sonnet-4-20250514.",
    "Send header anthropic-version: 2023-06-01 with every request.",
    "Announced shutdown date: 2026-08-10.",
    "The date must be after 14/03/2024.",
    "See https://example.org/specification/2025-06-18/schema for details.",
    # words, identifiers, paths
    "internationalization and counterrevolutionaries are long English words",
    "call get_user_by_id_v2 or convert_utf8_to_utf16_string from src/stableprompt/_volatility.py",
    "class BetaToolSearchToolBm25_20251119 and GetItemInt64Borrow and Utf8EncodingNeeded",
    "abcdefghijklmnopqrstuvwxyz qwertyuiopasdfghjklzxcvbnm deadbeefcafebabefeedface",
    "Tokens like HTTP_STATUS_404_NOT_FOUND_ERROR_V2 are constants.",
    "https://github.com/org/repo/blob/main/docs/v2/Http2ClientGuide.md",
    "4.85192780976896427E+58 is a big number",
    # issue 14 review: the new labels stay quiet in prose
    "Explain the host language and the host of the party.",
    "git is a version control system; run git status to see changes.",
    "trace the call graph, then trace: the outer loop first.",
    "Pick a provider of services; the provider is chosen per region.",
    "This search tool is powered by Google.",
    "Host: localhost:8080",
    "Host: the person who runs the meeting",
    "Machine name: the model you choose",
    "GET / HTTP/1.1\nHost: api.example.com",
    "Color: FF5733 is the brand orange.",
    "port: 8080, retries: 3",
    "see x.trace: 9f8e7d6c5b",
]


@pytest.mark.parametrize("text", NEGATIVES)
def test_negative_text_yields_no_span(text: str) -> None:
    """Formats, examples, versions, ports, prices, identifiers and paths are not flagged."""
    assert scan_volatile(text) == ()


def test_real_tool_schema_json_with_examples_and_defaults_is_clean() -> None:
    """A canonical tool schema whose dates are examples/defaults yields no span."""
    tool = {
        "name": "book_flight",
        "description": "Book a flight. Times are local, in 24-hour format (e.g., '14:30').",
        "input_schema": {
            "type": "object",
            "properties": {
                "date": {
                    "type": "string",
                    "description": "Departure date in YYYY-MM-DD format.",
                    "examples": ["2024-05-01", "2024-12-24"],
                },
                "since": {
                    "type": "string",
                    "format": "date-time",
                    "default": "2024-01-01T00:00:00Z",
                },
                "passengers": {"type": "integer", "minimum": 1, "maximum": 9},
            },
            "required": ["date"],
        },
    }
    assert scan_volatile(canonical_json(tool).decode()) == ()


def test_system_prompt_with_several_volatile_tokens_reports_all_in_order() -> None:
    """A realistic head reports every volatile token, sorted and non-overlapping."""
    text = (
        "You are a helpful agent.\n"
        "Current date: 2026-11-30. Time: 14:03:22 UTC.\n"
        "Session ID: sess-4f9a21\n"
        "Trace 550e8400-e29b-41d4-a716-446655440000, turn: 17\n"
    )
    found = [(s.kind, s.text) for s in scan_volatile(text)]
    assert found == [
        ("date", "2026-11-30"),
        ("clock-time", "14:03:22 UTC"),
        ("nonce", "sess-4f9a21"),
        ("uuid", "550e8400-e29b-41d4-a716-446655440000"),
        ("counter", "turn: 17"),
    ]


def test_overlap_keeps_the_timestamp_not_its_date_and_clock_parts() -> None:
    """A datetime is one timestamp span; filtering by kind never resurrects its parts."""
    text = "at 2026-11-30 14:03:22 ok"
    assert [(s.kind, s.text) for s in scan_volatile(text)] == [("timestamp", "2026-11-30 14:03:22")]
    assert scan_volatile(text, kinds={"date", "clock-time"}) == ()
    assert [s.kind for s in scan_volatile(text, kinds={"timestamp"})] == ["timestamp"]


def test_nonce_prefers_the_specific_kind_of_its_value() -> None:
    """A labelled UUID is reported as a uuid (same span, more specific kind)."""
    text = "request_id: 550e8400-e29b-41d4-a716-446655440000"
    assert [(s.kind, s.text) for s in scan_volatile(text)] == [
        ("uuid", "550e8400-e29b-41d4-a716-446655440000")
    ]


def test_skip_examples_false_reports_documented_values() -> None:
    """With skip_examples=False, example values are reported too."""
    text = "The date, e.g. 2024-01-15."
    assert scan_volatile(text) == ()
    assert [(s.kind, s.text) for s in scan_volatile(text, skip_examples=False)] == [
        ("date", "2024-01-15")
    ]


def test_byte_offsets_follow_utf8_encoding() -> None:
    """start_byte/end_byte index the UTF-8 bytes while start/end index characters."""
    text = "Café ☕ — now 2026-11-30T14:03:22Z, ok"
    (span,) = scan_volatile(text)
    data = text.encode("utf-8")
    assert span.start == text.index("2026")
    assert span.start_byte == len(text[: span.start].encode("utf-8"))
    assert data[span.start_byte : span.end_byte].decode("utf-8") == span.text
    assert byte_offset(text, span.start) == span.start_byte
    assert byte_offset(text, len(text)) == len(data)


def test_byte_offset_rejects_out_of_range_offsets() -> None:
    """byte_offset raises InputError with a code for offsets outside the text."""
    with pytest.raises(InputError) as info:
        byte_offset("abc", 4)
    assert info.value.code == "offset-out-of-range"


def test_unknown_kind_filter_is_rejected() -> None:
    """Asking for an unknown kind raises InputError naming the known kinds."""
    with pytest.raises(InputError) as info:
        scan_volatile("2026-11-30", kinds={"date", "weather"})
    assert info.value.code == "volatile-kind-unknown"
    assert "weather" in str(info.value)


def test_json_escaped_text_keeps_tokens_separate_from_escapes() -> None:
    """In JSON text, a token right after an escaped newline is found without the escape letter."""
    raw = 'line one\n2026-11-30T14:03:22Z\nnonce: abc123\nTurn 17\n{"x":"\u2028"}'
    text = canonical_json(raw).decode("utf-8")
    found = [(s.kind, s.text) for s in scan_volatile(text)]
    assert found == [
        ("timestamp", "2026-11-30T14:03:22Z"),
        ("nonce", "abc123"),
        ("counter", "Turn 17"),
    ]


def test_spans_are_frozen_slotted_values() -> None:
    """VolatileSpan is immutable and has no __dict__ (a hot-path value type)."""
    (span,) = scan_volatile("2026-11-30")
    assert span == VolatileSpan("date", 0, 10, "2026-11-30", 0, 10)
    assert not hasattr(span, "__dict__")
    with pytest.raises(AttributeError):
        span.kind = "uuid"  # type: ignore[misc]


def test_every_reported_kind_is_a_documented_slug() -> None:
    """All kinds in the positive table belong to VOLATILE_KINDS and all kinds are covered."""
    kinds = {kind for _, kind, _ in POSITIVES}
    assert kinds == set(VOLATILE_KINDS)


# -- diff support ------------------------------------------------------------------------------
def _first_difference(a: str, b: str) -> int:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


@pytest.mark.parametrize(
    ("a", "b", "kind"),
    [
        ("now 2026-11-30T14:03:22Z.", "now 2026-11-30T14:05:01Z.", "timestamp"),
        (
            "id 550e8400-e29b-41d4-a716-446655440000",
            "id 550e8400-e29b-41d4-a716-9a6655440001",
            "uuid",
        ),
        ("request_id=7f3k2a9d end", "request_id=7f3k5b1q end", "nonce"),
        ("[Turn 17]", "[Turn 18]", "counter"),
        ("at 14:03 ok", "at 14:03:22 ok", "clock-time"),
        ("Be nice. Today is 2026-11-30.", "Be nice. Today is 2026-12-01.", "date"),
    ],
)
def test_volatile_kind_at_names_the_shared_kind(a: str, b: str, kind: str) -> None:
    """A first difference inside same-kind volatile spans on both sides names that kind."""
    offset = _first_difference(a, b)
    assert volatile_kind_at(a, b, offset) == kind
    assert volatile_kind_at(a.encode(), b.encode(), len(a[:offset].encode())) == kind


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Today is 2026-11-30.", "Today is unknown."),  # only one side is volatile
        ("You are helpful.", "You are careful."),  # plain edit
        ("at 2026-11-30 now", "at 14:03:22 now"),  # different kinds
        ("same", "same and more"),  # pure append: no differing character
    ],
)
def test_volatile_kind_at_returns_none_otherwise(a: str, b: str) -> None:
    """Edits, one-sided tokens, mixed kinds and appends are not volatile-token divergences."""
    assert volatile_kind_at(a, b, _first_difference(a, b)) is None


def test_volatile_kind_at_handles_multibyte_prefixes_and_long_texts() -> None:
    """Byte offsets after multi-byte characters and far into long texts are mapped correctly."""
    prefix = "Ünïcødé ☕ " * 400
    a = prefix + "stamp 2026-11-30T14:03:22Z " + "tail " * 300
    b = prefix + "stamp 2026-11-30T14:09:58Z " + "tail " * 300
    offset = _first_difference(a, b)
    byte_at = len(a[:offset].encode())
    assert volatile_kind_at(a, b, offset) == "timestamp"
    assert volatile_kind_at(a.encode(), b.encode(), byte_at) == "timestamp"
    # An offset inside a multi-byte character is moved back to its first byte.
    assert volatile_kind_at("é 14:03 x".encode(), "é 14:07 x".encode(), 6) == "clock-time"


def test_volatile_kind_at_rejects_bad_arguments() -> None:
    """Mixed str/bytes or a negative offset raise InputError with a code."""
    with pytest.raises(InputError) as info:
        volatile_kind_at("a", b"a", 0)
    assert info.value.code == "volatile-diff-invalid"
    with pytest.raises(InputError):
        volatile_kind_at("a", "b", -1)


# -- properties --------------------------------------------------------------------------------
_WORDS = [
    "the",
    "agent",
    "must",
    "answer",
    "politely",
    "and",
    "cite",
    "sources",
    "when",
    "asked",
    "about",
    "deadlines",
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
    "Mon",
    "Tue",
    "Nov",
    "Dec",
    "nonce",
    "request_id",
    "session_id",
    "trace-id",
    "Turn",
    "Step",
    "attempt",
    "iteration",
    "round",
    "of",
    "T",
    "Z",
    "PM",
    "AM",
    "UTC",
    "GMT",
    "eyJ",
    "deadbeef",
    "cafebabe",
    "abcdef",
    "ABCDEF",
    "Xq",
    "Lm",
    "Pa",
    "Wd",
    "e.g.",
    "default",
    "examples",
    "format",
    "version",
]
_SEPARATORS = [" ", ", ", ".\n", ": ", "=", "-", "_", "/", "\\n", "#", " of ", "T", ":"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(_WORDS), st.sampled_from(_SEPARATORS)), min_size=1, max_size=60
    )
)
def test_english_text_without_digits_yields_no_span(parts: list[tuple[str, str]]) -> None:
    """Text made of words, month/weekday names and id labels but no digits has no span."""
    text = "".join(word + sep for word, sep in parts)
    assert scan_volatile(text) == ()
    assert _resolve(Scanner(text).run()) == []  # not even a raw candidate


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Nd", "Cs")), max_size=400))
def test_arbitrary_text_without_decimal_digits_yields_no_span(text: str) -> None:
    """Any text without decimal digits (all scripts) has no span."""
    assert scan_volatile(text) == ()


_TOKENS = [
    "2026-11-30T14:03:22Z",
    "14:03",
    "Nov 30, 2026",
    "550e8400-e29b-41d4-a716-446655440000",
    "9fceb02d0ae598e95dc970b74767f19372d61af8",
    "req_011CSHoEeqs5C35K2UUqR7Fy",
    "1732975402",
    "nonce: abc123",
    "Turn 17",
    "v1.2.3",
    "port 8080",
    "e.g.",
    "é",
    "☕",
    "\\n",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_TOKENS), st.text(max_size=8)), max_size=30))
def test_spans_are_sorted_disjoint_and_consistent(pieces: list[str]) -> None:
    """For any text, spans are sorted, disjoint, match their text and their UTF-8 byte range."""
    text = " ".join(pieces)
    spans = scan_volatile(text)
    data = text.encode("utf-8", "surrogatepass")
    previous_end = 0
    for span in spans:
        assert span.kind in VOLATILE_KINDS
        assert previous_end <= span.start < span.end <= len(text)
        assert text[span.start : span.end] == span.text
        assert data[span.start_byte : span.end_byte] == span.text.encode("utf-8", "surrogatepass")
        previous_end = span.end
    assert scan_volatile(text) == spans  # deterministic


def test_volatile_token_is_found_wherever_it_is_embedded() -> None:
    """A timestamp is found after any amount of clean prefix text (windowing has no edge)."""
    for size in (0, 1, 7, 100, 5000):
        text = "x " * size + "at 2026-11-30T14:03:22Z."
        (span,) = scan_volatile(text)
        assert span.start == 2 * size + 3


# -- head_strings: the one rule for builder and lint ------------------------------------------

_DEFAULT_DATE_TOOL: dict[str, Any] = {
    "name": "report",
    "description": "Build the report.",
    "input_schema": {
        "type": "object",
        "properties": {
            "since": {"type": "string", "default": "2024-01-15",
                      "examples": ["2024-02-01"], "enum": ["2024-01-15", "2024-03-01"]},
            "default": {"type": "string", "description": "Cut-off 2026-11-30T10:00:00Z"},
        },
        "$defs": {"const": {"const": "2024-01-15", "description": "Pinned"}},
    },
}


def test_head_strings_skips_schema_constants_but_not_names() -> None:
    """Values of default/examples/enum/const are skipped; a property named ``default`` is
    walked, and pointers are RFC 6901 escaped."""
    found = dict(head_strings(_DEFAULT_DATE_TOOL))
    assert "2024-01-15" not in found.values() and "2024-02-01" not in found.values()
    assert found["/input_schema/properties/default/description"] == "Cut-off 2026-11-30T10:00:00Z"
    assert found["/input_schema/$defs/const/description"] == "Pinned"
    assert dict(head_strings({"a/b": {"~": "x"}}, "/tools/0")) == {"/tools/0/a~1b/~0": "x"}
    assert {"const", "default", "enum", "example", "examples"} == SCHEMA_CONSTANT_KEYS


def _default_tool(description: str) -> dict[str, Any]:
    tool = copy.deepcopy(_DEFAULT_DATE_TOOL)
    tool["input_schema"]["properties"].pop("default")
    tool["description"] = description
    return tool


def test_builder_and_lint_agree_on_a_date_default() -> None:
    """A tool with ``"default": "2024-01-15"`` is clean at freeze() and in lint (a schema
    constant: the same bytes every call); a date in its description is flagged by both."""
    from stableprompt import PromptBuilder, Tool, lint_requests

    def lint(tool: dict[str, Any]) -> bool:
        marked = {**tool, "cache_control": {"type": "ephemeral"}}
        body = {"model": "claude-sonnet-4-5", "max_tokens": 8, "tools": [marked],
                "messages": [{"role": "user", "content": "hi"}]}
        return lint_requests([body]).finding("volatile-in-cached-region") is not None

    def freeze(tool: dict[str, Any]) -> bool:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            PromptBuilder(tokenizer=None).tools([Tool.from_dict(tool)]).freeze()
        return any(issubclass(w.category, VolatileContentWarning) for w in caught)

    clean = _default_tool("Build the report.")
    assert not freeze(clean) and not lint(clean)
    dated = _default_tool("Build the report as of 2026-11-30.")
    assert freeze(dated) and lint(dated)


def test_a_value_that_changes_between_requests_is_a_nonce() -> None:
    """``key=value`` runs that differ between two requests under the same key are named
    ``nonce`` by the diff, whatever the key; one text alone does not flag them."""
    from stableprompt import diff
    from stableprompt._wire._formats import segment_request

    def body(system: str) -> dict[str, object]:
        return {"model": "m", "max_tokens": 5, "system": [{"type": "text", "text": system}],
                "messages": [{"role": "user", "content": "hi"}]}

    assert scan_volatile("session k=Zq81xW ok") == ()
    a = segment_request("anthropic", body("session k=Zq81xW ok"))
    b = segment_request("anthropic", body("session k=Pm42rT ok"))
    divergence = diff(a, b)
    assert divergence is not None
    assert (divergence.cause, divergence.detail) == ("volatile-token", "nonce")
    c = segment_request("anthropic", body("session k=Zq81xW and more"))
    other = diff(a, c)
    assert other is not None and other.cause == "content-edit"
    for x, y, index in (("k=Zq81xW", "k=Pm42rT", 2), ("k=abcdef", "k=abcdeg", 7),
                        ("a=Zq81xW", "b=Zq81xW", 0)):
        assert paired_nonce(x, y, index) is (x[0] == y[0] and x != "k=abcdef")


def _freeze_and_lint(system: str) -> list[tuple[str, str]]:
    """``(kind, text)`` of each volatile-content warning freezing ``system`` raises, after
    checking that each warning's byte offset points at its text in the head and that lint of
    a request on that head names every one of them."""
    import warnings

    from stableprompt import PromptBuilder, VolatileContentWarning, lint_requests

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        head = PromptBuilder(system=system, tokenizer=None).freeze()
    warned = [w.message for w in caught if isinstance(w.message, VolatileContentWarning)]
    for warning in warned:
        offset = warning.offset
        assert head.data[offset:offset + len(warning.text.encode())] == warning.text.encode()
    conv = head.conversation()
    conv.user("hi")
    report = lint_requests([conv.render().to_anthropic(model="claude-opus-4-5", max_tokens=8)])
    texts = " ".join(f.message for f in report.findings)
    for warning in warned:
        assert warning.text in texts
    return [(w.kind, w.text) for w in warned]


def test_freeze_and_lint_flag_the_same_new_kinds() -> None:
    """One scanner: the builder warns at freeze and lint reports the same spans, for a short
    nonce, a home path and a model line in the head."""
    system = ("Billing: cch=36ee5.\nWorking directory: /home/dev7/app\n"
              "You are powered by the model named Claude Opus 4.5.")
    assert _freeze_and_lint(system) == [("nonce", "36ee5"), ("environment", "/home/dev7/app"),
                                         ("model-name", "Claude Opus 4.5")]


def test_freeze_and_lint_flag_the_review_misses() -> None:
    """One scanner: a host line, a one-line git status, a hex id after ``key:`` and a
    provider line warn at freeze (kind, byte offset into the head) and are lint findings."""
    system = ("Host: devbox-7\ngit status: 3 files modified, branch main\n"
              "trace: 9f8e7d6c5b\nYou are running on provider anthropic")
    assert _freeze_and_lint(system) == [("environment", "devbox-7"),
                                        ("environment", "3 files modified, branch main"),
                                        ("nonce", "9f8e7d6c5b"), ("model-name", "anthropic")]


def test_prose_with_the_new_labels_freezes_without_a_warning() -> None:
    """Ordinary prose about hosts, git, tracing and providers freezes silently, even strict."""
    from stableprompt import PromptBuilder

    system = ("Explain the host language. git is a version control system. Trace the call "
              "graph. Pick a provider of services.")
    PromptBuilder(system=system, tokenizer=None, strict=True).freeze()


@settings(max_examples=500, deadline=None)
@given(text=st.text(alphabet="=: \t\n.-_aZ09fF", max_size=80) |
       st.lists(st.sampled_from(["key=", "k: ", "x:\t", "=a1b2c3", "sid=a8k3z9", "trace: ",
                                 "9f8e7d6c5b", "==", "::", " ", "v.1", "-", "abcdef12345678"]),
                max_size=12).map("".join))
def test_kv_separators_match_what_the_regex_engine_finds(text: str) -> None:
    from stableprompt._volatility_patterns import _KV_SEP_RE, _kv_separators

    def spans(matches: Any) -> list[tuple[tuple[int, int], tuple[int, int]]]:
        return [(m.span(), m.span("v")) for m in matches]

    assert spans(_kv_separators(text)) == spans(_KV_SEP_RE.finditer(text))
