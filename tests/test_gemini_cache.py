"""GeminiCache: an explicit-cache session against the emulator (create, N reads, a TTL
extension, delete), storage priced with its break-even, and the fallback where explicit
caching is not offered."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

import httpx
import pytest

from stableprompt import (
    GeminiCache,
    HistoryError,
    InputError,
    PromptBuilder,
    Recorder,
    RecordingTransport,
    Tool,
    summarize,
)
from stableprompt._accounting._summary import summarize_stream
from stableprompt._canonical import loads
from stableprompt._report._storage import storage_lines
from stableprompt._wire import gemini as gemini_wire
from stableprompt.emulator import Emulator, FakeClock

TOOLS = [Tool("get_weather", "Weather for a city.",
              {"type": "object", "properties": {"city": {"type": "string"}},
               "required": ["city"]})]
SYSTEM = "Use the shared weather handbook below. " * 800


def test_explicit_cache_session() -> None:
    """Create the cache for the head, read it on every turn (requests carry no
    systemInstruction/tools), extend its TTL past the original expiry, delete it; storage is
    priced and the break-even stated, by the cache and by the report of its recorded rows:
    the create / update / delete calls are rows of their own, out of the calls."""
    head = PromptBuilder(tokenizer=None).system(SYSTEM).tools(TOOLS).tail_slot("now").freeze()
    conv = head.conversation()
    clock = FakeClock()
    recorder = Recorder(clock=clock)
    with Emulator(clock=clock) as emu, httpx.Client(
            base_url=emu.base_url, transport=RecordingTransport(recorder=recorder)) as http:
        with GeminiCache("gemini-2.5-pro", http=http, api_key="k", base_url=emu.base_url,
                         ttl_s=300) as cache:
            conv.user("Weather in Paris?")
            cache.create(conv.render(tail={"now": "t0"}))
            assert cache.name and cache.tokens and cache.tokens > 2048
            reads = []
            for turn in range(4):
                if turn == 2:
                    clock.advance(200)
                    cache.extend(600)  # the conversation lives on: past the first 300 s
                    clock.advance(200)
                request = conv.render(tail={"now": f"t{turn}"}).to_gemini(
                    model="gemini-2.5-pro", cache=cache)
                assert "systemInstruction" not in request.body and "tools" not in request.body
                response = http.post(request.path, content=request.content, headers={
                    "content-type": "application/json", "x-goog-api-key": "k"}).json()
                reads.append(response["usageMetadata"]["cachedContentTokenCount"])
                conv.assistant(f"Sunny, turn {turn}.")
                conv.user(f"And turn {turn + 1}?")
            assert all(read >= cache.tokens for read in reads)
            name = cache.name
            storage = cache.storage_usd()
            assert storage == pytest.approx(cache.tokens / 1e6 * 4.50 * 300 / 3600)
            breakeven = cache.break_even_reads()
            assert breakeven is not None and breakeven >= 1
        assert cache.name is None  # deleted on exit
        gone = http.get(f"/v1beta/{name}", headers={"x-goog-api-key": "k"})
        assert gone.status_code == 404
    rows = recorder.records
    ops = [r.verdict_detail.get("gemini_cache", {}).get("op") for r in rows]
    assert ops == ["create", None, None, "update", None, None, "delete"]
    assert all(r.wire_format == "gemini" and r.status_code == 200 for r in rows)
    reads = [r for r, op in zip(rows, ops, strict=True) if op is None]
    assert all(r.cache_read_tokens and r.cache_read_tokens >= cache.tokens for r in reads)
    assert {r.verdict_detail["cached_content"] for r in reads} == {name}
    # promptTokenCount includes the cache the body only names: not a suspect usage; the
    # recorder saw the cache created, so each read predicts at least the whole cache
    assert not any(r.verdict_detail.get("usage_suspect") for r in reads)
    assert all(r.predicted_cache_read_tokens == cache.tokens and r.verdict == "hit"
               for r in reads)
    report = summarize(rows)
    assert report.records == 7 and len(report.calls) == 4  # cache calls are not prompts
    # the create row explains the reads: no "read more than any earlier call explains" note
    assert report.reads_beyond_ledger == 0
    assert all(row.ceiling_tokens >= cache.tokens for row in report.calls)
    assert report.overall.excluded == 0 and report.hit_rate is not None
    assert report.overall.agreement == 1.0
    (entry,) = report.explicit_caches.caches
    assert (entry.name, entry.tokens, entry.reads, entry.deleted) == (name, cache.tokens, 4, True)
    assert entry.hours == pytest.approx(400 / 3600)  # created at 0, deleted at 400 s
    assert entry.storage_usd == pytest.approx(cache.tokens / 1e6 * 4.50 * 400 / 3600)
    assert entry.creation_usd == pytest.approx(cache.tokens / 1e6 * 1.25)
    saving = cache.tokens / 1e6 * (1.25 - 0.125)
    assert entry.break_even_reads == math.ceil(entry.storage_usd / saving) and entry.paid_off
    assert report.cost_usd is not None and report.overall.cost_usd is not None
    assert report.cost_usd == pytest.approx(report.overall.cost_usd + entry.storage_usd
                                            + entry.creation_usd)
    lines = storage_lines(report)
    assert f"explicit cache {name} (gemini-2.5-pro)" in lines[0] and "deleted" in lines[0]
    assert "paid off (4 served)" in lines[0] and "storage $" in lines[-1]
    # the streaming pass of ``stableprompt report`` prices the same caches the same way
    streamed = summarize_stream(rows)
    assert streamed.records == 7 and streamed.calls_total == 4
    assert streamed.explicit_caches.to_json() == report.explicit_caches.to_json()
    assert streamed.cost_usd == pytest.approx(report.cost_usd)
    assert storage_lines(streamed) == lines


def test_unsupported_model_and_api_fall_back() -> None:
    """Gemini 4 Argon and the Interactions API: no cache is created, the fallback says why,
    requests are rendered whole (implicit caching)."""
    head = PromptBuilder(tokenizer=None).system(SYSTEM).tools(TOOLS).freeze()
    conv = head.conversation()
    conv.user("hi")
    with httpx.Client() as http:
        with pytest.warns(UserWarning, match="no explicit caching"):
            argon = GeminiCache("gemini-4-argon", http=http)
        with pytest.warns(UserWarning, match="implicit caching"):
            interactions = GeminiCache("gemini-2.5-pro", http=http, api="interactions")
        for cache in (argon, interactions):
            assert not cache.explicit and cache.fallback_reason
            cache.create(conv.render())
            body = conv.render().to_gemini(model=cache.model, cache=cache).body
            assert "systemInstruction" in body and "cachedContent" not in body
            cache.delete()


def _conversation() -> Any:
    conv = PromptBuilder(tokenizer=None).system(SYSTEM).tools(TOOLS).freeze().conversation()
    conv.user("hi")
    return conv


@pytest.mark.parametrize(("ttl_s", "sent"), [(2_000_000, "2000000s"), (1234.56789, "1234.56789s"),
                                             (300, "300s"), (0.5, "0.5s")])
def test_ttl_is_sent_as_a_duration_the_api_parses(ttl_s: float, sent: str) -> None:
    """A TTL is sent as decimal seconds: ``"2e+06s"`` (what ``:g`` made of 23 days) is no
    Duration for protobuf's own JSON parser, so the API refused it; nor is a TTL rounded to
    6 digits (the cache would be priced for another life than the one asked)."""
    duration_pb2 = pytest.importorskip("google.protobuf.duration_pb2")
    conv = _conversation()
    clock = FakeClock()
    with Emulator(clock=clock) as emu, httpx.Client(base_url=emu.base_url) as http:
        cache = GeminiCache("gemini-2.5-pro", http=http, base_url=emu.base_url, ttl_s=ttl_s)
        body = gemini_wire.cache_body(conv.render(), model="gemini-2.5-pro", ttl_s=ttl_s)
        assert loads(body)["ttl"] == sent
        parsed = duration_pb2.Duration()
        parsed.FromJsonString(sent)  # the official parser accepts it
        assert parsed.ToTimedelta().total_seconds() == pytest.approx(ttl_s)
        cache.create(conv.render())
        cache.extend(ttl_s * 2)
        info = http.get(f"/v1beta/{cache.name}").json()
        expires = datetime.fromisoformat(info["expireTime"].replace("Z", "+00:00"))
        assert expires.timestamp() == pytest.approx(clock() + ttl_s * 2, abs=1e-3)
        cache.delete()


@pytest.mark.parametrize("ttl_s", [0, -5, math.nan, math.inf, True, "300"])
def test_bad_ttl_is_a_typed_error_before_any_call(ttl_s: object) -> None:
    """A TTL that is not a finite number of seconds > 0 fails at construction and in
    extend(), typed, before anything is sent (no cache half made, nothing billed)."""
    with httpx.Client(transport=httpx.MockTransport(lambda r: pytest.fail("sent"))) as http:
        with pytest.raises(InputError) as caught:
            GeminiCache("gemini-2.5-pro", http=http, ttl_s=ttl_s)  # type: ignore[arg-type]
        assert caught.value.code == "gemini-cache-ttl"
        cache = GeminiCache("gemini-2.5-pro", http=http)
        with pytest.raises(InputError):
            cache.extend(ttl_s)  # type: ignore[arg-type]


def test_lifecycle_failures_leak_nothing_and_hide_nothing() -> None:
    """A second create while one is held is refused (the first would stay billed and
    unreachable); a cache that expired (404 on delete) counts as deleted, so leaving the
    ``with`` block does not raise; when the block fails and the delete fails too, the
    block's error goes on, with the delete failure as a note."""
    conv = _conversation()
    clock = FakeClock()
    with Emulator(clock=clock) as emu, httpx.Client(base_url=emu.base_url) as http:
        with GeminiCache("gemini-2.5-pro", http=http, base_url=emu.base_url, ttl_s=60) as cache:
            cache.create(conv.render())
            first = cache.name
            with pytest.raises(InputError) as caught:
                cache.create(conv.render())
            assert caught.value.code == "gemini-cache-held" and cache.name == first
            clock.advance(120)  # expired on the server
        assert cache.name is None
        with pytest.raises(ValueError, match="the caller's own error") as failed, \
                pytest.warns(UserWarning, match="could not be deleted"), \
                GeminiCache("gemini-2.5-pro", http=http, base_url=emu.base_url) as other:
            other.create(conv.render())
            other._http = httpx.Client(transport=httpx.MockTransport(  # the delete fails
                lambda r: httpx.Response(503, request=r)))
            raise ValueError("the caller's own error")
        assert any("could not be deleted" in note for note in failed.value.__notes__)
        assert other.name is not None  # kept: the delete can be tried again


def test_create_answer_without_a_usable_token_count_is_unknown_not_negative() -> None:
    """A create answer with a negative or missing token count leaves the cache's tokens
    unknown (storage_usd() None), never a negative price; one without a name is a typed
    error."""
    conv = _conversation()
    answers = iter([{"name": "cachedContents/x", "usageMetadata": {"totalTokenCount": -5000}},
                    {"name": "cachedContents/y"}, {"usageMetadata": {"totalTokenCount": 9}}])
    with httpx.Client(transport=httpx.MockTransport(
            lambda r: httpx.Response(200, json=next(answers)))) as http:
        for _ in range(2):
            cache = GeminiCache("gemini-2.5-pro", http=http).create(conv.render())
            assert cache.tokens is None and cache.storage_usd() is None
            assert cache.break_even_reads() is None
        with pytest.raises(InputError) as caught:
            GeminiCache("gemini-2.5-pro", http=http).create(conv.render())
        assert (caught.value.code, caught.value.pointer) == ("gemini-cache-answer", "/name")


@pytest.mark.parametrize("ttl", ["2e+06s", "infs", "nans", "-5s", "300"])
def test_emulator_refuses_what_protobuf_refuses(ttl: str) -> None:
    """The emulator reads a ``ttl`` as protobuf's JSON parser does: decimal seconds with an
    ``s`` (it accepted ``"2e+06s"`` and answered 500 on ``"nans"``)."""
    body = {"model": "models/gemini-2.5-pro", "ttl": ttl,
            "systemInstruction": {"parts": [{"text": SYSTEM}]}}
    with Emulator(clock=FakeClock()) as emu, httpx.Client(base_url=emu.base_url) as http:
        assert http.post("/v1beta/cachedContents", json=body).status_code == 400
        body["ttl"] = "300.5s"
        assert http.post("/v1beta/cachedContents", json=body).status_code == 200


def _create_row(name: str, tokens: object, *, ts: float = 1_800_000_000.0,
                usage: bool = True) -> Any:
    from stableprompt._recording._gemini_caches import cache_record
    answer: dict[str, Any] = {"name": name, "model": "models/gemini-2.5-pro",
                              "createTime": "2027-01-15T08:00:00Z",
                              "expireTime": "2027-01-15T08:05:00Z"}
    if usage:
        answer["usageMetadata"] = {"totalTokenCount": tokens}
    return cache_record(op="create", path="/v1beta/cachedContents", request_body=b"{}",
                        headers={}, ts=ts, status_code=200,
                        response_body=json.dumps(answer).encode())


@pytest.mark.parametrize("tokens", [-5000, None, "5000", 5000.0])
def test_report_never_prices_a_count_that_is_no_count(tokens: object) -> None:
    """A create answer whose totalTokenCount is negative, missing or not an integer: the row
    keeps no tokens, the cache is unpriced (counted), the report says why and its total is a
    lower bound; before, -5,000 tokens gave negative storage, creation and total cost."""
    row = _create_row("cachedContents/odd", tokens, usage=tokens is not None)
    assert row is not None and "tokens" not in row.verdict_detail["gemini_cache"]
    report = summarize([row])
    (entry,) = report.explicit_caches.caches
    assert entry.tokens is None and entry.storage_usd is None and entry.creation_usd is None
    assert report.explicit_caches.unpriced == 1 and (report.cost_usd or 0.0) >= 0.0
    lines = storage_lines(report)
    assert "the create answer gave no token count" in lines[0]
    assert "≥$" in lines[-1] and "1 cache unpriced" in lines[-1]
    row.verdict_detail["gemini_cache"]["tokens"] = -5000  # a row written by another version
    assert summarize([row]).explicit_caches.caches[0].storage_usd is None


@pytest.mark.parametrize("ttl", [float("inf"), float("nan"), -100, True, "300s"])
def test_a_ttl_that_is_no_duration_is_no_ttl(ttl: object) -> None:
    """A create row whose ``ttl_s`` is no duration (a hand-edited ledger: JSON ``Infinity``
    read back as inf was an OverflowError out of the report) is read as no TTL given: the
    default TTL, as for a row without one; never a crash, a negative or an endless cost."""
    unset = _create_row("cachedContents/x", 5000)
    del unset.verdict_detail["gemini_cache"]["ttl_s"]
    expected = summarize([unset]).explicit_caches.caches[0]
    row = _create_row("cachedContents/x", 5000)
    row.verdict_detail["gemini_cache"]["ttl_s"] = ttl
    report = summarize([row])
    cache = report.explicit_caches.caches[0]
    assert (cache.hours, cache.storage_usd) == (expected.hours, expected.storage_usd)
    assert expected.storage_usd is not None and expected.storage_usd > 0
    json.dumps(report.to_json(), allow_nan=False)


def test_report_on_a_cache_created_elsewhere_says_its_life_is_unknown() -> None:
    """Reads and an update of a cache this ledger never saw created (another process): the
    cache is listed, unpriced, with that reason, not as a cache that lived 0 h with no
    price for its model."""
    from stableprompt._recording._gemini_caches import cache_record
    answer = {"name": "cachedContents/elsewhere", "model": "models/gemini-2.5-pro",
              "usageMetadata": {"totalTokenCount": 5000}, "updateTime": "2027-01-15T08:00:00Z",
              "expireTime": "2027-01-15T08:10:00Z"}
    row = cache_record(op="update", path="/v1beta/cachedContents/elsewhere",
                       request_body=b'{"ttl":"600s"}', headers={}, ts=1_800_000_000.0,
                       status_code=200, response_body=json.dumps(answer).encode())
    assert row is not None
    report = summarize([row])
    lines = storage_lines(report)
    assert "life unknown (not created in this ledger)" in lines[0]
    assert "created by another process" in lines[0] and "no storage or read price" not in lines[0]
    assert report.explicit_caches.unpriced == 1 and "≥$" in lines[-1]


def test_a_cache_of_leading_history_serves_only_that_history() -> None:
    """A cache holding the head and a conversation's first messages is referenced by that
    conversation's later requests, and refused for another conversation of the same head and
    for this one after a compaction: the request would have sent the model the cache's
    messages (another user's, or the replaced history) in place of its own, and after the
    compaction an empty ``contents``."""
    head = PromptBuilder(tokenizer=None).system(SYSTEM).freeze()
    alice, bob = head.conversation(), head.conversation()
    alice.user("I am Alice.")
    alice.assistant("Hello Alice.")
    bob.user("I am Bob.")
    bob.assistant("Hello Bob.")
    bob.user("What is my name?")
    with Emulator(clock=FakeClock()) as emu, httpx.Client(base_url=emu.base_url) as http, \
            GeminiCache("gemini-2.5-pro", http=http, base_url=emu.base_url, ttl_s=300) as cache:
        cache.create(alice.render(), messages=2)
        alice.user("What is my name?")
        body = alice.render().to_gemini(model="gemini-2.5-pro", cache=cache).body
        assert body["contents"] == [{"parts": [{"text": "What is my name?"}], "role": "user"}]
        with pytest.raises(InputError, match="leading message"):
            bob.render().to_gemini(model="gemini-2.5-pro", cache=cache)
        alice.assistant("Alice.")
        alice.compact("The user is Alice.", advise=False)
        alice.user("Go on.")
        with pytest.raises(InputError, match="leading message"):
            alice.render().to_gemini(model="gemini-2.5-pro", cache=cache)


def test_requests_the_api_would_refuse_are_typed_errors() -> None:
    """A request after a cache that holds the whole history, with no tail, would send an
    empty ``contents`` (required by the API); ``cachedContent`` passed as a param would go
    out next to ``systemInstruction`` (the API refuses both together): both are typed errors
    (before, both rendered)."""
    head = PromptBuilder(tokenizer=None).system(SYSTEM).freeze()
    conv = head.conversation()
    conv.user("hi")
    conv.assistant("Hello.")
    with Emulator(clock=FakeClock()) as emu, httpx.Client(base_url=emu.base_url) as http, \
            GeminiCache("gemini-2.5-pro", http=http, base_url=emu.base_url) as cache:
        cache.create(conv.render(), messages=2)
        with pytest.raises(HistoryError) as caught:
            conv.render().to_gemini(model="gemini-2.5-pro", cache=cache)
        assert (caught.value.code, caught.value.pointer) == ("history-empty", "/contents")
        conv.user("More?")
        assert conv.render().to_gemini(model="gemini-2.5-pro", cache=cache).body["contents"]
        with pytest.raises(InputError) as clash:
            conv.render().to_gemini(model="gemini-2.5-pro", cachedContent=cache.name)
        assert clash.value.code == "render-param-clash"
