"""GeminiCache: an explicit-cache session against the emulator (create, N reads, a TTL
extension, delete), storage priced with its break-even, and the fallback where explicit
caching is not offered."""

from __future__ import annotations

import httpx
import pytest

from stableprompt import GeminiCache, PromptBuilder, Recorder, RecordingTransport, Tool
from stableprompt.emulator import Emulator, FakeClock

TOOLS = [Tool("get_weather", "Weather for a city.",
              {"type": "object", "properties": {"city": {"type": "string"}},
               "required": ["city"]})]
SYSTEM = "Use the shared weather handbook below. " * 800


def test_explicit_cache_session() -> None:
    """Create the cache for the head, read it on every turn (requests carry no
    systemInstruction/tools), extend its TTL past the original expiry, delete it; storage is
    priced and the break-even stated."""
    head = PromptBuilder(tokenizer=None).system(SYSTEM).tools(TOOLS).tail_slot("now").freeze()
    conv = head.conversation()
    recorder = Recorder()
    clock = FakeClock()
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
    assert [r.wire_format for r in recorder.records] == ["gemini"] * 4
    assert all(r.cache_read_tokens and r.cache_read_tokens >= cache.tokens
               for r in recorder.records)


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
