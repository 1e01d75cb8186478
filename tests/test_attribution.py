"""Tests for the pure prediction + attribution function (``_attribution.attribute``)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from stableprompt import cache_rules, parse_usage
from stableprompt._policy import TOLERANCE_FRACTION, CacheRules
from stableprompt._recording._attribution import IGNORED_BREAKPOINTS_MARGIN, attribute
from stableprompt._recording._call import RequestState
from stableprompt._tokens import ByteTokenizer
from stableprompt._usage import CacheUsage
from stableprompt._wire._formats import segment_request

_TOK = ByteTokenizer()
ANTHROPIC = cache_rules("anthropic", "claude-sonnet-4-6")  # min 1,024; 5m/1h; lookback 20
OPENAI_OLD = cache_rules("openai", "gpt-4.1")  # min 2,048, granularity 128, TTL 300 s
VLLM = cache_rules("vllm", "any")  # 16-token blocks, last token recomputed, no TTL

LONG_SYSTEM = "You are a meticulous assistant for a billing system. " * 120  # ~1.6k tokens
TOOLS = [
    {"name": "get_invoice", "description": "Fetch an invoice by id.",
     "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}}},
    {"name": "list_customers", "description": "List customers.",
     "input_schema": {"type": "object", "properties": {}}},
]


def _cc(ttl: str = "5m") -> dict[str, str]:
    return {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}


def anthropic_body(
    turns: int = 1,
    *,
    system: str = LONG_SYSTEM,
    tools: list[dict[str, Any]] | None = None,
    history_ttl: str = "5m",
    history_breakpoint: bool = True,
    system_breakpoint: bool = True,
) -> dict[str, Any]:
    """An Anthropic body: tools, one system block, ``turns`` user/assistant exchanges."""
    messages: list[dict[str, Any]] = []
    for t in range(turns):
        if t:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": f"ok {t}"}]})
        messages.append({"role": "user", "content": [{"type": "text", "text": f"question {t}"}]})
    if history_breakpoint:
        messages[-1]["content"][-1]["cache_control"] = _cc(history_ttl)
    block: dict[str, Any] = {"type": "text", "text": system}
    if system_breakpoint:
        block["cache_control"] = _cc("1h" if history_ttl == "1h" else "5m")
    return {"model": "claude-sonnet-4-6", "max_tokens": 100,
            "tools": TOOLS if tools is None else tools, "system": [block], "messages": messages}


def chat_body(turns: int = 1, *, system: str = LONG_SYSTEM * 2, tail: str = "") -> dict[str, Any]:
    """An OpenAI chat body whose prompt is far above the 2,048-token minimum."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for t in range(turns):
        if t:
            messages.append({"role": "assistant", "content": f"answer {t}"})
        messages.append({"role": "user", "content": f"question {t}"})
    if tail:
        messages.append({"role": "user", "content": tail})
    return {"model": "gpt-4.1", "messages": messages}


def state(body: dict[str, Any], ts: float, wire: str = "anthropic", rid: str = "r") -> RequestState:
    """The RequestState of ``body`` with bytes/4 token counts per segment."""
    seg = segment_request(wire, body)
    tokens = [_TOK.count(seg.data[s.start : s.end].decode()) for s in seg.segments]
    return RequestState.of(seg, tokens, ts, record_id=rid)


def anthropic_usage(total: int, read: int, write: int = 0) -> CacheUsage:
    """Anthropic usage whose parts add up to ``total``."""
    return parse_usage("anthropic", {
        "input_tokens": total - read - write, "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write, "output_tokens": 5})


def chat_usage(total: int, read: int) -> CacheUsage:
    """OpenAI chat usage (inclusive prompt_tokens)."""
    return parse_usage("openai-chat", {"prompt_tokens": total, "completion_tokens": 5,
                                       "prompt_tokens_details": {"cached_tokens": read}})


def prefix_tokens(s: RequestState, through: str) -> int:
    """Our tokens of ``s`` through the segment named ``through``."""
    assert s.segmented is not None and s.segment_tokens is not None
    names = [seg.name for seg in s.segmented.segments]
    return sum(s.segment_tokens[: names.index(through) + 1])


# ---------------------------------------------------------------------------- first calls


def test_first_call_with_a_long_prefix_is_cold() -> None:
    """A first call of a lineage whose breakpoint prefix reaches the minimum is cold."""
    s = state(anthropic_body(), 0.0)
    assert s.request_tokens is not None
    result = attribute(s, predecessor=None,
                       usage=anthropic_usage(s.request_tokens, 0, s.request_tokens - 5),
                       policy=ANTHROPIC)
    assert result.verdict == "cold"
    assert result.predicted_cache_read_tokens == 0
    assert result.detail["stable_prefix_tokens"] >= 1024
    assert result.predecessor_id is None and result.lcp_bytes is None


def test_short_prompt_is_below_minimum_on_first_and_later_calls() -> None:
    """A prompt shorter than the model's minimum is below_minimum, first call or not."""
    first = state(anthropic_body(system="Be brief."), 0.0)
    second = state(anthropic_body(2, system="Be brief."), 10.0)
    assert first.request_tokens is not None and second.request_tokens is not None
    one = attribute(first, predecessor=None, usage=anthropic_usage(first.request_tokens, 0),
                    policy=ANTHROPIC)
    two = attribute(second, predecessor=first, usage=anthropic_usage(second.request_tokens, 0),
                    policy=ANTHROPIC)
    assert (one.verdict, two.verdict) == ("below_minimum", "below_minimum")
    assert two.predicted_cache_read_tokens == 0
    assert two.detail["stable_prefix_tokens"] < 1024


def test_anthropic_request_without_breakpoints_is_no_breakpoint() -> None:
    """Without any cache_control nothing is cacheable: no_breakpoint (not below_minimum),
    first call or not; lost_tokens is the shared prefix it could have read, less its reads,
    and 0 on a first call."""
    body = anthropic_body(history_breakpoint=False, system_breakpoint=False)
    first, second = state(body, 0.0), state(body, 5.0)
    assert second.request_tokens is not None
    alone = attribute(first, predecessor=None,
                      usage=anthropic_usage(second.request_tokens, 0), policy=ANTHROPIC)
    assert alone.verdict == "no_breakpoint" and alone.detail["lost_tokens"] == 0
    result = attribute(second, predecessor=first,
                       usage=anthropic_usage(second.request_tokens, 0), policy=ANTHROPIC)
    assert result.verdict == "no_breakpoint"
    assert result.detail["reason"] == "no-breakpoint"
    shared = result.detail["lcp_tokens_scaled"]
    assert shared >= 1024 and result.detail["lost_tokens"] == shared
    assert result.predicted_cache_read_tokens == 0
    late = attribute(dataclasses.replace(second, ts=400.0), predecessor=first,
                     usage=anthropic_usage(second.request_tokens, 0), policy=ANTHROPIC)
    assert late.verdict == "no_breakpoint" and late.detail["lost_tokens"] == 0  # past 5m


def test_a_breakpoint_below_the_minimum_is_still_below_minimum() -> None:
    """Breakpoints that all sit below the minimum: below_minimum with reason
    breakpoints-below-minimum, never no_breakpoint."""
    body = anthropic_body(system="Be brief.", history_breakpoint=False)
    first, second = state(body, 0.0), state(body, 5.0)
    assert second.request_tokens is not None
    result = attribute(second, predecessor=first,
                       usage=anthropic_usage(second.request_tokens, 0), policy=ANTHROPIC)
    assert result.verdict == "below_minimum"


def test_lost_tokens_never_exceed_what_the_call_could_read() -> None:
    """A compaction that rewrites history and shortens the request: the mutation's
    lost_tokens is at most this call's input less its reads (lost_cap_tokens), the one value
    the ledger stores and the report shows."""
    long = state(anthropic_body(40), 0.0)
    short_body = anthropic_body(1)
    short_body["messages"][0]["content"][0]["text"] = "summary of the earlier turns"
    short = state(short_body, 10.0)
    assert short.request_tokens is not None and long.request_tokens is not None
    read = prefix_tokens(short, "system[0]")  # the head still read
    result = attribute(short, predecessor=long,
                       usage=anthropic_usage(short.request_tokens, read,
                                             short.request_tokens - read),
                       policy=ANTHROPIC)
    assert result.verdict == "client_mutation"
    cap = result.detail["lost_cap_tokens"]
    assert cap == short.request_tokens - read < 100  # the one message after the head
    # the 40 turns the long request had cached are far more than this call could read
    assert long.request_tokens - read > 10 * cap
    assert result.detail["lost_tokens"] == cap


# ---------------------------------------------------------------------------- hits, misses


def test_appended_turn_predicts_the_predecessors_last_breakpoint_and_hits() -> None:
    """Turn 2 reads exactly up to turn 1's history breakpoint: hit, prediction == that prefix."""
    one = state(anthropic_body(1), 0.0)
    two = state(anthropic_body(2), 30.0)
    expected = prefix_tokens(one, "messages[0].content[0]")
    assert two.request_tokens is not None
    result = attribute(two, predecessor=one,
                       usage=anthropic_usage(two.request_tokens, expected, 20), policy=ANTHROPIC)
    assert result.verdict == "hit"
    assert result.predicted_cache_read_tokens == expected
    assert result.detail["token_scale"] == 1.0
    assert result.predecessor_id == "r"
    assert result.lcp_tokens is not None and result.lcp_tokens >= expected
    assert result.divergence is None


def test_stable_in_ttl_prefix_with_zero_reads_is_provider_miss() -> None:
    """Same lineage, prefix unchanged, within the TTL, but nothing read: provider_miss."""
    one = state(anthropic_body(1), 0.0)
    two = state(anthropic_body(2), 60.0)
    assert two.request_tokens is not None
    result = attribute(two, predecessor=one, usage=anthropic_usage(two.request_tokens, 0),
                       policy=ANTHROPIC)
    assert result.verdict == "provider_miss"
    assert result.detail["missing_tokens"] == result.predicted_cache_read_tokens
    assert result.predicted_cache_read_tokens == prefix_tokens(one, "messages[0].content[0]")


def test_reads_are_compared_in_provider_units() -> None:
    """A prefix is counted in provider tokens by anchoring on the reported prompt size: the
    reported total minus our estimate of the remainder after the prefix (no global scale)."""
    one = state(anthropic_body(1), 0.0)
    two = state(anthropic_body(2), 30.0)
    assert two.request_tokens is not None
    total = int(two.request_tokens * 1.2)  # provider tokenizer counts 20 % more
    ours = prefix_tokens(one, "messages[0].content[0]")
    anchored = total - (two.request_tokens - ours)
    result = attribute(two, predecessor=one,
                       usage=anthropic_usage(total, anchored), policy=ANTHROPIC)
    assert result.verdict == "hit"
    assert result.detail["token_scale"] == pytest.approx(1.2, abs=0.001)  # reported, unused
    assert result.predicted_cache_read_tokens == anchored


def test_prefix_anchored_on_the_predecessors_reported_size() -> None:
    """When the shared prefix is the predecessor's whole prompt, its reported size is exact,
    whatever the density of the new content (the case a request-wide scale gets wrong)."""
    one = dataclasses.replace(state(chat_body(1), 0.0, "openai-chat"), input_tokens_total=3000)
    two = state(chat_body(2), 30.0, "openai-chat")
    assert one.request_tokens is not None and two.request_tokens is not None
    # The new turn is 5x denser than our estimate: a scale would spread that over the prefix.
    total = 3000 + 5 * (two.request_tokens - one.request_tokens)
    result = attribute(two, predecessor=one, usage=chat_usage(total, 2944), policy=OPENAI_OLD)
    assert result.verdict == "hit"
    assert result.predicted_cache_read_tokens == 2944  # 3000 floored to 128-token granules
    assert result.detail["lcp_tokens_scaled"] == 3000


def test_reads_within_tolerance_are_hits_and_beyond_are_misses() -> None:
    """The tolerance is one granule plus 5 % of the reported input total."""
    one = state(anthropic_body(1), 0.0)
    two = state(anthropic_body(2), 30.0)
    assert two.request_tokens is not None
    total = two.request_tokens
    expected = prefix_tokens(one, "messages[0].content[0]")
    tolerance = 1 + math.ceil(TOLERANCE_FRACTION * total)
    inside = attribute(two, predecessor=one, policy=ANTHROPIC,
                       usage=anthropic_usage(total, expected - tolerance + 1))
    outside = attribute(two, predecessor=one, policy=ANTHROPIC,
                        usage=anthropic_usage(total, expected - tolerance - 2))
    assert inside.detail["tolerance_tokens"] == tolerance
    assert (inside.verdict, outside.verdict) == ("hit", "provider_miss")


def test_reads_above_the_prediction_are_flagged() -> None:
    """More reads than an exact-prefix cache explains is still a hit, flagged in detail."""
    body_one = anthropic_body(1, history_breakpoint=False)  # only the system entry is written
    body_two = anthropic_body(2)
    for body in (body_one, body_two):
        body["messages"][0]["content"][0]["text"] = "a long question " * 400
    one, two = state(body_one, 0.0), state(body_two, 30.0)
    assert two.request_tokens is not None
    result = attribute(two, predecessor=one, policy=ANTHROPIC,
                       usage=anthropic_usage(two.request_tokens, two.request_tokens))
    assert result.verdict == "hit" and result.detail["reads_above_prediction"] is True


# ---------------------------------------------------------------------------- client mutations


def test_timestamp_in_system_prompt_is_client_mutation_naming_system_and_volatile_token() -> None:
    """A clock in the system prompt changes the head: diffed against the session's previous
    request, the verdict is client_mutation at system[0], cause volatile-token."""
    a = state(anthropic_body(1, system=LONG_SYSTEM + "Now: 2026-11-30T10:00:00Z"), 0.0)
    b = state(anthropic_body(2, system=LONG_SYSTEM + "Now: 2026-11-30T10:01:00Z"), 60.0)
    assert a.head_fingerprint != b.head_fingerprint
    assert b.request_tokens is not None
    result = attribute(b, predecessor=None, session_previous=a,
                       usage=anthropic_usage(b.request_tokens, 0, b.request_tokens - 10),
                       policy=ANTHROPIC)
    assert result.verdict == "client_mutation"
    assert result.detail["relation"] == "session"
    assert result.detail["segment"] == "system[0]"
    assert result.detail["segment_kind"] == "system"
    assert result.detail["path"] == "/system/0/text"
    assert result.detail["cause"] == "volatile-token"
    assert result.detail["cause_detail"] == "timestamp"
    assert result.detail["lost_tokens"] > 1000
    assert result.predicted_cache_read_tokens == 0


def test_reordered_tools_are_client_mutation_with_tool_reorder() -> None:
    """Tools sent in a different order: client_mutation, cause tool-reorder."""
    a = state(anthropic_body(1), 0.0)
    b = state(anthropic_body(2, tools=TOOLS[::-1]), 30.0)
    assert b.request_tokens is not None
    result = attribute(b, predecessor=None, session_previous=a,
                       usage=anthropic_usage(b.request_tokens, 0), policy=ANTHROPIC)
    assert result.verdict == "client_mutation"
    assert result.detail["cause"] == "tool-reorder"
    assert result.detail["segment"] == "tools[0]"
    assert result.detail["path"] == "/tools/0"


def test_history_rewrite_before_the_breakpoint_is_client_mutation() -> None:
    """Editing an already-sent message loses the history entry: history-rewrite."""
    one = state(anthropic_body(3), 0.0)
    body = anthropic_body(4)
    body["messages"][2]["content"][0]["text"] = "question one, edited"
    two = state(body, 20.0)
    assert two.request_tokens is not None
    head = prefix_tokens(one, "system[0]")
    result = attribute(two, predecessor=one, policy=ANTHROPIC,
                       usage=anthropic_usage(two.request_tokens, head))
    assert result.verdict == "client_mutation"
    assert result.detail["cause"] == "history-rewrite"
    assert result.detail["segment"] == "messages[2].content[0]"
    assert result.predicted_cache_read_tokens == head  # the system breakpoint still reads


def test_breakpoint_beyond_the_lookback_window_is_client_mutation() -> None:
    """Entries more than 20 blocks behind every breakpoint cannot be found: lookback-exceeded."""
    one = state(anthropic_body(1), 0.0)
    body = anthropic_body(14, system_breakpoint=False)  # 27 message blocks after the entry
    two = state(body, 10.0)
    assert two.request_tokens is not None
    first_entries = [s.name for s in one.segmented.segments if s.breakpoint]  # type: ignore[union-attr]
    assert first_entries == ["system[0]", "messages[0].content[0]"]
    result = attribute(two, predecessor=one, policy=ANTHROPIC,
                       usage=anthropic_usage(two.request_tokens, 0))
    assert result.verdict == "client_mutation"
    assert result.detail["cause"] == "lookback-exceeded"
    assert result.detail["breakpoint_distance_blocks"] >= 20
    assert result.predicted_cache_read_tokens == 0


def test_change_after_the_last_breakpoint_is_not_a_mutation() -> None:
    """Bytes after the predecessor's last breakpoint (a volatile tail) may change freely."""
    body = anthropic_body(1)
    body["messages"][0]["content"].append({"type": "text", "text": "<clock>10:00</clock>"})
    one = state(body, 0.0)
    body2 = anthropic_body(2)
    body2["messages"][-1]["content"].append({"type": "text", "text": "<clock>10:01</clock>"})
    two = state(body2, 30.0)
    assert two.request_tokens is not None
    expected = prefix_tokens(one, "messages[0].content[0]")
    result = attribute(two, predecessor=one, policy=ANTHROPIC,
                       usage=anthropic_usage(two.request_tokens, expected))
    assert result.verdict == "hit"
    assert result.divergence is not None and result.divergence.segment == "messages[0].content[1]"


# ---------------------------------------------------------------------------- TTL


def test_six_minute_gap_with_five_minute_ttl_is_ttl_expired() -> None:
    """The gap to the same-lineage predecessor exceeds the 5-minute TTL: ttl_expired."""
    one = state(anthropic_body(1), 1_000.0)
    two = state(anthropic_body(2), 1_360.0)
    assert two.request_tokens is not None
    result = attribute(two, predecessor=one, policy=ANTHROPIC,
                       usage=anthropic_usage(two.request_tokens, 0, two.request_tokens - 10))
    assert result.verdict == "ttl_expired"
    assert result.detail["gap_s"] == 360.0 and result.detail["ttl_s"] == 300
    assert result.predicted_cache_read_tokens == 0
    assert result.detail["expired_tokens"] == prefix_tokens(one, "messages[0].content[0]")


def test_one_hour_breakpoints_survive_a_six_minute_gap() -> None:
    """With ttl 1h on the breakpoints, the same 6-minute gap still predicts a full read."""
    one = state(anthropic_body(1, history_ttl="1h"), 0.0)
    two = state(anthropic_body(2, history_ttl="1h"), 360.0)
    assert two.request_tokens is not None
    expected = prefix_tokens(one, "messages[0].content[0]")
    result = attribute(two, predecessor=one, policy=ANTHROPIC,
                       usage=anthropic_usage(two.request_tokens, expected))
    assert result.verdict == "hit" and result.detail["ttl_s"] == 3600


def test_reads_after_the_ttl_are_a_hit_flagged_read_after_ttl() -> None:
    """If the provider still read the prefix after the TTL, the verdict follows the reads."""
    one = state(anthropic_body(1), 0.0)
    two = state(anthropic_body(2), 400.0)
    assert two.request_tokens is not None
    expected = prefix_tokens(one, "messages[0].content[0]")
    result = attribute(two, predecessor=one, policy=ANTHROPIC,
                       usage=anthropic_usage(two.request_tokens, expected))
    assert result.verdict == "hit" and result.detail["read_after_ttl"] is True
    assert result.predicted_cache_read_tokens == expected


# ---------------------------------------------------------------------------- automatic caches


def test_openai_prediction_is_the_lcp_floored_to_128() -> None:
    """OpenAI (pre-5.6): predicted reads are the shared prefix floored to 128 tokens."""
    one = state(chat_body(1), 0.0, "openai-chat")
    two = state(chat_body(2), 30.0, "openai-chat")
    assert two.request_tokens is not None
    result = attribute(two, predecessor=one, policy=OPENAI_OLD,
                       usage=chat_usage(two.request_tokens, 0))
    assert one.request_tokens is not None
    assert result.predicted_cache_read_tokens == one.request_tokens // 128 * 128
    assert result.verdict == "provider_miss"
    hit = attribute(two, predecessor=one, policy=OPENAI_OLD,
                    usage=chat_usage(two.request_tokens, one.request_tokens // 128 * 128))
    assert hit.verdict == "hit"


def test_openai_small_tail_change_is_not_a_mutation_but_a_rewrite_is() -> None:
    """Losing only a short trailing message is within tolerance; editing early history is not."""
    one = state(chat_body(1, tail="now 10:00"), 0.0, "openai-chat")
    two = state(chat_body(2), 30.0, "openai-chat")
    assert two.request_tokens is not None
    usage = chat_usage(two.request_tokens, 0)
    assert attribute(two, predecessor=one, policy=OPENAI_OLD, usage=usage).verdict == (
        "provider_miss")
    body = chat_body(2)
    body["messages"][0]["content"] = "Short new system prompt."
    rewritten = state(body, 30.0, "openai-chat")
    result = attribute(rewritten, predecessor=None, session_previous=one, policy=OPENAI_OLD,
                       usage=usage)
    assert result.verdict == "client_mutation"
    assert result.detail["segment"] == "messages[0]"


def test_openai_ttl_follows_the_requested_retention() -> None:
    """prompt_cache_retention=24h makes a 10-minute gap harmless; the default 5 min does not."""
    one = state(chat_body(1), 0.0, "openai-chat")
    body = chat_body(2)
    two = state(body, 600.0, "openai-chat")
    assert two.request_tokens is not None
    usage = chat_usage(two.request_tokens, 0)
    assert attribute(two, predecessor=one, policy=OPENAI_OLD, usage=usage).verdict == (
        "ttl_expired")
    body_24h = {**body, "prompt_cache_retention": "24h"}
    one_24h = state({**chat_body(1), "prompt_cache_retention": "24h"}, 0.0, "openai-chat")
    two_24h = state(body_24h, 600.0, "openai-chat")
    result = attribute(two_24h, predecessor=one_24h, policy=OPENAI_OLD, usage=usage)
    assert result.verdict == "provider_miss" and result.detail["ttl_s"] == 86400


def test_vllm_identical_request_predicts_all_but_the_last_token_in_16_blocks() -> None:
    """vLLM recomputes the last token and caches whole 16-token blocks."""
    body = chat_body(1)
    one, two = state(body, 0.0, "openai-chat"), state(body, 5.0, "openai-chat")
    assert two.request_tokens is not None
    total = two.request_tokens
    result = attribute(two, predecessor=one, policy=VLLM,
                       usage=chat_usage(total, (total - 1) // 16 * 16))
    assert result.predicted_cache_read_tokens == (total - 1) // 16 * 16
    assert result.verdict == "hit"
    assert result.detail["ttl_s"] is None


# ---------------------------------------------------------------------------- unknown, ledger


def test_missing_usage_is_unknown_but_prediction_is_kept() -> None:
    """No usage (failed call / interrupted stream): unknown, with the prediction computed."""
    one = state(anthropic_body(1), 0.0)
    two = state(anthropic_body(2), 30.0)
    for usage in (None, CacheUsage.unknown("anthropic", "stream interrupted")):
        result = attribute(two, predecessor=one, usage=usage, policy=ANTHROPIC)
        assert result.verdict == "unknown"
        assert result.detail["verdict_without_usage"] == "hit"
        assert result.predicted_cache_read_tokens == prefix_tokens(one, "messages[0].content[0]")
    interrupted = attribute(two, predecessor=one, policy=ANTHROPIC,
                            usage=CacheUsage.unknown("anthropic", "stream interrupted"))
    assert interrupted.detail["unknown_reason"] == "stream interrupted"


def test_ledger_only_predecessor_matched_by_fingerprint_predicts_its_whole_prompt() -> None:
    """A predecessor known only from its ledger row (no body) still predicts an append-only
    turn, because its request fingerprint is a chained prefix digest of the new request."""
    body = anthropic_body(1)
    one = state(body, 0.0)
    two_body = anthropic_body(2)
    two_body["messages"][0]["content"][0].pop("cache_control", None)
    two = state(two_body, 30.0)
    row = RequestState(ts=0.0, fingerprint=one.fingerprint, head_fingerprint=one.head_fingerprint,
                       request_tokens=one.request_tokens, record_id="old")
    assert two.request_tokens is not None and one.request_tokens is not None
    result = attribute(two, predecessor=row, policy=ANTHROPIC,
                       usage=anthropic_usage(two.request_tokens, one.request_tokens))
    assert result.verdict == "hit"
    assert result.predicted_cache_read_tokens == one.request_tokens
    assert "predecessor_body" in result.detail and result.predecessor_id == "old"


def test_request_without_segments_is_rejected() -> None:
    """attribute() needs a segmented request (the recorder handles the rest as unknown)."""
    bare = RequestState(ts=0.0, fingerprint="sp1:x", head_fingerprint="sp1:y")
    with pytest.raises(ValueError, match="segmented"):
        attribute(bare, predecessor=None, usage=None, policy=ANTHROPIC)


@settings(max_examples=60, deadline=None)
@given(
    reads=st.integers(min_value=0, max_value=6000),
    gap=st.floats(min_value=0, max_value=1000, allow_nan=False),
    policy=st.sampled_from([ANTHROPIC, OPENAI_OLD, VLLM]),
)
@example(reads=0, gap=301.0, policy=ANTHROPIC)
def test_verdicts_follow_reads_and_gap(reads: int, gap: float, policy: CacheRules) -> None:
    """For a stable appended turn, the verdict depends only on reads vs prediction and the TTL
    (Anthropic: the provider honours the breakpoints, writing what it does not read)."""
    wire = "anthropic" if policy is ANTHROPIC else "openai-chat"
    make = anthropic_body if policy is ANTHROPIC else chat_body
    one, two = state(make(1), 0.0, wire), state(make(2), gap, wire)
    assert two.request_tokens is not None
    total = max(two.request_tokens, reads)
    usage = (anthropic_usage(total, reads, max(total - reads - 10, 1) if not reads else 0)
             if wire == "anthropic" else chat_usage(total, reads))
    result = attribute(two, predecessor=one, usage=usage, policy=policy)
    predicted = result.predicted_cache_read_tokens
    assert predicted is not None and 0 <= predicted <= total
    tolerance = result.detail["tolerance_tokens"]
    ttl = result.detail["ttl_s"]
    if ttl is not None and gap > ttl and not result.detail.get("read_after_ttl"):
        assert result.verdict == "ttl_expired"
    elif reads >= predicted - tolerance:
        assert result.verdict == "hit"
    else:
        assert result.verdict == "provider_miss"


# ---------------------------------------------------------------------------- anchoring


def test_prediction_anchors_on_the_predecessors_reported_entry() -> None:
    """When the whole predecessor entry is shared, the prediction is its reported read + write
    (provider units), not our token estimate."""
    import dataclasses

    one = dataclasses.replace(state(anthropic_body(1), 0.0), cached_extent_tokens=1_777,
                              cache_read_tokens=0)
    two = state(anthropic_body(2), 30.0)
    assert two.request_tokens is not None
    result = attribute(two, predecessor=one,
                       usage=anthropic_usage(two.request_tokens + 200, 1_777, 20),
                       policy=ANTHROPIC)
    assert result.predicted_cache_read_tokens == 1_777
    assert result.verdict == "hit"
    assert result.detail["anchored_on_predecessor"] is True


def test_implicit_breakpoint_model_reads_only_entries() -> None:
    """GPT-5.6+ caches only at breakpoints: a prefix shared only up to the tools reads the
    entry the predecessor itself read, not the raw LCP."""
    import dataclasses

    modern = cache_rules("openai", "gpt-5.6")
    base_body = chat_body(2)
    base_body["model"] = "gpt-5.6"
    one = dataclasses.replace(state(base_body, 0.0, "openai-chat"), cached_extent_tokens=3_000,
                              cache_read_tokens=2_048)
    changed = chat_body(3, system="Edited. " + LONG_SYSTEM * 2)
    changed["model"] = "gpt-5.6"
    two = state(changed, 10.0, "openai-chat")
    assert two.request_tokens is not None
    result = attribute(two, predecessor=one, usage=chat_usage(two.request_tokens, 0),
                       policy=modern)
    assert result.predicted_cache_read_tokens == 0
    same = chat_body(3)
    same["model"] = "gpt-5.6"
    three = state(same, 10.0, "openai-chat")
    assert three.request_tokens is not None
    result = attribute(three, predecessor=one, usage=chat_usage(three.request_tokens, 3_000),
                       policy=modern)
    assert result.predicted_cache_read_tokens == 3_000
    assert result.verdict == "hit"


# ---------------------------------------------------------------------------- verdicts vs reads


def test_cold_call_with_reads_is_a_flagged_hit() -> None:
    """A first call whose provider reports reads beyond the tolerance is a hit flagged
    unexpected_reads (expected cold), not a cold that contradicts its numbers; small reads
    within the tolerance stay cold."""
    s = state(anthropic_body(), 0.0)
    assert s.request_tokens is not None
    total = s.request_tokens
    big = attribute(s, predecessor=None, policy=ANTHROPIC,
                    usage=anthropic_usage(total, total - 100, 50))
    assert big.verdict == "hit"
    assert big.detail["unexpected_reads"] is True
    assert big.detail["expected_verdict"] == "cold"
    assert big.detail["reads_without_known_predecessor"] is True
    assert big.predicted_cache_read_tokens == 0
    tolerance = 1 + math.ceil(TOLERANCE_FRACTION * total)
    small = attribute(s, predecessor=None, policy=ANTHROPIC,
                      usage=anthropic_usage(total, tolerance, 0))
    assert small.verdict == "cold" and "unexpected_reads" not in small.detail


def test_below_minimum_and_ttl_expired_with_reads_are_flagged_hits() -> None:
    """below_minimum (short prompt) and ttl_expired (10 min > 5 min TTL) with reads above the
    tolerance become hits naming the verdict the prefix alone gave."""
    short = state(anthropic_body(2, system="Be brief."), 10.0)
    assert short.request_tokens is not None
    result = attribute(short, predecessor=state(anthropic_body(1, system="Be brief."), 0.0),
                       usage=anthropic_usage(short.request_tokens, short.request_tokens - 3),
                       policy=ANTHROPIC)
    assert (result.verdict, result.detail["expected_verdict"]) == ("hit", "below_minimum")
    policy = OPENAI_OLD.model_copy(update={"ttls_s": (300, 86400)})
    one = state(chat_body(1), 0.0, "openai-chat")
    two = state(chat_body(2), 600.0, "openai-chat")
    assert two.request_tokens is not None
    expired = attribute(two, predecessor=one, policy=policy,
                        usage=chat_usage(two.request_tokens, 0))
    assert expired.verdict == "ttl_expired"
    read = attribute(two, predecessor=one, policy=policy,
                     usage=chat_usage(two.request_tokens, 2048))
    assert read.verdict == "hit" and read.detail["read_after_ttl"] is True
    assert read.detail["expected_verdict"] == "ttl_expired"
    assert read.predicted_cache_read_tokens == 0


def test_other_conversation_sharing_the_head_is_not_a_mutation() -> None:
    """A new conversation compared with another conversation's request on the same head:
    only the shared head is predicted, and losing the other's history is no mutation."""
    other = state(anthropic_body(3), 0.0)
    body = anthropic_body(1)
    body["messages"][0]["content"][0]["text"] = "a different first question"
    new = state(body, 30.0)
    assert new.request_tokens is not None
    head = prefix_tokens(other, "system[0]")
    usage = anthropic_usage(new.request_tokens, head, new.request_tokens - head - 5)
    same = attribute(new, predecessor=other, usage=usage, policy=ANTHROPIC)
    assert same.verdict == "client_mutation" and same.detail["cause"] == "history-rewrite"
    branch = attribute(new, predecessor=other, usage=usage, policy=ANTHROPIC,
                       other_conversation=True)
    assert branch.verdict == "hit" and branch.detail["other_conversation"] is True
    assert branch.predicted_cache_read_tokens == head
    chat_other = state(chat_body(3), 0.0, "openai-chat")
    chat_new = state(chat_body(1, tail="something else entirely"), 30.0, "openai-chat")
    assert chat_new.request_tokens is not None
    result = attribute(chat_new, predecessor=chat_other, other_conversation=True,
                       usage=chat_usage(chat_new.request_tokens, 0), policy=OPENAI_OLD)
    assert result.verdict == "provider_miss" and "cause" not in result.detail


def test_prediction_reuses_the_size_of_the_entry_the_predecessor_read() -> None:
    """When only an earlier entry survives (history rewritten) and it is the entry the
    predecessor itself read, that entry's reported size is the prediction."""
    import dataclasses

    one = state(anthropic_body(3), 0.0)
    head = prefix_tokens(one, "system[0]")
    assert one.segmented is not None
    system = next(s for s in one.segmented.segments if s.name == "system[0]")
    one = dataclasses.replace(one, cache_read_tokens=head + 7, cached_extent_tokens=head + 400,
                              read_entry_digest=system.prefix_digest)
    body = anthropic_body(4)
    body["messages"][2]["content"][0]["text"] = "question one, edited"
    two = state(body, 20.0)
    assert two.request_tokens is not None
    result = attribute(two, predecessor=one, policy=ANTHROPIC,
                       usage=anthropic_usage(two.request_tokens, head + 7))
    assert result.predicted_cache_read_tokens == head + 7
    assert result.detail["anchored_on_predecessor_read"] is True


def test_a_read_inside_the_predecessors_entry_is_anchored_on_its_reported_size() -> None:
    """A cold predecessor reported only its longest entry (read + write, up to its last
    breakpoint, on the assistant message before a long uncached user message); the next
    request, its history rewritten, reads the entry of an earlier breakpoint (the system
    block). The nearest reported count is that longest entry: the prediction is its size less
    our estimate of the part after the system block, not the prompt total less the rest,
    whose long last message the provider counts differently (as aider's repo-map breakpoint
    behind its chat-files breakpoint and its long edit-format reminder show)."""
    import dataclasses

    def body(turns: int) -> dict[str, Any]:
        made = anthropic_body(turns)
        del made["messages"][-1]["content"][-1]["cache_control"]
        made["messages"][-2]["content"][-1]["cache_control"] = {"type": "ephemeral"}
        made["messages"][-1]["content"][-1]["text"] += " Reminder: edit with blocks." * 100
        return made

    one = state(body(3), 0.0)
    assert one.request_tokens is not None
    head = prefix_tokens(one, "system[0]")
    extent = prefix_tokens(one, "messages[3].content[0]")  # our tokens up to the last breakpoint
    skew = 150  # the provider counts 150 more tokens than we do in the last message
    one = dataclasses.replace(one, cache_read_tokens=0, cached_extent_tokens=extent,
                              input_tokens_total=one.request_tokens + skew)
    edited = body(4)
    edited["messages"][2]["content"][0]["text"] = "question one, edited"
    two = state(edited, 20.0)
    assert two.request_tokens is not None
    result = attribute(two, predecessor=one, policy=ANTHROPIC,
                       usage=anthropic_usage(two.request_tokens + skew, head))
    assert result.predicted_cache_read_tokens == head
    assert result.verdict == "client_mutation"
    assert "anchored_on_predecessor_read" not in result.detail


def test_below_minimum_estimate_with_a_reported_write_is_cold() -> None:
    """When our estimate says below the minimum but the provider wrote an entry of at least the
    minimum, the verdict is cold (the prefix was cacheable), flagged unexpected_writes."""
    one = state(anthropic_body(1, history_breakpoint=False), 0.0)
    assert one.request_tokens is not None
    head = prefix_tokens(one, "system[0]")
    strict = ANTHROPIC.model_copy(update={"min_cacheable_tokens": head + 5})
    usage = anthropic_usage(one.request_tokens, 0, head + 6)
    result = attribute(one, predecessor=None, usage=usage, policy=strict)
    assert result.verdict == "cold"
    assert result.detail["unexpected_writes"] is True
    assert result.detail["expected_verdict"] == "below_minimum"


def test_breakpoints_answered_with_no_read_and_no_write_are_ignored_breakpoints() -> None:
    """Zero reads and zero writes on a breakpoint prefix well above the minimum is a
    provider_miss (breakpoints-ignored, expected cold); a prefix within the margin of the
    minimum stays cold (the provider may count it under the minimum)."""
    s = state(anthropic_body(), 0.0)
    assert s.request_tokens is not None
    usage = anthropic_usage(s.request_tokens, 0, 0)
    result = attribute(s, predecessor=None, usage=usage, policy=ANTHROPIC)
    assert result.verdict == "provider_miss"
    assert result.detail["reason"] == "breakpoints-ignored"
    assert result.detail["expected_verdict"] == "cold"
    top = result.detail["breakpoint_prefix_tokens"]
    assert top == result.detail["stable_prefix_tokens"] >= IGNORED_BREAKPOINTS_MARGIN * 1024
    near = ANTHROPIC.model_copy(update={"min_cacheable_tokens": int(top / 1.2)})
    borderline = attribute(s, predecessor=None, usage=usage, policy=near)
    assert borderline.verdict == "cold" and "reason" not in borderline.detail


def test_a_mutation_answered_with_nothing_written_keeps_its_verdict_flagged() -> None:
    """A client_mutation whose breakpoints were ignored too stays a client_mutation (the
    harness changed the prefix) with breakpoints_ignored in the detail."""
    one = state(anthropic_body(1), 0.0)
    two = state(anthropic_body(2, system="Now: 2026-11-30T10:00:00Z. " + LONG_SYSTEM), 10.0)
    assert two.request_tokens is not None
    result = attribute(two, predecessor=one, usage=anthropic_usage(two.request_tokens, 0, 0),
                       policy=ANTHROPIC)
    assert result.verdict == "client_mutation"
    assert result.detail["breakpoints_ignored"] is True
    assert "reason" not in result.detail
