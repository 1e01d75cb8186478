"""The official google-genai and boto3 clients, their calling code unchanged, against the
emulator: recorded through RecordingTransport (google-genai's httpx client), the botocore
before-send seam (boto3) and the proxy, one ledger row per call with the wire's usage."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from stableprompt import Recorder, RecordingTransport, summarize
from stableprompt._proxy._server import Proxy
from stableprompt._recording._botocore import record_bedrock
from stableprompt.emulator import Emulator, FakeClock

genai = pytest.importorskip("google.genai")
types = pytest.importorskip("google.genai.types")
boto3 = pytest.importorskip("boto3")

SYSTEM = "You are a careful weather assistant. " * 900  # above every minimum
MODEL_G = "gemini-2.5-pro"
MODEL_B = "anthropic.claude-sonnet-4-5-20250929-v1:0"
TOOL = {"name": "get_weather", "description": "Weather for a city.",
        "parameters_json_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                                   "required": ["city"]}}


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(clock=FakeClock()) as emulator:
        yield emulator


def _gemini_calls(client: Any) -> list[Any]:
    """The caller's code: two calls, one streamed, as anyone writes them."""
    config = types.GenerateContentConfig(system_instruction=SYSTEM,
                                         tools=[types.Tool(function_declarations=[TOOL])])
    out = [client.models.generate_content(model=MODEL_G, contents="Weather in Paris?",
                                          config=config)]
    chunks = list(client.models.generate_content_stream(
        model=MODEL_G, contents="Weather in Paris?", config=config))
    out.append(chunks[-1])
    return out


def _bedrock_calls(client: Any) -> list[Any]:
    """The caller's code: a Converse call with cache points, then a ConverseStream call."""
    kwargs: dict[str, Any] = {
        "modelId": MODEL_B,
        "system": [{"text": SYSTEM}, {"cachePoint": {"type": "default"}}],
        "messages": [{"role": "user", "content": [{"text": "Weather in Paris?"}]}],
        "inferenceConfig": {"maxTokens": 64},
    }
    first = client.converse(**kwargs)
    events = list(client.converse_stream(**kwargs)["stream"])
    metadata = next(e["metadata"] for e in events if "metadata" in e)
    return [first["usage"], metadata["usage"]]


def _bedrock_client(endpoint: str) -> Any:
    return boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=endpoint,
                        aws_access_key_id="AKIDTEST", aws_secret_access_key="secret")


def test_google_genai_recorded_through_its_httpx_client(emu: Emulator) -> None:
    """HttpOptions(base_url, httpx_client with a RecordingTransport): one row per call, usage
    equal to the wire's usageMetadata, the second call a hit on the first's prefix."""
    recorder = Recorder()
    with httpx.Client(transport=RecordingTransport(recorder=recorder)) as http:
        client = genai.Client(api_key="g-key", http_options=types.HttpOptions(
            base_url=emu.base_url, httpx_client=http))
        responses = _gemini_calls(client)
    rows = recorder.records
    assert [r.wire_format for r in rows] == ["gemini", "gemini"]
    assert [r.model for r in rows] == [MODEL_G, MODEL_G]
    for row, response in zip(rows, responses, strict=True):
        usage = response.usage_metadata
        assert row.input_tokens_total == usage.prompt_token_count
        assert row.cache_read_tokens == (usage.cached_content_token_count or 0)
    assert rows[0].verdict == "cold" and rows[1].verdict == "hit"
    assert rows[1].cache_read_tokens and rows[1].cache_read_tokens > 2048


def test_boto3_recorded_through_the_before_send_seam(emu: Emulator) -> None:
    """record_bedrock(client, recorder=...) and unchanged converse / converse_stream calls:
    one row per call, usage equal to the wire's (exclusive inputTokens), a write then a read."""
    recorder = Recorder()
    client = _bedrock_client(emu.base_url)
    with httpx.Client(transport=RecordingTransport(recorder=recorder, provider="bedrock")) as http:
        record_bedrock(client, recorder=recorder, http=http)
        usages = _bedrock_calls(client)
    rows = recorder.records
    assert [r.wire_format for r in rows] == ["bedrock-converse", "bedrock-converse"]
    assert [r.model for r in rows] == [MODEL_B, MODEL_B]
    for row, usage in zip(rows, usages, strict=True):
        assert row.input_tokens_total == (usage["inputTokens"] + usage["cacheReadInputTokens"]
                                          + usage["cacheWriteInputTokens"])
        assert row.cache_read_tokens == usage["cacheReadInputTokens"]
        assert row.cache_write_tokens == usage["cacheWriteInputTokens"]
    assert usages[0]["cacheWriteInputTokens"] > 4096
    assert usages[1]["cacheReadInputTokens"] == usages[0]["cacheWriteInputTokens"]
    assert rows[1].verdict == "hit"


def test_both_clients_through_the_proxy(emu: Emulator) -> None:
    """base_url / endpoint_url on the loopback proxy: it forwards both unchanged (a signed
    Converse request byte for byte) and records one row per call with the wire's usage."""
    recorder = Recorder()
    with Proxy(emu.base_url, recorder=recorder) as proxy:
        gclient = genai.Client(api_key="g-key",
                               http_options=types.HttpOptions(base_url=proxy.base_url))
        responses = _gemini_calls(gclient)
        usages = _bedrock_calls(_bedrock_client(proxy.base_url))
    rows = recorder.records
    assert [r.wire_format for r in rows] == ["gemini"] * 2 + ["bedrock-converse"] * 2
    assert [r.input_tokens_total for r in rows[:2]] == [
        r.usage_metadata.prompt_token_count for r in responses]
    assert [r.cache_read_tokens for r in rows[2:]] == [u["cacheReadInputTokens"] for u in usages]
    assert rows[1].verdict == "hit" and rows[3].verdict == "hit"


def _cache_calls(client: Any) -> str:
    """The caller's code: an explicit cache created, read once, extended and deleted with
    google-genai's own calls; returns its name."""
    cache = client.caches.create(model=MODEL_G, config=types.CreateCachedContentConfig(
        system_instruction=SYSTEM, ttl="300s"))
    client.models.generate_content(model=MODEL_G, contents="Weather in Paris?",
                                   config=types.GenerateContentConfig(cached_content=cache.name))
    client.caches.update(name=cache.name, config=types.UpdateCachedContentConfig(ttl="600s"))
    client.caches.get(name=cache.name)  # reads nothing billed: not recorded
    client.caches.delete(name=cache.name)
    return str(cache.name)


@pytest.mark.parametrize("through", ["transport", "proxy"])
def test_google_genai_cache_calls_are_rows_of_their_own(emu: Emulator, through: str) -> None:
    """caches.create / update / delete through the recording transport and through the proxy:
    one row each, marked as a cache call with what the answer said (name, tokens, TTL), not
    an unanalysed row (the proxy's row of the GET, other traffic, is one); the read names
    its cache; the report prices the cache's storage."""
    recorder = Recorder()
    if through == "transport":
        with httpx.Client(transport=RecordingTransport(recorder=recorder)) as http:
            name = _cache_calls(genai.Client(api_key="g-key", http_options=types.HttpOptions(
                base_url=emu.base_url, httpx_client=http)))
    else:
        with Proxy(emu.base_url, recorder=recorder) as proxy:
            name = _cache_calls(genai.Client(
                api_key="g-key", http_options=types.HttpOptions(base_url=proxy.base_url)))
    rows = recorder.records
    other = [r for r in rows if r.wire_format == "unknown"]
    assert [r.verdict_detail["method"] for r in other] == (["GET"] if through == "proxy" else [])
    rows = [r for r in rows if r not in other]
    facts: list[Any] = [r.verdict_detail.get("gemini_cache") for r in rows]
    assert [f and f["op"] for f in facts] == ["create", None, "update", "delete"]
    assert all(r.wire_format == "gemini" and r.status_code == 200 for r in rows)
    create, _, update, _ = facts
    assert create is not None and update is not None
    assert create["name"] == name and create["tokens"] > 2048 and create["ttl_s"] == 300
    assert update["ttl_s"] == 600 and rows[0].model == MODEL_G
    assert rows[1].verdict_detail["cached_content"] == name
    assert "g-key" not in str([r.to_json() for r in rows])
    (entry,) = summarize(rows).explicit_caches.caches
    assert entry.reads == 1 and entry.deleted and entry.storage_usd is not None


def test_boto3_failures_stay_botocore_errors_and_are_retried() -> None:
    """A refused connection through record_bedrock raises botocore's
    EndpointConnectionError, as without it (it raised httpx.ConnectError, which no
    ``except botocore.exceptions...`` clause catches and botocore's retries skip); each
    attempt botocore makes is one failed row."""
    from botocore.config import Config  # type: ignore[import-untyped]
    from botocore.exceptions import EndpointConnectionError  # type: ignore[import-untyped]

    def client() -> Any:
        return boto3.client("bedrock-runtime", region_name="us-east-1",
                            endpoint_url="http://127.0.0.1:9", aws_access_key_id="AKIDTEST",
                            aws_secret_access_key="secret",
                            config=Config(retries={"max_attempts": 3, "mode": "standard"}))

    def attempts_of(c: Any) -> list[int]:
        seen = [0]
        c.meta.events.register_first("before-send.bedrock-runtime.Converse",
                                     lambda **_: seen.__setitem__(0, seen[0] + 1))
        return seen

    kwargs: dict[str, Any] = {"modelId": MODEL_B, "messages": [
        {"role": "user", "content": [{"text": "hi"}]}]}
    plain = client()
    plain_attempts = attempts_of(plain)
    with pytest.raises(EndpointConnectionError):
        plain.converse(**kwargs)
    recorder = Recorder()
    recorded = client()
    recorded_attempts = attempts_of(recorded)
    record_bedrock(recorded, recorder=recorder)
    with pytest.raises(EndpointConnectionError):
        recorded.converse(**kwargs)
    assert recorded_attempts[0] == plain_attempts[0] > 1
    assert len(recorder.records) == recorded_attempts[0]
    assert all(r.error_class == "ProviderConnectionError" for r in recorder.records)
