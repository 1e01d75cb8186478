"""Compaction priced at the call (issue 29, item 4): ``Conversation.compaction_advice``, the
warning of ``compact``, and ``summarization_request(cache_write=False)``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from typing import Any

import anthropic
import pytest

from stableprompt import (
    CompactionAdvice,
    CompactionCostWarning,
    Conversation,
    InputError,
    PromptBuilder,
    Tool,
)
from stableprompt.emulator import AssistantTurn, Emulator, FakeClock, ScriptedResponder

MODEL = "claude-sonnet-4-6"  # minimum cacheable prefix: 1,024 tokens (policy table)
WEATHER = Tool("get_weather", "Weather for a city.",
               {"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"]})
RULES = " ".join(f"Rule {i}: answer in one short sentence." for i in range(150))


def _marks(body: dict[str, Any]) -> list[tuple[int, int]]:
    """``(message, block)`` of every ``cache_control`` in an Anthropic body's messages."""
    return [(mi, bi) for mi, message in enumerate(body["messages"])
            for bi, block in enumerate(message["content"]) if "cache_control" in block]


def _small() -> Conversation:
    """Two user turns and an answer, the first turn rendered (sent)."""
    head = PromptBuilder(system="Be brief.", tools=[WEATHER], tokenizer=None).freeze()
    conv = head.conversation()
    conv.user("Weather in Paris?")
    conv.render()
    conv.assistant("It is 18C.")
    conv.user("And Rome?")
    return conv


# -- summarization_request(cache_write=False) ------------------------------------------------


def test_summary_without_write_keeps_the_breakpoint_on_the_written_history() -> None:
    """cache_write=False puts the end-of-history breakpoint where the last rendered request
    had it (message 0, already written) and none on the later messages or the summary tail;
    the head's breakpoint stays. The default marks the last message, as every turn does."""
    conv = _small()
    reading = conv.summarization_request(cache_write=False).to_anthropic(
        model=MODEL, max_tokens=64).body
    writing = conv.summarization_request().to_anthropic(model=MODEL, max_tokens=64).body
    assert _marks(reading) == [(0, 0)]
    assert _marks(writing) == [(2, 0)]
    assert reading["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "<summarize>" in reading["messages"][-1]["content"][-1]["text"]
    # the same bytes but for the moved marker
    for body in (reading, writing):
        for message in body["messages"]:
            for block in message["content"]:
                block.pop("cache_control", None)
    assert reading == writing


def test_summary_without_write_after_the_latest_render() -> None:
    """Right after a render (nothing added since), that render's breakpoint is the last
    message: cache_write=False marks it too (it is written)."""
    conv = _small()
    conv.render()
    body = conv.summarization_request(cache_write=False).to_anthropic(
        model=MODEL, max_tokens=64).body
    assert _marks(body) == [(2, 0)]


def test_summary_without_write_and_no_render_places_no_history_breakpoint() -> None:
    """A conversation never rendered (or just compacted) has nothing written: no SDK
    breakpoint in the history, the head's only."""
    head = PromptBuilder(system="Be brief.", tokenizer=None).freeze()
    conv = head.conversation()
    conv.user("a")
    conv.assistant("b")
    conv.user("c")
    body = conv.summarization_request(cache_write=False).to_anthropic(
        model=MODEL, max_tokens=64).body
    assert _marks(body) == []
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}


def test_summary_without_write_beyond_the_lookback_has_one_history_breakpoint() -> None:
    """More than 20 blocks after the written breakpoint: the read still goes through that
    breakpoint (it is the marked one), and no second one is added at the end."""
    conv = _small()
    for i in range(12):
        conv.assistant(f"step {i}")
        conv.user(f"go on {i}")
    body = conv.summarization_request(cache_write=False).to_anthropic(
        model=MODEL, max_tokens=64).body
    assert _marks(body) == [(0, 0)]


def test_summary_without_write_on_bedrock_converse() -> None:
    """Bedrock Converse places its history cachePoint by the same rule."""
    conv = _small()
    body = conv.summarization_request(cache_write=False).to_bedrock_converse(
        model_id="anthropic.claude-sonnet-4-5-20250929-v1:0").body
    points = [(mi, bi) for mi, message in enumerate(body["messages"])
              for bi, block in enumerate(message["content"]) if "cachePoint" in block]
    assert points == [(0, 1)]


def test_summary_cache_write_must_be_a_bool() -> None:
    """A non-bool cache_write is an InputError (code render-param)."""
    with pytest.raises(InputError) as info:
        _small().summarization_request(cache_write="no")  # type: ignore[arg-type]
    assert info.value.code == "render-param"


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    model = ScriptedResponder([AssistantTurn("Paris: 18C and sunny."),
                               AssistantTurn("Rome: 18C and sunny too."),
                               AssistantTurn("The user asked about Paris and Rome."),
                               AssistantTurn("The user asked about Paris and Rome.")])
    with Emulator(responder=model, clock=FakeClock()) as emu:
        yield emu


def test_summary_without_write_reads_and_writes_nothing_on_the_emulator(
        emulator: Emulator) -> None:
    """After a warm history, the summarization call with cache_write=False reports
    cache_creation_input_tokens == 0 and reads the whole written prefix; with the default
    it writes the last answer and question."""
    head = PromptBuilder(system=RULES, tools=[WEATHER]).freeze()
    conv = head.conversation()
    with anthropic.Anthropic(base_url=emulator.base_url, api_key="test-key",
                             max_retries=0) as client:
        def send(prompt: Any) -> Any:
            request = prompt.to_anthropic(model=MODEL, max_tokens=64)
            return client.messages.create(**request.body)

        for question in ("Weather in Paris? " * 20, "And in Rome? " * 20):
            conv.user(question)
            conv.add_response(send(conv.render()))
        usage = [send(conv.fork().summarization_request(cache_write=write)).usage
                 for write in (False, True)]
    reading, writing = usage
    assert reading.cache_creation_input_tokens == 0
    assert reading.cache_read_input_tokens > 1024
    assert writing.cache_read_input_tokens == reading.cache_read_input_tokens
    assert writing.cache_creation_input_tokens > 0
    # what the default writes, cache_write=False sends as uncached input instead
    assert reading.input_tokens == writing.input_tokens + writing.cache_creation_input_tokens


# -- compaction_advice ------------------------------------------------------------------------

DAY = date(2026, 3, 1)
#: Claude Sonnet 4.6 on DAY (genai-prices): USD per token of input, and the multiples of it.
INPUT_USD, R, W, OUT = 3e-6, 0.1, 1.25, 5.0


class Clock:
    """A hand-driven clock (seconds)."""

    def __init__(self) -> None:
        self.t = 1_000.0

    def __call__(self) -> float:
        return self.t


def answer(text: str, model: str = MODEL) -> dict[str, Any]:
    """An Anthropic Messages response of one text block."""
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}


def session(turns: int, *, gap_s: float = 30.0, model: str = MODEL, words: int = 40,
            tokenizer: str | None = "cl100k_base") -> tuple[Conversation, Clock, list[int]]:
    """``turns`` user questions, each rendered (a turn, ``gap_s`` apart) and answered; returns
    the conversation, its clock and the head + history tokens of each rendered request."""
    clock = Clock()
    head = PromptBuilder(system=RULES, tools=[WEATHER], tokenizer=tokenizer).freeze()
    conv = head.conversation(clock=clock)
    sizes: list[int] = []
    for i in range(turns):
        conv.user(f"Question {i}: " + "tell me more about the weather there. " * words)
        sizes.append(conv.render().tokens or 0)
        clock.t += gap_s
        conv.add_response(answer(f"Answer {i}: " + "it is sunny and mild all day. " * words,
                                 model))
    return conv, clock, sizes


def message_tokens(conv: Conversation) -> list[int]:
    """Tokens of each history message, read off a render's segments (the summarization
    request: not a turn)."""
    return [s.tokens or 0 for s in conv.summarization_request().segments
            if s.kind == "message"]


def test_advice_numbers_by_hand() -> None:
    """Every number of the advice, against a hand computation from the segment token counts
    and Claude Sonnet 4.6's prices ($3 input, 0.1x read, 1.25x 5-minute write, 5x output)."""
    conv, _, sizes = session(3)
    msgs, head = message_tokens(conv), conv.head.tokens or 0
    h = head + sum(msgs)          # 6 messages: 3 questions, 3 answers
    c = head + sum(msgs[:5])      # the last request (turn 3) wrote the history before answer 3
    p, x, s = head, sum(msgs[:4]), 100
    n = round((sizes[2] - sizes[0]) / 2)
    advice = conv.compaction_advice(summary_tokens=s, end=4, remaining_turns=2, day=DAY)
    assert (advice.provider, advice.model, advice.ttl, advice.ttl_s) == (
        "anthropic", MODEL, "5m", 300)
    assert (advice.history_tokens, advice.cached_tokens, advice.surviving_tokens) == (h, c, p)
    assert (advice.invalidated_tokens, advice.span_tokens) == (h - p, x)
    assert advice.saved_tokens_per_turn == x - s
    assert advice.destroyed_tokens == c - p
    assert (advice.new_tokens_per_turn, advice.new_tokens_basis) == (n, "observed")
    assert (advice.remaining_turns, advice.remaining_turns_basis) == (2, "given")
    assert advice.turns_observed == 3 and advice.turn_interval_s == 30.0
    assert advice.turns_per_hour == 120.0 and not advice.expires_between_turns
    assert [advice.read_multiplier, advice.write_multiplier, advice.output_multiplier] == (
        pytest.approx([R, W, OUT]))
    compacted = h - x + s
    keep = (R * c + W * (h - c) + W * n) + (R * (h + n) + W * n)
    # answer 3 (h - c) is not written yet and does not survive: sent at 1x, not written
    compact = (R * c + 1.0 * (h - c) + OUT * s) + (R * p + W * (compacted - p + n)) + (
        R * (compacted + n) + W * n)
    assert not advice.summary_cache_write
    assert advice.plan.cost_keep == pytest.approx(keep)
    assert advice.plan.cost_compact == pytest.approx(compact)
    assert advice.pays_off is (compact < keep)
    assert advice.cost_keep_usd == pytest.approx(keep * INPUT_USD)
    assert advice.cost_compact_usd == pytest.approx(compact * INPUT_USD)
    assert advice.savings_usd == pytest.approx((keep - compact) * INPUT_USD)
    assert advice.saved_usd_per_turn == pytest.approx((x - s) * R * INPUT_USD)
    assert advice.input_usd_per_token == pytest.approx(INPUT_USD)
    assert advice.prices_source is not None and "2026-03-01" in advice.prices_source


def test_long_session_pays_and_breaks_even_by_hand() -> None:
    """A long history replaced by a short summary, many turns ahead: it pays, and the
    break-even turn is the first whose cumulative cost crosses (hand loop)."""
    conv, _, _ = session(6, words=200)
    conv.render()  # nothing added since: the whole history is written (C = H)
    msgs, head = message_tokens(conv), conv.head.tokens or 0
    h, x, s, n = head + sum(msgs), sum(msgs), 50, 400
    advice = conv.compaction_advice(summary_tokens=s, remaining_turns=10,
                                    new_tokens_per_turn=n, day=DAY)
    assert advice.cached_tokens == h
    assert advice.summary_cache_write  # nothing uncached: not writing saves nothing
    keep, compact, even = 0.0, R * h + OUT * s, None
    for t in range(1, 11):
        keep += R * (h + (t - 1) * n) + W * n
        compact += (R * head + W * (h - x + s - head + n)) if t == 1 else (
            R * (h - x + s + (t - 1) * n) + W * n)
        if even is None and compact <= keep:
            even = t
    assert advice.pays_off and even is not None
    assert advice.break_even_turn == even
    assert advice.plan.cost_compact == pytest.approx(compact)
    assert "pays within the expected 10 later turns (given)" in str(advice)


def test_summary_write_pays_when_the_surviving_prefix_is_not_written() -> None:
    """Compacting only a message added after the last answer: that answer survives but is
    not written yet, so the summarization call should write it (cache_write=True is the
    cheaper: (w - r) * its tokens on the next turn exceed (w - 1) * the unwritten rest)."""
    conv, _, _ = session(3)
    conv.user("And tomorrow?")
    advice = conv.compaction_advice(summary_tokens=10, start=6, remaining_turns=3, day=DAY)
    assert advice.surviving_tokens > advice.cached_tokens
    assert advice.summary_cache_write
    earlier = conv.compaction_advice(summary_tokens=10, start=5, remaining_turns=3, day=DAY)
    assert earlier.surviving_tokens == earlier.cached_tokens
    assert not earlier.summary_cache_write


def test_estimates_are_named() -> None:
    """Without remaining_turns / new_tokens_per_turn the advice assumes as many more turns as
    observed and the mean observed growth, and says so; a resumed conversation (no turn
    observed) uses its assistant turns and its history's tokens per assistant turn."""
    conv, _, sizes = session(4)
    advice = conv.compaction_advice(summary_tokens=50, day=DAY)
    assert (advice.remaining_turns, advice.remaining_turns_basis) == (4, "observed")
    assert advice.new_tokens_per_turn == round((sizes[3] - sizes[0]) / 3)
    assert "remaining turns: 4, as many more as observed so far" in advice.notes
    resumed = conv.head.resume(conv.export())
    again = resumed.compaction_advice(summary_tokens=50, provider="anthropic", model=MODEL,
                                      day=DAY)
    assert (again.remaining_turns, again.remaining_turns_basis) == (4, "history")
    assert (again.new_tokens_per_turn, again.new_tokens_basis) == (
        round(sum(message_tokens(resumed)) / 4), "history")
    assert again.turns_observed == 0 and again.turn_interval_s is None
    assert "no turn observed: the cache is assumed warm" in again.notes


def test_turns_are_distinct_rendered_requests() -> None:
    """A turn is a render of a new history: rendering it again, a summarization request and
    adding messages are not; a fork keeps the turns seen so far."""
    conv, clock, _ = session(2)
    conv.summarization_request()
    conv.user("one more")
    conv.render()
    conv.render()
    fork = conv.fork()
    assert conv.compaction_advice(summary_tokens=1, day=DAY).turns_observed == 3
    assert fork.compaction_advice(summary_tokens=1, day=DAY).turns_observed == 3
    assert clock.t == 1_060.0


def test_an_expired_cache_destroys_nothing() -> None:
    """The last turn older than the TTL: nothing is cached now; turns further apart than the
    TTL: later turns write their prefix again, so each saved token saves a write."""
    conv, clock, _ = session(3, gap_s=600.0)  # 10 minutes apart, 5-minute TTL
    advice = conv.compaction_advice(summary_tokens=50, end=4, remaining_turns=2, day=DAY)
    assert advice.cached_tokens == 0 and advice.expires_between_turns
    assert advice.destroyed_tokens == 0 and advice.invalidated_tokens > 0
    assert advice.saved_usd_per_turn == pytest.approx(
        advice.saved_tokens_per_turn * W * INPUT_USD)
    assert any("past the 300 s TTL: nothing is cached now" in n for n in advice.notes)
    hour = conv.compaction_advice(summary_tokens=50, end=4, ttl="1h", day=DAY)
    assert hour.ttl_s == 3600 and hour.write_multiplier == pytest.approx(2.0)
    assert hour.cached_tokens > 0 and not hour.expires_between_turns
    clock.t += 4_000  # now over an hour after the last turn
    assert conv.compaction_advice(summary_tokens=50, ttl="1h", day=DAY).cached_tokens == 0


def test_unknown_prices_give_tokens_and_no_usd() -> None:
    """A model genai-prices does not price: the token-equivalent plan is there, every USD
    field is None (never $0) and the notes and the text say USD is unknown."""
    conv, _, _ = session(2, model="claude-unreleased-9")
    advice = conv.compaction_advice(summary_tokens=20, day=DAY)
    assert advice.model == "claude-unreleased-9"
    assert advice.plan.cost_keep > 0 and advice.input_usd_per_token is None
    assert (advice.cost_keep_usd, advice.cost_compact_usd, advice.savings_usd,
            advice.saved_usd_per_turn, advice.prices_source) == (None, None, None, None, None)
    assert (advice.read_multiplier, advice.write_multiplier, advice.output_multiplier) == (
        0.1, 1.25, 5.0)  # Anthropic's default cache rules; plan_compaction's output default
    assert any(n.startswith("USD unknown") for n in advice.notes)
    assert any("not in the policy table" in n for n in advice.notes)
    assert "USD unknown" in str(advice)


@pytest.mark.parametrize(("kwargs", "code"), [
    ({"summary_tokens": -1}, "compaction-input"),
    ({"summary_tokens": True}, "compaction-input"),
    ({"summary_tokens": 1, "remaining_turns": 2.5}, "compaction-input"),
    ({"summary_tokens": 1, "new_tokens_per_turn": -3}, "compaction-input"),
    ({"summary_tokens": 1, "ttl": "12h"}, "compaction-input"),
    ({"summary_tokens": 1, "now": float("nan")}, "compaction-input"),
    ({"summary_tokens": 1, "day": "2026-03-01"}, "compaction-input"),
    ({"summary_tokens": 1, "model": ""}, "compaction-input"),
    ({"summary_tokens": 1, "provider": "nobody"}, "policy-unknown-provider"),
    ({"summary_tokens": 1, "start": 3, "end": 2}, "history-compact-span"),
    ({"summary_tokens": 1, "end": 9}, "history-compact-span"),
])
def test_bad_input_is_a_typed_error(kwargs: dict[str, Any], code: str) -> None:
    """Bad arguments raise an InputError subclass with a code (PolicyError for an unknown
    provider, HistoryError for a bad span)."""
    conv, _, _ = session(2)
    with pytest.raises(InputError) as info:
        conv.compaction_advice(**kwargs)
    assert info.value.code == code


def test_unknown_model_and_missing_tokenizer_are_input_errors() -> None:
    """No provider or model given or learned: compaction-model; no tokenizer:
    compaction-tokens."""
    head = PromptBuilder(system="Be brief.").freeze()
    conv = head.conversation()
    conv.user("a")
    conv.assistant("b")
    with pytest.raises(InputError) as info:
        conv.compaction_advice(summary_tokens=1)
    assert info.value.code == "compaction-model"
    bare, _, _ = session(1, tokenizer=None)
    with pytest.raises(InputError) as info:
        bare.compaction_advice(summary_tokens=1)
    assert info.value.code == "compaction-tokens"


# -- compact() consults the advice -----------------------------------------------------------


def test_compact_warns_with_the_numbers_and_still_compacts() -> None:
    """A compaction that does not pay warns (CompactionCostWarning, code compaction-cost)
    with its numbers, and the history is compacted all the same."""
    conv, _, _ = session(2)
    with pytest.warns(CompactionCostWarning) as warned:
        event = conv.compact("They asked about the weather twice.", end=2)
    warning = warned[0].message
    assert isinstance(warning, CompactionCostWarning) and warning.code == "compaction-cost"
    advice = warning.advice
    assert isinstance(advice, CompactionAdvice) and not advice.pays_off
    assert advice.summary_tokens == event.summary_tokens
    assert advice.invalidated_tokens == event.invalidated_tokens
    assert advice.span_tokens == event.removed_tokens
    text = str(warning)
    assert text.startswith("compacting messages [0, 2) does not pay within the expected 2 "
                           "later turns (as many more as observed so far), one every 30 s")
    assert (f"invalidates {advice.invalidated_tokens:,} tokens of prefix "
            f"({advice.destroyed_tokens:,} of them cached now)") in text
    assert advice.destroyed_tokens == advice.cached_tokens - advice.surviving_tokens > 0
    assert f"${advice.cost_compact_usd:,.4f} with compaction" in text
    assert len(conv.messages) == 3 and conv.messages[0].text == (
        "They asked about the weather twice.")


def test_compact_that_pays_does_not_warn() -> None:
    """A long history replaced by a short summary after many turns: no warning."""
    conv, _, _ = session(12, words=200)
    conv.compact("Sunny and mild everywhere they asked.")  # filterwarnings = error
    assert len(conv.messages) == 1


def test_compact_without_knowledge_or_with_advise_false_is_silent() -> None:
    """No warning when nothing is known (no tokenizer; no model named; a model without cache
    rules of its own learned from a response) or with advise=False."""
    bare, _, _ = session(2, tokenizer=None)
    bare.compact("s", end=2)
    head = PromptBuilder(system=RULES).freeze()
    unnamed = head.conversation()
    unnamed.user("a " * 300)
    unnamed.render()
    unnamed.assistant("b " * 300)
    unnamed.compact("s")
    local, _, _ = session(2, model="my-local-model")
    local.compact("s", end=2)
    quiet, _, _ = session(2)
    quiet.compact("s", end=2, advise=False)
    with pytest.raises(InputError) as info:
        quiet.compact("s", advise="no")  # type: ignore[arg-type]
    assert info.value.code == "compaction-input"


def test_compact_with_a_passed_model_warns() -> None:
    """A provider and model passed to compact are priced even when no response named them;
    a bad one raises before anything is compacted."""
    head = PromptBuilder(system=RULES).freeze()
    conv = head.conversation()
    conv.user("a " * 300)
    conv.render()
    conv.assistant("b " * 300)
    with pytest.raises(InputError):
        conv.compact("s", provider="nobody", model="m")
    assert len(conv.messages) == 2
    with pytest.warns(CompactionCostWarning):
        conv.compact("s", provider="anthropic", model=MODEL)


def test_compaction_cost_warning_is_public() -> None:
    """CompactionCostWarning is a UserWarning of the public tree; CompactionAdvice is
    exported."""
    import stableprompt

    assert issubclass(stableprompt.CompactionCostWarning, UserWarning)
    assert stableprompt.CompactionAdvice.__module__ == "stableprompt"
