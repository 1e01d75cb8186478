"""Tests for the reported-total plausibility check (``_recording._plausibility``) and the
per-endpoint usage dialect override (``Recorder(usage_dialect=...)``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stableprompt import parse_usage
from stableprompt._exceptions import ConfigurationError
from stableprompt._ledger._ledger import Ledger
from stableprompt._recording._observer import Observation
from stableprompt._recording._plausibility import (
    HIDDEN_TOKENS_SLACK,
    USAGE_RATIO_HIGH,
    USAGE_RATIO_LOW,
    usage_suspicion,
)
from stableprompt._recording._recorder import Recorder
from stableprompt._wire._formats import segment_request
from test_calls import MODEL, send, talk
from test_transport import SYSTEM_BLOCKS, FakeProvider, anthropic_sdk


class InclusiveServer(FakeProvider):
    """An Anthropic-compatible server whose ``input_tokens`` counts the whole prompt
    (uncached + cache_read + cache_write): an inclusive count in Anthropic's exclusive field."""

    def _anthropic(self, body: dict[str, Any], n: int, total: int, read: int, write: int,
                   stream: bool) -> Any:
        self.totals.append(total)
        return super()._anthropic(body, n, total + read + write, read, write, stream)

    def __init__(self) -> None:
        super().__init__()
        self.totals: list[int] = []


def _segments(text: str) -> tuple[Any, bytes]:
    seg = segment_request("anthropic", {"model": "m", "max_tokens": 1,
                                        "messages": [{"role": "user", "content": text}]})
    return seg.segments, seg.data


def test_a_total_far_from_our_estimate_is_flagged_with_its_ratio() -> None:
    """A reported total above 1.6x (below 0.3x) our estimate, beyond the hidden-token slack, is
    suspect with its ratio; honest densities, short requests and a low total on a media
    request are not."""
    segments, data = _segments("hello")
    estimate = 10_000

    def usage(total: int) -> Any:
        return parse_usage("openai-chat", {"prompt_tokens": total, "completion_tokens": 1})

    doubled = usage_suspicion(usage(19_500), estimate, segments, data)
    assert doubled is not None and doubled["usage_suspect"] is True
    assert doubled["usage_ratio"] == 1.95
    assert doubled["usage_ratio_bounds"] == [USAGE_RATIO_LOW, USAGE_RATIO_HIGH]
    assert usage_suspicion(usage(15_200), estimate, segments, data) is None  # 1.52x: dense
    assert usage_suspicion(usage(int(0.72 * estimate)), estimate, segments, data) is None
    assert usage_suspicion(usage(int(0.33 * estimate)), estimate, segments, data) is None
    low = usage_suspicion(usage(2_000), estimate, segments, data)
    assert low is not None and "below" in low["usage_suspect_reason"]
    assert usage_suspicion(usage(int(1.6 * 300) + HIDDEN_TOKENS_SLACK), 300, segments,
                           data) is None  # a short request with tools' hidden tokens
    image = segment_request("anthropic", {"model": "m", "max_tokens": 1, "messages": [
        {"role": "user", "content": [{"type": "image", "source": {
            "type": "base64", "media_type": "image/png", "data": "QUJD" * 10_000}}]}]})
    assert usage_suspicion(usage(1_500), estimate, image.segments, image.data) is None


def test_an_inclusive_anthropic_compatible_server_is_flagged_usage_suspect() -> None:
    """input_tokens = cache_read + cache_write + uncached parsed as Anthropic's exclusive field
    adds up but doubles the totals: every call is flagged usage_suspect (ratio ~2), with its
    verdict kept; the report keeps it out of hit rates as suspect (whether or not the row also
    carries usage_inconsistent, as older recorders set it) and prices it as reported."""
    fake = InclusiveServer()
    recorder = Recorder(tokenizer="bytes/4")
    client = anthropic_sdk(fake, recorder)
    send(client, talk("ann", 1))
    send(client, talk("ann", 2))
    for record, true_total in zip(recorder.records, fake.totals, strict=True):
        assert record.input_tokens_total is not None and record.input_tokens_total > true_total
        assert record.verdict_detail["usage_suspect"] is True
        ratio, reason = (record.verdict_detail[k] for k in ("usage_ratio", "usage_suspect_reason"))
        assert isinstance(ratio, float) and 1.9 <= ratio <= 2.0
        assert isinstance(reason, str) and "twice" in reason
    assert [r.verdict for r in recorder.records] == ["cold", "hit"]
    rows = recorder.summary().calls
    assert [r.excluded for r in rows] == ["suspect", "suspect"]
    assert all(r.cost_usd is not None for r in rows)


@pytest.mark.parametrize(("dialect", "stream"), [
    ("openai-compatible", False), ({"provider.test": "openai-compatible"}, False),
    ({"anthropic": "openai-compatible"}, False), ("openai-compatible", True)])
def test_the_usage_dialect_override_reads_the_inclusive_server_right(
    dialect: Any, stream: bool,
) -> None:
    """usage_dialect="openai-compatible" (for every call, for the host, or for the provider
    family; JSON or SSE) reads the inclusive input_tokens as the total: totals equal the
    server's, nothing is suspect, the record names the dialect and keeps the request format."""
    fake = InclusiveServer()
    recorder = Recorder(tokenizer="bytes/4", usage_dialect=dialect)
    client = anthropic_sdk(fake, recorder)
    for turns in (1, 2):
        if stream:
            messages: Any = talk("ann", turns)
            with client.messages.stream(model=MODEL, max_tokens=5, system=SYSTEM_BLOCKS,
                                        messages=messages) as events:
                events.until_done()
        else:
            send(client, talk("ann", turns))
    first, second = recorder.records
    assert [r.input_tokens_total for r in (first, second)] == fake.totals
    for record in (first, second):
        assert record.wire_format == "openai-compatible"
        assert record.verdict_detail["request_format"] == "anthropic"
        assert "usage_suspect" not in record.verdict_detail
        assert record.usage_inconsistent is False
        assert record.uncached_tokens is not None and record.uncached_tokens >= 0
        assert (record.ttft_ms is not None) is stream  # the SSE path was taken
    assert (first.verdict, second.verdict) == ("cold", "hit")
    assert second.cache_read_tokens == second.predicted_cache_read_tokens


@pytest.mark.parametrize("bad", ["anthropic-inclusive", {"gw": "nope"}, {"": "anthropic"}, 3])
def test_an_unknown_usage_dialect_is_a_configuration_error(bad: Any) -> None:
    """An unknown dialect name (or a malformed override) raises ConfigurationError
    (code usage-dialect) when the recorder is built, naming the known dialects."""
    with pytest.raises(ConfigurationError) as info:
        Recorder(usage_dialect=bad)
    assert info.value.code == "usage-dialect"


def test_a_resumed_recorder_segments_an_overridden_dialects_rows_in_their_request_format(
    tmp_path: Path,
) -> None:
    """A new process (a new recorder on the same ledger) diffs against a stored row recorded
    with the dialect override as the Anthropic request it was, not as a chat request."""
    fake = InclusiveServer()
    with Ledger(tmp_path / "calls.db", store_content=True) as ledger:
        first = Recorder(ledger, tokenizer="bytes/4", store_content=True,
                         usage_dialect="openai-compatible")
        send(anthropic_sdk(fake, first), talk("ann", 1))
        later = Recorder(ledger, tokenizer="bytes/4", store_content=True,
                         usage_dialect="openai-compatible")
        send(anthropic_sdk(fake, later), talk("ann", 2))
    (resumed,) = later.records
    assert resumed.predecessor_id == first.records[0].record_id
    assert resumed.verdict == "hit" and "unexpected_reads" not in resumed.verdict_detail
    assert "other_conversation" not in resumed.verdict_detail  # same first message: same chat
    assert resumed.cache_read_tokens == resumed.predicted_cache_read_tokens


_COUNTED_WITHOUT_BYTES: dict[str, tuple[str, dict[str, Any]]] = {
    "anthropic document by file_id": ("anthropic", {"messages": [{"role": "user", "content": [
        {"type": "document", "source": {"type": "file", "file_id": "file_011"}},
        {"type": "text", "text": "Summarize."}]}]}),
    "anthropic image by URL": ("anthropic", {"messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
        {"type": "text", "text": "Describe."}]}]}),
    "anthropic web search tool": ("anthropic", {
        "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}],
        "messages": [{"role": "user", "content": "What happened today?"}]}),
    "anthropic web fetch tool": ("anthropic", {
        "tools": [{"type": "web_fetch_20250910", "name": "web_fetch"}],
        "messages": [{"role": "user", "content": "Read https://example.com"}]}),
    "anthropic code execution tool": ("anthropic", {
        "tools": [{"type": "code_execution_20250825", "name": "code_execution"}],
        "messages": [{"role": "user", "content": "Plot it."}]}),
    "openai input_file by file_id": ("openai-responses", {"input": [{"role": "user", "content": [
        {"type": "input_file", "file_id": "file-abc"},
        {"type": "input_text", "text": "Summarize."}]}]}),
    "openai input_file by URL": ("openai-responses", {"input": [{"role": "user", "content": [
        {"type": "input_file", "file_url": "https://example.com/a.pdf"},
        {"type": "input_text", "text": "Summarize."}]}]}),
    "openai image_url by URL": ("openai-chat", {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        {"type": "text", "text": "Describe."}]}]}),
    "openai web_search tool": ("openai-responses", {
        "tools": [{"type": "web_search"}], "input": "What happened today?"}),
    "openai file_search tool": ("openai-responses", {
        "tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}],
        "input": "What does the contract say?"}),
}


@pytest.mark.parametrize("case", list(_COUNTED_WITHOUT_BYTES))
def test_content_counted_without_bytes_is_never_suspect(case: str) -> None:
    """A request whose content the provider counts without its bytes being in the request (a
    file or image by reference, a server tool that adds results) is not flagged however far
    its reported total is above our estimate; the same total on a text-only request is."""
    wire, body = _COUNTED_WITHOUT_BYTES[case]
    seg = segment_request(wire, {"model": "m", "max_tokens": 1, **body})
    usage = parse_usage("openai-chat", {"prompt_tokens": 50_000, "completion_tokens": 1})
    assert usage_suspicion(usage, 40, seg.segments, seg.data) is None
    text_only, data = _segments("Summarize.")
    assert usage_suspicion(usage, 40, text_only, data) is not None


def test_an_inline_image_or_a_tool_named_like_a_server_tool_keeps_the_check() -> None:
    """Base64 content has its bytes in the request (our estimate over-counts it, never
    under-counts), and a client tool whose *name* is web_search is a function the caller
    runs: a doubled total on either is still flagged."""
    usage = parse_usage("openai-chat", {"prompt_tokens": 50_000, "completion_tokens": 1})
    inline = segment_request("anthropic", {"model": "m", "max_tokens": 1, "messages": [
        {"role": "user", "content": [{"type": "image", "source": {
            "type": "base64", "media_type": "image/png", "data": "QUJD" * 100}}]}]})
    client_tool = segment_request("anthropic", {"model": "m", "max_tokens": 1, "tools": [
        {"name": "web_search", "description": "ours", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "hi"}]})
    for seg in (inline, client_tool):
        assert usage_suspicion(usage, 200, seg.segments, seg.data) is not None


def test_a_recorded_file_document_call_is_not_suspect_and_is_priced() -> None:
    """Recorded through the recorder, an Anthropic document by file_id whose reported input
    (50,000 tokens, the file's pages) is far above our estimate of the few request bytes is
    neither usage_suspect nor usage_inconsistent, and the report prices it."""
    recorder = Recorder(tokenizer="bytes/4")
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user",
            "content": [{"type": "document", "source": {"type": "file", "file_id": "file_1"}},
                        {"type": "text", "text": "Summarize."}]}]}
    pending = recorder.start("/v1/messages", {}, json.dumps(body).encode(),
                             host="api.anthropic.com")
    assert pending is not None
    answer = {"id": "m1", "type": "message", "role": "assistant", "content": [],
              "usage": {"input_tokens": 50_000, "output_tokens": 40,
                        "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}}
    record = recorder.finish(pending, Observation(status_code=200,
                                                body=json.dumps(answer).encode()))
    assert record is not None
    assert "usage_suspect" not in record.verdict_detail and not record.usage_inconsistent
    (row,) = recorder.summary().calls
    assert row.excluded is None and row.cost_usd is not None and row.cost_complete
