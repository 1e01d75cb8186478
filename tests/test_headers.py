"""Cache-relevant request headers (issue 26 item 4): the allow-list (``_policy.CACHE_HEADERS``),
what every recording path keeps of a request's headers (``_http.cache_headers``: the official
SDKs over a RecordingTransport, a ledger row, a proxy capture), and how the attribution compares
them (``header_changes``; a miss on an unchanged prefix with a changed header is
``header-change``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai

from stableprompt import Ledger
from stableprompt._accounting._causes import fix_for
from stableprompt._policy import (
    CACHE_HEADERS,
    describe_header_change,
    header_changes,
    header_items,
    header_rules,
)
from stableprompt._proxy._capture import CaptureWriter
from stableprompt._recording._http import cache_headers
from stableprompt._recording._recorder import Recorder
from stableprompt._recording._transport import RecordingTransport
from test_transport import API_KEY, OPENAI_KEY, SYSTEM, FakeProvider

MODEL = "claude-sonnet-4-6"
BETAS = ("interleaved-thinking-2025-05-14,context-1m-2025-08-07,"
         "fine-grained-tool-streaming-2025-05-14")
REORDERED = ("fine-grained-tool-streaming-2025-05-14,interleaved-thinking-2025-05-14,"
             "context-1m-2025-08-07")
DROPPED = "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14"


class BetaKeyedProvider(FakeProvider):
    """The exact-prefix fake, with a cache per ``anthropic-beta`` set: a stand-in for a
    provider whose cached prefix a beta change voids (only to make a miss happen; our
    attribution does not assume it)."""

    def __init__(self) -> None:
        super().__init__()
        self.stores: dict[tuple[str, ...], set[str]] = {}

    def __call__(self, request: Any) -> Any:
        betas = header_items("anthropic-beta", request.headers.get("anthropic-beta", ""))
        self.store = self.stores.setdefault(betas, set())
        return super().__call__(request)


def _sdk(fake: FakeProvider, recorder: Recorder) -> anthropic.Anthropic:
    http = httpx2.Client(transport=RecordingTransport(httpx2.MockTransport(fake),
                                                      recorder=recorder))
    return anthropic.Anthropic(api_key=API_KEY, base_url="http://provider.test",
                               http_client=http, max_retries=0)


def _send(client: anthropic.Anthropic, turn: int, betas: str | None) -> None:
    messages: list[dict[str, Any]] = []
    for t in range(turn):
        if t:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
        messages.append({"role": "user", "content": [{"type": "text", "text": f"q{t}"}]})
    messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    create: Any = client.messages.create
    create(model=MODEL, max_tokens=5, messages=messages,
           system=[{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
           extra_headers=None if betas is None else {"anthropic-beta": betas})


# ---------------------------------------------------------------------------- the allow-list


def test_the_allow_list_is_dated_sourced_data_without_credentials() -> None:
    """Every allow-listed header has a source and a date, belongs to a wire format, and none
    is a credential or auth header; only anthropic-beta is read as a set."""
    names = {rule.name for rule in CACHE_HEADERS}
    assert {"anthropic-beta", "anthropic-version", "openai-beta"} <= names
    assert not names & {"x-api-key", "authorization", "api-key", "x-goog-api-key",
                        "proxy-authorization", "cookie"}
    for rule in CACHE_HEADERS:
        assert rule.name == rule.name.lower() and rule.source and rule.as_of >= "2026-12-01"
        assert rule.wire_formats
    assert [r.name for r in CACHE_HEADERS if r.separator] == ["anthropic-beta"]
    assert header_rules("gemini") == () and header_rules("bedrock-converse") == ()


def test_a_set_valued_header_compares_as_a_set_and_others_as_strings() -> None:
    """anthropic-beta: order, spaces and repeats carry no meaning; a dropped item is named.
    anthropic-version and openai-beta compare as one string."""
    assert header_items("anthropic-beta", "b, a,,a") == ("a", "b")
    assert header_changes({"anthropic-beta": BETAS}, {"anthropic-beta": REORDERED}) == []
    (change,) = header_changes({"anthropic-beta": BETAS, "anthropic-version": "2023-06-01"},
                               {"anthropic-beta": DROPPED, "anthropic-version": "2023-06-01"})
    assert change["removed"] == ["context-1m-2025-08-07"] and change["added"] == []
    assert describe_header_change(change).startswith(
        "anthropic-beta: dropped 'context-1m-2025-08-07'")
    (version,) = header_changes({"anthropic-version": "2023-06-01"},
                                {"anthropic-version": "2023-01-01"})
    assert "removed" not in version
    assert describe_header_change(version).startswith(
        "anthropic-version: '2023-06-01' -> '2023-01-01'")
    assert header_changes({"openai-beta": "a=v1,b=v2"}, {"openai-beta": "b=v2,a=v1"}) != []
    assert header_changes(None, {"anthropic-beta": "x"}) == []  # unknown: never a change
    (gone,) = header_changes({"anthropic-beta": "x"}, {})
    assert gone["removed"] == ["x"] and describe_header_change(gone).startswith(
        "anthropic-beta: dropped 'x'")


def test_only_allow_listed_headers_are_read() -> None:
    """cache_headers keeps the allow-listed headers of the request's format (any case, values
    as sent) and nothing else: no key, no auth, no other header."""
    headers = httpx.Headers({"X-Api-Key": API_KEY, "Authorization": f"Bearer {OPENAI_KEY}",
                             "Anthropic-Beta": BETAS, "anthropic-version": "2023-06-01",
                             "OpenAI-Organization": "org-abc", "user-agent": "x"})
    assert cache_headers(headers, "anthropic") == {"anthropic-beta": BETAS,
                                                   "anthropic-version": "2023-06-01"}
    assert cache_headers(headers, "openai-chat") == {"openai-organization": "org-abc"}
    assert cache_headers({"X-Api-Key": API_KEY}, "anthropic") == {}
    assert cache_headers(headers, "gemini") is None


# ---------------------------------------------------------------------------- recording


def test_the_official_sdks_headers_reach_the_ledger_row(tmp_path: Path) -> None:
    """Through the official anthropic and openai SDKs (RecordingTransport), a row keeps the
    allow-listed headers the SDK sent (its anthropic-version, the caller's betas, OpenAI's
    organization and project) and never the key, in the row or the database file."""
    db = tmp_path / "calls.db"
    recorder = Recorder(ledger=Ledger(db))
    _send(_sdk(FakeProvider(), recorder), 1, BETAS)
    http = httpx2.Client(transport=RecordingTransport(httpx2.MockTransport(FakeProvider()),
                                                      recorder=recorder))
    client = openai.OpenAI(api_key=OPENAI_KEY, base_url="http://provider.test/v1",
                           http_client=http, max_retries=0, organization="org-test",
                           project="proj_test")
    client.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "hi"}])
    recorder.flush()
    first, second = Ledger(db, read_only=True).records()
    assert first.request_headers == {  # the SDK's own version header, as it sent it
        "anthropic-beta": BETAS, "anthropic-version": anthropic._constants.ANTHROPIC_API_VERSION}
    assert second.request_headers == {"openai-organization": "org-test",
                                      "openai-project": "proj_test"}
    raw = db.read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob("calls.db-*"))
    assert API_KEY.encode() not in raw and OPENAI_KEY.encode() not in raw


def test_a_reordered_beta_set_is_no_change_and_no_miss() -> None:
    """A gateway that reorders anthropic-beta on every request: each call is a hit, and no
    header change is noted."""
    recorder = Recorder()
    client = _sdk(BetaKeyedProvider(), recorder)
    records = []
    for turn, betas in enumerate((BETAS, REORDERED, BETAS, REORDERED), start=1):
        _send(client, turn, betas)
        recorder.flush()
        records.append(recorder.records[-1])
    assert [r.verdict for r in records] == ["cold", "hit", "hit", "hit"]
    assert all("header_changes" not in r.verdict_detail for r in records)
    assert [r.request_headers["anthropic-beta"] for r in records  # type: ignore[index]
            ] == [BETAS, REORDERED, BETAS, REORDERED]  # kept as sent


def test_a_dropped_beta_with_a_miss_is_named_with_its_fix() -> None:
    """A dropped beta on an unchanged prefix, and the provider misses: client_mutation with
    cause header-change at /headers/anthropic-beta, naming the dropped beta, with a fix."""
    recorder = Recorder()
    client = _sdk(BetaKeyedProvider(), recorder)
    _send(client, 1, BETAS)
    _send(client, 2, DROPPED)
    recorder.flush()
    record = recorder.records[-1]
    detail: Any = record.verdict_detail
    assert record.verdict == "client_mutation"
    assert detail["cause"] == "header-change" and detail["path"] == "/headers/anthropic-beta"
    assert detail["segment"] == "headers"
    assert "dropped 'context-1m-2025-08-07'" in str(detail["cause_detail"])
    assert detail["snippet_a"] == BETAS and detail["snippet_b"] == DROPPED
    predicted = record.predicted_cache_read_tokens
    assert predicted is not None and detail["lost_tokens"] == predicted > 0
    assert detail["header_changes"][0]["removed"] == ["context-1m-2025-08-07"]
    fix = fix_for("header-change")
    assert fix is not None and "anthropic-beta" in fix


def test_a_dropped_beta_without_a_miss_is_noted_not_blamed() -> None:
    """A provider that read the prefix anyway: the call is a hit, and the dropped beta is in
    header_changes (evidence, no cause)."""
    recorder = Recorder()
    client = _sdk(FakeProvider(), recorder)
    _send(client, 1, BETAS)
    _send(client, 2, None)
    recorder.flush()
    record = recorder.records[-1]
    assert record.verdict == "hit" and "cause" not in record.verdict_detail
    changes: Any = record.verdict_detail["header_changes"]
    (change,) = changes
    assert change["after"] is None and len(change["removed"]) == 3


def test_a_predecessor_from_the_ledger_carries_its_headers(tmp_path: Path) -> None:
    """A recorder in a new process compares with the previous process's row: the row's
    request_headers are the predecessor's headers, so a dropped beta is still named."""
    db = tmp_path / "calls.db"
    fake = BetaKeyedProvider()
    first = Recorder(ledger=Ledger(db))
    _send(_sdk(fake, first), 1, BETAS)
    first.close()
    second = Recorder(ledger=Ledger(db))
    _send(_sdk(fake, second), 2, DROPPED)
    second.close()
    record = Ledger(db, read_only=True).records()[-1]
    assert record.verdict == "client_mutation"
    assert record.verdict_detail["cause"] == "header-change"


def test_a_capture_line_holds_only_the_allow_listed_headers(tmp_path: Path) -> None:
    """The proxy's capture writes the allow-listed headers as sent and never a key or auth."""
    writer = CaptureWriter(tmp_path)
    headers = httpx.Headers({"x-api-key": API_KEY, "anthropic-beta": BETAS,
                             "anthropic-version": "2023-06-01", "cookie": "c=1"})
    writer.write(path="/v1/messages", body=b'{"model": "m", "messages": []}', headers=headers,
                 wire_format="anthropic", session=None)
    writer.write(path="/v1/responses", body=b'{"model": "m", "input": "x"}',
                 headers=httpx.Headers({"authorization": f"Bearer {OPENAI_KEY}"}),
                 wire_format="openai-responses", session=None)
    writer.close()
    text = writer.path.read_text()
    one, two = (json.loads(line) for line in text.splitlines())
    assert one["headers"] == {"anthropic-beta": BETAS, "anthropic-version": "2023-06-01"}
    assert two["headers"] == {}
    assert API_KEY not in text and OPENAI_KEY not in text and "c=1" not in text


def test_our_clients_record_the_headers_they_send() -> None:
    """AnthropicClient (its own anthropic-version, the request's and the diagnostics' betas
    merged): the row keeps exactly the allow-listed headers the provider got."""
    import httpx as plain_httpx

    from stableprompt import PromptBuilder
    from stableprompt._client._clients import ANTHROPIC_VERSION, AnthropicClient

    fake = FakeProvider(plain_httpx)
    recorder = Recorder(tokenizer="bytes/4")
    client = AnthropicClient(API_KEY, base_url="http://provider.test", recorder=recorder,
                             transport=plain_httpx.MockTransport(fake), diagnostics=True)
    head = PromptBuilder(tokenizer="bytes/4").system(SYSTEM).freeze()
    conversation = head.conversation()
    conversation.user("hello")
    client.send(conversation.render().to_anthropic(model=MODEL, max_tokens=5))
    recorder.flush()
    sent = fake.requests[0].headers
    (record,) = recorder.records
    assert record.request_headers == {"anthropic-beta": sent["anthropic-beta"],
                                      "anthropic-version": ANTHROPIC_VERSION}
