"""OpenAI Chat Completions and Responses conformance of the emulator, via the ``openai`` SDK."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from stableprompt.emulator import AssistantTurn, Emulator, FakeClock, ToolCall

OLD = "gpt-4.1"  # before GPT-5.6: minimum 2,048 tokens, reads floored to 128, writes unreported
NEW = "gpt-5.6"  # minimum 1,024, exact reads, cache_write_tokens reported
FIVE_5 = "gpt-5.5"  # implicit breakpoints every 2,048 tokens, writes unreported, 30 min TTL


def text(n: int, tag: str = "rule") -> str:
    """Deterministic filler of roughly 9 tokens per item."""
    return " ".join(f"{tag} {i}: keep the prefix stable." for i in range(n))


LONG = text(300)  # ~2,700 tokens
MEDIUM = text(150)  # ~1,350 tokens: between the two minimums
HUGE = text(600)  # ~5,400 tokens: two 2,048-token intervals and more


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(clock=FakeClock()) as emulator:
        yield emulator


@pytest.fixture
def client(emu: Emulator) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=emu.openai_base_url, api_key="test-key", max_retries=0) as c:
        yield c


def chat(client: openai.OpenAI, system: str = LONG, user: str = "hi", **kwargs: Any) -> Any:
    kwargs.setdefault("model", OLD)
    kwargs.setdefault("messages", [{"role": "system", "content": system},
                                   {"role": "user", "content": user}])
    return client.chat.completions.create(**kwargs)


def cached(result: Any) -> tuple[int, int, int | None]:
    """(prompt_tokens, cached_tokens, cache_write_tokens) of a chat completion."""
    usage = result.usage
    details = usage.prompt_tokens_details
    return usage.prompt_tokens, details.cached_tokens, details.cache_write_tokens


def test_chat_repeat_reads_in_128_token_multiples(client: openai.OpenAI) -> None:
    """Before GPT-5.6 a full-prefix hit is reported floored to a multiple of 128."""
    first, second = chat(client), chat(client)
    prompt, hit, write = cached(first)
    assert (hit, write) == (0, None) and prompt > 2048
    prompt2, hit2, _ = cached(second)
    assert prompt2 == prompt
    assert hit2 == prompt // 128 * 128 and hit2 % 128 == 0 and prompt - hit2 < 128


def test_chat_minimum_depends_on_the_model(client: openai.OpenAI) -> None:
    """A ~1,350-token prompt is below the 2,048 minimum of older models but cached on 5.6."""
    for _ in range(2):
        old = chat(client, system=MEDIUM)
    assert cached(old)[1] == 0
    cold = chat(client, system=MEDIUM, model=NEW)
    warm = chat(client, system=MEDIUM, model=NEW)
    prompt = cached(cold)[0]
    assert 1024 < prompt < 2048
    assert cached(cold) == (prompt, 0, prompt)
    assert cached(warm) == (prompt, prompt, 0)  # exact, not floored


def test_appended_turns_read_the_previous_prompt(client: openai.OpenAI) -> None:
    """On GPT-5.6 the implicit breakpoint ends the latest user message, so turns chain."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": MEDIUM}]
    previous = 0
    for turn in range(3):
        messages.append({"role": "user", "content": f"question {turn}"})
        result = chat(client, model=NEW, messages=messages)
        prompt, hit, write = cached(result)
        assert hit == previous
        assert write == prompt - previous
        previous = prompt
        messages.append({"role": "assistant", "content": result.choices[0].message.content})


def test_gpt_5_5_caches_every_2048_tokens_inside_a_message(client: openai.OpenAI) -> None:
    """GPT-5.5 reads the longest live 2,048-token multiple, even when a block changes after it."""
    prompt, hit, write = cached(chat(client, model=FIVE_5, system=HUGE))
    assert prompt > 4096 + 1024 and (hit, write) == (0, None)
    assert cached(chat(client, model=FIVE_5, system=HUGE))[1] == 4096
    # The system message changes in its last words, past token 4,096: that entry still holds
    # (block-boundary entries would read 0 here: the changed block is the first one).
    edited = HUGE[:-40] + " but this ending changed."
    assert cached(chat(client, model=FIVE_5, system=edited))[1:] == (4096, None)
    # A change before token 2,048 leaves nothing to read.
    early = "Changed. " + HUGE[9:]
    assert cached(chat(client, model=FIVE_5, system=early))[1] == 0


def test_gpt_5_5_responses_ttl_and_retention(emu: Emulator, client: openai.OpenAI) -> None:
    """On GPT-5.5 writes are unreported, entries live 30 idle minutes, and only '24h' is valid."""
    edited = HUGE[:-40] + " but this ending changed."
    first = respond(client, model=FIVE_5, instructions=HUGE).usage.input_tokens_details
    second = respond(client, model=FIVE_5, instructions=edited).usage.input_tokens_details
    assert (first.cached_tokens, first.cache_write_tokens) == (0, 0)
    assert (second.cached_tokens, second.cache_write_tokens) == (4096, 0)
    emu.advance(1790)  # the read above refreshed the 4,096-token entry
    assert respond(client, model=FIVE_5, instructions=HUGE).usage.input_tokens_details == second
    emu.advance(1801)
    assert respond(client, model=FIVE_5, instructions=edited).usage.input_tokens_details == first
    with pytest.raises(openai.BadRequestError, match=r"not supported for gpt-5\.5"):
        chat(client, model=FIVE_5, prompt_cache_retention="in_memory")


def test_chat_stream_include_usage(client: openai.OpenAI) -> None:
    """With include_usage the last chunk has no choices and the usage; others have null."""
    chat(client)
    chunks = list(chat(client, stream=True, stream_options={"include_usage": True}))
    assert all(c.usage is None for c in chunks[:-1])
    final = chunks[-1]
    assert final.choices == []
    assert final.usage is not None
    assert final.usage.prompt_tokens_details is not None
    assert final.usage.prompt_tokens_details.cached_tokens == final.usage.prompt_tokens // 128 * 128
    text_out = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text_out == "hi"
    no_usage = list(chat(client, stream=True))
    assert all(c.choices for c in no_usage)


def test_prompt_cache_key_routes_separately(client: openai.OpenAI) -> None:
    """Requests with different prompt_cache_key values do not share entries."""
    chat(client, prompt_cache_key="a")
    assert cached(chat(client, prompt_cache_key="a"))[1] > 2048
    assert cached(chat(client, prompt_cache_key="b"))[1] == 0


def test_key_order_change_in_a_tool_schema_misses(client: openai.OpenAI) -> None:
    """Tools come first and are hashed as received: reordered schema keys miss everything."""
    def tools(parameters: dict[str, Any]) -> list[Any]:
        return [{"type": "function", "function": {"name": "search", "description": "find",
                                                  "parameters": parameters}}]

    props = {"q": {"type": "string"}}
    chat(client, model=NEW, tools=tools({"type": "object", "properties": props}))
    same = chat(client, model=NEW, tools=tools({"type": "object", "properties": props}))
    moved = chat(client, model=NEW, tools=tools({"properties": props, "type": "object"}))
    assert cached(same)[1] == cached(same)[0]
    assert cached(moved)[1] == 0 and cached(moved)[2] == cached(moved)[0]


def test_ttl_expiry_and_24h_retention(emu: Emulator, client: openai.OpenAI) -> None:
    """In-memory entries expire after 5 idle minutes; prompt_cache_retention='24h' lasts."""
    chat(client)
    chat(client, user="long-lived", prompt_cache_retention="24h")
    emu.advance(301)
    assert cached(chat(client))[1] == 0
    assert cached(chat(client, user="long-lived", prompt_cache_retention="24h"))[1] > 2048


def test_explicit_mode_and_breakpoints_on_gpt_5_6(client: openai.OpenAI) -> None:
    """Explicit mode without markers caches nothing; a marked part is written and read."""
    options = {"mode": "explicit"}
    plain = [{"role": "system", "content": MEDIUM}, {"role": "user", "content": "x"}]
    for _ in range(2):
        result = chat(client, model=NEW, messages=plain, prompt_cache_options=options)
        assert cached(result)[1:] == (0, 0)
    marked = [{"role": "system", "content": [
        {"type": "text", "text": MEDIUM, "prompt_cache_breakpoint": {"mode": "explicit"}}]},
        {"role": "user", "content": "x"}]
    first = chat(client, model=NEW, messages=marked, prompt_cache_options=options)
    second = chat(client, model=NEW, messages=marked, prompt_cache_options=options)
    write = cached(first)[2]
    assert write is not None and 1024 < write < cached(first)[0]
    assert cached(second)[1:] == (write, 0)


def test_chat_errors_use_openai_shape(client: openai.OpenAI) -> None:
    """Bad requests raise BadRequestError with OpenAI's error object."""
    with pytest.raises(openai.BadRequestError) as info:
        chat(client, extra_body={"bogus": True})
    assert info.value.body == {"message": "Unrecognized request argument supplied: bogus",
                               "type": "invalid_request_error", "param": "bogus", "code": None}
    with pytest.raises(openai.BadRequestError, match=r"gpt-5\.6 or later"):
        chat(client, messages=[{"role": "user", "content": [
            {"type": "text", "text": "x", "prompt_cache_breakpoint": {"mode": "explicit"}}]}])
    with pytest.raises(openai.BadRequestError, match="only allowed when 'stream'"):
        chat(client, stream_options={"include_usage": True})
    with pytest.raises(openai.BadRequestError, match=r"messages\[0\].role"):
        chat(client, messages=[{"role": "robot", "content": "x"}])


def test_chat_tool_calls_are_scripted(emu: Emulator) -> None:
    """Scripted tool calls arrive as tool_calls with ids, in JSON and in stream chunks."""
    turn = AssistantTurn(tool_calls=(ToolCall("lookup", {"city": "Oslo"}),
                                     ToolCall("clock", {}, id="call_fixed")))
    with Emulator(responder=lambda body: turn) as scripted, openai.OpenAI(
        base_url=scripted.openai_base_url, api_key="k", max_retries=0
    ) as client:
        result = chat(client)
        stream = list(chat(client, stream=True))
    choice = result.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    calls = choice.message.tool_calls
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [
        ("call_emu_000001_0", "lookup", '{"city":"Oslo"}'), ("call_fixed", "clock", "{}")]
    args = "".join(tc.function.arguments or "" for c in stream if c.choices
                   for tc in (c.choices[0].delta.tool_calls or []) if tc.index == 0)
    assert args == '{"city":"Oslo"}'
    assert stream[-1].choices[0].finish_reason == "tool_calls"


def respond(client: openai.OpenAI, **kwargs: Any) -> Any:
    kwargs.setdefault("model", NEW)
    kwargs.setdefault("instructions", MEDIUM)
    kwargs.setdefault("input", "hello")
    return client.responses.create(**kwargs)


def test_responses_cache_and_usage(client: openai.OpenAI) -> None:
    """Responses reports cached_tokens and cache_write_tokens under input_tokens_details."""
    first, second = respond(client), respond(client)
    total = first.usage.input_tokens
    assert (first.usage.input_tokens_details.cached_tokens,
            first.usage.input_tokens_details.cache_write_tokens) == (0, total)
    assert (second.usage.input_tokens_details.cached_tokens,
            second.usage.input_tokens_details.cache_write_tokens) == (total, 0)
    assert second.output_text == "hello"
    old = [respond(client, model=OLD, instructions=LONG) for _ in range(2)]
    assert old[0].usage.input_tokens_details.cache_write_tokens == 0
    assert old[1].usage.input_tokens_details.cached_tokens == old[1].usage.input_tokens // 128 * 128


def test_responses_stream_is_accumulated_by_the_sdk(client: openai.OpenAI) -> None:
    """The SDK's Responses stream helper yields the final response with its usage."""
    respond(client)
    with client.responses.stream(model=NEW, instructions=MEDIUM, input="hello") as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
    assert final.output_text == "hello"
    assert final.usage is not None
    assert final.usage.input_tokens_details.cached_tokens == final.usage.input_tokens


def test_responses_function_calls_and_items(emu: Emulator) -> None:
    """Function calls stream as items; tool outputs in the input are cached like messages."""
    turn = AssistantTurn(text="checking", tool_calls=(ToolCall("lookup", {"q": "x"}),))
    with Emulator(responder=lambda body: turn) as scripted, openai.OpenAI(
        base_url=scripted.openai_base_url, api_key="k", max_retries=0
    ) as client:
        first = respond(client)
        calls = [item for item in first.output if item.type == "function_call"]
        assert [(c.call_id, c.name, c.arguments) for c in calls] == [
            ("call_emu_000001_0", "lookup", '{"q":"x"}')]
        follow: Any = [{"role": "user", "content": "hello"},
                  {"type": "function_call", "call_id": calls[0].call_id, "name": "lookup",
                   "arguments": calls[0].arguments},
                  {"type": "function_call_output", "call_id": calls[0].call_id,
                   "output": "found"}]
        with client.responses.stream(model=NEW, instructions=MEDIUM, input=follow) as stream:
            final = stream.get_final_response()
    assert final.output[1].type == "function_call"
    assert final.usage is not None and first.usage is not None
    details = final.usage.input_tokens_details
    assert details.cached_tokens == first.usage.input_tokens
    assert details.cache_write_tokens == final.usage.input_tokens - first.usage.input_tokens


def test_responses_rejects_server_side_state(client: openai.OpenAI) -> None:
    """previous_response_id is refused with a message saying the emulator keeps no state."""
    with pytest.raises(openai.BadRequestError, match="keeps no server-side state") as info:
        respond(client, previous_response_id="resp_1")
    assert isinstance(info.value.body, dict) and info.value.body["param"] == (
        "previous_response_id")
