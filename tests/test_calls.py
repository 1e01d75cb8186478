"""Tests for predecessor choice, conversations and turns (``_predecessor.CallIndex``), through the
official anthropic SDK over a RecordingTransport and the fake exact-prefix provider."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path
from typing import Any

import httpx2
from hypothesis import given
from hypothesis import strategies as st

from stableprompt._ledger._usage_record import UsageRecord
from stableprompt._recording._call import Call, RequestState
from stableprompt._recording._predecessor import (
    RETRY_WINDOW_S,
    REWRITE_WINDOW_S,
    CallIndex,
    _Unnamed,
)
from stableprompt._recording._recorder import Recorder
from stableprompt._recording._sizes import ReportedSizes
from test_transport import SYSTEM, SYSTEM_BLOCKS, FakeProvider, anthropic_sdk

MODEL = "claude-sonnet-4-6"


class Clock:
    """A settable wall clock (epoch seconds)."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def talk(who: str, turns: int) -> list[dict[str, Any]]:
    """``who``'s conversation with ``turns`` user messages, the last one with a breakpoint."""
    messages: list[dict[str, Any]] = []
    for t in range(turns):
        if t:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
        messages.append({"role": "user",
                         "content": [{"type": "text", "text": f"{who} asks question {t}"}]})
    messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return messages


def send(client: Any, messages: list[dict[str, Any]], system: Any = SYSTEM_BLOCKS,
         **extra: Any) -> None:
    """One Messages call through the SDK."""
    client.messages.create(model=MODEL, max_tokens=5, system=system, messages=messages,
                           **extra)


def test_a_new_conversation_on_a_shared_system_prompt_is_not_a_history_rewrite() -> None:
    """Without session ids, a second conversation on the same system prompt reads the shared
    head: a hit compared with the first conversation (other_conversation), not a
    history-rewrite; the first conversation's next turn still chains to its own turn."""
    recorder = Recorder(tokenizer="bytes/4")
    client = anthropic_sdk(FakeProvider(), recorder)
    send(client, talk("ann", 1))
    send(client, talk("ann", 2))
    send(client, talk("ben", 1))
    send(client, talk("ann", 3))
    a1, a2, b1, a3 = recorder.records
    assert b1.verdict == "hit" and b1.verdict_detail["other_conversation"] is True
    assert "cause" not in b1.verdict_detail
    assert b1.predecessor_id == a2.record_id  # ties on the shared head: the most recent
    assert b1.cache_read_tokens and b1.predicted_cache_read_tokens == b1.cache_read_tokens
    assert (a3.verdict, a3.predecessor_id) == ("hit", a2.record_id)
    assert "other_conversation" not in a3.verdict_detail
    assert [r.turn for r in (a1, a2, b1, a3)] == [1, 2, 1, 3]


def test_interleaved_sessions_chain_to_their_own_turns_and_ttl_clock() -> None:
    """alice and bob alternate on one system prompt, 100 s apart: each later turn is compared
    with its own session's previous turn (predecessor_id, gap_s 200 s from it), never with the
    other session's more recent call."""
    clock = Clock()
    recorder = Recorder(tokenizer="bytes/4", clock=clock)
    client = anthropic_sdk(FakeProvider(), recorder)
    for turn in (1, 2, 3):
        for who in ("alice", "bob"):
            clock.now += 100.0
            send(client, talk(who, turn), metadata={"user_id": who})
    records = recorder.records
    by_session = {who: [r for r in records if r.session_id == who] for who in ("alice", "bob")}
    assert [r.verdict for r in records] == ["cold"] + ["hit"] * 5
    assert records[1].verdict_detail["other_conversation"] is True  # bob's first turn
    for calls in by_session.values():
        assert [r.turn for r in calls] == [1, 2, 3]
        for earlier, later in itertools.pairwise(calls):
            assert later.predecessor_id == earlier.record_id
            assert later.verdict_detail["gap_s"] == 200.0
            assert "other_conversation" not in later.verdict_detail


def test_without_session_ids_a_head_change_is_compared_only_within_its_conversation() -> None:
    """No implicit global session: an unrelated request with another head and first message
    is cold (not a client_mutation against the previous call); the same conversation (same
    first message) with a clock added to its system prompt is a client_mutation."""
    recorder = Recorder(tokenizer="bytes/4")
    client = anthropic_sdk(FakeProvider(), recorder)
    send(client, talk("ann", 1))
    other: Any = [{"type": "text", "text": "You translate legal contracts. " * 200,
                   "cache_control": {"type": "ephemeral"}}]
    send(client, talk("ben", 1), system=other)
    clocked: Any = [{"type": "text", "text": f"{SYSTEM} Now: 2026-11-30T10:01:00Z",
                     "cache_control": {"type": "ephemeral"}}]
    send(client, talk("ann", 2), system=clocked)
    first, unrelated, changed = recorder.records
    assert unrelated.verdict == "cold" and unrelated.predecessor_id is None
    assert unrelated.verdict_detail["relation"] is None and unrelated.turn == 1
    assert changed.verdict == "client_mutation"
    assert changed.verdict_detail["relation"] == "session"
    assert changed.verdict_detail["segment"] == "system[0]"
    assert (changed.predecessor_id, changed.turn) == (first.record_id, 2)


def test_a_retried_request_keeps_its_turn() -> None:
    """The SDK retries a 529 with the identical request: the retry keeps the failed attempt's
    turn (detail retry), in a named session and without one; the next request is turn 2."""
    for extra in ({}, {"metadata": {"user_id": "conv-9"}}):
        fake = FakeProvider()
        fake.script.append(httpx2.Response(
            529, headers={"retry-after": "0"},
            json={"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}))
        recorder = Recorder(tokenizer="bytes/4")
        client = anthropic_sdk(fake, recorder).with_options(max_retries=1)
        send(client, talk("ann", 1), **extra)
        send(client, talk("ann", 2), **extra)
        failed, retried, second = recorder.records
        assert (failed.status_code, retried.status_code) == (529, 200)
        assert [r.turn for r in (failed, retried, second)] == [1, 1, 2]
        assert retried.verdict_detail["retry"] is True
        assert "retry" not in failed.verdict_detail and "retry" not in second.verdict_detail
        assert (retried.verdict, second.verdict) == ("cold", "hit")


def _call(ts: float, fingerprint: str, session: str | None = "s") -> Call:
    return Call(ts=ts, session_id=session, provider="anthropic", wire_format="anthropic",
                model="m", opening="o", fingerprint=fingerprint)


def test_an_identical_request_after_the_retry_window_is_a_new_turn() -> None:
    """Only an identical request within RETRY_WINDOW_S keeps its turn; a changed one, or the
    same one later, is the next turn."""
    index = CallIndex(window_s=3600.0)
    assert index.begin(_call(0.0, "a")) == (1, False)
    assert index.begin(_call(5.0, "a")) == (1, True)
    assert index.begin(_call(6.0, "b")) == (2, False)
    assert index.begin(_call(6.0 + RETRY_WINDOW_S + 1, "b")) == (3, False)
    unnamed = CallIndex(window_s=3600.0)
    assert unnamed.begin(_call(0.0, "a", None)) == (1, False)
    assert unnamed.begin(_call(1.0, "a", None)) == (1, True)
    assert unnamed.begin(_call(2.0, "b", None)) == (2, False)


def test_remembered_calls_are_bounded_over_all_lineages() -> None:
    """Beyond max_calls the least recently used lineages are dropped (bodies are held in
    memory), while each lineage keeps at most LINEAGE_DEPTH calls."""
    index = CallIndex(window_s=60.0, max_calls=40)
    for head in ("h1", "h2"):
        for n in range(30):
            state = RequestState(ts=float(n), fingerprint=f"sp1:{head}{n}",
                                 head_fingerprint=head)
            index.remember(dataclasses.replace(_call(float(n), state.fingerprint),
                                               state=state))
    assert not index.knows_lineage("h1") and index.knows_lineage("h2")


def _strip_markers(value: Any) -> Any:
    """``value`` without any ``cache_control`` key (what a marker-stripping gateway forwards)."""
    if isinstance(value, dict):
        return {k: _strip_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_markers(v) for v in value]
    return value


class StrippingGateway(FakeProvider):
    """A gateway that drops every ``cache_control`` marker before the exact-prefix provider:
    well-formed usage with cache_read = cache_write = 0 on marked, cacheable bodies."""

    def __call__(self, request: Any) -> Any:
        body = _strip_markers(json.loads(request.content))
        return super().__call__(httpx2.Request(request.method, request.url,
                                               headers=request.headers, json=body))


def test_a_gateway_stripping_breakpoints_is_a_provider_miss_from_the_first_call() -> None:
    """Eligible breakpoints answered with zero reads and zero writes: the first call is a
    provider_miss (expected cold, reason breakpoints-ignored), and the next turn is not
    anchored on the reported 0: a provider_miss of the predicted head, not a hit."""
    recorder = Recorder(tokenizer="bytes/4")
    client = anthropic_sdk(StrippingGateway(), recorder)
    send(client, talk("ann", 1))
    send(client, talk("ann", 2))
    first, second = recorder.records
    assert (first.cache_read_tokens, first.cache_write_tokens) == (0, 0)
    assert first.verdict == "provider_miss"
    assert first.verdict_detail["reason"] == "breakpoints-ignored"
    assert first.verdict_detail["expected_verdict"] == "cold"
    assert first.verdict_detail["breakpoint_prefix_tokens"] == first.verdict_detail[
        "stable_prefix_tokens"]
    assert second.verdict == "provider_miss"
    assert second.verdict_detail["reason"] == "breakpoints-ignored"
    assert second.verdict_detail["predecessor_wrote_nothing"] is True
    assert second.predecessor_id == first.record_id
    assert second.predicted_cache_read_tokens and second.predicted_cache_read_tokens >= 1024
    assert second.verdict_detail["missing_tokens"] == second.predicted_cache_read_tokens


def compacted(who: str, turns: int, summary: str) -> list[dict[str, Any]]:
    """``who``'s conversation after a compaction: the first message replaced by ``summary``,
    every later message kept as sent."""
    messages = talk(who, turns)
    messages[0] = {"role": "user", "content": [{"type": "text", "text": summary}]}
    return messages


SUMMARY = "Summary: ann asked question 0 and got ok."


def spaced(calls: list[tuple[float, list[dict[str, Any]]]]) -> list[UsageRecord]:
    """Send each ``(seconds after the previous call, messages)`` without session ids through
    the SDK on a fake clock; the records, in order."""
    clock = Clock()
    recorder = Recorder(tokenizer="bytes/4", clock=clock)
    client = anthropic_sdk(FakeProvider(), recorder)
    for gap_s, messages in calls:
        clock.now += gap_s
        send(client, messages)
    return recorder.records


def test_a_rewritten_first_message_without_session_id_is_a_client_mutation() -> None:
    """Compaction spiral without session ids: a request whose first message was re-summarized
    (same head, later messages carried over, sent seconds after the previous call ended) is a
    client_mutation of the same conversation (predecessor_rule same-head-recent, history
    rewrite at messages[0], turn continued), and its next turn chains to it as usual."""
    one, two, rewrite, after = spaced([(0.0, talk("ann", 1)), (3.0, talk("ann", 2)),
                                       (3.0, compacted("ann", 3, SUMMARY)),
                                       (3.0, compacted("ann", 4, SUMMARY))])
    assert two.verdict_detail["predecessor_rule"] == "same-conversation"
    assert rewrite.verdict == "client_mutation"
    assert rewrite.verdict_detail["predecessor_rule"] == "same-head-recent"
    assert rewrite.predecessor_id == two.record_id
    assert "other_conversation" not in rewrite.verdict_detail
    assert rewrite.verdict_detail["cause"] == "history-rewrite"
    assert rewrite.verdict_detail["segment"] == "messages[0].content[0]"
    assert rewrite.cache_read_tokens == rewrite.predicted_cache_read_tokens  # the head entry
    assert (after.verdict, after.predecessor_id) == ("hit", rewrite.record_id)
    assert after.verdict_detail["predecessor_rule"] == "same-conversation"
    assert [r.turn for r in (one, two, rewrite, after)] == [1, 2, 3, 4]


def test_a_new_conversation_is_not_a_rewrite_late_or_without_carried_messages() -> None:
    """The same-head-recent rule needs a carried-over message and the previous call's end
    within REWRITE_WINDOW_S: a new conversation sent right away, or a request carrying
    messages over long after, is another conversation sharing the head (a hit, turn 1)."""
    _, ben, late = spaced([(0.0, talk("ann", 2)), (1.0, talk("ben", 1)),
                           (REWRITE_WINDOW_S + 1.0, compacted("ann", 3, SUMMARY))])
    for record in (ben, late):
        assert record.verdict == "hit" and record.verdict_detail["other_conversation"] is True
        assert record.verdict_detail["predecessor_rule"] == "other-conversation"
        assert record.turn == 1


class AutomaticAnthropicShape(FakeProvider):
    """An automatic-cache engine behind the Anthropic shape (llama-server's ``/v1/messages``):
    ``input_tokens`` (uncached) and ``cache_read_input_tokens``, never
    ``cache_creation_input_tokens``."""

    def __call__(self, request: Any) -> Any:
        response = super().__call__(request)
        body = json.loads(response.content)
        usage = body["usage"]
        read = usage.get("cache_read_input_tokens", 0)
        body["usage"] = {"input_tokens": usage["input_tokens"]
                         + usage.get("cache_creation_input_tokens", 0),
                         "cache_read_input_tokens": read,
                         "output_tokens": usage.get("output_tokens", 1)}
        return httpx2.Response(200, json=body)


def test_a_missing_write_count_from_an_automatic_cache_means_zero_written() -> None:
    """provider llama-cpp behind /v1/messages: writes 0, so totals and hit rates are known."""
    recorder = Recorder(tokenizer="bytes/4", provider="llama-cpp")
    client = anthropic_sdk(AutomaticAnthropicShape(), recorder)
    send(client, talk("ann", 1))
    send(client, talk("ann", 2))
    for record in recorder.records:
        assert record.cache_write_tokens == 0
        assert record.cache_read_tokens is not None and record.uncached_tokens is not None
        assert record.input_tokens_total == record.uncached_tokens + record.cache_read_tokens
        assert "cache_write_assumed_zero" in record.verdict_detail
        assert not record.usage_inconsistent
    # A breakpoint cache (Anthropic itself) keeps an unreported write unknown.
    recorder = Recorder(tokenizer="bytes/4")
    send(anthropic_sdk(AutomaticAnthropicShape(), recorder), talk("ann", 1))
    assert recorder.records[0].cache_write_tokens is None
    assert recorder.records[0].input_tokens_total is None


@given(conversations=st.lists(st.integers(0, 3), max_size=80), per_key=st.integers(1, 5),
       maxlen=st.integers(1, 40))
def test_unnamed_calls_keep_each_conversations_newest(conversations: list[int], per_key: int,
                                                       maxlen: int) -> None:
    """``_Unnamed`` with a per-conversation cap answers ``newest`` as the uncapped memory
    does, up to the cap (the newest ``per_key`` calls of the conversation among the last
    ``maxlen`` calls overall), and holds no other call."""
    capped, whole = _Unnamed(maxlen, per_key=per_key), _Unnamed(maxlen)
    calls = [Call(ts=float(i), session_id=None, provider="anthropic", wire_format="anthropic",
                  model="m", opening=f"open-{who}", fingerprint=f"sp1:{i}")
             for i, who in enumerate(conversations)]
    for call in calls:
        capped.append(call)
        whole.append(call)
    for who in range(4):
        probe = Call(ts=1e9, session_id=None, provider="anthropic", wire_format="anthropic",
                     model="m", opening=f"open-{who}", fingerprint=None)
        expected = [c for c in calls[-maxlen:] if c.opening == probe.opening][::-1][:per_key]
        assert list(capped.newest(probe)) == expected
        assert list(whole.newest(probe))[:per_key] == expected
    held = sum(len(v) for v in capped._by_key.values())
    assert held <= min(len(calls), maxlen)


def test_a_first_read_at_an_earlier_breakpoint_is_anchored_on_the_nearest_reported_size(
        ) -> None:
    """ann's conversation grows for four turns; then a resume re-sends it with her first
    message rewritten, so it reads only the system breakpoint's entry, whose size no call has
    reported (each reported its extent, up to its last message). The prediction is the
    nearest reported size less our estimate of what lies between: ann's first call reported
    the end of her first message, one segment after the system breakpoint, so only that
    message is estimated (``_sizes``), not the history after it up to the compared call's or
    this call's own reported total, as a recorder without the sizes does."""
    def run(sizes: bool) -> list[UsageRecord]:
        recorder = Recorder(tokenizer="bytes/4")
        if not sizes:
            recorder._memory.sizes = ReportedSizes(limit=0)
        client = anthropic_sdk(FakeProvider(), recorder)
        for turn in range(1, 5):
            send(client, talk("ann", turn))
        resumed = talk("ann", 5)
        resumed[0]["content"][0]["text"] = "ann asks question 0, resumed"
        send(client, resumed)
        return recorder.records

    *ann, resumed = run(sizes=True)
    detail = resumed.verdict_detail
    assert resumed.verdict == "client_mutation" and resumed.predecessor_id == ann[-1].record_id
    assert detail["path"] == "/messages/0/content/0/text"
    assert resumed.cache_read_tokens
    assert resumed.predicted_cache_read_tokens == resumed.cache_read_tokens
    assert detail["anchored_on_reported_size"] == 1  # ann's first extent, one segment on
    assert detail["estimated_span_segments"] == 1
    *_, far = run(sizes=False)
    assert "anchored_on_reported_size" not in far.verdict_detail
    assert far.verdict_detail["estimated_span_segments"] == 7  # the history after it
    wide, narrow = far.verdict_detail["estimated_span_tokens"], detail["estimated_span_tokens"]
    assert isinstance(wide, int) and isinstance(narrow, int) and wide > narrow


def test_a_restarted_recorder_learns_the_reported_sizes_from_its_ledger(
        tmp_path: Path) -> None:
    """The same resume, recorded by a second recorder on the first one's ledger (a restarted
    proxy, another host on a shared ledger): the sizes ann's rows report (their extents, by
    their outline's last breakpoint) anchor the prediction as in one process."""
    from stableprompt import Ledger

    path, fake = tmp_path / "calls.db", FakeProvider()  # one provider cache for both
    with Ledger(path) as ledger:
        first = Recorder(tokenizer="bytes/4", ledger=ledger)
        client = anthropic_sdk(fake, first)
        for turn in range(1, 5):
            send(client, talk("ann", turn))
        first.close()
    with Ledger(path) as ledger:
        second = Recorder(tokenizer="bytes/4", ledger=ledger)
        resumed = talk("ann", 5)
        resumed[0]["content"][0]["text"] = "ann asks question 0, resumed"
        send(anthropic_sdk(fake, second), resumed)
        second.close()
        (row,) = second.records
    # a new process knows no unnamed conversation: the resume is a new one on ann's head
    assert row.verdict == "hit" and row.verdict_detail["other_conversation"] is True
    assert row.cache_read_tokens and row.predicted_cache_read_tokens == row.cache_read_tokens
    assert row.verdict_detail["anchored_on_reported_size"] == 1


def test_a_read_after_the_ttl_names_the_expired_entry_not_the_alive_one() -> None:
    """ann's system prompt is cached for an hour, her last message for 5 minutes; her next
    call comes 10 minutes later and the provider reads the whole 5-minute entry anyway
    (``read_after_ttl``). The hit's prediction is that entry's exact size, so its read entry,
    estimated span and anchor are that entry's: not the one-hour system entry's, predicted
    after it. Before, the system prefix was recorded as read with the whole entry's size (a
    reported size 17 tokens too large, ``_sizes``), and a resume that re-reads only the system
    prefix was predicted 17 tokens above its read."""
    clock = Clock()
    recorder = Recorder(tokenizer="bytes/4", clock=clock)
    client = anthropic_sdk(FakeProvider(), recorder)  # the fake's entries never expire
    system: Any = [{"type": "text", "text": SYSTEM,
                    "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    send(client, talk("ann", 1), system=system)
    clock.now += 600.0
    send(client, talk("ann", 2), system=system)
    clock.now += 10.0
    resumed = talk("ann", 3)
    resumed[0]["content"][0]["text"] = "ann asks question 0, resumed"
    send(client, resumed, system=system)
    first, late, again = recorder.records
    assert late.verdict == "hit" and late.verdict_detail["read_after_ttl"] is True
    assert late.predicted_cache_read_tokens == late.cache_read_tokens == (
        first.cache_write_tokens or 0)
    assert "estimated_span_tokens" not in late.verdict_detail
    assert "anchored_on_reported_size" not in late.verdict_detail
    assert again.verdict == "client_mutation" and again.cache_read_tokens
    assert again.predicted_cache_read_tokens == again.cache_read_tokens  # the system's size
    assert again.verdict_detail["anchored_on_reported_size"] == 1


def test_reported_sizes_stay_bounded_under_concurrent_adds() -> None:
    """Calls finish on their callers' threads: concurrent adds of shared and own keys keep the
    bound (0 disables it, as the tests that compare without sizes use it) and never raise."""
    import sys
    import threading

    for limit in (0, 3):
        sizes, errors = ReportedSizes(limit=limit), list[str]()

        def work(thread: int, sizes: ReportedSizes = sizes, errors: list[str] = errors) -> None:
            try:
                for i in range(2_000):
                    sizes.add([(f"{i % 5:032x}", 300 + i), (f"{thread:x}{i:031x}", 400)])
            except Exception as exc:  # what an unserialized drop raises (KeyError)
                errors.append(repr(exc))

        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            sys.setswitchinterval(interval)
        assert errors == [] and len(sizes) == limit
    negative = ReportedSizes(limit=-1)  # keeps nothing, as 0 does
    negative.add([("k" * 32, 5)])
    assert len(negative) == 0


def _resume_after_numbers(count: int) -> UsageRecord:
    """A side call (a title request) reports the size of the system prompt's first block;
    ann's conversation marks the end of the system prompt (one short block later) and of her
    first message, ``count`` numbers (our tokenizer and the provider's count such content far
    apart); a resume rewrites that message, so it reads the system entry, whose own size no
    call reported. The resume's row."""
    recorder = Recorder()  # the default (cl100k) estimate; the fake counts bytes/4
    client = anthropic_sdk(FakeProvider(), recorder)
    numbers = " ".join(str(7_000_000 + i * 7919) for i in range(count))
    send(client, [{"role": "user", "content": "a title?"}], system=SYSTEM_BLOCKS)
    system: Any = [{"type": "text", "text": SYSTEM},
                   {"type": "text", "text": "Today is Monday.",
                    "cache_control": {"type": "ephemeral"}}]
    first: Any = {"role": "user", "content": [{"type": "text", "text": numbers}]}
    send(client, [{**first, "content": [{**first["content"][0],
                                         "cache_control": {"type": "ephemeral"}}]}],
         system=system)
    later: list[dict[str, Any]] = [
        first, {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "and then?",
                                      "cache_control": {"type": "ephemeral"}}]}]
    send(client, later, system=system)
    send(client, [{"role": "user", "content": [{"type": "text", "text": numbers + " 1"}]},
                  *later[1:]], system=system)
    return recorder.records[-1]


def test_an_entry_a_reported_size_puts_above_the_minimum_is_predicted() -> None:
    """The resume of :func:`_resume_after_numbers` after 700 numbers: our estimate of them is
    so far above the provider's count that the system entry, estimated from the compared
    call's total less them, fell under the 1,024-token minimum (predicted 0 for a read of
    1,613: a disagreement), while the size the title call reported, 12 of our tokens before
    its end, puts it at 1,614."""
    from stableprompt._accounting._calls import agreement_of

    resumed = _resume_after_numbers(700)
    assert resumed.verdict == "client_mutation" and resumed.cache_read_tokens == 1613
    assert resumed.predicted_cache_read_tokens == 1614
    assert resumed.verdict_detail["anchored_on_reported_size"] == 1
    assert agreement_of(resumed, 1) is True


def test_the_reported_size_nearest_in_tokens_anchors_not_the_nearest_in_segments() -> None:
    """The resume of :func:`_resume_after_numbers` after 200 numbers: one segment back is a
    size 12 of our tokens away, one segment on is one past the whole message. The prediction
    is anchored on the first (predicted 1,614 for a read of 1,613), not on the second, as when
    the search stopped at the first segment either way that held a size, forward first
    (predicted 1,212: 401 tokens off, beyond the estimate's allowance, so a disagreement)."""
    from stableprompt._accounting._calls import agreement_of

    resumed = _resume_after_numbers(200)
    detail = resumed.verdict_detail
    assert resumed.verdict == "client_mutation" and resumed.cache_read_tokens == 1613
    assert detail["anchored_on_reported_size"] == 1
    assert detail["estimated_span_tokens"] == 12 and detail["estimated_span_segments"] == 1
    assert resumed.predicted_cache_read_tokens == 1614
    assert agreement_of(resumed, 1) is True
