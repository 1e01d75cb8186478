"""The emulator accepts every top-level field today's SDKs define, keeps the ones outside the
cache key out of it, and rejects unknown fields in each provider's error shape."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from anthropic.types import message_create_params as anthropic_params
from anthropic.types.beta import message_create_params as anthropic_beta_params
from openai.types.chat import completion_create_params as chat_params
from openai.types.responses import response_create_params as responses_params

from stableprompt.emulator import Emulator, FakeClock

LONG = " ".join(f"rule {i}: keep the prefix stable." for i in range(300))  # ~2,700 tokens


def keys(*typed_dicts: Any) -> set[str]:
    """Every key the TypedDicts define (required and optional)."""
    return {k for t in typed_dicts for k in (*t.__required_keys__, *t.__optional_keys__)}


#: ``betas`` is an SDK argument sent as the ``anthropic-beta`` header, never in the body.
ANTHROPIC_FIELDS = sorted(keys(
    anthropic_params.MessageCreateParamsStreaming,
    anthropic_params.MessageCreateParamsNonStreaming,
    anthropic_beta_params.MessageCreateParamsStreaming,
    anthropic_beta_params.MessageCreateParamsNonStreaming) - {"betas"})
CHAT_FIELDS = sorted(keys(chat_params.CompletionCreateParamsStreaming,
                          chat_params.CompletionCreateParamsNonStreaming))
RESPONSES_FIELDS = sorted(keys(responses_params.ResponseCreateParamsStreaming,
                               responses_params.ResponseCreateParamsNonStreaming)
                          | {"client_metadata"})


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator(clock=FakeClock()) as emulator:
        yield emulator


def post(emu: Emulator, path: str, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(emu.base_url + path, json=body, timeout=30,
                      headers={"x-api-key": "k", "authorization": "Bearer k", **headers})


def base(path: str) -> dict[str, Any]:
    if path == "/v1/messages":
        return {"model": "claude-opus-5", "max_tokens": 16,
                "messages": [{"role": "user", "content": "hi"}]}
    if path == "/v1/chat/completions":
        return {"model": "gpt-5.6", "messages": [{"role": "user", "content": "hi"}]}
    return {"model": "gpt-5.6", "input": "hi"}


def unknown_field_error(path: str, name: str) -> dict[str, Any]:
    if path == "/v1/messages":
        return {"type": "invalid_request_error",
                "message": f"{name}: Extra inputs are not permitted"}
    if path == "/v1/chat/completions":
        return {"message": f"Unrecognized request argument supplied: {name}",
                "type": "invalid_request_error", "param": name, "code": None}
    return {"message": f"Unknown parameter: '{name}'.", "type": "invalid_request_error",
            "param": name, "code": "unknown_parameter"}


@pytest.mark.parametrize(("path", "name"), [
    *(("/v1/messages", n) for n in ANTHROPIC_FIELDS),
    *(("/v1/chat/completions", n) for n in CHAT_FIELDS),
    *(("/v1/responses", n) for n in RESPONSES_FIELDS),
])
def test_every_sdk_field_is_a_known_parameter(emu: Emulator, path: str, name: str) -> None:
    """Each top-level field of the installed SDK's create-params TypedDict is accepted: sent as
    null, it is never answered as an unknown parameter."""
    response = post(emu, path, {**base(path), name: None})
    if response.status_code != 200:
        error = response.json()["error"]
        assert error != unknown_field_error(path, name), error


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/chat/completions", "/v1/responses"])
def test_unknown_field_gets_the_providers_error_shape(emu: Emulator, path: str) -> None:
    """A field no SDK defines is a 400 in the provider's exact error shape."""
    response = post(emu, path, {**base(path), "not_a_field": 1})
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == unknown_field_error(path, "not_a_field")
    if path == "/v1/messages":
        assert body["type"] == "error"


def anthropic_body(**extra: Any) -> dict[str, Any]:
    return {"model": "claude-opus-5", "max_tokens": 16,
            "system": [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "hi"}], **extra}


ANTHROPIC_OUTSIDE_KEY: dict[str, Any] = {
    "metadata": {"user_id": "u-1"}, "service_tier": "auto", "container": "container_1",
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    "inference_geo": "us", "stop_sequences": ["END"], "temperature": 0.5, "top_p": 0.9,
    "top_k": 5, "user_profile_id": "p1", "workspace_id": "w1", "fallbacks": None,
    "diagnostics": {"previous_message_id": None},
}


def test_anthropic_fields_outside_the_cache_key_keep_the_cache(emu: Emulator) -> None:
    """Metadata, service tier, container, context management, stop sequences, sampling and
    workspace fields change between calls without costing the cached prefix."""
    first = post(emu, "/v1/messages", anthropic_body())
    assert first.status_code == 200, first.text
    assert first.json()["usage"]["cache_creation_input_tokens"] > 2000
    second = post(emu, "/v1/messages", anthropic_body(**ANTHROPIC_OUTSIDE_KEY))
    assert second.status_code == 200, second.text
    usage = second.json()["usage"]
    assert usage["cache_read_input_tokens"] == first.json()["usage"]["cache_creation_input_tokens"]
    assert usage["cache_creation_input_tokens"] == 0


def responses_body(**extra: Any) -> dict[str, Any]:
    return {"model": "gpt-5.6", "instructions": LONG, "input": "hi", **extra}


RESPONSES_OUTSIDE_KEY: dict[str, Any] = {
    "metadata": {"run": "2"}, "service_tier": "default", "store": False, "user": "u-2",
    "safety_identifier": "s-2", "include": ["reasoning.encrypted_content"],
    "client_metadata": {"session_id": "abc", "turn_id": "2"}, "temperature": 0.2,
    "top_p": 0.5, "max_output_tokens": 64, "truncation": "auto", "max_tool_calls": 3,
    "stream_options": None, "tool_choice": "none", "top_logprobs": 0,
}


def test_responses_fields_outside_the_cache_key_keep_the_cache(emu: Emulator) -> None:
    """Codex's ``client_metadata`` and the other non-key Responses fields change between
    calls without costing the cached prefix; ``prompt_cache_key`` does not."""
    first = post(emu, "/v1/responses", responses_body())
    assert first.status_code == 200, first.text
    written = first.json()["usage"]["input_tokens_details"]["cache_write_tokens"]
    assert written > 2000
    second = post(emu, "/v1/responses", responses_body(**RESPONSES_OUTSIDE_KEY))
    assert second.status_code == 200, second.text
    assert second.json()["usage"]["input_tokens_details"]["cached_tokens"] == written
    keyed = post(emu, "/v1/responses", responses_body(prompt_cache_key="other"))
    assert keyed.json()["usage"]["input_tokens_details"]["cached_tokens"] == 0


def test_client_metadata_must_hold_strings(emu: Emulator) -> None:
    """``client_metadata`` is an object of strings; anything else is a 400 naming the key."""
    response = post(emu, "/v1/responses", responses_body(client_metadata={"n": 1}))
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "client_metadata.n"
