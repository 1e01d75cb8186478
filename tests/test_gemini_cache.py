"""GeminiCache: an explicit-cache session against the emulator (create, N reads, a TTL
extension, delete), storage priced with its break-even, and the fallback where explicit
caching is not offered."""

from __future__ import annotations

import math

import httpx
import pytest

from stableprompt import GeminiCache, PromptBuilder, Recorder, RecordingTransport, Tool, summarize
from stableprompt._accounting._summary import summarize_stream
from stableprompt._report._storage import storage_lines
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
