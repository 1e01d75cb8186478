"""Compaction priced at the call (issue 29, item 4): ``Conversation.compaction_advice``, the
warning of ``compact``, and ``summarization_request(cache_write=False)``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from stableprompt import Conversation, InputError, PromptBuilder, Tool
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
