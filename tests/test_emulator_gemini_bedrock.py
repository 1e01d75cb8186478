"""Emulator endpoints for Gemini (generateContent, streamGenerateContent, cachedContents CRUD)
and Bedrock Converse / ConverseStream, with each provider's documented cache rules."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from stableprompt._wire import bedrock
from stableprompt.emulator import Emulator, FakeClock

SYSTEM = "Answer from the shared weather notes. " * 900
G = "/v1beta/models/gemini-2.5-pro:generateContent"
HEADERS = {"content-type": "application/json", "x-goog-api-key": "k"}


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(clock=FakeClock()) as emulator:
        yield emulator


def _post(emu: Emulator, path: str, body: Any, method: str = "POST") -> httpx.Response:
    with httpx.Client(base_url=emu.base_url) as client:
        return client.request(method, path, json=body, headers=HEADERS)


def _generate(text: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": text}]}], **extra}
    return body


def test_gemini_implicit_cache_reads_the_longest_prefix(emu: Emulator) -> None:
    """A repeated prefix above the minimum is read (inclusive promptTokenCount, read in
    cachedContentTokenCount); below the minimum nothing is."""
    first = _post(emu, G, _generate("q1", systemInstruction={"parts": [{"text": SYSTEM}]})).json()
    second = _post(emu, G, _generate("q2", systemInstruction={"parts": [{"text": SYSTEM}]})).json()
    assert "cachedContentTokenCount" not in first["usageMetadata"]
    meta = second["usageMetadata"]
    assert 2048 <= meta["cachedContentTokenCount"] < meta["promptTokenCount"]
    short = _generate("tiny", systemInstruction={"parts": [{"text": "short"}]})
    _post(emu, G, short)
    assert "cachedContentTokenCount" not in _post(emu, G, short).json()["usageMetadata"]


def test_gemini_implicit_reads_are_whole_2048_token_blocks(emu: Emulator) -> None:
    """Implicit reads end on multiples of 2,048 tokens, also inside a block: two system
    prompts sharing a long start and differing at the end read the shared start's whole
    blocks, reported less the framing (template) tokens in them, as Gemini's are
    (python-genai#2064: 2,037 / 4,085 / 6,134)."""
    first = _post(emu, G, _generate("q1", systemInstruction={"parts": [{"text": SYSTEM + "A"}]}))
    total = first.json()["usageMetadata"]["promptTokenCount"]
    meta = _post(emu, G, _generate("q2", systemInstruction={"parts": [{"text": SYSTEM + "B"}]})
                 ).json()["usageMetadata"]
    read = meta["cachedContentTokenCount"]
    blocks = -(-read // 2048)  # the block count: a multiple of 2,048, a few tokens under
    assert 0 < blocks * 2048 - read < 16 and read <= total
    assert read > total - 2048 - 16  # every whole block of the shared start


def test_gemini_explicit_cache_lifecycle(emu: Emulator) -> None:
    """Create (ttl), read it whole from a request that references it, refuse
    systemInstruction with it, extend its TTL, expire and delete it."""
    created = _post(emu, "/v1beta/cachedContents", {
        "model": "models/gemini-2.5-pro", "systemInstruction": {"parts": [{"text": SYSTEM}]},
        "ttl": "300s"}).json()
    name = created["name"]
    tokens = created["usageMetadata"]["totalTokenCount"]
    used = _post(emu, G, _generate("q", cachedContent=name)).json()["usageMetadata"]
    assert used["cachedContentTokenCount"] == tokens < used["promptTokenCount"]
    clash = _post(emu, G, _generate("q", cachedContent=name,
                                    systemInstruction={"parts": [{"text": "x"}]}))
    assert clash.status_code == 400 and clash.json()["error"]["status"] == "INVALID_ARGUMENT"
    emu.advance(200)
    patched = _post(emu, f"/v1beta/{name}", {"ttl": "600s"}, method="PATCH")
    assert patched.status_code == 200
    emu.advance(300)  # past the first TTL, inside the extended one
    assert _post(emu, f"/v1beta/{name}", None, method="GET").status_code == 200
    assert _post(emu, f"/v1beta/{name}", None, method="DELETE").status_code == 200
    gone = _post(emu, G, _generate("q", cachedContent=name))
    assert gone.status_code == 404


def test_gemini_explicit_cache_refused_where_unsupported(emu: Emulator) -> None:
    """Creating a cache on Gemini 4 Argon or below the minimum is a 400."""
    argon = _post(emu, "/v1beta/cachedContents", {
        "model": "models/gemini-4-argon", "systemInstruction": {"parts": [{"text": SYSTEM}]}})
    assert argon.status_code == 400 and "not supported" in argon.json()["error"]["message"]
    small = _post(emu, "/v1beta/cachedContents", {
        "model": "models/gemini-2.5-pro", "systemInstruction": {"parts": [{"text": "hi"}]}})
    assert small.status_code == 400 and "too small" in small.json()["error"]["message"]


def test_gemini_stream_sse_ends_with_the_usage(emu: Emulator) -> None:
    """streamGenerateContent?alt=sse: data chunks, the last with finishReason and usage."""
    with httpx.Client(base_url=emu.base_url) as client:
        text = client.post(G.replace("generateContent", "streamGenerateContent") + "?alt=sse",
                           json=_generate("hello"), headers=HEADERS).text
    chunks = [line for line in text.split("\n") if line.startswith("data: ")]
    assert '"finishReason":"STOP"' in chunks[-1] and "usageMetadata" in chunks[-1]


C = "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse"


def _converse(text: str, points: int = 1, ttl: str | None = None) -> dict[str, Any]:
    point: dict[str, Any] = {"cachePoint": {"type": "default", **({"ttl": ttl} if ttl else {})}}
    system: list[dict[str, Any]] = [{"text": SYSTEM}, point]
    for i in range(points - 1):
        system += [{"text": f"more {i}"}, point]
    return {"system": system, "messages": [{"role": "user", "content": [{"text": text}]}]}


def test_converse_cache_points_write_then_read(emu: Emulator) -> None:
    """A cachePoint after the system writes (exclusive inputTokens, cacheDetails by TTL),
    the next call reads it."""
    first = _post(emu, C, _converse("a")).json()["usage"]
    second = _post(emu, C, _converse("b")).json()["usage"]
    assert first["cacheWriteInputTokens"] > 4096 and first["cacheReadInputTokens"] == 0
    assert first["cacheDetails"] == [{"ttl": "5m", "inputTokens": first["cacheWriteInputTokens"]}]
    assert second["cacheReadInputTokens"] == first["cacheWriteInputTokens"]
    assert second["inputTokens"] + second["cacheReadInputTokens"] == \
        first["inputTokens"] + first["cacheWriteInputTokens"]


def test_converse_rules_budget_and_ttl(emu: Emulator) -> None:
    """A fifth cache point and a 1h TTL on a model without it are ValidationExceptions."""
    too_many = _post(emu, C, _converse("a", points=5))
    assert too_many.status_code == 400
    assert too_many.headers["x-amzn-ErrorType"] == "ValidationException"
    no_hour = _post(emu, "/model/anthropic.claude-sonnet-4-6/converse", _converse("a", ttl="1h"))
    assert no_hour.status_code == 400 and "1h" in no_hour.json()["message"]


def test_converse_stream_is_an_eventstream_with_metadata(emu: Emulator) -> None:
    """ConverseStream answers application/vnd.amazon.eventstream frames; the usage is in the
    metadata event (read by the SDK's accumulator)."""
    with httpx.Client(base_url=emu.base_url) as client:
        response = client.post(C + "-stream", json=_converse("a"), headers=HEADERS)
    assert response.headers["content-type"].startswith("application/vnd.amazon.eventstream")
    accumulator = bedrock.BedrockStreamAccumulator()
    accumulator.feed(response.content)
    usage = accumulator.finish()
    assert usage.cache_write_tokens and usage.cache_write_tokens > 4096
