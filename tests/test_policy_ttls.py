"""Renders with a cache policy (``_prompt._policy_ttls``): what a render cannot follow is a
PolicyError in the policy's own terms (its place, its label, the provider), never an error
about render arguments the user did not pass, nor silence."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from stableprompt import (
    BreakpointError,
    CachePolicy,
    GeminiCache,
    PolicyError,
    PromptBuilder,
    RecordingTransport,
    Tool,
)
from stableprompt.emulator import Emulator, FakeClock

MODEL = "claude-sonnet-4-5"
BEDROCK = "anthropic.claude-sonnet-4-5-20250929-v1:0"
WEATHER = Tool("get_weather", "Weather for a city.",
               {"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"]})


def _rendered(head_ttl: str = "5m", system: str = "Be brief.") -> Any:
    head = PromptBuilder(tokenizer=None).system(system).tools([WEATHER]).freeze(
        head_ttl=head_ttl)
    conv = head.conversation()
    conv.user("Weather in Paris?")
    return conv.render()


@pytest.mark.parametrize("method", ["anthropic", "bedrock"])
def test_a_history_ttl_longer_than_the_default_head_names_the_policy(method: str) -> None:
    """``CachePolicy(history="1h")`` with the head at its 5m default: a
    ``cache-policy-ttl-order`` PolicyError saying what the policy asks (1h history after a
    5m head, the default) and the fix (``head="1h"`` in the policy, ``freeze(head_ttl=)``),
    not ``breakpoint-ttl-order`` about ``head_ttl`` / ``history_ttl``."""
    policy = CachePolicy(history="1h")
    with pytest.raises(PolicyError) as caught:
        if method == "anthropic":
            _rendered().to_anthropic(model=MODEL, max_tokens=10, cache_policy=policy)
        else:
            _rendered().to_bedrock_converse(model_id=BEDROCK, cache_policy=policy)
    message = str(caught.value)
    assert caught.value.code == "cache-policy-ttl-order"
    assert "1h history breakpoint after a 5m head (the provider default" in message
    assert "set head='1h' in the policy and freeze the head with head_ttl='1h'" in message
    with pytest.raises(PolicyError, match="already frozen with head_ttl='1h'"):
        _rendered("1h").to_anthropic(model=MODEL, max_tokens=10, cache_policy=policy)


@pytest.mark.parametrize(("policy", "place", "label"), [
    (CachePolicy(head="12h"), "head", "12h"),
    (CachePolicy(history="30m"), "history", "30m"),
])
def test_a_ttl_anthropic_does_not_offer_is_refused_as_such(policy: CachePolicy, place: str,
                                                             label: str) -> None:
    """A 12h head or a 30m history on Anthropic: the provider does not offer it (code
    ``cache-policy``), never advice to freeze the head with a TTL Anthropic has not got."""
    with pytest.raises(PolicyError) as caught:
        _rendered().to_anthropic(model=MODEL, max_tokens=10, cache_policy=policy)
    message = str(caught.value)
    assert caught.value.code == "cache-policy"
    assert f"a {label} TTL on the {place} breakpoint" in message
    assert f"does not offer {label!r} (it offers '5m', '1h')" in message
    assert "freeze" not in message


def test_an_openai_policy_ttl_names_the_policy_and_the_place() -> None:
    """An Anthropic-label policy on OpenAI Chat: the policy's TTL and place and what Chat
    offers, not ``prompt_cache_ttl must be one of ('30m',)``; before GPT-5.6 the model has
    no explicit caching at all, said in the policy's terms."""
    with pytest.raises(PolicyError) as caught:
        _rendered().to_openai_chat(model="gpt-5.6",
                                   cache_policy=CachePolicy(head="1h", history="5m"))
    message = str(caught.value)
    assert caught.value.code == "cache-policy"
    assert "a 1h TTL on the head breakpoint of main requests" in message
    assert "openai-chat" in message and "(it offers '30m')" in message
    assert "prompt_cache_ttl" not in message
    with pytest.raises(PolicyError, match="a 24h TTL on the history breakpoint") as caught:
        _rendered().to_openai_responses(model="gpt-5.6", cache_policy=CachePolicy(
            history="24h"))
    assert "(it offers '30m', '12h')" in str(caught.value)
    with pytest.raises(PolicyError, match="has no explicit prompt caching") as caught:
        _rendered().to_openai_chat(model="gpt-5.2", cache_policy=CachePolicy(history="30m"))
    assert caught.value.code == "cache-policy" and "'gpt-5.2'" in str(caught.value)


@pytest.mark.parametrize("render", [
    lambda r, p: r.to_anthropic(model=MODEL, max_tokens=10, cache_policy=p),
    lambda r, p: r.to_bedrock_converse(model_id=BEDROCK, cache_policy=p),
    lambda r, p: r.to_openai_chat(model="gpt-5.6", cache_policy=p),
    lambda r, p: r.to_openai_responses(model="gpt-5.6", cache_policy=p),
    lambda r, p: r.to_gemini(model="gemini-2.5-pro", cache_policy=p),
], ids=["anthropic", "bedrock", "openai-chat", "openai-responses", "gemini-without-cache"])
def test_an_explicit_cache_policy_is_never_silently_ignored(render: Any) -> None:
    """``explicit_cache=True`` is Gemini's ``cachedContents``: every render without one to
    hold the head refuses it (``cache-policy-explicit-cache``) and points at GeminiCache."""
    with pytest.raises(PolicyError, match="GeminiCache") as caught:
        render(_rendered(), CachePolicy(explicit_cache=True))
    assert caught.value.code == "cache-policy-explicit-cache"


def test_gemini_follows_an_explicit_cache_policy_with_its_cache() -> None:
    """``to_gemini(cache=..., cache_policy=CachePolicy(explicit_cache=True))`` references the
    cache; a policy TTL on Gemini (implicit caching has none to choose) is refused."""
    rendered = _rendered(system="Use the shared weather handbook below. " * 800)
    with Emulator(clock=FakeClock()) as emu, httpx.Client(
            base_url=emu.base_url, transport=RecordingTransport()) as http, GeminiCache(
            "gemini-2.5-pro", http=http, api_key="k", base_url=emu.base_url) as cache:
        cache.create(rendered)
        body = rendered.to_gemini(model="gemini-2.5-pro", cache=cache,
                                  cache_policy=CachePolicy(explicit_cache=True)).body
        assert body["cachedContent"] == cache.name and "systemInstruction" not in body
    plain = rendered.to_gemini(model="gemini-2.5-pro", cache_policy=CachePolicy()).body
    assert "systemInstruction" in plain and "cache_policy" not in plain
    with pytest.raises(PolicyError, match="Gemini has no cache breakpoints") as caught:
        rendered.to_gemini(model="gemini-2.5-pro", cache_policy=CachePolicy(head="1h"))
    assert caught.value.code == "cache-policy"


def test_a_policy_head_other_than_the_frozen_one_is_still_a_breakpoint_error() -> None:
    """Valid labels in a valid order, but the head frozen with another TTL: unchanged,
    ``cache-policy-head-ttl`` (the head's bytes are fixed)."""
    with pytest.raises(BreakpointError) as caught:
        _rendered("5m").to_anthropic(model=MODEL, max_tokens=10,
                                     cache_policy=CachePolicy(head="1h", history="1h"))
    assert caught.value.code == "cache-policy-head-ttl"
