"""Cache diagnostics from the emulator's own cache: Anthropic ``diagnostics.cache_miss_reason``
and OpenAI ``prompt_cache_diagnostics`` in the documented shapes and reason types, parsed by
the official SDKs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from anthropic.types import Message
from openai.types.responses import Response

from stableprompt.emulator import Emulator, FakeClock

LONG = " ".join(f"rule {i}: keep the prefix stable." for i in range(300))
EPHEMERAL = {"type": "ephemeral"}
TOOL = {"name": "Bash", "description": "run", "input_schema": {"type": "object"}}
ANTHROPIC_REASONS = {"model_changed", "system_changed", "tools_changed", "messages_changed",
                     "previous_message_not_found", "unavailable"}


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(clock=FakeClock()) as emulator:
        yield emulator


@pytest.fixture
def claude(emu: Emulator) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0) as client:
        yield client


def ask(client: anthropic.Anthropic, previous: str | None, **changes: Any) -> Message:
    body: dict[str, Any] = {
        "model": "claude-opus-5", "max_tokens": 32, "tools": [TOOL],
        "system": [{"type": "text", "text": LONG, "cache_control": EPHEMERAL}],
        "messages": [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"},
                     {"role": "user", "content": "q2"}],
        "diagnostics": {"previous_message_id": previous}, **changes}
    message: Message = client.messages.create(**body)
    return message


def reason(message: Message) -> Any:
    assert message.diagnostics is not None
    return message.diagnostics.cache_miss_reason


def test_first_turn_opts_in_and_append_only_growth_is_null(claude: anthropic.Anthropic) -> None:
    """``previous_message_id: null`` opts in (diagnostics null); a next request that only
    appends messages has no divergence (null)."""
    first = ask(claude, None)
    assert first.diagnostics is None
    grown = ask(claude, first.id, messages=[
        {"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "q3"}])
    assert grown.diagnostics is None


@pytest.mark.parametrize(("changes", "expected"), [
    ({"model": "claude-opus-5-5"}, "model_changed"),
    ({"speed": "fast"}, "model_changed"),
    ({"tools": [{**TOOL, "description": "run a command"}]}, "tools_changed"),
    ({"system": [{"type": "text", "text": LONG + " now", "cache_control": EPHEMERAL}]},
     "system_changed"),
    ({"messages": [{"role": "user", "content": "q1 edited"}]}, "messages_changed"),
])
def test_anthropic_reasons_name_the_first_divergence(
        claude: anthropic.Anthropic, changes: dict[str, Any], expected: str) -> None:
    """Each kind of change gives its documented reason type with a token estimate that the
    SDK parses."""
    first = ask(claude, None)
    miss = reason(ask(claude, first.id, **changes))
    assert miss.type == expected
    assert 0 < miss.cache_missed_input_tokens <= (first.usage.cache_creation_input_tokens or 0) + 50


def test_other_prompt_settings_are_unavailable(claude: anthropic.Anthropic) -> None:
    """Model, system and tools equal but ``tool_choice`` changed: ``unavailable``."""
    first = ask(claude, None)
    assert reason(ask(claude, first.id, tool_choice={"type": "any"})).type == "unavailable"


def test_unknown_or_foreign_message_is_not_found(emu: Emulator,
                                                 claude: anthropic.Anthropic) -> None:
    """An id never fingerprinted, or one made with another API key, is not found."""
    assert reason(ask(claude, "msg_nope")).type == "previous_message_not_found"
    first = ask(claude, None)
    with anthropic.Anthropic(base_url=emu.base_url, api_key="other", max_retries=0) as other:
        assert reason(ask(other, first.id)).type == "previous_message_not_found"


def test_streamed_diagnostics_arrive_in_message_start(claude: anthropic.Anthropic) -> None:
    """Streaming: the final message (from ``message_start``) carries the diagnostics."""
    first = ask(claude, None)
    with claude.messages.stream(
            model="claude-opus-5", max_tokens=32, tools=[TOOL],  # type: ignore[list-item]
            system=[{"type": "text", "text": LONG + "!"}],
            messages=[{"role": "user", "content": "q1"}],
            diagnostics={"previous_message_id": first.id}) as stream:
        final = stream.get_final_message()
    assert reason(final).type == "system_changed"


def test_fields_outside_the_key_do_not_diverge(claude: anthropic.Anthropic) -> None:
    """Metadata and other non-key fields change: no divergence, and the cache reads."""
    first = ask(claude, None)
    again = ask(claude, first.id, metadata={"user_id": "x"}, service_tier="auto")
    assert again.diagnostics is None
    assert again.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens


def test_beta_header_alone_keeps_fingerprints(emu: Emulator) -> None:
    """With the beta header and no ``diagnostics`` field, the request is still fingerprinted."""
    body = {"model": "claude-opus-5", "max_tokens": 8,
            "messages": [{"role": "user", "content": "q"}]}
    headers = {"x-api-key": "k", "anthropic-beta": "cache-diagnosis-2026-04-07"}
    first = httpx.post(emu.base_url + "/v1/messages", json=body, headers=headers).json()
    second = httpx.post(emu.base_url + "/v1/messages", headers=headers, json={
        **body, "model": "claude-opus-5-5",
        "diagnostics": {"previous_message_id": first["id"]}}).json()
    assert second["diagnostics"]["cache_miss_reason"]["type"] == "model_changed"


def test_malformed_diagnostics_is_400(emu: Emulator) -> None:
    """``diagnostics`` holds only ``previous_message_id``."""
    response = httpx.post(emu.base_url + "/v1/messages", headers={"x-api-key": "k"}, json={
        "model": "claude-opus-5", "max_tokens": 8, "diagnostics": {"previous_id": "x"},
        "messages": [{"role": "user", "content": "q"}]})
    assert response.status_code == 400
    assert response.json()["error"]["message"] == (
        "diagnostics.previous_id: Extra inputs are not permitted")


# -- OpenAI Responses ----------------------------------------------------------------------


@pytest.fixture
def gpt(emu: Emulator) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=emu.openai_base_url, api_key="k", max_retries=0) as client:
        yield client


def respond(client: openai.OpenAI, compare: str | None = None, **changes: Any) -> Response:
    body: dict[str, Any] = {
        "model": "gpt-5.6", "instructions": LONG,
        "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}],
        "input": [{"role": "user", "content": "q1"}], **changes}
    if compare is not None:
        body["prompt_cache_options"] = {"comparison_response_id": compare}
    response: Response = client.responses.create(**body)
    return response


def test_responses_cache_hit_after_append(gpt: openai.OpenAI) -> None:
    """Appending input items is a ``cache_hit``; the usage agrees."""
    first = respond(gpt)
    second = respond(gpt, first.id, input=[
        {"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"}])
    assert second.prompt_cache_diagnostics is not None
    assert second.prompt_cache_diagnostics.type == "cache_hit"
    assert second.usage is not None and second.usage.input_tokens_details.cached_tokens > 2000


@pytest.mark.parametrize(("changes", "expected"), [
    ({"model": "gpt-5.7"}, "model_changed"),
    ({"prompt_cache_key": "other"}, "prompt_cache_key_changed"),
    ({"tools": []}, "tools_changed"),
    ({"text": {"format": {"type": "json_object"}}}, "text_format_changed"),
    ({"reasoning": {"effort": "high"}}, "reasoning_effort_changed"),
    ({"text": {"verbosity": "low"}}, "verbosity_changed"),
    ({"instructions": LONG + " now"}, "input_changed"),
    ({"input": [{"type": "compaction", "id": "cmp_1", "encrypted_content": "x"},
                {"role": "user", "content": "q2"}]}, "context_compacted"),
])
def test_responses_cache_miss_reasons(gpt: openai.OpenAI, changes: dict[str, Any],
                                      expected: str) -> None:
    """Each change gives its documented ``cache_miss`` reason; the SDK parses the object."""
    first = respond(gpt)
    diagnostics = respond(gpt, first.id, **changes).prompt_cache_diagnostics
    assert diagnostics is not None and diagnostics.type == "cache_miss"
    assert diagnostics.reason == expected
    assert diagnostics.cache_missed_tokens > 0
    assert diagnostics.comparison_reusable_tokens is not None


def test_responses_not_found_and_unavailable(gpt: openai.OpenAI) -> None:
    """An unknown id is ``comparison_response_not_found``; a parallel-tool-calls change has no
    reason of its own (``unavailable``)."""
    missing = respond(gpt, "resp_nope").prompt_cache_diagnostics
    assert missing is not None and missing.type == "comparison_response_not_found"
    first = respond(gpt)
    other = respond(gpt, first.id, parallel_tool_calls=False).prompt_cache_diagnostics
    assert other is not None and other.type == "unavailable"


def test_streamed_responses_carry_diagnostics_on_completed(gpt: openai.OpenAI) -> None:
    """Streaming: ``response.completed`` carries ``prompt_cache_diagnostics``."""
    first = respond(gpt)
    with gpt.responses.stream(model="gpt-5.6", instructions=LONG, input="q1",
                              prompt_cache_options={"comparison_response_id": first.id}) as s:
        final = s.get_final_response()
    assert final.prompt_cache_diagnostics is not None
    assert final.prompt_cache_diagnostics.type == "cache_miss"
    assert final.prompt_cache_diagnostics.reason == "tools_changed"
