"""The keep-alive's ping bodies (``_client._keepalive_ping``) and what a ping is worth
(``_economics._keepalive_value``), with numbers worked out by hand."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from stableprompt._client._keepalive_ping import NoPing, ping_plan
from stableprompt._economics._keepalive_value import GapModel, ping_value
from stableprompt._policy import cache_rules

CLAUDE = cache_rules("anthropic", "claude-sonnet-4-6")
GPT = cache_rules("openai", "gpt-5.6")
MARK = {"type": "ephemeral"}


def text(value: str, *, mark: dict[str, Any] | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": value}
    if mark is not None:
        block["cache_control"] = mark
    return block


def a_body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-6", "max_tokens": 512, "stream": True,
            "tools": [{"name": "grep", "input_schema": {"type": "object"}}],
            "system": [text("rules", mark=MARK)], "messages": messages, **extra}


# --------------------------------------------------------------------------- Anthropic


def test_a_marked_last_block_gives_the_same_request_with_one_output_token() -> None:
    """Marker on the last block: every message kept, ``max_tokens`` 1 in its place, ``stream``
    gone, every other key in its order and unchanged; 5-minute TTL; the request is not
    changed."""
    body = a_body([{"role": "user", "content": [text("hi", mark=MARK)]}],
                  tool_choice={"type": "auto"})
    before = json.dumps(body)
    plan = ping_plan("anthropic", body, CLAUDE)
    assert list(plan.body) == ["model", "max_tokens", "tools", "system", "messages",
                               "tool_choice"]
    assert plan.body["max_tokens"] == 1 and plan.body["messages"] == body["messages"]
    assert (plan.ttl_s, plan.ttl_label, plan.output_tokens) == (300, "5m", 1)
    assert json.dumps(body) == before


def test_messages_after_the_last_marker_are_dropped_ending_with_a_user_turn() -> None:
    """Marker on block 0 of message 2 (a user turn of two blocks), two messages after it:
    messages 0-1, and message 2 cut after block 0."""
    messages = [{"role": "user", "content": [text("q1")]},
                {"role": "assistant", "content": [text("a1")]},
                {"role": "user", "content": [text("q2", mark=MARK), text("tail")]},
                {"role": "assistant", "content": [text("a2")]},
                {"role": "user", "content": [text("q3")]}]
    plan = ping_plan("anthropic", a_body(messages), CLAUDE)
    assert plan.body["messages"] == [messages[0], messages[1],
                                     {"role": "user", "content": [text("q2", mark=MARK)]}]


def test_a_cut_never_drops_a_tool_result() -> None:
    """A marker on a user turn's first block with a ``tool_result`` after it: the whole turn
    is kept (each ``tool_use`` needs its result)."""
    results = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "a", "content": "1", "cache_control": MARK},
        {"type": "tool_result", "tool_use_id": "b", "content": "2"}]}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [text("q")]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "a", "name": "grep", "input": {}},
            {"type": "tool_use", "id": "b", "name": "grep", "input": {}}]},
        results]
    plan = ping_plan("anthropic", a_body(messages), CLAUDE)
    assert plan.body["messages"] == messages


def test_a_marked_assistant_turn_is_followed_by_the_next_user_turn() -> None:
    """A marker on an assistant turn that is not the last message: the next (user) message
    follows whole, so the ping ends with a user turn."""
    messages = [{"role": "user", "content": [text("q1")]},
                {"role": "assistant", "content": [text("a1", mark=MARK)]},
                {"role": "user", "content": [text("q2")]},
                {"role": "assistant", "content": [text("a2")]}]
    plan = ping_plan("anthropic", a_body(messages), CLAUDE)
    assert plan.body["messages"] == messages[:3]


def test_top_level_and_head_only_markers() -> None:
    """Top-level ``cache_control`` (automatic caching, 1 hour): every message, as sent, TTL
    3600 s. Only a head marker: one user message ``"."``."""
    messages = [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"},
                {"role": "user", "content": "q2"}]
    top = a_body(messages, cache_control={"type": "ephemeral", "ttl": "1h"})
    plan = ping_plan("anthropic", top, CLAUDE)
    assert plan.body["messages"] == messages and (plan.ttl_s, plan.ttl_label) == (3600, "1h")
    head = ping_plan("anthropic", a_body(messages), CLAUDE)
    assert head.body["messages"] == [{"role": "user", "content": "."}]
    assert head.body["system"] == [text("rules", mark=MARK)]


@pytest.mark.parametrize(("body", "code"), [
    ({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "q"}]},
     "no-breakpoint"),
    (a_body([{"role": "user", "content": "q"}],
            thinking={"type": "enabled", "budget_tokens": 2048}), "thinking"),
    (a_body([{"role": "user", "content": "q"}], cache_control={"type": "ephemeral",
                                                               "ttl": "2h"}), "shape"),
])
def test_requests_that_cannot_be_kept_alive(body: dict[str, Any], code: str) -> None:
    """No breakpoint, thinking on, or an unreadable marker: :class:`NoPing` with its code."""
    with pytest.raises(NoPing) as info:
        ping_plan("anthropic", body, CLAUDE)
    assert info.value.code == code


def test_thinking_disabled_is_kept() -> None:
    """``thinking: disabled`` is no obstacle, and stays in the ping (a cache key)."""
    plan = ping_plan("anthropic", a_body([{"role": "user", "content": "q"}],
                                         thinking={"type": "disabled"}), CLAUDE)
    assert plan.body["thinking"] == {"type": "disabled"}


# --------------------------------------------------------------------------- OpenAI


def test_chat_implicit_breakpoint_and_tool_calls_answered() -> None:
    """GPT-5.6 Chat without markers: cut after the last user or tool message (the implicit
    breakpoint); an assistant turn with two tool calls keeps both tool messages;
    ``max_completion_tokens`` 1, ``stream_options`` and ``n`` gone; TTL 30 min."""
    messages = [{"role": "system", "content": "rules"},
                {"role": "user", "content": "q"},
                {"role": "assistant", "tool_calls": [{"id": "1", "type": "function"},
                                                     {"id": "2", "type": "function"}]},
                {"role": "tool", "tool_call_id": "1", "content": "r1"},
                {"role": "tool", "tool_call_id": "2", "content": "r2"},
                {"role": "developer", "content": "tail: the clock"}]
    body = {"model": "gpt-5.6", "messages": messages, "stream": True, "n": 2,
            "stream_options": {"include_usage": True}}
    plan = ping_plan("openai-chat", body, GPT)
    assert plan.body == {"model": "gpt-5.6", "messages": messages[:5],
                         "max_completion_tokens": 1}
    assert (plan.ttl_s, plan.ttl_label, plan.output_tokens) == (1800, "30m", 1)
    legacy = ping_plan("openai-chat", {**body, "max_tokens": 99}, GPT)
    assert legacy.body["max_tokens"] == 1 and "max_completion_tokens" not in legacy.body


def test_chat_cut_at_a_marked_assistant_turn_adds_its_tool_messages() -> None:
    """The last ``prompt_cache_breakpoint`` on an assistant turn with a tool call: its tool
    message follows (an unanswered call is a 400), later ones do not."""
    marked = {"role": "assistant", "tool_calls": [{"id": "9", "type": "function"}],
              "content": [{"type": "text", "text": "calling",
                           "prompt_cache_breakpoint": {"mode": "explicit"}}]}
    messages = [{"role": "user", "content": "q"}, marked,
                {"role": "tool", "tool_call_id": "9", "content": "r"},
                {"role": "user", "content": "next"}]
    plan = ping_plan("openai-chat", {"model": "gpt-5.6", "messages": messages}, GPT)
    assert plan.body["messages"] == messages[:3]


def test_responses_marker_function_call_output_and_12h() -> None:
    """Responses with a 12-hour TTL, two parallel calls and the marker on the first call's
    output: cut there, then the second call's output follows (an unanswered call is a 400),
    the later user message does not; ``max_output_tokens`` 16 (the API's minimum); TTL
    43,200 s. A string ``input`` is kept whole."""
    marked = {"type": "function_call_output", "call_id": "c1",
              "output": [{"type": "input_text", "text": "ok",
                          "prompt_cache_breakpoint": {"mode": "explicit"}}]}
    items = [{"type": "message", "role": "user", "content": "q"},
             {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
             {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
             marked,
             {"type": "function_call_output", "call_id": "c2", "output": "ok"},
             {"type": "message", "role": "user", "content": "more"}]
    body = {"model": "gpt-5.6", "input": items, "prompt_cache_options": {"ttl": "12h"},
            "max_output_tokens": 4000}
    plan = ping_plan("openai-responses", body, GPT)
    assert plan.body["input"] == items[:5]
    assert plan.body["max_output_tokens"] == 16 and plan.output_tokens == 16
    assert (plan.ttl_s, plan.ttl_label) == (43200, "12h")
    text_input = ping_plan("openai-responses", {"model": "gpt-5.6", "input": "hello"}, GPT)
    assert text_input.body["input"] == "hello"


def test_openai_without_a_documented_ttl_or_breakpoint_is_refused() -> None:
    """GPT-4.1 (no explicit caching, no TTL refreshed by a read): ``no-explicit-ttl``;
    explicit mode with no marker: ``no-breakpoint``; a self-hosted engine: ``no-ttl``;
    another wire format: ``wire-format``."""
    chat: dict[str, Any] = {"model": "gpt-4.1", "messages": [{"role": "user", "content": "q"}]}
    cases: list[tuple[str, dict[str, Any], Any, str]] = [
        ("openai-chat", chat, cache_rules("openai", "gpt-4.1"), "no-explicit-ttl"),
        ("openai-chat", {**chat, "model": "gpt-5.6",
                         "prompt_cache_options": {"mode": "explicit"}}, GPT, "no-breakpoint"),
        ("openai-chat", chat, cache_rules("vllm", "x"), "no-ttl"),
        ("gemini", chat, GPT, "wire-format")]
    for wire, body, rules, code in cases:
        with pytest.raises(NoPing) as info:
            ping_plan(wire, body, rules)
        assert info.value.code == code, wire


# --------------------------------------------------------------------------- value

# Unit prices (USD per token) of the hand computations: $3/M input, $0.30/M cache read,
# $3.75/M cache write (5 min), $15/M output; a prefix of 10,000 cached tokens.
C = 10_000
READ, WRITE, OUTPUT = 0.30e-6, 3.75e-6, 15e-6
SAVING = C * (WRITE - READ)   # 0.0345 USD per next request that finds the entry alive
PRICE = C * READ + OUTPUT      # 0.003015 USD per ping


def test_gap_model_by_hand() -> None:
    """Two observed gaps (100 s, 200 s) and the log-uniform prior (1 s .. 1 day) worth one:
    ``F(150) = (1 + ln 150 / ln 86400) / 3``; nothing observed and no prior: unknown."""
    model = GapModel()
    model.observe([200.0, 100.0])
    assert model.gaps == (100.0, 200.0) and model.observed == 2
    assert model.cdf(150) == pytest.approx((1 + math.log(150) / math.log(86400)) / 3)
    assert model.cdf(0.5) == 0 and model.cdf(10**6) == 1
    assert model.survival(150) == pytest.approx(1 - (1 + 5.0106353 / 11.3667428) / 3)
    empty = GapModel(prior_weight=0)
    assert not empty.known and empty.cdf(10) == 0


def test_a_run_of_pings_pays_where_one_ping_alone_would_not() -> None:
    """Prior gaps 60, 600, 700, 4000 s; TTL 300 s, interval 270 s, first decision at 270 s.
    Idle then: 3 of 4 gaps (S = 3/4). One ping keeps the entry to 570 s: no gap ends in
    (300, 570], worth 0. Two keep it to 840 s: 600 and 700 (hit 2/4 / 3/4 = 2/3), saving
    2/3 x 0.0345 = 0.023, cost 2 pings (both sent while idle: S(540)/S(270) = 1) = 0.00603.
    Three: the same hit, cost 0.003015 x (1 + 1 + 1/3). Best: two, so ping."""
    model = GapModel(prior_gaps_s=[60, 600, 700, 4000])
    value = ping_value(model, gap_s=270, refreshed_s=0, ttl_s=300, interval_s=270,
                       pings_left=5, saving_per_hit_usd=SAVING, ping_usd=PRICE)
    assert value.ping and value.run == 2
    assert value.hit_probability == pytest.approx(2 / 3)
    assert value.saving_usd == pytest.approx(0.023)
    assert value.cost_usd == pytest.approx(0.00603)
    one = ping_value(model, gap_s=270, refreshed_s=0, ttl_s=300, interval_s=270,
                     pings_left=1, saving_per_hit_usd=SAVING, ping_usd=PRICE)
    assert not one.ping and one.reason == "not-worth-it" and one.hit_probability == 0


def test_no_ping_when_not_worth_it_expired_or_unknown() -> None:
    """Prior gaps 60, 60, 4000, 5000 s with 3 pings left: no gap ends before 1,110 s, so no
    run saves anything (``not-worth-it``); a decision at 400 s with the last refresh at 0 is
    past the TTL (``expired``: a ping would write); no gaps and no prior: ``no-estimate``; a
    margin larger than the best net saving: ``not-worth-it``."""
    late = GapModel(prior_gaps_s=[60, 60, 4000, 5000])
    value = ping_value(late, gap_s=270, refreshed_s=0, ttl_s=300, interval_s=270,
                       pings_left=3, saving_per_hit_usd=SAVING, ping_usd=PRICE)
    assert (value.ping, value.reason, value.saving_usd) == (False, "not-worth-it", 0.0)
    expired = ping_value(late, gap_s=400, refreshed_s=0, ttl_s=300, interval_s=270,
                         pings_left=3, saving_per_hit_usd=SAVING, ping_usd=PRICE)
    assert expired.reason == "expired"
    unknown = ping_value(GapModel(prior_weight=0), gap_s=270, refreshed_s=0, ttl_s=300,
                         interval_s=270, pings_left=3, saving_per_hit_usd=SAVING,
                         ping_usd=PRICE)
    assert unknown.reason == "no-estimate"
    margin = ping_value(GapModel(prior_gaps_s=[60, 600, 700, 4000]), gap_s=270,
                        refreshed_s=0, ttl_s=300, interval_s=270, pings_left=5,
                        saving_per_hit_usd=SAVING, ping_usd=PRICE, min_saving_usd=0.02)
    assert not margin.ping and margin.reason == "not-worth-it"  # best net is 0.01697


def test_a_single_ping_by_the_log_uniform_prior() -> None:
    """Nothing observed, the default prior: at 270 s the next request falls in (300, 570]
    with probability (ln 570 - ln 300) / (ln 86400 - ln 270) = 0.64185 / 5.76836 = 0.11127;
    one ping saves 0.11127 x 0.0345 = 0.0038389 against 0.003015: worth it (net 0.000824)."""
    value = ping_value(GapModel(), gap_s=270, refreshed_s=0, ttl_s=300, interval_s=270,
                       pings_left=1, saving_per_hit_usd=SAVING, ping_usd=PRICE)
    assert value.ping and value.run == 1
    assert value.hit_probability == pytest.approx(0.11127, rel=1e-4)
    assert value.saving_usd == pytest.approx(0.0038389, rel=1e-4)
    assert value.cost_usd == pytest.approx(0.003015)
