"""What-if replay of cache policies (issue 29, item 1) and the CachePolicy value (item 2).

The replayed costs are checked against sums written out by hand from the prices of
claude-sonnet-4-5 (genai-prices: $3 per million input tokens, cache reads 0.1x, 5-minute
writes 1.25x, 1-hour writes 2x, output $15 per million; the first test pins them), never by
calling the replay's own arithmetic.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from stableprompt import (
    BreakpointError,
    CachePolicy,
    InputError,
    KeepAlive,
    Ledger,
    PolicyError,
    PromptBuilder,
    Tool,
    TtlChoice,
    UsageRecord,
    summarize,
    what_if,
)
from stableprompt._economics._prices import unit_prices

MODEL = "claude-sonnet-4-5"
T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
IN, READ, W5, W1, OUT = 3e-6, 3e-7, 3.75e-6, 6e-6, 15e-6


def _record(i: int, at: float, total: int, read: int, write: int, verdict: str, *,
            session: str = "s1", detail: dict[str, Any] | None = None,
            predecessor: str | None = None, predicted: int | None = None,
            provider: str = "anthropic", model: str = MODEL, output: int = 0,
            write_1h: int = 0) -> UsageRecord:
    return UsageRecord(
        record_id=f"r{i}", ts_utc=T0 + timedelta(seconds=at), session_id=session,
        scenario="what-if", wire_format="anthropic", provider=provider, model=model,
        predecessor_id=predecessor, input_tokens_total=total, cache_read_tokens=read,
        cache_write_tokens=write, cache_write_5m_tokens=write - write_1h,
        cache_write_1h_tokens=write_1h, uncached_tokens=total - read - write,
        output_tokens=output, verdict=verdict,  # type: ignore[arg-type]
        predicted_cache_read_tokens=predicted, verdict_detail=detail or {})


def _three_calls() -> list[UsageRecord]:
    """A 10,000-token first call, a hit a minute later, then a 10-minute think-time gap that
    a 5-minute TTL does not survive (the recorder said ttl_expired: 10,500 expired)."""
    head = {"head_tokens": 4000}
    return [
        _record(1, 0, 10_000, 0, 10_000, "cold", detail=head),
        _record(2, 60, 10_500, 10_000, 500, "hit", detail={**head, "ttl_s": 300},
                predecessor="r1", predicted=10_000),
        _record(3, 660, 11_000, 0, 11_000, "ttl_expired", predecessor="r2", predicted=0,
                detail={**head, "ttl_s": 300, "expired_tokens": 10_500}),
    ]


def test_the_hand_prices_are_genai_prices() -> None:
    prices = unit_prices("anthropic", MODEL, T0.date())
    assert prices is not None
    assert (prices.input, prices.cache_read, prices.cache_write, prices.cache_write_1h,
            prices.output) == pytest.approx((IN, READ, W5, W1, OUT), rel=1e-9)


TTL_ONLY = [CachePolicy(name="default"), CachePolicy(name="1h", head="1h", history="1h"),
            CachePolicy(name="1h head + 5m history", head="1h", history="5m")]


def test_each_policy_is_replayed_as_computed_by_hand() -> None:
    result = what_if(_three_calls(), policies=TTL_ONLY)
    paid = 10_000 * W5 + (10_000 * READ + 500 * W5) + 11_000 * W5
    assert result.recorded_usd == pytest.approx(paid)
    assert result.as_used.policy.for_kind("main") == TtlChoice(head="5m", history="5m")
    assert result.as_used.usd == pytest.approx(paid)
    by = result.outcomes_by_label()
    assert by["default"].usd == pytest.approx(paid)
    assert by["default"].ttl_expired == 1
    # 1 hour everywhere: every write at 2x, the third call reads the 10,500 it shares.
    assert by["1h"].usd == pytest.approx(10_000 * W1 + (10_000 * READ + 500 * W1)
                                         + (10_500 * READ + 500 * W1))
    assert by["1h"].ttl_expired == 0
    # 1 h head (4,000 tokens) + 5 m history: the third call reads the head only.
    assert by["1h head + 5m history"].usd == pytest.approx(
        (4_000 * W1 + 6_000 * W5) + (10_000 * READ + 500 * W5) + (4_000 * READ + 7_000 * W5))
    assert result.cheapest is by["1h"]
    # After the fact: write the second call's new tokens at 1 h, and nothing else.
    assert result.hindsight_usd == pytest.approx(
        10_000 * W5 + (10_000 * READ + 500 * W1) + (10_500 * READ + 500 * W5))
    assert all(o.usd >= result.hindsight_usd - 1e-12 for o in result.outcomes)
    assert result.saving_usd == pytest.approx(paid - by["1h"].usd)
    # 1 h pays when the share of gaps between 5 m and 1 h reaches the extra write price of
    # the 500 new tokens a call writes over the rewrite it saves of the 10,250 it can reuse.
    even = result.break_even["1h"]
    assert even.share_needed == pytest.approx(500 * (W1 - W5) / (10_250 * (W5 - READ)))
    assert even.share_observed == 0.5  # the 600 s gap of the two
    assert even.text() == "1h pays when >= 3.2% of gaps fall between 5m and 1h (observed 50.0%)"
    chosen = result.recommended()
    assert chosen.for_kind("main") == TtlChoice(head="1h", history="1h")
    assert chosen.keep_alive is None


def test_a_keep_alive_is_replayed_as_its_scheduler_sends_it() -> None:
    """Keep-alive every 270 s, at most 2 per gap, its scheduler's prior one 600 s gap: the
    replay sends what KeepAliveScheduler would (its expected-saving rule on the chain's gaps
    so far): in the 600 s gap two pings (at 270 s and 540 s: whether the next request comes
    in (300, 840] given idle is certain under {prior 600, seen 60}), each reading the
    10,500-token extent and producing one token, so the third call reads; after the last
    call two more (the scheduler cannot know it was the last), reading 11,000."""
    keep = CachePolicy(name="keep", keep_alive=KeepAlive(interval_s=270, max_pings=2,
                                                         prior_gaps_s=(600.0,)))
    result = what_if(_three_calls(), policies=[CachePolicy(name="default"), keep])
    replayed = result.outcomes_by_label()["keep"]
    assert replayed.keepalive_pings == 4 and replayed.ttl_expired == 0
    assert replayed.usd == pytest.approx(
        10_000 * W5 + (10_000 * READ + 500 * W5) + 2 * (10_500 * READ + OUT)
        + (10_500 * READ + 500 * W5) + 2 * (11_000 * READ + OUT))
    # The scheduler's default prior (log-uniform, 1 s to a day) gives up sooner: the 600 s
    # gap expires after one ping.
    plain = CachePolicy(name="plain", keep_alive=KeepAlive(interval_s=270, max_pings=2))
    gave_up = what_if(_three_calls(), policies=[plain]).outcomes_by_label()["plain"]
    assert gave_up.ttl_expired == 1
    # The default candidates' keep-alives carry the replayed traffic's gaps as their
    # scheduler's prior (60 s and 600 s here), and ping after the last call too (the harness
    # may not end its conversations); the chosen one keeps them.
    chosen = what_if(_three_calls()).recommended()
    assert chosen.keep_alive == KeepAlive(interval_s=270, max_pings=14,
                                          prior_gaps_s=(60.0, 600.0))
    # One that says its harness ends each conversation sends nothing after the last call.
    closing = CachePolicy(name="closing", keep_alive=KeepAlive(
        interval_s=270, max_pings=2, prior_gaps_s=(600.0,), closes_conversations=True))
    assert what_if(_three_calls(), policies=[closing]).outcomes[0].keepalive_pings == 2


def test_kinds_are_told_apart_and_chosen_separately() -> None:
    """A forked session (its first call's predecessor is another session's) is a subagent;
    a single-call session is one-shot; each kind gets its own cheapest TTLs."""
    records = [*_three_calls(),
               _record(4, 700, 9_000, 4_000, 5_000, "hit", session="sub",
                       predecessor="r3", detail={"head_tokens": 4000, "ttl_s": 300}),
               _record(5, 710, 9_200, 9_000, 200, "hit", session="sub",
                       predecessor="r4", detail={"head_tokens": 4000, "ttl_s": 300}),
               _record(6, 720, 5_000, 4_000, 1_000, "hit", session="once",
                       predecessor="r3", detail={"head_tokens": 4000, "ttl_s": 300})]
    result = what_if(records)
    kinds = result.outcomes_by_label()["default"].by_kind
    assert {k: int(v["calls"]) for k, v in kinds.items()} == {
        "main": 3, "subagent": 2, "one-shot": 1}
    chosen = result.recommended()
    assert chosen.for_kind("subagent") == TtlChoice()  # short gaps: the default is cheapest
    assert chosen.for_kind("one-shot") == TtlChoice()


def test_rows_without_head_tokens_skip_per_place_policies_and_say_so() -> None:
    records = [r.model_copy(update={"verdict_detail": {
        k: v for k, v in r.verdict_detail.items() if k != "head_tokens"}})
        for r in _three_calls()]
    result = what_if(records)
    assert not result.per_place
    assert "1h head + 5m history" not in result.outcomes_by_label()
    assert any("head_tokens" in note for note in result.notes)


def test_unknown_usage_and_unpriced_models_are_named_not_priced_at_zero() -> None:
    records = [*_three_calls(),
               UsageRecord(record_id="x1", ts_utc=T0, session_id="s9", wire_format="anthropic",
                           provider="anthropic", model=MODEL, verdict="unknown"),
               _record(8, 5, 2_000, 0, 2_000, "cold", session="s8", model="no-such-model-9")]
    result = what_if(records)
    assert result.calls == 3
    assert any(n == "1 call not replayed: usage or cache reads unknown" for n in result.notes)
    assert any("no price for anthropic/no-such-model-9" in n for n in result.notes)
    with pytest.raises(PolicyError, match="no call to replay"):
        what_if(records[3:4])


def test_several_providers_need_one_named() -> None:
    other = _record(9, 1, 3_000, 0, 0, "cold", session="o", provider="openai",
                    model="gpt-5.2")
    records = [*_three_calls(), other]
    with pytest.raises(PolicyError, match="several providers"):
        what_if(records)
    assert what_if(records, provider="anthropic").calls == 3
    assert what_if(records, provider="openai").calls == 1


def test_summarize_and_the_report_show_the_what_if(tmp_path: Path) -> None:
    summary = summarize(_three_calls(), what_if=True)
    assert summary.what_if is not None and set(summary.what_if) == {"anthropic"}
    assert summarize(_three_calls()).what_if is None
    path = tmp_path / "l.db"
    with Ledger(path) as ledger:
        for record in _three_calls():
            ledger.write(record)
    run = [sys.executable, "-m", "stableprompt", "report", str(path), "--what-if"]
    text = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    assert "what-if: anthropic" in text
    assert "hindsight bound" in text and "1h head + 5m history" in text
    assert "break-even: 1h pays when" in text
    data = json.loads(subprocess.run([*run, "--json"], capture_output=True, text=True,
                                     check=True).stdout)
    entry = data["what_if"]["anthropic"]
    assert entry["calls"] == 3 and entry["cheapest"] == "default + keep-alive"
    assert entry["hindsight_usd"] <= min(p["usd"] for p in entry["policies"])


def test_from_ledger_picks_the_cheapest(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with Ledger(path) as ledger:
        for record in _three_calls():
            ledger.write(record)
    chosen = CachePolicy.from_ledger(path)
    assert chosen.keep_alive is not None and chosen.keep_alive.prior_gaps_s == (60.0, 600.0)
    assert chosen.name.startswith("from ledger: ")
    assert CachePolicy.from_ledger(_three_calls()) == chosen


# --------------------------------------------------------------------------- CachePolicy


def test_a_shorter_ttl_before_a_longer_one_is_refused() -> None:
    with pytest.raises(PolicyError) as caught:
        CachePolicy(head="5m", history="1h")
    assert caught.value.code == "cache-policy-ttl-order"
    with pytest.raises(PolicyError) as caught:
        CachePolicy(by_kind={"subagent": {"head": "30m", "history": "12h"}})  # type: ignore[dict-item]
    assert caught.value.code == "cache-policy-ttl-order"
    assert "/by_kind/subagent" in str(caught.value)


@pytest.mark.parametrize(("fields", "text"), [
    ({"history": "7m"}, "'7m' is not one of"),
    ({"by_kind": {"helper": {}}}, "unknown request kind"),
    ({"head": "5m", "keep_alive": {"interval_s": 300, "max_pings": 3}},
     "not shorter than the main TTL"),
    ({"keep_alive": {"interval_s": 0, "max_pings": 3}}, "greater than 0"),
    ({"keep_alive": {"interval_s": 60, "max_pings": -1}}, "greater than or equal to 0"),
    ({"extra": 1}, "Extra inputs"),
])
def test_bad_policies_are_typed_errors(fields: dict[str, Any], text: str) -> None:
    with pytest.raises(PolicyError, match=text) as caught:
        CachePolicy(**fields)
    assert caught.value.code == "cache-policy"


def test_policy_files(tmp_path: Path) -> None:
    good = tmp_path / "p.json"
    good.write_text('{"head": "1h", "history": "5m", "keep_alive": '
                    '{"interval_s": 270, "max_pings": 4}}')
    policy = CachePolicy.from_file(good)
    assert policy.for_kind("subagent") == TtlChoice(head="1h", history="5m")
    assert policy.label() == "1h head + 5m history + keep-alive every 4m30s (max 4)"
    for body, text in (("{", "invalid cache policy at /"), ('{"head": "5m", "history": "1h"}',
                                                            "longer TTLs must come first")):
        bad = tmp_path / "bad.json"
        bad.write_text(body)
        with pytest.raises(PolicyError, match=text) as caught:
            CachePolicy.from_file(bad)
        assert str(bad) in str(caught.value)
    with pytest.raises(PolicyError, match="cannot read cache policy"):
        CachePolicy.from_file(tmp_path / "missing.json")
    with pytest.raises(PolicyError, match="unknown request kind"):
        policy.for_kind("helper")


@pytest.mark.parametrize(("content", "needle"), [
    pytest.param('{"head": "1h"}'.encode("utf-16-le"),
                 "has NUL bytes (UTF-16 text?)", id="utf-16-no-bom"),
    pytest.param('{"head": "1h"}'.encode("utf-16"),
                 "starts with a UTF-16 byte-order mark", id="utf-16"),
    pytest.param('{"name": "caf\u00e9"}'.encode("latin-1"),
                 "is not UTF-8 (byte offset 13)", id="latin-1"),
])
def test_a_policy_file_that_is_not_utf8_is_a_policy_error(
        tmp_path: Path, content: bytes, needle: str) -> None:
    """A UTF-16 or Latin-1 policy file is a PolicyError naming the file and the encoding to
    use, not a UnicodeDecodeError."""
    path = tmp_path / "p.json"
    path.write_bytes(content)
    with pytest.raises(PolicyError, match="save it as UTF-8 JSON") as caught:
        CachePolicy.from_file(path)
    assert caught.value.code == "cache-policy"
    assert needle in str(caught.value) and str(path) in str(caught.value)


def test_a_policy_file_may_start_with_a_utf8_byte_order_mark(tmp_path: Path) -> None:
    """A UTF-8 byte-order mark (Windows editors write one) is dropped before parsing."""
    path = tmp_path / "p.json"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"head": "1h"}')
    assert CachePolicy.from_file(path) == CachePolicy(head="1h")


@pytest.mark.parametrize("path", [None, 3, b"p.json"])
def test_a_policy_file_path_of_another_type_is_a_policy_error(path: object) -> None:
    """``from_file(None)`` and the like: a PolicyError saying a path is expected, not a
    TypeError from pathlib."""
    with pytest.raises(PolicyError, match="is a path") as caught:
        CachePolicy.from_file(path)  # type: ignore[arg-type]
    assert caught.value.code == "cache-policy"


WEATHER = Tool("get_weather", "Weather for a city.",
               {"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"]})


def _rendered(head_ttl: str) -> Any:
    head = PromptBuilder(tokenizer=None).system("Be brief.").tools([WEATHER]).freeze(
        head_ttl=head_ttl)
    conv = head.conversation()
    conv.user("Weather in Paris?")
    return conv.render()


def test_renders_take_the_policy_ttls() -> None:
    policy = CachePolicy(head="1h", history="5m",
                         by_kind={"subagent": TtlChoice(head="1h", history="1h")})
    body = _rendered("1h").to_anthropic(model=MODEL, max_tokens=10, cache_policy=policy).body
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    sub = _rendered("1h").to_anthropic(model=MODEL, max_tokens=10, cache_policy=policy,
                                       request_kind="subagent").body
    assert sub["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral",
                                                                   "ttl": "1h"}
    with pytest.raises(BreakpointError) as caught:
        _rendered("5m").to_anthropic(model=MODEL, max_tokens=10, cache_policy=policy)
    assert caught.value.code == "cache-policy-head-ttl"
    with pytest.raises(InputError, match="either cache_policy or history_ttl"):
        _rendered("1h").to_anthropic(model=MODEL, max_tokens=10, cache_policy=policy,
                                     history_ttl="1h")
    with pytest.raises(InputError, match="must be a CachePolicy"):
        _rendered("1h").to_anthropic(model=MODEL, max_tokens=10,
                                     cache_policy={"head": "1h"})
    openai = _rendered("5m").to_openai_responses(
        model="gpt-5.6", cache_policy=CachePolicy(head="12h", history="30m")).body
    assert openai["prompt_cache_options"]["ttl"] == "12h"
    marks = [part.get("prompt_cache_breakpoint") for item in openai["input"]
             for part in (item.get("content") if isinstance(item.get("content"), list) else [])
             if isinstance(part, dict) and "prompt_cache_breakpoint" in part]
    assert {"ttl": "30m"} in marks or any(m and m.get("ttl") == "30m" for m in marks)
    plain = _rendered("5m").to_openai_chat(model="gpt-5.2", cache_policy=CachePolicy()).body
    assert "prompt_cache_options" not in plain


def test_openai_candidates_are_the_ttls_its_api_accepts() -> None:
    """Chat accepts only 30m (openai-python's PromptCacheOptions), Responses 30m or 12h
    (12h writes 2.5x); before GPT-5.6 nothing is chosen, and no keep-alive either (no TTL a
    read is documented to refresh: the scheduler could not keep it); Bedrock's Converse
    requests cannot be pinged."""
    def calls(wire: str, model: str) -> list[UsageRecord]:
        return [r.model_copy(update={"wire_format": wire, "provider": "openai", "model": model})
                for r in _three_calls()]

    chat = what_if(calls("openai-chat", "gpt-5.6")).outcomes_by_label()
    assert set(chat) == {"default", "default + keep-alive"}
    responses = what_if(calls("openai-responses", "gpt-5.6")).outcomes_by_label()
    assert set(responses) == {"default", "12h", "12h head + 30m history", "default + keep-alive",
                              "12h + keep-alive", "12h head + 30m history + keep-alive"}
    old = what_if(calls("openai-chat", "gpt-5.2"))
    assert set(old.outcomes_by_label()) == {"default"}
    assert any("no keep-alive candidate" in note and "GPT-5.6" in note for note in old.notes)
    with pytest.raises(PolicyError, match="no keep-alive here"):
        what_if(calls("openai-chat", "gpt-5.2"), policies=[
            CachePolicy(keep_alive=KeepAlive(interval_s=60, max_pings=2))])
    converse = [r.model_copy(update={"wire_format": "bedrock-converse", "provider": "bedrock",
                                     "model": "anthropic.claude-sonnet-4-6"})
                for r in _three_calls()]
    assert "default + keep-alive" not in what_if(converse).outcomes_by_label()
    with pytest.raises(PolicyError, match="explicit cache is Gemini's"):
        what_if(_three_calls(), policies=[CachePolicy(explicit_cache=True)])


def test_an_explicit_gemini_head_cache_is_priced_with_its_storage() -> None:
    """gemini-2.5-pro: explicit reads $0.125 and storage $4.50 per million tokens per hour
    (ExplicitCacheRule, the pricing page as quoted); input $1.25 per million (genai-prices).
    Two calls ten minutes apart, 5,000 head tokens of 8,000, nothing read implicitly."""
    prices = unit_prices("gemini", "gemini-2.5-pro", T0.date())
    assert prices is not None and prices.input == pytest.approx(1.25e-6)
    records = [
        _record(1, 0, 8_000, 0, 0, "cold", provider="gemini", model="gemini-2.5-pro",
                detail={"head_tokens": 5000}),
        _record(2, 600, 8_000, 0, 0, "ttl_expired", provider="gemini", model="gemini-2.5-pro",
                predecessor="r1", detail={"head_tokens": 5000, "ttl_s": 3600}),
    ]
    records = [r.model_copy(update={"wire_format": "gemini"}) for r in records]
    result = what_if(records)
    explicit = result.outcomes_by_label()["explicit head cache"]
    storage = 5000 / 1e6 * 4.50 * (600 + 3600) / 3600
    assert explicit.storage_usd == pytest.approx(storage)
    created = 5000 * 1.25e-6  # the cache made once, at the first call (its head as input)
    assert explicit.usd == pytest.approx(2 * (3000 * 1.25e-6 + 5000 * 0.125e-6) + storage
                                         + created)
    assert result.recorded_usd == pytest.approx(2 * 8000 * 1.25e-6)


def test_a_branch_sharing_its_parents_session_is_a_subagent_chain() -> None:
    """Claude Code's and Codex's subagents keep their parent's session id with a head of
    their own (the harness tests' traffic): a lineage started while the first is used again
    later is a subagent, with its own chain (its gaps are not the parent's); a lineage used
    once is one-shot; a lineage that replaces the first (a system edit) stays main."""
    def row(i: int, at: float, lineage: str, session: str = "cc",
            total: int = 6_000) -> UsageRecord:
        return _record(i, at, total, 0, total, "cold", session=session,
                       detail={"head_tokens": 2000}).model_copy(update={"lineage": lineage})

    expired = _record(5, 410, 6_500, 0, 6_500, "ttl_expired", session="cc", predicted=0,
                      detail={"head_tokens": 2000, "ttl_s": 300, "expired_tokens": 6_000})
    records = [row(1, 0, "main"), row(2, 5, "main"), row(3, 10, "sub", total=3_000),
               row(4, 400, "sub", total=3_200),
               expired.model_copy(update={"lineage": "main"}), row(6, 420, "title"),
               row(7, 0, "v1", "edit"), row(8, 5, "v1", "edit"), row(9, 10, "v2", "edit"),
               row(10, 20, "v2", "edit"),
               # tools reordered back and forth: the history goes on (and grows) under
               # alternating heads; not a subagent
               row(11, 0, "a", "drift"), row(12, 5, "b", "drift", 6_100),
               row(13, 10, "a", "drift", 6_200), row(14, 15, "b", "drift", 6_300)]
    by_kind = what_if(records).outcomes_by_label()["default"].by_kind
    assert {k: int(v["calls"]) for k, v in by_kind.items()} == {
        "main": 11, "subagent": 2, "one-shot": 1}
    # The main chain's gap before call 5 is 405 s (from call 2, not 10 s from the subagent's
    # call 4), past the 5-minute TTL; a 1-hour TTL keeps it: 6,000 tokens read.
    outcomes = what_if(records).outcomes_by_label()
    assert outcomes["default"].by_kind["main"]["ttl_expired"] == 1
    assert outcomes["1h"].by_kind["main"]["ttl_expired"] == 0
    assert outcomes["1h"].read_tokens == 6_000


@pytest.mark.parametrize("source", [42, b"l.db", {"a": 1}, [1, 2], [None]])
def test_what_if_refuses_what_is_not_a_ledger_or_records(source: Any) -> None:
    with pytest.raises(InputError) as caught:
        what_if(source)
    assert caught.value.code == "what-if-source"


def test_a_missing_ledger_is_a_ledger_error(tmp_path: Path) -> None:
    from stableprompt import LedgerError

    with pytest.raises(LedgerError):
        what_if(tmp_path / "missing.db")
    with pytest.raises(LedgerError):
        CachePolicy.from_ledger(tmp_path / "missing.db")


@pytest.mark.parametrize("provider", ["anthropic", "openai", "bedrock", "gemini"])
def test_the_policy_used_on_the_demo_ledgers_is_replayed_within_one_percent(
        provider: str, tmp_path: Path) -> None:
    """Issue 29's acceptance on the demo (every scenario, the synthetic workload, each
    emulated provider): the replay of the policy the scenarios used reproduces the recorded
    cost within 1%, and no candidate is cheaper than the hindsight bound."""
    from stableprompt.demo import run_demo, synthetic_workload

    ledger = tmp_path / "demo.db"
    run_demo(synthetic_workload().select(3), provider=provider, ledger_path=ledger)
    result = what_if(ledger)
    assert result.provider == provider and result.calls > 50
    assert result.as_used.usd == pytest.approx(result.recorded_usd, rel=0.01)
    assert all(o.usd >= result.hindsight_usd - 1e-12 for o in result.outcomes)


def test_a_candidate_with_a_ttl_the_provider_lacks_is_refused() -> None:
    with pytest.raises(PolicyError, match="TTL '30m' is not one anthropic offers here"):
        what_if(_three_calls(), policies=[CachePolicy(head="30m", history="30m")])
    with pytest.raises(PolicyError, match="not a CachePolicy"):
        what_if(_three_calls(), policies=["1h"])  # type: ignore[list-item]
    with pytest.raises(PolicyError, match="no candidate"):
        what_if(_three_calls(), policies=[])


def test_an_explicit_cache_is_shared_by_the_sessions_of_its_head_and_made_again_after_expiry(
        ) -> None:
    """Two sessions with one head (lineage) share one explicit cache: one creation, storage
    over the union of the times it lives (each use extends it an hour); a use two hours
    after the last one finds it expired and makes it again."""
    def row(i: int, at: float, session: str) -> UsageRecord:
        return _record(i, at, 8_000, 0, 0, "cold", provider="gemini", model="gemini-2.5-pro",
                       session=session, detail={"head_tokens": 5000}).model_copy(
            update={"wire_format": "gemini", "lineage": "sp2:head"})

    records = [row(1, 0, "a"), row(2, 600, "b"), row(3, 600 + 7200, "a")]
    explicit = what_if(records).outcomes_by_label()["explicit head cache"]
    hours = ((600 + 3600) + 3600) / 3600  # [0, 4200] then [7800, 11400]
    assert explicit.storage_usd == pytest.approx(5000 / 1e6 * 4.50 * hours)
    assert explicit.usd == pytest.approx(3 * (3000 * 1.25e-6 + 5000 * 0.125e-6)
                                         + 2 * 5000 * 1.25e-6 + explicit.storage_usd)


def test_no_explicit_candidate_for_a_model_without_explicit_caching() -> None:
    records = [_record(1, 0, 8_000, 0, 0, "cold", provider="gemini", model="gemini-4-argon",
                       detail={"head_tokens": 5000}).model_copy(update={"wire_format": "gemini"})]
    if unit_prices("gemini", "gemini-4-argon", T0.date()) is None:
        pytest.skip("genai-prices has no price for gemini-4-argon")
    result = what_if(records)
    assert "explicit head cache" not in result.outcomes_by_label()
    assert any("offer only implicit caching" in note for note in result.notes)


def test_gap_quantiles_keep_the_shape_of_many_gaps() -> None:
    from stableprompt._economics._cache_policy import MAX_PRIOR_GAPS, gap_quantiles

    assert gap_quantiles([5.0, 1.0, 3.0]) == (1.0, 3.0, 5.0)
    many = [float(g) for g in range(1, 1001)]
    kept = gap_quantiles(many)
    assert len(kept) == MAX_PRIOR_GAPS and kept[0] == 1.0 and kept[-1] == 1000.0
    assert kept == tuple(sorted(kept))
    with pytest.raises(PolicyError, match="prior_gaps_s"):
        KeepAlive(interval_s=60, max_pings=1, prior_gaps_s=(-1.0,))


def test_the_policy_used_is_replayed_per_chain() -> None:
    """A ledger holding traffic from before and after a policy change (5-minute sessions,
    then 1-hour ones): each chain is replayed with the TTLs its own requests used."""
    five = _three_calls()
    hour = [r.model_copy(update={
        "record_id": r.record_id + "h", "session_id": "s2",
        "ts_utc": r.ts_utc + timedelta(hours=2),
        "predecessor_id": r.predecessor_id and r.predecessor_id + "h",
        "cache_write_1h_tokens": r.cache_write_tokens, "cache_write_5m_tokens": 0,
        "verdict_detail": {**r.verdict_detail, "ttl_s": 3600}}) for r in five]
    # under 1 hour the third call read what it shares: 10,500 read, 500 written
    hour[2] = hour[2].model_copy(update={
        "cache_read_tokens": 10_500, "cache_write_tokens": 500, "cache_write_1h_tokens": 500,
        "uncached_tokens": 0, "verdict": "hit", "predicted_cache_read_tokens": 10_500})
    result = what_if([*five, *hour])
    assert result.as_used.policy.name == "as used (per chain)"
    assert result.as_used.usd == pytest.approx(result.recorded_usd)
    assert result.recorded_usd == pytest.approx(
        10_000 * W5 + (10_000 * READ + 500 * W5) + 11_000 * W5
        + 10_000 * W1 + (10_000 * READ + 500 * W1) + (10_500 * READ + 500 * W1))


def test_calls_are_replayed_in_time_order_whatever_the_order_given() -> None:
    records = _three_calls()
    assert what_if(records[::-1]).to_json() == what_if(records).to_json()


def test_impossible_usage_is_not_replayed_and_a_missing_output_is_a_lower_bound() -> None:
    bad = [_record(7, 5, 10_000, -20_000, 0, "cold", session="neg"),
           _record(8, 6, 10_000, 0, 0, "cold", session="out", output=-1_000_000)]
    missing = _record(9, 7, 2_000, 0, 2_000, "cold", session="none").model_copy(
        update={"output_tokens": None})
    result = what_if([*_three_calls(), *bad, missing])
    assert result.calls == 4
    assert all(o.hit_rate is None or 0 <= o.hit_rate <= 1 for o in result.outcomes)
    assert any(n.startswith("2 calls not replayed: usage that does not add up") for n in
               result.notes)
    assert any("1 call without an output count" in n for n in result.notes)


def test_since_must_be_a_timezone_aware_datetime() -> None:
    for since in (datetime(2026, 1, 1), "2026-01-01"):
        with pytest.raises(InputError) as caught:
            what_if(_three_calls(), since=since)  # type: ignore[arg-type]
        assert caught.value.code == "ledger-since-naive"
    assert what_if(_three_calls(), since=T0 + timedelta(seconds=30)).calls == 2


def test_only_explicit_candidates_are_bounded_by_themselves() -> None:
    records = [_record(1, 0, 8_000, 0, 0, "cold", provider="gemini", model="gemini-2.5-pro",
                       detail={"head_tokens": 5000}).model_copy(update={"wire_format": "gemini"})]
    result = what_if(records, policies=[CachePolicy(explicit_cache=True)])
    assert result.hindsight_usd == result.cheapest.usd


def test_report_text_says_never_and_zero_plainly() -> None:
    """A TTL that cannot pay reads "never pays", not "inf%"; a zero saving has no sign; one
    call is "1 call"; the JSON holds the recommended policy as a --cache-policy file."""
    from stableprompt._accounting._what_if import BreakEven
    from stableprompt._report._what_if_text import what_if_lines

    assert BreakEven("1h", "5m", math.inf, 0.25).text().startswith("1h never pays here")
    single = what_if([_record(1, 0, 10_000, 0, 10_000, "cold",
                              detail={"head_tokens": 4000})], policies=TTL_ONLY)
    lines = what_if_lines(single)
    assert lines[0].startswith("anthropic: 1 call replayed;")
    assert "saving $0.0000 (0.0% of what was paid)" in lines[2]
    assert "no candidate replays below it" in lines[3]
    recommended = single.to_json()["recommended"]
    assert CachePolicy.model_validate(recommended).for_kind("main") == TtlChoice()


def test_a_ledger_of_pings_only_has_nothing_to_replay() -> None:
    pings = [r.model_copy(update={"verdict_detail": {**r.verdict_detail, "keepalive": True}})
             for r in _three_calls()]
    with pytest.raises(PolicyError, match="keep-alive pings"):
        what_if(pings)


def test_a_keep_alive_slower_than_the_default_ttl_is_refused() -> None:
    """A policy naming no TTL keeps the provider's default (Anthropic 5 minutes): a ping
    every 10 minutes could never keep it."""
    slow = CachePolicy(keep_alive=KeepAlive(interval_s=600, max_pings=3))
    with pytest.raises(PolicyError, match=r"not shorter than the main TTL it keeps \(300 s"):
        what_if(_three_calls(), policies=[slow])
