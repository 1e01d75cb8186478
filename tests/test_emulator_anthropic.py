"""Anthropic Messages conformance of the emulator, driven by the official ``anthropic`` SDK."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from stableprompt.emulator import AssistantTurn, Emulator, FakeClock, ToolCall

MODEL = "claude-sonnet-4-6"  # minimum cacheable prefix: 1,024 tokens (policy table)
EPHEMERAL: dict[str, Any] = {"type": "ephemeral"}


def text(n: int, tag: str = "rule") -> str:
    """Deterministic filler of roughly 9 tokens per item."""
    return " ".join(f"{tag} {i}: keep the prefix stable." for i in range(n))


SYSTEM = text(150)  # ~1,350 tokens: above the 1,024 minimum on its own


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(clock=FakeClock()) as emulator:
        yield emulator


@pytest.fixture
def client(emu: Emulator) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=emu.base_url, api_key="test-key", max_retries=0) as c:
        yield c


def system(body: str = SYSTEM, **marker: Any) -> Any:
    return [{"type": "text", "text": body, "cache_control": {**EPHEMERAL, **marker}}]


def ask(client: anthropic.Anthropic, **kwargs: Any) -> Any:
    kwargs.setdefault("model", MODEL)
    kwargs.setdefault("max_tokens", 64)
    kwargs.setdefault("messages", [{"role": "user", "content": "hello"}])
    return client.messages.create(**kwargs)


def counters(message: Any) -> tuple[int, int, int]:
    """(input_tokens, cache_read_input_tokens, cache_creation_input_tokens)."""
    u = message.usage
    return u.input_tokens, u.cache_read_input_tokens or 0, u.cache_creation_input_tokens or 0


def conversation(turns: int, mark: int | None = None) -> list[dict[str, Any]]:
    """``turns`` user/assistant pairs of one block each, ending with a user turn;
    ``mark`` puts a breakpoint on that message (index into the list)."""
    messages: list[dict[str, Any]] = []
    for i in range(turns):
        messages.append({"role": "user", "content": [{"type": "text", "text": f"question {i}"}]})
        messages.append({"role": "assistant",
                         "content": [{"type": "text", "text": f"answer {i}"}]})
    messages.append({"role": "user", "content": [{"type": "text", "text": "final question"}]})
    if mark is not None:
        messages[mark]["content"][0]["cache_control"] = EPHEMERAL
    return messages


def test_cold_call_writes_and_repeat_reads(client: anthropic.Anthropic) -> None:
    """A cold call writes the marked prefix; the identical repeat reads all of it."""
    first = ask(client, system=system())
    second = ask(client, system=system())
    inp, read, write = counters(first)
    assert read == 0 and write > 1024
    assert first.usage.cache_creation is not None
    assert first.usage.cache_creation.ephemeral_5m_input_tokens == write
    assert first.usage.cache_creation.ephemeral_1h_input_tokens == 0
    assert counters(second) == (inp, write, 0)
    assert inp > 0  # the user message after the breakpoint stays uncached


def test_one_changed_system_character_misses_from_that_block_on(
    client: anthropic.Anthropic,
) -> None:
    """Changing one system character keeps the tools tier but misses the system tier."""
    tools = [{"name": f"tool_{i}", "description": text(15, f"t{i}"),
              "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}
             for i in range(10)]
    tools[-1]["cache_control"] = EPHEMERAL
    first = ask(client, tools=tools, system=system())
    tools_tokens = ask(client, tools=tools, model=MODEL).usage.cache_read_input_tokens
    changed = ask(client, tools=tools, system=system(SYSTEM.replace("rule 7:", "rule 7;")))
    _, read1, write1 = counters(first)
    assert read1 == 0 and tools_tokens is not None and 1024 < tools_tokens < write1
    _, read, write = counters(changed)
    assert read == tools_tokens
    assert write == write1 - tools_tokens  # the system block is written again


def test_moving_the_breakpoint_forward_keeps_hitting(client: anthropic.Anthropic) -> None:
    """cache_control is not part of the content: the incremental pattern reads each turn."""
    history: list[dict[str, Any]] = []
    previous_end = 0
    for turn in range(4):
        for message in history:  # the SDK harness pattern: only the newest turn is marked
            message["content"] = [{"type": "text", "text": message["content"][0]["text"]}]
        history.append({"role": "user", "content": [
            {"type": "text", "text": f"turn {turn}: " + text(5), "cache_control": EPHEMERAL}]})
        result = ask(client, system=SYSTEM, messages=history)
        inp, read, write = counters(result)
        assert inp == 0  # the breakpoint is on the last block
        assert read == previous_end
        assert write > 0
        previous_end = read + write
        history.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})


def test_lookback_reaches_19_blocks_back_but_not_20(client: anthropic.Anthropic) -> None:
    """Reads look back 20 positions from a breakpoint, counting the breakpoint itself."""
    base = conversation(30)  # one block per message: message i is block i + 1 (after system)
    # (marked message, hit expected): 22 is 20 blocks after 2; 41 is 19 blocks after 22
    for mark, expect_hit in [(2, False), (22, False), (41, True)]:
        messages = [dict(m, content=[dict(m["content"][0])]) for m in base[: mark + 1]]
        messages[mark]["content"][0]["cache_control"] = EPHEMERAL
        if messages[-1]["role"] == "assistant":
            messages.append({"role": "user", "content": "go on"})
        _, read, write = counters(ask(client, system=SYSTEM, messages=messages))
        assert (read > 0) is expect_hit, (mark, read, write)
        assert write > 0


def test_lookback_hit_reads_the_earlier_entry_exactly(client: anthropic.Anthropic) -> None:
    """A breakpoint moved a few blocks forward reads the earlier entry and writes the rest."""
    first = ask(client, system=SYSTEM, messages=conversation(3, mark=2))
    second = ask(client, system=SYSTEM, messages=conversation(3, mark=5))
    write1 = counters(first)[2]
    _, read, write = counters(second)
    assert read == write1
    assert write > 0
    assert counters(second)[0] + read + write == sum(counters(second))


def test_below_minimum_reports_both_counters_zero(client: anthropic.Anthropic) -> None:
    """A marked prefix below the model minimum is neither written nor read."""
    short = system("You are terse.")
    first, second = ask(client, system=short), ask(client, system=short)
    for message in (first, second):
        inp, read, write = counters(message)
        assert (read, write) == (0, 0) and inp > 0


def test_ttl_expiry_and_refresh_on_read(emu: Emulator, client: anthropic.Anthropic) -> None:
    """5-minute entries expire 300 s after their last use; reads restart the clock."""
    write = counters(ask(client, system=system()))[2]
    emu.advance(299)
    assert counters(ask(client, system=system()))[1:] == (write, 0)
    emu.advance(299)  # 598 s after the write, 299 s after the refreshing read
    assert counters(ask(client, system=system()))[1:] == (write, 0)
    emu.advance(300)
    assert counters(ask(client, system=system()))[1:] == (0, write)


def test_one_hour_ttl_survives_what_expires_five_minutes(
    emu: Emulator, client: anthropic.Anthropic
) -> None:
    """A ttl='1h' entry is reported under ephemeral_1h and lives for 3,600 s."""
    first = ask(client, system=system(ttl="1h"))
    assert first.usage.cache_creation is not None
    assert first.usage.cache_creation.ephemeral_1h_input_tokens == counters(first)[2]
    emu.advance(3599)
    assert counters(ask(client, system=system(ttl="1h")))[1] == counters(first)[2]
    emu.advance(3600)
    assert counters(ask(client, system=system(ttl="1h")))[1] == 0


def test_mixed_ttls_split_the_write_by_breakpoint(client: anthropic.Anthropic) -> None:
    """A 1h breakpoint before a 5m one bills each span at its own TTL."""
    blocks = [{"type": "text", "text": SYSTEM, "cache_control": {**EPHEMERAL, "ttl": "1h"}},
              {"type": "text", "text": text(150, "more"), "cache_control": EPHEMERAL}]
    result = ask(client, system=blocks)
    only_first = ask(client, system=blocks[:1])  # reads the 1h entry: its exact length
    split = result.usage.cache_creation
    assert split is not None
    assert split.ephemeral_1h_input_tokens == counters(only_first)[1]
    assert split.ephemeral_5m_input_tokens == counters(result)[2] - counters(only_first)[1]


def test_five_breakpoints_are_a_400(client: anthropic.Anthropic) -> None:
    """A fifth cache_control block is rejected in Anthropic's error shape."""
    blocks = [{"type": "text", "text": f"part {i}", "cache_control": EPHEMERAL}
              for i in range(5)]
    with pytest.raises(anthropic.BadRequestError) as info:
        ask(client, system=blocks)
    assert info.value.status_code == 400
    body = info.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert "maximum of 4 blocks" in body["error"]["message"] and "Found 5" in body["error"][
        "message"]


def test_automatic_caching_uses_a_breakpoint_slot(client: anthropic.Anthropic) -> None:
    """Top-level cache_control marks the last block, caches it, and counts toward the 4."""
    first = ask(client, system=SYSTEM, extra_body={"cache_control": EPHEMERAL})
    second = ask(client, system=SYSTEM, extra_body={"cache_control": EPHEMERAL})
    assert counters(first)[0] == 0 and counters(first)[2] > 1024
    assert counters(second)[1:] == (counters(first)[2], 0)
    four = [{"type": "text", "text": f"part {i}", "cache_control": EPHEMERAL} for i in range(4)]
    with pytest.raises(anthropic.BadRequestError, match="Found 5"):
        ask(client, system=four, extra_body={"cache_control": EPHEMERAL})


def test_shorter_ttl_before_longer_is_a_400(client: anthropic.Anthropic) -> None:
    """A ttl='1h' breakpoint after a ttl='5m' one is rejected."""
    blocks = [{"type": "text", "text": "a", "cache_control": EPHEMERAL},
              {"type": "text", "text": "b", "cache_control": {**EPHEMERAL, "ttl": "1h"}}]
    with pytest.raises(anthropic.BadRequestError, match="longer TTLs must appear before"):
        ask(client, system=blocks)


def test_key_order_change_in_a_tool_schema_misses(client: anthropic.Anthropic) -> None:
    """Tool schemas are hashed as received, so reordering keys is a different prefix."""
    def tools(schema: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"name": "search", "description": text(130), "input_schema": schema,
                 "cache_control": EPHEMERAL}]

    props = {"q": {"type": "string"}}
    first = ask(client, tools=tools({"type": "object", "properties": props}))
    again = ask(client, tools=tools({"type": "object", "properties": props}))
    reordered = ask(client, tools=tools({"properties": props, "type": "object"}))
    assert counters(again)[1] == counters(first)[2] > 1024
    assert counters(reordered)[1:] == (0, counters(first)[2])


def test_model_change_misses_and_tool_choice_misses_messages_only(
    client: anthropic.Anthropic,
) -> None:
    """A model switch invalidates everything; tool_choice only the messages tier."""
    tools = [{"name": "lookup", "description": "look up",
              "input_schema": {"type": "object", "properties": {}}}]
    messages = conversation(2, mark=4)
    first = ask(client, tools=tools, system=system(), messages=messages)
    system_tokens = ask(client, tools=tools, system=system()).usage.cache_read_input_tokens
    other_model = ask(client, tools=tools, system=system(), messages=messages,
                      model="claude-opus-4-8")
    choice = ask(client, tools=tools, system=system(), messages=messages,
                 tool_choice={"type": "any"})
    assert system_tokens is not None and 0 < system_tokens < counters(first)[2]
    assert counters(other_model)[1] == 0
    assert counters(choice)[1] == system_tokens
    assert counters(choice)[2] == counters(first)[2] - system_tokens


def test_api_keys_are_isolated(emu: Emulator, client: anthropic.Anthropic) -> None:
    """Caches are per workspace: another API key does not read this key's entries."""
    write = counters(ask(client, system=system()))[2]
    with anthropic.Anthropic(base_url=emu.base_url, api_key="other", max_retries=0) as other:
        assert counters(ask(other, system=system()))[1:] == (0, write)


def test_streaming_usage_is_parsed_by_the_sdk(client: anthropic.Anthropic) -> None:
    """The SDK's stream accumulator ends with the same usage as a non-streamed call."""
    cold = ask(client, system=system(), messages=[{"role": "user", "content": "ping"}])
    with client.messages.stream(model=MODEL, max_tokens=64, system=system(),
                                messages=[{"role": "user", "content": "ping"}]) as stream:
        events = [event.type for event in stream]
        final = stream.get_final_message()
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert final.content[0].type == "text" and final.content[0].text == "ping"
    assert counters(final) == (counters(cold)[0], counters(cold)[2], 0)
    assert final.usage.output_tokens == cold.usage.output_tokens == 1
    assert final.usage.cache_creation is not None
    assert final.stop_reason == "end_turn"


def test_raw_stream_events_carry_cumulative_usage(client: anthropic.Anthropic) -> None:
    """message_start has the TTL split and message_delta the cumulative counters."""
    stream = client.messages.create(model=MODEL, max_tokens=64, system=system(), stream=True,
                                    messages=[{"role": "user", "content": "ping"}])
    events: list[Any] = list(stream)
    start = next(e for e in events if e.type == "message_start")
    delta = next(e for e in events if e.type == "message_delta")
    assert start.message.usage.cache_creation is not None
    write = start.message.usage.cache_creation.ephemeral_5m_input_tokens
    assert write == start.message.usage.cache_creation_input_tokens
    assert write > 1024
    assert delta.usage.cache_creation_input_tokens == write
    assert delta.usage.cache_read_input_tokens == 0
    assert delta.usage.output_tokens == 1


def test_scripted_tool_calls_stream_and_parse(emu: Emulator) -> None:
    """Scripted tool calls come back as tool_use blocks with deterministic ids and inputs."""
    turn = AssistantTurn(text="Let me check.",
                         tool_calls=(ToolCall("lookup", {"city": "Oslo", "days": 3}),))
    with Emulator(responder=lambda body: turn) as scripted, anthropic.Anthropic(
        base_url=scripted.base_url, api_key="k", max_retries=0
    ) as client:
        plain = ask(client)
        with client.messages.stream(model=MODEL, max_tokens=200,
                                    messages=[{"role": "user", "content": "hi"}]) as stream:
            streamed: Any = stream.get_final_message()
    for message, seq in ((plain, 1), (streamed, 2)):
        assert message.stop_reason == "tool_use"
        call = message.content[1]
        assert call.type == "tool_use"
        assert (call.id, call.name, call.input) == (f"toolu_emu_{seq:06d}_0", "lookup",
                                                    {"city": "Oslo", "days": 3})
    assert plain.usage.output_tokens == streamed.usage.output_tokens > 0


def test_max_tokens_zero_prewarms_the_cache(client: anthropic.Anthropic) -> None:
    """max_tokens=0 writes the cache and answers with no content; with stream it is a 400."""
    warm = ask(client, system=system(), max_tokens=0)
    assert warm.content == [] and warm.stop_reason == "max_tokens"
    assert warm.usage.output_tokens == 0 and counters(warm)[2] > 1024
    assert counters(ask(client, system=system()))[1] == counters(warm)[2]
    with pytest.raises(anthropic.BadRequestError, match="stream"):
        client.messages.create(model=MODEL, max_tokens=0, stream=True,
                               messages=[{"role": "user", "content": "x"}])


def test_malformed_requests_get_anthropic_errors(client: anthropic.Anthropic) -> None:
    """Wrong types and unknown fields are 400s naming the field."""
    cases: list[tuple[dict[str, Any], str]] = [
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages.0.role"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages.0.content"),
        ({"messages": []}, "at least one message"),
        ({"system": [{"type": "text", "text": "x", "cache_control": {"type": "forever"}}]},
         "system.0.cache_control.type"),
        ({"extra_body": {"bogus": 1}}, "bogus: Extra inputs are not permitted"),
    ]
    for kwargs, needle in cases:
        with pytest.raises(anthropic.BadRequestError) as info:
            ask(client, **kwargs)
        assert needle in str(info.value)


def test_tool_result_markers_and_thinking_blocks(client: anthropic.Anthropic) -> None:
    """A marker inside a tool_result marks that block; thinking blocks cannot be marked."""
    def messages(marked: bool) -> Any:
        inner: dict[str, Any] = {"type": "text", "text": text(150)}
        if marked:
            inner["cache_control"] = EPHEMERAL
        return [{"role": "user", "content": "run it"},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "t1", "name": "run", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": [inner]}]}]

    first = ask(client, messages=messages(True))
    assert counters(first)[0] == 0 and counters(first)[2] > 1024
    assert counters(ask(client, messages=messages(True)))[1] == counters(first)[2]
    thinking = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "hm", "signature": "s", "cache_control": EPHEMERAL}]}]
    with pytest.raises(anthropic.BadRequestError, match="thinking blocks"):
        ask(client, messages=thinking)


def test_parallel_clients_are_served_consistently(emu: Emulator) -> None:
    """Concurrent requests all succeed and each reports either the cold write or a full read."""
    from concurrent.futures import ThreadPoolExecutor

    with anthropic.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0) as client:
        write = counters(ask(client, system=system(text(150, "warm"))))[2]

        def one(i: int) -> tuple[int, int, int]:
            return counters(ask(client, system=system(text(150, "warm")),
                                messages=[{"role": "user", "content": f"q{i % 3}"}]))

        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(one, range(40)))
    assert all((read, wrote) == (write, 0) for _, read, wrote in results)
    assert emu.stats().requests == 41 and emu.stats().errors == 0
